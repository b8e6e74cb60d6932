//! One meaning per flag across verbs, libcoap's where libcoap has one: durations with units everywhere
//! (a bare number is seconds, on every flag), `-b` the block size and never a bind address, coap-client's
//! `-m -o -a -p -w -H` on the client verbs and its `-v LEVEL`. `corral bench --payload` never changes the
//! method by itself.

use crate::common;
use common::*;
use std::process::Command;

/// `corral ARGS… --help`: clap checks every value given before `--help` and then prints help, so this
/// asks whether the flags parse without starting a server.
fn parses(args: &[&str]) -> std::process::Output {
    let mut all = args.to_vec();
    all.push("--help");
    corral(&all)
}

#[test]
fn durations_take_units_on_every_verb() {
    for args in [
        &["get", "coap://[::1]/x", "-B", "2.5s", "-s", "1m"][..],
        &["discover", "coap://[::1]", "-B", "500ms"],
        &["serve", "--obs-period", "200ms", "--leisure", "1.5s"],
        &["serve", "--obs-period", "2"],
        &["gateway", "--leisure", "300ms", "--quarantine", "10m"],
        &["device", "--leisure", "0.3"],
        &["proxy", "--upstream-timeout", "2500ms"],
        &["bench", "coap://[::1]/", "-d", "1m", "--timeout", "250ms"],
        &["stream", "send", "coap://[::1]", "--interval", "10ms"],
        &["link", "run", "--delay", "50ms", "--jitter", "1.5ms", "--settle", "2s"],
        &["entity", "-B", "45s", "list"],
        &["entity", "use", "room1", "--timeout", "3s"],
    ] {
        let o = parses(args);
        assert_eq!(code(&o), 0, "{args:?}: {}", stderr(&o));
    }
}

