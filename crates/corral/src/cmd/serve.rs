//! `corral serve`: the demo and plugtest resources on a UDP socket (and with `--tcp` over TCP, `--dtls`
//! over DTLS, `--tls` over TLS) until Ctrl-C or SIGTERM. Every transport reaches the same node (the first
//! worker's): a PUT over one is read back over another.

use crate::cli::exit::Failure;
use crate::cli::server::{listen_args, Driver};
use clap::Args;
use corral_gateway::serve::{check_workers, MountServe, Serve, ServeConfig};
use corral_tokio::corral_proto::Node;
use corral_tokio::uri::base_uri;
use corral_tokio::{BlockConfig, EndpointConfig, Limits, TransmissionParams};
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

pub const AFTER_HELP: &str = "\
Resources: /hello /echo /stats (demo) and the ETSI plugtest set: /test /separate /seg1/seg2/seg3 \
/query /location-query /validate /create1 /multi-format /link1 /link2 /link3 /path /path/sub1..3, \
block-wise (RFC 7959) /large (GET), /large-update (PUT, GET), /large-create (POST creates \
/large-create/N), /large-post (POST, GET), observable (RFC 7641) /obs (CON notifications), /obs-non \
(NON), /obs-large (larger than a block), which change every --obs-period, and /obs-reset (POST: \
forget every observer, a server reboot for TD_COAP_OBS_04). /multi-format answers text, XML, JSON \
or CBOR by Accept. /stream collects CoAP-SC streams (corral stream send). GET /.well-known/core \
lists them all.

