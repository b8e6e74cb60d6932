//! Issue 26 item 6: `corral proxy --allow <LAN>` must not launder "this machine". Two hosts in network
//! namespaces joined by a veth pair (root only; skipped otherwise): the proxy on host `a`, a client on
//! host `b`. A client from `b` may not reach `a`'s loopback or interface addresses through the proxy, the
//! proxy answers open and closed ports it may not reach alike and sends nothing to them, nobody reaches a
//! broadcast address through it, and a proxy opened to other hosts without a destination policy says so
//! at start-up.

use crate::common;
use common::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn out(o: &Output) -> String {
    format!("status {:?}\nstdout: {}\nstderr: {}", o.status.code(), stdout(o), stderr(o))
}

/// `corral serve --bind BIND` inside `ns`, and its port.
fn serve_in(ns: &Netns, bind: &str) -> Proc {
    spawn_with_port(ns.command(CORRAL).args(["serve", "--bind", bind, "-q", "--json"]), json_port)
}

/// `corral proxy --bind 0.0.0.0:0 --json EXTRA…` inside `ns`; its port.
fn proxy_in(ns: &Netns, extra: &[&str]) -> (Proc, u16) {
    let (p, j) = spawn_json(ns.command(CORRAL).args(["proxy", "--bind", "0.0.0.0:0", "--json"]).args(extra));
    let port = j["udp"].as_str().unwrap().rsplit_once(':').unwrap().1.parse().unwrap();
    (p, port)
}

/// `corral get URI -P PROXY` from inside `ns`, and how long it took.
fn get_via(ns: &Netns, uri: &str, proxy: &str) -> (Output, Duration) {
    let started = Instant::now();
    let o = run(ns.command(CORRAL).args(["get", uri, "-P", proxy, "-B", "15"]), Duration::from_secs(30));
    (o, started.elapsed())
}

#[test]
fn clients_from_other_hosts_cannot_reach_this_hosts_services_through_the_proxy() {
    let Some((a, b)) = netns_pair("pxl", 231, &[]) else { return };
    let loopback_only = serve_in(&a, "127.0.0.1:0");
    let on_interface = serve_in(&a, "10.231.0.1:0");
    let elsewhere = serve_in(&b, "10.231.0.2:5683");
    let (_p, port) = proxy_in(&a, &["--allow", "127.0.0.0/8,10.231.0.0/24"]);
    let (local_proxy, remote_proxy) = (format!("coap://127.0.0.1:{port}"), format!("coap://10.231.0.1:{port}"));
    let secret = format!("coap://127.0.0.1:{}/hello", loopback_only.port);
    // A client on the proxy's host may: it could send there itself. Its answer is now in the cache.
    let (o, _) = get_via(&a, &secret, &local_proxy);
    assert_eq!(stdout(&o), "Hello from corral!\n", "{}", out(&o));
    for target in [
        secret.clone(),
        format!("coap://localhost:{}/hello", loopback_only.port),
        format!("coap://10.231.0.1:{}/hello", on_interface.port),
        format!("coap://[::1]:{}/hello", loopback_only.port),
    ] {
        let (o, _) = get_via(&b, &target, &remote_proxy);
        assert_eq!(o.status.code(), Some(4), "{target}: {}", out(&o));
        assert!(stderr(&o).contains("4.03 Forbidden") && stderr(&o).contains("own host"), "{target}: {}", out(&o));
        assert!(!stdout(&o).contains("Hello"), "{target}: neither forwarded nor from the cache: {}", out(&o));
    }
    // Another host on the port the proxy serves by default: forwarded.
    let (o, _) = get_via(&b, &format!("coap://10.231.0.2:{}/hello", elsewhere.port), &remote_proxy);
    assert_eq!(stdout(&o), "Hello from corral!\n", "{}", out(&o));
}

/// A TCP and UDP listener inside `ns` that counts who knocks for `seconds`.
struct Knocks(std::process::Child, BufReader<std::process::ChildStdout>);

