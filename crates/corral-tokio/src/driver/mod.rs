//! The driver: runs one sans-IO machine — a client's UDP [`Endpoint`] and [`TcpEndpoint`], or a server's
//! [`Node`] — over one [`CoapSocket`] and any number of TCP connections on tokio.
//!
//! One task owns the state machine and the UDP socket; everything else talks to it through channels:
//! commands (requests from [`crate::Client`], responses from async handlers, shutdown) and the input of the
//! TCP connection tasks ([`crate::net::tcp`]). After every input it drains the machine's outputs — events to the
//! waiting requests and observations, multicast joins to the socket, frames to connections, connections to
//! close, datagrams to the wire — then sleeps until the next datagram, command, TCP input or
//! `poll_timeout` (the turn is [`crate::event_loop`]'s; this module says what each step does).
//!
//! Time: corral's [`Instant`] is microseconds since a `std::time::Instant` taken when the driver is
//! created (its [`Clock`]).
//!
//! # The room
//! Everything that turns a sans-IO machine over on real sockets lives in this folder: this driver, the
//! loop it and the other tokio drivers run (`event_loop`), the driver without a runtime (`blocking`,
//! Linux) and the steering of datagrams among the sockets of one port (`steer`, Linux).
//! They use `crate::net`'s sockets and connections; nothing here names a client, a server's routes or
//! an application (`crate::app` sits above).

#[cfg(target_os = "linux")]
pub mod blocking;
pub mod event_loop;
#[cfg(target_os = "linux")]
pub mod steer;

use crate::net::socket::{CoapSocket, OutDatagram, RecvBuffers};
use crate::net::tcp::{ConnLink, Remote, TcpInput};
use corral_dtls::{Plaintext, Port};
use corral_proto::wire::Code;
use corral_proto::{
    ConnId, Event, InboundId, Instant, Node, NodeCommand, Request, RequestError, RequestId, Response, SendParams,
    StartError, Stats, TcpTransmit, Transmit, Transports, UnknownExchange,
};
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::ops::ControlFlow;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, info, trace, warn};

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

/// 64 random bits from the operating system's CSPRNG (getrandom), for seeds of non-secret choices (back-off
/// jitter, leisure) and identifiers. The keys of values peers must not predict come from [`os_seeded`].
pub fn os_seed() -> u64 {
    u64::from_le_bytes(os_random())
}

/// `N` random bytes from the operating system's CSPRNG (getrandom).
pub(crate) fn os_random<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    // Without the OS's random source nothing here can be unpredictable; no peer can cause this.
    getrandom::fill(&mut b).expect("the operating system's random source (getrandom) is available");
    b
}

/// An endpoint (or TCP endpoint) configuration keyed from the operating system's CSPRNG: a 256-bit key
/// for its tokens, first message IDs, Echo values and Request-Tags (`corral_proto::SecretRng`), so that
/// observing any number of them predicts none (RFC 7252 §5.3.1, RFC 9175 §2.4), and a seed for its
/// non-secret choices. Every driver on real sockets seeds its endpoints with it; only the simulator and
/// tests seed them from a number.
pub fn os_seeded<C: OsSeeded>(config: C) -> C {
    config.with_seeds(os_seed(), os_random())
}

/// A configuration [`os_seeded`] can key.
pub trait OsSeeded {
    fn with_seeds(self, seed: u64, secret: [u8; 32]) -> Self;
}

impl OsSeeded for corral_proto::EndpointConfig {
    fn with_seeds(self, seed: u64, secret: [u8; 32]) -> Self {
        corral_proto::EndpointConfig { seed, secret_seed: Some(secret), ..self }
    }
}

impl OsSeeded for corral_proto::TcpConfig {
    fn with_seeds(self, seed: u64, secret: [u8; 32]) -> Self {
        corral_proto::TcpConfig { seed, secret_seed: Some(secret), ..self }
    }
}

/// What the driver runs: a client's endpoints or a node with services (a server), either of them behind
/// DTLS (`crate::secure`). Both carry a UDP endpoint and a TCP endpoint; request and inbound ids tell the
/// two apart (their [`Transport`](corral_proto::Transport)). Datagrams come in on, and leave from, the
/// driver's socket ([`Port::Main`]) or its socket for `coaps://` alone ([`Port::Secure`]).
pub(crate) trait Machine {
    fn handle_datagram(&mut self, now: Instant, port: Port, from: SocketAddr, dst_ip: Option<IpAddr>, data: &[u8]);
    /// An ICMP error says a datagram to `peer` (starting with `quoted`) was not delivered.
    fn handle_unreachable(&mut self, now: Instant, peer: SocketAddr, quoted: &[u8]);
    fn handle_timeout(&mut self, now: Instant);
    fn handle_tcp_connected(&mut self, now: Instant, conn: ConnId, peer: SocketAddr);
    fn handle_tcp_data(&mut self, now: Instant, conn: ConnId, data: &[u8]);
    fn handle_tcp_closed(&mut self, now: Instant, conn: ConnId);
    fn handle_tcp_connect_failed(&mut self, now: Instant, dst: SocketAddr);
    fn poll_tcp_connect(&mut self) -> Option<SocketAddr>;
    fn poll_transmit(&mut self, now: Instant) -> Option<(Port, Transmit)>;
    fn poll_tcp_transmit(&mut self) -> Option<TcpTransmit>;
    fn poll_tcp_close(&mut self) -> Option<ConnId>;
    fn poll_timeout(&self) -> Option<Instant>;
    fn poll_event(&mut self) -> Option<Event>;
    fn poll_command(&mut self) -> Option<NodeCommand>;
    /// The UDP and TCP endpoints, which act on an exchange by its id whatever its transport.
    fn transports(&self) -> &Transports;
    fn transports_mut(&mut self) -> &mut Transports;
    /// Answers a received request (through the node's layer, for a node).
    fn respond(&mut self, now: Instant, id: InboundId, response: Response) -> Result<(), UnknownExchange>;
}

