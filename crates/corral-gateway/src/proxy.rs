//! The multiparty forward proxy of seed 001 on a UDP socket (and TCP, coaps://): [`ProxyConfig`] in,
//! [`Proxy::start`], a [`Proxy`] handle out — what `corral proxy` runs, and what a test starts in-process.
//!
//! Owns: checking that the FIB can be served (credentials for its coaps:// next hops, a directory for its
//! `rd:` rules), the server socket with the proxy mounted at `/proxy`, and a clean stop. The proxy itself is
//! corral-proxy's [`ProxyService`]. Must never: parse a command line or print.

use crate::Error;
use corral_proto::{EndpointConfig, Prefix, TransmissionParams};
use corral_proxy::{Fib, ProxyService};
use corral_tokio::{DtlsMuxConfig, Server, ServerHandle};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

/// How the proxy service is mounted on the server at `proxy` (e.g. wrapped in the HTTP window's snapshot
/// publisher); without one, it is mounted as it is.
pub type MountProxy = Arc<dyn Fn(&mut Server, ProxyService) + Send + Sync>;

/// What a proxy runs with.
pub struct ProxyConfig {
    /// Address and port to listen on (port 0: any free port).
    pub bind: SocketAddr,
    /// CoAP over TCP too: `Some(None)` on the UDP address and port.
    pub tcp: Option<Option<SocketAddr>>,
    /// The proxy's own settings (cache, clients, destinations, groups, directory).
    pub service: corral_proxy::ProxyConfig,
    pub fib: Fib,
    /// Requests outstanding to one next hop at once.
    pub nstart: u16,
    /// The networks whose sources count as verified from their first datagram.
    pub verified_nets: Vec<Prefix>,
    /// IPv4 address of the interface group requests leave from.
    pub mcast_if: Option<Ipv4Addr>,
    /// coaps:// on the same port, and credentials for coaps:// next hops (their addresses become the
    /// service's `dtls_peers`).
    pub dtls: Option<DtlsMuxConfig>,
    /// See [`MountProxy`].
    pub mount: Option<MountProxy>,
}

impl ProxyConfig {
    /// A proxy on `bind` with `fib` and corral-proxy's defaults (loopback clients).
    pub fn new(bind: SocketAddr, fib: Fib) -> ProxyConfig {
        ProxyConfig {
            bind,
            tcp: None,
            service: corral_proxy::ProxyConfig::default(),
            fib,
            nstart: TransmissionParams::default().nstart,
            verified_nets: Vec::new(),
            mcast_if: None,
            dtls: None,
            mount: None,
        }
    }

    /// A FIB this proxy cannot serve, found before anything is bound.
    fn check(&self) -> Result<(), Error> {
        let peers = &self.service.dtls_peers;
        let coaps = |uri: &str| uri.get(..8).is_some_and(|s| s.eq_ignore_ascii_case("coaps://"));
        if let Some(hop) =
            self.fib.rules.iter().flat_map(|r| &r.next).find(|h| coaps(&h.uri) && !peers.contains(&h.addr))
        {
            return Err(Error::Config(format!(
                "next hop {}: no DTLS credentials for {} (give them with --peer-psk-file)",
                hop.uri, hop.addr
            )));
        }
        if let Some(rule) = self.fib.rules.iter().find(|r| r.rd.is_some()).filter(|_| self.service.rd.is_none()) {
            return Err(Error::Config(format!(
                "the FIB rule {:?} follows a directory (rd:…): name it with --rd URI",
                rule.pattern
            )));
        }
        Ok(())
    }
}

/// A running proxy. [`Proxy::stop`] ends it as Ctrl-C does.
pub struct Proxy {
    local: SocketAddr,
    tcp: Option<SocketAddr>,
    handle: ServerHandle,
}

impl Proxy {
    /// Binds the proxy's sockets and starts serving, on the current tokio runtime.
    pub fn start(mut config: ProxyConfig) -> Result<Proxy, Error> {
        config.service.dtls_peers =
            config.dtls.iter().flat_map(|m| m.peers.iter().map(|(a, _)| *a)).collect::<Vec<SocketAddr>>();
        config.check()?;
        let params = TransmissionParams { nstart: config.nstart, ..TransmissionParams::default() };
        let endpoint = EndpointConfig { params, verified_nets: config.verified_nets, ..EndpointConfig::default() };
        let mut builder = Server::builder().endpoint_config(endpoint);
        if let Some(addr) = config.tcp {
            builder = builder.tcp(addr);
        }
        if let Some(ifaddr) = config.mcast_if {
            builder = builder.multicast_interface_v4(ifaddr);
        }
        let bind = config.bind;
        let mut server = builder.bind_addr(bind).map_err(|e| Error::Start(format!("cannot listen on {bind}: {e}")))?;
        if let Some(mux) = config.dtls {
            server.set_dtls_mux(mux);
        }
        let proxy = ProxyService::new(config.service, config.fib);
        match &config.mount {
            Some(mount) => mount(&mut server, proxy),
            None => {
                server.mount_forward_proxy("proxy", proxy);
            }
        }
        let (local, tcp) = (server.local_addr(), server.tcp_local_addr());
        let handle = server.spawn().map_err(|e| Error::Start(format!("cannot start the proxy: {e}")))?;
        Ok(Proxy { local, tcp, handle })
    }

    /// The UDP address the proxy listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The TCP address, with CoAP over TCP.
    pub fn tcp_local_addr(&self) -> Option<SocketAddr> {
        self.tcp
    }

    /// Stops serving; exchanges in progress get the server's grace period.
    pub async fn stop(self) {
        self.handle.shutdown().await
    }
}