/// Issue 46: the help says "a bare number is seconds", and so it is on every duration flag — the flags
/// that read milliseconds once refused one (`--timeout 3` was "needs a unit").
#[test]
fn a_bare_number_is_seconds_on_every_duration_flag() {
    for args in [
        &["stream", "send", "coap://[::1]", "--interval", "0.1"][..],
        &["link", "run", "--delay", "1", "--settle", "2", "--", "true", ":::", "true"],
        &["link", "up", "--jitter", "0.005"],
        &["entity", "use", "room1", "--timeout", "3"],
        &["entity", "update", "room1", "--timeout", "3", "--delay", "0.05"],
        &["link", "up", "--delay", "0"],
    ] {
        let o = parses(args);
        assert_eq!(code(&o), 0, "{args:?}: {}", stderr(&o));
    }
    // --delay (DURATION or auto) is read by the verb itself: 2 is two seconds, as milliseconds on the wire.
    let o = corral(&["entity", "create", "room1", "coap://127.0.0.2/s/t", "--delay", "soon"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("a bare number is seconds") && stderr(&o).lines().count() == 1, "{}", stderr(&o));
}

/// coap-client's `-v LEVEL` (issue 46: "unexpected argument '7'"): 7 is debug, as `-vv`; a level of 5 or
/// less is the default.
#[test]
fn coap_clients_verbosity_level_is_accepted() {
    let s = corral_serve("127.0.0.1", &[]);
    let hello = format!("coap://127.0.0.1:{}/hello", s.port);
    let o = corral(&["get", &hello, "-v", "7"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stderr(&o).contains("DEBUG"), "debug logs: {}", stderr(&o));
    let o = corral(&["get", "-v", "4", &hello]);
    assert_eq!((code(&o), stderr(&o).as_str()), (0, ""), "{}", stderr(&o));
}

/// `entity update --ect` (issue 46: clap suggested `--emt`): says that `ect` is chosen at creation and
/// what to do instead.
#[test]
fn entity_update_ect_says_it_is_chosen_at_creation() {
    let o = corral(&["entity", "update", "room1", "--ect", "multicast"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("--ect is chosen when an entity is created") && err.contains("delete room1"), "{err}");
    assert!(!err.contains("--emt") && err.lines().count() == 1, "{err}");
}

#[test]
fn stream_interval_of_10ms_streams() {
    let s = corral_serve("127.0.0.1", &[]);
    let uri = format!("coap://127.0.0.1:{}", s.port);
    let o = corral(&["stream", "send", &uri, "--count", "20", "--interval", "10ms", "--json", "-q"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((j["interval_ms"].as_u64(), j["acknowledged"].as_u64()), (Some(10), Some(20)), "{j}");
}

/// `-b` is the block size (libcoap's); servers bind with --bind only.
#[test]
fn dash_b_is_never_a_bind_address() {
    for server in ["serve", "proxy", "device", "gateway"] {
        let o = parses(&[server, "-b", "127.0.0.1:0"]);
        assert_eq!(code(&o), 2, "{server} -b: {}", stderr(&o));
    }
    let o = parses(&["stream", "recv", "-b", "127.0.0.1:0"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert_eq!(code(&parses(&["get", "coap://[::1]/x", "-b", "64"])), 0);
}

/// `-m METHOD`: `corral request -m` sends any method; after a verb it may repeat it, not contradict it.
#[test]
fn dash_m_chooses_the_method() {
    let s = corral_serve("127.0.0.1", &[]);
    let test = format!("coap://127.0.0.1:{}/test", s.port);
    let o = corral(&["request", "-m", "put", &test, "-e", "via -m", "-t", "text"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = corral(&["request", &test]);
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "via -m\n"), "GET without -m: {}", stderr(&o));
    let o = corral(&["put", &test, "-m", "PUT", "-e", "same", "-t", "text"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = corral(&["get", &test, "-m", "delete"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("corral request -m delete"), "{}", stderr(&o));
    assert_eq!(stdout(&corral(&["get", &test])), "same\n", "the contradiction sent nothing");
    assert_eq!(code(&corral(&["request", "-m", "frobnicate", &test])), 2);
}

/// `-o FILE` takes the payload as received; `-w` appends a newline to every payload (libcoap's).
#[test]
fn dash_o_writes_the_payload_and_dash_w_appends_newlines() {
    let s = corral_serve("127.0.0.1", &["--obs-period", "200ms"]);
    let base = format!("coap://127.0.0.1:{}", s.port);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("large.txt");
    let f = file.to_str().unwrap();
    let o = corral(&["get", &format!("{base}/large"), "-o", f]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(o.stdout.is_empty(), "nothing on stdout");
    let body = std::fs::read(&file).unwrap();
    assert_eq!(body.len(), 1600, "the bytes as received, no newline added");
    let o = corral(&["get", &format!("{base}/hello"), "-o", f, "-w"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "Hello from corral!\n", "replaced, with -w's newline");
    // Observing into a file: each notification after the previous one, one per line with -w.
    let o = corral(&["get", &format!("{base}/obs"), "-s", "1s", "-o", f, "-w"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let text = std::fs::read_to_string(&file).unwrap();
    let values: Vec<u64> = text.lines().map(|l| l.parse().expect("one number per line")).collect();
    assert!(values.len() >= 2 && values.windows(2).all(|w| w[1] > w[0]), "{text:?}");
    // A binary payload piped to stdout stays byte for byte without -w, and gets the newline with it.
    let bin = dir.path().join("bin");
    std::fs::write(&bin, [0u8, 1, 2, 0xff]).unwrap();
    let upd = format!("{base}/large-update");
    assert_eq!(code(&corral(&["put", &upd, "-f", bin.to_str().unwrap(), "-t", "octet-stream"])), 0);
    assert_eq!(corral(&["get", &upd]).stdout, [0u8, 1, 2, 0xff]);
    assert_eq!(corral(&["get", &upd, "-w"]).stdout, [0u8, 1, 2, 0xff, b'\n']);
    // A failed request leaves no file behind.
    let none = dir.path().join("none.txt");
    let o = corral(&["get", &format!("{base}/nope"), "-o", none.to_str().unwrap()]);
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(!none.exists());
}

/// `-a ADDR -p PORT`: the request leaves from that address and port (the peer sees them).
#[test]
fn dash_a_and_dash_p_choose_the_local_address_and_port() {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = sock.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut buf = [0u8; 1500];
        while let Ok((n, from)) = sock.recv_from(&mut buf) {
            if n < 4 {
                continue;
            }
            // ACK 2.05 with the request's message ID and token; the payload is where it came from.
            let tkl = (buf[0] & 0x0f) as usize;
            let mut m = vec![0x60 | tkl as u8, 0x45, buf[2], buf[3]];
            m.extend_from_slice(&buf[4..4 + tkl]);
            m.push(0xff);
            m.extend_from_slice(from.to_string().as_bytes());
            let _ = sock.send_to(&m, from);
        }
    });
    let local = free_udp_port().to_string();
    let o = corral(&["get", &format!("coap://127.0.0.1:{port}/x"), "-a", "127.0.0.5", "-p", &local]);
    assert_eq!((code(&o), stdout(&o)), (0, format!("127.0.0.5:{local}")), "{}", stderr(&o));
    let o = corral(&["get", &format!("coap://127.0.0.1:{port}/x"), "-a", "127.0.0.6"]);
    assert!(stdout(&o).starts_with("127.0.0.6:"), "{}", stdout(&o));
    // TCP connects from where the system says: -a/-p would be silently ignored, so they are refused.
    let o = corral(&["get", &format!("coap+tcp://127.0.0.1:{port}/x"), "-p", &local]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
}

/// `-H N`: the Hop-Limit option (RFC 8768); a proxy that would forward it beyond 0 hops answers 5.08.
#[test]
fn dash_h_sets_the_hop_limit() {
    let s = corral_serve("127.0.0.1", &[]);
    let p = spawn_with_port(Command::new(CORRAL).args(["proxy", "--bind", "127.0.0.1:0"]), banner_port);
    let (hello, proxy) = (format!("coap://127.0.0.1:{}/hello", s.port), format!("coap://127.0.0.1:{}", p.port));
    let o = corral(&["get", &hello, "-P", &proxy, "-H", "1"]);
    assert_eq!(code(&o), 5, "{}", stderr(&o));
    assert!(stderr(&o).starts_with("error: 5.08 Hop Limit Reached"), "{}", stderr(&o));
    let o = corral(&["get", &hello, "-P", &proxy, "-H", "2"]);
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "Hello from corral!\n"), "{}", stderr(&o));
    assert_eq!(code(&corral(&["get", &hello, "-H", "0"])), 2, "1 to 255");
}

/// `--payload` without `-m` is refused (a GET carries none, and bench never turns it into a POST); with
/// `-m`, the payload goes with the method given.
#[test]
fn bench_never_changes_the_method() {
    let s = corral_serve("127.0.0.1", &[]);
    let echo = format!("coap://127.0.0.1:{}/echo", s.port);
    let o = corral(&["bench", &echo, "--payload", "10", "-n", "10", "-q"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("-m post"), "{}", stderr(&o));
    for (m, want) in [("post", "POST"), ("put", "PUT")] {
        let o = corral(&["bench", &echo, "--payload", "10", "-m", m, "-n", "10", "-q", "--json"]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(j["method"], want, "{j}");
    }
}