/// A client: a UDP endpoint and a TCP endpoint, serving nothing.
pub(crate) struct ClientMachine(pub Transports);

impl Machine for ClientMachine {
    fn handle_datagram(&mut self, now: Instant, _: Port, from: SocketAddr, dst_ip: Option<IpAddr>, data: &[u8]) {
        self.0.udp_mut().handle_datagram(now, from, dst_ip, data)
    }
    fn handle_unreachable(&mut self, now: Instant, peer: SocketAddr, quoted: &[u8]) {
        self.0.udp_mut().handle_unreachable(now, peer, Some(quoted))
    }
    fn handle_timeout(&mut self, now: Instant) {
        Plaintext::handle_timeout(self, now)
    }
    fn handle_tcp_connected(&mut self, now: Instant, conn: ConnId, peer: SocketAddr) {
        self.0.tcp_mut().handle_connected(now, conn, peer)
    }
    fn handle_tcp_data(&mut self, now: Instant, conn: ConnId, data: &[u8]) {
        self.0.tcp_mut().handle_data(now, conn, data)
    }
    fn handle_tcp_closed(&mut self, now: Instant, conn: ConnId) {
        self.0.tcp_mut().handle_closed(now, conn)
    }
    fn handle_tcp_connect_failed(&mut self, now: Instant, dst: SocketAddr) {
        self.0.tcp_mut().handle_connect_failed(now, dst)
    }
    fn poll_tcp_connect(&mut self) -> Option<SocketAddr> {
        self.0.tcp_mut().poll_connect()
    }
    fn poll_transmit(&mut self, _: Instant) -> Option<(Port, Transmit)> {
        self.0.udp_mut().poll_transmit().map(|t| (Port::Main, t))
    }
    fn poll_tcp_transmit(&mut self) -> Option<TcpTransmit> {
        self.0.tcp_mut().poll_transmit()
    }
    fn poll_tcp_close(&mut self) -> Option<ConnId> {
        self.0.tcp_mut().poll_close()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Plaintext::poll_timeout(self)
    }
    fn poll_event(&mut self) -> Option<Event> {
        self.0.poll_event()
    }
    fn poll_command(&mut self) -> Option<NodeCommand> {
        None
    }
    fn transports(&self) -> &Transports {
        &self.0
    }
    fn transports_mut(&mut self) -> &mut Transports {
        &mut self.0
    }
    fn respond(&mut self, now: Instant, id: InboundId, response: Response) -> Result<(), UnknownExchange> {
        self.0.respond(now, id, response)
    }
}

/// A client's UDP endpoint behind DTLS (`ClientBuilder::dtls`).
impl Plaintext for ClientMachine {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, local: Option<IpAddr>, data: &[u8]) {
        self.0.udp_mut().handle_datagram(now, from, local, data)
    }
    fn handle_unreachable(&mut self, now: Instant, peer: SocketAddr, quoted: Option<&[u8]>) {
        self.0.udp_mut().handle_unreachable(now, peer, quoted)
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.0.handle_timeout(now)
    }
    fn poll_transmit(&mut self) -> Option<Transmit> {
        self.0.udp_mut().poll_transmit()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.0.poll_timeout()
    }
    fn fail_peer(&mut self, now: Instant, peer: SocketAddr, error: RequestError) {
        self.0.udp_mut().fail_peer(now, peer, error)
    }
    fn set_datagram_identity(&mut self, identity: Option<Arc<[u8]>>) {
        self.0.udp_mut().set_datagram_identity(identity)
    }
}

