//! `corral link` over a real pair of network namespaces: a UDP echo on one side and a probe on the other
//! measure what the link did — delay, loss, reordering and rate within tolerance of what was asked.
//! Needs root and TUN devices; without them each test says why it is skipped.

use crate::common;
use common::*;
use std::process::Command;
use std::time::Duration;

fn can_run() -> bool {
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false);
    if !root || !std::path::Path::new("/dev/net/tun").exists() {
        println!("skipped: corral link needs root and /dev/net/tun");
        return false;
    }
    true
}

/// Runs the probe across a link with `impair`, returns its JSON report.
fn probe(impair: &[&str], n: u32, size: u32, gap_ms: u32) -> serde_json::Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peers/udp_probe.py");
    let (n, size, gap) = (n.to_string(), size.to_string(), gap_ms.to_string());
    let mut args = vec!["link", "run"];
    args.extend_from_slice(impair);
    args.extend(["--", "python3", script, "echo", "7000", ":::", "python3", script, "probe", "10.213.0.1", "7000"]);
    args.extend([n.as_str(), size.as_str(), gap.as_str()]);
    let o = run(Command::new(CORRAL).args(&args), Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    serde_json::from_str(stdout(&o).lines().last().unwrap_or("")).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)))
}

#[test]
fn delay_and_loss_as_configured() {
    if !can_run() {
        return;
    }
    let j = probe(&["--delay", "30ms", "--loss", "20%", "--seed", "5"], 400, 100, 5);
    let min = j["rtt_min_ms"].as_f64().unwrap();
    let median = j["rtt_median_ms"].as_f64().unwrap();
    assert!((60.0..75.0).contains(&min), "round trip is twice the delay: {j}");
    assert!(median < 90.0, "{j}");
    // A round trip survives both directions: 0.8 × 0.8 = 64 %.
    let share = j["received"].as_f64().unwrap() / 400.0;
    assert!((0.54..0.74).contains(&share), "{j}");
}

#[test]
fn reordering_and_rate_as_configured() {
    if !can_run() {
        return;
    }
    let j = probe(&["--delay", "30ms", "--reorder", "30%", "--seed", "2"], 200, 100, 2);
    assert!(j["inversions"].as_u64().unwrap() >= 20, "packets that skip the delay overtake: {j}");
    assert_eq!(j["received"], 200, "{j}");
    // 1 Mbit/s: 100 datagrams of 1250 bytes (IP packets of 1278) sent at once need about 1 s each way.
    let j = probe(&["--rate", "1mbit"], 100, 1250, 0);
    let span = j["span_ms"].as_f64().unwrap();
    assert!((1000.0..1600.0).contains(&span), "rate-limited: {j}");
}

#[test]
fn mistakes_are_explained() {
    let o = corral(&["link", "run", "--delay", "fast", "--", "true", ":::", "true"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = corral(&["link", "run", "--", "true"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains(":::"), "{}", stderr(&o));
}

/// `link run` exits with the client's status (its help says so), and a signal as a shell reports it.
#[test]
fn run_returns_the_clients_exit_status() {
    if !can_run() {
        return;
    }
    for (client, want) in [("exit 0", 0), ("exit 4", 4), ("exit 3", 3), ("kill -9 $$", 128 + 9)] {
        let o = run(
            Command::new(CORRAL).args(["link", "run", "--", "sleep", "30", ":::", "sh", "-c", client]),
            Duration::from_secs(30),
        );
        assert_eq!(o.status.code(), Some(want), "{client}: {}", stderr(&o));
    }
}

/// A server command that cannot start fails the run with one line, and the client is not run against
/// nothing.
#[test]
fn run_fails_when_the_server_does_not_start() {
    if !can_run() {
        return;
    }
    let marker = tempfile::tempdir().unwrap();
    let ran = marker.path().join("client-ran");
    let touch = format!("touch {}", ran.display());
    for server in [&["/nonexistent/server"][..], &["sh", "-c", "exit 7"]] {
        let mut args = vec!["link", "run", "--settle", "1s", "--"];
        args.extend_from_slice(server);
        args.extend([":::", "sh", "-c", &touch]);
        let o = run(Command::new(CORRAL).args(&args), Duration::from_secs(30));
        assert_eq!(o.status.code(), Some(1), "{server:?}: {}", stderr(&o));
        let err = stderr(&o);
        let last = err.lines().last().unwrap_or("");
        assert!(last.starts_with("error: the server command") && last.contains("failed to start"), "{err}");
        assert!(!ran.exists(), "{server:?}: the client was run");
    }
}

/// `link run`'s standard output is its client's (issue 46: the server's banner and `try:` lines were mixed
/// into it); the server's goes to standard error.
#[test]
fn the_runs_output_is_the_clients() {
    if !can_run() {
        return;
    }
    let args = ["link", "run", "--", CORRAL, "serve", "--bind", "0.0.0.0:5683", ":::"];
    let o =
        run(Command::new(CORRAL).args(args).args([CORRAL, "get", "coap://10.213.0.1/hello"]), Duration::from_secs(30));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "Hello from corral!\n");
    assert!(stderr(&o).contains("corral serve: listening on 0.0.0.0:5683"), "{}", stderr(&o));
}
