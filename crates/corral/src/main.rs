//! The `corral` command: CoAP client verbs, `discover`, `serve`, `bench`, and the Entity Manager's
//! `gateway`, `device` and `entity`.
//!
//! Every failure ends in one line on stderr and a documented exit code (see [`exit`]); nothing a user or
//! a peer does makes it panic.

/// `println!` that ignores a closed stdout (`corral get … | head -1` must not panic).
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

/// `eprintln!` that ignores a closed stderr.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

mod bench;
mod client_cmd;
mod credentials;
mod devices;
mod entity_cmd;
mod exit;
mod gateway;
mod lab;
mod link;
mod oscore_cmd;
mod output;
mod plugtest;
mod policy_args;
mod proxy_cmd;
mod serve;
mod stream_cmd;
mod units;

use clap::{Parser, Subcommand};
use exit::Failure;

const AFTER_HELP: &str = "\
Examples:
  corral serve                                   # demo + ETSI plugtest resources on [::]:5683
  corral get coap://[::1]/hello
  corral put coap://127.0.0.1/test -e 'new value' -t text
  corral post coap://[::1]/echo -f data.json -t json -A json --json
  corral get coap://[::1]/.well-known/core -v    # code and options on stderr
  corral discover coap://[::1]
  corral get coap://[::1]/obs -s 20                 # observe: each notification as it arrives
  corral put coap://[::1]/large-update -f big.bin -b 512   # block-wise upload
  corral get coap+tcp://[::1]/hello                 # CoAP over TCP (corral serve --tcp)
  corral bench coap://127.0.0.1/ --clients 8 --duration 5

Exit status:
  0  success (a 2.xx response)
  1  other error (cannot bind, unreadable file, …)
  2  usage error (bad arguments, malformed URI)
  3  timeout or unreachable (no response within --timeout)
  4  the server answered 4.xx (client error)
  5  the server answered 5.xx (server error)
  6  a block-wise transfer failed (stalled or inconsistent blocks; no partial body is written)

Logging: -v info, -vv debug, -vvv trace, -q errors only; RUST_LOG (e.g. RUST_LOG=corral_proto=debug)
overrides both.";

/// CoAP done properly: a client, a server with the ETSI plugtest resources, and a load generator.
#[derive(Parser, Debug)]
#[command(name = "corral", version, after_help = AFTER_HELP)]
struct Cli {
    /// More output: -v shows response code and options (client) and info logs; -vv debug; -vvv trace.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Only errors.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// GET a resource.
    #[command(after_help = client_cmd::AFTER_HELP)]
    Get(client_cmd::RequestArgs),
    /// POST to a resource.
    #[command(after_help = client_cmd::AFTER_HELP)]
    Post(client_cmd::RequestArgs),
    /// PUT a representation.
    #[command(after_help = client_cmd::AFTER_HELP)]
    Put(client_cmd::RequestArgs),
    /// DELETE a resource.
    #[command(after_help = client_cmd::AFTER_HELP)]
    Delete(client_cmd::RequestArgs),
    /// FETCH (RFC 8132): GET with a request payload.
    #[command(after_help = client_cmd::AFTER_HELP)]
    Fetch(client_cmd::RequestArgs),
    /// PATCH (RFC 8132).
    #[command(after_help = client_cmd::AFTER_HELP)]
    Patch(client_cmd::RequestArgs),
    /// iPATCH (RFC 8132): idempotent PATCH.
    #[command(after_help = client_cmd::AFTER_HELP)]
    Ipatch(client_cmd::RequestArgs),
    /// Any method, chosen with -m METHOD (GET without it), as libcoap's coap-client takes it.
    #[command(after_help = client_cmd::AFTER_HELP)]
    Request(client_cmd::RequestArgs),
    /// List a server's resources (/.well-known/core) as a table.
    #[command(after_help = client_cmd::DISCOVER_HELP)]
    Discover(client_cmd::DiscoverArgs),
    /// Run a CoAP server with demo resources and the ETSI CoAP plugtest resource set.
    #[command(after_help = serve::AFTER_HELP)]
    Serve(serve::ServeArgs),
    /// An impaired IP link (delay, jitter, loss, rate, reordering) between two network namespaces, for
    /// real programs, without `tc netem`: `link run -- SERVER ::: CLIENT`, `link up`.
    Link(link::LinkArgs),
    /// Stream readings with CoAP-SC (seed 003) or its CoAP over UDP/TCP baselines: `stream send`, `stream recv`.
    Stream(stream_cmd::StreamArgs),
    /// OSCORE (RFC 8613) security contexts: `oscore new` makes a client/server pair and credentials files.
    Oscore(oscore_cmd::OscoreArgs),
    /// Run the multiparty forward proxy (seed 001): FIB with several next hops, aggregation, caching.
    #[command(after_help = proxy_cmd::AFTER_HELP)]
    Proxy(proxy_cmd::ProxyArgs),
    /// Load-test a CoAP server: N client endpoints in a closed loop, then requests/s and latency.
    #[command(after_help = bench::AFTER_HELP)]
    Bench(bench::BenchArgs),
    /// Experiments on the simulated network: list, show, run and merge scenarios (seed 000's figures).
    #[command(after_help = lab::AFTER_HELP)]
    Lab(lab::LabArgs),
    /// Run the Entity Manager gateway (groups of resources as one resource); --testbed adds devices.
    #[command(after_help = gateway::AFTER_HELP)]
    Gateway(gateway::GatewayArgs),
    /// Run virtual constrained devices (sensors, actuators, /mc) on loopback addresses.
    #[command(after_help = devices::AFTER_HELP)]
    Device(devices::DeviceArgs),
    /// Create, list, show, use, actuate, update and delete a gateway's entities.
    #[command(after_help = entity_cmd::AFTER_HELP)]
    Entity(entity_cmd::EntityArgs),
}