impl Machine for Node {
    fn handle_datagram(&mut self, now: Instant, _: Port, from: SocketAddr, dst_ip: Option<IpAddr>, data: &[u8]) {
        Node::handle_datagram(self, now, from, dst_ip, data)
    }
    fn handle_unreachable(&mut self, now: Instant, peer: SocketAddr, quoted: &[u8]) {
        Node::handle_unreachable(self, now, peer, Some(quoted))
    }
    fn handle_timeout(&mut self, now: Instant) {
        Node::handle_timeout(self, now)
    }
    fn handle_tcp_connected(&mut self, now: Instant, conn: ConnId, peer: SocketAddr) {
        Node::handle_tcp_connected(self, now, conn, peer)
    }
    fn handle_tcp_data(&mut self, now: Instant, conn: ConnId, data: &[u8]) {
        Node::handle_tcp_data(self, now, conn, data)
    }
    fn handle_tcp_closed(&mut self, now: Instant, conn: ConnId) {
        Node::handle_tcp_closed(self, now, conn)
    }
    fn handle_tcp_connect_failed(&mut self, now: Instant, dst: SocketAddr) {
        Node::handle_tcp_connect_failed(self, now, dst)
    }
    fn poll_tcp_connect(&mut self) -> Option<SocketAddr> {
        Node::poll_tcp_connect(self)
    }
    fn poll_transmit(&mut self, _: Instant) -> Option<(Port, Transmit)> {
        Node::poll_transmit(self).map(|t| (Port::Main, t))
    }
    fn poll_tcp_transmit(&mut self) -> Option<TcpTransmit> {
        Node::poll_tcp_transmit(self)
    }
    fn poll_tcp_close(&mut self) -> Option<ConnId> {
        Node::poll_tcp_close(self)
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
    fn transports(&self) -> &Transports {
        Node::transports(self)
    }
    fn transports_mut(&mut self) -> &mut Transports {
        Node::transports_mut(self)
    }
    fn respond(&mut self, now: Instant, id: InboundId, response: Response) -> Result<(), UnknownExchange> {
        Node::respond(self, now, id, response)
    }
}

/// A response, or why there is none, as delivered to a waiting caller.
pub(crate) type Outcome = Result<(SocketAddr, Response), RequestFailure>;

/// Where the outcome of a request goes.
pub(crate) enum Reply {
    Unicast(oneshot::Sender<Outcome>),
    Multicast(mpsc::UnboundedSender<Outcome>),
    /// An observation: every notification, then the final response (or failure); the channel closes when
    /// the observation has ended. Bounded: a consumer that falls behind misses intermediate notifications
    /// (each one replaces the state the previous described, RFC 7641 §1.2), never the end.
    Observe(mpsc::Sender<Outcome>),
}

/// Notifications buffered for an [`crate::Observation`] that is not being read.
pub(crate) const OBSERVE_QUEUE: usize = 256;

/// Why a request issued through the driver produced no response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RequestFailure {
    Failed(RequestError),
    Start(StartError),
    Unreachable,
    /// The socket could not send to the destination: no route to its network or host.
    NoRoute,
    /// CoAP over TCP: the connection could not be made.
    Connect(String),
}

/// A snapshot of a driver's endpoint, for diagnostics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverStats {
    pub stats: Stats,
    /// (peers, client exchanges, inbound exchanges, tracked sent messages, dedup entries): see
    /// `Endpoint::table_sizes`.
    pub table_sizes: corral_proto::TableSizes,
    /// Open CoAP-over-TCP connections.
    pub tcp_connections: usize,
}

/// Which transport a request takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Transport {
    Udp,
    /// CoAP over TCP: one connection per server, made on the first request and reused.
    Tcp,
    /// CoAP over TLS (`coaps+tcp://`) to a server whose certificate names this: as `Tcp`, inside TLS.
    Tls(rustls::pki_types::ServerName<'static>),
}

