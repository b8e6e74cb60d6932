//! The sans-IO CoAP endpoint: message layer and request/response exchanges over one datagram transport.
//!
//! # What it owns
//! - The message layer (RFC 7252 §4): CON retransmission with randomised exponential back-off, ACK/RST
//!   matching, message-ID allocation per peer, duplicate detection per (peer, message ID) that answers a
//!   duplicate CON with the reply it sent before, RST for what cannot be processed, CoAP ping.
//! - Exchanges (§5): tokens, piggybacked and separate responses, NON requests and responses, NSTART with a
//!   queue beyond it, timeouts and resets, cancellation; multicast requests with a response window and the
//!   server side of multicast (leisure, no error responses, §8).
//! - Bounded state: every table has a limit in [`Limits`] and a defined behaviour when it is full.
//!
//! # What it must never do
//! Read a clock, open a socket, or draw randomness other than from the seeds in [`EndpointConfig`]; or
//! draw a value a peer sees and must not predict (token, first message ID, Echo value, Request-Tag) from
//! anything but the [`SecretRng`].
//!
//! # Driving it
//! Inputs: [`Endpoint::handle_datagram`], [`Endpoint::handle_timeout`], and the application calls
//! [`Endpoint::request`], [`Endpoint::respond`], [`Endpoint::cancel`], [`Endpoint::ping`].
//! Outputs, drained after every input: [`Endpoint::poll_event`], [`Endpoint::poll_transmit`], then
//! [`Endpoint::poll_timeout`] for the next wake-up. A spurious `handle_timeout` is harmless.
//!
//! # Where each part lives
//! This file holds the endpoint's tables and its outputs. The methods over them are split by concern:
//! `receive.rs` (a datagram in: ACK, RST, duplicates, responses), `inbound.rs` (a request in: limits,
//! Echo, the server layer), `respond.rs` (answers and notifications out), `client.rs` (requests out
//! and their exchanges), `timers.rs` (retransmission and deadlines), `peers.rs` (per-peer state and
//! amplification credit). The transport-neutral exchange code that CoAP over TCP (`crate::tcp`) shares
//! is in `block.rs` (RFC 7959), `observe.rs` (RFC 7641) and `server.rs` (a request's path through the
//! server side); neither transport is chosen here — `crate::Transports` does that by the id.

pub(crate) mod block;
mod client;
mod config;
mod credit;
mod inbound;
pub(crate) mod observe;
mod peers;
mod receive;
mod respond;
pub(crate) mod server;
mod timers;

pub use block::{BlockConfig, TransferProgress};
pub use config::{AmplificationLimit, EndpointConfig, Limits};
pub use observe::ObservePolicy;

use crate::message::{InboundId, IncomingRequest, Request, RequestError, RequestId, Response};
use crate::params::TransmissionParams;
use crate::rng::{Rng, SecretRng};
use crate::time::{Duration, Instant};
use block::Transfer;
use corral_wire::{Code, Message, MessageId, MessageType, OptionNumber, Options, Packet, Token};
use observe::{Freshness, ObserverKey};
use peers::PeerTable;
use server::{RequestMeta, ServerLayer};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};

pub(crate) type Map<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

pub(crate) fn new_map<K, V>(seed: u64) -> Map<K, V> {
    HashMap::with_hasher(foldhash::fast::FixedState::with_seed(seed))
}

/// A datagram to send.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a datagram the endpoint produced: send it, or say why it is dropped"]
pub struct Transmit {
    pub dst: SocketAddr,
    pub payload: Vec<u8>,
    /// The local address to send from, when it matters: the address the peer sent its request to, so
    /// that a socket bound to a wildcard address answers from it (IP_PKTINFO / IPV6_PKTINFO) and clients
    /// that check the source accept the answer. `None`: the socket's (or the kernel's) choice.
    pub src: Option<IpAddr>,
}

/// Something the application must know about.
#[derive(Debug, Clone)]
pub enum Event {
    /// A request arrived; answer it with [`Endpoint::respond`].
    Request(IncomingRequest),
    /// A response to a request this endpoint sent. For a unicast request this ends the exchange; a
    /// multicast request may get many until [`Event::MulticastDone`].
    Response { id: RequestId, from: SocketAddr, response: Response },
    /// A request ended without a (further) response.
    Failed { id: RequestId, error: RequestError },
    /// The response window of a multicast request closed.
    MulticastDone { id: RequestId },
    /// A ping was answered (with RST, as RFC 7252 §4.3 prescribes).
    Pong { id: RequestId, from: SocketAddr },
    /// The endpoint ended an observation of `path` by itself: the observer rejected or did not acknowledge
    /// a notification, its notification bounced, it deregistered, gave way to another observer, or its
    /// connection closed. A service that keeps state per observer forgets it (a [`Node`](crate::Node)
    /// tells the service mounted at `path`, [`Service::observer_gone`](crate::Service::observer_gone)).
    ObserverGone { path: String, peer: SocketAddr, token: Token },
}

