//! An impaired IP link between two network namespaces, for real programs, on machines without `tc netem`
//! (containers, CI). Two TUN devices, one in each namespace, joined by this crate, which moves every packet
//! between them through [`impair::Direction`]: loss (Bernoulli or Gilbert–Elliott, the simulator's models),
//! delay with jitter, a rate limit and reordering. Programs run unmodified on either side and see a real
//! lossy link: kernel TCP retransmits, libcoap retransmits. Needs root.
//!
//! # What it owns
//! The namespaces and TUN devices of one link ([`Link`], removed when it is dropped), the two pumps that
//! carry packets through the impairments, their counters ([`LinkCounts`]), and running a server and a
//! client on either side ([`Link::run_pair`], [`run`] for callers without a runtime: the lab's emulated
//! family). The `corral link` verb is this crate behind arguments, output and exit codes.
//!
//! # What it must never do
//! Print or exit: what happened comes back as counts, an exit status or a [`LinkError`]. It is a runtime
//! crate (tokio, TUN devices): the sans-IO crates never depend on it.

pub mod impair;

use corral_proto::Duration as CDuration;
use corral_sim::loss::LinkModel;
use impair::{Direction, Impairments};
use std::collections::BinaryHeap;
use std::fmt;
use std::future::Future;
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The server side's IPv4 address (namespace A); the client side is 10.213.0.2 (namespace B).
pub const SERVER_V4: &str = "10.213.0.1";

/// What a link does to each direction, and the seed of its decisions.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub impairments: Impairments,
    /// Seed of the loss, jitter and reordering decisions (each direction draws its own stream).
    pub seed: u64,
    /// Which directions the impairments apply to; the other carries packets untouched.
    pub toward: Toward,
}

/// The directions a link impairs: both (each with its own draws), or one — what `tc netem` on one
/// interface does (it shapes what leaves that interface, nothing that arrives).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Toward {
    #[default]
    Both,
    /// Client → server only: netem on the client's interface.
    Server,
    /// Server → client only: netem on the server's interface.
    Client,
}

impl Impairments {
    /// The impairments of `corral link`'s flags: `loss` alone is independent per packet; with a mean
    /// `burst` of more than one packet it is Gilbert–Elliott (the lab's `gilbert` model); 0 is no loss.
    /// `rate_bps` 0 is unlimited.
    pub fn new(delay: Duration, jitter: Duration, loss: f64, burst: Option<f64>, rate_bps: u64, reorder: f64) -> Self {
        let loss = match (loss, burst) {
            (0.0, _) => LinkModel::Perfect,
            (p, Some(b)) if b > 1.0 => LinkModel::bursty(p, b, 0.9),
            (p, _) => LinkModel::Bernoulli { p },
        };
        Impairments {
            delay: CDuration::from_micros(delay.as_micros() as u64),
            jitter: CDuration::from_micros(jitter.as_micros() as u64),
            loss,
            rate_bps,
            reorder,
        }
    }
}

/// Why a link could not be set up or a run could not complete: the machine's fault or the commands'.
#[derive(Debug)]
#[non_exhaustive]
pub enum LinkError {
    /// `/dev/net/tun` is missing.
    NoTun,
    /// `ip` could not be run at all.
    NoIp(std::io::Error),
    /// `ip netns add` failed (usually: not root).
    Namespace { command: String, stderr: String },
    /// Another `ip` command failed.
    Ip { command: String, stderr: String },
    /// A TUN device could not be created (usually: not root).
    Tun(tun::Error),
    /// The tokio runtime could not be started.
    Runtime(std::io::Error),
    /// The server or the client command could not be started or waited for; `context` says which.
    Process { context: &'static str, source: std::io::Error },
    /// The server command exited with an error during the settling time; the client was not run.
    ServerFailed { command: String, status: ExitStatus },
    /// The run was interrupted (Ctrl-C, SIGTERM); both programs are stopped and the namespaces removed.
    Interrupted,
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkError::NoTun => f.write_str("corral link needs TUN devices (/dev/net/tun is missing)"),
            LinkError::NoIp(e) => write!(f, "cannot run `ip`: {e}"),
            LinkError::Namespace { command, stderr } => write!(
                f,
                "`ip {command}` failed: {stderr} (corral link needs root: network namespaces and TUN devices)"
            ),
            LinkError::Ip { command, stderr } => write!(f, "`ip {command}` failed: {stderr}"),
            LinkError::Tun(e) => write!(f, "cannot create a TUN device (corral link needs root): {e}"),
            LinkError::Runtime(e) => write!(f, "cannot start the runtime: {e}"),
            LinkError::Process { context, source } => write!(f, "{context}: {source}"),
            LinkError::ServerFailed { command, status } => write!(
                f,
                "the server command `{command}` failed to start ({}); the client was not run",
                describe(*status)
            ),
            LinkError::Interrupted => f.write_str("interrupted; the namespaces are removed"),
        }
    }
}

impl std::error::Error for LinkError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LinkError::NoIp(e) | LinkError::Runtime(e) | LinkError::Process { source: e, .. } => Some(e),
            LinkError::Tun(e) => Some(e),
            _ => None,
        }
    }
}