pub(crate) enum Command {
    Request {
        ticket: u64,
        dst: SocketAddr,
        transport: Transport,
        request: Request,
        params: SendParams,
        reply: Reply,
    },
    /// The caller stopped waiting (its future was dropped).
    Cancel {
        ticket: u64,
    },
    /// The caller is done with an observation: deregister it (GET with Observe=1, RFC 7641 §3.6), now if
    /// it is established, else as soon as it is (TCP, where there is no RST) or by forgetting it (UDP: the
    /// next notification is answered with RST).
    StopObserving {
        ticket: u64,
        /// The deregistration to send instead of the registration with Observe=1: OSCORE's, newly
        /// protected ([`corral_proto::Endpoint::deregister_with`]).
        deregistration: Option<Request>,
    },
    /// An async handler's response.
    Respond {
        id: InboundId,
        response: Response,
    },
    Stats {
        reply: oneshot::Sender<DriverStats>,
    },
    /// How far a request's block-wise transfer has come (UDP; `None` otherwise or when it is not one).
    Progress {
        ticket: u64,
        reply: oneshot::Sender<Option<corral_proto::TransferProgress>>,
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

/// A request the driver is waiting on.
struct Pending {
    ticket: u64,
    reply: Reply,
    /// An observation whose registration succeeded (a notification arrived while it stayed active).
    observing: bool,
    /// The caller is gone: deregister as soon as the observation is established (with this request, when
    /// the caller made one).
    stop: Option<Option<Request>>,
}

/// A TCP request waiting for its connection.
struct Queued {
    ticket: u64,
    request: Request,
    params: SendParams,
    reply: Reply,
}

/// The driver's TCP side: connection tasks, the listener (servers), and connections to servers (clients).
pub(crate) struct TcpSide {
    listener: Option<std::net::TcpListener>,
    /// `coaps+tcp://` (servers): a listener whose connections start with a TLS handshake.
    tls_listener: Option<(std::net::TcpListener, crate::net::tls::TlsServerConfig)>,
    accept: Vec<tokio::task::AbortHandle>,
    /// `coaps+tcp://` (clients): the TLS settings connections to servers are made with.
    tls: Option<crate::net::tls::TlsConnect>,
    tx: mpsc::Sender<TcpInput>,
    rx: mpsc::Receiver<TcpInput>,
    ids: Arc<AtomicU64>,
    conns: HashMap<ConnId, ConnLink>,
    /// Client connections by server (address, and TLS name for `coaps+tcp://`), reused across requests.
    to_server: HashMap<Remote, ConnId>,
    /// Requests waiting for a connection being made.
    connecting: HashMap<Remote, Vec<Queued>>,
}

impl TcpSide {
    pub(crate) fn new(listener: Option<std::net::TcpListener>) -> TcpSide {
        let (tx, rx) = mpsc::channel(crate::net::tcp::INPUT_QUEUE);
        TcpSide {
            listener,
            tls_listener: None,
            accept: Vec::new(),
            tls: None,
            tx,
            rx,
            ids: Arc::new(AtomicU64::new(1)),
            conns: HashMap::new(),
            to_server: HashMap::new(),
            connecting: HashMap::new(),
        }
    }
}

impl TcpSide {
    /// Also accepts `coaps+tcp://` connections on `listener`, each after a TLS handshake with `config`.
    pub(crate) fn with_tls_listener(
        mut self,
        listener: Option<(std::net::TcpListener, crate::net::tls::TlsServerConfig)>,
    ) -> TcpSide {
        self.tls_listener = listener;
        self
    }

    /// Makes `coaps+tcp://` connections to servers with these TLS settings.
    pub(crate) fn with_tls(mut self, tls: Option<crate::net::tls::TlsConnect>) -> TcpSide {
        self.tls = tls;
        self
    }

    fn stop_accepting(&mut self) {
        for a in self.accept.drain(..) {
            a.abort();
        }
    }

    /// Connects to `dst` (unless a connection is being made already) with `queued` waiting for it.
    fn connect(&mut self, dst: Remote, timeout: std::time::Duration, queued: Option<Queued>) {
        match self.connecting.entry(dst.clone()) {
            std::collections::hash_map::Entry::Occupied(mut e) => e.get_mut().extend(queued),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(queued.into_iter().collect());
                crate::net::tcp::connect(dst, timeout, self.ids.clone(), self.tx.clone(), self.tls.clone());
            }
        }
    }
}

impl Drop for TcpSide {
    fn drop(&mut self) {
        self.stop_accepting();
    }
}

pub(crate) struct Driver<M> {
    pub machine: M,
    pub socket: CoapSocket,
    /// A socket for `coaps://` alone ([`Port::Secure`], `Server::listen_dtls`), and its receive buffers.
    secure: Option<(CoapSocket, Option<RecvBuffers>)>,
    pub clock: Clock,
    pub rx: mpsc::UnboundedReceiver<Command>,
    pending: HashMap<RequestId, Pending>,
    tickets: HashMap<u64, RequestId>,
    /// Set by shutdown: stop by this time even if responses are still pending.
    draining: Option<Instant>,
    /// The datagrams of one turn, handed to the kernel together (see [`CoapSocket::try_send_many`]);
    /// kept for its capacity.
    outbox: Vec<corral_proto::Transmit>,
    /// The socket's receive buffers, made at the first read and kept for their capacity.
    bufs: Option<RecvBuffers>,
    /// Some command sender is still alive.
    commands_open: bool,
    tcp: TcpSide,
}

/// How many batches to read before looking at commands and timers again, so neither starves under load.
const READS_PER_TURN: usize = 16;
/// Commands handled per turn, for the same reason.
const COMMANDS_PER_TURN: usize = 256;
/// How long a client waits for a TCP connection when the request sets no timeout.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

impl<M: Machine> Driver<M> {
    pub fn new(
        machine: M,
        socket: CoapSocket,
        clock: Clock,
        rx: mpsc::UnboundedReceiver<Command>,
        tcp: TcpSide,
    ) -> Driver<M> {
        Driver {
            machine,
            socket,
            secure: None,
            clock,
            rx,
            pending: HashMap::new(),
            tickets: HashMap::new(),
            draining: None,
            outbox: Vec::new(),
            bufs: None,
            commands_open: true,
            tcp,
        }
    }

