//! CoAP over TCP (RFC 8323), sans-IO: connections carry length-framed messages with no type, no message
//! ID and no message layer — TCP already delivers reliably and in order.
//!
//! # What it owns
//! - Per connection: the stream decoder (bounded by the Max-Message-Size this side announces), the
//!   Capabilities and Settings Message exchange (each side sends CSM first; a connection whose first
//!   message is not a CSM is aborted, §5.3), Ping/Pong, Release and Abort (§5.4-§5.6), and the peer's
//!   announced Max-Message-Size, which bounds what is sent to it.
//! - Exchanges by token per connection: requests with a timeout, responses, Observe (notifications arrive
//!   in order, so no freshness rule, §7.2), block-wise transfers (the same `Transfer` and
//!   `ServerLayer` as over UDP).
//! - Closing a connection fails its client requests and ends its observations (§7.4).
//! - Connection hygiene against slowloris: a connection that sends no CSM within
//!   [`TcpConfig::csm_timeout`] is aborted; one that has nothing in progress (no request, no observation)
//!   and has been silent for [`TcpConfig::idle_timeout`] is released; one address holds at most
//!   [`TcpConfig::max_connections_per_address`]; and a full table (or address) makes room by aborting the
//!   connection least worth keeping — one that never sent its CSM, then one that never completed a
//!   request, then the longest idle — so that idle connections cannot lock new clients out. Connections
//!   this endpoint made to servers are never forced out.
//! - Connections to servers on demand, for services that issue requests ([`TcpEndpoint::request_to`]): the
//!   endpoint asks the driver to connect (`poll_connect`), holds the requests until the connection is up
//!   (or fails them when `handle_connect_failed` says it cannot be made) and reuses it afterwards.
//!
//! # What it must never do
//! Read a clock, open a socket, or draw randomness other than from its seed. The driver owns the sockets:
//! it reports `handle_connected`, `handle_data` and `handle_closed`, sends what `poll_transmit` yields and
//! closes what `poll_close` names.
//!
//! Ids: [`RequestId`]s and [`InboundId`]s of this endpoint carry [`Transport::Tcp`], so a node can tell
//! them from its UDP endpoint's.

use crate::endpoint::block::{Step, Transfer};
use crate::endpoint::observe::ObservePolicy;
use crate::endpoint::server::{Incoming, RequestMeta, ServerLayer};
use crate::endpoint::{new_map, BlockConfig, Event, Map};
use crate::message::{
    InboundId, IncomingRequest, Request, RequestError, RequestId, Response, SendParams, StartError, Transport,
    UnknownExchange,
};
use crate::rng::{Rng, SecretRng};
use crate::time::{Duration, Instant};
use corral_wire::tcp::{signal, FrameDecoder, TcpMessage};
use corral_wire::{Code, OptionNumber, Token};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::net::SocketAddr;
use tracing::{debug, info, trace, warn};

/// A connection, named by the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u64);

/// Configuration of a [`TcpEndpoint`].
#[derive(Debug, Clone)]
pub struct TcpConfig {
    /// Seeds non-secret choices (see [`crate::EndpointConfig::seed`]).
    pub seed: u64,
    /// The key of the generator of tokens (see [`crate::EndpointConfig::secret_seed`]); `None`: derived
    /// from `seed`, for the simulator and tests only.
    pub secret_seed: Option<[u8; 32]>,
    /// The Max-Message-Size this side announces in its CSM, and the most a received frame may carry; it
    /// bounds the memory of each connection's decoder (RFC 8323 §5.3.1).
    pub max_message_size: usize,
    /// Connections at most (accepted and made); a full table makes room as the module docs say.
    pub max_connections: usize,
    /// Accepted connections from one IP address at most; beyond it that address's least worthy one goes.
    pub max_connections_per_address: usize,
    /// How long an accepted connection may take to send its CSM (RFC 8323 §5.3) before it is aborted.
    pub csm_timeout: Duration,
    /// How long a connection with nothing in progress may stay silent before it is released.
    pub idle_timeout: Duration,
    /// How long a request waits for its response.
    pub request_timeout: Duration,
    pub token_len: u8,
    pub max_client_exchanges: usize,
    pub max_inbound_exchanges: usize,
    pub extra_known_options: Vec<OptionNumber>,
    pub block: BlockConfig,
    pub observe: ObservePolicy,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            seed: 0,
            secret_seed: None,
            max_message_size: 8 * 1024 + 1152,
            max_connections: 1024,
            max_connections_per_address: 64,
            csm_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(300),
            request_timeout: Duration::from_secs(60),
            token_len: 4,
            max_client_exchanges: 4096,
            max_inbound_exchanges: 4096,
            extra_known_options: Vec::new(),
            block: BlockConfig::default(),
            observe: ObservePolicy::default(),
        }
    }
}

/// Bytes to write to a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "bytes the endpoint produced: write them to the connection, or say why they are dropped"]
pub struct TcpTransmit {
    pub conn: ConnId,
    pub bytes: Vec<u8>,
}

