//! The exit status table of `docs/client.md`, one test per row, on the real binary: each failure is one line on
//! stderr (`error: …`) and the row's status. Also the dead peer: a port where nothing listens is refused
//! at once (ICMP port unreachable), by every client verb and by `corral bench`.

use crate::common;
use common::*;
use std::process::Command;
use std::time::{Duration, Instant};

/// stderr is exactly one line, `error: …`, containing `words`.
fn one_error_line(o: &std::process::Output, words: &str) {
    let err = stderr(o);
    assert!(err.starts_with("error: ") && err.lines().count() == 1, "one line: {err}");
    assert!(err.contains(words), "`{words}` in: {err}");
}

/// A UDP socket that receives and never answers: a peer that is there but silent.
fn silent_peer() -> (std::net::UdpSocket, u16) {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let port = s.local_addr().unwrap().port();
    (s, port)
}

#[test]
fn row_0_success_is_a_2xx_response() {
    let s = corral_serve("127.0.0.1", &[]);
    let o = corral(&["get", &format!("coap://127.0.0.1:{}/hello", s.port)]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
}

/// An unreadable file is status 1 whichever flag names it: a payload (-f), credentials, a FIB, a policy.
#[test]
fn row_1_unreadable_files() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let missing = missing.to_str().unwrap();
    let data = dir.path().display().to_string();
    for args in [
        &["put", "coap://127.0.0.1/x", "-f", missing][..],
        &["get", "coap://127.0.0.1/x", "--credentials", missing],
        &["serve", "--bind", "127.0.0.1:0", "--credentials", missing],
        &["proxy", "--bind", "127.0.0.1:0", "--fib", missing],
        &["gateway", "--bind", "127.0.0.1:0", "--data", &data, "--policy", missing],
    ] {
        let o = corral(args);
        assert_eq!(code(&o), 1, "{args:?}: {}", stderr(&o));
        one_error_line(&o, "cannot read");
    }
}

#[test]
fn row_2_usage_errors() {
    for args in [
        &["get", "coap:/missing-slash"][..],
        &["get", "http://example.com/"],
        &["get", "coap://[::1/x"],
        &["discover", "not a uri"],
        &["get", "coap://[::1]/x", "-T", "xyz"],
        &["get", "coap://[::1]/x", "-t", "no-such-format"],
        &["get", "coap://[::1]/x", "-B", "-1"],
        &["get", "coap://[::1]/x", "-B", "0"],
        &["bench", "coap://[::1]/x", "--clients", "0"],
        &["bench", "coap+tcp://[::1]/x"],
        &["get", "coap://[::1]/x", "-b", "100"],
        &["get", "coap://[::1]/x", "-b", "2048"],
        &["get", "coap://[::1]/x", "-b", "3,64"],
        &["get", "coap://[::1]/x", "-s", "0"],
        &["get", "coaps://[::1]/x"],
        &["get", "coap://224.0.1.187/x", "-s", "5"],
        &["serve", "--obs-period", "0"],
        &["frobnicate"],
    ] {
        let o = corral(args);
        assert_eq!(code(&o), 2, "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{args:?}");
    }
    // A range is stated without contradicting itself (not "`0` is not … between 0 and 86400").
    let o = corral(&["get", "coap://[::1]/x", "-B", "0"]);
    assert!(stderr(&o).contains("above 0 and at most 86400s"), "{}", stderr(&o));
}

