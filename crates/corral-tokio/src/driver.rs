//! The driver: runs one sans-IO [`Endpoint`] or [`Node`] over one [`CoapSocket`] on tokio.
//!
//! One task owns the state machine and the socket; everything else talks to it through a command channel
//! (requests from [`crate::Client`], responses from async handlers, shutdown). After every input it drains
//! the machine's outputs — events to the waiting requests, multicast joins to the socket, datagrams to the
//! wire — then sleeps until the next datagram, command or `poll_timeout`.
//!
//! Time: corral's [`Instant`] is microseconds since a `std::time::Instant` taken when the driver is
//! created (its [`Clock`]).

use crate::socket::{CoapSocket, RecvBuffers};
use corral_proto::wire::Code;
use corral_proto::{
    Endpoint, Event, InboundId, Instant, Node, NodeCommand, Request, RequestError, RequestId, Response, SendParams,
    StartError, Stats, Transmit,
};
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, trace, warn};

/// Maps corral's [`Instant`] onto the wall clock: microseconds since the driver started.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch: std::time::Instant,
}

impl Clock {
    pub fn new() -> Clock {
        Clock { epoch: std::time::Instant::now() }
    }

    pub fn now(&self) -> Instant {
        Instant::from_micros(u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX))
    }

    pub fn to_std(&self, t: Instant) -> std::time::Instant {
        self.epoch + std::time::Duration::from_micros(t.as_micros())
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

/// A seed for an endpoint's RNG from the OS (std's randomly keyed hasher, the clock and a counter), so that
/// tokens and message IDs are unpredictable off-path (RFC 7252 §5.3.1). Only the runtime does this.
pub fn os_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
    h.write_u32(std::process::id());
    h.finish()
}

/// What the driver runs: an endpoint alone (a client) or a node with services (a server).
pub(crate) trait Machine {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, dst_ip: Option<IpAddr>, data: &[u8]);
    fn handle_timeout(&mut self, now: Instant);
    fn poll_transmit(&mut self) -> Option<Transmit>;
    fn poll_timeout(&self) -> Option<Instant>;
    fn poll_event(&mut self) -> Option<Event>;
    fn poll_command(&mut self) -> Option<NodeCommand>;
    fn endpoint(&self) -> &Endpoint;
    fn endpoint_mut(&mut self) -> &mut Endpoint;
}

impl Machine for Endpoint {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, dst_ip: Option<IpAddr>, data: &[u8]) {
        Endpoint::handle_datagram(self, now, from, dst_ip, data)
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
    fn poll_event(&mut self) -> Option<Event> {
        Endpoint::poll_event(self)
    }
    fn poll_command(&mut self) -> Option<NodeCommand> {
        None
    }
    fn endpoint(&self) -> &Endpoint {
        self
    }
    fn endpoint_mut(&mut self) -> &mut Endpoint {
        self
    }
}

impl Machine for Node {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, dst_ip: Option<IpAddr>, data: &[u8]) {
        Node::handle_datagram(self, now, from, dst_ip, data)
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
    fn poll_event(&mut self) -> Option<Event> {
        Node::poll_event(self)
    }
    fn poll_command(&mut self) -> Option<NodeCommand> {
        Node::poll_command(self)
    }
    fn endpoint(&self) -> &Endpoint {
        Node::endpoint(self)
    }
    fn endpoint_mut(&mut self) -> &mut Endpoint {
        Node::endpoint_mut(self)
    }
}

/// Where the outcome of a request goes.
pub(crate) enum Reply {
    Unicast(oneshot::Sender<Result<(SocketAddr, Response), RequestFailure>>),
    Multicast(mpsc::UnboundedSender<Result<(SocketAddr, Response), RequestFailure>>),
}

/// Why a request issued through the driver produced no response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestFailure {
    Failed(RequestError),
    Start(StartError),
    Unreachable,
}

/// A snapshot of a driver's endpoint, for diagnostics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverStats {
    pub stats: Stats,
    /// (peers, client exchanges, inbound exchanges, tracked sent messages, dedup entries): see
    /// `Endpoint::table_sizes`.
    pub table_sizes: corral_proto::TableSizes,
}

