//! `[emulated]`: seed 004's experiment with real programs. For each point an emulated link joins two network
//! namespaces, a server runs in one (`corral serve`, or `python3 -m http.server` with one file), a client
//! loops in the other for the point's duration (`corral get -N`, or `curl`), and the link counts the bytes
//! it carried both ways — seed 004's "cumulative bytes received over the period … divided by" the period
//! (its Wireshark capture saw both directions on the link).
//!
//! # What it owns
//! The programs of each scheme and the rows of a point. The link itself is behind one seam, [`run_link`]:
//! today it runs `corral link run --json` from the `corral` executable that is running the lab (so it needs
//! root, and refuses to run from any other program); corral-link's library can take its place without the
//! rest of the family noticing. Real time: a point takes its `duration_s`, and its numbers differ from run
//! to run.

use crate::error::{EmulatedError, RunError};
use crate::harness::PointRun;
use crate::record::{EmulatedFacts, Facts, LinkRow, NodeRole, NodeRow, PointResult, PointRow, QueryRow};
use crate::scenario::EmulatedSpec;
use std::path::Path;
use std::process::Command;

/// The server's address inside the link's namespaces.
const SERVER: &str = "10.213.0.1";

/// Runs one point (real time).
pub fn run(em: &EmulatedSpec, index: usize, seed: u64) -> Result<PointRun, RunError> {
    let corral = corral_executable()?;
    let (delay_ms, loss) = em.impairment()?;
    let dir = std::env::temp_dir().join(format!("corral-emulated-{}-{index}", std::process::id()));
    let io = |path: &Path, source| EmulatedError::Io { path: path.to_path_buf(), source };
    std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
    let body: String = (0..em.http_bytes).map(|i| (b'a' + (i % 26) as u8) as char).collect();
    let file = dir.join("data.txt");
    std::fs::write(&file, body).map_err(|e| io(&file, e))?;
    let (server, client) = programs(em, &corral, &dir);
    let counts = run_link(&corral, &LinkRun { delay_ms, loss, seed: seed % 1_000_000, server, client });
    let _ = std::fs::remove_dir_all(&dir);
    Ok(PointRun { result: rows(em, index, seed, &counts?), trace: None })
}

/// The `corral` executable running the lab: the CoAP side's programs and, for now, the link.
fn corral_executable() -> Result<String, EmulatedError> {
    let corral = std::env::current_exe().map_err(EmulatedError::Executable)?;
    if corral.file_stem().and_then(|s| s.to_str()) != Some("corral") {
        return Err(EmulatedError::NotCorral);
    }
    Ok(corral.to_string_lossy().into_owned())
}

/// The server and the client loop of the point's scheme.
fn programs(em: &EmulatedSpec, corral: &str, dir: &Path) -> (Vec<String>, Vec<String>) {
    match em.scheme.as_str() {
        "http" => (
            vec![
                "python3".into(),
                "-m".into(),
                "http.server".into(),
                "8080".into(),
                "--bind".into(),
                "0.0.0.0".into(),
                "--directory".into(),
                dir.to_string_lossy().into_owned(),
            ],
            shell_loop(em.duration_s, &format!("curl -s -o /dev/null --max-time 10 http://{SERVER}:8080/data.txt")),
        ),
        _ => (
            vec![corral.into(), "serve".into(), "--bind".into(), "0.0.0.0:5683".into(), "-q".into()],
            shell_loop(em.duration_s, &format!("{corral} get -N -B 5 coap://{SERVER}/test")),
        ),
    }
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
    pub seed: u64,
    pub server: Vec<String>,
    pub client: Vec<String>,
}

/// What the link carried one way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Direction {
    pub forwarded: u64,
    pub forwarded_bytes: u64,
    pub dropped: u64,
}

/// What the link carried both ways by the time the client's loop ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkCounts {
    pub server_to_client: Direction,
    pub client_to_server: Direction,
}

/// The seam to the emulated link: `corral link run --json` (a second of settling, the server and client
/// separated by `:::`), its counters read from the last JSON line it prints on stderr.
pub fn run_link(corral: &str, run: &LinkRun) -> Result<LinkCounts, EmulatedError> {
    let mut args: Vec<String> = vec![
        "link".into(),
        "run".into(),
        "--delay".into(),
        format!("{}ms", run.delay_ms),
        "--loss".into(),
        format!("{}%", run.loss * 100.0),
        "--seed".into(),
        run.seed.to_string(),
        "--settle".into(),
        "1s".into(),
        "--json".into(),
        "--".into(),
    ];
    args.extend(run.server.iter().cloned());
    args.push(":::".into());
    args.extend(run.client.iter().cloned());
    let out = Command::new(corral).args(&args).output().map_err(EmulatedError::Spawn)?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let json: serde_json::Value = stderr
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok().filter(|v: &serde_json::Value| v.get("server_to_client").is_some()))
        .ok_or_else(|| EmulatedError::NoCounters { stderr: stderr.trim().to_string() })?;
    let direction = |k: &str| Direction {
        forwarded: json[k]["forwarded"].as_u64().unwrap_or(0),
        forwarded_bytes: json[k]["forwarded_bytes"].as_u64().unwrap_or(0),
        dropped: json[k]["dropped"].as_u64().unwrap_or(0),
    };
    Ok(LinkCounts { server_to_client: direction("server_to_client"), client_to_server: direction("client_to_server") })
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
    let link = |from: u32, to: u32, d: Direction| LinkRow {
        point: index,
        from,
        to,
        frames: d.forwarded,
        retransmissions: 0,
        received: d.forwarded,
    };
    let node = |n: u32, role: NodeRole, sent: Direction, got: Direction| NodeRow {
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