/// A silent peer: the timeout, naming the peer, status 3.
#[test]
fn row_3_timeout() {
    let (_peer, port) = silent_peer();
    let o = corral(&["get", &format!("coap://127.0.0.1:{port}/x"), "-B", "1"]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    one_error_line(&o, &format!("no response from 127.0.0.1:{port} within 1s (timeout)"));
    let o = corral(&["get", &format!("coap://127.0.0.1:{port}/x"), "-B", "500ms", "-N"]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
}

/// A port where nothing listens: ICMP port unreachable, reported at once by every client verb.
#[test]
fn row_3_refused_port_at_once_by_every_client_verb() {
    let port = free_udp_port();
    let uri = format!("coap://127.0.0.1:{port}/x");
    let gateway = format!("coap://127.0.0.1:{port}");
    let want = format!("error: 127.0.0.1:{port} refused the request (port unreachable)\n");
    for args in [
        &["get", &uri, "-B", "5"][..],
        &["post", &uri, "-e", "x", "-B", "5"],
        &["put", &uri, "-e", "x", "-B", "5"],
        &["delete", &uri, "-B", "5"],
        &["fetch", &uri, "-B", "5"],
        &["patch", &uri, "-B", "5"],
        &["ipatch", &uri, "-B", "5"],
        &["request", "-m", "get", &uri, "-B", "5"],
        &["get", &uri, "-N", "-B", "5"],
        &["get", &uri, "-s", "10", "-B", "5"],
        &["discover", &gateway, "-B", "5"],
        &["entity", "list", "--gateway", &gateway, "-B", "5"],
    ] {
        let started = Instant::now();
        let o = corral(args);
        assert_eq!((code(&o), stderr(&o)), (3, want.clone()), "{args:?}");
        // Not a timed assertion of speed: a refusal that waited for -B would be a timeout.
        assert!(started.elapsed() < Duration::from_secs(5), "{args:?}: refused before -B ran out");
    }
}

/// `corral bench` against a port where nothing listens ends at once with the refusal, not a rate.
#[test]
fn row_3_refused_port_ends_bench() {
    let port = free_udp_port();
    let o = corral(&["bench", &format!("coap://127.0.0.1:{port}/hello"), "-c", "4", "-d", "15", "-q"]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert_eq!(stderr(&o), format!("error: 127.0.0.1:{port} refused the request (port unreachable)\n"));
    assert!(stdout(&o).is_empty(), "no rate for a run that reached nothing: {}", stdout(&o));
}

#[test]
fn row_4_client_error() {
    let s = corral_serve("127.0.0.1", &[]);
    let o = corral(&["get", &format!("coap://127.0.0.1:{}/no/such/thing", s.port)]);
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(stderr(&o).starts_with("error: 4.04 Not Found"), "{}", stderr(&o));
    one_error_line(&o, "4.04");
    assert!(stdout(&o).is_empty());
}

/// A proxy whose next hop stays silent answers 5.04 (or 5.02 once it learns the port is unreachable).
#[test]
fn row_5_server_error() {
    let (_peer, dead) = silent_peer();
    let p = spawn_with_port(
        Command::new(CORRAL).args(["proxy", "--bind", "127.0.0.1:0", "--upstream-timeout", "300ms"]),
        banner_port,
    );
    let proxy = format!("coap://127.0.0.1:{}", p.port);
    let o = corral(&["get", &format!("coap://127.0.0.1:{dead}/x"), "-P", &proxy]);
    assert_eq!(code(&o), 5, "{}", stderr(&o));
    assert!(stderr(&o).starts_with("error: 5.0"), "{}", stderr(&o));
    one_error_line(&o, "5.0");
}

/// The Entity Manager's diagnostics start with their code; the error line says it once
/// (not "5.02 Bad Gateway: 5.02 Bad Gateway: …").
#[test]
fn row_5_an_error_line_never_repeats_its_prefix() {
    let (_gw, j, _data) = corral_testbed(2, 147, &[]);
    let gw = j["uri"].as_str().unwrap().to_string();
    let members: Vec<String> =
        j["devices"].as_array().unwrap().iter().map(|d| format!("coap://{}/s/t", d.as_str().unwrap())).collect();
    let mut create = vec!["entity", "create", "temps", "--gateway", &gw, "--eo", "avg"];
    create.extend(members.iter().map(String::as_str));
    let o = corral(&create);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    // A sensor cannot be switched: every member refuses, the gateway answers 5.02 with its report.
    let o = corral(&["entity", "actuate", "temps", "on", "--gateway", &gw]);
    assert_eq!(code(&o), 5, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.starts_with("error: 5.02 Bad Gateway: ") && err.matches("5.02").count() == 1, "{err}");
}

/// A server that sends block 0 of a block-wise response and then goes silent: status 6, nothing on stdout.
#[test]
fn row_6_block_wise_transfer_failed() {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = sock.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut answered = false;
        while let Ok((n, from)) = sock.recv_from(&mut buf) {
            if answered || n < 4 {
                continue;
            }
            answered = true;
            let tkl = (buf[0] & 0x0f) as usize;
            // ACK, 2.05, same MID and token; Block2 (23) NUM 0, M 1, SZX 2; 64 bytes.
            let mut m = vec![0x60 | tkl as u8, 0x45, buf[2], buf[3]];
            m.extend_from_slice(&buf[4..4 + tkl]);
            m.extend_from_slice(&[0xd1, 0x0a, 0x0a, 0xff]);
            m.extend_from_slice(&[b'x'; 64]);
            let _ = sock.send_to(&m, from);
        }
    });
    let o = corral(&["get", &format!("coap://127.0.0.1:{port}/big"), "-B", "1"]);
    assert_eq!(code(&o), 6, "{}", stderr(&o));
    one_error_line(&o, "stalled");
    assert!(o.stdout.is_empty(), "no partial body");
}

/// A request protected with another pair's keys: the server refuses it, status 7.
#[test]
fn row_7_oscore_refused() {
    let port = free_udp_port();
    let uri = format!("coap://127.0.0.1:{port}");
    let (ours, theirs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for d in [&ours, &theirs] {
        let o = corral(&["oscore", "new", "--server", &uri, "--dir", d.path().to_str().unwrap()]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
    }
    let server = ours.path().join("server.json");
    let bind = format!("127.0.0.1:{port}");
    let _s = spawn_with_port(
        Command::new(CORRAL).args(["serve", "--bind", &bind, "--credentials", server.to_str().unwrap()]),
        banner_port,
    );
    let wrong = theirs.path().join("client.json");
    let o = corral(&["get", &format!("{uri}/hello"), "--credentials", wrong.to_str().unwrap(), "-B", "5"]);
    assert_eq!(code(&o), 7, "{}", stderr(&o));
    one_error_line(&o, "OSCORE");
    let right = ours.path().join("client.json");
    let o = corral(&["get", &format!("{uri}/hello"), "--credentials", right.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

/// Row 3, a network this host has no route to (issue 46 item 12): the send fails at once (ENETUNREACH), and
/// so does the request — it waited the whole -B. In a namespace of its own, whose only routes are loopback's.
#[test]
fn a_network_without_a_route_fails_at_once() {
    let Some(ns) = Netns::new("noroute", &[]) else { return };
    for uri in ["coap://10.1.2.3/x", "coap://[2001:db8::1]/x"] {
        // Within 10 s, with -B 60: at once, not after the timeout.
        let o = run(ns.command(CORRAL).args(["get", uri, "-B", "60"]), Duration::from_secs(10));
        assert_eq!(code(&o), 3, "{uri}: {}", stderr(&o));
        one_error_line(&o, "unreachable");
    }
}

/// The top-level help lists every row, 7 included.
#[test]
fn help_lists_every_exit_status() {
    let out = stdout(&corral(&["--help"]));
    for row in
        ["0  success", "1  other error", "2  usage error", "3  timeout or unreachable", "4  the server answered 4.xx"]
    {
        assert!(out.contains(row), "{row}: {out}");
    }
    for row in ["5  the server answered 5.xx", "6  a block-wise transfer failed", "7  OSCORE"] {
        assert!(out.contains(row), "{row}: {out}");
    }
    // Issue 46: 8 (a failed DTLS handshake) was missing, and Ctrl-C's 130 is a row of its own.
    for row in ["8  coaps://: the DTLS handshake failed", "130  interrupted (Ctrl-C)"] {
        assert!(out.contains(row), "{row}: {out}");
    }
}

/// Row 130 (issue 46 item 11): Ctrl-C keeps what was done. `bench` and `stream send` print the summary
/// of what they measured until then (marked `interrupted`) and exit 130 — they were killed, printing
/// nothing.
#[test]
fn ctrl_c_prints_what_was_measured_and_exits_130() {
    let s = corral_serve("127.0.0.1", &["-q"]);
    let hello = format!("coap://127.0.0.1:{}/hello", s.port);
    let bench = ["bench", &hello, "-c", "2", "-d", "60", "--json", "-q"];
    let o = interrupt(Command::new(CORRAL).args(bench), Once::After(Duration::from_millis(1500)));
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("the summary, as JSON");
    assert_eq!(j["interrupted"], true, "{j}");
    assert!(j["requests"].as_u64().is_some_and(|n| n > 0), "{j}");
    one_error_line(&o, "interrupted after");

    let (_recv, r) = spawn_json(Command::new(CORRAL).args(["stream", "recv", "--bind", "127.0.0.1:0", "--json"]));
    let uri = format!("coap://{}", r["udp"].as_str().unwrap());
    let send = ["stream", "send", &uri, "--count", "100000", "--interval", "10ms", "--json", "-q"];
    let o = interrupt(Command::new(CORRAL).args(send), Once::After(Duration::from_millis(1500)));
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("the summary, as JSON");
    assert_eq!(j["interrupted"], true, "{j}");
    assert!(j["generated"].as_u64().is_some_and(|n| n > 0 && n < 100_000), "{j}");
    one_error_line(&o, "interrupted after");
}