pub(crate) enum Command {
    Request {
        ticket: u64,
        dst: SocketAddr,
        request: Request,
        params: SendParams,
        reply: Reply,
    },
    /// The caller stopped waiting (its future was dropped).
    Cancel {
        ticket: u64,
    },
    /// An async handler's response.
    Respond {
        id: InboundId,
        response: Response,
    },
    Stats {
        reply: oneshot::Sender<DriverStats>,
    },
    Join {
        group: IpAddr,
        join: bool,
        reply: oneshot::Sender<io::Result<()>>,
    },
    /// Stop reading, give pending responses up to `grace` to go out, then return.
    Shutdown {
        grace: std::time::Duration,
    },
}

pub(crate) struct Driver<M> {
    pub machine: M,
    pub socket: CoapSocket,
    pub clock: Clock,
    pub rx: mpsc::UnboundedReceiver<Command>,
    pending: HashMap<RequestId, (u64, Reply)>,
    tickets: HashMap<u64, RequestId>,
    /// Set by shutdown: stop by this time even if responses are still pending.
    draining: Option<Instant>,
}

/// How many batches to read before looking at commands and timers again, so neither starves under load.
const READS_PER_TURN: usize = 16;
/// Commands handled per turn, for the same reason.
const COMMANDS_PER_TURN: usize = 256;

impl<M: Machine> Driver<M> {
    pub fn new(machine: M, socket: CoapSocket, clock: Clock, rx: mpsc::UnboundedReceiver<Command>) -> Driver<M> {
        Driver { machine, socket, clock, rx, pending: HashMap::new(), tickets: HashMap::new(), draining: None }
    }

    /// Runs until shutdown, or until every command sender is gone and nothing is pending.
    pub async fn run(mut self) {
        let mut bufs = self.socket.recv_buffers();
        let sleep = tokio::time::sleep_until(tokio::time::Instant::now());
        tokio::pin!(sleep);
        let mut armed: Option<Instant> = None;
        let mut commands_open = true;
        loop {
            let now = self.clock.now();
            if self.machine.poll_timeout().is_some_and(|t| t <= now) {
                self.machine.handle_timeout(now);
            }
            self.drain_outputs(now).await;
            if let Some(deadline) = self.draining {
                let idle = self.machine.endpoint().table_sizes().inbound_exchanges == 0;
                if idle || now >= deadline {
                    debug!(idle, "driver stopped");
                    return;
                }
            }
            if !commands_open && self.pending.is_empty() {
                trace!("all handles dropped: driver stopped");
                return;
            }
            let mut wake = self.machine.poll_timeout();
            if let Some(d) = self.draining {
                wake = Some(wake.map_or(d, |w| w.min(d)));
            }
            if wake != armed {
                if let Some(t) = wake {
                    sleep.as_mut().reset(self.clock.to_std(t).into());
                }
                armed = wake;
            }
            tokio::select! {
                biased;
                cmd = self.rx.recv(), if commands_open => match cmd {
                    Some(cmd) => {
                        self.handle_command(cmd);
                        for _ in 1..COMMANDS_PER_TURN {
                            match self.rx.try_recv() {
                                Ok(cmd) => self.handle_command(cmd),
                                Err(_) => break,
                            }
                        }
                    }
                    None => commands_open = false,
                },
                r = self.socket.readable(), if self.draining.is_none() => {
                    if let Err(e) = r {
                        warn!(error = %e, "socket failed; driver stopped");
                        return;
                    }
                    self.read(&mut bufs).await;
                }
                _ = &mut sleep, if armed.is_some() => {}
            }
        }
    }

    /// Reads and handles what is waiting on the socket, sending replies after each batch.
    async fn read(&mut self, bufs: &mut RecvBuffers) {
        for _ in 0..READS_PER_TURN {
            match self.socket.try_recv(bufs) {
                Ok(_) => {
                    let now = self.clock.now();
                    for (from, dst, data) in bufs.datagrams() {
                        trace!(%from, ?dst, len = data.len(), "datagram in");
                        self.machine.handle_datagram(now, from, dst, data);
                    }
                    self.drain_outputs(now).await;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    // ICMP errors surface here on some systems; they say nothing the message layer needs.
                    debug!(error = %e, "receive error");
                    return;
                }
            }
        }
    }

