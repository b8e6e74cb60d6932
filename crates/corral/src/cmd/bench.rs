//! `corral bench`: a closed-loop load generator (corral-tokio's [`load`]) — its arguments, its report
//! and its exit status. The clients run on as few threads as asked (`--threads`, default 1, leaving the
//! other core of a small machine to the server under test).

use crate::cli::exit::{ExitCode, Failure};
use crate::cli::output;
use crate::cli::units;
use crate::cli::Verbosity;
use clap::Args;
use corral_tokio::corral_proto::Duration as CDuration;
use corral_tokio::load::{self, ErrorAnswer, Shared, Template};
use corral_tokio::uri::{Host, Scheme};
use corral_tokio::{Code, Request, SendParams};
use serde_json::json;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
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
  corral bench coaps://127.0.0.1/hello -k secretPSK -u alice
  corral bench coaps://127.0.0.1/hello -k secretPSK -u alice --full-handshakes
  scripts/bench-server.sh                    # corral serve vs libcoap
  scripts/bench-proxy.sh                     # corral proxy vs libcoap's proxy";

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// The resource to request: coap://host[:port]/path, or coaps:// with -k and -u.
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
    #[arg(short, long, value_name = "METHOD", value_parser = crate::cli::parse_method)]
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
    /// coaps://: the pre-shared key (libcoap's -k), as text; with -u. Each client opens its own DTLS
    /// session (TLS_PSK_WITH_AES_128_CCM_8) before its first request.
    #[arg(short = 'k', long = "psk", value_name = "KEY", requires = "identity")]
    pub psk: Option<String>,
    /// coaps://: the PSK identity (libcoap's -u); with -k.
    #[arg(short = 'u', long = "identity", value_name = "IDENTITY", requires = "psk")]
    pub identity: Option<String>,
    /// coaps://: close each client's DTLS session after every answer, so that every request pays a full
    /// handshake (cookie exchange included): requests/s are then full handshakes/s.
    #[arg(long, requires = "psk")]
    pub full_handshakes: bool,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The longest run allowed, whatever the arguments say.
const MAX_RUN: Duration = Duration::from_secs(600);

pub fn run(args: BenchArgs, v: Verbosity) -> Result<(), Failure> {
    let (uri, scope_id) =
        corral_tokio::uri::parse_scoped(&args.uri).map_err(|e| Failure::usage(format!("invalid URI: {e}")))?;
    let dtls = crate::cli::dtls::DtlsClientArgs {
        psk: args.psk.clone(),
        identity: args.identity.clone(),
        ..Default::default()
    };
    check(&args, &uri, &dtls)?;
    let oscore = oscore_of(&args, &uri)?;
    let proxy = proxy_of(&args)?;
    let method = method_of(&args)?;
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
        let dst = destination(proxy.as_ref(), (&uri, scope_id)).await?;
        let template = template(&args, (method, &uri, proxy.is_some()), oscore, &dtls);
        let params = SendParams {
            confirmable: !args.non,
            timeout: Some(CDuration::from_secs_f64(args.timeout)),
            ..SendParams::default()
        };
        let shared = Arc::new(Shared::new(args.requests));
        let start = std::time::Instant::now();
        let deadline = start + duration;
        let sockets = load::client_sockets(dst, args.clients)
            .map_err(|e| Failure::other(format!("cannot open a socket: {e}")))?;
        if !v.quiet {
            say!("{}", starting(&args, method, &uri, duration));
        }
        let progress = (!v.quiet).then(|| tokio::spawn(progress(shared.clone(), start)));
        // Ctrl-C (or SIGTERM) ends the run early: the clients finish the requests they have in flight and the
        // summary covers what was measured until then.
        let run = load::run(sockets, dst, template, params, shared.clone(), deadline);
        tokio::pin!(run);
        let mut interrupted = false;
        let totals = tokio::select! {
            r = &mut run => r,
            _ = crate::cli::wait_for_signal() => {
                interrupted = true;
                shared.stop();
                if !v.quiet {
                    say!("bench: interrupted; waiting for the requests in flight (at most --timeout)");
                }
                run.await
            }
        }
        .map_err(|e| match e {
            load::RunError::Client(e) => Failure::other(format!("client failed: {e}")),
            load::RunError::Task(e) => Failure::other(format!("client task failed: {e}")),
        })?;
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
        let (rate, elapsed_s) = (completed as f64 / elapsed, elapsed);
        summary(&args, &uri, method, &totals, (completed, errors, timeouts), (rate, elapsed_s), interrupted);
        verdict(&args, &shared, (completed, errors), elapsed, interrupted, v)
    })
}

/// Every client's request: the method, the target's options (or a Proxy-Uri), the payload, the security.
fn template(
    args: &BenchArgs,
    (method, uri, proxied): (Code, &corral_tokio::Uri, bool),
    oscore: Option<corral_tokio::oscore::SharedContext>,
    dtls: &crate::cli::dtls::DtlsClientArgs,
) -> Template {
    let mut request = Request::new(method);
    if !proxied {
        uri.to_options(&mut request.options);
    }
    request.payload = vec![b'x'; args.payload.unwrap_or(0) as usize];
    Template {
        request,
        proxy_uri: proxied.then(|| uri.to_string()),
        distinct: args.distinct,
        oscore,
        dtls: dtls.config().filter(|_| uri.scheme == Scheme::Coaps),
        full_handshakes: args.full_handshakes,
    }
}

