//! The Resource Directory a data directory keeps: opened here for both programs that serve one (`corral
//! gateway --rd` beside the Entity Manager, and [`Directory::start`] on a socket of its own: `corral rd`).
//!
//! Owns: the registrations' database, its lock, and the directory's own socket with a clean stop. The
//! directory itself is corral-rd's [`RdService`]. Must never: parse a command line or print.

use crate::{lock::DataLock, Error};
use corral_rd::{Limits, Policy, RdService, Store};
use corral_store::RdSqliteStore;
use corral_tokio::workers::{self, Sharing, WorkerConfig};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The directory whose registrations `DIR/rd.db` keeps (`corral rd`, `corral gateway --rd`), the store
/// its writes go to (its node's effect runner does them: `corral_store::Stores`), and the database's path.
/// Rows that cannot be restored are skipped with a WARN.
pub fn open_directory(
    data: &Path,
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

/// What a Resource Directory on its own socket runs with (`corral rd`).
pub struct DirectoryConfig {
    /// Address and port to listen on (port 0: any free port).
    pub bind: SocketAddr,
    /// The data directory: `rd.db` and the lock; created if missing.
    pub data: PathBuf,
    pub limits: Limits,
    pub policy: Policy,
    /// The networks whose sources count as verified from their first datagram.
    pub verified_nets: Vec<corral_proto::Prefix>,
    /// coaps:// on the same port.
    pub dtls: Option<corral_tokio::DtlsMuxConfig>,
}

impl DirectoryConfig {
    /// A directory on `bind` keeping its registrations in `data`, with corral-rd's default limits and policy.
    pub fn new(bind: SocketAddr, data: impl Into<PathBuf>) -> DirectoryConfig {
        DirectoryConfig {
            bind,
            data: data.into(),
            limits: Limits::default(),
            policy: Policy::default(),
            verified_nets: Vec::new(),
            dtls: None,
        }
    }
}

/// A running directory. [`Directory::stop`] ends it as Ctrl-C does.
pub struct Directory {
    local: SocketAddr,
    database: PathBuf,
    restored: usize,
    workers: workers::Workers,
    _lock: DataLock,
}

impl Directory {
    /// Opens the data directory (one program per directory) and its database, binds and starts serving, on
    /// the current tokio runtime.
    pub fn start(config: DirectoryConfig) -> Result<Directory, Error> {
        let data = &config.data;
        std::fs::create_dir_all(data)
            .map_err(|e| Error::Start(format!("cannot create the data directory {}: {e}", data.display())))?;
        let lock = DataLock::take(data)?;
        let (service, store, database) = open_directory(data, config.limits, config.policy)?;
        let runner = corral_store::Stores { em: None, rd: Some(Box::new(store)) }
            .spawn()
            .map_err(|e| Error::Start(format!("cannot start the database's thread: {e}")))?;
        let restored = service.directory().len();
        let endpoint = corral_proto::EndpointConfig { verified_nets: config.verified_nets, ..Default::default() };
        let workers = WorkerConfig {
            driver: workers::Driver::Tokio,
            count: 1,
            addr: config.bind,
            socket: corral_tokio::socket::SocketOptions::default(),
            endpoint,
            sharing: Sharing::ReusePort,
            tcp: None,
            name: "corral-rd".into(),
        };
        let mut bound = workers::Bound::bind(workers)
            .map_err(|e| Error::Start(format!("cannot listen on {}: {}", e.addr, e.error)))?;
        if let Some(mux) = config.dtls {
            bound.set_dtls_mux(mux).map_err(|e| Error::Start(format!("cannot serve coaps://: {e}")))?;
        }
        let local = bound.local_addr();
        let setup: workers::Setup = Box::new(move |node| {
            node.mount("", service);
            node.set_effect_runner(Box::new(runner));
        });
        let workers = bound.start(vec![setup]).map_err(|e| Error::Start(format!("cannot start the directory: {e}")))?;
        Ok(Directory { local, database, restored, workers, _lock: lock })
    }

    /// The address the directory listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The registrations' database.
    pub fn database(&self) -> &Path {
        &self.database
    }

    /// How many registrations were restored from the database at start.
    pub fn restored(&self) -> usize {
        self.restored
    }

    /// Stops serving.
    pub async fn stop(self) {
        self.workers.stop().await
    }
}