struct Conn {
    peer: SocketAddr,
    decoder: FrameDecoder,
    /// Max-Message-Size announced by the peer (1152 until its CSM says otherwise).
    peer_mms: usize,
    peer_block_wise: bool,
    got_csm: bool,
    closing: bool,
    /// This endpoint made the connection (to a server): never forced out.
    outgoing: bool,
    /// Requests the peer sent on it: one that never sent any is the first to go when room is needed.
    requests: u64,
    /// When the connection last carried anything, for the idle timeout and the eviction order.
    last_active: Instant,
}

struct Exchange {
    conn: ConnId,
    token: Token,
    deadline: Option<Instant>,
    /// The current round's request, for follow-up blocks and deregistration.
    request: Request,
    observe: bool,
    observing: bool,
    transfer: Option<Box<Transfer>>,
    parent: Option<RequestId>,
    szx: u8,
    ping: bool,
}

struct Inbound {
    conn: ConnId,
    peer: SocketAddr,
    token: Token,
    notification: bool,
    meta: RequestMeta,
}

/// A request waiting for the connection to its server.
struct Waiting {
    dst: SocketAddr,
    request: Request,
    params: SendParams,
    deadline: Instant,
}

/// A CoAP-over-TCP endpoint serving any number of connections. See the module docs.
pub struct TcpEndpoint {
    config: TcpConfig,
    /// Non-secret draws (Observe sequence starts).
    rng: Rng,
    /// Tokens (see `crate::rng`); made on first use, since most TCP endpoints of a simulated network never
    /// send a request.
    secret: Option<Box<SecretRng>>,
    conns: Map<ConnId, Conn>,
    exchanges: Map<RequestId, Exchange>,
    tokens: Map<(ConnId, Token), RequestId>,
    inbound: Map<InboundId, Inbound>,
    server: ServerLayer,
    timers: BinaryHeap<Reverse<(Instant, RequestId)>>,
    /// When to look at a connection again: its CSM deadline, then its idle deadline (stale entries are
    /// skipped).
    conn_timers: BinaryHeap<Reverse<(Instant, ConnId)>>,
    transmits: VecDeque<TcpTransmit>,
    closes: VecDeque<ConnId>,
    events: VecDeque<Event>,
    next_request_id: u64,
    next_inbound_id: u64,
    /// Connections this endpoint made (or was given) to servers, by server address.
    to_server: Map<SocketAddr, ConnId>,
    /// Requests waiting for a connection being made, and the addresses being connected to.
    waiting: Map<RequestId, Waiting>,
    connecting: Map<SocketAddr, Vec<RequestId>>,
    connects: VecDeque<SocketAddr>,
}

impl TcpEndpoint {
    pub fn new(config: TcpConfig) -> TcpEndpoint {
        let rng = Rng::new(config.seed ^ 0x7c9);
        // Streams 1 (tokens) and 2 (table keys) of the key: the UDP endpoint of the same node draws from 0.
        let seed = SecretRng::keyed(config.secret_seed, config.seed ^ 0x7c9, 2).next_u64();
        TcpEndpoint {
            conns: new_map(seed),
            exchanges: new_map(seed),
            tokens: new_map(seed),
            inbound: new_map(seed),
            server: ServerLayer::new(seed),
            timers: BinaryHeap::new(),
            conn_timers: BinaryHeap::new(),
            transmits: VecDeque::new(),
            closes: VecDeque::new(),
            events: VecDeque::new(),
            next_request_id: 0,
            next_inbound_id: 0,
            to_server: new_map(seed),
            waiting: new_map(seed),
            connecting: new_map(seed),
            connects: VecDeque::new(),
            rng,
            secret: None,
            config,
        }
    }

    pub fn config(&self) -> &TcpConfig {
        &self.config
    }

    /// Open connections.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// The Max-Message-Size the peer of `conn` announced.
    pub fn peer_max_message_size(&self, conn: ConnId) -> Option<usize> {
        self.conns.get(&conn).map(|c| c.peer_mms)
    }

    /// Whether the peer's CSM has arrived.
    pub fn is_established(&self, conn: ConnId) -> bool {
        self.conns.get(&conn).is_some_and(|c| c.got_csm)
    }

    // ---------------------------------------------------------------------------------------------
    // Outputs
    // ---------------------------------------------------------------------------------------------

    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<TcpTransmit> {
        self.transmits.pop_front()
    }