/// Counters for diagnostics, benchmarks and the lab.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub datagrams_in: u64,
    pub malformed_in: u64,
    pub duplicates_in: u64,
    pub requests_in: u64,
    pub responses_in: u64,
    pub transmits: u64,
    pub retransmissions: u64,
    pub timeouts: u64,
    pub resets_in: u64,
    pub resets_out: u64,
    pub overload_rejections: u64,
    pub peers_evicted: u64,
    /// Peers forgotten with pending server-side state (unverified, table full; see `endpoint::peers`).
    pub peers_purged: u64,
    /// Requests of unverified peers dropped to make room in a full inbound table.
    pub displaced: u64,
    /// 4.01 Echo challenges sent instead of a response too large for an unverified source (RFC 9175).
    pub echo_challenges: u64,
    /// Answers (retransmissions, notifications, resent replies) not sent: over an unverified source's
    /// reflection credit (see [`AmplificationLimit`]).
    pub answers_withheld: u64,
    pub dedup_evicted: u64,
    /// Notifications dropped by the freshness rule (RFC 7641 §3.4).
    pub stale_notifications: u64,
    /// Observers removed because a notification was rejected or went unacknowledged.
    pub observers_lost: u64,
}

/// How full each of the endpoint's bounded tables is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableSizes {
    pub peers: usize,
    pub client_exchanges: usize,
    pub inbound_exchanges: usize,
    /// CONs awaiting ACK and NONs remembered for RST matching.
    pub tracked_messages: usize,
    pub dedup_entries: usize,
    pub uploads: usize,
    pub observers: usize,
    pub delayed_responses: usize,
    /// Entries in the timer heap and the deadline queues (stale ones included).
    pub timers: usize,
}

/// What a reply to a received message looks like, remembered for duplicates.
#[derive(Debug, Clone)]
enum Reply {
    /// The application has not answered yet.
    Pending(InboundId),
    /// The bytes sent in reply (ACK, piggybacked response, RST), resent for a duplicate CON.
    Sent(Vec<u8>),
    /// Nothing to resend (a NON, or a suppressed reply).
    Nothing,
}

#[derive(Debug)]
struct DedupEntry {
    mid: MessageId,
    expires: Instant,
    reply: Reply,
}

/// Who a message we sent belongs to, so that its ACK, RST or timeout reaches the right place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Request(RequestId),
    Ping(RequestId),
    /// A separate (CON) response; nothing waits for it but the peer's reference.
    Response,
    /// An Observe notification; its RST or timeout removes the observer.
    Notification(ObserverKey),
}

#[derive(Debug)]
struct Retransmit {
    bytes: Vec<u8>,
    count: u8,
    timeout: Duration,
    next: Instant,
}

#[derive(Debug)]
struct Sent {
    owner: Owner,
    /// Present for CONs until ACK, RST or give-up; NONs are remembered only to match a RST.
    retransmit: Option<Retransmit>,
}

#[derive(Debug)]
enum ClientState {
    /// Waiting behind NSTART.
    Queued,
    /// A CON was sent; waiting for its ACK (or a response that implies it).
    ExpectAck { mid: MessageId },
    /// Acknowledged (empty ACK) or sent NON: waiting for the response.
    ExpectResponse { mid: MessageId, until: Instant },
    /// A multicast request: collecting responses until the window closes.
    Collecting { mid: MessageId, until: Instant },
    /// An Observe registration that succeeded: notifications arrive until cancel, deregistration or a
    /// final response.
    Observing,
}

#[derive(Debug)]
struct ClientExchange {
    dst: SocketAddr,
    token: Token,
    confirmable: bool,
    /// Responses are collected until `multicast_window` closes: a request to a multicast address, or one
    /// through a proxy to a group (it carries Multicast-Timeout; only `dst`, the proxy, may answer it).
    multicast: bool,
    /// Counts towards the peer's NSTART.
    counted: bool,
    deadline: Option<Instant>,
    multicast_window: Duration,
    state: ClientState,
    /// The message of the current round, kept to build follow-up block requests and deregistrations.
    msg: Box<Message>,
    /// Set when the request registers for Observe (RFC 7641): notifications are checked for freshness.
    observe: Option<Freshness>,
    /// A block-wise transfer (RFC 7959) this exchange is carrying out, one round per block.
    transfer: Option<Box<Transfer>>,
    /// This exchange fetches the remaining blocks of a notification of that observation.
    parent: Option<RequestId>,
    /// Block size exponent for this exchange's transfers.
    szx: u8,
}

