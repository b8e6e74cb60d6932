//! The secure node: a CoAP node (or a bare endpoint) behind the DTLS layers of its socket, as one sans-IO
//! machine — what every driver runs when a socket speaks `coaps://` (the tokio driver, the simulator's
//! DTLS nodes, the load generator's clients), the way each of rustls' I/O loops drives one `Connection`.
//!
//! Owns the composition, once:
//! - **which layer a datagram goes through**: in by port, first byte and source — a DTLS record (first
//!   byte 20–63, RFC 7983 §7) from a peer with credentials of its own to that peer's client layer, from
//!   a peer this side's client already talks to to the client layer, else to the server layer; plain
//!   CoAP (64–127) to the node when it serves `coap://` on the port, dropped from a peer reached over
//!   `coaps://` (its answers count only inside DTLS). Out by destination: a peer with credentials always
//!   through its layer, a peer with a server session through the server layer, any other through the
//!   client layer if there is one, else plain.
//! - **what the layers tell the node**: plaintext with the PSK identity or certificate subject its
//!   server session proved ([`Plaintext::set_datagram_identity`]; it follows a session that moves by
//!   Connection ID), a failed handshake as the failure of every exchange with that peer
//!   (`RequestError::Dtls`).
//! - **no plaintext to a former `coaps://` client**: what the node still has for an address whose server
//!   session ended or moved away (a notification of an observation made over DTLS, a late answer) is
//!   dropped, never sent as plain CoAP beside DTLS; the last [`FORMER_PEERS`] such addresses are kept,
//!   and one that sends plain CoAP itself is plain again.
//! - **the timers**: [`SecureNode::poll_timeout`] is the earliest of the node's, every layer's and the
//!   counters' report — the only place the DTLS timers are merged.
//! - **the counters' report** ([`SecureEvent::Report`], every [`SecureConfig::report_every`]), so a
//!   driver publishes them without a timer of its own.
//!
//! Driven like every sans-IO machine here: `handle_datagram` / `handle_unreachable` / `handle_timeout`
//! with `now`, then `poll_transmit(now)` until `None`, `poll_event` until `None`, and sleep until
//! `poll_timeout`. Never reads a clock, opens a socket or draws randomness but from the secret it is
//! given; never implements DTLS (the layer's and dimpl's) nor CoAP (corral-proto's).

use crate::{derive_secret, ConfigError, DtlsConfig, DtlsEvent, DtlsLayer, DtlsStats, Role};
use corral_proto::{Duration, Endpoint, Instant, Node, RequestError, Transmit};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use tracing::{debug, trace};

/// What sits behind the DTLS layers: CoAP over UDP in plaintext — a [`Node`], a bare [`Endpoint`] (a
/// load generator's client), or a driver's machine that holds one.
pub trait Plaintext {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, local: Option<IpAddr>, data: &[u8]);
    /// An ICMP error for a datagram to `peer`; `quoted`: its start, `None` when it cannot be matched
    /// (it was a DTLS record): every exchange with the peer fails.
    fn handle_unreachable(&mut self, now: Instant, peer: SocketAddr, quoted: Option<&[u8]>);
    fn handle_timeout(&mut self, now: Instant);
    fn poll_transmit(&mut self) -> Option<Transmit>;
    fn poll_timeout(&self) -> Option<Instant>;
    /// Fails every exchange with `peer` with `error` (its handshake failed).
    fn fail_peer(&mut self, now: Instant, peer: SocketAddr, error: RequestError);
    /// The identity the datagrams handed in next were proved by (`None`: none).
    fn set_datagram_identity(&mut self, identity: Option<Arc<[u8]>>);
}

impl Plaintext for Node {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, local: Option<IpAddr>, data: &[u8]) {
        Node::handle_datagram(self, now, from, local, data)
    }
    fn handle_unreachable(&mut self, now: Instant, peer: SocketAddr, quoted: Option<&[u8]>) {
        Node::handle_unreachable(self, now, peer, quoted)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Node::handle_timeout(self, now)
    }
    fn poll_transmit(&mut self) -> Option<Transmit> {
        Node::poll_transmit(self)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Node::poll_timeout(self)
    }
    fn fail_peer(&mut self, now: Instant, peer: SocketAddr, error: RequestError) {
        Node::fail_peer(self, now, peer, error)
    }
    fn set_datagram_identity(&mut self, identity: Option<Arc<[u8]>>) {
        self.endpoint_mut().set_datagram_identity(identity)
    }
}