    /// A connection the driver must close (after Abort or Release, or at the peer's request).
    #[must_use]
    pub fn poll_close(&mut self) -> Option<ConnId> {
        self.closes.pop_front()
    }

    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front().or_else(|| {
            let (path, (peer, token)) = self.server.observers.pop_gone()?;
            Some(Event::ObserverGone { path, peer, token })
        })
    }

    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let a = self.timers.peek().map(|Reverse((t, _))| *t);
        let b = self.conn_timers.peek().map(|Reverse((t, _))| *t);
        a.into_iter().chain(b).min()
    }

    /// A server the driver must connect to (for [`TcpEndpoint::request_to`]); it reports the connection
    /// with `handle_connected` (the peer address is the one asked for) or `handle_connect_failed`.
    #[must_use]
    pub fn poll_connect(&mut self) -> Option<SocketAddr> {
        self.connects.pop_front()
    }

    // ---------------------------------------------------------------------------------------------
    // Connection life cycle
    // ---------------------------------------------------------------------------------------------

    /// A connection was established (either side initiated it). This side's CSM goes out at once; the
    /// initiator does not wait for the peer's before sending requests (RFC 8323 §5.3).
    pub fn handle_connected(&mut self, now: Instant, conn: ConnId, peer: SocketAddr) {
        let outgoing = self.connecting.contains_key(&peer);
        if !outgoing && !self.make_room(peer) {
            warn!(%peer, "too many connections, none idle; refusing");
            self.abort(conn, "too many connections");
            return;
        }
        self.conns.insert(
            conn,
            Conn {
                peer,
                decoder: FrameDecoder::new(self.config.max_message_size),
                peer_mms: signal::BASE_MAX_MESSAGE_SIZE,
                peer_block_wise: false,
                got_csm: false,
                closing: false,
                outgoing,
                requests: 0,
                last_active: now,
            },
        );
        self.conn_timers.push(Reverse((now + self.config.csm_timeout, conn)));
        let mut csm = TcpMessage::new(Code::CSM, Token::EMPTY);
        csm.options.push_uint(signal::MAX_MESSAGE_SIZE, self.config.max_message_size as u64);
        csm.options.push(signal::BLOCK_WISE_TRANSFER, &[]);
        self.send(conn, &csm);
        debug!(?conn, %peer, "connection established");
        if let Some(ids) = self.connecting.remove(&peer) {
            self.to_server.insert(peer, conn);
            for id in ids {
                let Some(w) = self.waiting.remove(&id) else { continue };
                let timeout = w.deadline.saturating_since(now);
                let params = SendParams { timeout: Some(timeout), ..w.params };
                if let Err(e) = self.start_as(id, now, conn, w.request, params, None) {
                    debug!(?id, error = %e, "request could not start on its new connection");
                    self.events.push_back(Event::Failed { id, error: RequestError::ConnectionClosed });
                }
            }
        }
    }

    /// Makes room for a new connection from `peer` if its address or the table is full, by aborting the
    /// accepted connection least worth keeping (see the module docs); `false` if none may go.
    fn make_room(&mut self, peer: SocketAddr) -> bool {
        let per_address = self.config.max_connections_per_address.max(1);
        let same = |c: &Conn| c.peer.ip() == peer.ip();
        if self.conns.values().filter(|c| same(c) && !c.closing).count() >= per_address
            && !self.evict_one(|c| c.peer.ip() == peer.ip())
        {
            return false;
        }
        self.conns.values().filter(|c| !c.closing).count() < self.config.max_connections.max(1)
            || self.evict_one(|_| true)
    }

    /// Aborts the least worthy accepted connection `which` accepts: no CSM yet, then no request ever, then
    /// the longest idle — never one with requests or observations in progress, never one this endpoint
    /// made. `false` if there is none.
    fn evict_one(&mut self, which: impl Fn(&Conn) -> bool) -> bool {
        let busy: std::collections::HashSet<ConnId> =
            self.inbound.values().map(|i| i.conn).chain(self.exchanges.values().map(|e| e.conn)).collect();
        let observed = |c: &Conn| self.server.observers.has_peer(c.peer);
        let victim = self
            .conns
            .iter()
            .filter(|(id, c)| which(c) && !c.closing && !c.outgoing && !busy.contains(id) && !observed(c))
            .min_by_key(|(id, c)| (c.got_csm, c.requests > 0, c.last_active, **id))
            .map(|(id, c)| (*id, c.peer));
        let Some((victim, addr)) = victim else { return false };
        debug!(conn = ?victim, peer = %addr, "connection table full: aborting an idle connection for a new one");
        self.abort(victim, "too many connections: idle connection closed");
        true
    }

    /// The connection to `dst` that `poll_connect` asked for cannot be made: the requests waiting for it
    /// fail with [`RequestError::ConnectionClosed`].
    pub fn handle_connect_failed(&mut self, _now: Instant, dst: SocketAddr) {
        let mut ids = self.connecting.remove(&dst).unwrap_or_default();
        ids.sort();
        for id in ids {
            if self.waiting.remove(&id).is_some() {
                self.events.push_back(Event::Failed { id, error: RequestError::ConnectionClosed });
            }
        }
    }

    /// The connection is gone (closed by either side, or broken): its requests fail, its observations and
    /// pending exchanges end.
    pub fn handle_closed(&mut self, now: Instant, conn: ConnId) {
        let Some(c) = self.conns.remove(&conn) else { return };
        self.to_server.retain(|_, c| *c != conn);
        let ids: Vec<RequestId> = self.exchanges.iter().filter(|(_, e)| e.conn == conn).map(|(id, _)| *id).collect();
        let mut failed: Vec<RequestId> = Vec::new();
        for id in ids {
            if let Some(e) = self.exchanges.remove(&id) {
                self.tokens.remove(&(conn, e.token));
                if e.parent.is_none() {
                    failed.push(id);
                }
            }
        }
        failed.sort();
        for id in failed {
            self.events.push_back(Event::Failed { id, error: RequestError::ConnectionClosed });
        }
        self.inbound.retain(|_, i| i.conn != conn);
        let lost = self.server.observers.remove_peer(c.peer);
        debug!(?conn, peer = %c.peer, observers = lost, "connection closed");
        let _ = now;
    }

    /// Ends a connection gracefully: Release (RFC 8323 §5.5), then close.
    pub fn release(&mut self, conn: ConnId) {
        if self.conns.contains_key(&conn) {
            self.send(conn, &TcpMessage::new(Code::RELEASE, Token::EMPTY));
            self.close(conn);
        }
    }

    fn abort(&mut self, conn: ConnId, why: &str) {
        let mut m = TcpMessage::new(Code::ABORT, Token::EMPTY);
        m.payload = why.as_bytes().to_vec();
        self.transmits.push_back(TcpTransmit { conn, bytes: m.encode() });
        self.close(conn);
    }

    fn close(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.get_mut(&conn) {
            if c.closing {
                return;
            }
            c.closing = true;
        }
        self.closes.push_back(conn);
    }

    fn send(&mut self, conn: ConnId, msg: &TcpMessage) {
        self.transmits.push_back(TcpTransmit { conn, bytes: msg.encode() });
    }

    // ---------------------------------------------------------------------------------------------
    // Input
    // ---------------------------------------------------------------------------------------------

    /// Bytes arrived on `conn`.
    pub fn handle_data(&mut self, now: Instant, conn: ConnId, mut data: &[u8]) {
        loop {
            let Some(c) = self.conns.get_mut(&conn) else { return };
            if c.closing {
                return;
            }
            c.last_active = now;
            let taken = c.decoder.feed(data);
            data = &data[taken..];
            loop {
                let Some(c) = self.conns.get_mut(&conn) else { return };
                let msg = match c.decoder.next_frame() {
                    Ok(Some(frame)) => frame.to_owned(),
                    Ok(None) => break,
                    Err(e) => {
                        warn!(?conn, error = %e, "malformed or oversized frame; aborting the connection");
                        self.abort(conn, &format!("{e}"));
                        return;
                    }
                };
                self.on_message(now, conn, msg);
            }
            if data.is_empty() {
                return;
            }
        }
    }

    fn on_message(&mut self, now: Instant, conn: ConnId, msg: TcpMessage) {
        let Some(c) = self.conns.get(&conn) else { return };
        trace!(?conn, code = %msg.code, "frame");
        if !c.got_csm && msg.code != Code::CSM {
            self.abort(conn, "the first message must be a CSM (RFC 8323 §5.3)");
            return;
        }
        let code = msg.code;
        if code.is_signal() {
            self.on_signal(now, conn, msg);
        } else if code.is_empty() {
            // RFC 8323 §3.4: an Empty message is a keep-alive and is ignored.
        } else if code.is_request() {
            self.on_request(now, conn, msg);
        } else if code.is_response() {
            self.on_response(now, conn, msg);
        } else {
            self.abort(conn, &format!("reserved code {code}"));
        }
    }

    fn on_signal(&mut self, now: Instant, conn: ConnId, msg: TcpMessage) {
        match msg.code {
            Code::CSM => {
                for (n, v) in msg.options.iter() {
                    match n {
                        signal::MAX_MESSAGE_SIZE => {
                            let mms = corral_wire::decode_uint(v).unwrap_or(1152) as usize;
                            if let Some(c) = self.conns.get_mut(&conn) {
                                c.peer_mms = mms.max(64);
                            }
                        }
                        signal::BLOCK_WISE_TRANSFER => {
                            if let Some(c) = self.conns.get_mut(&conn) {
                                c.peer_block_wise = true;
                            }
                        }
                        n if n.is_critical() => {
                            // RFC 8323 §5.3: an unknown critical CSM option aborts, naming it.
                            let mut a = TcpMessage::new(Code::ABORT, Token::EMPTY);
                            a.options.push_uint(signal::BAD_CSM_OPTION, u64::from(n.0));
                            a.payload = format!("unsupported critical CSM option {}", n.0).into_bytes();
                            self.send(conn, &a);
                            self.close(conn);
                            return;
                        }
                        _ => {}
                    }
                }
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.got_csm = true;
                    debug!(?conn, mms = c.peer_mms, block_wise = c.peer_block_wise, "peer CSM");
                }
                self.conn_timers.push(Reverse((now + self.config.idle_timeout, conn)));
            }
            Code::PING => {
                let mut pong = TcpMessage::new(Code::PONG, msg.token);
                if let Some(custody) = msg.options.get(signal::CUSTODY) {
                    pong.options.push(signal::CUSTODY, custody);
                }
                self.send(conn, &pong);
            }
            Code::PONG => {
                if let Some(id) = self.tokens.remove(&(conn, msg.token)) {
                    if let Some(ex) = self.exchanges.remove(&id) {
                        let from = self.conns.get(&conn).map(|c| c.peer);
                        if let (true, Some(from)) = (ex.ping, from) {
                            self.events.push_back(Event::Pong { id, from });
                        }
                    }
                }
            }
            Code::RELEASE => {
                info!(?conn, "peer released the connection");
                self.close(conn);
            }
            Code::ABORT => {
                info!(?conn, why = %String::from_utf8_lossy(&msg.payload), "peer aborted the connection");
                self.close(conn);
                self.handle_closed(now, conn);
            }
            other => self.abort(conn, &format!("unknown signal {other}")),
        }
    }

    fn on_request(&mut self, now: Instant, conn: ConnId, msg: TcpMessage) {
        let Some(c) = self.conns.get_mut(&conn) else { return };
        c.requests += 1;
        let peer = c.peer;
        let token = msg.token;
        let error = crate::endpoint::server::refuse_request(
            msg.code,
            msg.options.iter(),
            &self.config.extra_known_options,
            true,
        );
        if let Some(r) = error {
            self.send_response(conn, token, r);
            return;
        }
        let cfg = self.config.block;
        let (request, meta) = match self.server.on_request(
            now,
            &cfg,
            self.config.request_timeout,
            peer,
            token,
            msg.code,
            msg.options.iter(),
            &msg.payload,
            false,
            true, // a TCP peer completed the handshake: its address is proved
        ) {
            Incoming::Reply(r) => {
                self.send_response(conn, token, r);
                return;
            }
            Incoming::Challenge => unreachable!("only unverified sources are challenged"),
            Incoming::Deliver(request, meta) => (request, meta),
        };
        if self.inbound.len() >= self.config.max_inbound_exchanges {
            let r = Response::error(Code::SERVICE_UNAVAILABLE, "too many requests in progress").with_max_age(2);
            self.send_response(conn, token, r);
            return;
        }
        let id = InboundId::new(Transport::Tcp, self.next_inbound_id);
        self.next_inbound_id += 1;
        self.inbound.insert(id, Inbound { conn, peer, token, notification: false, meta });
        self.events.push_back(Event::Request(IncomingRequest {
            id,
            from: peer,
            multicast: false,
            confirmable: true,
            token,
            request,
            notification: false,
            verified: true,
            echoed: true,
            peer_identity: None,
            oscore_identity: None,
        }));
    }

    fn send_response(&mut self, conn: ConnId, token: Token, r: Response) {
        let m = TcpMessage { code: r.code, token, options: r.options, payload: r.payload };
        self.send(conn, &m);
    }

    /// The largest payload that fits the peer's Max-Message-Size with room for the header and options.
    fn unblocked_limit(&self, conn: ConnId) -> usize {
        self.conns.get(&conn).map_or(0, |c| c.peer_mms.saturating_sub(128))
    }

    // ---------------------------------------------------------------------------------------------
    // Server API
    // ---------------------------------------------------------------------------------------------

    /// See [`crate::Endpoint::retarget_observation`].
    pub fn retarget_observation(&mut self, id: InboundId, inner: &Request) {
        if let Some(reg) = self.inbound.get_mut(&id).and_then(|inb| inb.meta.observe.as_mut()) {
            **reg = (inner.resource_id(), inner.clone());
        }
    }

    /// Answers a received request. Registers observers and cuts large bodies as the UDP endpoint does.
    pub fn respond(&mut self, now: Instant, id: InboundId, response: Response) -> Result<(), UnknownExchange> {
        let inb = self.inbound.remove(&id).ok_or(UnknownExchange)?;
        if !self.conns.contains_key(&inb.conn) {
            return Ok(()); // the connection went away meanwhile
        }
        let limit = self.unblocked_limit(inb.conn);
        let (block, policy) = (self.config.block, self.config.observe);
        if inb.notification {
            let key = (inb.peer, inb.token);
            let Some((r, last)) = self.server.on_notification(now, &block, key, inb.meta.key, false, response, limit)
            else {
                return Ok(());
            };
            self.send_response(inb.conn, inb.token, r);
            if last {
                self.server.observers.remove(&key);
            }
            return Ok(());
        }
        let r = self.server.on_response(
            now,
            &block,
            &policy,
            &mut self.rng,
            (inb.peer, inb.token),
            inb.meta,
            response,
            limit,
            true,
        );
        // `None` only for unverified sources (an Echo challenge); TCP peers are verified.
        if let Some(r) = r {
            self.send_response(inb.conn, inb.token, r);
        }
        Ok(())
    }

    /// Ends a received request without a response (see [`crate::Endpoint::discard`]).
    pub fn discard(&mut self, id: InboundId) -> Result<(), UnknownExchange> {
        self.inbound.remove(&id).map(|_| ()).ok_or(UnknownExchange)
    }

    /// The resource at `path` changed: one request per observer over TCP, to be rendered and answered with
    /// [`TcpEndpoint::respond`]; each answer goes out as a notification.
    #[must_use = "each request must be rendered and answered, or its observer gets no notification"]
    pub fn notify(&mut self, _now: Instant, path: &str) -> Vec<IncomingRequest> {
        let mut out = Vec::new();
        for key in self.server.observers.keys_for(path) {
            let Some(conn) = self.conns.iter().find(|(_, c)| c.peer == key.0 && !c.closing).map(|(id, _)| *id) else {
                self.server.observers.remove(&key);
                continue;
            };
            let Some(o) = self.server.observers.get(&key) else { continue };
            let request = o.request.clone();
            let id = InboundId::new(Transport::Tcp, self.next_inbound_id);
            self.next_inbound_id += 1;
            let meta = RequestMeta { key: self.server.key_of(&request), ..RequestMeta::default() };
            self.inbound.insert(id, Inbound { conn, peer: key.0, token: key.1, notification: true, meta });
            out.push(IncomingRequest {
                id,
                from: key.0,
                multicast: false,
                confirmable: true,
                token: key.1,
                request,
                notification: true,
                verified: true,
                echoed: false,
                peer_identity: None,
                oscore_identity: None,
            });
        }
        out
    }

    pub fn observer_count(&self, path: &str) -> usize {
        self.server.observers.count_for(path)
    }

    /// Forgets every observer of `path` without telling them (see [`crate::Endpoint::drop_observers`]).
    pub fn drop_observers(&mut self, path: &str) -> usize {
        self.server.observers.remove_path(path)
    }

    // ---------------------------------------------------------------------------------------------
    // Client API
    // ---------------------------------------------------------------------------------------------

    /// Sends a request on `conn`. Outcomes arrive as events, as for the UDP endpoint (Observe and
    /// block-wise included); `params.timeout` overrides the configured request timeout.
    pub fn request(
        &mut self,
        now: Instant,
        conn: ConnId,
        request: Request,
        params: SendParams,
    ) -> Result<RequestId, StartError> {
        self.start(now, conn, request, params, None)
    }

    /// Sends a request to the server at `dst` over the connection this endpoint has to it, or — if it has
    /// none — asks the driver for one (`poll_connect`) and sends the request once it is up. The request's
    /// timeout runs from now, connecting included.
    pub fn request_to(
        &mut self,
        now: Instant,
        dst: SocketAddr,
        request: Request,
        params: SendParams,
    ) -> Result<RequestId, StartError> {
        let known = self.to_server.get(&dst).copied().filter(|c| self.conns.get(c).is_some_and(|c| !c.closing));
        // Any open connection with that peer will do (RFC 8323: either side may send requests).
        let known = known.or_else(|| self.conns.iter().find(|(_, c)| c.peer == dst && !c.closing).map(|(id, _)| *id));
        if let Some(conn) = known {
            self.to_server.insert(dst, conn);
            return self.start(now, conn, request, params, None);
        }
        if self.exchanges.len() + self.waiting.len() >= self.config.max_client_exchanges {
            return Err(StartError::TooManyExchanges);
        }
        let id = RequestId::new(Transport::Tcp, self.next_request_id);
        self.next_request_id += 1;
        let deadline = now + params.timeout.unwrap_or(self.config.request_timeout);
        self.waiting.insert(id, Waiting { dst, request, params, deadline });
        self.push_timer(deadline, id);
        let queue = self.connecting.entry(dst).or_default();
        if queue.is_empty() {
            debug!(%dst, "connecting to a server");
            self.connects.push_back(dst);
        }
        queue.push(id);
        Ok(id)
    }

    fn start(
        &mut self,
        now: Instant,
        conn: ConnId,
        request: Request,
        params: SendParams,
        parent: Option<RequestId>,
    ) -> Result<RequestId, StartError> {
        let id = RequestId::new(Transport::Tcp, self.next_request_id);
        self.next_request_id += 1;
        self.start_as(id, now, conn, request, params, parent)?;
        Ok(id)
    }

    fn start_as(
        &mut self,
        id: RequestId,
        now: Instant,
        conn: ConnId,
        mut request: Request,
        params: SendParams,
        parent: Option<RequestId>,
    ) -> Result<(), StartError> {
        if self.exchanges.len() >= self.config.max_client_exchanges {
            return Err(StartError::TooManyExchanges);
        }
        let Some(c) = self.conns.get(&conn) else { return Err(StartError::TooManyPeers) };
        let peer_mms = c.peer_mms;
        if params.token.is_some_and(|t| self.tokens.contains_key(&(conn, t))) {
            return Err(StartError::TokenInUse);
        }
        let token = params.token.unwrap_or_else(|| self.fresh_token(conn));
        // Blocks must fit the peer's Max-Message-Size (1152 until its CSM arrives).
        let fit = corral_wire::BlockValue::szx_for_size(peer_mms.saturating_sub(128)).min(6);
        let szx = params.block_szx.unwrap_or(self.config.block.szx).min(fit);
        let observe = matches!(request.method, Code::GET | Code::FETCH)
            && request.options.observe() == Some(corral_wire::OBSERVE_REGISTER);
        let mut transfer = None;
        let too_big = request.payload.len() + 256 > peer_mms;
        if too_big || params.block_szx.is_some() {
            let (t, first) =
                Transfer::start(request, szx, self.config.block.max_body, None, params.block_szx.is_some());
            transfer = Some(Box::new(t));
            request = first;
        }
        let deadline = now + params.timeout.unwrap_or(self.config.request_timeout);
        self.tokens.insert((conn, token), id);
        self.send(
            conn,
            &TcpMessage {
                code: request.method,
                token,
                options: request.options.clone(),
                payload: request.payload.clone(),
            },
        );
        self.exchanges.insert(
            id,
            Exchange {
                conn,
                token,
                deadline: Some(deadline),
                request,
                observe,
                observing: false,
                transfer,
                parent,
                szx,
                ping: false,
            },
        );
        self.push_timer(deadline, id);
        Ok(())
    }

    /// Sends a Ping (RFC 8323 §5.4); the Pong arrives as [`Event::Pong`].
    pub fn ping(&mut self, now: Instant, conn: ConnId) -> Result<RequestId, StartError> {
        if !self.conns.contains_key(&conn) {
            return Err(StartError::TooManyPeers);
        }
        let token = self.fresh_token(conn);
        let id = RequestId::new(Transport::Tcp, self.next_request_id);
        self.next_request_id += 1;
        self.send(conn, &TcpMessage::new(Code::PING, token));
        self.tokens.insert((conn, token), id);
        let deadline = now + self.config.request_timeout;
        self.exchanges.insert(
            id,
            Exchange {
                conn,
                token,
                deadline: Some(deadline),
                request: Request::new(Code::EMPTY),
                observe: false,
                observing: false,
                transfer: None,
                parent: None,
                szx: 6,
                ping: true,
            },
        );
        self.push_timer(deadline, id);
        Ok(id)
    }

    /// Abandons a request without telling the peer (for an observation prefer [`TcpEndpoint::deregister`]:
    /// over TCP there is no RST to reject the next notification with).
    pub fn cancel(&mut self, _now: Instant, id: RequestId) {
        if let Some(e) = self.exchanges.remove(&id) {
            self.tokens.remove(&(e.conn, e.token));
        }
        if let Some(w) = self.waiting.remove(&id) {
            if let Some(q) = self.connecting.get_mut(&w.dst) {
                q.retain(|i| *i != id);
            }
        }
    }

    /// Ends an observation with a GET carrying Observe=1 (RFC 8323 §7.2 requires explicit cancellation).
    pub fn deregister(&mut self, now: Instant, id: RequestId) {
        self.end_observation(now, id, |request| {
            request.options.set_uint(OptionNumber::OBSERVE, u64::from(corral_wire::OBSERVE_DEREGISTER));
            request.options.remove(OptionNumber::BLOCK2);
        });
    }

    /// Like [`TcpEndpoint::deregister`], with the caller's own deregistration `request` (see
    /// [`crate::Endpoint::deregister_with`]).
    pub fn deregister_with(&mut self, now: Instant, id: RequestId, request: Request) {
        self.end_observation(now, id, |r| *r = request);
    }

    fn end_observation(&mut self, now: Instant, id: RequestId, deregistration: impl FnOnce(&mut Request)) {
        let Some(e) = self.exchanges.get_mut(&id) else { return };
        if !e.observing {
            return;
        }
        e.observing = false;
        e.observe = false;
        deregistration(&mut e.request);
        let deadline = now + self.config.request_timeout;
        e.deadline = Some(deadline);
        let m = TcpMessage {
            code: e.request.method,
            token: e.token,
            options: e.request.options.clone(),
            payload: e.request.payload.clone(),
        };
        let conn = e.conn;
        self.push_timer(deadline, id);
        self.send(conn, &m);
    }

    pub fn is_active(&self, id: RequestId) -> bool {
        self.exchanges.contains_key(&id) || self.waiting.contains_key(&id)
    }

    fn fresh_token(&mut self, conn: ConnId) -> Token {
        let len = usize::from(self.config.token_len.clamp(1, 8));
        loop {
            let mut b = [0u8; 8];
            let (key, seed) = (self.config.secret_seed, self.config.seed ^ 0x7c9);
            self.secret.get_or_insert_with(|| Box::new(SecretRng::keyed(key, seed, 1))).fill(&mut b[..len]);
            let t = Token::new(&b[..len]).unwrap_or(Token::EMPTY);
            if !self.tokens.contains_key(&(conn, t)) {
                return t;
            }
        }
    }

    fn on_response(&mut self, now: Instant, conn: ConnId, msg: TcpMessage) {
        let Some(&id) = self.tokens.get(&(conn, msg.token)) else {
            debug!(?conn, token = %msg.token, "response for no request; ignoring (TCP has no RST)");
            return;
        };
        let from = match self.conns.get(&conn) {
            Some(c) => c.peer,
            None => return,
        };
        let response = Response { code: msg.code, options: msg.options, payload: msg.payload };
        let Some(ex) = self.exchanges.get_mut(&id) else { return };
        if ex.observe && response.code.is_success() && response.options.observe().is_some() {
            ex.observing = true;
            ex.deadline = None;
            if response.options.block2().is_some_and(|b| b.more) {
                let mut request = ex.request.clone();
                request.options.remove(OptionNumber::OBSERVE);
                let (t, step) = Transfer::for_notification(request, ex.szx, self.config.block.max_body, response);
                if let Step::Send(next) = step {
                    if let Ok(sub) = self.start(now, conn, next, SendParams::default(), Some(id)) {
                        if let Some(e) = self.exchanges.get_mut(&sub) {
                            e.transfer = Some(Box::new(t));
                        }
                    }
                }
                return;
            }
            self.events.push_back(Event::Response { id, from, response });
            return;
        }
        let mut response = response;
        let block_more = response.options.block2().is_some_and(|b| b.more);
        if ex.transfer.is_some() || block_more {
            let (max_body, szx) = (self.config.block.max_body, ex.szx);
            let step = match ex.transfer.as_mut() {
                Some(t) => t.on_response(response),
                None => {
                    let (t, step) = Transfer::from_first_response(ex.request.clone(), szx, max_body, response);
                    ex.transfer = Some(Box::new(t));
                    step
                }
            };
            match step {
                Step::Send(next) => {
                    let old = ex.token;
                    let token = self.fresh_token(conn);
                    let Some(ex) = self.exchanges.get_mut(&id) else { return };
                    ex.token = token;
                    ex.request = next.clone();
                    self.tokens.remove(&(conn, old));
                    self.tokens.insert((conn, token), id);
                    self.send(
                        conn,
                        &TcpMessage { code: next.method, token, options: next.options, payload: next.payload },
                    );
                    return;
                }
                Step::Fail(e) => {
                    self.finish(id, Some(e), None, from);
                    return;
                }
                Step::Done(full) => response = full,
            }
        }
        self.finish(id, None, Some(response), from);
    }

    /// Ends exchange `id` with a response or an error, reporting to it or to the observation it serves.
    fn finish(&mut self, id: RequestId, error: Option<RequestError>, response: Option<Response>, from: SocketAddr) {
        let Some(ex) = self.exchanges.remove(&id) else { return };
        self.tokens.remove(&(ex.conn, ex.token));
        let report = match ex.parent {
            Some(p) if self.exchanges.contains_key(&p) => p,
            Some(_) => return,
            None => id,
        };
        match (response, error) {
            (Some(response), _) => self.events.push_back(Event::Response { id: report, from, response }),
            (None, Some(error)) if ex.parent.is_none() => self.events.push_back(Event::Failed { id, error }),
            _ => {}
        }
    }

    /// Request deadlines stay in the heap after their request completes and are skipped when they fire;
    /// when such stale entries clearly dominate, the heap is rebuilt with the live ones.
    fn push_timer(&mut self, at: Instant, id: RequestId) {
        self.timers.push(Reverse((at, id)));
        if self.timers.len() > 4096 && self.timers.len() > 4 * (self.exchanges.len() + self.waiting.len()) {
            let exchanges = &self.exchanges;
            let waiting = &self.waiting;
            self.timers.retain(|Reverse((at, id))| {
                exchanges.get(id).is_some_and(|e| e.deadline == Some(*at)) || waiting.contains_key(id)
            });
        }
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(&Reverse((at, conn))) = self.conn_timers.peek() {
            if at > now {
                break;
            }
            self.conn_timers.pop();
            self.check_conn(now, conn);
        }
        while let Some(&Reverse((at, id))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            if self.waiting.get(&id).is_some_and(|w| w.deadline == at) {
                info!(?id, "no connection to the server in time");
                self.cancel(now, id);
                self.events.push_back(Event::Failed { id, error: RequestError::Timeout });
                continue;
            }
            let Some(ex) = self.exchanges.get(&id) else { continue };
            if ex.deadline != Some(at) {
                continue;
            }
            let from = self.conns.get(&ex.conn).map(|c| c.peer).unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
            info!(?id, "request over TCP timed out");
            let error = Transfer::failure(ex.transfer.as_deref(), RequestError::Timeout);
            self.finish(id, Some(error), None, from);
        }
    }
}

