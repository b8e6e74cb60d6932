//! `coaps://` on real sockets: a [`Machine`] wrapped in corral-dtls's sans-IO [`DtlsLayer`], so that the
//! driver's socket carries DTLS records and the machine (a client's endpoints or a server's node) sees
//! plaintext CoAP and the peer's address, as it would on `coap://`.
//!
//! Owns: the order of the two (datagrams through the layer into the machine, the machine's datagrams
//! through the layer onto the socket), the layer's secret from the OS's CSPRNG, handing a failed
//! handshake to the endpoint (its exchanges with that peer fail at once) and to the client
//! ([`DtlsFailures`], so that the error says why), and publishing the layers' counters for whoever
//! watches the node ([`DtlsWatch`], every [`DTLS_PUBLISH_PERIOD`] on the driver's timer, with `try_lock`:
//! a reader never makes a datagram wait). Never implements DTLS (corral-dtls and dimpl do) nor CoAP
//! (corral-proto).

use crate::driver::{Clock, Machine};
use corral_dtls::{DtlsConfig, DtlsEvent, DtlsLayer, DtlsStats, HandshakeFailure};
use corral_proto::tcp::ConnId;
use corral_proto::UnknownExchange;
use corral_proto::{Endpoint, Event, InboundId, Instant, NodeCommand, Response, TcpEndpoint, TcpTransmit, Transmit};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

/// Handshake failures by peer, and the peers whose handshake is under way, shared between a client's
/// driver and its request futures (a request that times out during a handshake failed in the handshake:
/// some servers refuse a key by saying nothing).
#[derive(Debug, Default)]
pub(crate) struct DtlsFailures {
    by_peer: Mutex<HashMap<SocketAddr, HandshakeFailure>>,
    handshaking: Mutex<std::collections::HashSet<SocketAddr>>,
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
}

/// How often a DTLS socket publishes its counters to its [`DtlsWatch`] (as often as the HTTP side's
/// snapshots of the node).
pub const DTLS_PUBLISH_PERIOD: corral_proto::Duration = corral_proto::Duration::from_millis(500);

/// What a DTLS socket's layers counted ([`DtlsStats`], summed over the socket's layers: a server's and
/// the client layers towards `coaps://` peers) and the sessions they hold at the moment of publication.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DtlsNumbers {
    pub stats: DtlsStats,
    /// Sessions held (handshakes included).
    pub sessions: usize,
}

/// Where a DTLS socket publishes its [`DtlsNumbers`] every [`DTLS_PUBLISH_PERIOD`] (set with
/// [`crate::Server::set_dtls_watch`] or [`crate::DtlsMuxConfig::watch`]); clones share the slot.
#[derive(Debug, Clone, Default)]
pub struct DtlsWatch(Arc<Mutex<Option<DtlsNumbers>>>);

impl DtlsWatch {
    /// The last publication; `None` before the first (no DTLS socket publishes here, or not yet).
    pub fn read(&self) -> Option<DtlsNumbers> {
        self.0.lock().ok().and_then(|n| *n)
    }
}

/// Publishes a socket's layers to a [`DtlsWatch`] on the driver's timer.
pub(crate) struct Publisher {
    watch: DtlsWatch,
    next: Instant,
}

impl Publisher {
    pub(crate) fn new(watch: Option<DtlsWatch>) -> Option<Publisher> {
        watch.map(|watch| Publisher { watch, next: Instant::ZERO })
    }

    /// When the next publication is due.
    pub(crate) fn due(p: &Option<Publisher>) -> Option<Instant> {
        p.as_ref().map(|p| p.next)
    }

    /// Publishes the sum of `layers` if a period has passed; a reader holding the slot makes this
    /// publication wait for the next period, never the socket.
    pub(crate) fn publish<'a>(p: &mut Option<Publisher>, now: Instant, layers: impl Iterator<Item = &'a DtlsLayer>) {
        let Some(p) = p.as_mut().filter(|p| p.next <= now) else { return };
        let mut numbers = DtlsNumbers::default();
        for layer in layers {
            numbers.stats.add(&layer.stats());
            numbers.sessions += layer.sessions();
        }
        if let Ok(mut slot) = p.watch.0.try_lock() {
            *slot = Some(numbers);
        }
        p.next = now + DTLS_PUBLISH_PERIOD;
    }
}