impl Plaintext for Endpoint {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, local: Option<IpAddr>, data: &[u8]) {
        Endpoint::handle_datagram(self, now, from, local, data)
    }
    fn handle_unreachable(&mut self, now: Instant, peer: SocketAddr, quoted: Option<&[u8]>) {
        Endpoint::handle_unreachable(self, now, peer, quoted)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Endpoint::handle_timeout(self, now)
    }
    fn poll_transmit(&mut self) -> Option<Transmit> {
        Endpoint::poll_transmit(self)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Endpoint::poll_timeout(self)
    }
    fn fail_peer(&mut self, now: Instant, peer: SocketAddr, error: RequestError) {
        Endpoint::fail_peer(self, now, peer, error)
    }
    fn set_datagram_identity(&mut self, identity: Option<Arc<[u8]>>) {
        Endpoint::set_datagram_identity(self, identity)
    }
}

/// Which of a node's sockets a datagram came in on or leaves from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Port {
    /// The node's socket: `coap://`, and `coaps://` too unless it has a port of its own (each datagram's
    /// first byte tells them apart, RFC 7983 §7).
    Main,
    /// A socket for `coaps://` alone ([`SecureConfig::secure_port`]): every datagram is a DTLS record.
    Secure,
}

/// Whether a datagram is a DTLS record (RFC 7983 §7: first byte 20–63), not CoAP (64–127).
pub fn is_dtls(data: &[u8]) -> bool {
    matches!(data.first(), Some(20..=63))
}

/// What a [`SecureNode`] speaks DTLS with, and how its sockets carry it.
#[derive(Debug, Clone, Default)]
pub struct SecureConfig {
    /// Accept `coaps://` clients with this (server-role) configuration.
    pub server: Option<DtlsConfig>,
    /// Reach each of these peers over `coaps://` with its own (client-role) configuration.
    pub peers: Vec<(SocketAddr, DtlsConfig)>,
    /// Reach every other peer over `coaps://` with this (client-role) configuration: a `coaps://` client.
    pub client: Option<DtlsConfig>,
    /// Serve plain CoAP (`coap://`) on the main port beside DTLS, told apart by the first byte. Without
    /// it every datagram is a record (and goes to a layer, which drops what is none).
    pub plain: bool,
    /// DTLS records on a port of their own ([`Port::Secure`]): `corral serve --dtls ADDR:PORT`.
    pub secure_port: bool,
    /// Report the counters ([`SecureEvent::Report`]) this often; `None`: never.
    pub report_every: Option<Duration>,
}

/// The counters of a node's layers, summed ([`DtlsStats`]), and the sessions they hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DtlsNumbers {
    pub stats: DtlsStats,
    /// Sessions held (handshakes included).
    pub sessions: usize,
}

impl DtlsNumbers {
    /// The sessions held and the layers' counters as metrics (`docs/metrics.md`, "DTLS").
    pub fn describe(&self, out: &mut corral_proto::MetricSink<'_>) {
        let sessions = corral_proto::metric::level(self.sessions);
        out(corral_proto::Metric::gauge("dtls_sessions", "DTLS sessions held (handshakes included)", sessions));
        self.stats.describe(out);
    }
}

/// What a [`SecureNode`] tells its driver.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SecureEvent {
    /// A session of one of the layers connected, failed or ended (the node has acted on it already).
    Session(DtlsEvent),
    /// This side began a handshake with `peer` as its client (its plaintext waits for it).
    Started { peer: SocketAddr },
    /// The counters, every [`SecureConfig::report_every`].
    Report(DtlsNumbers),
}

/// When the counters are next reported, and how often.
#[derive(Debug, Clone, Copy)]
struct Report {
    every: Duration,
    next: Instant,
}

/// A node behind its DTLS layers (see the module docs).
pub struct SecureNode<N> {
    inner: N,
    server: Option<DtlsLayer>,
    /// By address, in order: the order of their outputs is the same in every run (simulations repeat).
    peers: BTreeMap<SocketAddr, DtlsLayer>,
    client: Option<DtlsLayer>,
    plain: bool,
    /// The port DTLS records leave from.
    records: Port,
    /// The identity each server session proved (removed when it ends: at most the server's sessions).
    identities: HashMap<SocketAddr, Arc<[u8]>>,
    /// The addresses whose server session ended or moved away, oldest first (module docs).
    former: Former,
    report: Option<Report>,
    events: VecDeque<SecureEvent>,
}