impl TcpEndpoint {
    /// A connection's deadline came: abort it if its CSM is still missing, release it if it has been idle
    /// for the idle timeout with nothing in progress, else look again when it could next be idle.
    fn check_conn(&mut self, now: Instant, conn: ConnId) {
        let Some(c) = self.conns.get(&conn) else { return };
        if c.closing {
            return;
        }
        if !c.got_csm {
            info!(?conn, peer = %c.peer, "no CSM in time; aborting the connection");
            self.abort(conn, "no CSM within the CSM timeout (RFC 8323 §5.3)");
            return;
        }
        let idle_until = c.last_active + self.config.idle_timeout;
        let busy = self.inbound.values().any(|i| i.conn == conn)
            || self.exchanges.values().any(|e| e.conn == conn)
            || self.server.observers.has_peer(c.peer);
        if idle_until <= now && !busy {
            debug!(?conn, peer = %c.peer, "connection idle; releasing it");
            self.release(conn);
        } else {
            let next = if idle_until > now { idle_until } else { now + self.config.idle_timeout };
            self.conn_timers.push(Reverse((next, conn)));
        }
    }
}

impl std::fmt::Debug for TcpEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpEndpoint")
            .field("connections", &self.conns.len())
            .field("exchanges", &self.exchanges.len())
            .finish()
    }
}
