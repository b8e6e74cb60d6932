//! # corral-gateway
//!
//! The programs corral runs on real sockets, as libraries, so that tests, the console and the lab start
//! the very programs the `corral` binary starts; the binary only turns its arguments into their configs,
//! starts them and prints.
//!
//! - [`gateway`]: the Entity Manager gateway — [`GatewayConfig`] and [`Gateway::start`]: its data
//!   directory and lock, its database and store thread, its workers, the directory beside it (`--rd`),
//!   OSCORE and DTLS, the testbed devices; a handle that reports what it bound and stops cleanly.
//! - [`directory`]: a Resource Directory on a socket of its own — [`DirectoryConfig`] and
//!   [`Directory::start`] — and the directory database the gateway opens for `rd`.
//! - [`StoreLocation`]: where the gateway and the directory keep their state — SQLite files in their data
//!   directory (the default), or a PostgreSQL database several of them share.
//! - [`proxy`]: the multiparty forward proxy — [`ProxyConfig`] and [`Proxy::start`].
//! - [`serve`]: the demo and ETSI plugtest resources on N workers, over UDP, TCP, TLS and DTLS —
//!   [`ServeConfig`] and [`Serve::start`].
//! - [`fleet`]: a fleet of corral-group's virtual devices on consecutive addresses, with their request
//!   log (`corral device`, the gateway's testbed).
//!
//! This crate sits above corral-tokio (the drivers) and the services (corral-group, corral-rd, corral-store,
//! corral-services, corral-stream)
//! and never implements protocol behaviour, nor parses command lines: its configs are typed.

pub mod directory;
pub mod fleet;
pub mod gateway;
pub mod lock;
pub mod proxy;
pub mod serve;

pub use corral_store::PgTarget;
pub use directory::{Directory, DirectoryConfig};
pub use gateway::{Gateway, GatewayConfig};
pub use proxy::{Proxy, ProxyConfig};
pub use serve::{Serve, ServeConfig};

use std::path::{Path, PathBuf};

/// Why a program could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Settings that cannot go together (the binary's usage error): the message names them.
    Config(String),
    /// Something the program needed could not be opened, bound or started: the message names it.
    Start(String),
    /// The shared store (PostgreSQL) cannot be reached or holds a schema newer than this corral: the
    /// message names it as a URL without the password, and why.
    Store(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Config(m) | Error::Start(m) | Error::Store(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

/// Where a program keeps its durable state (entities, groups, journal, counters; registrations).
#[derive(Debug, Clone, Default)]
pub enum StoreLocation {
    /// SQLite files in the program's data directory (`DIR/em.db`, `DIR/rd.db`), which one program at a
    /// time holds (its lock).
    #[default]
    Sqlite,
    /// A PostgreSQL database that several gateways and directories share (issue 45); no data directory
    /// is used.
    Postgres(Box<corral_store::PgTarget>),
}

impl StoreLocation {
    /// The data directory `data` made and locked for one program, when the state is kept there (SQLite);
    /// nothing to lock with PostgreSQL.
    pub fn lock(&self, data: &Path) -> Result<Option<lock::DataLock>, Error> {
        match self {
            StoreLocation::Sqlite => {
                std::fs::create_dir_all(data)
                    .map_err(|e| Error::Start(format!("cannot create the data directory {}: {e}", data.display())))?;
                lock::DataLock::take(data).map(Some)
            }
            // Several programs share the database, whose transactions keep it true.
            StoreLocation::Postgres(_) => Ok(None),
        }
    }

    /// How messages name the store of data directory `data`: the SQLite file, or the server's URL without
    /// the password.
    pub fn describe(&self, data: &Path, file: &str) -> String {
        match self {
            StoreLocation::Sqlite => data.join(file).display().to_string(),
            StoreLocation::Postgres(t) => t.shown().to_string(),
        }
    }
}

/// Runs `f` on a thread of its own and waits for it: the PostgreSQL driver blocks on a runtime of its own,
/// which cannot run (nor be dropped) inside the caller's tokio runtime, where the programs start.
pub(crate) fn off_runtime<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, Error> {
    std::thread::Builder::new()
        .name("corral-store-open".into())
        .spawn(f)
        .map_err(|e| Error::Start(format!("cannot start a thread to open the store: {e}")))?
        .join()
        .map_err(|_| Error::Start("opening the store panicked".into()))
}

/// `$XDG_DATA_HOME/corral/LEAF` (or `~/.local/share/corral/LEAF`, or `./corral-data/LEAF`): where a
/// program keeps its database unless told otherwise.
pub fn data_dir_for(leaf: &str) -> PathBuf {
    let base = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|h| PathBuf::from(h).join(".local/share")));
    match base {
        Some(b) => b.join("corral").join(leaf),
        None => PathBuf::from("corral-data").join(leaf),
    }
}