/// Former `coaps://` clients remembered (module docs): as many as a server layer holds sessions by default.
pub const FORMER_PEERS: usize = 1024;

/// The addresses whose server session ended or moved away, at most [`FORMER_PEERS`], the oldest forgotten
/// first.
#[derive(Default)]
struct Former {
    set: HashSet<SocketAddr>,
    order: VecDeque<SocketAddr>,
}

impl Former {
    fn insert(&mut self, peer: SocketAddr) {
        if self.set.insert(peer) {
            self.order.push_back(peer);
        }
        while self.order.len() > FORMER_PEERS {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
    }

    /// Forgets `peer` (it has a session again, or speaks plain CoAP); its place in `order` goes with the
    /// next overflow.
    fn remove(&mut self, peer: SocketAddr) {
        if !self.set.is_empty() && self.set.remove(&peer) {
            self.order.retain(|p| *p != peer);
        }
    }

    fn contains(&self, peer: SocketAddr) -> bool {
        !self.set.is_empty() && self.set.contains(&peer)
    }
}

/// Which layer a plaintext datagram leaves through.
enum Route {
    Peer,
    Server,
    Client,
    Plain,
    Drop,
}

impl<N: Plaintext> SecureNode<N> {
    /// `inner` behind the layers `config` asks for, each keyed from `secret` (from a CSPRNG on real
    /// sockets, from the seed in a simulation). A configuration that cannot run is the caller's mistake.
    pub fn new(inner: N, config: SecureConfig, secret: [u8; 32]) -> Result<SecureNode<N>, ConfigError> {
        let serves = |c: &DtlsConfig| matches!(c.role, Role::Server(_));
        if config.server.as_ref().is_some_and(|c| !serves(c)) {
            return Err(ConfigError::ServerNotServing);
        }
        if config.client.as_ref().is_some_and(serves) {
            return Err(ConfigError::ClientServing { peer: None });
        }
        if let Some((peer, _)) = config.peers.iter().find(|(_, c)| serves(c)) {
            return Err(ConfigError::ClientServing { peer: Some(*peer) });
        }
        let any_layer = config.server.is_some() || config.client.is_some() || !config.peers.is_empty();
        if config.secure_port && !any_layer {
            return Err(ConfigError::SecurePortWithoutDtls);
        }
        let layer = |c: DtlsConfig, label: &[u8], n: u64| DtlsLayer::new(c, derive_secret(&secret, label, n));
        Ok(SecureNode {
            inner,
            server: config.server.map(|c| layer(c, b"corral-dtls server layer", 0)),
            peers: (config.peers.into_iter().enumerate())
                .map(|(i, (peer, c))| (peer, layer(c, b"corral-dtls peer layer", i as u64)))
                .collect(),
            client: config.client.map(|c| layer(c, b"corral-dtls client layer", 0)),
            plain: config.plain,
            records: if config.secure_port { Port::Secure } else { Port::Main },
            identities: HashMap::new(),
            former: Former::default(),
            report: config.report_every.map(|every| Report { every, next: Instant::ZERO }),
            events: VecDeque::new(),
        })
    }

    pub fn inner(&self) -> &N {
        &self.inner
    }

    pub fn inner_mut(&mut self) -> &mut N {
        &mut self.inner
    }

    fn layers(&self) -> impl Iterator<Item = &DtlsLayer> {
        self.server.iter().chain(self.peers.values()).chain(self.client.iter())
    }

    fn layers_mut(&mut self) -> impl Iterator<Item = &mut DtlsLayer> {
        self.server.iter_mut().chain(self.peers.values_mut()).chain(self.client.iter_mut())
    }

    /// The layers' counters, summed, and the sessions they hold.
    pub fn numbers(&self) -> DtlsNumbers {
        let mut numbers = DtlsNumbers::default();
        for layer in self.layers() {
            numbers.stats.add(&layer.stats());
            numbers.sessions += layer.sessions();
        }
        numbers
    }

