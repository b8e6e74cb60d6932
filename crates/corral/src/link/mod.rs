//! `corral link`: an impaired IP link between two network namespaces, for real programs, on machines
//! without `tc netem` (containers, CI). Two TUN devices, one in each namespace, joined by corral, which
//! moves every packet between them through [`impair::Direction`]: loss (Bernoulli or Gilbert–Elliott, the
//! simulator's models), delay with jitter, a rate limit and reordering. Programs run unmodified on either
//! side and see a real lossy link: kernel TCP retransmits, libcoap retransmits. Needs root.

pub mod impair;

use crate::exit::{ExitCode, Failure};
use clap::{Args, Subcommand};
use corral_proto::Duration as CDuration;
use corral_sim::loss::LinkModel;
use impair::{Direction, Impairments};
use std::collections::BinaryHeap;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const AFTER_HELP: &str = "\
The server side lives in namespace A at 10.213.0.1 (and fd77::1), the client side in namespace B \
at 10.213.0.2 (fd77::2); every packet between them crosses corral, which applies the impairments \
to each direction independently. `run` starts the server command in A, waits --settle, runs the \
client command in B, then stops the server and removes the namespaces; its exit status is the \
client's, and a server command that fails during --settle fails the run (exit status 1).

Examples:
  corral link run --delay 50ms --loss 5% -- \\
      corral serve --bind 0.0.0.0:5683 ::: corral get coap://10.213.0.1/hello
  corral link run --delay 20ms --jitter 5ms --rate 1mbit --loss 2% --burst 4 \\
      -- coap-server-notls ::: coap-client-notls -B 30 coap://10.213.0.1/time
  corral link up --delay 100ms --loss 10%   # then: ip netns exec corral-a-PID …

Loss: --loss P% alone is independent per packet; with --burst N it is Gilbert–Elliott with mean \
bursts of N packets (the lab's `gilbert` model). Values take units: 50ms, 1s (a bare number other \
than 0 is refused: it meant milliseconds before); 1mbit, 250kbit; 5%, 0.05.
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
    /// One-way delay, each direction, e.g. 50ms or 1.5s.
    #[arg(long, value_name = "DURATION", default_value = "0ms", value_parser = parse_duration)]
    pub delay: Duration,
    /// Delay varies uniformly by ± this much, e.g. 5ms.
    #[arg(long, value_name = "DURATION", default_value = "0ms", value_parser = parse_duration)]
    pub jitter: Duration,
    /// Packet loss, each direction (e.g. 5% or 0.05).
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

/// `--delay`, `--jitter` and `--settle`: up to an hour; a bare number other than 0 is refused, since these
/// flags read it as milliseconds before durations were read as seconds everywhere.
fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::units::Range::up_to(crate::units::HOUR).was_millis().parse(s)
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
    fn impairments(&self) -> Impairments {
        let loss = match (self.loss, self.burst) {
            (0.0, _) => LinkModel::Perfect,
            (p, Some(b)) if b > 1.0 => LinkModel::bursty(p, b, 0.9),
            (p, _) => LinkModel::Bernoulli { p },
        };
        Impairments {
            delay: CDuration::from_micros(self.delay.as_micros() as u64),
            jitter: CDuration::from_micros(self.jitter.as_micros() as u64),
            loss,
            rate_bps: self.rate.unwrap_or(0),
            reorder: self.reorder,
        }
    }
}

/// The two namespaces and their TUN devices; removed when dropped.
struct Netns {
    a: String,
    b: String,
}

