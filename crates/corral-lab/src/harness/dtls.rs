//! DTLS on a simulated node: corral-dtls's sans-IO [`DtlsLayer`] between the simulated radio and a
//! node's CoAP endpoint, as the real-socket drivers put it between the socket and `Node::handle_datagram`.
//! A [`DtlsNode`] is a corral-sim [`App`]: the simulator hands it the datagrams that reach the node (the
//! records), it hands the layer's plaintext to its [`Node`] and the node's datagrams to the layer, and the
//! layer's records go out on the radio like any other datagram (6LoWPAN fragmentation, MAC, loss). Its
//! timer is the earlier of the node's and the layer's, on the simulator's clock: dimpl's flights are
//! retransmitted by dimpl's own timers, handed the simulated time.
//!
//! # What it owns
//! The plumbing between the two sans-IO machines and one count the layer does not keep: the handshake
//! flights sent again on a timer ([`DtlsNode::flights_retransmitted`]). It never reads a clock but once,
//! for the `std::time::Instant` dimpl's timers need as an anchor ([`DtlsNode::new`]): the layer maps the
//! simulated time onto it as offsets, so no number depends on that reading. The layer's secret comes from
//! the point's seed; dimpl's crypto provider draws its key material (randoms, ECDHE keys, ECDSA nonces)
//! from the OS's CSPRNG itself, so the bytes differ from run to run — their sizes, and with them the
//! frames and times, do not, except an ECDSA signature's DER length (70-72 bytes), which can move a
//! certificate flight by a byte or two.

use corral_dtls::{DtlsConfig, DtlsLayer, DtlsStats};
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
    pub node: Node,
    pub layer: DtlsLayer,
    actions: VecDeque<AppAction>,
    flights_retransmitted: u64,
}

impl DtlsNode {
    /// `node` behind a DTLS layer with `config`, keyed by `secret` (from the point's seed).
    pub fn new(node: Node, config: DtlsConfig, secret: [u8; 32]) -> DtlsNode {
        // dimpl's timers are std's: an anchor for the layer's offsets, never read again (module docs).
        let layer = DtlsLayer::new(config, std::time::Instant::now(), secret);
        DtlsNode { node, layer, actions: VecDeque::new(), flights_retransmitted: 0 }
    }

    /// Handshake flights the layer sent again when dimpl's retransmission timer fired (each timer that
    /// produced records counts once, however many datagrams the flight took).
    pub fn flights_retransmitted(&self) -> u64 {
        self.flights_retransmitted
    }

    pub fn stats(&self) -> DtlsStats {
        self.layer.stats()
    }

    /// Moves everything between the node, the layer and the radio until nothing is left to move.
    fn pump(&mut self, now: Instant) {
        loop {
            let mut moved = false;
            while let Some((peer, plain)) = self.layer.poll_plaintext() {
                self.node.handle_datagram(now, peer, None, &plain);
                moved = true;
            }
            while let Some(t) = self.node.poll_transmit() {
                self.layer.send(t.dst, &t.payload);
                moved = true;
            }
            while let Some(t) = self.layer.poll_transmit() {
                self.actions.push_back(AppAction::Datagram(t.dst, t.payload));
                moved = true;
            }
            while self.layer.poll_event().is_some() || self.node.poll_event().is_some() {}
            if !moved {
                return;
            }
        }
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
        self.layer.handle_datagram(now, src, None, payload);
        self.pump(now);
    }

    fn on_timeout(&mut self, now: Instant) {
        // The layer first, and always: besides its due timers, it learns the time its sends (which carry
        // none) open sessions at — a session opened at an older time would find its first retransmission
        // due at once.
        let due = self.layer.poll_timeout().is_some_and(|t| t <= now);
        let before = self.actions.len();
        self.layer.handle_timeout(now);
        self.pump(now);
        if due && self.actions.len() > before {
            self.flights_retransmitted += 1;
        }
        if self.node.poll_timeout().is_some_and(|t| t <= now) {
            self.node.handle_timeout(now);
            self.pump(now);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        [self.node.poll_timeout(), self.layer.poll_timeout()].into_iter().flatten().min()
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
