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

mod cli;
mod cmd;
mod http;

// The paths the HTTP window (`http/`) and `corral entity` use; they move onto `cli::…` with the window's own
// change.
use cli::{exit, output, policy as policy_args, units};
use cmd::{bench, device, gateway, lab, link, oscore, proxy, rd, serve, stream, wait};
use cmd::{client, entity};

use clap::{Parser, Subcommand};
use cli::exit::Failure;

const AFTER_HELP: &str = "\
Examples:
  corral serve                              # demo + plugtest, on [::]:5683
  corral get coap://[::1]/hello
  corral put coap://127.0.0.1/test -e 'new value' -t text
  corral post coap://[::1]/echo -f data.json -t json -A json --json
  corral get coap://[::1]/.well-known/core -v    # code and options on stderr
  corral discover coap://[::1]
  corral get coap://[::1]/obs -s 20         # observe for 20 s
  corral put coap://[::1]/large-update -f big.bin -b 512   # block-wise
  corral get coap+tcp://[::1]/hello         # CoAP over TCP (serve --tcp)
  corral bench coap://127.0.0.1/ --clients 8 --duration 5

Durations (-B, -s, --timeout, --interval, --delay, --leisure, …) take a unit: \
250ms, 2s, 1.5s, 2m; a bare number is seconds.

Exit status:
  0  success (a 2.xx response)
  1  other error (cannot bind, unreadable file, …)
  2  usage error (bad arguments, malformed URI)
  3  timeout or unreachable (no response in time, port unreachable)
  4  the server answered 4.xx (client error)
  5  the server answered 5.xx (server error)
  6  a block-wise transfer failed (nothing partial is written)
  7  OSCORE: the response did not verify, or the server refused it
  8  coaps://: the DTLS handshake failed
  9  gateway, rd --store: the database cannot be used at start
  130  interrupted (Ctrl-C): what was done is printed first (bench and
       stream send summaries; an observation is deregistered)

