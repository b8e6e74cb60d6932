//! `corral stream send` and `corral stream recv`: CoAP-SC streaming (seed 003, corral-stream) over real
//! sockets, with its two baselines, and the paper's metrics at the end.

use crate::cli::exit::{ExitCode, Failure};
use crate::cli::output::{fixed, rounded};
use clap::{Args, Subcommand};
use corral_stream::{Metrics, Scheme, StreamConfig, StreamReceiver, StreamSender};
use corral_tokio::corral_proto::Duration as CDuration;
use corral_tokio::{EndpointConfig, Server, TransmissionParams};
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const AFTER_HELP: &str = "\
A sensor streams readings to a collector. With --scheme sc (CoAP-SC, seed 003) each reading is a \
NON PUT carrying sequence and acknowledgement numbers (option 100); the collector asks for what is \
missing and acknowledges when the sender's buffer is 1/3 and 2/3 full. --scheme udp sends CON PUTs \
and --scheme tcp PUTs over CoAP over TCP, at most --buffer outstanding: the paper's baselines. At \
the end: NRP (readings sent again), TBT (time the full buffer blocked the sensor), TTD (first \
reading to last acknowledged).

Examples:
  corral stream recv --bind 127.0.0.1:5801 --tcp    # a collector
  corral stream send coap://127.0.0.1:5801 --count 100 --interval 100ms
  corral stream send coap://127.0.0.1:5801 --scheme udp --count 100 --json
  corral stream send coap://127.0.0.1:5801 --timeout 30s   # a slow collector
  corral stream send coap+tcp://127.0.0.1:5801 --scheme tcp --count 100";

#[derive(Args, Debug)]
pub struct StreamArgs {
    #[command(subcommand)]
    pub command: StreamCommand,
}

#[derive(Subcommand, Debug)]
pub enum StreamCommand {
    /// Stream readings to a collector and report NRP, TBT and TTD.
    #[command(after_help = AFTER_HELP)]
    Send(SendArgs),
    /// Run a collector: /stream accepts CoAP-SC streams and the baselines' readings.
    #[command(after_help = AFTER_HELP)]
    Recv(RecvArgs),
}

#[derive(Args, Debug)]
pub struct SendArgs {
    /// The collector: coap://HOST:PORT (or coap+tcp://HOST:PORT with --scheme tcp).
    pub uri: String,
    /// sc (CoAP-SC), udp (CON per reading) or tcp (CoAP over TCP).
    #[arg(long, default_value = "sc", value_parser = parse_scheme)]
    pub scheme: Scheme,
    /// Readings to send.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub count: u32,
    /// Payload bytes per reading.
    #[arg(long, default_value_t = 150, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub size: u32,
    /// Time between readings, e.g. 500ms, 10ms, 2s (a bare number is seconds).
    #[arg(long, value_name = "DURATION", default_value = "500ms",
          value_parser = crate::cli::units::millis(crate::cli::units::Range::between(std::time::Duration::from_millis(1), crate::cli::units::HOUR)))]
    pub interval: u64,
    /// Readings kept until acknowledged (the sender's buffer).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub buffer: u32,
    /// Give up (exit status 3) when the collector has not answered for this many seconds while the stream
    /// waits for it: its creation, a full buffer, the last readings.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::cli::units::secs(crate::cli::units::Range::positive(crate::cli::units::DAY)))]
    pub timeout: f64,
    /// Print the result as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct RecvArgs {
    /// Address and port to listen on.
    #[arg(long, value_name = "ADDR:PORT", default_value = "[::]:5683")]
    pub bind: String,
    /// Also accept CoAP over TCP (for --scheme tcp senders), on the UDP address and port by default.
    #[arg(long, value_name = "ADDR:PORT", num_args = 0..=1, default_missing_value = "")]
    pub tcp: Option<String>,
    /// Print the start-up summary as one JSON object on stdout ({"udp", "tcp"}).
    #[arg(long)]
    pub json: bool,
}

fn parse_scheme(s: &str) -> Result<Scheme, String> {
    Scheme::parse(s).ok_or_else(|| format!("`{s}`: use sc, udp or tcp"))
}

fn rt() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::other(format!("cannot start the runtime: {e}")))
}

pub fn run(args: StreamArgs, v: crate::cli::Verbosity) -> Result<(), Failure> {
    match args.command {
        StreamCommand::Send(a) => send(a, v),
        StreamCommand::Recv(a) => recv(a, v),
    }
}

fn recv(a: RecvArgs, v: crate::cli::Verbosity) -> Result<(), Failure> {
    let (bind, tcp) = crate::cli::server::listen_args(&a.bind, a.tcp.as_deref())?;
    rt()?.block_on(async move {
        let mut builder = Server::builder();
        if let Some(t) = tcp {
            builder = builder.tcp(t);
        }
        let mut server =
            builder.bind_addr(bind).map_err(|e| Failure::other(format!("cannot listen on {bind}: {e}")))?;
        server.mount("stream", StreamReceiver::default());
        let (local, tcp_local) = (server.local_addr(), server.tcp_local_addr());
        let handle = server.spawn().map_err(|e| Failure::other(format!("cannot start the collector: {e}")))?;
        let mut out = std::io::stdout().lock();
        if a.json {
            let _ = writeln!(
                out,
                "{}",
                serde_json::json!({ "udp": local.to_string(), "tcp": tcp_local.map(|t| t.to_string()) })
            );
        } else if !v.quiet {
            let _ = writeln!(out, "corral stream recv: listening on {local}");
            if let Some(t) = tcp_local {
                let _ = writeln!(out, "corral stream recv: CoAP over TCP on {t}");
            }
            let _ = writeln!(out, "streams: GET /stream for the counters (Ctrl-C stops)");
        }
        let _ = out.flush();
        drop(out);
        crate::cli::wait_for_signal().await;
        handle.shutdown().await;
        Ok(())
    })
}