    fn handle_command(&mut self, cmd: Command) {
        let now = self.clock.now();
        match cmd {
            Command::Request { ticket, dst, request, params, reply } => {
                if !self.socket.can_reach(&dst) {
                    send_failure(reply, RequestFailure::Unreachable);
                    return;
                }
                match self.machine.endpoint_mut().request(now, dst, request, params) {
                    Ok(id) => {
                        self.pending.insert(id, (ticket, reply));
                        self.tickets.insert(ticket, id);
                    }
                    Err(e) => send_failure(reply, RequestFailure::Start(e)),
                }
            }
            Command::Cancel { ticket } => {
                if let Some(id) = self.tickets.remove(&ticket) {
                    self.pending.remove(&id);
                    self.machine.endpoint_mut().cancel(now, id);
                }
            }
            Command::Respond { id, response } => {
                if self.machine.endpoint_mut().respond(now, id, response).is_err() {
                    debug!(?id, "handler answered an exchange that no longer exists");
                }
            }
            Command::Stats { reply } => {
                let e = self.machine.endpoint();
                let _ = reply.send(DriverStats { stats: e.stats(), table_sizes: e.table_sizes() });
            }
            Command::Join { group, join, reply } => {
                let r = if join { self.socket.join(group) } else { self.socket.leave(group) };
                let _ = reply.send(r);
            }
            Command::Shutdown { grace } => {
                debug!(?grace, "shutting down: no new requests");
                self.draining = Some(now + corral_proto::Duration::from(grace));
            }
        }
    }

    /// Delivers events, applies multicast commands and sends every pending datagram.
    async fn drain_outputs(&mut self, now: Instant) {
        while let Some(event) = self.machine.poll_event() {
            self.on_event(now, event);
        }
        while let Some(cmd) = self.machine.poll_command() {
            let (group, r) = match cmd {
                NodeCommand::JoinGroup(g) => (g, self.socket.join(g)),
                NodeCommand::LeaveGroup(g) => (g, self.socket.leave(g)),
            };
            match r {
                Ok(()) => debug!(?cmd, "multicast membership changed"),
                Err(e) => warn!(%group, error = %e, "multicast join/leave failed"),
            }
        }
        while let Some(t) = self.machine.poll_transmit() {
            trace!(dst = %t.dst, len = t.payload.len(), "datagram out");
            if let Err(e) = self.socket.send(t.dst, &t.payload).await {
                debug!(dst = %t.dst, error = %e, "send failed");
            }
        }
    }

    fn on_event(&mut self, now: Instant, event: Event) {
        match event {
            Event::Request(req) => {
                // A bare endpoint (a client) serves nothing.
                let response = Response::error(Code::NOT_FOUND, "this endpoint is a client and serves no resources");
                let _ = self.machine.endpoint_mut().respond(now, req.id, response);
            }
            Event::Response { id, from, response } => {
                let multicast = matches!(self.pending.get(&id), Some((_, Reply::Multicast(_))));
                if multicast {
                    if let Some((_, Reply::Multicast(tx))) = self.pending.get(&id) {
                        let _ = tx.send(Ok((from, response)));
                    }
                } else if let Some((ticket, Reply::Unicast(tx))) = self.pending.remove(&id) {
                    self.tickets.remove(&ticket);
                    let _ = tx.send(Ok((from, response)));
                }
            }
            Event::Failed { id, error } => {
                if let Some((ticket, reply)) = self.pending.remove(&id) {
                    self.tickets.remove(&ticket);
                    send_failure(reply, RequestFailure::Failed(error));
                }
            }
            Event::MulticastDone { id } => {
                if let Some((ticket, _)) = self.pending.remove(&id) {
                    self.tickets.remove(&ticket);
                }
            }
            Event::Pong { .. } => {}
        }
    }
}

fn send_failure(reply: Reply, failure: RequestFailure) {
    match reply {
        Reply::Unicast(tx) => {
            let _ = tx.send(Err(failure));
        }
        Reply::Multicast(tx) => {
            let _ = tx.send(Err(failure));
        }
    }
}