/// The [`Machine`] methods a DTLS wrapper hands to its inner machine unchanged (CoAP over TCP, events,
/// commands, the endpoints, answers): DTLS touches datagrams and timers only.
macro_rules! delegate_to_inner {
    () => {
        fn handle_tcp_connected(&mut self, now: Instant, conn: ConnId, peer: SocketAddr) {
            self.inner.handle_tcp_connected(now, conn, peer)
        }
        fn handle_tcp_data(&mut self, now: Instant, conn: ConnId, data: &[u8]) {
            self.inner.handle_tcp_data(now, conn, data)
        }
        fn handle_tcp_closed(&mut self, now: Instant, conn: ConnId) {
            self.inner.handle_tcp_closed(now, conn)
        }
        fn handle_tcp_connect_failed(&mut self, now: Instant, dst: SocketAddr) {
            self.inner.handle_tcp_connect_failed(now, dst)
        }
        fn poll_tcp_connect(&mut self) -> Option<SocketAddr> {
            self.inner.poll_tcp_connect()
        }
        fn poll_tcp_transmit(&mut self) -> Option<TcpTransmit> {
            self.inner.poll_tcp_transmit()
        }
        fn poll_tcp_close(&mut self) -> Option<ConnId> {
            self.inner.poll_tcp_close()
        }
        fn poll_event(&mut self) -> Option<Event> {
            self.inner.poll_event()
        }
        fn poll_command(&mut self) -> Option<NodeCommand> {
            self.inner.poll_command()
        }
        fn endpoint(&self) -> &Endpoint {
            self.inner.endpoint()
        }
        fn endpoint_mut(&mut self) -> &mut Endpoint {
            self.inner.endpoint_mut()
        }
        fn tcp(&self) -> &TcpEndpoint {
            self.inner.tcp()
        }
        fn tcp_mut(&mut self) -> &mut TcpEndpoint {
            self.inner.tcp_mut()
        }
        fn respond(&mut self, now: Instant, id: InboundId, response: Response) -> Result<(), UnknownExchange> {
            self.inner.respond(now, id, response)
        }
    };
}
pub(crate) use delegate_to_inner;

/// A machine behind a DTLS layer.
pub(crate) struct DtlsMachine<M> {
    inner: M,
    layer: DtlsLayer,
    failures: Arc<DtlsFailures>,
    publisher: Option<Publisher>,
    /// The latest time the driver gave (sends have none).
    now: Instant,
}

/// A DTLS layer keyed by a secret from the OS's CSPRNG, on the driver's clock.
pub(crate) fn new_layer(config: DtlsConfig, clock: Clock) -> DtlsLayer {
    let mut secret = [0u8; 32];
    // Without the OS's random source no cookie could be unpredictable; no peer can cause this.
    getrandom::fill(&mut secret).expect("the operating system's random source (getrandom) is available");
    DtlsLayer::new(config, clock.to_std(Instant::ZERO), secret)
}

impl<M: Machine> DtlsMachine<M> {
    pub(crate) fn new(
        inner: M,
        config: DtlsConfig,
        clock: Clock,
        failures: Arc<DtlsFailures>,
        watch: Option<DtlsWatch>,
    ) -> DtlsMachine<M> {
        let layer = new_layer(config, clock);
        DtlsMachine { inner, layer, failures, publisher: Publisher::new(watch), now: Instant::ZERO }
    }

    /// Hands the layer's plaintext to the machine and its events to the endpoint and the client.
    fn deliver(&mut self, now: Instant, dst_ip: Option<IpAddr>) {
        while let Some((peer, data)) = self.layer.poll_plaintext() {
            self.inner.handle_datagram(now, peer, dst_ip, &data);
        }
        while let Some(event) = self.layer.poll_event() {
            match event {
                DtlsEvent::Failed { peer, reason } => {
                    self.failures.handshake_over(peer);
                    self.failures.record(peer, reason);
                    self.inner.endpoint_mut().handle_unreachable(now, peer, None);
                }
                DtlsEvent::Connected { peer, .. } => self.failures.forget(peer),
                DtlsEvent::Closed { .. } => {}
            }
        }
    }
}

impl<M: Machine> Machine for DtlsMachine<M> {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, dst_ip: Option<IpAddr>, data: &[u8]) {
        self.now = now;
        self.layer.handle_datagram(now, from, dst_ip, data);
        self.deliver(now, dst_ip);
    }
    fn handle_unreachable(&mut self, now: Instant, peer: SocketAddr, _quoted: &[u8]) {
        // The quoted datagram is a DTLS record, which the endpoint cannot match: every exchange with the
        // peer fails.
        self.inner.endpoint_mut().handle_unreachable(now, peer, None)
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        self.inner.handle_timeout(now);
        self.layer.handle_timeout(now);
        self.deliver(now, None);
        Publisher::publish(&mut self.publisher, now, std::iter::once(&self.layer));
    }
    fn poll_transmit(&mut self) -> Option<Transmit> {
        loop {
            if let Some(t) = self.layer.poll_transmit() {
                return Some(t);
            }
            let plain = self.inner.poll_transmit()?;
            self.layer.send(plain.dst, &plain.payload);
            if !self.layer.is_server() && !self.layer.is_connected(plain.dst) {
                self.failures.handshake_started(plain.dst);
            }
            let now = self.now;
            self.deliver(now, None);
        }
    }
    delegate_to_inner!();
    fn poll_timeout(&self) -> Option<Instant> {
        let own = [self.layer.poll_timeout(), Publisher::due(&self.publisher)];
        own.into_iter().chain([self.inner.poll_timeout()]).flatten().min()
    }
}
