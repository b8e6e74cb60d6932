//! A closed-loop load generator: what `corral bench` runs.
//!
//! N emulated clients, each with its own UDP socket and its own corral [`Endpoint`] (one endpoint to one
//! server is limited by NSTART = 1 and by message-ID reuse to roughly 250 CON/s over EXCHANGE_LIFETIME),
//! each keeping exactly one request outstanding. The clients drive their endpoints inline on the driver
//! loop ([`crate::event_loop`]) — no channels, no extra tasks — on the caller's runtime.
//!
//! Each client's endpoint sits in corral-dtls's secure node, with over `coaps://` ([`Template::dtls`]) a
//! DTLS client layer of its own: one session per client, or a new one for every request
//! ([`Template::full_handshakes`]: requests/s are then full handshakes/s).
//!
//! Owns: the clients, their sockets and what they count. Must never: print or decide exit codes (the
//! binary's).

use crate::net::socket::{CoapSocket, SocketOptions};
use crate::{Clock, Code, EndpointConfig, OptionNumber, Request, SendParams};
use corral_dtls::{DtlsConfig, Port, SecureConfig, SecureNode};
use corral_proto::{Duration as CDuration, Endpoint, Event, Instant, RequestId};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Opens `clients` sockets on the wildcard address of `dst`'s family, each connected to `dst`.
pub fn client_sockets(dst: SocketAddr, clients: u32) -> io::Result<Vec<ClientSocket>> {
    let bind = match dst.ip() {
        IpAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        IpAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
    };
    (0..clients).map(|_| client_socket(bind, dst)).collect()
}

/// Why a run ended early.
#[derive(Debug)]
pub enum RunError {
    /// A client's socket failed or its endpoint refused a request.
    Client(io::Error),
    /// A client's task panicked or was cancelled.
    Task(tokio::task::JoinError),
}

/// What the clients measured together.
pub struct Totals {
    pub histogram: Histogram,
    pub retransmissions: u64,
}

/// Runs one emulated client on each socket, sending `template`'s requests to `dst` with `params`, until
/// `deadline`, the budget of `shared` or a refusal; every client on a task of the current runtime.
pub async fn run(
    sockets: Vec<ClientSocket>,
    dst: SocketAddr,
    template: Template,
    params: SendParams,
    shared: Arc<Shared>,
    deadline: std::time::Instant,
) -> Result<Totals, RunError> {
    let clock = Clock::new();
    let tasks: Vec<_> = sockets
        .into_iter()
        .enumerate()
        .map(|(i, socket)| {
            let (shared, template) = (shared.clone(), template.clone());
            tokio::spawn(client_loop(socket, dst, (i as u32, template), params, shared, clock, deadline))
        })
        .collect();
    let mut totals = Totals { histogram: Histogram::new(), retransmissions: 0 };
    for t in tasks {
        let r = t.await.map_err(RunError::Task)?.map_err(RunError::Client)?;
        totals.histogram.merge(&r.histogram);
        totals.retransmissions += r.retransmissions;
    }
    Ok(totals)
}

/// What each client sends: the request, its Proxy-Uri when going through a proxy, and whether each
/// request is made distinct.
#[derive(Clone)]
pub struct Template {
    pub request: Request,
    /// Going through a forward proxy: the URI its Proxy-Uri option names.
    pub proxy_uri: Option<String>,
    /// Each request asks for a different resource (a unique `bench=` query item).
    pub distinct: bool,
    /// Protect every request with this context; answers must verify.
    pub oscore: Option<crate::secure::oscore::SharedContext>,
    /// coaps://: each client's DTLS configuration (client role).
    pub dtls: Option<DtlsConfig>,
    /// With `dtls`: close the session after each answer, so that every request pays a full handshake.
    pub full_handshakes: bool,
}

impl Template {
    /// The `n`th request of client `client`.
    fn build(&self, client: u32, n: u64) -> Request {
        let mut r = self.request.clone();
        let item = self.distinct.then(|| format!("bench={client}-{n}"));
        match (&self.proxy_uri, item) {
            (Some(uri), Some(item)) => {
                let sep = if uri.contains('?') { '&' } else { '?' };
                r.options.push_str(OptionNumber::PROXY_URI, &format!("{uri}{sep}{item}"));
            }
            (Some(uri), None) => {
                r.options.push_str(OptionNumber::PROXY_URI, uri);
            }
            (None, Some(item)) => {
                r.options.push_str(OptionNumber::URI_QUERY, &item);
            }
            (None, None) => {}
        }
        r
    }
}

