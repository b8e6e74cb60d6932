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

pub(crate) mod block;
mod client;
mod config;
mod credit;
mod inbound;
pub(crate) mod observe;
mod peers;
pub(crate) mod server;
mod timers;

pub use block::{BlockConfig, TransferProgress};
pub use config::{AmplificationLimit, EndpointConfig, Limits};
pub use observe::ObservePolicy;

use crate::message::{
    InboundId, IncomingRequest, Request, RequestError, RequestId, Response, SendParams, StartError, Transport,
    UnknownExchange,
};
use crate::params::TransmissionParams;
use crate::rng::{Rng, SecretRng};
use crate::time::{Duration, Instant};
use block::{Step, Transfer};
use corral_wire::{Code, Message, MessageId, MessageType, OptionNumber, Options, Packet, Token};
use observe::{Freshness, ObserverKey};
use peers::PeerTable;
use server::{Incoming, RequestMeta, ServerLayer};
use std::cmp::Reverse;
use std::collections::hash_map::Entry;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use tracing::{debug, info, trace, warn};

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

    // ---------------------------------------------------------------------------------------------
    // Server side
    // ---------------------------------------------------------------------------------------------

    /// Answers a received request: piggybacked on the ACK if the CON is not acknowledged yet, as a separate
    /// CON if it is, as a NON for a NON request (after leisure for a multicast request). Errors to multicast
    /// requests and classes suppressed by No-Response are not sent (RFC 7252 §8.2, RFC 7967).
    ///
    /// On the way out the endpoint registers an observer if the request asked for it and the response is
    /// marked [`Response::observable`], echoes Block1 for a completed upload, and sends a body larger than
    /// one block as the Block2 block the client asked for (RFC 7959).
    pub fn respond(&mut self, now: Instant, id: InboundId, response: Response) -> Result<(), UnknownExchange> {
        let mut inb = self.inbound.remove(&id).ok_or(UnknownExchange)?;
        // The peer is looked up once for the whole answer.
        let slot = self.peers.slot_of(&inb.peer);
        if let Some(slot) = slot {
            let peer = self.peers.get_mut(slot);
            match inb.kind {
                InboundKind::Request => peer.release_inbound(),
                InboundKind::Notification(_) => peer.release_ref(),
            }
        }
        self.forget_answered_deadlines();
        if let InboundKind::Notification(key) = inb.kind {
            self.send_notification(now, &inb, key, response);
            return Ok(());
        }
        let meta = std::mem::take(&mut inb.meta);
        let registers = meta.observe.is_some();
        let (block, policy) = (self.config.block, self.config.observe);
        let verified =
            self.config.amplification.is_none() || slot.is_some_and(|slot| self.peers.get_mut(slot).verified);
        let rendered = self.server.on_response(
            now,
            &block,
            &policy,
            &mut self.rng,
            (inb.peer, inb.token),
            meta,
            response,
            0,
            verified,
        );
        let response = match rendered {
            Some(r) => r,
            None => match slot {
                Some(slot) => echo_challenge(self.give_echo(now, slot)),
                None => return Ok(()),
            },
        };
        let registered = registers && response.options.contains(OptionNumber::OBSERVE);
        self.send_response(now, &inb, slot, response, registered);
        Ok(())
    }

    /// Sends one more response to a request this endpoint has already answered: a NON with the request's
    /// token and a message ID of its own, paid for like any answer within the reflection bound of an
    /// unverified source. A proxy that carries one request to a group relays each member's answer this
    /// way (draft-ietf-core-groupcomm-proxy §5.4.1: the first over the exchange, later ones separately
    /// with the same token); the client collects them as it collects a multicast request's. Block-wise
    /// and Observe options are the caller's to leave out.
    pub fn respond_again(&mut self, now: Instant, peer: SocketAddr, token: Token, response: Response) {
        let Some(slot) = self.peer_slot(peer) else {
            warn!(%peer, "further response dropped: peer table full");
            return;
        };
        let mid = self.peers.next_mid(slot, self.config.shard);
        trace!(%peer, code = %response.code, "respond again");
        let msg = Message {
            mtype: MessageType::Non,
            code: response.code,
            mid,
            token,
            options: response.options,
            payload: response.payload,
        };
        self.push_answer_at(now, slot, Transmit { dst: peer, payload: msg.encode(), src: None });
    }

    /// Drops the piggyback deadlines at the front of the queue whose requests are answered: they would
    /// only wake the driver to do nothing (under a steady load, once per request, one window after it),
    /// and requests are mostly answered in the order they came.
    fn forget_answered_deadlines(&mut self) {
        while let Some((_, id)) = self.piggyback_deadlines.front() {
            if self.inbound.contains_key(id) {
                break;
            }
            self.piggyback_deadlines.pop_front();
        }
    }

    /// Sends a response (or suppresses it) the way the request arrived, within the reflection bound for an
    /// unverified source (see [`AmplificationLimit`]): a response the bound replaces with an Echo challenge
    /// does not register the observer it would have (`registered`).
    fn send_response(&mut self, now: Instant, inb: &Inbound, slot: Option<u32>, response: Response, registered: bool) {
        let suppressed = suppressed(response.code, inb.no_response, inb.multicast);
        trace!(peer = %inb.peer, code = %response.code, suppressed, "respond");
        let mut msg = Message {
            mtype: MessageType::Ack,
            code: response.code,
            mid: inb.mid,
            token: inb.token,
            options: response.options,
            payload: response.payload,
        };
        // An unsafe request's effect has happened: its answer is not replaced (repeating the request with
        // an Echo value would repeat the effect); beyond the bound it waits for the client's retransmission.
        if let Some(slot) = slot.filter(|_| !suppressed && !inb.multicast && inb.safe) {
            if self.bound_answer(now, slot, inb.peer, &mut msg) && registered {
                self.server.observers.remove(&(inb.peer, inb.token));
            }
        }
        if inb.con && !inb.acked {
            let bytes = if suppressed { Message::empty(MessageType::Ack, inb.mid).encode() } else { msg.encode() };
            self.remember_reply(slot, inb.mid, Reply::Sent(bytes.clone()));
            // Not sent now when over the credit: the client's retransmission (earning more) gets it.
            let transmit = Transmit { dst: inb.peer, payload: bytes, src: None };
            match slot {
                Some(slot) => self.push_answer_at(now, slot, transmit),
                None => self.push_answer(now, transmit),
            };
            return;
        }
        if suppressed {
            return;
        }
        let Some(slot) = slot.or_else(|| self.peer_slot(inb.peer)) else {
            warn!(peer = %inb.peer, "response dropped: peer table full");
            return;
        };
        msg.mid = self.peers.next_mid(slot, self.config.shard);
        if inb.con {
            // Separate response (RFC 7252 §5.2.2): a CON of its own, retransmitted until acknowledged.
            msg.mtype = MessageType::Con;
            let bytes = msg.encode();
            self.send_reliable(now, inb.peer, msg.mid, Owner::Response, bytes);
        } else {
            msg.mtype = MessageType::Non;
            let transmit = Transmit { dst: inb.peer, payload: msg.encode(), src: None };
            if inb.not_before > now {
                if self.delayed.len() >= self.config.limits.max_delayed {
                    warn!(peer = %inb.peer, "multicast response dropped: too many delayed responses");
                    return;
                }
                self.seq += 1;
                self.delayed.push(Reverse(Delayed { at: inb.not_before, seq: self.seq, transmit }));
            } else if inb.multicast {
                self.transmits.push_back(transmit);
            } else {
                self.push_answer(now, transmit);
            }
        }
    }

    /// Sends a rendered notification to its observer (RFC 7641 §4.2): same token, new message ID, the next
    /// sequence number, CON or NON as decided in [`Endpoint::notify`]. A response that is not a success or
    /// no longer observable is the last notification and ends the observation.
    fn send_notification(&mut self, now: Instant, inb: &Inbound, key: ObserverKey, response: Response) {
        let block = self.config.block;
        let Some((response, last)) = self.server.on_notification(now, &block, key, inb.meta.key, inb.con, response, 0)
        else {
            return; // the observer went away while the notification was rendered
        };
        let Some(slot) = self.peer_slot(key.0) else {
            warn!(peer = %key.0, "notification dropped: peer table full");
            return;
        };
        let mid = self.peers.next_mid(slot, self.config.shard);
        let msg = Message {
            mtype: if inb.con { MessageType::Con } else { MessageType::Non },
            code: response.code,
            mid,
            token: key.1,
            options: response.options,
            payload: response.payload,
        };
        let bytes = msg.encode();
        if inb.con {
            // RFC 7641 §4.5.2: one CON notification in flight per observer. A newer one waits: the ACK of
            // the one in flight sends it at once (`on_ack`), or it goes in its place at the next
            // retransmission, continuing the back-off, so an observer that went away is still given up on
            // in time (`on_retransmit_timer`). The last notification of an observation cannot wait (the
            // observer is removed below): it replaces the one in flight now.
            let in_flight = self
                .server
                .observers
                .get(&key)
                .and_then(|o| o.pending)
                .filter(|old| self.sent.get(&(key.0, *old)).is_some_and(|s| s.retransmit.is_some()));
            match in_flight {
                Some(_) if !last => self.server.observers.queue(&key, mid, bytes),
                Some(old) => {
                    self.sent.remove(&(key.0, old));
                    self.peers.release_ref(key.0);
                    self.send_reliable(now, key.0, mid, Owner::Notification(key), bytes);
                }
                None => {
                    self.send_reliable(now, key.0, mid, Owner::Notification(key), bytes);
                    self.server.observers.set_pending(&key, Some(mid));
                }
            }
        } else {
            let lifetime = self.params_for(&key.0).non_lifetime();
            self.sent.insert((key.0, mid), Sent { owner: Owner::Notification(key), retransmit: None });
            self.sent_non_expiry.push_back((now + lifetime, key.0, mid));
            self.push_answer(now, Transmit { dst: key.0, payload: bytes, src: None });
        }
        if last {
            self.server.observers.remove(&key);
        }
    }

    /// The resource at `path` changed: one request per observer of it, to be rendered by the application
    /// (routed like any request; the [`Node`](crate::Node) does it for services). Each answer is sent as a
    /// notification. `confirmable` forces CON or NON; `None` follows the [`ObservePolicy`].
    #[must_use = "each request must be rendered and answered, or its observer gets no notification"]
    pub fn notify(&mut self, now: Instant, path: &str, confirmable: Option<bool>) -> Vec<IncomingRequest> {
        let mut out = Vec::new();
        for key in self.server.observers.keys_for(path) {
            if self.inbound.len() >= self.config.limits.max_inbound_exchanges {
                warn!(%path, "notifications skipped: too many requests in progress");
                break;
            }
            let Some(o) = self.server.observers.get(&key) else { continue };
            let con =
                self.server.observers.wants_con(&key, now, &self.config.observe, confirmable) || o.pending.is_some();
            let request = o.request.clone();
            let Some(slot) = self.peer_slot(key.0) else { continue };
            self.peers.get_mut(slot).refs += 1;
            let id = InboundId::new(Transport::Udp, self.next_inbound_id);
            self.next_inbound_id += 1;
            let expires = now + self.params_for(&key.0).exchange_lifetime();
            let meta = RequestMeta { key: self.server.key_of(&request), ..RequestMeta::default() };
            self.inbound.insert(
                id,
                Inbound {
                    kind: InboundKind::Notification(key),
                    safe: true,
                    meta,
                    peer: key.0,
                    mid: MessageId(0),
                    token: key.1,
                    con,
                    multicast: false,
                    acked: true,
                    no_response: None,
                    not_before: now,
                    expires,
                },
            );
            self.piggyback_deadlines.push_back((now + self.config.piggyback_window(), id));
            out.push(IncomingRequest {
                id,
                from: key.0,
                multicast: false,
                confirmable: con,
                token: key.1,
                request,
                notification: true,
                verified: self.peers.is_trusted(&key.0),
                echoed: false,
                peer_identity: None,
                oscore_identity: None,
            });
        }
        out
    }

    /// Forgets every observer of `path` without telling them (RFC 7641 §3.3.1: as after a reboot, they
    /// find out when their notifications stop and Max-Age runs out). Returns how many there were.
    pub fn drop_observers(&mut self, path: &str) -> usize {
        self.server.observers.remove_path(path)
    }

    /// A layer above the message layer (OSCORE) turned the received request `id` into `inner`: an Observe
    /// registration it carries is kept under the inner request's resource, and notifications are
    /// rendered by replaying `inner`. Nothing happens for a request that does not register.
    pub fn retarget_observation(&mut self, id: InboundId, inner: &Request) {
        if let Some(reg) = self.inbound.get_mut(&id).and_then(|inb| inb.meta.observe.as_mut()) {
            **reg = (inner.resource_id(), inner.clone());
        }
    }

    /// How many observers `path` has.
    pub fn observer_count(&self, path: &str) -> usize {
        self.server.observers.count_for(path)
    }

    /// Ends a received request without any response: the application recognised it as a repetition of one
    /// it is already answering (a client that re-sent a NON, or a CON under a new message ID, with the same
    /// token). A CON is acknowledged so that its sender stops retransmitting; nothing else is sent.
    pub fn discard(&mut self, id: InboundId) -> Result<(), UnknownExchange> {
        self.accept(id)?;
        if let Some(inb) = self.inbound.remove(&id) {
            match inb.kind {
                InboundKind::Request => self.peers.release_inbound(inb.peer),
                InboundKind::Notification(_) => self.peers.release_ref(inb.peer),
            }
        }
        Ok(())
    }

    /// Sends the empty ACK for a received CON now, committing to a separate response. Useful when the
    /// application knows it will be slow; otherwise the endpoint does it after the piggyback window.
    pub fn accept(&mut self, id: InboundId) -> Result<(), UnknownExchange> {
        let inb = self.inbound.get_mut(&id).ok_or(UnknownExchange)?;
        if inb.con && !inb.acked {
            inb.acked = true;
            let (peer, mid) = (inb.peer, inb.mid);
            let bytes = Message::empty(MessageType::Ack, mid).encode();
            let slot = self.peers.slot_of(&peer);
            self.remember_reply(slot, mid, Reply::Sent(bytes.clone()));
            self.transmits.push_back(Transmit { dst: peer, payload: bytes, src: None });
        }
        Ok(())
    }

    fn remember_reply(&mut self, slot: Option<u32>, mid: MessageId, reply: Reply) {
        let Some(slot) = slot else { return };
        if let Some(e) = self.peers.get_mut(slot).dedup.iter_mut().rev().find(|e| e.mid == mid) {
            e.reply = reply;
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Input
    // ---------------------------------------------------------------------------------------------

    /// The PSK identity the peer of the datagrams handed in next proved in its DTLS handshake: a driver
    /// with a DTLS layer sets it before [`Endpoint::handle_datagram`] with a datagram that layer decrypted,
    /// and sets `None` after it, so that requests in it carry [`IncomingRequest::peer_identity`].
    pub fn set_datagram_identity(&mut self, identity: Option<std::sync::Arc<[u8]>>) {
        self.datagram_identity = identity;
    }

    /// Every unicast request to `peer` ends with `error` at once: the driver could not reach the peer
    /// (a failed DTLS handshake: [`RequestError::Dtls`]).
    pub fn fail_peer(&mut self, now: Instant, peer: SocketAddr, error: RequestError) {
        let ids: Vec<RequestId> =
            self.exchanges.iter().filter(|(_, ex)| ex.dst == peer && !ex.multicast).map(|(id, _)| *id).collect();
        for id in ids {
            info!(%peer, ?id, %error, "request failed");
            self.fail_exchange(now, id, error);
        }
    }

    /// A datagram arrived from `from`. `dst_ip` is the local address it was sent to, when the runtime knows
    /// it; a multicast address there marks the request as multicast (RFC 7252 §8.2).
    pub fn handle_datagram(&mut self, now: Instant, from: SocketAddr, dst_ip: Option<IpAddr>, data: &[u8]) {
        let queued = self.transmits.len();
        self.on_datagram(now, from, dst_ip, data);
        // Answers leave from the address the peer wrote to (a wildcard socket has many).
        if let Some(local) = dst_ip.filter(|ip| !ip.is_multicast()) {
            for t in self.transmits.iter_mut().skip(queued).filter(|t| t.dst == from && t.src.is_none()) {
                t.src = Some(local);
            }
            if let Some(slot) = self.peers.slot_of(&from) {
                self.peers.get_mut(slot).local = Some(local);
            }
        }
    }

    fn on_datagram(&mut self, now: Instant, from: SocketAddr, dst_ip: Option<IpAddr>, data: &[u8]) {
        self.stats.datagrams_in += 1;
        let multicast = dst_ip.is_some_and(|ip| ip.is_multicast());
        let packet = match Packet::new_checked(data) {
            Ok(p) => p,
            Err(e) => {
                self.stats.malformed_in += 1;
                debug!(%from, error = %e, len = data.len(), "malformed datagram");
                match Packet::<&[u8]>::peek_header(data) {
                    // RFC 7252 §4.2: a CON with a format error is rejected with RST (never on multicast).
                    Some((MessageType::Con, _, mid)) if !multicast => self.send_rst(from, mid),
                    // An ACK that answers one of our requests with garbage: the request has its answer, and it
                    // is unusable. Waiting for a retransmission's answer would only repeat it.
                    Some((MessageType::Ack, code, mid)) if !multicast && code.is_response() => {
                        self.on_malformed_ack(now, from, mid)
                    }
                    _ => {}
                }
                return;
            }
        };
        let code = packet.code();
        match packet.mtype() {
            MessageType::Ack if !multicast => self.on_ack(now, from, &packet),
            MessageType::Rst if !multicast => self.on_rst(now, from, packet.message_id()),
            MessageType::Con | MessageType::Non if code.is_request() => self.on_request(now, from, multicast, &packet),
            MessageType::Con | MessageType::Non if code.is_response() && !multicast => {
                self.on_response_message(now, from, &packet)
            }
            MessageType::Con if code.is_empty() && !multicast => {
                trace!(%from, "ping answered");
                self.send_rst(from, packet.message_id());
            }
            mtype => {
                // Reserved classes, empty NON, signalling codes over UDP: a CON is rejected, the rest ignored.
                self.stats.malformed_in += 1;
                debug!(%from, ?mtype, %code, "ignoring message with unexpected type or code");
                if mtype == MessageType::Con && !multicast {
                    self.send_rst(from, packet.message_id());
                }
            }
        }
    }

    /// The network reported that a datagram to `peer` could not be delivered (an ICMP port, host or
    /// network unreachable error, which the driver reads from its socket's error queue). `quoted` is the
    /// start of the datagram the error refers to, when the driver has it (ICMP quotes it): the exchange,
    /// notification or response that datagram carried is matched by message ID *and* token, so that an
    /// off-path attacker who spoofs ICMP errors must guess a token as well. `None` (a connected socket's
    /// bare ECONNREFUSED) ends every request this endpoint has outstanding to `peer`.
    ///
    /// A request ends with [`RequestError::Unreachable`] at once instead of after its retransmissions; an
    /// observer whose notification bounced is forgotten (it has gone away); a separate response being
    /// retransmitted to it stops.
    pub fn handle_unreachable(&mut self, now: Instant, peer: SocketAddr, quoted: Option<&[u8]>) {
        let Some(quoted) = quoted else {
            let ids: Vec<RequestId> =
                self.exchanges.iter().filter(|(_, ex)| ex.dst == peer && !ex.multicast).map(|(id, _)| *id).collect();
            for id in ids {
                info!(%peer, ?id, "request failed: peer unreachable");
                self.fail_exchange(now, id, RequestError::Unreachable);
            }
            return;
        };
        let Some((_, _, mid)) = Packet::<&[u8]>::peek_header(quoted) else { return };
        let tkl = usize::from(quoted[0] & 0x0f);
        let Some(token) = quoted.get(4..4 + tkl).and_then(Token::new) else { return };
        let Some(owner) = self.sent.get(&(peer, mid)).map(|s| s.owner) else {
            trace!(%peer, %mid, "unreachable error for nothing outstanding");
            return;
        };
        match owner {
            Owner::Request(id) => {
                if self.exchanges.get(&id).is_some_and(|ex| ex.token == token && !ex.multicast) {
                    if self.sent.remove(&(peer, mid)).is_some_and(|s| s.retransmit.is_some()) {
                        self.peers.release_ref(peer);
                    }
                    info!(%peer, ?id, "request failed: peer unreachable");
                    self.fail_exchange(now, id, RequestError::Unreachable);
                }
            }
            Owner::Notification(key) if key.1 == token => {
                if self.sent.remove(&(peer, mid)).is_some_and(|s| s.retransmit.is_some()) {
                    self.peers.release_ref(peer);
                }
                if self.server.observers.remove(&key) {
                    self.stats.observers_lost += 1;
                    info!(%peer, "observer unreachable; removed");
                }
            }
            Owner::Response => {
                if self.sent.remove(&(peer, mid)).is_some_and(|s| s.retransmit.is_some()) {
                    self.peers.release_ref(peer);
                }
                info!(%peer, %mid, "separate response undeliverable: peer unreachable");
            }
            Owner::Ping(_) | Owner::Notification(_) => {}
        }
    }

    fn send_rst(&mut self, to: SocketAddr, mid: MessageId) {
        self.stats.resets_out += 1;
        self.transmits.push_back(Transmit {
            dst: to,
            payload: Message::empty(MessageType::Rst, mid).encode(),
            src: None,
        });
    }

    fn on_ack(&mut self, now: Instant, from: SocketAddr, packet: &Packet<&[u8]>) {
        let mid = packet.message_id();
        let Some(sent) = self.sent.remove(&(from, mid)) else {
            trace!(%from, %mid, "ACK for nothing outstanding (duplicate?)");
            return;
        };
        if sent.retransmit.is_none() {
            // An ACK for a NON: meaningless; keep tracking the NON.
            self.sent.insert((from, mid), sent);
            return;
        }
        self.peers.release_ref(from);
        self.mark_verified(from);
        match sent.owner {
            Owner::Response => trace!(%from, %mid, "separate response acknowledged"),
            Owner::Notification(key) => {
                if self.server.observers.get(&key).is_some_and(|o| o.pending == Some(mid)) {
                    self.server.observers.set_pending(&key, None);
                    if let Some((next, bytes)) = self.server.observers.take_queued(&key) {
                        self.send_reliable(now, key.0, next, Owner::Notification(key), bytes);
                        self.server.observers.set_pending(&key, Some(next));
                    }
                }
            }
            Owner::Ping(id) => {
                self.peers.ping_done(from);
                self.events.push_back(Event::Pong { id, from });
            }
            Owner::Request(id) => {
                let Some(ex) = self.exchanges.get_mut(&id) else { return };
                let token_matches = ex.token.as_bytes() == packet.token_bytes();
                if packet.code().is_response() && token_matches {
                    // The round ends with this ACK: the response is handled like a separate one.
                    ex.state = ClientState::ExpectResponse { mid, until: now };
                    self.uncount(now, id);
                    self.on_client_response(now, id, from, to_response(packet));
                    return;
                }
                if !packet.code().is_empty() {
                    warn!(%from, %mid, "piggybacked response with a foreign token or code; treating as empty ACK");
                }
                // Empty ACK: the response will come separately; the CON is no longer outstanding.
                ex.state = ClientState::ExpectResponse { mid, until: now + self.config.separate_timeout() };
                self.arm_exchange(id);
                self.uncount(now, id);
            }
        }
    }

    fn on_malformed_ack(&mut self, now: Instant, from: SocketAddr, mid: MessageId) {
        let Some(Owner::Request(id)) = self.sent.get(&(from, mid)).map(|s| s.owner) else { return };
        if self.exchanges.get(&id).is_none_or(|e| e.multicast) {
            return;
        }
        if self.sent.remove(&(from, mid)).is_some_and(|s| s.retransmit.is_some()) {
            self.peers.release_ref(from);
        }
        info!(%from, ?id, "request answered with a malformed message");
        self.fail_exchange(now, id, RequestError::Malformed);
    }

    fn on_rst(&mut self, now: Instant, from: SocketAddr, mid: MessageId) {
        self.stats.resets_in += 1;
        let Some(sent) = self.sent.remove(&(from, mid)) else {
            trace!(%from, %mid, "RST for nothing outstanding");
            return;
        };
        self.mark_verified(from);
        if sent.retransmit.is_some() {
            self.peers.release_ref(from);
        }
        match sent.owner {
            Owner::Ping(id) => {
                self.peers.ping_done(from);
                self.events.push_back(Event::Pong { id, from });
            }
            Owner::Response => info!(%from, %mid, "separate response rejected with RST"),
            Owner::Notification(key) => {
                // RFC 7641 §3.6: a client rejects a notification it does not want; forget the observer.
                if self.server.observers.remove(&key) {
                    self.stats.observers_lost += 1;
                    info!(peer = %from, "observer rejected a notification with RST; removed");
                }
            }
            Owner::Request(id) => {
                if self.exchanges.get(&id).is_some_and(|e| e.multicast) {
                    return; // one member's RST does not end a group request
                }
                info!(%from, ?id, "request reset by peer");
                self.fail_exchange(now, id, RequestError::Reset);
            }
        }
    }

    /// Duplicate detection for a received CON or NON. Returns the peer slot if the message is new.
    fn dedup(&mut self, now: Instant, from: SocketAddr, packet: &Packet<&[u8]>) -> Result<u32, ()> {
        let Some(slot) = self.peer_slot(from) else {
            return Err(());
        };
        let mid = packet.message_id();
        let con = packet.mtype() == MessageType::Con;
        // Everything the peer's entry needs is computed first, so the hot path takes the peer once.
        let lifetime = {
            let p = self.params_for(&from);
            if con {
                p.exchange_lifetime()
            } else {
                p.non_lifetime()
            }
        };
        let cap = self.config.limits.dedup_per_peer.max(1);
        let factor = self.config.amplification.as_ref().map(|l| l.factor);
        let peer = self.peers.get_mut(slot);
        if let Some(factor) = factor {
            peer.earn(factor, packet.as_bytes().len());
        }
        if let Some(pos) = peer.dedup.iter().rposition(|e| e.mid == mid) {
            if peer.dedup[pos].expires > now {
                let reply = peer.dedup[pos].reply.clone();
                self.on_duplicate(now, from, mid, con, reply);
                return Err(());
            }
            peer.dedup.remove(pos);
        }
        let evicted = peer.dedup.len() >= cap && peer.dedup.pop_front().is_some();
        peer.dedup.push_back(DedupEntry { mid, expires: now + lifetime, reply: Reply::Nothing });
        if evicted {
            self.stats.dedup_evicted += 1;
        }
        Ok(slot)
    }

    /// A message seen before within its lifetime: a CON gets what was answered the first time.
    #[cold]
    fn on_duplicate(&mut self, now: Instant, from: SocketAddr, mid: MessageId, con: bool, reply: Reply) {
        self.stats.duplicates_in += 1;
        trace!(%from, %mid, "duplicate");
        if !con {
            return;
        }
        match reply {
            Reply::Sent(bytes) => {
                self.push_answer(now, Transmit { dst: from, payload: bytes, src: None });
            }
            Reply::Pending(iid) => {
                // Still being handled: stop the client's retransmissions with an empty ACK.
                let _ = self.accept(iid);
            }
            Reply::Nothing => {}
        }
    }

    fn on_response_message(&mut self, now: Instant, from: SocketAddr, packet: &Packet<&[u8]>) {
        let con = packet.mtype() == MessageType::Con;
        let mid = packet.message_id();
        let slot = match self.dedup(now, from, packet) {
            Ok(slot) => Some(slot),
            Err(()) if self.peers.contains(&from) => return,
            Err(()) => None,
        };
        let token = packet.token();
        let matched = self.tokens.get(&token).copied().filter(|id| {
            self.exchanges.get(id).is_some_and(|ex| {
                (ex.multicast && ex.dst.ip().is_multicast())
                    || (ex.dst == from && !matches!(ex.state, ClientState::Queued))
            })
        });
        let Some(id) = matched else {
            // Nobody asked: reject a CON; a NON notification too, so the server forgets the observer
            // (RFC 7641 §3.6). Late NON replies to a closed multicast window are dropped quietly.
            if con || packet.option(OptionNumber::OBSERVE).is_some() {
                debug!(%from, %token, "rejecting unexpected response");
                self.send_rst(from, mid);
                self.remember_reply(slot, mid, Reply::Sent(Message::empty(MessageType::Rst, mid).encode()));
            }
            return;
        };
        if con {
            let ack = Message::empty(MessageType::Ack, mid).encode();
            self.remember_reply(slot, mid, Reply::Sent(ack.clone()));
            self.transmits.push_back(Transmit { dst: from, payload: ack, src: None });
        }
        self.mark_verified(from);
        self.on_client_response(now, id, from, to_response(packet));
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
