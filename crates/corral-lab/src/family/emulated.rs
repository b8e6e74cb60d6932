//! `[emulated]`: seed 004's experiment with real programs. For each point an emulated link joins two network
//! namespaces, a server runs in one (`corral serve`, or `python3 -m http.server` with one file), a client
//! loops in the other for the point's duration (`corral get -N`, or `curl`), and the link counts the bytes
//! it carried both ways — seed 004's "cumulative bytes received over the period … divided by" the period
//! (its Wireshark capture saw both directions on the link).
//!
//! # What it owns
//! The programs of each scheme and the rows of a point. The link is corral-link's library, behind one seam,
//! [`run_link`] (it needs root). The CoAP scheme's programs are `corral serve` and `corral get` from the
//! `corral` executable that is running the lab, so that scheme refuses to run from any other program (a test
//! binary, say). Real time: a point takes its `duration_s`, and its numbers differ from run to run.

use crate::error::{EmulatedError, RunError};
use crate::harness::PointRun;
use crate::record::{EmulatedFacts, Facts, LinkRow, NodeRole, NodeRow, PointResult, PointRow, QueryRow};
use crate::scenario::EmulatedSpec;
use corral_link::impair::Impairments;
use corral_link::{Config, DirectionCounts, LinkCounts};
use std::path::Path;
use std::time::Duration;

/// The server's address inside the link's namespaces.
const SERVER: &str = corral_link::SERVER_V4;

/// Runs one point (real time).
pub fn run(em: &EmulatedSpec, index: usize, seed: u64) -> Result<PointRun, RunError> {
    let (delay_ms, loss) = em.impairment()?;
    let dir = std::env::temp_dir().join(format!("corral-emulated-{}-{index}", std::process::id()));
    let io = |path: &Path, source| EmulatedError::Io { path: path.to_path_buf(), source };
    std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
    let body: String = (0..em.http_bytes).map(|i| (b'a' + (i % 26) as u8) as char).collect();
    let file = dir.join("data.txt");
    std::fs::write(&file, body).map_err(|e| io(&file, e))?;
    let programs = programs(em, &dir);
    let counts = programs
        .and_then(|(server, client)| run_link(&LinkRun { delay_ms, loss, seed: seed % 1_000_000, server, client }));
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

/// The server and the client loop of the point's scheme.
fn programs(em: &EmulatedSpec, dir: &Path) -> Result<(Vec<String>, Vec<String>), EmulatedError> {
    Ok(match em.scheme.as_str() {
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
        _ => {
            let corral = corral_executable()?;
            (
                vec![corral.clone(), "serve".into(), "--bind".into(), "0.0.0.0:5683".into(), "-q".into()],
                shell_loop(em.duration_s, &format!("{corral} get -N -B 5 coap://{SERVER}/test")),
            )
        }
    })
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

/// The seam to the emulated link: corral-link with the point's delay and loss (independent per packet) in
/// each direction, a second for the server to settle; what it carried both ways by the time the client's
/// loop ended (whatever the loop's exit status).
pub fn run_link(run: &LinkRun) -> Result<LinkCounts, EmulatedError> {
    let delay = Duration::from_secs_f64(run.delay_ms.max(0.0) / 1000.0);
    let impairments = Impairments::new(delay, Duration::ZERO, run.loss, None, 0, 0.0);
    let cfg = Config { impairments, seed: run.seed };
    let (_status, counts) =
        corral_link::run(&cfg, &run.server, &run.client, Duration::from_secs(1)).map_err(EmulatedError::Link)?;
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