Examples:
  corral serve                         # [::]:5683, IPv4 and IPv6
  corral serve --tcp                   # also CoAP over TCP on [::]:5683
  corral serve --bind 127.0.0.1:5700 --tcp 127.0.0.1:5800 --obs-period 1
  corral serve --tls --cert srv.pem --key srv.key   # coaps+tcp:// on [::]:5684
  corral serve --join 224.0.1.187 --mcast-if 192.168.1.10   # All CoAP Nodes
  corral serve --bind 127.0.0.1:5701 --credentials keys/server.json \\
      --require-oscore                 # OSCORE only (see corral oscore new)";

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address and port to listen on; [::] serves IPv4 and IPv6 on one socket.
    #[arg(long, value_name = "ADDR:PORT", default_value = "[::]:5683")]
    pub bind: String,
    /// Join a multicast group (repeatable): 224.0.1.187 and ff02::fd are "All CoAP Nodes". The port is
    /// then shared (SO_REUSEPORT, same user only), so several servers on one host can listen on it.
    #[arg(long, value_name = "GROUP")]
    pub join: Vec<IpAddr>,
    /// IPv4 address of the interface on which to join IPv4 groups (default: the routing table's choice).
    #[arg(long, value_name = "ADDR")]
    pub mcast_if: Option<Ipv4Addr>,
    /// Interface index on which to join IPv6 groups (default: the kernel's choice).
    #[arg(long, value_name = "INDEX")]
    pub mcast_if6: Option<u32>,
    /// DEFAULT_LEISURE: the window over which multicast requests are answered, e.g. 5, 500ms [default: 5s].
    #[arg(long, value_name = "DURATION", value_parser = crate::cli::units::secs(crate::cli::units::Range::up_to(crate::cli::units::HOUR)))]
    pub leisure: Option<f64>,
    /// Peers with state the server remembers (a flood from more sources evicts idle ones).
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_peers)]
    pub max_peers: usize,
    /// Requests in progress at once; beyond it new requests get 5.03 Service Unavailable.
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_inbound_exchanges)]
    pub max_pending: usize,
    /// Also serve CoAP over TCP (RFC 8323); without ADDR:PORT on the UDP address and port.
    #[arg(long, value_name = "ADDR:PORT", num_args = 0..=1, default_missing_value = "")]
    pub tcp: Option<String>,
    #[command(flatten)]
    pub dtls: crate::cli::dtls::DtlsServeArgs,
    #[command(flatten)]
    pub tls: crate::cli::tls::TlsServeArgs,
    /// How often /obs, /obs-non and /obs-large change (and notify their observers), e.g. 5, 200ms.
    #[arg(long, value_name = "DURATION", default_value = "5",
          value_parser = crate::cli::units::secs(crate::cli::units::Range::between(std::time::Duration::from_millis(10), crate::cli::units::DAY)))]
    pub obs_period: f64,
    /// The largest request body accepted block-wise (bytes); larger uploads get 4.13 with Size1.
    #[arg(long, value_name = "BYTES", default_value_t = 16 << 20)]
    pub max_body: usize,
    /// Serve OSCORE-protected requests (RFC 8613) from the clients whose contexts this credentials file
    /// (aiocoap's format) lists; plain CoAP is still served unless --require-oscore.
    #[arg(long, value_name = "FILE")]
    pub credentials: Option<std::path::PathBuf>,
    /// With --credentials: refuse every request that is not OSCORE-protected (4.01), discovery excepted.
    #[arg(long, requires = "credentials")]
    pub require_oscore: bool,
    /// After a burst of requests, keep polling the socket for this many microseconds before sleeping
    /// (default 0: sleep at once). Lowers latency and raises the rate a closed-loop client gets, at the
    /// price of a busy core: a sleeping thread on a virtual machine takes tens of microseconds to wake.
    /// Runs the workers on the tokio driver (see --driver).
    #[arg(long, value_name = "MICROS", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=100_000))]
    pub busy_poll: u64,
    /// How workers wait for datagrams: `blocking` (the default on Linux without --tcp or --busy-poll) sleeps
    /// inside the receive call, one system call per wake-up; `tokio` runs an async runtime per worker.
    /// For comparing the two (scripts/bench-latency.sh); both serve the same resources the same way.
    #[arg(long, value_enum, value_name = "DRIVER", hide_short_help = true)]
    pub driver: Option<Driver>,
    /// Serve with N workers, each a thread with its own endpoint and resources on its own socket bound
    /// to the same address (SO_REUSEPORT). The kernel sends all datagrams of one client address and port
    /// to one worker, so duplicate detection, Observe and block-wise transfers stay within a worker;
    /// resource state (/test, /stats, …) is per worker. CoAP over TCP (--tcp) is served by the first
    /// worker. Not with --join or --credentials.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub workers: u16,
    /// Print the start-up summary as one JSON object on stdout ({"udp", "tcp", "uri", "groups"}).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub http: crate::http::HttpArgs,
    #[command(flatten)]
    pub verified: crate::cli::policy::VerifiedNetArgs,
}