impl ClientExchange {
    /// The earliest time this exchange needs attention.
    fn wake_at(&self) -> Option<Instant> {
        let state = match self.state {
            ClientState::ExpectResponse { until, .. } | ClientState::Collecting { until, .. } => Some(until),
            _ => None,
        };
        match (state, self.deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InboundKind {
    Request,
    /// The application renders a notification for this observer.
    Notification(ObserverKey),
}

#[derive(Debug)]
struct Inbound {
    kind: InboundKind,
    /// A GET or FETCH (or a notification): running its handler again is harmless, so an answer beyond
    /// the reflection bound may become an Echo challenge that the client repeats the request for. After
    /// an unsafe request's handler acted, the answer itself waits for credit instead.
    safe: bool,
    /// Block-wise and Observe state of the request, for its response.
    meta: RequestMeta,
    peer: SocketAddr,
    mid: MessageId,
    token: Token,
    con: bool,
    multicast: bool,
    /// An empty ACK went out: the response must be a separate CON.
    acked: bool,
    /// No-Response (RFC 7967) bits, if the option was present.
    no_response: Option<u8>,
    /// For multicast requests: not before this time (leisure, RFC 7252 §8.2).
    not_before: Instant,
    expires: Instant,
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    Retransmit(SocketAddr, MessageId),
    Exchange(RequestId),
}

#[derive(Debug)]
struct Delayed {
    at: Instant,
    seq: u64,
    transmit: Transmit,
}

impl PartialEq for Delayed {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Delayed {}
impl PartialOrd for Delayed {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Delayed {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// A CoAP endpoint over one datagram transport (UDP or a simulated link). See the module docs.
pub struct Endpoint {
    config: EndpointConfig,
    /// Non-secret draws: back-off jitter, leisure, Observe sequence starts.
    rng: Rng,
    /// Everything a peer sees and must not predict: tokens, first message IDs, Echo values, Request-Tags.
    secret: SecretRng,
    peer_params: Map<SocketAddr, TransmissionParams>,
    /// Per-peer state and the reflection credit of unverified sources.
    peers: PeerTable,
    sent: Map<(SocketAddr, MessageId), Sent>,
    /// NONs we sent, forgotten after NON_LIFETIME (FIFO: the lifetime is constant).
    sent_non_expiry: VecDeque<(Instant, SocketAddr, MessageId)>,
    exchanges: Map<RequestId, ClientExchange>,
    tokens: Map<Token, RequestId>,
    inbound: Map<InboundId, Inbound>,
    /// Every received request is checked once when the piggyback window ends (FIFO: the window is
    /// constant): a CON still unanswered then gets its empty ACK, and any request still unanswered moves
    /// to `inbound_expiry`. Answered requests leave no trace beyond the window, so memory does not grow
    /// with the request rate times EXCHANGE_LIFETIME.
    piggyback_deadlines: VecDeque<(Instant, InboundId)>,
    /// Requests the application has not answered after the piggyback window, dropped after
    /// EXCHANGE_LIFETIME (FIFO).
    inbound_expiry: VecDeque<(Instant, InboundId)>,
    timers: BinaryHeap<Reverse<(Instant, Timer)>>,
    delayed: BinaryHeap<Reverse<Delayed>>,
    transmits: VecDeque<Transmit>,
    events: VecDeque<Event>,
    next_request_id: u64,
    next_inbound_id: u64,
    seq: u64,
    stats: Stats,
    server: ServerLayer,
    /// The DTLS identity of the datagram being handled, if the driver's DTLS layer gave one (see
    /// [`Endpoint::set_datagram_identity`]).
    datagram_identity: Option<std::sync::Arc<[u8]>>,
}

impl Endpoint {
    pub fn new(config: EndpointConfig) -> Endpoint {
        let rng = Rng::new(config.seed);
        let mut secret = SecretRng::keyed(config.secret_seed, config.seed, 0);
        // Keys of tables indexed by what peers send (addresses, tokens): not to be guessed either.
        let hash_seed = secret.next_u64();
        Endpoint {
            peer_params: new_map(hash_seed),
            peers: PeerTable::new(hash_seed, usize::from(config.shard.count())),
            sent: new_map(hash_seed),
            sent_non_expiry: VecDeque::new(),
            exchanges: new_map(hash_seed),
            tokens: new_map(hash_seed),
            inbound: new_map(hash_seed),
            piggyback_deadlines: VecDeque::new(),
            inbound_expiry: VecDeque::new(),
            timers: BinaryHeap::new(),
            delayed: BinaryHeap::new(),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            next_request_id: 0,
            next_inbound_id: 0,
            seq: 0,
            stats: Stats::default(),
            server: ServerLayer::new(hash_seed),
            datagram_identity: None,
            rng,
            secret,
            config,
        }
    }

    /// A draw from the secret generator, for values a service hands out that must not be guessed (see
    /// [`Context::secret_u64`](crate::Context::secret_u64)).
    pub(crate) fn secret_u64(&mut self) -> u64 {
        self.secret.next_u64()
    }

    pub fn config(&self) -> &EndpointConfig {
        &self.config
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Transmission parameters for one peer, replacing the endpoint's (RFC 7252 §4.8: they may differ per
    /// peer). `None` restores the default.
    pub fn set_peer_params(&mut self, peer: SocketAddr, params: Option<TransmissionParams>) {
        match params {
            Some(p) => {
                self.peer_params.insert(peer, p);
            }
            None => {
                self.peer_params.remove(&peer);
            }
        }
    }

    fn params_for(&self, peer: &SocketAddr) -> TransmissionParams {
        self.peer_params.get(peer).copied().unwrap_or(self.config.params)
    }

    /// Sizes of the internal tables, for tests and diagnostics.
    pub fn table_sizes(&self) -> TableSizes {
        TableSizes {
            peers: self.peers.len(),
            client_exchanges: self.exchanges.len(),
            inbound_exchanges: self.inbound.len(),
            tracked_messages: self.sent.len(),
            dedup_entries: self.peers.dedup_entries(),
            uploads: self.server.uploads(),
            observers: self.server.observers.len(),
            delayed_responses: self.delayed.len(),
            timers: self.timers.len()
                + self.piggyback_deadlines.len()
                + self.inbound_expiry.len()
                + self.sent_non_expiry.len(),
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Outputs
    // ---------------------------------------------------------------------------------------------

    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        let mut t = self.transmits.pop_front()?;
        if t.src.is_none() {
            t.src = self.peers.get(&t.dst).and_then(|p| p.local);
        }
        self.stats.transmits += 1;
        Some(t)
    }

    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front().or_else(|| {
            let (path, (peer, token)) = self.server.observers.pop_gone()?;
            Some(Event::ObserverGone { path, peer, token })
        })
    }

    /// The next time [`Endpoint::handle_timeout`] must be called. May be early (a stale timer); never late.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let candidates = [
            self.timers.peek().map(|Reverse((t, _))| *t),
            self.delayed.peek().map(|Reverse(d)| d.at),
            self.piggyback_deadlines.front().map(|(t, _)| *t),
            self.inbound_expiry.front().map(|(t, _)| *t),
            self.sent_non_expiry.front().map(|(t, _, _)| *t),
        ];
        candidates.into_iter().flatten().min()
    }
}

/// The message for a request; the message ID is set when it is sent.
fn request_message(mtype: MessageType, token: Token, request: Request) -> Message {
    Message {
        mtype,
        code: request.method,
        mid: MessageId(0),
        token,
        options: request.options,
        payload: request.payload,
    }
}

fn to_response(packet: &Packet<&[u8]>) -> Response {
    Response { code: packet.code(), options: packet.options().collect::<Options>(), payload: packet.payload().to_vec() }
}

/// 4.01 Unauthorized with a fresh Echo value (RFC 9175 §2.4): prove your address by repeating the request
/// with it. No diagnostic payload: the challenge goes to an unverified source and must fit three times
/// its request (see `Endpoint::bound_answer`).
fn echo_challenge(value: [u8; 8]) -> Response {
    Response::new(Code::UNAUTHORIZED).with_option(OptionNumber::ECHO, &value)
}

/// Whether a response must not be sent (RFC 7967 No-Response; RFC 7252 §8.2 for errors to multicast).
fn suppressed(code: Code, no_response: Option<u8>, multicast: bool) -> bool {
    let class_bit = match code.class() {
        2 => 0x02,
        4 => 0x08,
        5 => 0x10,
        _ => 0,
    };
    match no_response {
        Some(bits) => bits & class_bit != 0,
        None => multicast && code.is_error(),
    }
}