    /// A datagram from `from` on `port`, which reached local address `local`.
    pub fn handle_datagram(&mut self, now: Instant, port: Port, from: SocketAddr, local: Option<IpAddr>, data: &[u8]) {
        let record = port == Port::Secure || !self.plain || is_dtls(data);
        if !record {
            if self.peers.contains_key(&from) {
                debug!(%from, "plain CoAP from a peer reached over coaps://; dropped");
            } else {
                self.former.remove(from);
                self.inner.handle_datagram(now, from, local, data);
            }
            return;
        }
        let layer = match (self.peers.get_mut(&from), &mut self.server, &mut self.client) {
            (Some(layer), _, _) => layer,
            (None, _, Some(client)) if client.has_session(from) => client,
            (None, Some(server), _) => server,
            (None, None, Some(client)) => client,
            (None, None, None) => {
                trace!(%from, "DTLS record on a socket that accepts no coaps:// clients; dropped");
                return;
            }
        };
        layer.handle_datagram(now, from, local, data);
        self.deliver(now, local);
    }

    /// An ICMP error says a datagram to `peer` (starting with `quoted`) was not delivered: a DTLS record,
    /// which the endpoint cannot match, fails every exchange with the peer.
    pub fn handle_unreachable(&mut self, now: Instant, peer: SocketAddr, quoted: &[u8]) {
        let quoted = (!is_dtls(quoted)).then_some(quoted);
        self.inner.handle_unreachable(now, peer, quoted)
    }

