//! DTLS on a simulated node: corral-dtls's sans-IO [`SecureNode`] — the one composition of DTLS and a
//! CoAP node that the real-socket drivers run too — as a corral-sim [`App`]. The simulator hands it the
//! datagrams that reach the node (the records) and runs its timer; the records it sends go out on the
//! radio like any other datagram (6LoWPAN fragmentation, MAC, loss). dimpl's flights are retransmitted
//! by dimpl's own timers, on the simulator's clock.
//!
//! # What it owns
//! The adapter between the simulator's `App` calls and the secure node, nothing else: which layer a
//! datagram takes, the timers and the counters are the node's. It never reads a clock, and every random
//! value of the node's sessions — randoms, nonces, ECDHE keys — derives from the secret it is given
//! (the point's seed), so a simulated run is the same, byte for byte, every time it runs with its seed.

use corral_dtls::{DtlsConfig, DtlsNumbers, Port, SecureConfig, SecureNode};
use corral_proto::tcp::ConnId;
use corral_proto::{Instant, Node};
use corral_sim::app::{App, AppAction};
use std::any::Any;
use std::collections::VecDeque;
use std::net::SocketAddr;

/// The coaps port (RFC 7252 §12.8): the node's records leave from it.
pub const COAPS_PORT: u16 = 5684;

/// A CoAP node whose datagrams go through DTLS (see the module docs).
pub struct DtlsNode {
    secure: SecureNode<Node>,
    actions: VecDeque<AppAction>,
}

impl DtlsNode {
    /// `node` behind a DTLS layer with `config` (a server's or a client's), keyed by `secret` (from the
    /// point's seed).
    pub fn new(node: Node, config: DtlsConfig, secret: [u8; 32]) -> Result<DtlsNode, corral_dtls::ConfigError> {
        let secure = match config.role {
            corral_dtls::Role::Server(_) => SecureConfig { server: Some(config), ..SecureConfig::default() },
            corral_dtls::Role::Client { .. } => SecureConfig { client: Some(config), ..SecureConfig::default() },
        };
        Ok(DtlsNode { secure: SecureNode::new(node, secure, secret)?, actions: VecDeque::new() })
    }

    /// The CoAP node behind the layer.
    pub fn node(&self) -> &Node {
        self.secure.inner()
    }

    /// The layer's counters and sessions (handshakes done, flights retransmitted, …).
    pub fn numbers(&self) -> DtlsNumbers {
        self.secure.numbers()
    }

    /// Moves what the node sends onto the radio and forgets its events (the node acted on them).
    fn flush(&mut self, now: Instant) {
        while let Some((_, t)) = self.secure.poll_transmit(now) {
            self.actions.push_back(AppAction::Datagram(t.dst, t.payload));
        }
        while self.secure.poll_event().is_some() || self.secure.inner_mut().poll_event().is_some() {}
    }
}

impl App for DtlsNode {
    fn tcp_port(&self) -> u16 {
        COAPS_PORT
    }

    fn on_connected(&mut self, _: Instant, _: ConnId, _: SocketAddr) {}

    fn on_connect_failed(&mut self, _: Instant, _: SocketAddr) {}

    fn on_data(&mut self, _: Instant, _: ConnId, _: &[u8]) {}

    fn on_closed(&mut self, _: Instant, _: ConnId) {}

    fn on_datagram(&mut self, now: Instant, src: SocketAddr, payload: &[u8]) {
        self.secure.handle_datagram(now, Port::Main, src, None, payload);
        self.flush(now);
    }

    fn on_timeout(&mut self, now: Instant) {
        self.secure.handle_timeout(now);
        self.flush(now);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.secure.poll_timeout()
    }

    fn poll_action(&mut self) -> Option<AppAction> {
        self.actions.pop_front()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
