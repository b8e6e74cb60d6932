//! The gateway's workers: one socket, or a steered group of them sharing a port (`--workers`), each
//! driving one node with the Entity Manager, brought up by corral-tokio's [`corral_tokio::workers`].
//!
//! Owns: what each worker serves (its Entity Manager and guard) and the gateway's words for a failure to
//! bind or start.

use super::guard::Guard;
use super::MountEm;
use crate::Error;
use corral_tokio::corral_proto::EndpointConfig;
use corral_tokio::socket::SocketOptions;
use corral_tokio::workers::{self as w, Driver, Sharing, WorkerConfig};
use std::net::SocketAddr;

/// What worker `i` serves: its Entity Manager and, if any, the layer in front of it (OSCORE, and the rule
/// that remote changes need it: see `guard`).
pub struct Part {
    pub em: corral_group::EntityManager,
    pub guard: Option<Guard>,
    /// How the worker mounts its Entity Manager at `/em` (as it is, or watched: `GatewayConfig::mount_em`).
    pub mount: Option<MountEm>,
    /// With --rd (worker 0 only): the Resource Directory beside the Entity Manager.
    pub rd: Option<corral_rd::RdService>,
    /// Worker 0 (the only one that writes): what does the Entity Manager's store writes.
    pub store: Option<Box<dyn corral_tokio::corral_proto::EffectRunner>>,
}

/// Bound sockets, not yet served.
pub struct Bound(w::Bound);

/// The running workers.
pub struct Running(w::Workers);

/// The driver a gateway runs when not told: the blocking one where there is one.
pub fn default_driver() -> Driver {
    if cfg!(target_os = "linux") {
        Driver::Blocking
    } else {
        Driver::Tokio
    }
}

/// Binds `workers` sockets to `bind` (one, or a steered group; see the gateway's `--workers`), for workers
/// whose endpoints are configured as `endpoint` (each with its own seed and shard).
pub fn bind(
    driver: Driver,
    bind: SocketAddr,
    opts: SocketOptions,
    endpoint: EndpointConfig,
    workers: u8,
    testbed: bool,
) -> Result<Bound, Error> {
    #[cfg(not(target_os = "linux"))]
    if workers > 1 || driver == Driver::Blocking {
        return Err(Error::Config("--workers and --driver blocking need Linux".into()));
    }
    let config = WorkerConfig {
        driver,
        count: u16::from(workers),
        addr: bind,
        // The tokio driver makes them a server's itself.
        socket: if driver == Driver::Blocking { opts.for_server() } else { opts },
        endpoint,
        sharing: Sharing::Shards { manager: Some(0) },
        tcp: None,
        name: "corral-gateway".into(),
    };
    w::Bound::bind(config).map(Bound).map_err(|w::BindError { error: e, .. }| {
        let hint = if e.kind() == std::io::ErrorKind::AddrInUse && testbed && bind.ip().is_unspecified() {
            " (the testbed's devices hold this port on their addresses: bind the gateway to 127.0.0.1)"
        } else {
            ""
        };
        Error::Start(format!("cannot listen on {bind}: {e}{hint}"))
    })
}

impl Bound {
    pub fn local_addr(&self) -> SocketAddr {
        self.0.local_addr()
    }

    /// Makes the socket speak coaps:// beside coap:// (`--dtls`, `--peer-psk-file`).
    pub fn set_dtls_mux(&mut self, mux: corral_tokio::DtlsMuxConfig) -> Result<(), Error> {
        self.0.set_dtls_mux(mux).map_err(|e| Error::Config(format!("--dtls, --peer-psk-file: {e}")))
    }

    /// Serves `parts[i]` on worker `i` (one part per socket).
    pub fn start(self, parts: Vec<Part>) -> Result<Running, Error> {
        let setups = parts
            .into_iter()
            .enumerate()
            .map(|(i, part)| -> w::Setup {
                Box::new(move |node| {
                    match part.mount {
                        Some(mount) => mount(i, node, part.em),
                        None => {
                            node.mount("em", part.em);
                        }
                    };
                    if let Some(store) = part.store {
                        node.set_effect_runner(store);
                    }
                    if let Some(rd) = part.rd {
                        node.mount("", rd); // /rd, /rd-lookup/*; the EM keeps /em (the longer prefix)
                    }
                    if let Some(layer) = part.guard {
                        node.set_layer(Box::new(layer));
                    }
                })
            })
            .collect();
        self.0.start(setups).map(Running).map_err(|e| Error::Start(format!("cannot start the gateway: {e}")))
    }
}

impl Running {
    /// Stops every worker; requests in progress get a second to finish.
    pub async fn stop(self) {
        self.0.stop().await
    }
}