fn ip(args: &[&str]) -> Result<(), Failure> {
    let o = Command::new("ip").args(args).output().map_err(|e| Failure::other(format!("cannot run `ip`: {e}")))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(Failure::other(format!("`ip {}` failed: {}", args.join(" "), String::from_utf8_lossy(&o.stderr).trim())))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

/// Makes the namespaces and the TUN devices, moves one device into each and addresses them.
fn setup() -> Result<(Netns, tun::AsyncDevice, tun::AsyncDevice), Failure> {
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Err(Failure::other("corral link needs TUN devices (/dev/net/tun is missing)"));
    }
    let id = std::process::id();
    let ns = Netns { a: format!("corral-a-{id}"), b: format!("corral-b-{id}") };
    let mut devs = Vec::new();
    for (side, name, v4, v6) in
        [("a", &ns.a, "10.213.0.1/24", "fd77::1/64"), ("b", &ns.b, "10.213.0.2/24", "fd77::2/64")]
    {
        ip(&["netns", "add", name]).map_err(|e| {
            Failure::other(format!("{} (corral link needs root: network namespaces and TUN devices)", e.message))
        })?;
        let dev_name = format!("crl{side}{}", id % 100_000);
        let mut config = tun::Configuration::default();
        config.tun_name(&dev_name);
        let dev = tun::create_as_async(&config)
            .map_err(|e| Failure::other(format!("cannot create a TUN device (corral link needs root): {e}")))?;
        ip(&["link", "set", &dev_name, "netns", name])?;
        let exec = |args: &[&str]| {
            let mut full = vec!["netns", "exec", name.as_str(), "ip"];
            full.extend_from_slice(args);
            ip(&full)
        };
        exec(&["link", "set", "lo", "up"])?;
        exec(&["addr", "add", v4, "dev", &dev_name])?;
        exec(&["-6", "addr", "add", v6, "dev", &dev_name, "nodad"])?;
        exec(&["link", "set", &dev_name, "up"])?;
        devs.push(dev);
    }
    let b = devs.pop().expect("two devices");
    let a = devs.pop().expect("two devices");
    Ok((ns, a, b))
}

#[derive(PartialEq, Eq)]
struct Due(std::time::Instant, u64, Vec<u8>);

impl Ord for Due {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (o.0, o.1).cmp(&(self.0, self.1))
    }
}
impl PartialOrd for Due {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

#[derive(Default)]
struct Counters {
    forwarded: AtomicU64,
    forwarded_bytes: AtomicU64,
    dropped: AtomicU64,
    reordered: AtomicU64,
}

/// Moves packets from `from` to `to` through one direction's impairments, until the task is aborted.
async fn pump(from: Arc<tun::AsyncDevice>, to: Arc<tun::AsyncDevice>, mut dir: Direction, counters: Arc<Counters>) {
    let start = std::time::Instant::now();
    let mut queue: BinaryHeap<Due> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut buf = vec![0u8; 65536];
    loop {
        let next = queue.peek().map(|d| d.0);
        let sleep = async {
            match next {
                Some(t) => tokio::time::sleep_until(t.into()).await,
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            r = from.recv(&mut buf) => {
                let Ok(n) = r else { return };
                let now = corral_proto::Instant::from_micros(start.elapsed().as_micros() as u64);
                if let Some(at) = dir.admit(now, n) {
                    seq += 1;
                    let at = start + Duration::from_micros(at.as_micros());
                    queue.push(Due(at, seq, buf[..n].to_vec()));
                }
                counters.forwarded.store(dir.forwarded, Ordering::Relaxed);
                counters.forwarded_bytes.store(dir.forwarded_bytes, Ordering::Relaxed);
                counters.dropped.store(dir.dropped, Ordering::Relaxed);
                counters.reordered.store(dir.reordered, Ordering::Relaxed);
            }
            _ = sleep => {
                let now = std::time::Instant::now();
                while queue.peek().is_some_and(|d| d.0 <= now) {
                    let Due(_, _, p) = queue.pop().expect("peeked");
                    let _ = to.send(&p).await;
                }
            }
        }
    }
}

fn rt() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::other(format!("cannot start the runtime: {e}")))
}

/// Starts the two pumps; returns their counters (A→B, B→A) and the tasks.
fn start(
    a: tun::AsyncDevice,
    b: tun::AsyncDevice,
    args: &ImpairArgs,
) -> ([Arc<Counters>; 2], Vec<tokio::task::JoinHandle<()>>) {
    let (a, b) = (Arc::new(a), Arc::new(b));
    let ab = Arc::new(Counters::default());
    let ba = Arc::new(Counters::default());
    let cfg = args.impairments();
    let tasks = vec![
        tokio::spawn(pump(a.clone(), b.clone(), Direction::new(cfg.clone(), args.seed, 1), ab.clone())),
        tokio::spawn(pump(b, a, Direction::new(cfg, args.seed, 2), ba.clone())),
    ];
    ([ab, ba], tasks)
}