pub fn run(args: ServeArgs, v: crate::cli::Verbosity) -> Result<(), Failure> {
    let (bind, tcp) = listen_args(&args.bind, args.tcp.as_deref())?;
    let d = &args.dtls;
    let certificate = (d.server_cert.as_deref(), d.server_key.as_deref(), d.server_ca.as_deref());
    let tls = args.tls.server(bind, certificate)?;
    if d.server_cert.is_some() && d.dtls.is_none() && tls.is_none() {
        return Err(Failure::usage("--cert/--key/--ca are for coaps:// (--dtls) or coaps+tcp:// (--tls): add one"));
    }
    check_workers(args.workers, args.credentials.is_some(), &args.join)?;
    let dtls = args.dtls.server(bind)?;
    let driver = driver(&args, tcp.is_none() && tls.is_none() && dtls.is_none() && args.busy_poll == 0)?;
    let oscore = match &args.credentials {
        Some(file) => Some(corral_oscore::OscoreLayer::serving(
            crate::cli::credentials::Credentials::load(file)?.all()?,
            args.require_oscore,
        )),
        None => None,
    };
    let config = ServeConfig {
        tcp,
        workers: args.workers,
        driver: driver.into(),
        join: args.join.clone(),
        mcast_if: args.mcast_if,
        mcast_if6: args.mcast_if6.unwrap_or(0),
        busy_poll: std::time::Duration::from_micros(args.busy_poll),
        endpoint: endpoint_config(&args),
        obs_period: corral_tokio::corral_proto::Duration::from_secs_f64(args.obs_period),
        oscore,
        tls,
        dtls,
        ..ServeConfig::new(bind)
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::other(format!("cannot start the runtime: {e}")))?;
    rt.block_on(async move {
        let board = crate::http::Board::new(usize::from(args.workers));
        let window = args.http.bind("serve", board.clone(), crate::http::this_machine())?;
        let http = window.as_ref().and_then(|w| w.local_addr());
        let mount: Option<MountServe> = window.as_ref().map(|_| {
            let board = board.clone();
            Arc::new(move |i: usize, node: &mut Node| crate::http::watch::mount_probe(node, board.slot(i)))
                as MountServe
        });
        let serve = Serve::start(ServeConfig { dtls_watch: Some(board.dtls()), mount, ..config })?;
        if let Some(w) = window {
            w.spawn().await?;
        }
        announce(&args, serve.local_addr(), serve.tcp_local_addr(), http, v);
        // -q: nothing but errors (--json: its one line, and these).
        if !v.quiet || args.json {
            crate::cli::dtls::announce_as(serve.dtls_local_addr(), args.dtls.modes());
            crate::cli::tls::announce(serve.tls_local_addr(), args.dtls.server_ca.is_some());
        }
        crate::cli::wait_for_signal().await;
        tracing::info!("shutting down");
        serve.stop().await;
        Ok::<(), Failure>(())
    })
}

/// The driver: blocking where it can serve everything asked for (`udp_only`) on Linux, unless told.
fn driver(args: &ServeArgs, udp_only: bool) -> Result<Driver, Failure> {
    Ok(match args.driver {
        Some(Driver::Blocking) if !udp_only || !cfg!(target_os = "linux") => {
            return Err(Failure::usage(
                "--driver blocking serves CoAP over UDP on Linux, without --tcp, --tls, --dtls or --busy-poll",
            ))
        }
        Some(d) => d,
        None if udp_only && cfg!(target_os = "linux") => Driver::Blocking,
        None => Driver::Tokio,
    })
}

/// The endpoint configuration every worker gets from the command line.
fn endpoint_config(args: &ServeArgs) -> EndpointConfig {
    let mut params = TransmissionParams::default();
    if let Some(l) = args.leisure {
        params.default_leisure = corral_tokio::corral_proto::Duration::from_secs_f64(l);
    }
    let limits = Limits {
        max_peers: args.max_peers.max(1),
        max_inbound_exchanges: args.max_pending.max(1),
        ..Limits::default()
    };
    let block = BlockConfig {
        max_body: args.max_body.max(1024),
        max_assembly_bytes: args.max_body.max(1024).saturating_mul(2).max(BlockConfig::default().max_assembly_bytes),
        ..BlockConfig::default()
    };
    let mut config = EndpointConfig { params, limits, block, ..EndpointConfig::default() };
    args.verified.apply(&mut config);
    config
}

/// The start-up summary: JSON with --json, else the banner; nothing with -q (errors only).
fn announce(
    args: &ServeArgs,
    local: SocketAddr,
    tcp_local: Option<SocketAddr>,
    http: Option<SocketAddr>,
    v: crate::cli::Verbosity,
) {
    if args.json {
        let j = serde_json::json!({
            "udp": local.to_string(),
            "tcp": tcp_local.map(|t| t.to_string()),
            "uri": base_uri(local),
            "groups": args.join.iter().map(|g| g.to_string()).collect::<Vec<_>>(),
            "oscore": args.credentials.as_ref().map(|_| serde_json::json!({ "required": args.require_oscore })),
            "http": http.map(|a| a.to_string()),
        });
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{j}");
        let _ = out.flush();
    } else if !v.quiet {
        let oscore = args.credentials.as_deref().map(|f| OscoreHint::new(f, args.require_oscore, local));
        print_banner(local, tcp_local, (&args.join, oscore));
        if args.workers > 1 {
            println!("corral serve: {} workers on {local} (SO_REUSEPORT)", args.workers);
        }
        if let Some(a) = http {
            println!("corral serve: HTTP on http://{a}/ (/metrics, /healthz, /readyz)");
        }
    }
}

