//! The Resource Directory a data directory keeps (`corral rd`, `corral gateway --rd`): opened here, below
//! both commands, so that neither imports the other.

use crate::exit::Failure;
use corral_rd::{Limits, Policy, RdService, Store};
use corral_store::RdSqliteStore;
use std::path::PathBuf;

/// `--rd-policy` of `corral rd` and `corral gateway --rd`: which registrations the directory accepts
/// (RFC 9176 §7).
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RdPolicy {
    /// Anyone may register; a name registered over coaps:// or OSCORE is bound to that identity, any other
    /// to the address that registered it (first come, first remembered).
    #[default]
    FirstCome,
    /// Only clients with an identity (coaps:// or OSCORE) may register, each name bound to it; plain CoAP
    /// may look up.
    Identity,
}

impl From<RdPolicy> for Policy {
    fn from(p: RdPolicy) -> Policy {
        match p {
            RdPolicy::FirstCome => Policy::FirstCome,
            RdPolicy::Identity => Policy::Identity,
        }
    }
}

/// The directory whose registrations `DIR/rd.db` keeps (`corral rd`, `corral gateway --rd`), the store
/// its writes go to (its node's effect runner does them: `corral_store::Stores`), and the database's path.
/// Rows that cannot be restored are skipped with a WARN.
pub(crate) fn open_directory(
    data: &std::path::Path,
    limits: Limits,
    policy: RdPolicy,
) -> Result<(RdService, RdSqliteStore, PathBuf), Failure> {
    let db = data.join("rd.db");
    let mut store =
        RdSqliteStore::open(&db).map_err(|e| Failure::other(format!("cannot open {}: {e}", db.display())))?;
    let (rows, unreadable) = store.load().map_err(|e| Failure::other(format!("cannot read {}: {e}", db.display())))?;
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
    Ok((service.with_policy(policy.into()), store, db))
}
