//! `coaps://` on real sockets: corral-dtls's sans-IO [`SecureNode`] — a client's endpoints or a server's
//! node behind the DTLS layers of their socket — run as a driver [`Machine`]. What the secure node does
//! (which datagram goes through which layer, plain CoAP beside DTLS, its one timer) is its own; this
//! module only connects it to the tokio driver.
//!
//! Owns: the node's secret from the OS's CSPRNG (every key, cookie and random of its sessions derives
//! from it, so none can be predicted); handing a failed handshake's reason to the client's request
//! futures ([`DtlsFailures`], so that the error says why); publishing the counters the node reports to
//! whoever watches it ([`DtlsWatch`], with `try_lock`: a reader never makes a datagram wait); the
//! configurations a library user gives ([`DtlsMuxConfig`], [`crate::ServerBuilder::dtls`],
//! [`crate::Server::listen_dtls`]). Never implements DTLS (corral-dtls and dimpl do), CoAP (corral-proto)
//! nor the composition of the two (corral-dtls' `SecureNode`).
//!
//! # The room
//! The secured transports' client and server sides on the driver: this module (`coaps://`) and the
//! client's OSCORE (`oscore`: protect a request, verify its response). TLS (`coaps+tcp://`) is a
//! connection's concern and lives with the connections (`crate::tls`).

pub mod oscore;

use crate::driver::Machine;
use corral_dtls::{DtlsConfig, DtlsEvent, HandshakeFailure, Plaintext, Port, SecureConfig, SecureEvent, SecureNode};
use corral_proto::tcp::ConnId;
use corral_proto::{
    Event, InboundId, Instant, NodeCommand, Response, TcpTransmit, Transmit, Transports, UnknownExchange,
};
use std::collections::{HashMap, HashSet};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

pub use corral_dtls::DtlsNumbers;

/// Handshake failures by peer, and the peers whose handshake is under way, shared between a client's
/// driver and its request futures (a request that times out during a handshake failed in the handshake:
/// some servers refuse a key by saying nothing).
#[derive(Debug, Default)]
pub(crate) struct DtlsFailures {
    by_peer: Mutex<HashMap<SocketAddr, HandshakeFailure>>,
    handshaking: Mutex<HashSet<SocketAddr>>,
}

/// Failures remembered at once; more are not recorded (a client talks to a few servers).
const MAX_FAILURES: usize = 64;

impl DtlsFailures {
    fn record(&self, peer: SocketAddr, reason: HandshakeFailure) {
        if let Ok(mut m) = self.by_peer.lock() {
            if m.len() < MAX_FAILURES || m.contains_key(&peer) {
                m.insert(peer, reason);
            }
        }
    }

    fn forget(&self, peer: SocketAddr) {
        if let Ok(mut m) = self.by_peer.lock() {
            m.remove(&peer);
        }
        self.handshake_over(peer);
    }

    fn handshake_started(&self, peer: SocketAddr) {
        if let Ok(mut h) = self.handshaking.lock() {
            if h.len() < MAX_FAILURES {
                h.insert(peer);
            }
        }
    }

    fn handshake_over(&self, peer: SocketAddr) {
        if let Ok(mut h) = self.handshaking.lock() {
            h.remove(&peer);
        }
    }

    /// Why the last handshake with `peer` failed, if it did; a handshake still under way when `timed_out`
    /// counts as one that got no answer.
    pub(crate) fn get(&self, peer: SocketAddr, timed_out: bool) -> Option<HandshakeFailure> {
        let failed = self.by_peer.lock().ok().and_then(|m| m.get(&peer).cloned());
        let pending = timed_out && self.handshaking.lock().is_ok_and(|h| h.contains(&peer));
        failed.or(pending.then_some(HandshakeFailure::Timeout))
    }

    /// Takes in what the node says about its sessions.
    fn note(&self, event: &SecureEvent) {
        match event {
            SecureEvent::Started { peer } => self.handshake_started(*peer),
            SecureEvent::Session(DtlsEvent::Failed { peer, reason }) => {
                self.handshake_over(*peer);
                self.record(*peer, reason.clone());
            }
            SecureEvent::Session(DtlsEvent::Connected { peer, .. }) => self.forget(*peer),
            _ => {}
        }
    }
}

/// How often a DTLS socket publishes its counters to its [`DtlsWatch`] (as often as the HTTP side's
/// snapshots of the node).
pub const DTLS_PUBLISH_PERIOD: corral_proto::Duration = corral_proto::Duration::from_millis(500);

/// Where a DTLS socket publishes its [`DtlsNumbers`] every [`DTLS_PUBLISH_PERIOD`] (set with
/// [`crate::Server::set_dtls_watch`] or [`crate::DtlsMuxConfig::watch`]); clones share the slot.
#[derive(Debug, Clone, Default)]
pub struct DtlsWatch(Arc<Mutex<Option<DtlsNumbers>>>);

impl DtlsWatch {
    /// The last publication; `None` before the first (no DTLS socket publishes here, or not yet).
    pub fn read(&self) -> Option<DtlsNumbers> {
        self.0.lock().ok().and_then(|n| *n)
    }

