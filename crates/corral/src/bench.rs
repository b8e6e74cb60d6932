//! `corral bench`: a closed-loop load generator.
//!
//! N emulated clients, each with its own UDP socket and its own corral [`Endpoint`] (one endpoint to one
//! server is limited by NSTART = 1 and by message-ID reuse to roughly 250 CON/s over EXCHANGE_LIFETIME),
//! each keeping exactly one request outstanding. The clients drive their endpoints inline — no channels,
//! no extra tasks — on as few threads as asked (`--threads`, default 1, leaving the other core of a small
//! machine to the server under test).

use crate::client_cmd::Verbosity;
use crate::exit::{ExitCode, Failure};
use crate::output;
use crate::units;
use clap::Args;
use corral_tokio::corral_proto::{Duration as CDuration, Endpoint, Event, Instant, RequestId};
use corral_tokio::socket::{CoapSocket, SocketOptions};
use corral_tokio::uri::{Host, Scheme};
use corral_tokio::{Clock, Code, EndpointConfig, OptionNumber, Request, SendParams};
use serde_json::json;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const AFTER_HELP: &str = "\
Each client keeps one request outstanding (closed loop); the run stops after --duration or \
--requests requests, whichever comes first (a run is always bounded: at most 600 s). When every \
answer is an error the run says so and exits with that error's status (4 for 4.xx, 5 for 5.xx, 7 \
for OSCORE); a port where nothing listens ends it at once (exit status 3).

Examples:
  corral bench coap://127.0.0.1/             # 16 clients, CON GET, 10 s
  corral bench coap://[::1]/test --clients 64 --duration 5 --non
  corral bench coap://127.0.0.1/echo -m post --payload 100 --requests 100000
  corral bench coap://127.0.0.1:5701/hello -P coap://127.0.0.1:5700 --distinct
  scripts/bench-server.sh                    # corral serve vs libcoap
  scripts/bench-proxy.sh                     # corral proxy vs libcoap's proxy";

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// The resource to request: coap://host[:port]/path.
    pub uri: String,
    /// Emulated clients, each with its own socket and endpoint.
    #[arg(short, long, default_value = "16", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub clients: u32,
    /// How long to run, e.g. 5, 30s or 2m; a bare number is seconds [default: 10s unless --requests is
    /// given].
    #[arg(short, long, value_name = "DURATION", value_parser = units::secs(units::Range::positive(units::DAY)))]
    pub duration: Option<f64>,
    /// Stop after this many requests.
    #[arg(short = 'n', long, value_name = "N")]
    pub requests: Option<u64>,
    /// Send NON requests instead of CON.
    #[arg(short = 'N', long)]
    pub non: bool,
    /// Attach a payload of this many bytes, with the method -m gives (which it needs: bench never turns
    /// a GET into something else by itself).
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u32).range(0..=60000))]
    pub payload: Option<u32>,
    /// Request method (get, post, put, delete, fetch, patch, ipatch) [default: get].
    #[arg(short, long, value_name = "METHOD", value_parser = crate::client_cmd::parse_method)]
    pub method: Option<Code>,
    /// How long a request may wait for its answer before it counts as timed out, e.g. 5, 2s or 500ms; a
    /// bare number is seconds.
    #[arg(long, value_name = "DURATION", default_value = "5", value_parser = units::secs(units::Range::positive(units::DAY)))]
    pub timeout: f64,
    /// Worker threads for the clients.
    #[arg(long, default_value = "1", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub threads: u32,
    /// Send every request through this forward proxy (coap://HOST:PORT), the URI in a Proxy-Uri option.
    #[arg(short = 'P', long, value_name = "PROXY-URI")]
    pub proxy: Option<String>,
    /// Make every request ask for a different resource (a unique `bench=` query item): no cache and no
    /// aggregation can answer it, so a proxy forwards each one.
    #[arg(long)]
    pub distinct: bool,
    /// Protect every request with OSCORE (RFC 8613), with the context this credentials file gives for the
    /// URI; responses must verify (those that do not count as errors).
    #[arg(long, value_name = "FILE")]
    pub credentials: Option<std::path::PathBuf>,
    /// With a Group OSCORE entry in --credentials: deterministic requests (every client sends the same
    /// protected GET, so a proxy can answer them from its cache; the signed answers are verified).
    #[arg(long, requires = "credentials")]
    pub deterministic: bool,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// What each client sends: the request, its Proxy-Uri when going through a proxy, and whether each