/// An exit status in words: `exit status 2`, `killed by signal 9`.
fn describe(s: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => s.to_string(),
    }
}

/// The two namespaces and their TUN devices; removed when dropped.
struct Netns {
    a: String,
    b: String,
}

fn ip(args: &[&str]) -> Result<(), LinkError> {
    let o = Command::new("ip").args(args).output().map_err(LinkError::NoIp)?;
    if o.status.success() {
        Ok(())
    } else {
        Err(LinkError::Ip { command: args.join(" "), stderr: String::from_utf8_lossy(&o.stderr).trim().to_string() })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

/// Links made by this process so far: the first one's names carry the process id alone
/// (`corral-a-PID`), a later one's also its number, so that two links of one process never share a name.
static LINKS: AtomicU64 = AtomicU64::new(0);

/// Makes the namespaces and the TUN devices, moves one device into each and addresses them.
fn setup() -> Result<(Netns, tun::AsyncDevice, tun::AsyncDevice), LinkError> {
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Err(LinkError::NoTun);
    }
    let id = std::process::id();
    let n = LINKS.fetch_add(1, Ordering::Relaxed);
    let suffix = if n == 0 { String::new() } else { format!("-{n}") };
    let ns = Netns { a: format!("corral-a-{id}{suffix}"), b: format!("corral-b-{id}{suffix}") };
    let mut devs = Vec::new();
    for (side, name, v4, v6) in
        [("a", &ns.a, "10.213.0.1/24", "fd77::1/64"), ("b", &ns.b, "10.213.0.2/24", "fd77::2/64")]
    {
        ip(&["netns", "add", name]).map_err(|e| match e {
            LinkError::Ip { command, stderr } => LinkError::Namespace { command, stderr },
            e => e,
        })?;
        // At most 15 bytes (IFNAMSIZ): "crl", the side, five digits of the process id, the link's number.
        let dev_name =
            format!("crl{side}{}{}", id % 100_000, if n == 0 { String::new() } else { (n % 1000).to_string() });
        let mut config = tun::Configuration::default();
        config.tun_name(&dev_name);
        let dev = tun::create_as_async(&config).map_err(LinkError::Tun)?;
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

impl Counters {
    fn load(&self) -> DirectionCounts {
        DirectionCounts {
            forwarded: self.forwarded.load(Ordering::Relaxed),
            forwarded_bytes: self.forwarded_bytes.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            reordered: self.reordered.load(Ordering::Relaxed),
        }
    }
}

/// What one direction of the link carried so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectionCounts {
    pub forwarded: u64,
    /// Bytes of the packets forwarded (IP headers included).
    pub forwarded_bytes: u64,
    pub dropped: u64,
    pub reordered: u64,
}

/// What the link carried both ways so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkCounts {
    /// Namespace A (the server's) to B.
    pub server_to_client: DirectionCounts,
    /// Namespace B (the client's) to A.
    pub client_to_server: DirectionCounts,
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

/// The runtime a link runs on: two worker threads, timers and I/O.
pub fn runtime() -> Result<tokio::runtime::Runtime, LinkError> {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(LinkError::Runtime)
}

/// One link that is up: its namespaces, TUN devices and the two pumps between them. Dropping it stops the
/// pumps and removes the namespaces.
pub struct Link {
    /// Counters A→B, B→A.
    counters: [Arc<Counters>; 2],
    tasks: Vec<tokio::task::JoinHandle<()>>,
    ns: Netns,
}

impl Link {
    /// Makes the namespaces and devices and starts carrying packets. Must be called within a tokio
    /// runtime with I/O and timers enabled ([`runtime`]): the TUN devices register with its reactor.
    pub fn up(cfg: &Config) -> Result<Link, LinkError> {
        let (ns, a, b) = setup()?;
        let (a, b) = (Arc::new(a), Arc::new(b));
        let ab = Arc::new(Counters::default());
        let ba = Arc::new(Counters::default());
        let none = Impairments::new(Duration::ZERO, Duration::ZERO, 0.0, None, 0, 0.0);
        let (to_client, to_server) = match cfg.toward {
            Toward::Both => (cfg.impairments.clone(), cfg.impairments.clone()),
            Toward::Server => (none, cfg.impairments.clone()),
            Toward::Client => (cfg.impairments.clone(), none),
        };
        let tasks = vec![
            tokio::spawn(pump(a.clone(), b.clone(), Direction::new(to_client, cfg.seed, 1), ab.clone())),
            tokio::spawn(pump(b, a, Direction::new(to_server, cfg.seed, 2), ba.clone())),
        ];
        Ok(Link { counters: [ab, ba], tasks, ns })
    }

    /// The server's namespace (A, 10.213.0.1, fd77::1) and the client's (B, 10.213.0.2, fd77::2).
    pub fn namespaces(&self) -> (&str, &str) {
        (&self.ns.a, &self.ns.b)
    }

    /// What the link carried so far.
    pub fn counts(&self) -> LinkCounts {
        LinkCounts { server_to_client: self.counters[0].load(), client_to_server: self.counters[1].load() }
    }

    /// Starts `server` in namespace A, gives it `settle` to start (one that exits with an error meanwhile
    /// — a command that does not exist, a port in use — fails the run before the client is started against
    /// nothing), runs `client` in namespace B, then stops the server: the client's exit status. When
    /// `interrupt` completes first, both programs are stopped: [`LinkError::Interrupted`].
    pub async fn run_pair(
        &self,
        server: &[String],
        client: &[String],
        settle: Settle,
        interrupt: impl Future<Output = ()>,
    ) -> Result<ExitStatus, LinkError> {
        let mut srv = spawn_in(&self.ns.a, server, Side::Server)?;
        let (started, ns) = (srv.id(), self.ns.a.clone());
        let settle = async move {
            match settle {
                Settle::Fixed(d) => tokio::time::sleep(d).await,
                Settle::UntilListening(most) => {
                    let deadline = tokio::time::Instant::now() + most;
                    while tokio::time::Instant::now() < deadline && !started.is_some_and(|pid| listening(pid, &ns)) {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        };
        tokio::select! {
            s = srv.wait() => match s {
                Ok(s) if !s.success() => {
                    return Err(LinkError::ServerFailed { command: server.join(" "), status: s });
                }
                Ok(_) => tracing::info!("the server command exited during --settle with status 0"),
                Err(e) => return Err(LinkError::Process { context: "the server command", source: e }),
            },
            _ = settle => {}
        }
        let mut cli = spawn_in(&self.ns.b, client, Side::Client)?;
        let status = tokio::select! {
            s = cli.wait() => s.map_err(|e| LinkError::Process { context: "the client command", source: e })?,
            _ = interrupt => {
                let _ = cli.kill().await;
                let _ = srv.kill().await;
                return Err(LinkError::Interrupted);
            }
        };
        let _ = srv.kill().await;
        Ok(status)
    }
}

/// How long [`Link::run_pair`] gives the server before it starts the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// This long, whatever the server does (`corral link run --settle`: the user knows their server).
    Fixed(Duration),
    /// Until a socket listens in the server's namespace (a bound UDP socket or a TCP socket in LISTEN:
    /// the namespace is the server's alone), at most this long: the lab's servers bind at once, and a
    /// fixed second of each point's real time was a second of nothing.
    UntilListening(Duration),
}

/// Whether process `pid` is in namespace `ns` (named under /run/netns) and that namespace has a bound UDP
/// socket or a listening TCP socket (`/proc/PID/net/{udp,udp6,tcp,tcp6}`: a header line, then one line per
/// socket; TCP's fourth field is its state, `0A` for LISTEN). Until `ip netns exec` has entered the
/// namespace, `/proc/PID/net` shows the parent's, whose sockets say nothing about the server.
fn listening(pid: u32, ns: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(want) = std::fs::metadata(format!("/run/netns/{ns}")).map(|m| m.ino()) else { return false };
    let entered =
        std::fs::read_link(format!("/proc/{pid}/ns/net")).is_ok_and(|l| l.to_string_lossy() == format!("net:[{want}]"));
    if !entered {
        return false;
    }
    let table = |name: &str| std::fs::read_to_string(format!("/proc/{pid}/net/{name}")).unwrap_or_default();
    let udp = ["udp", "udp6"].iter().any(|t| table(t).lines().nth(1).is_some());
    let tcp =
        ["tcp", "tcp6"].iter().any(|t| table(t).lines().skip(1).any(|l| l.split_whitespace().nth(3) == Some("0A")));
    udp || tcp
}

/// Which end of [`Link::run_pair`] a command is.
#[derive(Clone, Copy)]
enum Side {
    Server,
    Client,
}

/// Starts `command` in namespace `ns`; it is killed if dropped. The client's output is the run's; the
/// server's standard output (its banner, suggestions, a log) goes to standard error, so that what a
/// script reads from the run is the client's alone.
fn spawn_in(ns: &str, command: &[String], side: Side) -> Result<tokio::process::Child, LinkError> {
    let mut cmd = tokio::process::Command::new("ip");
    cmd.args(["netns", "exec", ns]).args(command).kill_on_drop(true);
    let context = match side {
        Side::Server => {
            cmd.stdout(std::io::stderr());
            "cannot start the server command"
        }
        Side::Client => "cannot start the client command",
    };
    cmd.spawn().map_err(|e| LinkError::Process { context, source: e })
}

impl Drop for Link {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// For a caller without a runtime (the lab): brings a link up on a runtime of its own, runs `server` and
/// `client` on either side as [`Link::run_pair`] does (no interruption), and takes it down: the client's
/// exit status and what the link carried by the time the client ended.
pub fn run(
    cfg: &Config,
    server: &[String],
    client: &[String],
    settle: Settle,
) -> Result<(ExitStatus, LinkCounts), LinkError> {
    let rt = runtime()?;
    let _in_runtime = rt.enter(); // the TUN devices register with the runtime's reactor
    let link = Link::up(cfg)?;
    let status = rt.block_on(link.run_pair(server, client, settle, std::future::pending()))?;
    let counts = link.counts();
    drop(link);
    Ok((status, counts))
}
