//! The `corral` binary as a user meets it: output formats, the plugtest server (exit codes: exit_codes.rs),
//! and a flood that must leave `corral serve` answering with bounded memory.

use crate::common;
use common::*;
use std::time::Duration;

#[test]
fn client_verbs_against_the_plugtest_server() {
    let s = corral_serve("[::]", &[]);
    let base = format!("coap://[::1]:{}", s.port);
    let v4 = format!("coap://127.0.0.1:{}", s.port);
    let o = corral(&["get", &format!("{base}/hello")]);
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "Hello from corral!\n"));
    let o = corral(&["put", &format!("{v4}/test"), "-e", "new value", "-t", "text", "-N"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = corral(&["get", &format!("{base}/test"), "-v"]);
    assert_eq!(stdout(&o), "new value\n", "a text payload ends with a newline, piped too");
    assert!(stderr(&o).contains("2.05 Content") && stderr(&o).contains("Content-Format: 0"), "{}", stderr(&o));
    let o = corral(&["post", &format!("{base}/test"), "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("--json prints JSON");
    assert_eq!(j["code"], "2.01");
    let names: Vec<&str> = j["options"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(names.iter().filter(|n| **n == "Location-Path").count(), 3, "{j}");
    let o = corral(&["delete", &format!("{base}/test")]);
    assert_eq!(code(&o), 0);
    let o = corral(&["get", &format!("{base}/separate"), "-B", "5"]);
    assert_eq!(stdout(&o), "the separate response of /separate\n");
    let o = corral(&["get", &format!("{base}/multi-format"), "-A", "xml", "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["content_format"], 41);
    let o = corral(&["get", &format!("{base}/multi-format"), "-A", "octet-stream"]);
    assert_eq!(code(&o), 4);
    assert!(stderr(&o).contains("4.06 Not Acceptable"), "{}", stderr(&o));
    let o = corral(&["get", &format!("{base}/query?a=1&b=2"), "-O", "15,c=3"]);
    assert_eq!(stdout(&o), "query: a=1&b=2&c=3\n");
    let o = corral(&["put", &format!("{base}/create1"), "-O", "5", "-e", "x", "-v"]);
    assert!(stderr(&o).contains("2.01 Created"), "{}", stderr(&o));
    let o = corral(&["put", &format!("{base}/create1"), "-O", "If-None-Match", "-e", "x"]);
    assert_eq!(code(&o), 4);
    assert!(stderr(&o).contains("4.12 Precondition Failed"), "{}", stderr(&o));
    // A payload from standard input, echoed back as JSON with a binary payload in base64.
    let mut cmd = std::process::Command::new(CORRAL);
    cmd.args(["post", &format!("{base}/echo"), "-f", "-", "-t", "octet-stream", "--json"]);
    let out = {
        use std::io::Write;
        let mut child =
            cmd.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).spawn().expect("start corral");
        child.stdin.take().expect("stdin is piped").write_all(&[0, 1, 2, 0xff]).unwrap();
        child.wait_with_output().unwrap()
    };
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((j["payload"].as_str(), j["payload_encoding"].as_str()), (Some("AAEC/w=="), Some("base64")));
}

#[test]
fn discover_prints_an_aligned_table() {
    let s = corral_serve("127.0.0.1", &[]);
    let o = corral(&["discover", &format!("coap://127.0.0.1:{}", s.port)]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("PATH") && lines[0].contains("RT") && lines[0].contains("TITLE"));
    let link1 = lines.iter().find(|l| l.starts_with("/link1 ")).expect("/link1 listed");
    assert!(link1.contains("Type1 Type2") && link1.contains("If1"), "{link1}");
    let title_col = lines[0].find("TITLE").unwrap();
    assert!(lines.iter().skip(1).filter(|l| l.len() > title_col).all(|l| l.as_bytes()[title_col - 1] == b' '));
    let o = corral(&["discover", &format!("coap://127.0.0.1:{}?rt=Type1", s.port), "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let paths: Vec<&str> = j.as_array().unwrap().iter().map(|l| l["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/link1", "/link3"]);
    // Block-wise transfer would carry more, but discovery in one 1024-byte block suits every client.
    let o = corral(&["get", &format!("coap://127.0.0.1:{}/.well-known/core", s.port)]);
    assert!(o.stdout.len() < 1100, "{} bytes", o.stdout.len());
}

#[test]
fn help_teaches_with_examples_and_exit_codes() {
    let o = corral(&["--help"]);
    let out = stdout(&o);
    assert!(out.contains("Exit status:") && out.contains("4  the server answered 4.xx"), "{out}");
    assert!(out.contains("6  a block-wise transfer failed"), "{out}");
    let o = corral(&["get", "--help"]);
    let out = stdout(&o);
    assert!(out.contains("--content-format") && out.contains("Examples:"));
    assert!(
        out.contains("--observe <DURATION>") && out.contains("--block-size <[NUM,]SIZE>") && out.contains("coap+tcp")
    );
}

#[test]
fn bench_reports_rate_and_latency() {
    let s = corral_serve("127.0.0.1", &[]);
    let o = corral(&["bench", &format!("coap://127.0.0.1:{}/hello", s.port), "-c", "4", "-n", "2000", "--json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["requests"], 2000);
    assert_eq!(j["errors"], 0);
    assert!(j["latency_ms"]["p99"].as_f64().unwrap() >= j["latency_ms"]["p50"].as_f64().unwrap());
}

/// Malformed datagrams and requests from thousands of source ports: the server keeps answering valid
/// requests, its tables stay within the corral-proto limits and its memory stays bounded.
#[test]
fn flood_leaves_corral_serve_answering_with_bounded_memory() {
    let s = corral_serve("127.0.0.1", &["-q", "--max-peers", "1000", "--max-pending", "200"]);
    let dst: std::net::SocketAddr = format!("127.0.0.1:{}", s.port).parse().unwrap();
    let stats_uri = format!("coap://127.0.0.1:{}/stats", s.port);
    assert_eq!(code(&corral(&["get", &stats_uri])), 0);
    let rss_before = s.rss_kib().expect("read VmRSS");
    let mut sources = 0u32;
    for round in 0..20u16 {
        let sockets: Vec<std::net::UdpSocket> =
            (0..250).map(|_| std::net::UdpSocket::bind("127.0.0.1:0").expect("flood socket")).collect();
        for (i, sock) in sockets.iter().enumerate() {
            let mid = (round as usize * 250 + i) as u16;
            // A request for a missing resource, a NON to /separate (answered late: pins inbound state), and
            // three malformed datagrams.
            let get = [0x40, 0x01, (mid >> 8) as u8, mid as u8, 0xb4, b'n', b'o', b'p', b'e'];
            let sep =
                [0x50, 0x01, (mid >> 8) as u8 ^ 0x80, mid as u8, 0xb8, b's', b'e', b'p', b'a', b'r', b'a', b't', b'e'];
            for d in
                [&get[..], &sep[..], &[0x40, 0x01, 0x00][..], &[0x4f, 0x01, 0, 1][..], &[0x40, 0x01, 0, 2, 0xf0][..]]
            {
                let _ = sock.send_to(d, dst);
            }
            sources += 1;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // Still answering valid requests, at once: the flood's pending requests (from sources that never
    // proved their address) give way to new ones.
    let hello = format!("coap://127.0.0.1:{}/hello", s.port);
    let o = corral(&["get", &hello, "-B", "5"]);
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "Hello from corral!\n"), "{}", stderr(&o));
    let o = corral(&["get", &stats_uri, "-B", "5"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stats are JSON");
    let dedup_per_peer = corral_proto::Limits::default().dedup_per_peer as u64;
    let tables = &j["tables"];
    assert!(tables["peers"].as_u64().unwrap() <= 1000, "{j}");
    assert!(tables["inbound_exchanges"].as_u64().unwrap() <= 200, "{j}");
    assert!(tables["dedup"].as_u64().unwrap() <= 1000 * dedup_per_peer, "{j}");
    assert!(j["malformed_in"].as_u64().unwrap() >= u64::from(sources), "the flood arrived: {j}");
    assert!(j["peers_evicted"].as_u64().unwrap() > 0, "the peer limit was reached: {j}");
    assert!(j["displaced"].as_u64().unwrap() > 0, "the pending limit was reached: {j}");
    let rss_after = s.rss_kib().expect("read VmRSS");
    // 5,000 sources × 5 datagrams; state is capped by Limits, so growth stays far below this bound.
    assert!(rss_after < rss_before + 64 * 1024, "RSS grew from {rss_before} KiB to {rss_after} KiB");
}

/// IPv6 multicast needs an interface that does multicast; loopback does not, so this runs `corral serve`
/// in a throwaway network namespace with a bridge (root only; skipped otherwise). The server joins
/// ff02::fd, answers a multicast GET after leisure, and stays silent on a multicast request for a missing
/// resource (RFC 7252 §8.2).
#[test]
fn ipv6_multicast_in_a_network_namespace() {
    let Some(ns) = Netns::new("serve", &["fd01::1"]) else { return };
    let index = ns.br0_index.clone();
    let server = spawn_with_port(
        ns.command(CORRAL).args([
            "serve",
            "--bind",
            "[::]:0",
            "--join",
            "ff02::fd",
            "--mcast-if6",
            &index,
            "--leisure",
            "0.2",
        ]),
        |line| {
            line.strip_prefix("corral serve: listening on ")?
                .split_whitespace()
                .next()?
                .rsplit_once(':')?
                .1
                .parse()
                .ok()
        },
    );
    let uri = |path: &str| format!("coap://[ff02::fd%25br0]:{}{path}", server.port);
    let o = run(ns.command(CORRAL).args(["get", &uri("/hello"), "-B", "2", "--json"]), Duration::from_secs(10));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j.as_array().map(Vec::len), Some(1), "{j}");
    assert_eq!(j[0]["payload"], "Hello from corral!");
    assert_eq!(j[0]["from"], format!("[fd01::1]:{}", server.port));
    let o = run(ns.command(CORRAL).args(["get", &uri("/nope"), "-B", "1"]), Duration::from_secs(10));
    assert_eq!(code(&o), 3, "no error response to a multicast request: {}", stderr(&o));
}

fn stats(port: u16) -> serde_json::Value {
    let o = corral(&["get", &format!("coap://127.0.0.1:{port}/stats")]);
    serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("stats are JSON: {}", stderr(&o)))
}

/// `-s`: the registration's response and each notification on its own line, then an explicit
/// deregistration (the server has no observer left once the command has exited), over UDP and TCP.
#[test]
fn observe_prints_each_notification_and_deregisters() {
    let s = corral_serve("127.0.0.1", &["--tcp", "--obs-period", "0.2"]);
    for scheme in ["coap", "coap+tcp"] {
        let o = corral(&["get", &format!("{scheme}://127.0.0.1:{}/obs", s.port), "-s", "1.5"]);
        assert_eq!(code(&o), 0, "{scheme}: {}", stderr(&o));
        let values: Vec<u64> = stdout(&o).lines().map(|l| l.parse().expect("one number per line")).collect();
        assert!(values.len() >= 2, "{scheme}: several notifications: {values:?}");
        assert!(values.windows(2).all(|w| w[1] > w[0]), "{scheme}: each one newer: {values:?}");
    }
    assert_eq!(stats(s.port)["tables"]["observers"], 0, "deregistered");
    let o = corral(&["get", &format!("coap://127.0.0.1:{}/obs-non", s.port), "-s", "1", "--json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let lines: Vec<serde_json::Value> =
        stdout(&o).lines().map(|l| serde_json::from_str(l).expect("one JSON object per line")).collect();
    assert!(lines.len() >= 2, "{lines:?}");
    for j in &lines {
        assert_eq!(j["code"], "2.05");
        assert!(j["options"].as_array().unwrap().iter().any(|o| o["name"] == "Observe"), "{j}");
    }
    // A resource that is not observable: its one response, a note, exit 0.
    let o = corral(&["get", &format!("coap://127.0.0.1:{}/hello", s.port), "-s", "5"]);
    assert_eq!((code(&o), stdout(&o).trim()), (0, "Hello from corral!"));
    assert!(stderr(&o).contains("not observable"), "{}", stderr(&o));
}

/// Issue 46 item 4: an observation that ended — its time up, or Ctrl-C — leaves nothing behind at the
/// server. `/obs` deleted afterwards is back at once, nobody observing it to be told (it stayed away until
/// the next change, 30 s here); Ctrl-C deregisters before the command exits 130 (it was killed, and the
/// server kept observing a dead port).
#[test]
fn an_ended_observation_leaves_nothing_behind() {
    let s = corral_serve("127.0.0.1", &["--obs-period", "30"]);
    let obs = format!("coap://127.0.0.1:{}/obs", s.port);
    assert_eq!(code(&corral(&["get", &obs, "-s", "0.5"])), 0);
    assert_eq!(code(&corral(&["delete", &obs])), 0);
    let o = corral(&["get", &obs]);
    assert_eq!(code(&o), 0, "back at once: {}", stderr(&o));
    let o = interrupt(std::process::Command::new(CORRAL).args(["get", &obs, "-s", "30"]), Once::Line);
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(stderr(&o).contains("interrupted: the observation was deregistered"), "{}", stderr(&o));
    assert_eq!(stats(s.port)["tables"]["observers"], 0, "deregistered");
}

/// `-b` and multi-megabyte files: byte-for-byte both ways, over UDP and TCP.
#[test]
fn block_wise_transfers_of_large_files() {
    let s = corral_serve("127.0.0.1", &["--tcp"]);
    let plain = corral(&["get", &format!("coap://127.0.0.1:{}/large", s.port)]);
    assert_eq!(plain.stdout.len(), 1601, "1600 bytes of text and a newline: {}", stderr(&plain));
    let o = corral(&["get", &format!("coap://127.0.0.1:{}/large", s.port), "-b", "64", "-v"]);
    assert_eq!(o.stdout, plain.stdout);
    assert!(!stderr(&o).contains("Block2"), "the assembled response has no Block2: {}", stderr(&o));
    let dir = std::env::temp_dir().join(format!("corral-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("big.bin");
    let body: Vec<u8> = (0..3_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    std::fs::write(&file, &body).unwrap();
    for (scheme, block) in [("coap", "1024"), ("coap+tcp", "512")] {
        let uri = format!("{scheme}://127.0.0.1:{}/large-update", s.port);
        let o = corral(&["put", &uri, "-f", file.to_str().unwrap(), "-t", "octet-stream", "-b", block]);
        assert_eq!(code(&o), 0, "{scheme}: {}", stderr(&o));
        let o = corral(&["get", &uri]);
        assert_eq!(code(&o), 0, "{scheme}: {}", stderr(&o));
        assert!(o.stdout == body, "{scheme}: {} bytes back", o.stdout.len());
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(stats(s.port)["tables"]["uploads"], 0);
}

#[test]
fn coap_over_tcp_against_corral_serve() {
    let s = corral_serve("[::]", &["--tcp"]);
    for host in ["127.0.0.1", "[::1]"] {
        let o = corral(&["get", &format!("coap+tcp://{host}:{}/hello", s.port)]);
        assert_eq!((code(&o), stdout(&o).as_str()), (0, "Hello from corral!\n"), "{}", stderr(&o));
        let o = corral(&["get", &format!("coap+tcp://{host}:{}/nope", s.port)]);
        assert_eq!(code(&o), 4, "{}", stderr(&o));
        assert!(stderr(&o).starts_with("error: 4.04 Not Found"), "{}", stderr(&o));
    }
    let o = corral(&["discover", &format!("coap+tcp://127.0.0.1:{}", s.port)]);
    assert!(stdout(&o).lines().any(|l| l.starts_with("/obs ") && l.contains("yes")), "{}", stdout(&o));
    // Nobody listens on TCP here: a connection error, exit 3.
    let u = corral_serve("127.0.0.1", &[]);
    let o = corral(&["get", &format!("coap+tcp://127.0.0.1:{}/hello", u.port)]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot connect"), "{}", stderr(&o));
}

/// `corral serve --json`: one JSON object with the bound addresses, for scripts that use port 0.
#[test]
fn serve_json_summary_names_its_addresses() {
    let (_s, j) =
        spawn_json(std::process::Command::new(CORRAL).args(["serve", "--bind", "127.0.0.1:0", "--tcp", "--json"]));
    let udp: std::net::SocketAddr = j["udp"].as_str().unwrap().parse().unwrap();
    assert_ne!(udp.port(), 0);
    assert_eq!(j["tcp"].as_str().unwrap().parse::<std::net::SocketAddr>().unwrap().port(), udp.port());
    let o = corral(&["get", &format!("{}/hello", j["uri"].as_str().unwrap())]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

/// `corral serve --workers 2`: two endpoints on one port (SO_REUSEPORT). Every client is answered, an
/// observation keeps getting its notifications (all datagrams of one client address and port reach the
/// same worker), and a multicast group is refused, since each worker would answer it.
#[test]
fn serve_workers_share_one_port() {
    // The blocking driver (the default without --tcp) and the tokio driver (with it).
    let blocking = corral_serve("127.0.0.1", &["--workers", "2", "--obs-period", "0.2"]);
    let s = corral_serve("127.0.0.1", &["--workers", "2", "--tcp", "--obs-period", "0.2"]);
    for port in [blocking.port, s.port] {
        for _ in 0..8 {
            let o = corral(&["get", &format!("coap://127.0.0.1:{port}/hello")]);
            assert_eq!((code(&o), stdout(&o).as_str()), (0, "Hello from corral!\n"), "{}", stderr(&o));
        }
        let o = corral(&["get", &format!("coap://127.0.0.1:{port}/obs"), "-s", "1.2"]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let values: Vec<u64> = stdout(&o).lines().map(|l| l.parse().expect("one number per line")).collect();
        assert!(values.len() >= 2 && values.windows(2).all(|w| w[1] > w[0]), "{values:?}");
    }
    let o = corral(&["get", &format!("coap+tcp://127.0.0.1:{}/hello", s.port)]);
    assert_eq!(code(&o), 0, "TCP is served by the first worker: {}", stderr(&o));
    let o = corral(&["serve", "--bind", "127.0.0.1:0", "--workers", "2", "--join", "224.0.1.187"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("every worker would answer"), "{}", stderr(&o));
}
