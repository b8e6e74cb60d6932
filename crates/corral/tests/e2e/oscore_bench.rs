//! `corral bench --credentials` against an OSCORE server that lost its replay window in a restart: every
//! client's first request is answered 4.01 with an Echo value inside the protection (RFC 8613 B.1.2, RFC
//! 9175), which the benchmark must meet as `corral get` does — repeat once with the value, count nothing —
//! instead of reporting one error response per client.

use crate::common;
use common::*;
use std::process::Command;

#[test]
fn bench_meets_the_echo_challenge_of_a_restarted_oscore_server() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_udp_port();
    let base = format!("coap://127.0.0.1:{port}");
    let d = dir.path().to_str().unwrap();
    let o = corral(&["oscore", "new", "--server", &base, "--dir", d]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let (client, server) = (dir.path().join("client.json"), dir.path().join("server.json"));
    let bind = format!("127.0.0.1:{port}");
    let start = || {
        spawn_with_port(
            Command::new(CORRAL).args(["serve", "--bind", &bind, "--credentials", server.to_str().unwrap()]),
            banner_port,
        )
    };
    let mut s = start();
    // The server answers one protected request, then dies without saving its replay window.
    let o = corral(&["get", &format!("{base}/hello"), "--credentials", client.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let _ = s.child.kill();
    let _ = s.child.wait();
    let _s = start();
    let o = corral(&[
        "bench",
        &format!("{base}/hello"),
        "--credentials",
        client.to_str().unwrap(),
        "--clients",
        "4",
        "--requests",
        "200",
        "--json",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_str(stdout(&o).trim()).expect("one JSON object");
    assert_eq!(j["errors"], 0, "the Echo challenges are met, not counted as error responses: {j}");
    assert_eq!(j["timeouts"], 0, "{j}");
    assert_eq!(j["requests"], 200, "{j}");
}