/// The line that says what the run is about to measure.
fn starting(args: &BenchArgs, method: Code, uri: &corral_tokio::Uri, duration: Duration) -> String {
    format!(
        "bench: {} {} {}{} with {} clients for up to {:.1} s{}",
        if args.non { "NON" } else { "CON" },
        method,
        uri,
        args.proxy.as_ref().map(|p| format!(" via {p}")).unwrap_or_default(),
        args.clients,
        duration.as_secs_f64(),
        args.requests.map(|n| format!(" or {n} requests")).unwrap_or_default()
    )
}

/// What bench cannot measure as asked.
fn check(args: &BenchArgs, uri: &corral_tokio::Uri, dtls: &crate::cli::dtls::DtlsClientArgs) -> Result<(), Failure> {
    if !matches!(uri.scheme, Scheme::Coap | Scheme::Coaps) && args.proxy.is_none() {
        return Err(Failure::usage(format!(
            "corral bench measures CoAP over UDP: use coap:// or coaps://, not {}://",
            uri.scheme
        )));
    }
    if uri.scheme == Scheme::Coaps && args.proxy.is_some() {
        return Err(Failure::usage("corral bench sends coaps:// to the server itself: drop --proxy"));
    }
    if args.proxy.is_none() {
        dtls.check(uri.scheme)?;
    }
    if args.full_handshakes && uri.scheme != Scheme::Coaps {
        return Err(Failure::usage("--full-handshakes measures DTLS handshakes: give a coaps:// URI with -k and -u"));
    }
    Ok(())
}

/// `--credentials`: the OSCORE context of every request.
fn oscore_of(
    args: &BenchArgs,
    uri: &corral_tokio::Uri,
) -> Result<Option<corral_tokio::oscore::SharedContext>, Failure> {
    Ok(match &args.credentials {
        Some(file) => {
            let creds = crate::cli::credentials::Credentials::load(file)?;
            let dir = creds.for_uri(&args.uri).or_else(|_| creds.for_uri(&uri.to_string()))?;
            Some(corral_tokio::oscore::shared(crate::cli::credentials::client_context(dir, args.deterministic)?))
        }
        None => None,
    })
}

/// `--proxy`: a coap:// proxy and its IPv6 scope.
fn proxy_of(args: &BenchArgs) -> Result<Option<(corral_tokio::Uri, u32)>, Failure> {
    Ok(match &args.proxy {
        Some(p) => {
            let (p, scope) = corral_tokio::uri::parse_scoped(p)
                .map_err(|e| Failure::usage(format!("invalid --proxy (expected coap://HOST:PORT): {e}")))?;
            if p.scheme != Scheme::Coap || !p.path.is_empty() {
                return Err(Failure::usage("--proxy: give the proxy as coap://HOST:PORT (UDP, no path)"));
            }
            Some((p, scope))
        }
        None => None,
    })
}

/// The method: GET unless -m says otherwise (a payload needs a method that carries it).
fn method_of(args: &BenchArgs) -> Result<Code, Failure> {
    Ok(match (args.method, args.payload) {
        (Some(m), _) => m,
        (None, Some(n)) if n > 0 => {
            return Err(Failure::usage(format!(
                "--payload {n} needs a method that carries it, e.g. -m post or -m put (bench sends a GET \
                 unless -m says otherwise, and never changes the method by itself)"
            )))
        }
        (None, _) => Code::GET,
    })
}

/// Where the datagrams go: the proxy, or the server (a name resolved once).
async fn destination(
    proxy: Option<&(corral_tokio::Uri, u32)>,
    (uri, scope_id): (&corral_tokio::Uri, u32),
) -> Result<SocketAddr, Failure> {
    let (send_to, scope) = proxy.map_or((uri, scope_id), |(p, scope)| (p, *scope));
    corral_tokio::uri::lookup(send_to, scope).await.ok_or_else(|| match &send_to.host {
        Host::Name(name) => Failure::other(format!("cannot resolve `{name}`")),
        Host::Ip(ip) => Failure::other(format!("cannot resolve `{ip}`")),
    })
}

/// The run's numbers: one JSON object with --json, else three lines.
fn summary(
    args: &BenchArgs,
    uri: &corral_tokio::Uri,
    method: Code,
    totals: &load::Totals,
    (completed, errors, timeouts): (u64, u64, u64),
    (rate, elapsed): (f64, f64),
    interrupted: bool,
) {
    let (histogram, retransmissions) = (&totals.histogram, totals.retransmissions);
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
            "interrupted": interrupted,
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
}

/// The exit status: interrupted, nothing completed, every answer an error (a warning when some were).
fn verdict(
    args: &BenchArgs,
    shared: &Shared,
    (completed, errors): (u64, u64),
    elapsed: f64,
    interrupted: bool,
    v: Verbosity,
) -> Result<(), Failure> {
    if interrupted {
        return Err(Failure::interrupted(format!(
            "interrupted after {elapsed:.2} s: the summary covers the {completed} requests measured until then"
        )));
    }
    if completed == 0 {
        return Err(Failure::new(
            ExitCode::Timeout,
            format!("no request completed: every one timed out (--timeout {})", units::show_secs(args.timeout)),
        ));
    }
    let first = shared.first_error.lock().ok().and_then(|mut f| f.take()).map(|answer| match answer {
        ErrorAnswer::Response { code, payload } => Failure::from_response(code, &payload),
        ErrorAnswer::Unverified(e) => Failure::new(ExitCode::Security, format!("a response did not verify: {e}")),
    });
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