impl Knocks {
    fn listen(ns: &Netns, addr: &str, port: u16, seconds: u32) -> Knocks {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peers/listen_count.py");
        let mut child = ns
            .command("python3")
            .args([script, addr, &port.to_string(), &seconds.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start listen_count.py");
        let mut r = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready");
        Knocks(child, r)
    }

    fn count(mut self) -> serde_json::Value {
        let mut line = String::new();
        self.1.read_line(&mut line).unwrap();
        let _ = self.0.wait();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }
}

#[test]
fn the_proxy_answers_open_and_closed_ports_it_may_not_reach_alike() {
    let Some((a, b)) = netns_pair("pxs", 232, &[]) else { return };
    let dir = tempfile::tempdir().unwrap();
    let fib = dir.path().join("fib.toml");
    std::fs::write(&fib, "[destinations]\nnetworks = [\"10.232.0.0/24\"]\nports = [5683]\n").unwrap();
    let (_p, port) = proxy_in(&a, &["--allow", "10.232.0.0/24", "--fib", fib.to_str().unwrap()]);
    let proxy = format!("coap://10.232.0.1:{port}");
    let (open, closed) = (free_udp_port(), free_udp_port());
    let here = Knocks::listen(&a, "127.0.0.1", open, 8);
    let there = Knocks::listen(&b, "10.232.0.2", open, 8);
    let mut answers = Vec::new();
    for host in ["127.0.0.1", "10.232.0.1", "10.232.0.2"] {
        for (scheme, p) in [("coap+tcp", open), ("coap+tcp", closed), ("coap", open), ("coap", closed)] {
            let (o, took) = get_via(&b, &format!("{scheme}://{host}:{p}/x"), &proxy);
            println!("{scheme}://{host}:{p}: exit {:?} after {took:?}: {}", o.status.code(), stderr(&o).trim());
            let said = stderr(&o).replace(&p.to_string(), "PORT");
            answers.push((host, o.status.code(), said));
        }
    }
    for (host, code, said) in &answers {
        assert_eq!(*code, Some(4), "{host}: {said}");
        assert!(said.contains("4.03 Forbidden"), "{host}: {said}");
    }
    for host in ["127.0.0.1", "10.232.0.1", "10.232.0.2"] {
        let said: Vec<&String> = answers.iter().filter(|(h, ..)| *h == host).map(|(.., s)| s).collect();
        assert!(said.windows(2).all(|w| w[0] == w[1]), "one answer for open and closed ports: {said:?}");
    }
    assert!(answers.iter().any(|(h, _, s)| *h == "10.232.0.2" && s.contains("--dest-port")), "{answers:?}");
    for knocks in [here.count(), there.count()] {
        assert_eq!((knocks["tcp_connections"].as_u64(), knocks["udp_datagrams"].as_u64()), (Some(0), Some(0)));
    }
}

#[test]
fn nobody_reaches_a_broadcast_address_through_the_proxy() {
    let Some((a, b)) = netns_pair("pxb", 233, &[]) else { return };
    let (_p, port) = proxy_in(&a, &["--allow", "127.0.0.0/8,10.233.0.0/24"]);
    for (ns, proxy) in [(&a, format!("coap://127.0.0.1:{port}")), (&b, format!("coap://10.233.0.1:{port}"))] {
        for target in ["coap://10.233.0.255/x", "coap://255.255.255.255/x", "coap://127.255.255.255/x"] {
            let (o, _) = get_via(ns, target, &proxy);
            assert_eq!(o.status.code(), Some(5), "{target}: {}", out(&o));
            assert!(stderr(&o).contains("broadcast"), "{target}: {}", out(&o));
        }
    }
}

/// The start-up lines of `corral proxy ARGS…` on loopback (stderr until the summary is out, then the
/// process is stopped).
fn startup_warnings(args: &[&str]) -> String {
    let mut child = Command::new(CORRAL)
        .args(["proxy", "--bind", "127.0.0.1:0", "--json"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let _ = child.kill();
    let o = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_proxy_opened_to_other_hosts_without_a_destination_policy_says_so() {
    let warned = startup_warnings(&["--allow", "10.0.0.0/8"]);
    assert!(warned.contains("no destination policy") && warned.contains("--dest-net"), "{warned}");
    assert!(warned.contains("port 5683"), "the default it applies: {warned}");
    for policy in [&["--dest-net", "10.1.0.0/16"][..], &["--dest-port", "5683,5700"]] {
        let args: Vec<&str> = ["--allow", "10.0.0.0/8"].iter().chain(policy).copied().collect();
        let quiet = startup_warnings(&args);
        assert!(!quiet.contains("destination policy"), "{policy:?}: {quiet}");
    }
    assert!(!startup_warnings(&[]).contains("destination policy"), "this machine only: nothing to warn about");
}
