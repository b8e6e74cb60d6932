//! The Resource Directory a data directory keeps (`corral rd`, `corral gateway --rd`): opened here, below
//! both programs, so that neither imports the other.

use crate::Error;
use corral_rd::{Limits, Policy, RdService, Store};
use corral_store::RdSqliteStore;
use std::path::PathBuf;

/// The directory whose registrations `DIR/rd.db` keeps (`corral rd`, `corral gateway --rd`), the store
/// its writes go to (its node's effect runner does them: `corral_store::Stores`), and the database's path.
/// Rows that cannot be restored are skipped with a WARN.
pub fn open_directory(
    data: &std::path::Path,
    limits: Limits,
    policy: Policy,
) -> Result<(RdService, RdSqliteStore, PathBuf), Error> {
    let db = data.join("rd.db");
    let mut store = RdSqliteStore::open(&db).map_err(|e| Error::Start(format!("cannot open {}: {e}", db.display())))?;
    let (rows, unreadable) = store.load().map_err(|e| Error::Start(format!("cannot read {}: {e}", db.display())))?;
    // The driver's clock starts with its worker, a moment after this: lifetimes are seconds, so the
    // moment does not matter.
    let unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    let (service, skipped) = RdService::durable(limits, rows, unix_ms);
    if skipped + unreadable > 0 {
        tracing::warn!(
            skipped = skipped + unreadable,
            "registrations in the database that could not be restored (unreadable or over a bound)"
        );
    }
    Ok((service.with_policy(policy), store, db))
}