/// Latency histogram with ~0.2 % resolution: exact below 1024 µs, then 512 sub-buckets per power of two.
#[derive(Clone)]
pub struct Histogram {
    buckets: Vec<u64>,
    /// Values recorded.
    pub count: u64,
    /// Their sum (µs).
    pub sum: u64,
    /// The largest (µs).
    pub max: u64,
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram { buckets: vec![0; 1024 + 512 * 54], count: 0, sum: 0, max: 0 }
    }

    fn index(v: u64) -> usize {
        if v < 1024 {
            return v as usize;
        }
        let e = 63 - v.leading_zeros() as usize - 9; // v >> e is in 512..1024
        1024 + (e - 1) * 512 + ((v >> e) as usize - 512)
    }

    fn value(i: usize) -> u64 {
        if i < 1024 {
            return i as u64;
        }
        let e = (i - 1024) / 512 + 1;
        ((i - 1024) % 512 + 512) as u64 * (1 << e)
    }

    pub fn record(&mut self, v: u64) {
        let last = self.buckets.len() - 1;
        self.buckets[Histogram::index(v).min(last)] += 1;
        self.count += 1;
        self.sum += v;
        self.max = self.max.max(v);
    }

    pub fn merge(&mut self, o: &Histogram) {
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
        self.count += o.count;
        self.sum += o.sum;
        self.max = self.max.max(o.max);
    }

    /// The value below which a fraction `q` of the recorded ones lie.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((self.count as f64 * q).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Histogram::value(i).min(self.max);
            }
        }
        self.max
    }
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram::new()
    }
}

/// What the clients of a run count together; read while it runs (progress) and after.
#[derive(Default)]
pub struct Shared {
    /// Requests that may still be started (counts down; negative means stop).
    budget: AtomicI64,
    pub completed: AtomicU64,
    pub errors: AtomicU64,
    pub timeouts: AtomicU64,
    /// The first error answer (4.xx, 5.xx, or one that did not verify), for the message when every
    /// answer is an error.
    pub first_error: Mutex<Option<ErrorAnswer>>,
    /// The destination answered with ICMP port unreachable: nothing listens there, every client stops.
    pub refused: AtomicBool,
}

impl Shared {
    /// Counters for a run of at most `requests` requests (`None`: no limit).
    pub fn new(requests: Option<u64>) -> Shared {
        let shared = Shared::default();
        let budget = requests.map_or(i64::MAX, |n| i64::try_from(n).unwrap_or(i64::MAX));
        shared.budget.store(budget, Ordering::Relaxed);
        shared
    }

    /// Ends the run early (Ctrl-C): no client starts another request; each ends when its request in flight
    /// has its answer or its timeout, so that every request counted was measured.
    pub fn stop(&self) {
        self.budget.store(0, Ordering::Relaxed);
    }
}

/// An answer that counts as an error.
#[derive(Debug)]
pub enum ErrorAnswer {
    /// A 4.xx or 5.xx response: its code and diagnostic payload.
    Response { code: Code, payload: Vec<u8> },
    /// A response that did not verify (OSCORE).
    Unverified(crate::Error),
}

/// What one client measured.
struct ClientResult {
    histogram: Histogram,
    retransmissions: u64,
}

/// A client's socket, connected to the server (or proxy) it loads, and a second handle on it that wakes
/// on socket errors: connected, the socket gets the ICMP port unreachable of a port where nothing listens
/// as an error, so that such a run ends at once instead of timing out every request.
pub fn client_socket(bind: SocketAddr, dst: SocketAddr) -> io::Result<ClientSocket> {
    let opts = SocketOptions { batch: 4, ..SocketOptions::default() };
    let socket = crate::net::socket::bind_std(bind, &opts)?;
    socket.connect(dst)?;
    let errors = watch_errors(socket.try_clone()?)?;
    Ok((crate::net::socket::PreparedSocket::from_std(socket, opts)?.into_tokio()?, errors))
}

/// A client's socket and the handle that wakes on its errors (see [`client_socket`]).
pub type ClientSocket = (CoapSocket, tokio::io::unix::AsyncFd<std::net::UdpSocket>);

/// Registers a duplicate of a socket's descriptor for error readiness only. `AsyncFd::with_interest` is
/// deprecated because an arbitrary `AsRawFd` might close its descriptor while registered; a
/// `std::net::UdpSocket` owns its descriptor until the `AsyncFd` drops it (corral-tokio's socket module
/// registers its sockets the same way).
#[allow(deprecated)]
fn watch_errors(dup: std::net::UdpSocket) -> io::Result<tokio::io::unix::AsyncFd<std::net::UdpSocket>> {
    tokio::io::unix::AsyncFd::with_interest(dup, tokio::io::Interest::ERROR)
}

