//! `corral link`: an impaired IP link between two network namespaces, for real programs, on machines
//! without `tc netem`. The link itself is corral-link's; this verb is its arguments, its output (the
//! namespaces of `up`, the counters of `--json`) and its exit codes (the client's status is the run's).

use crate::cli::exit::{ExitCode, Failure};
use clap::{Args, Subcommand};
use corral_link::impair::Impairments;
use corral_link::{Config, Link, LinkCounts, LinkError, Toward};
use std::time::Duration;

pub const AFTER_HELP: &str = "\
The server side lives in namespace A at 10.213.0.1 (and fd77::1), the client side in namespace B \
at 10.213.0.2 (fd77::2); every packet between them crosses corral, which applies the impairments \
to each direction independently (or, with --direction to-server, to the client's packets only, \
as `tc netem` on the client's interface does). `run` starts the server command in A, waits --settle, runs the \
client command in B, then stops the server and removes the namespaces; its exit status is the \
client's, and a server command that fails during --settle fails the run (exit status 1).

Examples:
  corral link run --delay 50ms --loss 5% -- \\
      corral serve --bind 0.0.0.0:5683 ::: corral get coap://10.213.0.1/hello
  corral link run --delay 20ms --jitter 5ms --rate 1mbit --loss 2% --burst 4 \\
      -- coap-server-notls ::: coap-client-notls -B 30 coap://10.213.0.1/time
  corral link up --delay 100ms --loss 10%   # then: ip netns exec corral-a-PID …
  corral link run --delay 100ms --direction to-server -- …  # client side only

Loss: --loss P% alone is independent per packet; with --burst N it is Gilbert–Elliott with mean \
bursts of N packets (the lab's `gilbert` model). Values take units: 50ms, 1s (a bare number is \
seconds); 1mbit, 250kbit; 5%, 0.05. The run's standard output is the client's; the server's goes to \
standard error.
Needs root (network namespaces and TUN devices).";

#[derive(Args, Debug)]
pub struct LinkArgs {
    #[command(subcommand)]
    pub command: LinkCommand,
}

#[derive(Subcommand, Debug)]
pub enum LinkCommand {
    /// Run a server and a client on either side of an impaired link.
    #[command(after_help = AFTER_HELP)]
    Run(RunArgs),
    /// Bring the link up and keep it until Ctrl-C.
    #[command(after_help = AFTER_HELP)]
    Up(ImpairArgs),
}

#[derive(Args, Debug, Clone)]
pub struct ImpairArgs {
    /// One-way delay of each impaired direction (see --direction), e.g. 50ms or 1.5s.
    #[arg(long, value_name = "DURATION", default_value = "0ms", value_parser = parse_duration)]
    pub delay: Duration,
    /// Delay varies uniformly by ± this much, e.g. 5ms.
    #[arg(long, value_name = "DURATION", default_value = "0ms", value_parser = parse_duration)]
    pub jitter: Duration,
    /// Packet loss of each impaired direction (e.g. 5% or 0.05).
    #[arg(long, default_value = "0%", value_parser = parse_fraction)]
    pub loss: f64,
    /// Mean loss burst in packets: Gilbert–Elliott loss instead of independent.
    #[arg(long, value_name = "PACKETS")]
    pub burst: Option<f64>,
    /// Bit rate of each direction (e.g. 1mbit); unlimited by default.
    #[arg(long, value_parser = parse_rate)]
    pub rate: Option<u64>,
    /// Share of packets that skip the delay and overtake those in flight (e.g. 1%).
    #[arg(long, default_value = "0%", value_parser = parse_fraction)]
    pub reorder: f64,
    /// Seed of the loss, jitter and reordering decisions.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Which directions the impairments apply to: both, or only to-server (client → server: what `tc
    /// netem` on the client's interface does) or to-client.
    #[arg(long, value_name = "WHICH", default_value = "both", value_parser = parse_toward)]
    pub direction: Toward,
    /// At the end, print the link's counters as JSON on stderr.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub impair: ImpairArgs,
    /// How long the server gets to start before the client runs, e.g. 500ms or 2s. A server that exits
    /// with an error meanwhile fails the run.
    #[arg(long, value_name = "DURATION", default_value = "500ms", value_parser = parse_duration)]
    pub settle: Duration,
    /// SERVER COMMAND… ::: CLIENT COMMAND…
    #[arg(last = true, required = true, value_name = "SERVER ::: CLIENT")]
    pub commands: Vec<String>,
}

/// `--delay`, `--jitter` and `--settle`: up to an hour (a bare number is seconds).
fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::cli::units::Range::up_to(crate::cli::units::HOUR).parse(s)
}