/// request is made distinct.
#[derive(Clone)]
struct Template {
    request: Request,
    proxy_uri: Option<String>,
    distinct: bool,
    oscore: Option<corral_tokio::oscore::SharedContext>,
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

/// The longest run allowed, whatever the arguments say.
const MAX_RUN: Duration = Duration::from_secs(600);

/// Latency histogram with ~0.2 % resolution: exact below 1024 µs, then 512 sub-buckets per power of two.
#[derive(Clone)]
struct Histogram {
    buckets: Vec<u64>,
    count: u64,
    sum: u64,
    max: u64,
}

impl Histogram {
    fn new() -> Histogram {
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

    fn record(&mut self, v: u64) {
        let last = self.buckets.len() - 1;
        self.buckets[Histogram::index(v).min(last)] += 1;
        self.count += 1;
        self.sum += v;
        self.max = self.max.max(v);
    }

    fn merge(&mut self, o: &Histogram) {
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
        self.count += o.count;
        self.sum += o.sum;
        self.max = self.max.max(o.max);
    }

    fn quantile(&self, q: f64) -> u64 {
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

#[derive(Default)]
struct Shared {
    /// Requests that may still be started (counts down; negative means stop).
    budget: AtomicI64,
    completed: AtomicU64,
    errors: AtomicU64,
    timeouts: AtomicU64,
    /// The first error answer (4.xx, 5.xx, or one that did not verify), for the message when every
    /// answer is an error.
    first_error: Mutex<Option<Failure>>,
    /// The destination answered with ICMP port unreachable: nothing listens there, every client stops.
    refused: AtomicBool,
}

struct ClientResult {
    histogram: Histogram,
    retransmissions: u64,
}

pub fn run(args: BenchArgs, v: Verbosity) -> Result<(), Failure> {
    let (uri, scope_id) =
        corral_tokio::uri::parse_scoped(&args.uri).map_err(|e| Failure::usage(format!("invalid URI: {e}")))?;
    if uri.scheme != Scheme::Coap && args.proxy.is_none() {
        return Err(Failure::usage(format!("corral bench measures CoAP over UDP: use coap://, not {}://", uri.scheme)));
    }
    let oscore = match &args.credentials {
        Some(file) => {
            let creds = crate::credentials::Credentials::load(file)?;
            let dir = creds.for_uri(&args.uri).or_else(|_| creds.for_uri(&uri.to_string()))?;
            Some(corral_tokio::oscore::shared(crate::credentials::client_context(dir, args.deterministic)?))
        }
        None => None,
    };
    let proxy = match &args.proxy {
        Some(p) => {
            let (p, scope) = corral_tokio::uri::parse_scoped(p)
                .map_err(|e| Failure::usage(format!("invalid --proxy (expected coap://HOST:PORT): {e}")))?;
            if p.scheme != Scheme::Coap || !p.path.is_empty() {
                return Err(Failure::usage("--proxy: give the proxy as coap://HOST:PORT (UDP, no path)"));
            }
            Some((p, scope))
        }
        None => None,
    };
    let method = match (args.method, args.payload) {
        (Some(m), _) => m,
        (None, Some(n)) if n > 0 => {
            return Err(Failure::usage(format!(
                "--payload {n} needs a method that carries it, e.g. -m post or -m put (bench sends a GET \
                 unless -m says otherwise, and never changes the method by itself)"
            )))
        }
        (None, _) => Code::GET,
    };
    let duration = match (args.duration, args.requests) {
        (Some(d), _) => Duration::from_secs_f64(d).min(MAX_RUN),
        (None, Some(_)) => MAX_RUN,
        (None, None) => Duration::from_secs(10),
    };
    let rt = if args.threads == 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(args.threads as usize).enable_all().build()
    }
    .map_err(|e| Failure::other(format!("cannot start the runtime: {e}")))?;
    rt.block_on(async move {
        let (send_to, send_scope) = match &proxy {
            Some((p, scope)) => (p, *scope),
            None => (&uri, scope_id),
        };
        let dst = match &send_to.host {
            Host::Ip(IpAddr::V6(ip)) => SocketAddr::V6(std::net::SocketAddrV6::new(*ip, send_to.port, 0, send_scope)),
            Host::Ip(ip) => SocketAddr::new(*ip, send_to.port),
            Host::Name(name) => tokio::net::lookup_host((name.as_str(), send_to.port))
                .await
                .ok()
                .and_then(|mut a| a.next())
                .ok_or_else(|| Failure::other(format!("cannot resolve `{name}`")))?,
        };
        let mut request = Request::new(method);
        if proxy.is_none() {
            uri.to_options(&mut request.options);
        }
        request.payload = vec![b'x'; args.payload.unwrap_or(0) as usize];
        let template = Template {
            request,
            proxy_uri: proxy.is_some().then(|| uri.to_string()),
            distinct: args.distinct,
            oscore: oscore.clone(),
        };
        let params = SendParams {
            confirmable: !args.non,
            timeout: Some(CDuration::from_secs_f64(args.timeout)),
            ..SendParams::default()
        };
        let shared = Arc::new(Shared::default());
        shared
            .budget
            .store(args.requests.map_or(i64::MAX, |n| i64::try_from(n).unwrap_or(i64::MAX)), Ordering::Relaxed);
        let clock = Clock::new();
        let start = std::time::Instant::now();
        let deadline = start + duration;
        let mut sockets = Vec::new();
        for _ in 0..args.clients {
            let bind = match dst.ip() {
                IpAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
                IpAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
            };
            sockets.push(client_socket(bind, dst).map_err(|e| Failure::other(format!("cannot open a socket: {e}")))?);
        }
        if !v.quiet {
            say!(
                "bench: {} {} {}{} with {} clients for up to {:.1} s{}",
                if args.non { "NON" } else { "CON" },
                method,
                uri,
                args.proxy.as_ref().map(|p| format!(" via {p}")).unwrap_or_default(),
                args.clients,
                duration.as_secs_f64(),
                args.requests.map(|n| format!(" or {n} requests")).unwrap_or_default()
            );
        }
        let tasks: Vec<_> = sockets
            .into_iter()
            .enumerate()
            .map(|(i, socket)| {
                let (shared, template) = (shared.clone(), template.clone());
                tokio::spawn(client_loop(socket, dst, (i as u32, template), params, shared, clock, deadline))
            })
            .collect();
        let progress = (!v.quiet).then(|| tokio::spawn(progress(shared.clone(), start)));
        let mut histogram = Histogram::new();
        let mut retransmissions = 0;
        for t in tasks {
            match t.await {
                Ok(Ok(r)) => {
                    histogram.merge(&r.histogram);
                    retransmissions += r.retransmissions;
                }
                Ok(Err(e)) => return Err(Failure::other(format!("client failed: {e}"))),
                Err(e) => return Err(Failure::other(format!("client task failed: {e}"))),
            }
        }
        if let Some(p) = progress {
            p.abort();
        }
        if shared.refused.load(Ordering::Relaxed) {
            return Err(Failure::new(ExitCode::Timeout, format!("{dst} refused the request (port unreachable)")));
        }
        let elapsed = start.elapsed().as_secs_f64().max(1e-9);
        let completed = shared.completed.load(Ordering::Relaxed);
        let errors = shared.errors.load(Ordering::Relaxed);
        let timeouts = shared.timeouts.load(Ordering::Relaxed);
        let rate = completed as f64 / elapsed;
        let ms = |us: u64| output::rounded(us as f64 / 1000.0, 3);
        if args.json {
            let out = json!({
                "uri": uri.to_string(),
                "proxy": args.proxy,
                "distinct": args.distinct,
                "oscore": args.credentials.is_some(),
                "method": method.to_string(),
                "confirmable": !args.non,
                "clients": args.clients,
                "elapsed_s": output::rounded(elapsed, 3),
                "requests": completed,
                "requests_per_s": output::rounded(rate, 1),
                "latency_ms": {
                    "p50": ms(histogram.quantile(0.50)),
                    "p99": ms(histogram.quantile(0.99)),
                    "max": ms(histogram.max),
                    "mean": histogram.sum.checked_div(histogram.count).map_or(json!(0.0), ms),
                },
                "errors": errors,
                "timeouts": timeouts,
                "retransmissions": retransmissions,
            });
            out!("{out}");
        } else {
            out!(
                "{completed} requests in {elapsed:.2} s: {rate:.0} requests/s\n\
                 latency p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms\n\
                 error responses {errors}, timeouts {timeouts}, retransmissions {retransmissions}",
                histogram.quantile(0.50) as f64 / 1000.0,
                histogram.quantile(0.99) as f64 / 1000.0,
                histogram.max as f64 / 1000.0,
            );
        }
        if completed == 0 {
            return Err(Failure::new(
                ExitCode::Timeout,
                format!("no request completed: every one timed out (--timeout {})", units::show_secs(args.timeout)),
            ));
        }
        let first = shared.first_error.lock().ok().and_then(|mut f| f.take());
        match first {
            // Every answer an error: the rate above measured error answers, not the resource.
            Some(f) if errors == completed => Err(Failure::new(
                f.code,
                format!("every answer was an error ({errors} of {completed}), e.g. {}", f.message),
            )),
            Some(f) => {
                if !v.quiet {
                    say!("warning: {errors} of {completed} answers were errors, e.g. {}", f.message);
                }
                Ok(())
            }
            None => Ok(()),
        }
    })
}

async fn progress(shared: Arc<Shared>, start: std::time::Instant) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    let mut last = 0;
    loop {
        tick.tick().await;
        let done = shared.completed.load(Ordering::Relaxed);
        say!(
            "[{:5.1} s] {done} requests ({}/s), errors {}, timeouts {}",
            start.elapsed().as_secs_f64(),
            done - last,
            shared.errors.load(Ordering::Relaxed),
            shared.timeouts.load(Ordering::Relaxed)
        );
        last = done;
    }
}

/// A client's socket, connected to the server (or proxy) it loads, and a second handle on it that wakes
/// on socket errors: connected, the socket gets the ICMP port unreachable of a port where nothing listens
/// as an error, so that such a run ends at once instead of timing out every request.
fn client_socket(bind: SocketAddr, dst: SocketAddr) -> io::Result<ClientSocket> {
    let opts = SocketOptions { batch: 4, ..SocketOptions::default() };
    let socket = corral_tokio::socket::bind_std(bind, &opts)?;
    socket.connect(dst)?;
    let errors = watch_errors(socket.try_clone()?)?;
    Ok((corral_tokio::socket::PreparedSocket::from_std(socket, opts)?.into_tokio()?, errors))
}

/// A client's socket and the handle that wakes on its errors (see [`client_socket`]).
type ClientSocket = (CoapSocket, tokio::io::unix::AsyncFd<std::net::UdpSocket>);

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
    let mut c = Emulated {
        ep: Endpoint::new(corral_tokio::os_seeded(EndpointConfig::default())),
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
    corral_tokio::event_loop::run(&mut c).await?;
    Ok(ClientResult { histogram: c.histogram, retransmissions: c.ep.stats().retransmissions })
}

/// An emulated client's state, driven by corral-tokio's driver loop.
struct Emulated {
    ep: Endpoint,
    socket: CoapSocket,
    /// Wakes on the socket's errors (see [`client_socket`]).
    errors: tokio::io::unix::AsyncFd<std::net::UdpSocket>,
    bufs: corral_tokio::socket::RecvBuffers,
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
    binding: Option<corral_tokio::oscore::Binding>,
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

impl corral_tokio::event_loop::Drive for Emulated {
    type Input = Input;
    type Output = io::Result<()>;

    fn clock(&self) -> Clock {
        self.clock
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.ep.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.ep.handle_timeout(now)
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
        while let Some(t) = self.ep.poll_transmit() {
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
                            self.ep.handle_datagram(now, from, dst_ip, data);
                        }
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
    /// Counts the answers (and timeouts) that came, and takes up an Echo challenge.
    fn on_events(&mut self, now: Instant) {
        while let Some(event) = self.ep.poll_event() {
            let (id, outcome) = match event {
                Event::Response { id, response, .. } => {
                    let answer = match (&self.template.oscore, &self.binding) {
                        (Some(ctx), Some(b)) => corral_tokio::oscore::verify(ctx, b, response).map(|(r, _)| r),
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
                        Ok(r) => Err(Failure::from_response(r.code, &r.payload)),
                        Err(e) => Err(Failure::new(ExitCode::Security, format!("a response did not verify: {e}"))),
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
                corral_tokio::oscore::protect(ctx, &request).map_err(|e| io::Error::other(e.to_string()))?;
            request = protected;
            self.binding = Some(b);
        }
        match self.ep.request(now, self.dst, request, self.params) {
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