/// Waits until the socket reports an error, and takes it (SO_ERROR).
async fn socket_error(errors: &tokio::io::unix::AsyncFd<std::net::UdpSocket>) -> io::Result<io::Error> {
    loop {
        let mut guard = errors.ready(tokio::io::Interest::ERROR).await?;
        match guard.get_inner().take_error()? {
            Some(e) => return Ok(e),
            None => guard.clear_ready(),
        }
    }
}

/// One emulated client: its own socket and endpoint, one request outstanding at a time.
async fn client_loop(
    (socket, errors): ClientSocket,
    dst: SocketAddr,
    (client, template): (u32, Template),
    params: SendParams,
    shared: Arc<Shared>,
    clock: Clock,
    deadline: std::time::Instant,
) -> io::Result<ClientResult> {
    let ep = Endpoint::new(crate::os_seeded(EndpointConfig::default()));
    let secure =
        SecureConfig { client: template.dtls.clone(), plain: template.dtls.is_none(), ..SecureConfig::default() };
    let node = SecureNode::new(ep, secure, crate::secure::os_secret())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut c = Emulated {
        node,
        bufs: socket.recv_buffers(),
        socket,
        errors,
        dst,
        client,
        template,
        params,
        shared,
        clock,
        deadline,
        end: clock.now() + CDuration::from(deadline.saturating_duration_since(std::time::Instant::now())),
        histogram: Histogram::new(),
        outstanding: None,
        binding: None,
        echo: None,
        echoed: false,
        sent: 0,
    };
    crate::driver::event_loop::run(&mut c).await?;
    Ok(ClientResult { histogram: c.histogram, retransmissions: c.node.inner().stats().retransmissions })
}

/// An emulated client's state, driven by corral-tokio's driver loop.
struct Emulated {
    /// The client's endpoint; over coaps:// its datagrams go through the node's DTLS client layer.
    node: SecureNode<Endpoint>,
    socket: CoapSocket,
    /// Wakes on the socket's errors (see [`client_socket`]).
    errors: tokio::io::unix::AsyncFd<std::net::UdpSocket>,
    bufs: crate::net::socket::RecvBuffers,
    dst: SocketAddr,
    client: u32,
    template: Template,
    params: SendParams,
    shared: Arc<Shared>,
    clock: Clock,
    deadline: std::time::Instant,
    /// `deadline` on the clock.
    end: Instant,
    histogram: Histogram,
    outstanding: Option<(RequestId, Instant)>,
    binding: Option<crate::secure::oscore::Binding>,
    /// An OSCORE server that lost its replay window (a restart) answers 4.01 with an Echo value inside the
    /// protection (RFC 8613 B.1.2, RFC 9175): the request goes again with it, once, and is not counted.
    echo: Option<Vec<u8>>,
    echoed: bool,
    sent: u64,
}

/// What wakes an emulated client.
enum Input {
    Readable(io::Result<()>),
    SocketError(io::Result<io::Error>),
}

impl crate::driver::event_loop::Drive for Emulated {
    type Input = Input;
    type Output = io::Result<()>;

    fn clock(&self) -> Clock {
        self.clock
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.node.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.node.handle_timeout(now);
        self.drop_node_events();
    }

    fn deadline(&self) -> Option<Instant> {
        Some(self.end)
    }

    async fn flush(&mut self, now: Instant) -> ControlFlow<io::Result<()>> {
        self.on_events(now);
        if self.outstanding.is_none() {
            if std::time::Instant::now() >= self.deadline
                || self.shared.refused.load(Ordering::Relaxed)
                || (self.echo.is_none() && self.shared.budget.fetch_sub(1, Ordering::Relaxed) <= 0)
            {
                return ControlFlow::Break(Ok(()));
            }
            if let Err(e) = self.send_next(now) {
                return ControlFlow::Break(Err(e));
            }
        }
        while let Some((_, t)) = self.node.poll_transmit(now) {
            match self.socket.send(t.dst, &t.payload).await {
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    self.shared.refused.store(true, Ordering::Relaxed)
                }
                Err(e) => tracing::debug!(error = %e, "send failed"),
                Ok(()) => {}
            }
        }
        if self.shared.refused.load(Ordering::Relaxed) || now >= self.end {
            return ControlFlow::Break(Ok(()));
        }
        ControlFlow::Continue(())
    }

    async fn input(&mut self) -> Input {
        tokio::select! {
            r = self.socket.readable() => Input::Readable(r),
            e = socket_error(&self.errors) => Input::SocketError(e),
        }
    }

    async fn handle(&mut self, input: Input) -> ControlFlow<io::Result<()>> {
        match input {
            Input::Readable(Err(e)) | Input::SocketError(Err(e)) => return ControlFlow::Break(Err(e)),
            Input::Readable(Ok(())) => loop {
                match self.socket.try_recv(&mut self.bufs) {
                    Ok(_) => {
                        let now = self.clock.now();
                        for (from, dst_ip, data) in self.bufs.datagrams() {
                            self.node.handle_datagram(now, Port::Main, from, dst_ip, data);
                        }
                        self.drop_node_events();
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    // The ICMP port unreachable of an earlier request (the socket is connected).
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                        self.shared.refused.store(true, Ordering::Relaxed);
                        break;
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "receive error");
                        break;
                    }
                }
            },
            Input::SocketError(Ok(e)) if e.kind() == io::ErrorKind::ConnectionRefused => {
                self.shared.refused.store(true, Ordering::Relaxed);
                return ControlFlow::Break(Ok(()));
            }
            Input::SocketError(Ok(e)) => tracing::debug!(error = %e, "socket error"),
        }
        ControlFlow::Continue(())
    }
}