fn summary(m: &Metrics) -> (f64, f64) {
    let n = m.delays_ms.len().max(1) as f64;
    let mean = m.delays_ms.iter().sum::<f64>() / n;
    let max = m.delays_ms.iter().copied().fold(0.0, f64::max);
    (mean, max)
}

fn send(a: SendArgs, v: crate::cli::Verbosity) -> Result<(), Failure> {
    let uri = corral_tokio::parse_uri(&a.uri).map_err(|e| Failure::usage(format!("invalid URI: {e}")))?;
    let ip = match &uri.host {
        corral_tokio::uri::Host::Ip(ip) => *ip,
        corral_tokio::uri::Host::Name(n) => std::net::ToSocketAddrs::to_socket_addrs(&(n.as_str(), uri.port))
            .ok()
            .and_then(|mut i| i.next())
            .map(|s| s.ip())
            .ok_or_else(|| Failure::new(ExitCode::Timeout, format!("cannot resolve {n}")))?,
    };
    let receiver = SocketAddr::new(ip, uri.port);
    let cfg = StreamConfig {
        count: a.count,
        size: a.size as usize,
        interval: CDuration::from_millis(a.interval),
        buffer: a.buffer,
        give_up: Some(CDuration::from_secs_f64(a.timeout)),
        ..StreamConfig::new(receiver, a.scheme)
    };
    let report = Arc::new(Mutex::new(Metrics::default()));
    let sender = StreamSender::new(cfg).with_report(report.clone());
    let bind = match ip {
        IpAddr::V4(_) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
        IpAddr::V6(_) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
    };
    let started = std::time::Instant::now();
    let result = rt()?.block_on(async move {
        // The baselines keep up to `buffer` CON readings outstanding: NSTART is the buffer (seed 003 §4).
        let params =
            TransmissionParams { nstart: a.buffer.min(u32::from(u16::MAX)) as u16, ..TransmissionParams::default() };
        let mut server = Server::builder()
            .endpoint_config(EndpointConfig { params, ..EndpointConfig::default() })
            .bind_addr(bind)
            .map_err(|e| Failure::other(format!("cannot open a socket: {e}")))?;
        server.mount("control", sender);
        let handle = server.spawn().map_err(|e| Failure::other(format!("cannot start the sender: {e}")))?;
        let mut last_print = std::time::Instant::now();
        // Ctrl-C (or SIGTERM) ends the stream where it is: the summary covers the readings sent so far.
        let interrupt = crate::cli::wait_for_signal();
        tokio::pin!(interrupt);
        let mut interrupted = false;
        let m = loop {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                _ = &mut interrupt => interrupted = true,
            }
            let m = report.lock().map(|m| m.clone()).unwrap_or_default();
            if m.done || m.failed.is_some() || interrupted {
                break m;
            }
            if !v.quiet && last_print.elapsed() >= Duration::from_secs(1) {
                last_print = std::time::Instant::now();
                say!(
                    "[{:5.1} s] {} generated, {} acknowledged, NRP {}, TBT {} ms",
                    started.elapsed().as_secs_f64(),
                    m.generated,
                    m.acknowledged,
                    m.nrp,
                    fixed(m.tbt_ms, 0)
                );
            }
        };
        handle.shutdown().await;
        Ok::<(Metrics, bool), Failure>((m, interrupted))
    })?;
    let (result, interrupted) = result;
    let (mean, max) = summary(&result);
    if a.json {
        out!(
            "{}",
            serde_json::json!({
                "scheme": a.scheme, "count": a.count, "buffer": a.buffer, "interval_ms": a.interval, "size": a.size,
                "generated": result.generated, "acknowledged": result.acknowledged,
                "nrp": result.nrp, "tbt_ms": rounded(result.tbt_ms, 3), "ttd_ms": rounded(result.ttd_ms, 3),
                "delay_ms": { "mean": rounded(mean, 3), "max": rounded(max, 3) },
                "done": result.done, "failed": result.failed, "interrupted": interrupted,
            })
        );
    } else {
        out!(
            "{} of {} readings acknowledged: NRP {}, TBT {} ms, TTD {} ms, delay mean {} ms, max {} ms",
            result.acknowledged,
            a.count,
            result.nrp,
            fixed(result.tbt_ms, 0),
            fixed(result.ttd_ms, 0),
            fixed(mean, 1),
            fixed(max, 1)
        );
    }
    if interrupted {
        return Err(Failure::interrupted(format!(
            "interrupted after {} of {} readings: the summary covers those",
            result.generated, a.count
        )));
    }
    match result.failed {
        Some(why) => {
            let hint = if why.starts_with("no answer") { " (--timeout)" } else { "" };
            Err(Failure::new(ExitCode::Timeout, format!("the stream to {} broke off: {why}{hint}", a.uri)))
        }
        None => Ok(()),
    }
}
