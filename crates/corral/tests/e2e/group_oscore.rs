//! Group OSCORE and deterministic requests on real sockets (seed 001's central claim): members of one group
//! asking `corral serve` for the same resource through `corral proxy` cause one request at the server, and
//! each verifies the server's signed answer. With `CORRAL_INTEROP=1`, aiocoap's deterministic client and
//! group server against corral's (`peers/group_oscore.py` sets aiocoap's side up with the same keys).

use crate::common;
use common::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

fn out(o: &std::process::Output) -> String {
    format!("status {:?}\nstdout: {}\nstderr: {}", o.status.code(), stdout(o), stderr(o))
}

/// `corral oscore group` for a server at `uri` with `clients` clients, in `dir`.
fn group(dir: &Path, uri: &str, clients: u8) {
    let o = corral(&[
        "oscore",
        "group",
        "--server",
        uri,
        "--clients",
        &clients.to_string(),
        "--dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
}

fn serve(port: u16, creds: &Path) -> Proc {
    let bind = format!("127.0.0.1:{port}");
    spawn_with_port(
        Command::new(CORRAL).args(["serve", "--bind", &bind, "--credentials", creds.to_str().unwrap()]),
        |l| l.strip_prefix("corral serve: listening on ")?.split_whitespace().next()?.rsplit_once(':')?.1.parse().ok(),
    )
}

/// Requests the server's endpoint counted so far (its `/stats`, itself one of them).
fn requests_in(base: &str) -> u64 {
    let o = corral(&["get", &format!("{base}/stats")]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["requests_in"].as_u64().unwrap()
}

fn proxy_status(proxy: &str) -> serde_json::Value {
    let o = corral(&["get", &format!("{proxy}/proxy")]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn two_members_through_corral_proxy_cause_one_request_at_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_udp_port();
    let base = format!("coap://127.0.0.1:{port}");
    group(dir.path(), &base, 4);
    let _s = serve(port, &dir.path().join("server.json"));
    let (_p, j) = spawn_json(Command::new(CORRAL).args(["proxy", "--bind", "127.0.0.1:0", "--json"]));
    let proxy = j["proxy_uri"].as_str().unwrap().to_string();
    let creds = |i: u8| dir.path().join(format!("client{i}.json")).to_str().unwrap().to_string();
    let get = |i: u8, path: &str| {
        let (uri, c) = (format!("{base}/{path}"), creds(i));
        Command::new(CORRAL).args(["get", &uri, "-P", &proxy, "--credentials", &c, "--deterministic"]).spawn().unwrap()
    };

    // One after the other: the second is answered from the proxy's cache.
    let before = requests_in(&base);
    for i in [1, 2] {
        let o = get(i, "hello").wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "client{i}: {}", out(&o));
    }
    let o = run(
        Command::new(CORRAL).args([
            "get",
            &format!("{base}/hello"),
            "-P",
            &proxy,
            "--credentials",
            &creds(2),
            "--deterministic",
        ]),
        LIMIT,
    );
    assert_eq!(stdout(&o).trim(), "Hello from corral!", "{}", out(&o));
    // The deterministic GET and the second /stats.
    assert_eq!(requests_in(&base) - before, 2, "one deterministic request reached the server");
    let st = proxy_status(&proxy);
    assert_eq!((&st["stats"]["upstream_requests"], &st["stats"]["hits"]), (&1.into(), &2.into()), "{st}");

    // At once: clients 3 and 4 ask for /echo together; the proxy aggregates them into one request.
    let before = requests_in(&base);
    let (a, b) = (get(3, "echo"), get(4, "echo"));
    for c in [a, b] {
        let o = c.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    }
    assert_eq!(requests_in(&base) - before, 2, "one deterministic request reached the server");

    // Without --deterministic a member's request is signed in group mode: any method, answered in kind.
    let o = corral(&["put", &format!("{base}/test"), "-e", "group mode", "--credentials", &creds(1)]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let o = corral(&["get", &format!("{base}/test"), "--credentials", &creds(2)]);
    assert_eq!((o.status.code(), stdout(&o).as_str()), (Some(0), "group mode"), "{}", out(&o));
    // Pairwise mode to the server (member 00): keys from both members' credentials, no signature.
    let o = corral(&["get", &format!("{base}/test"), "--credentials", &creds(3), "--pairwise-with", "00"]);
    assert_eq!((o.status.code(), stdout(&o).as_str()), (Some(0), "group mode"), "{}", out(&o));
    let o = corral(&["get", &format!("{base}/test"), "--credentials", &creds(3), "--pairwise-with", "09"]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(stderr(&o).contains("no member 09"), "{}", out(&o));
    // What a user gets wrong is explained: a POST with --deterministic.
    let o = corral(&["post", &format!("{base}/echo"), "-e", "x", "--credentials", &creds(1), "--deterministic"]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(stderr(&o).contains("GET and FETCH"), "{}", out(&o));
    // A member of another group cannot read the answer (nor be answered).
    let other = tempfile::tempdir().unwrap();
    group(other.path(), &base, 1);
    let c = other.path().join("client1.json");
    let o = corral(&["get", &format!("{base}/hello"), "--credentials", c.to_str().unwrap(), "--deterministic"]);
    assert_eq!(o.status.code(), Some(7), "{}", out(&o));
}

/// A member that answers a multicast request without the group's protection (here a forger that echoes
/// the token with a 2.05): its answer is reported and left out, the group's are shown.
const FORGER: &str = r#"
import socket, struct, sys
group, port = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
s.bind(("0.0.0.0", port))
s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton(group) + socket.inet_aton("127.0.0.1"))
print("ready", flush=True)
while True:
    data, peer = s.recvfrom(2048)
    tkl = data[0] & 0x0F
    s.sendto(bytes([0x50 | tkl, 0x45]) + bytes([0x12, 0x34]) + data[4:4 + tkl] + b"\xffforged", peer)
"#;

/// Group mode to a multicast group (IPv4 on loopback): two `corral serve` members on one port (the socket
/// shared because of --join) each answer a signed request with a signed response, which the client verifies
/// one by one; a forged answer from a node outside the group is refused; a pairwise context or
/// --deterministic cannot protect a multicast request.
#[test]
fn a_group_mode_multicast_request_is_answered_by_each_member_and_a_forgery_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_udp_port();
    let group_addr = "239.255.77.16";
    let mcast = format!("coap://{group_addr}:{port}");
    let o = corral(&[
        "oscore",
        "group",
        "--server",
        &mcast,
        "--servers",
        "2",
        "--clients",
        "1",
        "--dir",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let bind = format!("0.0.0.0:{port}");
    let member = |n: u8| {
        let creds = dir.path().join(format!("server{n}.json"));
        spawn_with_port(
            Command::new(CORRAL).args([
                "serve",
                "--bind",
                &bind,
                "--join",
                group_addr,
                "--mcast-if",
                "127.0.0.1",
                "--leisure",
                "0.1",
                "--credentials",
                creds.to_str().unwrap(),
            ]),
            move |l| l.starts_with("corral serve: listening on").then_some(port),
        )
    };
    let _servers = [member(1), member(2)];
    let client = dir.path().join("client1.json");
    let client = client.to_str().unwrap();
    let get = |extra: &[&str]| {
        let mut args = vec!["get", "--mcast-if", "127.0.0.1", "-B", "1.5", "--json", "--credentials", client];
        args.extend_from_slice(extra);
        corral(&args)
    };
    let o = get(&[&format!("{mcast}/hello")]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let payloads: Vec<&str> = j.as_array().unwrap().iter().map(|r| r["payload"].as_str().unwrap()).collect();
    assert_eq!(payloads, ["Hello from corral!"; 2], "two verified answers: {j}");
    let mut members: Vec<&str> = j.as_array().unwrap().iter().map(|r| r["oscore-member"].as_str().unwrap()).collect();
    members.sort();
    assert_eq!(members, ["00", "01"], "one from each member (both on one address): {j}");

    // A forger joins the group and answers first and unprotected: refused, the members' answers stand.
    let py = std::env::temp_dir().join(format!("corral-forger-{}.py", std::process::id()));
    std::fs::write(&py, FORGER).unwrap();
    let _forger = spawn_with_port(
        Command::new("python3").args([py.to_str().unwrap(), group_addr, &port.to_string()]),
        move |l| (l == "ready").then_some(port),
    );
    let o = get(&[&format!("{mcast}/hello")]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j.as_array().map(Vec::len), Some(2), "the forgery is not shown: {j}");
    assert!(!stdout(&o).contains("forged"), "{}", out(&o));
    assert!(stderr(&o).contains("does not verify"), "the forgery is reported: {}", out(&o));

    // What cannot protect a multicast request is refused before anything is sent.
    let o = get(&[&format!("{mcast}/hello"), "--deterministic"]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(stderr(&o).contains("not to a multicast"), "{}", out(&o));
    let pair = tempfile::tempdir().unwrap();
    let o = corral(&["oscore", "new", "--server", &mcast, "--dir", pair.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let pc = pair.path().join("client.json");
    let o =
        corral(&["get", &format!("{mcast}/hello"), "--mcast-if", "127.0.0.1", "--credentials", pc.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(stderr(&o).contains("group mode"), "{}", out(&o));
    let _ = std::fs::remove_file(py);
}

#[test]
fn aiocoap_and_corral_group_and_deterministic_requests_interoperate() {
    if !interop_enabled(&["python3"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = free_udp_port();
    let base = format!("coap://127.0.0.1:{port}");
    group(dir.path(), &base, 2);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/group_oscore.py");
    let d = dir.path().to_str().unwrap();

    // aiocoap's deterministic client (as client2) against corral serve.
    let _s = serve(port, &dir.path().join("server.json"));
    let o = run(
        Command::new("python3").args([script.to_str().unwrap(), "client", d, "client2", &format!("{base}/hello")]),
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert!(stdout(&o).contains("2.05") && stdout(&o).contains("Hello from corral!"), "{}", out(&o));
    // aiocoap's group-mode client (signed request) against corral serve.
    let o = run(
        Command::new("python3").args([
            script.to_str().unwrap(),
            "group-client",
            d,
            "client2",
            &format!("{base}/hello"),
        ]),
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert!(stdout(&o).contains("2.05") && stdout(&o).contains("Hello from corral!"), "{}", out(&o));
    drop(_s);

    // corral's deterministic client against aiocoap's group server (with the server's keys).
    let port2 = free_udp_port();
    let bind = format!("127.0.0.1:{port2}");
    let _a =
        spawn_with_port(Command::new("python3").args([script.to_str().unwrap(), "server", d, "server", &bind]), |l| {
            l.strip_prefix("listening on ")?.rsplit_once(':')?.1.trim().parse().ok()
        });
    // The credentials name the first server's URI; point client1 at the second.
    let creds = dir.path().join("client1.json");
    let entry = serde_json::json!({ format!("coap://127.0.0.1:{port2}/*"): { "oscore": { "basedir": dir.path().join("client1").to_str().unwrap() } } });
    std::fs::write(&creds, entry.to_string()).unwrap();
    let o = run(
        Command::new(CORRAL).args([
            "get",
            &format!("coap://127.0.0.1:{port2}/instruction?t=3"),
            "--credentials",
            creds.to_str().unwrap(),
            "--deterministic",
        ]),
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert_eq!(stdout(&o).trim(), "instruction t=3 from aiocoap", "{}", out(&o));
    // corral's group-mode client against aiocoap's group server.
    let o = run(
        Command::new(CORRAL).args([
            "get",
            &format!("coap://127.0.0.1:{port2}/instruction?t=4"),
            "--credentials",
            creds.to_str().unwrap(),
        ]),
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert_eq!(stdout(&o).trim(), "instruction t=4 from aiocoap", "{}", out(&o));
    // corral's pairwise-mode client against aiocoap's group server (member 00).
    let o = run(
        Command::new(CORRAL).args([
            "get",
            &format!("coap://127.0.0.1:{port2}/instruction?t=5"),
            "--credentials",
            creds.to_str().unwrap(),
            "--pairwise-with",
            "00",
        ]),
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert_eq!(stdout(&o).trim(), "instruction t=5 from aiocoap", "{}", out(&o));
}