/// What the banner says about OSCORE (`--credentials`), and the client credentials file its suggestions
/// use: `client.json` (or `client1.json`) beside the server's, as `corral oscore new` and `corral oscore
/// group` write them.
struct OscoreHint {
    required: bool,
    server_file: String,
    /// The client's credentials file and the base URI its patterns cover.
    client: Option<(String, String)>,
}

impl OscoreHint {
    fn new(server_file: &std::path::Path, required: bool, local: SocketAddr) -> OscoreHint {
        let dir = server_file.parent().unwrap_or(std::path::Path::new(""));
        let client = ["client.json", "client1.json"].iter().map(|n| dir.join(n)).find(|p| p.exists()).map(|p| {
            // A base URI the client's patterns cover (they name the address it was made for).
            let base = crate::cli::credentials::Credentials::load(&p)
                .ok()
                .and_then(|c| {
                    c.patterns()
                        .filter_map(|pat| pat.strip_suffix('*'))
                        .map(|pre| pre.trim_end_matches('/').to_string())
                        .find(|pre| corral_tokio::parse_uri(pre).is_ok_and(|u| u.port == local.port()))
                })
                .unwrap_or_else(|| base_uri(local));
            (p.display().to_string(), base)
        });
        OscoreHint { required, server_file: server_file.display().to_string(), client }
    }
}

fn print_banner(local: SocketAddr, tcp: Option<SocketAddr>, (groups, oscore): (&[IpAddr], Option<OscoreHint>)) {
    let families = match local.ip() {
        IpAddr::V6(ip) if ip.is_unspecified() => " (IPv4 and IPv6)",
        _ => "",
    };
    let mut base = base_uri(local);
    // With OSCORE the suggestions carry the client's credentials; discovery is never protected.
    let mut creds = String::new();
    if let Some(o) = &oscore {
        if let Some((file, uri)) = &o.client {
            creds = format!(" --credentials {file}");
            base = uri.clone();
        } else if o.required {
            creds = " --credentials CLIENT.json".into();
        }
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "corral serve: listening on {local}{families}");
    if let Some(t) = tcp {
        let _ = writeln!(out, "corral serve: CoAP over TCP on {t}");
    }
    for g in groups {
        let _ = writeln!(out, "  member of multicast group {g}");
    }
    match &oscore {
        Some(o) if o.required => {
            let _ = writeln!(
                out,
                "  OSCORE required: plain requests get 4.01 Unauthorized (discovery excepted); clients need \
                 --credentials (contexts from {})",
                o.server_file
            );
        }
        Some(o) => {
            let _ =
                writeln!(out, "  OSCORE: protected requests served (contexts from {}); plain CoAP too", o.server_file);
        }
        None => {}
    }
    let _ = writeln!(
        out,
        "resources: demo /hello /echo /stats, ETSI plugtest /test /separate /validate /multi-format … (Ctrl-C stops)\n\
         try:\n  corral discover {base}\n  corral get {base}/hello{creds}\n  \
         corral put {base}/test -e 'new value' -t text{creds}\n  corral get {base}/obs -s 10{creds}\n  \
         corral get {base}/large -b 64{creds}\n  corral bench {base}/hello --clients 8 --duration 5{creds}"
    );
    let _ = out.flush();
}