    /// Also reads `socket`, the machine's [`Port::Secure`], and sends what leaves by it from there.
    pub fn with_secure_socket(mut self, socket: Option<CoapSocket>) -> Driver<M> {
        self.secure = socket.map(|s| (s, None));
        self
    }

    /// The socket of `port`: the secure one if there is one, else the driver's.
    fn socket_of(&self, port: Port) -> &CoapSocket {
        match (port, &self.secure) {
            (Port::Secure, Some((s, _))) => s,
            _ => &self.socket,
        }
    }

    /// Runs until shutdown, or until every command sender is gone and nothing is pending.
    pub async fn run(mut self) {
        let plain = self.tcp.listener.take().map(|l| (l, None));
        let tls = self.tcp.tls_listener.take().map(|(l, c)| (l, Some(tokio_rustls::TlsAcceptor::from(c.0))));
        for (listener, tls) in plain.into_iter().chain(tls) {
            match tokio::net::TcpListener::from_std(listener) {
                Ok(l) => {
                    let (ids, tx) = (self.tcp.ids.clone(), self.tcp.tx.clone());
                    let per_address = self.machine.transports().tcp().config().max_connections_per_address;
                    let accepting = crate::net::tcp::accept_loop(l, ids, tx, tls, per_address);
                    self.tcp.accept.push(tokio::spawn(accepting).abort_handle());
                }
                Err(e) => warn!(error = %e, "cannot register a TCP listener; not serving on it"),
            }
        }
        crate::driver::event_loop::run(&mut self).await
    }
}

/// What wakes a driver.
pub(crate) enum Input {
    /// A command, or `None`: every sender is gone.
    Command(Option<Command>),
    /// The UDP socket of this port is readable (or failed).
    Readable(Port, io::Result<()>),
    Tcp(TcpInput),
}

impl<M: Machine> crate::driver::event_loop::Drive for Driver<M> {
    type Input = Input;
    type Output = ();

    fn clock(&self) -> Clock {
        self.clock
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.machine.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.machine.handle_timeout(now)
    }

    fn deadline(&self) -> Option<Instant> {
        self.draining
    }

    async fn flush(&mut self, now: Instant) -> ControlFlow<()> {
        self.drain_outputs(now).await;
        if let Some(deadline) = self.draining {
            let idle = self.machine.transports().udp().table_sizes().inbound_exchanges == 0;
            if idle || now >= deadline {
                debug!(idle, "driver stopped");
                return ControlFlow::Break(());
            }
        }
        if !self.commands_open && self.pending.is_empty() {
            trace!("all handles dropped: driver stopped");
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }

    async fn input(&mut self) -> Input {
        tokio::select! {
            biased;
            cmd = self.rx.recv(), if self.commands_open => Input::Command(cmd),
            r = self.socket.readable(), if self.draining.is_none() => Input::Readable(Port::Main, r),
            r = secure_readable(&self.secure), if self.draining.is_none() => Input::Readable(Port::Secure, r),
            Some(input) = self.tcp.rx.recv() => Input::Tcp(input),
            else => std::future::pending().await,
        }
    }

    async fn handle(&mut self, input: Input) -> ControlFlow<()> {
        match input {
            Input::Command(Some(cmd)) => {
                self.handle_command(cmd);
                for _ in 1..COMMANDS_PER_TURN {
                    match self.rx.try_recv() {
                        Ok(cmd) => self.handle_command(cmd),
                        Err(_) => break,
                    }
                }
            }
            Input::Command(None) => self.commands_open = false,
            Input::Readable(_, Err(e)) => {
                warn!(error = %e, "socket failed; driver stopped");
                return ControlFlow::Break(());
            }
            Input::Readable(port, Ok(())) => {
                self.take_errors(port);
                let kept = match (port, &mut self.secure) {
                    (Port::Secure, Some((_, bufs))) => bufs.take(),
                    _ => self.bufs.take(),
                };
                let mut bufs = kept.unwrap_or_else(|| self.socket_of(port).recv_buffers());
                self.read(port, &mut bufs).await;
                match (port, &mut self.secure) {
                    (Port::Secure, Some((_, kept))) => *kept = Some(bufs),
                    _ => self.bufs = Some(bufs),
                }
            }
            Input::Tcp(input) => {
                self.on_tcp_input(input);
                for _ in 1..READS_PER_TURN {
                    match self.tcp.rx.try_recv() {
                        Ok(input) => self.on_tcp_input(input),
                        Err(_) => break,
                    }
                }
            }
        }
        ControlFlow::Continue(())
    }
}

impl<M: Machine> Driver<M> {
    /// Reads and handles what is waiting on the socket, sending replies after each batch; stops when a
    /// batch comes back short (the queue is empty, see [`CoapSocket::recv`]) — or, with busy polling,
    /// once nothing more has come for [`CoapSocket::busy_poll`] — and after at most `READS_PER_TURN`
    /// batches either way, so that commands and timers are not starved.
    async fn read(&mut self, port: Port, bufs: &mut RecvBuffers) {
        let mut batches = 0;
        while batches < READS_PER_TURN {
            let n = match self.socket_of(port).recv(bufs).await {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return receive_error(&e),
            };
            self.handle_batch(port, bufs).await;
            batches += 1;
            if n < self.socket_of(port).batch() {
                break;
            }
        }
        let busy = self.socket_of(port).busy_poll();
        if busy.is_zero() {
            return;
        }
        let mut last = std::time::Instant::now();
        while batches < READS_PER_TURN {
            match self.socket_of(port).try_recv_now(bufs) {
                Ok(_) => {
                    self.handle_batch(port, bufs).await;
                    batches += 1;
                    last = std::time::Instant::now();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if last.elapsed() >= busy {
                        return;
                    }
                    std::hint::spin_loop();
                }
                Err(e) => return receive_error(&e),
            }
        }
    }