impl Emulated {
    /// Forgets what the node says about its sessions: it failed the exchanges of a failed handshake
    /// itself, and a failure is counted as the request's.
    fn drop_node_events(&mut self) {
        while self.node.poll_event().is_some() {}
    }

    /// Counts the answers (and timeouts) that came, and takes up an Echo challenge.
    fn on_events(&mut self, now: Instant) {
        while let Some(event) = self.node.inner_mut().poll_event() {
            let (id, outcome) = match event {
                Event::Response { id, response, .. } => {
                    let answer = match (&self.template.oscore, &self.binding) {
                        (Some(ctx), Some(b)) => crate::secure::oscore::verify(ctx, b, response).map(|(r, _)| r),
                        _ => Ok(response),
                    };
                    let challenge = match &answer {
                        Ok(r) if self.template.oscore.is_some() && r.code == Code::UNAUTHORIZED && !self.echoed => {
                            r.options.get(OptionNumber::ECHO).map(<[u8]>::to_vec)
                        }
                        _ => None,
                    };
                    if let Some(value) = challenge {
                        if self.outstanding.is_some_and(|(current, _)| current == id) {
                            self.echo = Some(value);
                            self.outstanding = None;
                        }
                        continue;
                    }
                    self.echoed = false;
                    let outcome = match answer {
                        Ok(r) if r.code.is_success() => Ok(()),
                        Ok(r) => Err(ErrorAnswer::Response { code: r.code, payload: r.payload }),
                        Err(e) => Err(ErrorAnswer::Unverified(e)),
                    };
                    (id, Some(outcome))
                }
                Event::Failed { id, .. } => (id, None),
                _ => continue,
            };
            let Some((current, started)) = self.outstanding else { continue };
            if current != id {
                continue;
            }
            self.outstanding = None;
            if self.template.full_handshakes {
                self.node.close_all(now);
            }
            match outcome {
                Some(result) => {
                    self.histogram.record(now.saturating_since(started).as_micros());
                    self.shared.completed.fetch_add(1, Ordering::Relaxed);
                    if let Err(f) = result {
                        if self.shared.errors.fetch_add(1, Ordering::Relaxed) == 0 {
                            if let Ok(mut first) = self.shared.first_error.lock() {
                                *first = Some(f);
                            }
                        }
                    }
                }
                None => {
                    self.shared.timeouts.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Starts the next request (or the last one again, with the Echo value it was challenged for).
    fn send_next(&mut self, now: Instant) -> io::Result<()> {
        let repeat = self.echo.take();
        if repeat.is_none() {
            self.sent += 1;
        }
        let mut request = self.template.build(self.client, self.sent);
        if let Some(value) = &repeat {
            request.options.set(OptionNumber::ECHO, value);
            self.echoed = true;
        }
        if let Some(ctx) = &self.template.oscore {
            let (protected, b) =
                crate::secure::oscore::protect(ctx, &request).map_err(|e| io::Error::other(e.to_string()))?;
            request = protected;
            self.binding = Some(b);
        }
        match self.node.inner_mut().request(now, self.dst, request, self.params) {
            Ok(id) => self.outstanding = Some((id, now)),
            Err(e) => return Err(io::Error::other(e.to_string())),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles() {
        let mut h = Histogram::new();
        for v in 1..=10_000u64 {
            h.record(v);
        }
        let p50 = h.quantile(0.5) as f64;
        assert!((p50 - 5000.0).abs() / 5000.0 < 0.01, "{p50}");
        let p99 = h.quantile(0.99) as f64;
        assert!((p99 - 9900.0).abs() / 9900.0 < 0.01, "{p99}");
        assert_eq!(h.max, 10_000);
        for v in [0u64, 1, 1023, 1024, 1025, 4096, 1 << 30, u64::MAX / 4] {
            let i = Histogram::index(v);
            let back = Histogram::value(i);
            assert!(back <= v && (v - back) as f64 <= v as f64 / 500.0 + 1.0, "{v} -> {i} -> {back}");
        }
    }
}
