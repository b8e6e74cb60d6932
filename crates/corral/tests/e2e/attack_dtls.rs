//! coaps:// attacked on real sockets (issue 30's "Bad input"): a flood of ClientHellos from spoofed
//! addresses against `corral serve --dtls` and `corral gateway --dtls`, measured through their
//! `/metrics` (`corral_dtls_*`) and the servers' network interface. The flood comes from a raw socket in
//! a network namespace of its own (root only; `skipped: …` otherwise, see `spoof`): the spoofed sources
//! are routed towards the attacker's host, which drops the answers, as a blind spoofer's victims would.

use crate::common;
use crate::spoof;

use common::*;
use spoof::{Pair, SERVER};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::process::{Command, Stdio};
use std::time::Duration;

const KEYS: &str = r#"{"alice": "secretPSK"}"#;
/// The spoofed sources: 10.99.0.0/16, routed from the servers' namespace towards the attacker's.
const SPOOFED_NET: &str = "10.99.0.0/16";
/// ClientHellos per flood; sent in rounds that fit one environment variable of the spoofer's.
const FLOOD: u32 = 3000;
const ROUND: u32 = 250;

/// A real client's first ClientHello: `corral get coaps://…` against a socket of the test's, which never
/// answers (the client is killed once it has sent it).
fn real_client_hello() -> Vec<u8> {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let uri = format!("coaps://{}/hello", sock.local_addr().unwrap());
    let mut client = Command::new(CORRAL)
        .args(["get", &uri, "-u", "alice", "-k", "secretPSK"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 2048];
    let (n, _) = sock.recv_from(&mut buf).expect("the client's ClientHello");
    let _ = client.kill();
    let _ = client.wait();
    assert_eq!(buf[0], 22, "a handshake record");
    buf[..n].to_vec()
}

/// The servers' interface counter `name` (`rx_bytes`, `tx_packets`…) in the servers' namespace.
fn v0(net: &Pair, name: &str) -> u64 {
    let o = run(net.in_g("cat").arg(format!("/sys/class/net/v0/statistics/{name}")), Duration::from_secs(10));
    stdout(&o).trim().parse().expect("an interface counter")
}

/// One scrape of `/metrics` on the servers' namespace's loopback.
fn scrape(net: &Pair, http: &str) -> String {
    let o = run(net.in_g("curl").args(["-sf", &format!("http://{http}/metrics")]), Duration::from_secs(10));
    assert!(o.status.success(), "curl /metrics: {}", stderr(&o));
    stdout(&o)
}

/// The value of the sample `name` (with its labels, e.g. `corral_dtls_sessions` or
/// `corral_dtls_handshakes_failed_total{reason="timeout"}`) in a scrape.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// Scrapes until `cookies` HelloVerifyRequests are counted (the socket publishes every half second),
/// for at most 20 s; the last scrape.
fn scrape_until_cookies(net: &Pair, http: &str, cookies: u32) -> String {
    let mut text = String::new();
    for _ in 0..80 {
        text = scrape(net, http);
        if sample(&text, "corral_dtls_cookies_sent_total").is_some_and(|n| n >= f64::from(cookies)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    text
}

/// `FLOOD` copies of `hello` from distinct spoofed addresses in 10.99.0.0/16 to `to`, starting at `first`.
fn flood(net: &Pair, hello: &[u8], to: SocketAddrV4, first: u32) {
    for round in 0..FLOOD / ROUND {
        let datagrams: Vec<_> = (0..ROUND)
            .map(|i| {
                let n = first + round * ROUND + i;
                let src = SocketAddrV4::new(Ipv4Addr::new(10, 99, (n >> 8) as u8, n as u8), 20000 + (n % 40000) as u16);
                (src, to, hello.to_vec())
            })
            .collect();
        net.spoof(&datagrams);
    }
}

/// What a flood did to a server, for the report and the assertions.
struct Measured {
    /// The interface's bytes out over bytes in during the first flood (answers over ClientHellos; the
    /// packet counts, printed, also hold the odd ARP or neighbour discovery packet).
    amplification: f64,
    rx_packets: u64,
    tx_packets: u64,
    metrics: String,
    rss_kib: (Option<u64>, Option<u64>),
}

/// Floods the coaps:// socket at `to` twice with spoofed ClientHellos, the second time while a real
/// client (`alice`, from the clients' namespace) fetches `path` over it and must succeed; then scrapes
/// `/metrics` at `http`.
fn flood_and_measure(net: &Pair, server: &Proc, to: SocketAddrV4, http: &str, path: &str) -> Measured {
    let o = run(
        Command::new("ip").args(["-n", &net.g.name, "route", "add", SPOOFED_NET, "via", "10.77.0.2"]),
        Duration::from_secs(10),
    );
    assert!(o.status.success(), "ip route add: {}", stderr(&o));
    let hello = real_client_hello();
    let rss_before = server.rss_kib();
    let (rx0, tx0, rxp0, txp0) =
        (v0(net, "rx_bytes"), v0(net, "tx_bytes"), v0(net, "rx_packets"), v0(net, "tx_packets"));
    flood(net, &hello, to, 0);
    // Let the server answer the last of them before counting what left.
    scrape_until_cookies(net, http, FLOOD);
    let (rx1, tx1, rxp1, txp1) =
        (v0(net, "rx_bytes"), v0(net, "tx_bytes"), v0(net, "rx_packets"), v0(net, "tx_packets"));
    let uri = format!("coaps://{to}/{path}");
    let client = net
        .in_c(CORRAL)
        .args(["get", &uri, "-u", "alice", "-k", "secretPSK"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    flood(net, &hello, to, FLOOD);
    let out = client.wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "the real client's request during the flood: {}", stderr(&out));
    let metrics = scrape_until_cookies(net, http, 2 * FLOOD);
    let m = Measured {
        amplification: (tx1 - tx0) as f64 / (rx1 - rx0) as f64,
        rx_packets: rxp1 - rxp0,
        tx_packets: txp1 - txp0,
        metrics,
        rss_kib: (rss_before, server.rss_kib()),
    };
    println!(
        "{FLOOD} spoofed ClientHellos of {} B: {} packets in, {} out; {:.3}x the bytes out of those in; RSS {:?} KiB → {:?} KiB",
        hello.len(),
        m.rx_packets,
        m.tx_packets,
        m.amplification,
        m.rss_kib.0,
        m.rss_kib.1
    );
    m
}

/// The assertions both servers share: every ClientHello the server saw got one HelloVerifyRequest and
/// nothing more, the bytes out do not exceed the bytes in, no session was kept for a spoofed address,
/// and the real client's one handshake completed.
fn assert_flood_kept_no_state(m: &Measured) {
    let s = |name: &str| sample(&m.metrics, name).unwrap_or_else(|| panic!("{name} in /metrics:\n{}", m.metrics));
    assert!(m.amplification <= 1.0, "amplification {:.3}", m.amplification);
    let cookies = s("corral_dtls_cookies_sent_total");
    assert!(cookies >= f64::from(2 * FLOOD), "a HelloVerifyRequest per ClientHello: {cookies}");
    assert!(
        cookies <= f64::from(2 * FLOOD) + 2.0,
        "and no more: {cookies} (the real client's first ClientHello is one)"
    );
    assert_eq!(s("corral_dtls_handshakes_completed_total"), 1.0, "the real client's handshake, and only its");
    assert!(s("corral_dtls_sessions") <= 1.0, "no session for a spoofed address");
    assert_eq!(s("corral_dtls_sessions_evicted_total"), 0.0, "the flood evicted nothing");
    assert_eq!(s(r#"corral_dtls_records_dropped_total{reason="no_session"}"#), 0.0);
}

/// `corral serve` in the servers' namespace: coaps:// (PSK alice) on 10.77.0.1:5684, HTTP on its loopback
/// port 8080; the PSK file's directory lives as long as the returned guard.
fn serve_in(net: &Pair) -> (tempfile::TempDir, Proc) {
    let (_dir, paths) = write_files(&[("psk.json", KEYS)]);
    let mut cmd = net.in_g(CORRAL);
    cmd.args(["serve", "--bind", "10.77.0.1:5683", "--dtls", "10.77.0.1:5684", "--psk-file", &paths[0]]);
    cmd.args(["--http", "127.0.0.1:8080"]);
    let server = spawn_with_port(&mut cmd, |line| {
        line.strip_prefix("corral serve: coaps:// (DTLS 1.2, PSK) on ")?.rsplit_once(':')?.1.parse().ok()
    });
    (_dir, server)
}

#[test]
fn a_spoofed_client_hello_flood_on_corral_serve_keeps_no_session_and_amplifies_nothing() {
    let Some(net) = Pair::new("dtlss", &[]) else { return };
    let (_dir, server) = serve_in(&net);
    let m = flood_and_measure(&net, &server, SocketAddrV4::new(SERVER, server.port), "127.0.0.1:8080", "hello");
    assert_flood_kept_no_state(&m);
}

#[test]
fn a_spoofed_client_hello_flood_on_the_gateways_coaps_port_keeps_no_session_and_amplifies_nothing() {
    let Some(net) = Pair::new("dtlsg", &[]) else { return };
    let (dir, paths) = write_files(&[("psk.json", KEYS)]);
    let data = dir.path().join("gw").display().to_string();
    let mut cmd = net.in_g(CORRAL);
    cmd.args(["gateway", "--bind", "10.77.0.1:5683", "--json", "--data", &data, "--dtls", "--psk-file", &paths[0]]);
    cmd.args(["--allow", "manage=psk:alice", "--http", "127.0.0.1:8080"]);
    let (server, _) = spawn_json(&mut cmd);
    let m = flood_and_measure(&net, &server, SocketAddrV4::new(SERVER, 5683), "127.0.0.1:8080", "em");
    assert_flood_kept_no_state(&m);
}

/// Garbage on the coaps:// port — records too short for their header, random bytes with a DTLS first
/// byte, application data for no session — is dropped and counted, and the server keeps serving.
#[test]
fn garbage_on_the_coaps_port_is_dropped_counted_and_served_past() {
    let Some(net) = Pair::new("dtlsj", &[]) else { return };
    let (_dir, server) = serve_in(&net);
    let to = SocketAddrV4::new(SERVER, server.port);
    let from = SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, 2), 40000);
    let hello = real_client_hello();
    let mut junk: Vec<Vec<u8>> = vec![vec![22], vec![22, 0xfe, 0xfd, 0, 0], vec![23; 40], vec![21, 0xfe, 0xfd]];
    junk.extend((1..hello.len()).step_by(7).map(|n| hello[..n].to_vec()));
    let mut state = 0x2545_f491_u32;
    junk.extend((0..200).map(|_| {
        (0..64)
            .map(|i| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                if i == 0 {
                    20 + (state % 44) as u8
                } else {
                    state as u8
                }
            })
            .collect()
    }));
    let datagrams: Vec<_> = junk.iter().map(|p| (from, to, p.clone())).collect();
    let sent = datagrams.len() as f64;
    for chunk in datagrams.chunks(ROUND as usize) {
        net.spoof(chunk);
    }
    let uri = format!("coaps://{to}/hello");
    let o = run(net.in_c(CORRAL).args(["get", &uri, "-u", "alice", "-k", "secretPSK"]), Duration::from_secs(30));
    assert_eq!(code(&o), 0, "served past the garbage: {}", stderr(&o));
    let text = scrape_until_cookies(&net, "127.0.0.1:8080", 1);
    let dropped = sample(&text, r#"corral_dtls_records_dropped_total{reason="no_session"}"#).unwrap();
    // A random datagram may parse as a ClientHello and get a cookie; everything else is dropped.
    let cookies = sample(&text, "corral_dtls_cookies_sent_total").unwrap();
    assert!(dropped + cookies >= sent, "{dropped} dropped and {cookies} cookies for {sent} datagrams");
    assert_eq!(sample(&text, "corral_dtls_handshakes_completed_total"), Some(1.0));
    assert!(server.rss_kib().is_some(), "the server is still running");
}

/// A PSK client against a server of certificates only: the two have no cipher suite in common, and the
/// client says so in one line with exit status 8; the server counts the failure by its reason.
#[test]
fn a_psk_client_against_a_certificate_server_says_no_shared_suite_with_exit_status_8() {
    let dir = tempfile::tempdir().unwrap();
    let pki = test_pki(dir.path());
    let coaps = format!("127.0.0.1:{}", free_udp_port());
    let mut cmd = Command::new(CORRAL);
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--dtls", &coaps, "--http", "127.0.0.1:0", "--json"]);
    cmd.args(["--cert", &pki.server.0, "--key", &pki.server.1, "--ca", &pki.ca]);
    let (_s, j) = spawn_json(&mut cmd);
    let http = j["http"].as_str().expect("the summary names the HTTP address").to_string();
    let uri = format!("coaps://{coaps}/hello");
    let o = corral(&["get", &uri, "-k", "secretPSK", "-u", "alice", "-B", "10"]);
    assert_eq!(code(&o), 8, "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("DTLS handshake") && err.contains("no shared cipher suite"), "{err}");
    let failed = r#"corral_dtls_handshakes_failed_total{reason="no_shared_suite"}"#;
    let mut text = String::new();
    for _ in 0..40 {
        let o = run(Command::new("curl").args(["-sf", &format!("http://{http}/metrics")]), Duration::from_secs(10));
        text = stdout(&o);
        if sample(&text, failed) == Some(1.0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(sample(&text, failed), Some(1.0), "{text}");
}

/// What the server sends a client during a handshake, seen by a relay between them: `corral get` with
/// `identity` and `key` through a UDP relay to `server`; the server's datagrams, in order.
fn handshake_seen_on_the_wire(server: u16, identity: &str, key: &str) -> Vec<Vec<u8>> {
    let relay = UdpSocket::bind("127.0.0.1:0").unwrap();
    relay.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let uri = format!("coaps://{}/hello", relay.local_addr().unwrap());
    let mut client = Command::new(CORRAL)
        .args(["get", &uri, "-u", identity, "-k", key, "-B", "5"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let to_server = std::net::SocketAddr::from(([127, 0, 0, 1], server));
    let (mut from_server, mut client_addr) = (Vec::new(), None);
    let mut buf = [0u8; 4096];
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < deadline && client.try_wait().unwrap().is_none() {
        let Ok((n, from)) = relay.recv_from(&mut buf) else { continue };
        if from == to_server {
            from_server.push(buf[..n].to_vec());
            if let Some(c) = client_addr {
                relay.send_to(&buf[..n], c).unwrap();
            }
        } else {
            client_addr = Some(from);
            relay.send_to(&buf[..n], to_server).unwrap();
        }
    }
    let _ = client.kill();
    let _ = client.wait();
    from_server
}

/// Issue 41, item 10: a PSK server that said unknown_psk_identity to an unknown identity and
/// decrypt_error to a known one with a wrong key let anyone list its identities. Now both end with the same
/// fatal decrypt_error (RFC 4279 §2), after flights of the same sizes.
#[test]
fn an_unknown_psk_identity_and_a_wrong_key_look_the_same_on_the_wire() {
    let (_dir, s) = corral_dtls_server();
    let unknown = handshake_seen_on_the_wire(s.port, "mallory", "secretPSK");
    let wrong_key = handshake_seen_on_the_wire(s.port, "alice", "wrongPSK");
    let alert = |sent: &[Vec<u8>]| sent.last().filter(|d| d.first() == Some(&21)).map(|d| d[d.len() - 2..].to_vec());
    assert_eq!(alert(&unknown), Some(vec![2, 51]), "fatal decrypt_error for an unknown identity: {unknown:?}");
    assert_eq!(alert(&wrong_key), Some(vec![2, 51]), "fatal decrypt_error for a wrong key: {wrong_key:?}");
    let sizes = |sent: &[Vec<u8>]| sent.iter().map(Vec::len).collect::<Vec<_>>();
    assert_eq!(sizes(&unknown), sizes(&wrong_key), "the same flights");
}