    /// Feeds the ICMP errors queued on the socket to the machine: the exchanges they name fail at once
    /// (a peer that does not listen is not a slow one).
    fn take_errors(&mut self, port: Port) {
        let now = self.clock.now();
        let socket = match (port, &self.secure) {
            (Port::Secure, Some((s, _))) => s,
            _ => &self.socket,
        };
        let machine = &mut self.machine;
        socket.take_errors(|peer, quoted| machine.handle_unreachable(now, peer, quoted));
    }

    async fn handle_batch(&mut self, port: Port, bufs: &RecvBuffers) {
        let now = self.clock.now();
        for (from, dst, data) in bufs.datagrams() {
            trace!(%from, ?dst, len = data.len(), "datagram in");
            self.machine.handle_datagram(now, port, from, dst, data);
        }
        self.drain_outputs(now).await;
    }

    fn on_tcp_input(&mut self, input: TcpInput) {
        let now = self.clock.now();
        match input {
            TcpInput::Connected { conn, peer, to, link } => {
                if self.draining.is_some() && to.is_none() {
                    return; // dropping the link closes the connection
                }
                self.tcp.conns.insert(conn, link);
                self.machine.handle_tcp_connected(now, conn, peer);
                if let Some(to) = to {
                    for q in self.tcp.connecting.remove(&to).unwrap_or_default() {
                        self.start_tcp(now, conn, q);
                    }
                    self.tcp.to_server.insert(to, conn);
                }
            }
            TcpInput::ConnectFailed { dst, reason } => {
                info!(dst = %dst.addr, tls = dst.tls.is_some(), %reason, "cannot connect");
                for q in self.tcp.connecting.remove(&dst).unwrap_or_default() {
                    send_failure(q.reply, RequestFailure::Connect(reason.clone()));
                }
                if dst.tls.is_none() {
                    // The machine connects only over plain TCP (a service's request).
                    self.machine.handle_tcp_connect_failed(now, dst.addr);
                }
            }
            TcpInput::Data { conn, bytes } => {
                if self.tcp.conns.contains_key(&conn) {
                    self.machine.handle_tcp_data(now, conn, &bytes);
                }
            }
            TcpInput::Closed { conn } => self.close_conn(now, conn),
        }
    }

    /// Closes a connection (dropping its link lets the writer flush, then shut the socket down) and tells
    /// the machine, which fails the connection's requests and forgets its observers.
    fn close_conn(&mut self, now: Instant, conn: ConnId) {
        if self.tcp.conns.remove(&conn).is_some() {
            self.tcp.to_server.retain(|_, c| *c != conn);
            self.machine.handle_tcp_closed(now, conn);
        }
    }

    fn start_tcp(&mut self, now: Instant, conn: ConnId, q: Queued) {
        match self.machine.transports_mut().tcp_mut().request(now, conn, q.request, q.params) {
            Ok(id) => self.track(id, q.ticket, q.reply),
            Err(e) => send_failure(q.reply, RequestFailure::Start(e)),
        }
    }

    fn track(&mut self, id: RequestId, ticket: u64, reply: Reply) {
        self.pending.insert(id, Pending { ticket, reply, observing: false, stop: None });
        self.tickets.insert(ticket, id);
    }

    fn is_active(&self, id: RequestId) -> bool {
        self.machine.transports().is_active(id)
    }

    fn cancel(&mut self, now: Instant, id: RequestId) {
        self.machine.transports_mut().cancel(now, id)
    }

    fn deregister(&mut self, now: Instant, id: RequestId, deregistration: Option<Request>) {
        self.machine.transports_mut().deregister(now, id, deregistration)
    }

