//! The operator's HTTP window against the attacks of issue 41 (items 3, 4, 5, 6 and the IPv4-mapped hang of
//! item 10), with real HTTP clients (curl, raw TCP) as the attacker would use them: a client on another
//! host (two network namespaces joined by a veth pair; root only, skipped otherwise) or one on this host
//! without the role, a web page's request as a browser sends it (Origin, Sec-Fetch-Site, a name of the
//! attacker's that resolves to this machine), and one client opening streams and connections by the
//! hundred.

use crate::common;
use common::*;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

/// `curl -s` of `extra` (run by `cmd`, so that it can run inside a namespace): the status and the body.
fn curl_with(mut cmd: Command, extra: &[&str]) -> (u16, String) {
    cmd.args(["-s", "--max-time", "40", "-w", "\n%{http_code}"]).args(extra);
    let out = run(&mut cmd, Duration::from_secs(45));
    let text = stdout(&out);
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", ""));
    (status.parse().unwrap_or(0), body.to_string())
}

fn curl(extra: &[&str]) -> (u16, String) {
    curl_with(Command::new("curl"), extra)
}

/// `curl -X PUT` of a JSON body to `url`, with `extra` options: the status and the body.
fn put_json(url: &str, json: &str, extra: &[&str]) -> (u16, String) {
    let mut args = vec!["-X", "PUT", "-H", "Content-Type: application/json", "-d", json];
    args.extend_from_slice(extra);
    args.push(url);
    curl(&args)
}

