//! `[emulated]`: seed 004's experiment with real programs, run as the paper ran it. For each point an
//! emulated link joins two network namespaces, a server runs in one, a client in the other for the point's
//! duration, and the link counts the bytes it carried both ways — seed 004's "cumulative bytes received
//! over the period … divided by" the period (its Wireshark capture saw both directions on the client).
//!
//! The paper's procedure, from its text and its repository (github.com/Sujaydas/IoT, CoAP-HTTP_Performance:
//! the clients' code and the Wireshark captures of every row):
//! - CoAP: its changed coap-client sends NON GETs from one socket on a timer and never waits for an answer
//!   — the capture `without_impairement.pcapng` has 319 GETs in 64 s, one source port, a median gap of
//!   205 ms, and under 10 % loss the lost GETs' message IDs are simply missing. The `open` sender does that
//!   (a Python loop on a UDP socket, [`OPEN_LOOP_COAP`]); `closed` is `corral get -N` in a shell loop, which
//!   waits for each answer (the lab's procedure before issue 29, kept as a sensitivity variant).
//! - HTTP: `py_client.py` — `requests.get` of a 4-byte index.html (a new TCP connection each time), then
//!   `sleep(0.02)`, in a loop ([`PAPER_HTTP_CLIENT`]); the server was Apache, here `python3 -m http.server`.
//! - Impairments: `tc netem` on one interface, the client's (the capture shows the GETs lost before it and
//!   the answers arriving 0.3 ms after the delayed GETs): `direction = "to-server"`.
//!
//! # What it owns
//! The programs of each scheme and the rows of a point. The link is corral-link's library, behind one seam,
//! [`run_link`] (it needs root). The CoAP server (and the closed-loop client) is `corral serve` (`corral
//! get`) from the `corral` executable that is running the lab, so that scheme refuses to run from any other
//! program (a test binary, say). Real time: a point takes its `duration_s`, and its numbers differ from run
//! to run.

use crate::error::{EmulatedError, RunError};
use crate::harness::PointRun;
use crate::record::{EmulatedFacts, Facts, LinkRow, NodeRole, NodeRow, PointResult, PointRow, QueryRow};
use crate::scenario::EmulatedSpec;
use corral_link::impair::Impairments;
use corral_link::{Config, DirectionCounts, LinkCounts, Settle, Toward};
use std::path::Path;
use std::time::Duration;

/// The server's address inside the link's namespaces.
const SERVER: &str = corral_link::SERVER_V4;

/// Runs one point (real time).
pub fn run(em: &EmulatedSpec, index: usize, seed: u64) -> Result<PointRun, RunError> {
    let (delay_ms, loss) = em.applied()?;
    let dir = std::env::temp_dir().join(format!("corral-emulated-{}-{index}", std::process::id()));
    let io = |path: &Path, source| EmulatedError::Io { path: path.to_path_buf(), source };
    std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
    let body: String = (0..em.http_bytes).map(|i| (b'a' + (i % 26) as u8) as char).collect();
    let file = dir.join("index.html");
    std::fs::write(&file, body).map_err(|e| io(&file, e))?;
    let toward = if em.direction == "both" { Toward::Both } else { Toward::Server };
    let programs = programs(em, &dir, seed).map(|(server, client)| (quiet(server), quiet(client)));
    let counts = programs.and_then(|(server, client)| {
        run_link(&LinkRun { delay_ms, loss, toward, seed: seed % 1_000_000, server, client })
    });
    let _ = std::fs::remove_dir_all(&dir);
    Ok(PointRun { result: rows(em, index, seed, &counts?), trace: None })
}

/// The `corral` executable running the lab: the CoAP scheme's programs.
fn corral_executable() -> Result<String, EmulatedError> {
    let corral = std::env::current_exe().map_err(EmulatedError::Executable)?;
    if corral.file_stem().and_then(|s| s.to_str()) != Some("corral") {
        return Err(EmulatedError::NotCorral);
    }
    Ok(corral.to_string_lossy().into_owned())
}

/// The paper's CoAP client as its capture shows it: from one UDP socket, a NON GET (no token, the message ID
/// counting up) every `interval` seconds on a fixed schedule from its own start, answers read and dropped,
/// never waited for; after the last GET it reads answers for one more interval, then exits (so a point's
/// count of GETs is its duration over the interval, not what the start-up of Python left of it).
/// Arguments: host, port, Uri-Path segment, interval (s), duration (s), first message ID.
pub const OPEN_LOOP_COAP: &str = r#"
import select, socket, sys, time
host, port, seg = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
interval, duration, mid = float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]) & 0xFFFF
opt = bytes([0xB0 | len(seg)]) + seg if 0 < len(seg) < 13 else b""
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setblocking(False)
def drain(until):
    while True:
        wait = until - time.monotonic()
        if wait <= 0:
            return
        if select.select([s], [], [], wait)[0]:
            try:
                s.recv(2048)
            except OSError:
                pass
start, k = time.monotonic(), 0
while k * interval < duration:
    drain(start + k * interval)
    try:
        s.sendto(bytes([0x50, 0x01, mid >> 8, mid & 0xFF]) + opt, (host, port))
    except OSError:
        pass
    mid, k = (mid + 1) & 0xFFFF, k + 1
drain(time.monotonic() + interval)
"#;

/// The paper's `py_client.py`: a GET on a new connection, the body read, then a pause, in a loop (with
/// urllib when the `requests` package is absent) — for `duration` seconds from its own start, the GET in
/// flight at the end completed. Arguments: URL, pause (s), duration (s).
pub const PAPER_HTTP_CLIENT: &str = r#"
import sys, time
url, pause, duration = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
try:
    import requests
    get = lambda: requests.get(url).content