    fn handle_command(&mut self, cmd: Command) {
        let now = self.clock.now();
        match cmd {
            Command::Request { ticket, dst, transport: Transport::Udp, request, params, reply } => {
                if !self.socket.can_reach(&dst) {
                    send_failure(reply, RequestFailure::Unreachable);
                    return;
                }
                match self.machine.transports_mut().udp_mut().request(now, dst, request, params) {
                    Ok(id) => self.track(id, ticket, reply),
                    Err(e) => send_failure(reply, RequestFailure::Start(e)),
                }
            }
            Command::Request { ticket, dst, transport, request, params, reply } => {
                let tls = match transport {
                    Transport::Tls(name) => Some(name),
                    _ => None,
                };
                let q = Queued { ticket, request, params, reply };
                let remote = Remote { addr: dst, tls };
                if let Some(&conn) = self.tcp.to_server.get(&remote) {
                    self.start_tcp(now, conn, q);
                } else {
                    let timeout = q.params.timeout.map_or(CONNECT_TIMEOUT, std::time::Duration::from);
                    self.tcp.connect(remote, timeout, Some(q));
                }
            }
            Command::Cancel { ticket } => {
                if let Some(id) = self.tickets.remove(&ticket) {
                    self.pending.remove(&id);
                    self.cancel(now, id);
                } else {
                    for waiting in self.tcp.connecting.values_mut() {
                        waiting.retain(|q| q.ticket != ticket);
                    }
                }
            }
            Command::StopObserving { ticket, deregistration } => {
                let Some(&id) = self.tickets.get(&ticket) else {
                    for waiting in self.tcp.connecting.values_mut() {
                        waiting.retain(|q| q.ticket != ticket);
                    }
                    return;
                };
                let Some(p) = self.pending.get_mut(&id) else { return };
                if p.observing {
                    debug!(?id, "deregistering observation");
                    p.observing = false;
                    self.deregister(now, id, deregistration);
                } else if id.cancel_ends_observation() {
                    self.tickets.remove(&ticket);
                    self.pending.remove(&id);
                    self.cancel(now, id);
                } else {
                    p.stop = Some(deregistration);
                }
            }
            Command::Respond { id, response } => {
                let r = self.machine.respond(now, id, response);
                if r.is_err() {
                    debug!(?id, "handler answered an exchange that no longer exists");
                }
            }
            Command::Stats { reply } => {
                let e = self.machine.transports().udp();
                let _ = reply.send(DriverStats {
                    stats: e.stats(),
                    table_sizes: e.table_sizes(),
                    tcp_connections: self.machine.transports().tcp().connections(),
                });
            }
            Command::Progress { ticket, reply } => {
                let p = self.tickets.get(&ticket).and_then(|id| self.machine.transports().udp().transfer_progress(*id));
                let _ = reply.send(p);
            }
            Command::Join { group, join, reply } => {
                let r = if join { self.socket.join(group) } else { self.socket.leave(group) };
                let _ = reply.send(r);
            }
            Command::Shutdown { grace } => {
                debug!(?grace, "shutting down: no new requests");
                self.draining = Some(now + corral_proto::Duration::from(grace));
                self.tcp.stop_accepting();
            }
        }
    }

    /// Delivers events, applies multicast commands, writes TCP frames, closes the connections the machine
    /// is done with (which may fail requests: more events) and sends every pending datagram — again while a
    /// datagram that could not go (no route) failed its exchange, whose failure is an event to deliver.
    async fn drain_outputs(&mut self, now: Instant) {
        while self.drain_once(now).await {}
    }