fn report(args: &ImpairArgs, c: &[Arc<Counters>; 2]) {
    let get = |c: &Counters| {
        serde_json::json!({
            "forwarded": c.forwarded.load(Ordering::Relaxed),
            "forwarded_bytes": c.forwarded_bytes.load(Ordering::Relaxed),
            "dropped": c.dropped.load(Ordering::Relaxed),
            "reordered": c.reordered.load(Ordering::Relaxed),
        })
    };
    if args.json {
        say!("{}", serde_json::json!({ "server_to_client": get(&c[0]), "client_to_server": get(&c[1]) }));
    }
}

pub fn run(args: LinkArgs) -> Result<(), Failure> {
    match args.command {
        LinkCommand::Up(a) => up(a),
        LinkCommand::Run(r) => run_pair(r),
    }
}

fn up(args: ImpairArgs) -> Result<(), Failure> {
    let rt = rt()?;
    let _in_runtime = rt.enter(); // the TUN devices register with the runtime's reactor
    let (ns, a, b) = setup()?;
    rt.block_on(async {
        let (counters, tasks) = start(a, b, &args);
        out!(
            "corral link: {} (10.213.0.1, fd77::1) <-> {} (10.213.0.2, fd77::2); Ctrl-C removes them\n  ip netns exec {} <server>\n  ip netns exec {} <client>",
            ns.a, ns.b, ns.a, ns.b
        );
        crate::wait_for_signal().await;
        for t in tasks {
            t.abort();
        }
        report(&args, &counters);
    });
    drop(ns);
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
    let rt = rt()?;
    let _in_runtime = rt.enter(); // the TUN devices register with the runtime's reactor
    let (ns, a, b) = setup()?;
    let status = rt.block_on(async {
        let (counters, tasks) = start(a, b, &r.impair);
        let mut srv = tokio::process::Command::new("ip")
            .args(["netns", "exec", &ns.a])
            .args(server)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| Failure::other(format!("cannot start the server command: {e}")))?;
        // The server gets --settle to start; one that exits with an error meanwhile (a command that does
        // not exist, a port in use) fails the run before the client is started against nothing.
        tokio::select! {
            s = srv.wait() => match s {
                Ok(s) if !s.success() => {
                    for t in &tasks {
                        t.abort();
                    }
                    return Err(Failure::other(format!(
                        "the server command `{}` failed to start ({}); the client was not run",
                        server.join(" "),
                        describe(s)
                    )));
                }
                Ok(_) => tracing::info!("the server command exited during --settle with status 0"),
                Err(e) => return Err(Failure::other(format!("the server command: {e}"))),
            },
            _ = tokio::time::sleep(r.settle) => {}
        }
        let mut cli = tokio::process::Command::new("ip")
            .args(["netns", "exec", &ns.b])
            .args(client)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| Failure::other(format!("cannot start the client command: {e}")))?;
        // Ctrl-C or SIGTERM stops both programs and still removes the namespaces.
        let status = tokio::select! {
            s = cli.wait() => s.map_err(|e| Failure::other(format!("the client command: {e}")))?,
            _ = crate::wait_for_signal() => {
                let _ = cli.kill().await;
                let _ = srv.kill().await;
                for t in &tasks {
                    t.abort();
                }
                return Err(Failure::new(ExitCode::Other, "interrupted; the namespaces are removed"));
            }
        };
        let _ = srv.kill().await;
        for t in tasks {
            t.abort();
        }
        report(&r.impair, &counters);
        Ok::<_, Failure>(status)
    })?;
    drop(ns);
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

/// An exit status in words: `status 2`, `signal 9`.
fn describe(s: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => s.to_string(),
    }
}
