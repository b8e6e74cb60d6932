//! `corral bench` over coaps:// (the real binary against `corral serve --dtls`): each client keeps one DTLS
//! session for all its requests, or opens a new one for each with `--full-handshakes`; the server's
//! `/metrics` counts the handshakes either way. scripts/bench-dtls.sh measures with it.

use crate::common;
use common::*;
use std::process::Command;
use std::time::Duration;

/// `corral_dtls_handshakes_completed_total` in the server's `/metrics`, once it reaches `at_least` (the
/// socket publishes every half second; at most 20 s).
fn handshakes(http: &str, at_least: f64) -> f64 {
    let mut n = 0.0;
    for _ in 0..80 {
        let o = run(Command::new("curl").args(["-sf", &format!("http://{http}/metrics")]), Duration::from_secs(10));
        n = stdout(&o)
            .lines()
            .find_map(|l| l.strip_prefix("corral_dtls_handshakes_completed_total ")?.parse().ok())
            .unwrap_or(0.0);
        if n >= at_least {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    n
}

fn bench(coaps: &str, extra: &[&str]) -> serde_json::Value {
    let uri = format!("coaps://{coaps}/hello");
    let mut args = vec!["bench", &uri, "-k", "secretPSK", "-u", "alice", "--clients", "2", "--json", "-q"];
    args.extend_from_slice(extra);
    let o = corral(&args);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!((j["errors"].as_u64(), j["timeouts"].as_u64()), (Some(0), Some(0)), "{j}");
    j
}

#[test]
fn bench_over_coaps_keeps_a_session_per_client_or_pays_a_handshake_per_request() {
    let (dir, paths) = write_files(&[("psk.json", r#"{"alice": "secretPSK"}"#)]);
    let coaps = format!("127.0.0.1:{}", free_udp_port());
    let mut cmd = Command::new(CORRAL);
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--dtls", &coaps, "--psk-file", &paths[0]]);
    cmd.args(["--http", "127.0.0.1:0", "--json"]);
    let (_s, j) = spawn_json(&mut cmd);
    let http = j["http"].as_str().expect("the summary names the HTTP address").to_string();
    let j = bench(&coaps, &["--requests", "40"]);
    assert_eq!(j["requests"].as_u64(), Some(40), "{j}");
    assert_eq!(handshakes(&http, 2.0), 2.0, "one session per client");
    let j = bench(&coaps, &["--requests", "10", "--full-handshakes"]);
    assert_eq!(j["requests"].as_u64(), Some(10), "{j}");
    assert!(handshakes(&http, 12.0) >= 12.0, "a handshake per request");
    drop(dir);
}

#[test]
fn bench_flags_for_coaps_say_what_to_fix() {
    let o = corral(&["bench", "coaps://127.0.0.1:1/hello", "--requests", "1"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("-k KEY -u IDENTITY"), "{}", stderr(&o));
    let o = corral(&["bench", "coap://127.0.0.1:1/hello", "-k", "k", "-u", "alice", "--full-handshakes"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("coaps://"), "{}", stderr(&o));
}