fn parse_fraction(s: &str) -> Result<f64, String> {
    let v = match s.trim().strip_suffix('%') {
        Some(p) => p.parse::<f64>().map(|x| x / 100.0),
        None => s.trim().parse::<f64>(),
    }
    .map_err(|_| format!("`{s}`: a share such as 5% or 0.05"))?;
    if (0.0..1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("`{s}`: between 0% and 100% (exclusive)"))
    }
}

fn parse_toward(s: &str) -> Result<Toward, String> {
    match s {
        "both" => Ok(Toward::Both),
        "to-server" => Ok(Toward::Server),
        "to-client" => Ok(Toward::Client),
        _ => Err(format!("`{s}`: both, to-server (client → server only) or to-client")),
    }
}

fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let bad = || format!("`{s}`: a rate such as 1mbit, 250kbit or 10000bit");
    let (num, mult) = if let Some(n) = t.strip_suffix("mbit") {
        (n, 1_000_000.0)
    } else if let Some(n) = t.strip_suffix("kbit") {
        (n, 1_000.0)
    } else if let Some(n) = t.strip_suffix("bit") {
        (n, 1.0)
    } else {
        return Err(bad());
    };
    let v: f64 = num.parse().map_err(|_| bad())?;
    if v <= 0.0 {
        return Err(bad());
    }
    Ok((v * mult) as u64)
}

impl ImpairArgs {
    fn config(&self) -> Config {
        let impairments =
            Impairments::new(self.delay, self.jitter, self.loss, self.burst, self.rate.unwrap_or(0), self.reorder);
        Config { impairments, seed: self.seed, toward: self.direction }
    }
}

/// A link that cannot come up or a run that cannot complete: one line, exit code "other".
fn failure(e: LinkError) -> Failure {
    match e {
        LinkError::Interrupted => Failure::new(ExitCode::Other, e.to_string()),
        e => Failure::other(e.to_string()),
    }
}

fn report(args: &ImpairArgs, c: LinkCounts) {
    let get = |d: corral_link::DirectionCounts| {
        serde_json::json!({
            "forwarded": d.forwarded,
            "forwarded_bytes": d.forwarded_bytes,
            "dropped": d.dropped,
            "reordered": d.reordered,
        })
    };
    if args.json {
        say!(
            "{}",
            serde_json::json!({ "server_to_client": get(c.server_to_client), "client_to_server": get(c.client_to_server) })
        );
    }
}

pub fn run(args: LinkArgs) -> Result<(), Failure> {
    match args.command {
        LinkCommand::Up(a) => up(a),
        LinkCommand::Run(r) => run_pair(r),
    }
}

fn up(args: ImpairArgs) -> Result<(), Failure> {
    let rt = corral_link::runtime().map_err(failure)?;
    let _in_runtime = rt.enter(); // the TUN devices register with the runtime's reactor
    let link = Link::up(&args.config()).map_err(failure)?;
    rt.block_on(async {
        let (a, b) = link.namespaces();
        out!(
            "corral link: {a} (10.213.0.1, fd77::1) <-> {b} (10.213.0.2, fd77::2); Ctrl-C removes them\n  ip netns exec {a} <server>\n  ip netns exec {b} <client>"
        );
        crate::cli::wait_for_signal().await;
    });
    let counts = link.counts();
    drop(link);
    report(&args, counts);
    Ok(())
}

fn run_pair(r: RunArgs) -> Result<(), Failure> {
    let split = r
        .commands
        .iter()
        .position(|c| c == ":::")
        .ok_or_else(|| Failure::usage("give both commands: corral link run [options] -- SERVER … ::: CLIENT …"))?;
    let (server, client) = (&r.commands[..split], &r.commands[split + 1..]);
    if server.is_empty() || client.is_empty() {
        return Err(Failure::usage("both the server and the client command are needed, around `:::`"));
    }
    let rt = corral_link::runtime().map_err(failure)?;
    let _in_runtime = rt.enter(); // the TUN devices register with the runtime's reactor
    let link = Link::up(&r.impair.config()).map_err(failure)?;
    // Ctrl-C or SIGTERM stops both programs and still removes the namespaces.
    let status = rt
        .block_on(link.run_pair(server, client, corral_link::Settle::Fixed(r.settle), crate::cli::wait_for_signal()))
        .map_err(failure)?;
    let counts = link.counts();
    drop(link);
    report(&r.impair, counts);
    // The client's exit status is the run's (a signal as a shell reports it: 128 + its number).
    match status.code() {
        Some(0) => Ok(()),
        Some(c) => Err(Failure::passing_through(c, format!("the client command exited with status {c}"))),
        None => {
            use std::os::unix::process::ExitStatusExt;
            let sig = status.signal().unwrap_or(0);
            Err(Failure::passing_through(128 + sig, format!("the client command was killed by signal {sig}")))
        }
    }
}