except ImportError:
    import urllib.request
    get = lambda: urllib.request.urlopen(url).read()
start = time.monotonic()
while time.monotonic() - start < duration:
    try:
        get()
    except Exception:
        pass
    time.sleep(pause)
"#;

/// The server and the client of the point's scheme.
fn programs(em: &EmulatedSpec, dir: &Path, seed: u64) -> Result<(Vec<String>, Vec<String>), EmulatedError> {
    let secs = em.duration_s.to_string();
    // The clients time themselves; `timeout` only ends one stuck past its duration (a GET whose SYNs are
    // all lost waits for TCP's connect timeout).
    let limit = (em.duration_s + 10).to_string();
    let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<String>>();
    Ok(match (em.protocol.as_str(), em.sender.as_str()) {
        ("http", _) => {
            let dir = dir.to_string_lossy();
            let url = format!("http://{SERVER}:8080/index.html");
            let pause = format!("{}", em.http_pause_ms as f64 / 1000.0);
            (
                owned(&["python3", "-m", "http.server", "8080", "--bind", "0.0.0.0", "--directory", &dir]),
                owned(&["timeout", &limit, "python3", "-c", PAPER_HTTP_CLIENT, &url, &pause, &secs]),
            )
        }
        (_, sender) => {
            let corral = corral_executable()?;
            let server = owned(&[&corral, "serve", "--bind", "0.0.0.0:5683", "-q"]);
            let client = if sender == "closed" {
                shell_loop(em.duration_s, &format!("{corral} get -N -B 5 coap://{SERVER}/test"))
            } else {
                let interval = format!("{}", em.interval_ms as f64 / 1000.0);
                let mid = (seed % 65_536).to_string();
                owned(&[
                    "timeout",
                    &limit,
                    "python3",
                    "-c",
                    OPEN_LOOP_COAP,
                    SERVER,
                    "5683",
                    "test",
                    &interval,
                    &secs,
                    &mid,
                ])
            };
            (server, client)
        }
    })
}

/// A program with its output discarded: the lab's own stdout is its report (`--json` is parsed by scripts),
/// and http.server logs every request on stderr.
fn quiet(cmd: Vec<String>) -> Vec<String> {
    let mut v: Vec<String> = vec!["sh".into(), "-c".into(), "exec \"$@\" >/dev/null 2>&1".into(), "sh".into()];
    v.extend(cmd);
    v
}

fn shell_loop(secs: u64, cmd: &str) -> Vec<String> {
    vec![
        "timeout".into(),
        secs.to_string(),
        "sh".into(),
        "-c".into(),
        format!("while true; do {cmd} >/dev/null 2>&1; done"),
    ]
}

/// One run over the emulated link: the impairment of each direction and the programs on either side (the
/// server's namespace is `SERVER`'s).
pub struct LinkRun {
    pub delay_ms: f64,
    pub loss: f64,
    /// The impaired directions (the other is untouched).
    pub toward: Toward,
    pub seed: u64,
    pub server: Vec<String>,
    pub client: Vec<String>,
}

/// The seam to the emulated link: corral-link with the point's delay and loss (independent per packet) on
/// the impaired directions, the client started once the server listens (at most a second); what the link
/// carried both ways by the time the client's loop ended (whatever the loop's exit status).
pub fn run_link(run: &LinkRun) -> Result<LinkCounts, EmulatedError> {
    let delay = Duration::from_secs_f64(run.delay_ms.max(0.0) / 1000.0);
    let impairments = Impairments::new(delay, Duration::ZERO, run.loss, None, 0, 0.0);
    let cfg = Config { impairments, seed: run.seed, toward: run.toward };
    let (_status, counts) =
        corral_link::run(&cfg, &run.server, &run.client, Settle::UntilListening(Duration::from_secs(1)))
            .map_err(EmulatedError::Link)?;
    Ok(counts)
}

/// The point's rows: one query row for the whole run, the link both ways (node 0 the server, 1 the client).
fn rows(em: &EmulatedSpec, index: usize, seed: u64, c: &LinkCounts) -> PointResult {
    let (down, up) = (c.server_to_client, c.client_to_server);
    let throughput = (down.forwarded_bytes + up.forwarded_bytes) as f64 / em.duration_s as f64;
    let query = QueryRow {
        point: index,
        rep: 0,
        seed,
        start_s: 0.0,
        response_ms: f64::NAN,
        code: "2.05".into(),
        replies: 1,
        members: 1,
        coap_retx: 0,
        frames: down.forwarded + up.forwarded,
        mac_retries: 0,
    };
    let link = |from: u32, to: u32, d: DirectionCounts| LinkRow {
        point: index,
        from,
        to,
        frames: d.forwarded,
        retransmissions: 0,
        received: d.forwarded,
    };
    let node = |n: u32, role: NodeRole, sent: DirectionCounts, got: DirectionCounts| NodeRow {
        point: index,
        node: n,
        role,
        hops: 1,
        frames_sent: sent.forwarded,
        frames_received: got.forwarded,
        datagrams_forwarded: 0,
    };
    let point = PointRow {
        frames: down.forwarded + up.forwarded,
        drops_mac: down.dropped + up.dropped,
        max_link_frames: down.forwarded.max(up.forwarded),
        max_link: "link".into(),
        window_s: em.duration_s as f64,
        ..PointRow::new(index, seed, Facts::Emulated(EmulatedFacts { throughput }))
    };
    PointResult {
        queries: vec![query],
        point,
        links: vec![link(0, 1, down), link(1, 0, up)],
        nodes: vec![node(0, NodeRole::Server, down, up), node(1, NodeRole::Client, up, down)],
    }
}