/// A gateway with a testbed of `n` devices on `127.0.SUBNET.1…` and `--http 127.0.0.1:0`: the process, its
/// summary, the window's base URL and the data directory.
fn gateway(n: usize, subnet: u8, extra: &[&str]) -> (Proc, Value, String, tempfile::TempDir) {
    let mut args = vec!["--http", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let (p, j, d) = corral_testbed(n, subnet, &args);
    let base = format!("http://{}", j["http"].as_str().unwrap_or_else(|| panic!("no http in {j}")));
    (p, j, base, d)
}

/// The 4 bytes of 239.255.7.7, the group an attacker would put a device in, in a file for curl.
fn group_file(dir: &std::path::Path) -> String {
    let path = dir.join("group");
    std::fs::write(&path, [239, 255, 7, 7]).unwrap();
    format!("@{}", path.display())
}

/// Issue 41 item 3, from another host: a client on the LAN with the actuate role reached this host's
/// services through `/hc/` with the gateway's own loopback address — a device's `/mc` (which obeys this
/// machine, its manager) and any loopback service. Now this host is no destination for it at all.
#[test]
fn a_client_from_another_host_reaches_nothing_of_this_host_through_the_cross_proxy() {
    let Some((a, b)) = netns_pair("hcd", 171, &[]) else { return };
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().display().to_string();
    let (_gw, j) = spawn_json(a.command(CORRAL).args([
        "gateway",
        "--bind",
        "127.0.0.1:0",
        "--testbed",
        "2",
        "--testbed-from",
        "127.0.0.2:0",
        "--leisure",
        "0.3",
        "--json",
        "--data",
        &dir,
        "--http",
        "10.171.0.1:0",
        "--allow",
        "manage=127.0.0.0/8",
        "--allow",
        "actuate=10.171.0.0/24",
    ]));
    let base = format!("http://{}", j["http"].as_str().unwrap());
    let dev = j["devices"][0].as_str().unwrap().to_string();
    let groups = || stdout(&run(a.command(CORRAL).args(["get", &format!("coap://{dev}/mc")]), Duration::from_secs(20)));
    let before = groups();
    let body = group_file(data.path());
    let from_b = |extra: &[&str]| curl_with(b.command("curl"), extra);
    let (s, p) = from_b(&[
        "-X",
        "POST",
        "--data-binary",
        &body,
        "-H",
        "Content-Type: application/octet-stream",
        &format!("{base}/hc/coap://{dev}/mc?act=add"),
    ]);
    assert_eq!(s, 403, "{p}");
    let (s, p) = from_b(&[
        "-X",
        "POST",
        "-H",
        "Content-Type: text/plain",
        "-d",
        "on",
        &format!("{base}/hc/coap://{dev}/a/light"),
    ]);
    assert_eq!(s, 403, "{p}");
    assert!(p.contains("own host"), "the rule is named: {p}");
    let (s, p) = from_b(&[&format!("{base}/hc/coap://{dev}/s/t")]);
    assert_eq!(s, 403, "not even a read of this host's services from another host: {p}");
    let gw: SocketAddr = j["gateway"].as_str().unwrap().parse().unwrap();
    let (s, p) = from_b(&[&format!("{base}/hc/coap://[::ffff:{}]:{}/em", gw.ip(), gw.port())]);
    assert_eq!(s, 403, "an IPv4-mapped spelling is the same address: {p}");
    assert_eq!(groups(), before, "the device joined no group");
    // On this host, a reader still reads the devices through the cross-proxy.
    let (s, p) = curl_with(a.command("curl"), &[&format!("{base}/hc/coap://{dev}/s/t")]);
    assert_eq!(s, 200, "{p}");
}

/// Issue 41 item 3, on this host: a change through `/hc/` to this host's own services needs the operator
/// to open them (`--http-hc-this-host`), and a device's `/mc` needs the manage role even then — a client
/// with only the actuate role moved the device into a group of its choice before.
#[test]
fn a_devices_mc_is_for_managers_and_this_host_is_opened_by_the_operator_only() {
    let dir = tempfile::tempdir().unwrap();
    let body = group_file(dir.path());
    let roles = ["--allow", "manage=127.0.0.1/32", "--allow", "actuate=127.0.0.9/32"];
    let (_gw, j, base, _d) = gateway(2, 172, &roles);
    let dev = j["devices"][0].as_str().unwrap().to_string();
    let (light, mc) = (format!("{base}/hc/coap://{dev}/a/light"), format!("{base}/hc/coap://{dev}/mc?act=add"));
    let post = |from: &str, url: &str, data: &[&str]| {
        let mut args = vec!["--interface", from, "-X", "POST"];
        args.extend_from_slice(data);
        args.push(url);
        curl(&args)
    };
    let text = ["-H", "Content-Type: text/plain", "-d", "on"];
    let group = ["-H", "Content-Type: application/octet-stream", "--data-binary", body.as_str()];
    let (s, p) = post("127.0.0.1", &light, &text);
    assert_eq!(s, 403, "a change to this host, not opened: {p}");
    assert!(p.contains("--http-hc-this-host"), "{p}");
    let (s, p) = post("127.0.0.9", &mc, &group);
    assert_eq!(s, 403, "{p}");
    assert_eq!(stdout(&corral(&["get", &format!("coap://{dev}/mc")])).trim(), "", "the device joined nothing");

    let (_gw, j, base, _d) = gateway(2, 173, &[&roles[..], &["--http-hc-this-host", "127.0.173.0/24"]].concat());
    let dev = j["devices"][0].as_str().unwrap().to_string();
    let (light, mc) = (format!("{base}/hc/coap://{dev}/a/light"), format!("{base}/hc/coap://{dev}/mc?act=add"));
    let (s, p) = post("127.0.0.9", &light, &text);
    assert_eq!(s, 200, "opened: an actuator actuates: {p}");
    let (s, p) = post("127.0.0.9", &mc, &group);
    assert_eq!(s, 403, "but /mc is the manager's: {p}");
    assert!(p.contains("role manage"), "{p}");
    assert_eq!(stdout(&corral(&["get", &format!("coap://{dev}/mc")])).trim(), "");
    let (s, p) = post("127.0.0.1", &mc, &group);
    assert_eq!(s, 200, "the manager may: {p}");
    assert_eq!(stdout(&corral(&["get", &format!("coap://{dev}/mc")])).trim(), "239.255.7.7");
}

/// Issue 41 item 4: a web page of another site made the operator's browser change devices through `/hc/`
/// with a simple `text/plain` POST (no preflight), and `--http-token-file` did not cover `/hc/`.
#[test]
fn a_page_of_another_site_cannot_change_devices_and_the_token_covers_the_cross_proxy() {
    let (_gw, j, base, _d) = gateway(1, 174, &[]);
    let dev = j["devices"][0].as_str().unwrap().to_string();
    let light = format!("{base}/hc/coap://{dev}/a/light");
    let post = |light: &str, headers: &[&str], value: &str| {
        let mut args = vec!["-X", "POST", "-H", "Content-Type: text/plain", "-d", value];
        for h in headers {
            args.extend(["-H", h]);
        }
        args.push(light);
        curl(&args)
    };
    // What a browser sends for a form or fetch() on http://evil.example (or a page on another port here).
    for headers in [
        &["Origin: http://evil.example", "Sec-Fetch-Site: cross-site"][..],
        &["Origin: http://127.0.0.1:1"],
        &["Origin: null"],
        &["Sec-Fetch-Site: same-site"],
    ] {
        let (s, p) = post(&light, headers, "on");
        assert_eq!(s, 403, "{headers:?}: {p}");
        assert!(p.contains("another site"), "{p}");
    }
    assert_eq!(curl(&[&light]).1.trim(), "off", "the light stayed off");
    // The admin API's changes follow the same rule.
    let profile = format!(r#"{{"er":["coap://{dev}/s/t"]}}"#);
    let (s, p) = put_json(&format!("{base}/api/entities/e8"), &profile, &["-H", "Origin: http://evil.example"]);
    assert_eq!(s, 403, "{p}");

    // The window's own page may, where the operator opened this host to changes; the token then covers
    // the cross-proxy, reads included.
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "t0ken\n").unwrap();
    let token = token.display().to_string();
    let (_gw, j, base, _d) = gateway(1, 175, &["--http-hc-this-host", "127.0.175.0/24", "--http-token-file", &token]);
    let dev = j["devices"][0].as_str().unwrap().to_string();
    let light = format!("{base}/hc/coap://{dev}/a/light");
    let (own, bearer) = (format!("Origin: {base}"), "Authorization: Bearer t0ken");
    let (s, p) = post(&light, &[&own, "Sec-Fetch-Site: same-origin", bearer], "on");
    assert_eq!(s, 200, "from the window's own page: {p}");
    assert_eq!(curl(&["-H", bearer, &light]).1.trim(), "on");
    let (s, p) = post(&light, &["Origin: http://evil.example", bearer], "off");
    assert_eq!(s, 403, "the token does not make another site's page ours: {p}");
    let (s, _) = curl(&["-X", "PUT", "-H", "Content-Type: text/plain", "-d", "on", &light]);
    assert_eq!(s, 401, "a change through the cross-proxy needs the token");
    let (s, _) = curl(&[&light]);
    assert_eq!(s, 401, "and so does a read");
}

/// Issue 41 item 5: DNS rebinding. A page on an attacker's name that resolves to this machine reaches the
/// listener with that name in Host: it created entities and read every profile. Now any request whose Host
/// is not the listener's address or a configured name is 421, reads included.
#[test]
fn a_name_that_is_not_the_listeners_gets_nothing_reads_included() {
    let (_gw, j, base, _d) = gateway(1, 176, &[]);
    let dev = j["devices"][0].as_str().unwrap().to_string();
    let port = base.rsplit_once(':').unwrap().1.to_string();
    let profile = format!(r#"{{"er":["coap://{dev}/s/t"]}}"#);
    let (s, _) = put_json(&format!("{base}/api/entities/mine"), &profile, &[]);
    assert_eq!(s, 201);
    // The browser resolved evil.example to this machine: its requests carry Host and Origin evil.example.
    let evil = format!("http://evil.example:{port}");
    let resolve = format!("evil.example:{port}:127.0.0.1");
    let (s, p) = curl(&["--resolve", &resolve, &format!("{evil}/api/entities")]);
    assert_eq!(s, 421, "{p}");
    assert!(!p.contains("coap://"), "no profile in the answer: {p}");
    let origin = format!("Origin: {evil}");
    let (s, p) = put_json(&format!("{evil}/api/entities/e8"), r#"{"er":[]}"#, &["--resolve", &resolve, "-H", &origin]);
    assert_eq!(s, 421, "{p}");
    let (s, p) = curl(&["--resolve", &resolve, &format!("{evil}/")]);
    assert_eq!(s, 421, "the console is not served to it either: {p}");
    let (s, body) = curl(&[&format!("{base}/api/entities")]);
    assert_eq!(s, 200);
    assert!(!body.contains("e8"), "nothing was created: {body}");
    let (s, _) = curl(&[&format!("http://localhost:{port}/healthz")]);
    assert_eq!(s, 200, "localhost is this listener's (it listens on loopback)");
    // A name the operator gives is the listener's.
    let (_gw, _j, base, _d) = gateway(1, 176, &["--http-host", "gw.example.net"]);
    let port = base.rsplit_once(':').unwrap().1.to_string();
    let (s, _) =
        curl(&["--resolve", &format!("evil.example:{port}:127.0.0.1"), &format!("http://evil.example:{port}/healthz")]);
    assert_eq!(s, 421);
    let resolve = format!("gw.example.net:{port}:127.0.0.1");
    let (s, body) = curl(&["--resolve", &resolve, &format!("http://gw.example.net:{port}/api/entities")]);
    assert_eq!(s, 200, "{body}");
}

/// Issue 41 item 10: an IPv4-mapped target was sent but never answered (the answer, or the ICMP error,
/// came from the plain IPv4 address): the HTTP client waited until it gave up. Now it is the IPv4 address.
#[test]
fn an_ipv4_mapped_target_is_answered_at_once() {
    let (closed, devices) = (free_udp_port(), free_udp_port());
    let (from, ports) = (format!("127.0.177.1:{devices}"), format!("{devices},{closed}"));
    let (_gw, j, _d) = corral_testbed_from(1, &from, &["--http", "127.0.0.1:0", "--member-port", &ports]);
    let base = format!("http://{}", j["http"].as_str().unwrap());
    let dev: SocketAddr = j["devices"][0].as_str().unwrap().parse().unwrap();
    let mapped = format!("[::ffff:{}]:{}", dev.ip(), dev.port());
    let (s, p) = curl(&[&format!("{base}/hc/coap://{mapped}/s/t")]);
    assert_eq!(s, 200, "{p}");
    assert!(p.trim().parse::<f64>().is_ok(), "a temperature: {p}");
    let (s, p) = curl(&[&format!("{base}/hc/coap://[::ffff:127.0.0.1]:{closed}/s/t")]);
    assert_eq!(s, 502, "the port unreachable error, not a timeout: {p}");
}

/// A raw HTTP/1.1 request from `from` (a loopback address) to `to`, the connection left open.
fn raw_request(from: &str, to: SocketAddr, request: &str) -> Option<TcpStream> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
    s.bind(&SocketAddr::new(from.parse().unwrap(), 0).into()).ok()?;
    s.connect_timeout(&to.into(), Duration::from_secs(5)).ok()?;
    let mut s: TcpStream = s.into();
    s.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
    s.write_all(request.as_bytes()).ok()?;
    Some(s)
}

/// Reads until `until` is in what came (or the connection ends): what came.
fn read_until(s: &mut TcpStream, until: &str) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains(until) {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// Whether the server closed the connection (rather than the read timing out).
fn closed_by_server(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => return e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

fn fds(p: &Proc) -> usize {
    std::fs::read_dir(format!("/proc/{}/fd", p.child.id())).map(|d| d.count()).unwrap_or(0)
}

/// Issue 41 item 6: one client held 8,000 console streams (159 MB, not given back) and the cross-proxy's
/// 64 places, and idle connections from a client without any role held 8,321 file descriptors. Now one
/// client gets its share of the streams and no more, another client still gets one, connections per client
/// are capped before any request is read, a silent connection is closed after the header timeout, and the
/// memory of a wave of streams is not kept.
#[test]
fn one_client_holds_its_share_of_streams_and_connections_and_no_more() {
    let roles = ["--allow", "manage=127.0.0.1/32,127.0.0.2/32"];
    let (gw, j, base, _d) = gateway(2, 178, &roles);
    let http: SocketAddr = j["http"].as_str().unwrap().parse().unwrap();
    let devs: Vec<String> =
        j["devices"].as_array().unwrap().iter().map(|d| format!("coap://{}/s/t", d.as_str().unwrap())).collect();
    let profile = serde_json::json!({ "er": devs, "eo": ["avg"] }).to_string();
    let (s, p) = put_json(&format!("{base}/api/entities/room"), &profile, &["--interface", "127.0.0.1"]);
    assert_eq!(s, 201, "{p}");
    let live = format!("GET /console/live/room HTTP/1.1\r\nHost: {http}\r\nAccept: text/event-stream\r\n\r\n");
    let (fds0, rss0) = (fds(&gw), gw.rss_kib().unwrap_or(0));

    // A wave: one client asks for 200 streams at once.
    let mut wave: Vec<TcpStream> = (0..200).filter_map(|_| raw_request("127.0.0.1", http, &live)).collect();
    let (mut streams, mut refused, mut closed) = (0, 0, 0);
    for s in wave.iter_mut() {
        let got = read_until(s, "\n\n");
        if got.contains("\ndata: ") && !got.contains("event: error") {
            streams += 1;
        } else if got.contains("share") {
            refused += 1;
        } else {
            closed += 1;
        }
    }
    let (fds1, rss1) = (fds(&gw), gw.rss_kib().unwrap_or(0));
    println!("wave of 200 from one client: {streams} streams, {refused} refused (share), {closed} closed at once; fds {fds0} -> {fds1}, RSS {rss0} -> {rss1} KiB");
    assert_eq!(streams, 16, "the client's share of the event streams");
    assert_eq!(streams + refused, 32, "its connections beyond 32 were closed before a request was read");
    // Another client still gets a stream while the first holds its share.
    let mut other = raw_request("127.0.0.2", http, &live).expect("a connection");
    let got = read_until(&mut other, "\n\n");
    assert!(got.contains("\ndata: ") && !got.contains("event: error"), "{got}");
    drop(other);
    drop(wave);
    std::thread::sleep(Duration::from_secs(1));

    // Idle connections of a client without any role: at most 32 held, and those closed after the header
    // timeout (10 s) with nothing sent.
    let fds1 = fds(&gw);
    let idle: Vec<TcpStream> = (0..300).filter_map(|_| raw_request("127.0.0.3", http, "")).collect();
    std::thread::sleep(Duration::from_millis(300));
    let fds2 = fds(&gw);
    println!("300 idle connections from a client without a role: fds {fds1} -> {fds2}");
    assert!(fds2 <= fds1 + 32 + 2, "{fds2} file descriptors with 300 idle connections (before: {fds1})");
    let started = Instant::now();
    let mut first = idle.into_iter().next().expect("a connection");
    assert!(closed_by_server(&mut first), "a silent connection is closed by the header timeout");
    println!("a silent connection was closed after {:?}", started.elapsed());

    // A second wave: the memory of the first was given back (or reused), not added to.
    std::thread::sleep(Duration::from_millis(600));
    let mut wave: Vec<TcpStream> = (0..200).filter_map(|_| raw_request("127.0.0.1", http, &live)).collect();
    for s in wave.iter_mut() {
        read_until(s, "\n\n");
    }
    let rss2 = gw.rss_kib().unwrap_or(0);
    drop(wave);
    std::thread::sleep(Duration::from_millis(600));
    let (fds3, rss3) = (fds(&gw), gw.rss_kib().unwrap_or(0));
    println!("second wave: RSS {rss2} KiB during, {rss3} KiB after; fds after {fds3}");
    assert!(rss2 <= rss1 + 4096, "the second wave took {} KiB more than the first", rss2.saturating_sub(rss1));
    assert!(fds3 <= fds0 + 4, "every stream's connection and observation ended: {fds3} fds (before: {fds0})");
}