    /// Publishes `numbers`; a reader holding the slot makes this publication wait for the next, never
    /// the socket.
    fn publish(&self, numbers: DtlsNumbers) {
        if let Ok(mut slot) = self.0.try_lock() {
            *slot = Some(numbers);
        }
    }
}

/// What a socket that speaks coap:// speaks DTLS with besides ([`crate::Server::set_dtls_mux`]): one
/// port for both, each datagram's first byte telling them apart (RFC 7983).
#[derive(Debug, Clone, Default)]
pub struct DtlsMuxConfig {
    /// Accept `coaps://` clients with this (server-role) configuration.
    pub server: Option<DtlsConfig>,
    /// Reach each of these peers over `coaps://` with its own (client-role) configuration.
    pub peers: Vec<(SocketAddr, DtlsConfig)>,
    /// Publish the layers' counters here (summed over the server layer and the peers').
    pub watch: Option<DtlsWatch>,
}

impl DtlsMuxConfig {
    pub fn is_empty(&self) -> bool {
        self.server.is_none() && self.peers.is_empty()
    }
}

/// A node's secret from the OS's CSPRNG: every random value of its DTLS sessions derives from it.
pub(crate) fn os_secret() -> [u8; 32] {
    crate::driver::os_random()
}

/// `config` with the counters reported every [`DTLS_PUBLISH_PERIOD`] when someone watches them.
pub(crate) fn reporting(config: SecureConfig, watch: &Option<DtlsWatch>) -> SecureConfig {
    SecureConfig { report_every: watch.as_ref().map(|_| DTLS_PUBLISH_PERIOD), ..config }
}

/// A machine behind its socket's DTLS layers (see the module docs).
pub(crate) struct SecureMachine<M> {
    node: SecureNode<M>,
    failures: Option<Arc<DtlsFailures>>,
    watch: Option<DtlsWatch>,
}

impl<M: Machine + Plaintext> SecureMachine<M> {
    /// `inner` behind the layers of `config`, keyed from the OS; `failures`: a client's, for its request
    /// futures; `watch`: where the counters go (`config` reports them: see [`reporting`]).
    pub(crate) fn new(
        inner: M,
        config: SecureConfig,
        failures: Option<Arc<DtlsFailures>>,
        watch: Option<DtlsWatch>,
    ) -> io::Result<SecureMachine<M>> {
        let node =
            SecureNode::new(inner, config, os_secret()).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(SecureMachine { node, failures, watch })
    }

    /// Takes in what the node said (it acted on every session event itself).
    fn after(&mut self) {
        while let Some(event) = self.node.poll_event() {
            if let Some(f) = &self.failures {
                f.note(&event);
            }
            if let (SecureEvent::Report(numbers), Some(w)) = (&event, &self.watch) {
                w.publish(*numbers);
            }
        }
    }
}

impl<M: Machine + Plaintext> Machine for SecureMachine<M> {
    fn handle_datagram(&mut self, now: Instant, port: Port, from: SocketAddr, dst_ip: Option<IpAddr>, data: &[u8]) {
        self.node.handle_datagram(now, port, from, dst_ip, data);
        self.after();
    }
    fn handle_unreachable(&mut self, now: Instant, peer: SocketAddr, quoted: &[u8]) {
        self.node.handle_unreachable(now, peer, quoted)
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.node.handle_timeout(now);
        self.after();
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<(Port, Transmit)> {
        let t = self.node.poll_transmit(now);
        self.after();
        t
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.node.poll_timeout()
    }
    // DTLS touches datagrams and timers only: the rest is the inner machine's.
    fn handle_tcp_connected(&mut self, now: Instant, conn: ConnId, peer: SocketAddr) {
        self.node.inner_mut().handle_tcp_connected(now, conn, peer)
    }
    fn handle_tcp_data(&mut self, now: Instant, conn: ConnId, data: &[u8]) {
        self.node.inner_mut().handle_tcp_data(now, conn, data)
    }
    fn handle_tcp_closed(&mut self, now: Instant, conn: ConnId) {
        self.node.inner_mut().handle_tcp_closed(now, conn)
    }
    fn handle_tcp_connect_failed(&mut self, now: Instant, dst: SocketAddr) {
        self.node.inner_mut().handle_tcp_connect_failed(now, dst)
    }
    fn poll_tcp_connect(&mut self) -> Option<SocketAddr> {
        self.node.inner_mut().poll_tcp_connect()
    }
    fn poll_tcp_transmit(&mut self) -> Option<TcpTransmit> {
        self.node.inner_mut().poll_tcp_transmit()
    }
    fn poll_tcp_close(&mut self) -> Option<ConnId> {
        self.node.inner_mut().poll_tcp_close()
    }
    fn poll_event(&mut self) -> Option<Event> {
        self.node.inner_mut().poll_event()
    }
    fn poll_command(&mut self) -> Option<NodeCommand> {
        self.node.inner_mut().poll_command()
    }
    fn transports(&self) -> &Transports {
        self.node.inner().transports()
    }
    fn transports_mut(&mut self) -> &mut Transports {
        self.node.inner_mut().transports_mut()
    }
    fn respond(&mut self, now: Instant, id: InboundId, response: Response) -> Result<(), UnknownExchange> {
        self.node.inner_mut().respond(now, id, response)
    }
}
