//! The Resource Directory a data directory keeps: opened here for both programs that serve one (`corral
//! gateway --rd` beside the Entity Manager, and [`Directory::start`] on a socket of its own: `corral rd`).
//!
//! Owns: the registrations' database (SQLite in the data directory, or PostgreSQL), the SQLite file's lock, and the directory's own socket with a clean stop. The
//! directory itself is corral-rd's [`RdService`]. Must never: parse a command line or print.

use crate::{lock::DataLock, Error, StoreLocation};
use corral_rd::{Limits, Policy, RdService, Store};
use corral_store::{RdPgStore, RdSqliteStore};
use corral_tokio::workers::{self, Sharing, WorkerConfig};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The directory whose registrations `store` keeps (`DIR/rd.db`, or a PostgreSQL database) for `corral rd`
/// and `corral gateway --rd`, the store its writes go to (its node's effect runner does them:
/// `corral_store::Stores`), and how messages name the store. Rows that cannot be restored are skipped
/// with a WARN. Blocking: call it off the async runtime ([`crate::off_runtime`]).
pub fn open_directory(
    data: &Path,
    store: &StoreLocation,
    limits: Limits,
    policy: Policy,
) -> Result<(RdService, Box<dyn Store>, String), Error> {
    let at = store.describe(data, "rd.db");
    let (mut store, failed): (Box<dyn Store>, fn(String) -> Error) = match store {
        StoreLocation::Sqlite => {
            let db = data.join("rd.db");
            let s = RdSqliteStore::open(&db).map_err(|e| Error::Start(format!("cannot open {at}: {e}")))?;
            (Box::new(s), Error::Start)
        }
        StoreLocation::Postgres(t) => {
            let s = RdPgStore::open(t).map_err(|e| Error::Store(format!("cannot use the directory's store: {e}")))?;
            (Box::new(s), Error::Store)
        }
    };
    let (rows, unreadable) = store.load().map_err(|e| failed(format!("cannot read {at}: {e}")))?;
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
    Ok((service.with_policy(policy), store, at))
}

/// What a Resource Directory on its own socket runs with (`corral rd`).
pub struct DirectoryConfig {
    /// Address and port to listen on (port 0: any free port).
    pub bind: SocketAddr,
    /// The data directory: `rd.db` and the lock; created if missing (unused with a PostgreSQL store).
    pub data: PathBuf,
    /// Where the registrations are kept [SQLite in `data`].
    pub store: StoreLocation,
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
            store: StoreLocation::Sqlite,
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
    store: String,
    restored: usize,
    workers: workers::Workers,
    _lock: Option<DataLock>,
}

impl Directory {
    /// Opens the data directory (one program per directory) and its database, binds and starts serving, on
    /// the current tokio runtime.
    pub fn start(config: DirectoryConfig) -> Result<Directory, Error> {
        let data = config.data.clone();
        let lock = config.store.lock(&data)?;
        let (limits, policy, location) = (config.limits, config.policy, config.store.clone());
        let (service, runner, store) = crate::off_runtime(move || {
            let (service, store, at) = open_directory(&data, &location, limits, policy)?;
            let runner = corral_store::Stores { rd: Some(store), ..Default::default() }
                .spawn()
                .map_err(|e| Error::Start(format!("cannot start the database's thread: {e}")))?;
            Ok::<_, Error>((service, runner, at))
        })??;
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
        Ok(Directory { local, store, restored, workers, _lock: lock })
    }

    /// The address the directory listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Where the registrations are kept: the SQLite file, or the PostgreSQL URL without its password.
    pub fn store(&self) -> &str {
        &self.store
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