Logging: -v info, -vv debug, -vvv trace (coap-client's -v LEVEL works too: 6 info, 7 debug, 8 and \
above trace), -q errors only; RUST_LOG (e.g. RUST_LOG=corral_proto=debug) overrides both. With -q a \
command prints only what it exists to print (a payload, a value, a JSON object, a summary) and its \
errors: servers print no banner (--json still prints their one line).";

/// CoAP done properly: a client, a server with the ETSI plugtest resources, and a load generator.
#[derive(Parser, Debug)]
#[command(name = "corral", version, after_help = AFTER_HELP)]
struct Cli {
    /// More output: -v shows response code and options (client) and info logs; -vv debug; -vvv trace.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Only errors, and what the command exists to print (a payload, a value, JSON); no banners, notes or
    /// progress.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// GET a resource.
    #[command(after_help = client::AFTER_HELP)]
    Get(client::RequestArgs),
    /// POST to a resource.
    #[command(after_help = client::AFTER_HELP)]
    Post(client::RequestArgs),
    /// PUT a representation.
    #[command(after_help = client::AFTER_HELP)]
    Put(client::RequestArgs),
    /// DELETE a resource.
    #[command(after_help = client::AFTER_HELP)]
    Delete(client::RequestArgs),
    /// FETCH (RFC 8132): GET with a request payload.
    #[command(after_help = client::AFTER_HELP)]
    Fetch(client::RequestArgs),
    /// PATCH (RFC 8132).
    #[command(after_help = client::AFTER_HELP)]
    Patch(client::RequestArgs),
    /// iPATCH (RFC 8132): idempotent PATCH.
    #[command(after_help = client::AFTER_HELP)]
    Ipatch(client::RequestArgs),
    /// Any method, chosen with -m METHOD (GET without it), as libcoap's coap-client takes it.
    #[command(after_help = client::AFTER_HELP)]
    Request(client::RequestArgs),
    /// List a server's resources (/.well-known/core) as a table.
    #[command(after_help = client::DISCOVER_HELP)]
    Discover(client::DiscoverArgs),
    /// Run a CoAP server with demo resources and the ETSI CoAP plugtest resource set.
    #[command(after_help = serve::AFTER_HELP)]
    Serve(serve::ServeArgs),
    /// An impaired IP link (delay, jitter, loss, rate, reordering) between two network namespaces, for
    /// real programs, without `tc netem`: `link run -- SERVER ::: CLIENT`, `link up`.
    Link(link::LinkArgs),
    /// Stream readings with CoAP-SC (seed 003) or its CoAP over UDP/TCP baselines: `stream send`, `stream recv`.
    Stream(stream::StreamArgs),
    /// OSCORE (RFC 8613) security contexts: `oscore new` makes a client/server pair and credentials files.
    Oscore(oscore::OscoreArgs),
    /// Run the multiparty forward proxy (seed 001): FIB with several next hops, aggregation, caching.
    #[command(after_help = proxy::AFTER_HELP)]
    Proxy(proxy::ProxyArgs),
    /// Load-test a CoAP server: N client endpoints in a closed loop, then requests/s and latency.
    #[command(after_help = bench::AFTER_HELP)]
    Bench(bench::BenchArgs),
    /// Experiments on the simulated network: list, show, run and merge scenarios (seed 000's figures).
    #[command(after_help = lab::AFTER_HELP)]
    Lab(lab::LabArgs),
    /// Run the Entity Manager gateway (groups of resources as one resource); --testbed adds devices.
    #[command(after_help = gateway::AFTER_HELP)]
    Gateway(gateway::GatewayArgs),
    /// Run a Resource Directory (RFC 9176): devices register their resources, clients look them up.
    #[command(after_help = rd::AFTER_HELP)]
    Rd(rd::RdArgs),
    /// Run virtual constrained devices (sensors, actuators, /mc) on loopback addresses.
    #[command(after_help = device::AFTER_HELP)]
    Device(device::DeviceArgs),
    /// Create, list, show, use, actuate, update and delete a gateway's entities.
    #[command(after_help = entity::AFTER_HELP)]
    Entity(entity::EntityArgs),
    /// Wait until servers answer (a CoAP ping, a TCP connection, a DTLS hello) or a GET answers 2.xx:
    /// for scripts that start a server in the background.
    #[command(after_help = wait::AFTER_HELP)]
    Wait(wait::WaitArgs),
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

/// coap-client's `-v LEVEL` (syslog levels: 6 info, 7 debug, 8 and above libcoap's packet dumps) as this
/// command's `-v` count: `-v 7` and `-v7` become `-vv`; levels up to 5 (coap-client's default is 4)
/// add nothing. Every other argument is left as it is.
fn libcoap_verbosity(args: impl IntoIterator<Item = std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let level = |s: &str| s.parse::<u8>().ok().filter(|l| *l <= 9);
    let as_count = |l: u8| -> Option<std::ffi::OsString> {
        let n = match l {
            0..=5 => return None,
            6 => 1,
            7 => 2,
            _ => 3,
        };
        Some(format!("-{}", "v".repeat(n)).into())
    };
    let mut out = Vec::new();
    let mut args = args.into_iter().peekable();
    while let Some(a) = args.next() {
        let s = a.to_string_lossy().into_owned();
        if s == "-v" || s == "--verbose" {
            if let Some(l) = args.peek().and_then(|n| level(&n.to_string_lossy())) {
                args.next();
                out.extend(as_count(l));
                continue;
            }
        } else if let Some(l) = s.strip_prefix("-v").and_then(level) {
            out.extend(as_count(l));
            continue;
        }
        out.push(a);
    }
    out
}

fn main() {
    let cli = Cli::parse_from(libcoap_verbosity(std::env::args_os()));
    // A server's log is its progress (entity changes, group joins): INFO unless -q.
    let serving = matches!(cli.command, Command::Gateway(_) | Command::Device(_) | Command::Proxy(_) | Command::Rd(_));
    init_logging(if serving { cli.verbose.max(1) } else { cli.verbose }, cli.quiet);
    let verbosity = cli::Verbosity { verbose: cli.verbose, quiet: cli.quiet };
    let result: Result<(), Failure> = match cli.command {
        Command::Get(a) => client::run(Some(corral_tokio::Code::GET), a, verbosity),
        Command::Post(a) => client::run(Some(corral_tokio::Code::POST), a, verbosity),
        Command::Put(a) => client::run(Some(corral_tokio::Code::PUT), a, verbosity),
        Command::Delete(a) => client::run(Some(corral_tokio::Code::DELETE), a, verbosity),
        Command::Fetch(a) => client::run(Some(corral_tokio::Code::FETCH), a, verbosity),
        Command::Patch(a) => client::run(Some(corral_tokio::Code::PATCH), a, verbosity),
        Command::Ipatch(a) => client::run(Some(corral_tokio::Code::IPATCH), a, verbosity),
        Command::Request(a) => client::run(None, a, verbosity),
        Command::Discover(a) => client::discover(a, verbosity),
        Command::Serve(a) => serve::run(a, verbosity),
        Command::Proxy(a) => proxy::run(a, verbosity),
        Command::Oscore(a) => oscore::run(a, cli.quiet),
        Command::Stream(a) => stream::run(a, verbosity),
        Command::Link(a) => link::run(a),
        Command::Bench(a) => bench::run(a, verbosity),
        Command::Lab(a) => lab::run(a, cli.quiet),
        Command::Gateway(a) => gateway::run(a, verbosity),
        Command::Device(a) => device::run(a, verbosity),
        Command::Rd(a) => rd::run(a, verbosity),
        Command::Entity(a) => entity::run(a, verbosity),
        Command::Wait(a) => wait::run(a, verbosity),
    };
    if let Err(failure) = result {
        if !failure.message.is_empty() {
            say!("error: {}", failure.message);
        }
        std::process::exit(failure.exit_status());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every command's after-help text, with the command's path (`corral link run`).
    fn after_helps() -> Vec<(String, String)> {
        fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<(String, String)>) {
            let path = format!("{path} {}", cmd.get_name()).trim().to_string();
            if let Some(text) = cmd.get_after_help() {
                out.push((path.clone(), text.to_string()));
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &path, out);
            }
        }
        let mut out = Vec::new();
        walk(&Cli::command(), "", &mut out);
        out
    }

    /// The `corral …` commands a help text shows, with `\` continuation lines joined.
    fn examples(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut pending: Option<String> = None;
        for line in text.lines() {
            let t = line.trim();
            if let Some(mut p) = pending.take() {
                p.push(' ');
                p.push_str(t.trim_end_matches('\\'));
                if t.ends_with('\\') {
                    pending = Some(p);
                } else {
                    out.push(p);
                }
                continue;
            }
            let Some(at) = t.find("corral ").filter(|&i| i == 0 || t[..i].trim_end().ends_with('|')) else {
                continue;
            };
            let cmd = t[at..].to_string();
            if cmd.ends_with('\\') {
                pending = Some(cmd.trim_end_matches('\\').to_string());
            } else {
                out.push(cmd);
            }
        }
        out
    }

    /// Shell words up to a comment, pipe, redirection or `&`, with '…' and "…" quoting.
    fn words(cmd: &str) -> Vec<String> {
        let (mut out, mut cur, mut quote, mut started) = (Vec::new(), String::new(), None, false);
        let mut chars = cmd.chars().peekable();
        while let Some(c) = chars.next() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some('"'), '\\') => cur.extend(chars.next()),
                (Some(_), c) => cur.push(c),
                (None, '\'' | '"') => (quote, started) = (Some(c), true),
                (None, '#' | '|' | '>' | '&') if !started => break,
                (None, c) if c.is_whitespace() => {
                    if started {
                        out.push(std::mem::take(&mut cur));
                        started = false;
                    }
                }
                (None, c) => (cur, started) = (format!("{cur}{c}"), true),
            }
        }
        if started {
            out.push(cur);
        }
        out
    }

    #[test]
    fn help_texts_are_wrapped_once() {
        let mut wrong = Vec::new();
        for (path, text) in after_helps() {
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                let indented = line.starts_with(' ');
                // Examples, tables and files keep their lines: short enough that clap never re-wraps them
                // on an 80-column terminal (a command split in two cannot be pasted).
                if indented && line.chars().count() > 80 {
                    wrong.push(format!("{path}: wider than 80 columns: {line}"));
                }
                // Prose is one line per paragraph, which clap wraps once: none is broken in the source,
                // where clap's wrapping would leave orphan words.
                let next = lines.get(i + 1).copied().unwrap_or("");
                if !indented
                    && !line.is_empty()
                    && !line.ends_with(['.', ':', ';', ')', '"'])
                    && next.starts_with(|c: char| c.is_lowercase())
                {
                    wrong.push(format!("{path}: a paragraph broken in the source after: {line}"));
                }
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn help_examples_are_complete_commands_that_parse() {
        let (mut checked, mut wrong) = (0, Vec::new());
        for (path, text) in after_helps() {
            for example in examples(&text) {
                if let Err(e) = Cli::try_parse_from(words(&example)) {
                    let e = e.to_string();
                    wrong.push(format!("{path}: `{example}` does not parse: {}", e.lines().next().unwrap_or("")));
                }
                checked += 1;
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        assert!(checked > 80, "{checked} examples");
    }

    #[test]
    fn coap_clients_verbosity_levels_are_counts() {
        let args = |v: &[&str]| libcoap_verbosity(v.iter().map(std::ffi::OsString::from));
        let s = |v: &[&str]| v.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
        assert_eq!(args(&["corral", "get", "-v", "7", "coap://h/x"]), s(&["corral", "get", "-vv", "coap://h/x"]));
        assert_eq!(args(&["corral", "get", "-v6", "coap://h/x"]), s(&["corral", "get", "-v", "coap://h/x"]));
        assert_eq!(args(&["corral", "get", "coap://h/x", "-v", "9"]), s(&["corral", "get", "coap://h/x", "-vvv"]));
        assert_eq!(args(&["corral", "get", "coap://h/x", "-v", "4"]), s(&["corral", "get", "coap://h/x"]));
        // A count, and -v before anything that is not a level, stay as they are.
        assert_eq!(args(&["corral", "-vv", "get", "coap://h/x"]), s(&["corral", "-vv", "get", "coap://h/x"]));
        assert_eq!(args(&["corral", "get", "-v", "coap://h/x"]), s(&["corral", "get", "-v", "coap://h/x"]));
        assert_eq!(args(&["corral", "get", "-v", "12"]), s(&["corral", "get", "-v", "12"]));
        assert!(Cli::try_parse_from(args(&["corral", "get", "-v", "7", "coap://h/x"])).is_ok());
    }

    #[test]
    fn shell_words_for_examples() {
        assert_eq!(words("corral get 'coap://[::1]?rt=a' -v   # note"), ["corral", "get", "coap://[::1]?rt=a", "-v"]);
        assert_eq!(words(r#"corral post x -e "{\"a\":1}" > out"#), ["corral", "post", "x", "-e", r#"{"a":1}"#]);
        assert_eq!(words("corral serve --tcp &"), ["corral", "serve", "--tcp"]);
        let text = "Examples:\n  echo x | corral post coap://h/e -f -\n  corral link run -- \\\n      a ::: b\n";
        assert_eq!(examples(text), ["corral post coap://h/e -f -", "corral link run --  a ::: b"]);
    }
}
