//! The Resource Directory a data directory keeps (`corral rd`, `corral gateway --rd`): opened here, below
//! both commands, so that neither imports the other.

use crate::exit::Failure;
use corral_rd::{Limits, RdService, SqliteStore};
use std::path::PathBuf;

/// The directory whose registrations `DIR/rd.db` keeps (`corral rd`, `corral gateway --rd`), and the
/// database's path. Rows that cannot be restored are skipped with a WARN.
pub(crate) fn open_directory(data: &std::path::Path, limits: Limits) -> Result<(RdService, PathBuf), Failure> {
    let db = data.join("rd.db");
    let store = SqliteStore::open(&db).map_err(|e| Failure::other(format!("cannot open {}: {e}", db.display())))?;
    // The driver's clock starts with its worker, a moment after this: lifetimes are seconds, so the
    // moment does not matter.
    let unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    let (service, skipped) = RdService::with_store(limits, Box::new(store), unix_ms)
        .map_err(|e| Failure::other(format!("cannot read {}: {e}", db.display())))?;
    if skipped > 0 {
        tracing::warn!(
            skipped,
            "registrations in the database that could not be restored (unreadable or over a bound)"
        );
    }
    Ok((service, db))
}