/// Waits for Ctrl-C or SIGTERM: how `serve`, `gateway` and `device` are told to stop.
pub(crate) async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

fn init_logging(verbose: u8, quiet: bool) {
    use tracing_subscriber::EnvFilter;
    let default = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, 2) => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

fn main() {
    let cli = Cli::parse();
    // A server's log is its progress (entity changes, group joins): INFO unless -q.
    let serving = matches!(cli.command, Command::Gateway(_) | Command::Device(_) | Command::Proxy(_));
    init_logging(if serving { cli.verbose.max(1) } else { cli.verbose }, cli.quiet);
    let verbosity = client_cmd::Verbosity { verbose: cli.verbose, quiet: cli.quiet };
    let result: Result<(), Failure> = match cli.command {
        Command::Get(a) => client_cmd::run(Some(corral_tokio::Code::GET), a, verbosity),
        Command::Post(a) => client_cmd::run(Some(corral_tokio::Code::POST), a, verbosity),
        Command::Put(a) => client_cmd::run(Some(corral_tokio::Code::PUT), a, verbosity),
        Command::Delete(a) => client_cmd::run(Some(corral_tokio::Code::DELETE), a, verbosity),
        Command::Fetch(a) => client_cmd::run(Some(corral_tokio::Code::FETCH), a, verbosity),
        Command::Patch(a) => client_cmd::run(Some(corral_tokio::Code::PATCH), a, verbosity),
        Command::Ipatch(a) => client_cmd::run(Some(corral_tokio::Code::IPATCH), a, verbosity),
        Command::Request(a) => client_cmd::run(None, a, verbosity),
        Command::Discover(a) => client_cmd::discover(a, verbosity),
        Command::Serve(a) => serve::run(a, verbosity),
        Command::Proxy(a) => proxy_cmd::run(a, verbosity),
        Command::Oscore(a) => oscore_cmd::run(a),
        Command::Stream(a) => stream_cmd::run(a, verbosity),
        Command::Link(a) => link::run(a),
        Command::Bench(a) => bench::run(a, verbosity),
        Command::Lab(a) => lab::run(a, cli.quiet),
        Command::Gateway(a) => gateway::run(a, verbosity),
        Command::Device(a) => devices::run(a, verbosity),
        Command::Entity(a) => entity_cmd::run(a, verbosity),
    };
    if let Err(failure) = result {
        if !failure.message.is_empty() {
            say!("error: {}", failure.message);
        }
        std::process::exit(failure.exit_status());
    }
}
