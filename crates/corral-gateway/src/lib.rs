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

pub use directory::{Directory, DirectoryConfig};
pub use gateway::{Gateway, GatewayConfig};
pub use proxy::{Proxy, ProxyConfig};
pub use serve::{Serve, ServeConfig};

use std::path::PathBuf;

/// Why a program could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Settings that cannot go together (the binary's usage error): the message names them.
    Config(String),
    /// Something the program needed could not be opened, bound or started: the message names it.
    Start(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Config(m) | Error::Start(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

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
