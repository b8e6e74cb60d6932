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
//!
//! # Rooms
//! - `conn`: the connection — its life cycle (accept, make room, close, Release, Abort), the byte stream
//!   cut into frames, the signalling messages (CSM, Ping/Pong, §5) and the connection timers (CSM deadline,
//!   idle release).
//! - `exchange`: requests and responses on a connection — the server side (requests in, responses and
//!   notifications out, observers) and the client side (requests out, on connections this endpoint
//!   holds or asks the driver for, block-wise and Observe, deadlines).
//!
//! This file holds the tables they share, the outputs and the timer dispatch.

mod conn;
mod exchange;

use crate::endpoint::block::Transfer;
use crate::endpoint::observe::ObservePolicy;
use crate::endpoint::server::{RequestMeta, ServerLayer};
use crate::endpoint::{new_map, BlockConfig, Event, Map};
use crate::message::{InboundId, Request, RequestError, RequestId, SendParams};
use crate::rng::{Rng, SecretRng};
use crate::time::{Duration, Instant};
use corral_wire::tcp::FrameDecoder;
use corral_wire::{OptionNumber, Token};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::net::SocketAddr;
use tracing::info;

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

impl std::fmt::Debug for TcpEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpEndpoint")
            .field("connections", &self.conns.len())
            .field("exchanges", &self.exchanges.len())
            .finish()
    }
}
