//! Worker bring-up: N workers on one address, each a thread with its own [`Node`] on its own socket —
//! asleep in its receive call ([`crate::blocking`], Linux, CoAP over UDP) or on a tokio runtime
//! ([`crate::Server`]) — as `corral serve --workers` and `corral gateway --workers` start them.
//!
//! The sockets are an SO_REUSEPORT group: either plain (the kernel hashes each client to a worker: a server
//! that sends no requests of its own) or shards of one port ([`crate::steer`]: answers reach the worker
//! whose shard of message IDs and tokens asked, for a node that sends requests, such as the gateway).
//!
//! Owns: binding the sockets, the endpoint configuration of each worker (its seed and its shard), starting
//! and stopping the threads. Must never: decide what a worker serves (the caller's `setup`).

use crate::net::socket::SocketOptions;
use crate::{Server, ServerHandle};
use corral_proto::{EndpointConfig, Node};
use std::io;
use std::net::{IpAddr, SocketAddr};

/// How workers wait for datagrams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    /// Each worker a thread asleep inside its receive call (Linux, CoAP over UDP only).
    Blocking,
    /// Each worker a tokio runtime (what CoAP over TCP and busy polling need).
    Tokio,
}

/// How the workers' sockets share the port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sharing {
    /// Plain SO_REUSEPORT (the socket options must ask for it when there is more than one worker).
    ReusePort,
    /// Shards of one port steered by the CoAP header, `manager` getting every request but GET (more than
    /// one worker; Linux).
    Shards { manager: Option<u8> },
}

/// What the workers are: their driver, number, address, sockets and endpoints.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    pub driver: Driver,
    pub count: u16,
    pub addr: SocketAddr,
    /// The sockets' options. The tokio driver makes them a server's ([`SocketOptions::for_server`]); the
    /// blocking one takes them as they are.
    pub socket: SocketOptions,
    /// Every worker's endpoint configuration but its seed and shard.
    pub endpoint: EndpointConfig,
    pub sharing: Sharing,
    /// CoAP over TCP on the first worker (tokio driver): `Some(None)` on the UDP address and port.
    pub tcp: Option<Option<SocketAddr>>,
    /// The blocking driver's threads are named `{name}-{i}`.
    pub name: String,
}

/// A socket could not be bound: the address it was bound to and why.
#[derive(Debug)]
pub struct BindError {
    pub addr: SocketAddr,
    pub error: io::Error,
}

/// What worker `i` serves: mounts services and layers on its node (made on the worker's thread).
pub type Setup = Box<dyn FnOnce(&mut Node) + Send>;

/// Bound sockets, not yet served.
pub struct Bound {
    sockets: Sockets,
    config: WorkerConfig,
    local: SocketAddr,
    tcp_local: Option<SocketAddr>,
}

enum Sockets {
    Tokio(Vec<Server>),
    #[cfg(target_os = "linux")]
    Blocking(Vec<crate::driver::blocking::BoundSocket>),
}

/// The running workers.
pub enum Workers {
    Tokio(Vec<ServerHandle>),
    #[cfg(target_os = "linux")]
    Blocking(crate::driver::blocking::Workers),
}