    /// One round of [`Driver::drain_outputs`]; `true` when a send found no route and failed an exchange.
    async fn drain_once(&mut self, now: Instant) -> bool {
        loop {
            while let Some(event) = self.machine.poll_event() {
                self.on_event(now, event);
            }
            while let Some(t) = self.machine.poll_tcp_transmit() {
                let Some(link) = self.tcp.conns.get(&t.conn) else { continue };
                trace!(conn = ?t.conn, len = t.bytes.len(), "frame out");
                if !link.send(t.bytes) {
                    warn!(conn = ?t.conn, "peer does not read what is sent to it; closing the connection");
                    self.close_conn(now, t.conn);
                }
            }
            while let Some(dst) = self.machine.poll_tcp_connect() {
                // A service's request over TCP (the machine knows of no connection to `dst`): connect,
                // unless a connection is being made already.
                self.tcp.connect(Remote { addr: dst, tls: None }, CONNECT_TIMEOUT, None);
            }
            let mut closed = false;
            while let Some(conn) = self.machine.poll_tcp_close() {
                self.close_conn(now, conn);
                closed = true;
            }
            if !closed {
                break;
            }
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
        let mut out = std::mem::take(&mut self.outbox);
        let mut secure = Vec::new();
        while let Some((port, t)) = self.machine.poll_transmit(now) {
            trace!(dst = %t.dst, len = t.payload.len(), ?port, "datagram out");
            match port {
                Port::Secure if self.secure.is_some() => secure.push(t),
                _ => out.push(t),
            }
        }
        let mut unroutable = send_all(&self.socket, &out).await;
        if let Some((socket, _)) = &self.secure {
            unroutable.extend(send_all(socket, &secure).await);
        }
        let bounced = !unroutable.is_empty();
        for t in unroutable {
            self.no_route(now, t);
        }
        out.clear();
        self.outbox = out;
        bounced
    }

    /// A datagram to `t.dst` could not go for want of a route: its exchange fails now, said as no route
    /// rather than as an ICMP refusal.
    fn no_route(&mut self, now: Instant, t: &Transmit) {
        self.machine.handle_unreachable(now, t.dst, crate::net::icmp::quote(&t.payload));
        while let Some(event) = self.machine.poll_event() {
            match event {
                Event::Failed { id, error: RequestError::Unreachable } => {
                    if let Some(p) = self.pending.remove(&id) {
                        self.tickets.remove(&p.ticket);
                        send_failure(p.reply, RequestFailure::NoRoute);
                    }
                }
                other => self.on_event(now, other),
            }
        }
    }

    fn on_event(&mut self, now: Instant, event: Event) {
        match event {
            Event::Request(req) => {
                // A bare endpoint (a client) serves nothing.
                let response = Response::error(Code::NOT_FOUND, "this endpoint is a client and serves no resources");
                let _ = self.machine.respond(now, req.id, response);
            }
            Event::Response { id, from, response } => {
                let active = self.is_active(id);
                let Some(p) = self.pending.get_mut(&id) else { return };
                match &p.reply {
                    Reply::Multicast(tx) => {
                        let _ = tx.send(Ok((from, response)));
                    }
                    Reply::Observe(tx) if active => {
                        // A notification (the registration's response included): the observation goes on.
                        if let Some(deregistration) = p.stop.take() {
                            self.deregister(now, id, deregistration);
                            return;
                        }
                        p.observing = true;
                        if tx.try_send(Ok((from, response))).is_err() {
                            debug!(?id, "observation not read fast enough: a notification was skipped");
                        }
                    }
                    Reply::Observe(_) | Reply::Unicast(_) => {
                        // The last response of the exchange.
                        if let Some(p) = self.pending.remove(&id) {
                            self.tickets.remove(&p.ticket);
                            match p.reply {
                                Reply::Unicast(tx) => {
                                    let _ = tx.send(Ok((from, response)));
                                }
                                Reply::Observe(tx) => deliver_last(&tx, Ok((from, response))),
                                Reply::Multicast(_) => {}
                            }
                        }
                    }
                }
            }
            Event::Failed { id, error } => {
                if let Some(p) = self.pending.remove(&id) {
                    self.tickets.remove(&p.ticket);
                    send_failure(p.reply, RequestFailure::Failed(error));
                }
            }
            Event::MulticastDone { id } => {
                if let Some(p) = self.pending.remove(&id) {
                    self.tickets.remove(&p.ticket);
                }
            }
            Event::Pong { .. } | Event::ObserverGone { .. } => {}
        }
    }
}

/// Sends `out` on `socket`, in batches; returns the datagrams that found no route (their exchanges are to
/// fail now: see `Driver::no_route`).
async fn send_all<'a>(socket: &CoapSocket, out: &'a [Transmit]) -> Vec<&'a Transmit> {
    let (mut sent, mut unroutable) = (0, Vec::new());
    while sent < out.len() {
        let (batch, n) = OutDatagram::batch(&out[sent..]);
        match socket.try_send_many(&batch[..n]) {
            Ok(k) => sent += k,
            Err(e) => {
                // The kernel's buffer is full (wait for room) or this datagram cannot go (say so and go on:
                // CoAP's retransmissions deal with loss).
                let t = &out[sent];
                let r = if e.kind() == io::ErrorKind::WouldBlock {
                    socket.send_from(t.dst, &t.payload, t.src).await
                } else {
                    Err(e)
                };
                match r {
                    Err(e) if crate::net::icmp::unreachable_send(&e) => {
                        debug!(dst = %t.dst, error = %e, "send failed: no route; the exchange fails now");
                        unroutable.push(t);
                    }
                    Err(e) => debug!(dst = %t.dst, error = %e, "send failed"),
                    Ok(()) => {}
                }
                sent += 1;
            }
        }
    }
    unroutable
}

/// The secure socket readable (never, without one).
async fn secure_readable(secure: &Option<(CoapSocket, Option<RecvBuffers>)>) -> io::Result<()> {
    match secure {
        Some((s, _)) => s.readable().await,
        None => std::future::pending().await,
    }
}

/// With IP_RECVERR a queued ICMP error also fails the next receive once; the error itself is read from
/// the error queue (`take_errors`).
fn receive_error(e: &io::Error) {
    debug!(error = %e, "receive error");
}

/// The end of an observation must reach its reader even when unread notifications fill the queue: then a
/// task waits for room, and the channel closes only after it has delivered.
fn deliver_last(tx: &mpsc::Sender<Outcome>, outcome: Outcome) {
    if let Err(mpsc::error::TrySendError::Full(outcome)) = tx.try_send(outcome) {
        // The receiver cannot be drained from here; a spawned send waits for room instead.
        let tx = tx.clone();
        tokio::spawn(async move {
            let _ = tx.send(outcome).await;
        });
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
        Reply::Observe(tx) => deliver_last(&tx, Err(failure)),
    }
}