    /// Retransmits flights, closes idle sessions, runs the node's timers and reports the counters when
    /// due. A call before anything is due is harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        for layer in self.layers_mut() {
            layer.handle_timeout(now);
        }
        self.deliver(now, None);
        self.inner.handle_timeout(now);
        if let Some(r) = self.report.filter(|r| r.next <= now) {
            self.events.push_back(SecureEvent::Report(self.numbers()));
            self.report = Some(Report { next: now + r.every, ..r });
        }
    }

    /// The next datagram to send and the port it leaves from: the layers' records first, then the
    /// node's datagrams, each through the layer its destination takes (module docs).
    pub fn poll_transmit(&mut self, now: Instant) -> Option<(Port, Transmit)> {
        loop {
            let records = self.records;
            if let Some(t) = self.layers_mut().find_map(DtlsLayer::poll_transmit) {
                return Some((records, t));
            }
            let plain = self.inner.poll_transmit()?;
            let dst = plain.dst;
            let layer = match self.route(dst) {
                Route::Peer => self.peers.get_mut(&dst),
                Route::Server => self.server.as_mut(),
                Route::Client => self.client.as_mut(),
                Route::Plain => return Some((Port::Main, plain)),
                Route::Drop => None,
            };
            let Some(layer) = layer else {
                trace!(%dst, "datagram to a peer without DTLS credentials on a coaps://-only socket; dropped");
                continue;
            };
            let opens = !layer.is_server() && !layer.has_session(dst);
            layer.send(now, dst, &plain.payload);
            if opens && layer.has_session(dst) {
                self.events.push_back(SecureEvent::Started { peer: dst });
            }
            self.deliver(now, None);
        }
    }

    fn route(&self, dst: SocketAddr) -> Route {
        if self.peers.contains_key(&dst) {
            Route::Peer
        } else if self.server.as_ref().is_some_and(|s| s.is_connected(dst)) {
            Route::Server
        } else if self.client.is_some() {
            Route::Client
        } else if self.former.contains(dst) {
            debug!(%dst, "plaintext for a coaps:// client whose session ended; dropped");
            Route::Drop
        } else if self.plain {
            Route::Plain
        } else if self.server.is_some() {
            // A coaps://-only server: its layer queues for a handshake under way and drops the rest.
            Route::Server
        } else {
            Route::Drop
        }
    }

    /// What the node waits for: a session that connected, failed or ended; a handshake this side began;
    /// the counters' report.
    pub fn poll_event(&mut self) -> Option<SecureEvent> {
        self.events.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) must next be called: the earliest of the node's
    /// timers, every layer's and the counters' report.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let layers = self.layers().filter_map(DtlsLayer::poll_timeout);
        layers.chain(self.inner.poll_timeout()).chain(self.report.map(|r| r.next)).min()
    }

    /// Closes every session with close_notify (a client that wants a new handshake, a driver shutting
    /// down).
    pub fn close_all(&mut self, now: Instant) {
        for layer in self.layers_mut() {
            layer.close_all(now);
        }
        self.deliver(now, None);
    }

    /// Hands the layers' events to the node and the driver, and their plaintext to the node.
    fn deliver(&mut self, now: Instant, local: Option<IpAddr>) {
        let SecureNode { inner, server, peers, client, identities, former, events, .. } = self;
        let layers = server.iter_mut().map(|l| (l, true));
        for (layer, serving) in layers.chain(peers.values_mut().chain(client.iter_mut()).map(|l| (l, false))) {
            while let Some(event) = layer.poll_event() {
                match &event {
                    DtlsEvent::Connected { peer, identity } if serving => {
                        former.remove(*peer);
                        if let Some(id) = identity {
                            identities.insert(*peer, id.as_slice().into());
                        }
                    }
                    DtlsEvent::Connected { .. } => {}
                    DtlsEvent::Failed { peer, reason } => {
                        identities.remove(peer);
                        inner.fail_peer(now, *peer, RequestError::Dtls(reason.summary()));
                    }
                    DtlsEvent::Closed { peer } => {
                        identities.remove(peer);
                        if serving {
                            former.insert(*peer);
                        }
                    }
                    DtlsEvent::Moved { from, to } => {
                        if let Some(id) = identities.remove(from) {
                            identities.insert(*to, id);
                        }
                        if serving {
                            former.remove(*to);
                            former.insert(*from);
                        }
                    }
                }
                events.push_back(SecureEvent::Session(event));
            }
            while let Some((peer, data)) = layer.poll_plaintext() {
                let identity = identities.get(&peer).cloned();
                let named = identity.is_some();
                if named {
                    inner.set_datagram_identity(identity);
                }
                inner.handle_datagram(now, peer, local, &data);
                if named {
                    inner.set_datagram_identity(None);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PskKeys;
    use corral_proto::wire::{Code, ContentFormat, Message, MessageId, MessageType, OptionNumber, Token};
    use corral_proto::{EndpointConfig, Event, Request, Response, SendParams};

    const SERVER: &str = "10.0.0.1:5684";
    const CLIENT: &str = "10.0.0.2:40000";
    const PLAIN: &str = "10.0.0.3:40001";

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn psk_server() -> DtlsConfig {
        let mut keys = PskKeys::new();
        keys.insert(b"alice".to_vec(), b"secretPSK".to_vec());
        DtlsConfig::new(Role::Server(Arc::new(keys)))
    }

    fn psk_client(key: &[u8]) -> DtlsConfig {
        DtlsConfig::new(Role::Client { identity: b"alice".to_vec(), key: key.to_vec() })
    }

    fn endpoint(seed: u64) -> Endpoint {
        Endpoint::new(EndpointConfig { seed, ..EndpointConfig::default() })
    }

    /// Moves every datagram between the two until neither has anything to send, jumping to the next
    /// timer when both are quiet, up to `until`; `b_at` is where `b`'s datagrams arrive from `a`'s view.
    fn run(a: &mut SecureNode<Endpoint>, b: &mut SecureNode<Endpoint>, now: &mut Instant, until: Instant) {
        let (a_addr, b_addr) = (addr(CLIENT), addr(SERVER));
        loop {
            let mut moved = false;
            while let Some((port, t)) = a.poll_transmit(*now) {
                assert_eq!(t.dst, b_addr);
                b.handle_datagram(*now, port, a_addr, None, &t.payload);
                moved = true;
            }
            while let Some((port, t)) = b.poll_transmit(*now) {
                if t.dst == a_addr {
                    a.handle_datagram(*now, port, b_addr, None, &t.payload);
                }
                moved = true;
            }
            if moved {
                continue;
            }
            let next = [a.poll_timeout(), b.poll_timeout()].into_iter().flatten().min();
            match next {
                Some(t) if t <= until => {
                    *now = t.max(*now);
                    a.handle_timeout(*now);
                    b.handle_timeout(*now);
                }
                _ => return,
            }
        }
    }

    fn answer_everything(ep: &mut Endpoint, now: Instant) {
        while let Some(e) = ep.poll_event() {
            if let Event::Request(r) = e {
                let body =
                    r.peer_identity.as_deref().map(|i| String::from_utf8_lossy(i).into_owned()).unwrap_or_default();
                let _ = ep.respond(now, r.id, Response::content(ContentFormat::TEXT_PLAIN, body));
            }
        }
    }

    #[test]
    fn plain_coap_and_dtls_share_one_port_and_one_node() {
        let config = SecureConfig { server: Some(psk_server()), plain: true, ..SecureConfig::default() };
        let mut server = SecureNode::new(endpoint(1), config, [1; 32]).unwrap();
        let client_config = SecureConfig { client: Some(psk_client(b"secretPSK")), ..SecureConfig::default() };
        let mut client = SecureNode::new(endpoint(2), client_config, [2; 32]).unwrap();
        let mut now = Instant::ZERO;
        let id = client.inner_mut().request(now, addr(SERVER), Request::get("/who"), SendParams::default()).unwrap();
        // The handshake, the request, the answer with the identity the session proved.
        for _ in 0..4 {
            run(&mut client, &mut server, &mut now, Instant::ZERO + Duration::from_secs(5));
            answer_everything(server.inner_mut(), now);
        }
        let got = std::iter::from_fn(|| client.inner_mut().poll_event()).find_map(|e| match e {
            Event::Response { id: got, response, .. } if got == id => Some(response),
            _ => None,
        });
        let response = got.expect("the answer came over DTLS");
        assert_eq!(response.code, Code::CONTENT);
        assert_eq!(response.payload, b"alice", "the request carried the PSK identity its session proved");
        assert_eq!(server.numbers().stats.handshakes_done, 1);
        // Plain CoAP on the same port reaches the same node, with no identity.
        let mut plain = Message::new(MessageType::Non, Code::GET, MessageId(7), Token::new(b"t").unwrap());
        plain.options.push(OptionNumber::URI_PATH, b"who");
        let bytes = plain.encode();
        server.handle_datagram(now, Port::Main, addr(PLAIN), None, &bytes);
        answer_everything(server.inner_mut(), now);
        let (port, answer) = server.poll_transmit(now).expect("an answer to the plain request");
        assert_eq!((port, answer.dst), (Port::Main, addr(PLAIN)));
        assert!(!is_dtls(&answer.payload), "answered in plaintext");
    }

    #[test]
    fn a_failed_handshake_fails_the_exchanges_that_waited_for_it() {
        let config = SecureConfig { server: Some(psk_server()), ..SecureConfig::default() };
        let mut server = SecureNode::new(endpoint(1), config, [1; 32]).unwrap();
        let client_config = SecureConfig { client: Some(psk_client(b"wrong key")), ..SecureConfig::default() };
        let mut client = SecureNode::new(endpoint(2), client_config, [2; 32]).unwrap();
        let mut now = Instant::ZERO;
        let id = client.inner_mut().request(now, addr(SERVER), Request::get("/x"), SendParams::default()).unwrap();
        run(&mut client, &mut server, &mut now, Instant::ZERO + Duration::from_secs(60));
        let events: Vec<SecureEvent> = std::iter::from_fn(|| client.poll_event()).collect();
        assert_eq!(events.first(), Some(&SecureEvent::Started { peer: addr(SERVER) }), "{events:?}");
        assert!(events.iter().any(|e| matches!(e, SecureEvent::Session(DtlsEvent::Failed { .. }))), "{events:?}");
        let failed = std::iter::from_fn(|| client.inner_mut().poll_event()).find_map(|e| match e {
            Event::Failed { id: got, error } if got == id => Some(error),
            _ => None,
        });
        assert_eq!(failed, Some(RequestError::Dtls("the keys do not match, or the identity is unknown")));
    }

    #[test]
    fn a_coaps_client_whose_session_ended_is_never_sent_plain_coap() {
        // corral serve --dtls ADDR: coap:// on the main port, coaps:// on a port of its own, one node.
        let config =
            SecureConfig { server: Some(psk_server()), plain: true, secure_port: true, ..SecureConfig::default() };
        let mut server = SecureNode::new(endpoint(1), config, [1; 32]).unwrap();
        let client_config = SecureConfig { client: Some(psk_client(b"secretPSK")), ..SecureConfig::default() };
        let mut client = SecureNode::new(endpoint(2), client_config, [2; 32]).unwrap();
        let mut now = Instant::ZERO;
        client.inner_mut().request(now, addr(SERVER), Request::get("/x"), SendParams::default()).unwrap();
        for _ in 0..4 {
            run(&mut client, &mut server, &mut now, Instant::ZERO + Duration::from_secs(5));
            answer_everything(server.inner_mut(), now);
        }
        assert_eq!(server.numbers().sessions, 1);
        client.close_all(now);
        let until = now + Duration::from_millis(1);
        run(&mut client, &mut server, &mut now, until);
        assert_eq!(server.numbers().sessions, 0, "close_notify ended the server's session");
        // What the node still has for the former coaps:// client (here a request of its own) is dropped;
        // the same to a peer that never spoke DTLS leaves in plaintext.
        let params = SendParams { confirmable: false, ..SendParams::default() };
        server.inner_mut().request(now, addr(CLIENT), Request::get("/n"), params).unwrap();
        assert_eq!(server.poll_transmit(now).map(|(_, t)| t.dst), None, "no plaintext to the former coaps:// client");
        server.inner_mut().request(now, addr(PLAIN), Request::get("/n"), params).unwrap();
        let (port, plain) = server.poll_transmit(now).expect("plain CoAP to a coap:// peer");
        assert_eq!((port, plain.dst, is_dtls(&plain.payload)), (Port::Main, addr(PLAIN), false));
        // Once the former client speaks plain CoAP itself, it is answered in plain CoAP.
        let mut ping = Message::new(MessageType::Non, Code::GET, MessageId(9), Token::new(b"p").unwrap());
        ping.options.push(OptionNumber::URI_PATH, b"who");
        server.handle_datagram(now, Port::Main, addr(CLIENT), None, &ping.encode());
        answer_everything(server.inner_mut(), now);
        let (port, answer) = server.poll_transmit(now).expect("an answer in plain CoAP");
        assert_eq!((port, answer.dst, is_dtls(&answer.payload)), (Port::Main, addr(CLIENT), false));
    }

    #[test]
    fn records_leave_by_the_secure_port_and_plaintext_by_the_main_one() {
        let config = SecureConfig {
            client: Some(psk_client(b"secretPSK")),
            plain: true,
            secure_port: true,
            ..SecureConfig::default()
        };
        let mut node = SecureNode::new(endpoint(2), config, [2; 32]).unwrap();
        let now = Instant::ZERO;
        node.inner_mut().request(now, addr(SERVER), Request::get("/x"), SendParams::default()).unwrap();
        let (port, hello) = node.poll_transmit(now).expect("a ClientHello");
        assert_eq!(port, Port::Secure);
        assert!(is_dtls(&hello.payload));
    }

    #[test]
    fn the_counters_are_reported_on_the_nodes_own_timer() {
        let every = Duration::from_millis(500);
        let config = SecureConfig { server: Some(psk_server()), report_every: Some(every), ..SecureConfig::default() };
        let mut node = SecureNode::new(endpoint(1), config, [1; 32]).unwrap();
        assert_eq!(node.poll_timeout(), Some(Instant::ZERO), "the first report is due at once");
        node.handle_timeout(Instant::ZERO);
        assert!(matches!(node.poll_event(), Some(SecureEvent::Report(n)) if n.sessions == 0));
        assert_eq!(node.poll_timeout(), Some(Instant::ZERO + every));
    }

    #[test]
    fn a_configuration_that_cannot_run_is_refused() {
        let wrong = SecureConfig { server: Some(psk_client(b"k")), ..SecureConfig::default() };
        assert_eq!(SecureNode::new(endpoint(1), wrong, [0; 32]).err(), Some(ConfigError::ServerNotServing));
        let wrong = SecureConfig { peers: vec![(addr(SERVER), psk_server())], ..SecureConfig::default() };
        let e = SecureNode::new(endpoint(1), wrong, [0; 32]).err();
        assert_eq!(e, Some(ConfigError::ClientServing { peer: Some(addr(SERVER)) }));
        let wrong = SecureConfig { secure_port: true, plain: true, ..SecureConfig::default() };
        assert_eq!(SecureNode::new(endpoint(1), wrong, [0; 32]).err(), Some(ConfigError::SecurePortWithoutDtls));
    }
}
