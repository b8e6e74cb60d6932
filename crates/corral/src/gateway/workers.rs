//! The gateway's workers: one socket, or a steered group of them sharing a port (`--workers`), each
//! driving one node with the Entity Manager — asleep in its receive call (the blocking driver, the default
//! on Linux) or on a tokio runtime (`--driver tokio`, and elsewhere).
//!
//! Owns: binding, the endpoint configuration of each worker (its seed and its shard of message IDs and
//! tokens), starting and stopping the workers. What each worker serves is the caller's.

use super::guard::Guard;
use crate::exit::Failure;
use crate::serve::Driver;
use corral_tokio::corral_proto::{Endpoint, EndpointConfig, Node};
use corral_tokio::socket::SocketOptions;
use corral_tokio::{Server, ServerHandle};
use std::net::SocketAddr;

/// What worker `i` serves: its Entity Manager and, if any, the layer in front of it (OSCORE, and the rule
/// that remote changes need it: see `guard`).
pub struct Part {
    pub em: corral_group::EntityManager,
    pub guard: Option<Guard>,
}

/// Bound sockets, not yet served.
pub struct Bound {
    sockets: Sockets,
    local: SocketAddr,
    /// Every worker's endpoint configuration but its seed and shard.
    endpoint: EndpointConfig,
}

enum Sockets {
    Tokio(Vec<Server>),
    #[cfg(target_os = "linux")]
    Blocking(Vec<corral_tokio::blocking::BoundSocket>),
}

/// The running workers.
pub enum Running {
    Tokio(Vec<ServerHandle>),
    #[cfg(target_os = "linux")]
    Blocking(corral_tokio::blocking::Workers),
}

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
) -> Result<Bound, Failure> {
    let failed = |e: std::io::Error| {
        let hint = if e.kind() == std::io::ErrorKind::AddrInUse && testbed && bind.ip().is_unspecified() {
            " (the testbed's devices hold this port on their addresses: bind the gateway to 127.0.0.1)"
        } else {
            ""
        };
        Failure::other(format!("cannot listen on {bind}: {e}{hint}"))
    };
    #[cfg(not(target_os = "linux"))]
    if workers > 1 || driver == Driver::Blocking {
        return Err(Failure::usage("--workers and --driver blocking need Linux"));
    }
    let sockets = match driver {
        Driver::Tokio => {
            let builder = Server::builder().socket_options(opts).endpoint_config(endpoint.clone());
            let servers = match workers {
                1 => builder.bind_addr(bind).map(|s| vec![s]),
                #[cfg(target_os = "linux")]
                n => builder.bind_shards(bind, n, Some(0)),
                #[cfg(not(target_os = "linux"))]
                _ => unreachable!("refused above"),
            };
            Sockets::Tokio(servers.map_err(failed)?)
        }
        #[cfg(target_os = "linux")]
        Driver::Blocking => {
            use corral_tokio::blocking::BoundSocket;
            let opts = opts.for_server();
            let sockets = match workers {
                1 => BoundSocket::bind(bind, opts).map(|s| vec![s]),
                n => BoundSocket::bind_group(bind, opts, corral_tokio::steer::Steering { count: n, manager: Some(0) }),
            };
            Sockets::Blocking(sockets.map_err(failed)?)
        }
        #[cfg(not(target_os = "linux"))]
        Driver::Blocking => unreachable!("refused above"),
    };
    let local = match &sockets {
        Sockets::Tokio(s) => s[0].local_addr(),
        #[cfg(target_os = "linux")]
        Sockets::Blocking(s) => s[0].local_addr(),
    };
    Ok(Bound { sockets, local, endpoint })
}

impl Bound {
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Serves `parts[i]` on worker `i` (one part per socket).
    pub fn start(self, parts: Vec<Part>) -> Result<Running, Failure> {
        let started = |e: std::io::Error| Failure::other(format!("cannot start the gateway: {e}"));
        match self.sockets {
            Sockets::Tokio(servers) => {
                let mut handles = Vec::with_capacity(servers.len());
                for (mut server, part) in servers.into_iter().zip(parts) {
                    server.mount("em", part.em);
                    if let Some(layer) = part.guard {
                        server.set_layer(layer);
                    }
                    handles.push(server.spawn().map_err(started)?);
                }
                Ok(Running::Tokio(handles))
            }
            #[cfg(target_os = "linux")]
            Sockets::Blocking(sockets) => {
                let mut workers = corral_tokio::blocking::Workers::new();
                for (i, (bound, part)) in sockets.into_iter().zip(parts).enumerate() {
                    let config =
                        corral_tokio::os_seeded(EndpointConfig { shard: bound.shard(), ..self.endpoint.clone() });
                    workers
                        .spawn(format!("corral-gateway-{i}"), bound, move || {
                            let mut node = Node::new(Endpoint::new(config));
                            node.mount("em", part.em);
                            if let Some(layer) = part.guard {
                                node.set_layer(Box::new(layer));
                            }
                            node
                        })
                        .map_err(started)?;
                }
                Ok(Running::Blocking(workers))
            }
        }
    }
}

impl Running {
    /// Stops every worker; requests in progress get a second to finish.
    pub async fn stop(self) {
        match self {
            Running::Tokio(handles) => {
                for h in handles {
                    h.shutdown().await;
                }
            }
            #[cfg(target_os = "linux")]
            Running::Blocking(workers) => {
                let _ = tokio::task::spawn_blocking(move || workers.stop()).await;
            }
        }
    }
}