impl Bound {
    /// Binds `config.count` sockets to `config.addr`. Port 0: the first socket picks the port, the others
    /// join it.
    pub fn bind(config: WorkerConfig) -> Result<Bound, BindError> {
        let sockets = match config.driver {
            Driver::Tokio => Sockets::Tokio(bind_tokio(&config)?),
            #[cfg(target_os = "linux")]
            Driver::Blocking => Sockets::Blocking(bind_blocking(&config)?),
            #[cfg(not(target_os = "linux"))]
            Driver::Blocking => {
                return Err(BindError {
                    addr: config.addr,
                    error: io::Error::new(io::ErrorKind::Unsupported, "the blocking driver needs Linux"),
                })
            }
        };
        let (local, tcp_local) = match &sockets {
            Sockets::Tokio(s) => (s[0].local_addr(), s[0].tcp_local_addr()),
            #[cfg(target_os = "linux")]
            Sockets::Blocking(s) => (s[0].local_addr(), None),
        };
        Ok(Bound { sockets, config, local, tcp_local })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The first worker's CoAP-over-TCP listener, if there is one.
    pub fn tcp_local_addr(&self) -> Option<SocketAddr> {
        self.tcp_local
    }

    /// Joins a multicast group on every socket.
    /// Makes the socket speak coaps:// beside coap:// ([`Server::set_dtls_mux`]): one worker on the tokio
    /// driver only (the steering program reads CoAP headers, and the blocking driver has no DTLS layer).
    pub fn set_dtls_mux(&mut self, config: crate::DtlsMuxConfig) -> io::Result<()> {
        match &mut self.sockets {
            Sockets::Tokio(servers) if servers.len() == 1 => {
                servers[0].set_dtls_mux(config);
                Ok(())
            }
            _ => Err(io::Error::new(io::ErrorKind::Unsupported, "coaps:// needs one worker on the tokio driver")),
        }
    }

    /// Serves `coaps://` on a socket of its own at `addr` from the first worker ([`Server::listen_dtls`]):
    /// the same node and resources as its `coap://`, the counters published to `watch`; the tokio driver
    /// only. Returns the socket's address.
    pub fn listen_dtls(
        &mut self,
        addr: SocketAddr,
        config: corral_dtls::DtlsConfig,
        watch: Option<crate::DtlsWatch>,
    ) -> io::Result<SocketAddr> {
        match &mut self.sockets {
            Sockets::Tokio(servers) => {
                let local = servers[0].listen_dtls(addr, config)?;
                if let Some(w) = watch {
                    servers[0].set_dtls_watch(w);
                }
                Ok(local)
            }
            #[cfg(target_os = "linux")]
            Sockets::Blocking(_) => Err(io::Error::new(io::ErrorKind::Unsupported, "coaps:// needs the tokio driver")),
        }
    }

    /// Serves `coaps+tcp://` (CoAP over TLS) on `addr` from the first worker, as `coap+tcp://` is
    /// ([`Server::listen_tls`]); the tokio driver only. Returns the listener's address.
    pub fn listen_tls(&mut self, addr: SocketAddr, config: crate::TlsServerConfig) -> io::Result<SocketAddr> {
        match &mut self.sockets {
            Sockets::Tokio(servers) => servers[0].listen_tls(addr, config),
            #[cfg(target_os = "linux")]
            Sockets::Blocking(_) => {
                Err(io::Error::new(io::ErrorKind::Unsupported, "coaps+tcp:// needs the tokio driver"))
            }
        }
    }

    pub fn join(&mut self, group: IpAddr) -> io::Result<()> {
        match &mut self.sockets {
            Sockets::Tokio(servers) => servers.iter_mut().try_for_each(|s| s.join_group(group).map(|_| ())),
            #[cfg(target_os = "linux")]
            Sockets::Blocking(sockets) => sockets.iter().try_for_each(|s| s.join(group)),
        }
    }

    /// Serves `setups[i]` on worker `i` (one setup per socket).
    pub fn start(self, setups: Vec<Setup>) -> io::Result<Workers> {
        match self.sockets {
            Sockets::Tokio(servers) => {
                let mut handles = Vec::with_capacity(servers.len());
                for (mut server, setup) in servers.into_iter().zip(setups) {
                    server.configure(setup);
                    handles.push(server.spawn()?);
                }
                Ok(Workers::Tokio(handles))
            }
            #[cfg(target_os = "linux")]
            Sockets::Blocking(sockets) => {
                let mut workers = crate::driver::blocking::Workers::new();
                for (i, (bound, setup)) in sockets.into_iter().zip(setups).enumerate() {
                    let config =
                        crate::os_seeded(EndpointConfig { shard: bound.shard(), ..self.config.endpoint.clone() });
                    workers.spawn(format!("{}-{i}", self.config.name), bound, move || {
                        let mut node = Node::new(corral_proto::Endpoint::new(config));
                        setup(&mut node);
                        node
                    })?;
                }
                Ok(Workers::Blocking(workers))
            }
        }
    }
}

impl Workers {
    /// Stops every worker; requests in progress get a second to finish.
    pub async fn stop(self) {
        match self {
            Workers::Tokio(handles) => {
                for h in handles {
                    h.shutdown().await;
                }
            }
            #[cfg(target_os = "linux")]
            Workers::Blocking(workers) => {
                let _ = tokio::task::spawn_blocking(move || workers.stop()).await;
            }
        }
    }
}

fn bind_tokio(config: &WorkerConfig) -> Result<Vec<Server>, BindError> {
    let builder = || Server::builder().endpoint_config(config.endpoint.clone()).socket_options(config.socket.clone());
    #[cfg(target_os = "linux")]
    if let (Sharing::Shards { manager }, n @ 2..) = (config.sharing, config.count) {
        let n = u8::try_from(n).unwrap_or(u8::MAX);
        return builder().bind_shards(config.addr, n, manager).map_err(|error| BindError { addr: config.addr, error });
    }
    let mut servers: Vec<Server> = Vec::with_capacity(usize::from(config.count));
    for worker in 0..config.count {
        let mut b = builder();
        if let (Some(tcp), 0) = (config.tcp, worker) {
            b = b.tcp(tcp);
        }
        let addr = servers.first().map_or(config.addr, Server::local_addr);
        servers.push(b.bind_addr(addr).map_err(|error| BindError { addr, error })?);
    }
    Ok(servers)
}

#[cfg(target_os = "linux")]
fn bind_blocking(config: &WorkerConfig) -> Result<Vec<crate::driver::blocking::BoundSocket>, BindError> {
    use crate::driver::blocking::BoundSocket;
    let opts = config.socket.clone();
    if let (Sharing::Shards { manager }, n @ 2..) = (config.sharing, config.count) {
        let count = u8::try_from(n).unwrap_or(u8::MAX);
        return BoundSocket::bind_group(config.addr, opts, crate::driver::steer::Steering { count, manager })
            .map_err(|error| BindError { addr: config.addr, error });
    }
    let mut sockets: Vec<BoundSocket> = Vec::with_capacity(usize::from(config.count));
    for _ in 0..config.count {
        let addr = sockets.first().map_or(config.addr, BoundSocket::local_addr);
        sockets.push(BoundSocket::bind(addr, opts.clone()).map_err(|error| BindError { addr, error })?);
    }
    Ok(sockets)
}
