//! What the client verbs print: a text payload ends with a newline (piped too, as libcoap's coap-client
//! prints it), `-v` decodes block options, observations carry timestamps, JSON numbers are rounded to
//! what was measured, a command that takes more than two seconds shows progress on a terminal, and a
//! server that requires OSCORE says so in a banner whose suggestions work.

use crate::common;
use common::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

#[test]
fn a_text_payload_ends_with_a_newline_when_piped() {
    let s = corral_serve("127.0.0.1", &[]);
    let base = format!("coap://127.0.0.1:{}", s.port);
    assert_eq!(stdout(&corral(&["get", &format!("{base}/hello")])), "Hello from corral!\n");
    let o = corral(&["get", &format!("{base}/multi-format"), "-A", "json"]);
    assert!(stdout(&o).ends_with("}\n"), "{:?}", stdout(&o));
    // A payload without a Content-Format is written as it came.
    assert_eq!(code(&corral(&["put", &format!("{base}/large-update"), "-e", "as is"])), 0);
    assert_eq!(stdout(&corral(&["get", &format!("{base}/large-update")])), "as is");
}

/// `-v` shows Block1/Block2 as NUM/M/SIZE (the last block of a 4000-byte upload: 3/0/1024).
#[test]
fn verbose_decodes_block_options() {
    let s = corral_serve("127.0.0.1", &[]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("body.bin");
    std::fs::write(&file, vec![b'z'; 4000]).unwrap();
    let uri = format!("coap://127.0.0.1:{}/large-update", s.port);
    let o = corral(&["put", &uri, "-f", file.to_str().unwrap(), "-b", "1024", "-v"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stderr(&o).contains("Block1: 3/0/1024"), "{}", stderr(&o));
}

/// A UTC RFC 3339 time with milliseconds, as `--timestamps` prints it: its seconds since the epoch.
fn parse_timestamp(t: &str) -> Option<u64> {
    let b = t.as_bytes();
    let ok = t.len() == 24 && b[4] == b'-' && b[10] == b'T' && b[19] == b'.' && t.ends_with('Z');
    if !ok {
        return None;
    }
    let n = |r: std::ops::Range<usize>| t.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (n(0..4)?, n(5..7)?, n(8..10)?);
    let (hh, mm, ss) = (n(11..13)?, n(14..16)?, n(17..19)?);
    // Days from civil (Howard Hinnant's algorithm), the inverse of what corral prints.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days * 86_400 + hh * 3600 + mm * 60 + ss).ok()
}

/// `--timestamps`: each notification's line starts with the time it arrived; `--json` always has it.
#[test]
fn observations_carry_timestamps() {
    let s = corral_serve("127.0.0.1", &["--obs-period", "200ms"]);
    let obs = format!("coap://127.0.0.1:{}/obs", s.port);
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
    let o = corral(&["get", &obs, "-s", "1.2s", "--timestamps"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let lines: Vec<(u64, u64)> = stdout(&o)
        .lines()
        .map(|l| {
            let (t, v) = l.split_once(' ').unwrap_or_else(|| panic!("`TIME VALUE`: {l}"));
            (parse_timestamp(t).unwrap_or_else(|| panic!("an RFC 3339 time: {t}")), v.parse().expect("a value"))
        })
        .collect();
    assert!(lines.len() >= 2, "{lines:?}");
    assert!(lines.iter().all(|(t, _)| t.abs_diff(now) < 60), "the time of arrival, in UTC: {lines:?} vs {now}");
    assert!(lines.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1), "{lines:?}");
    let o = corral(&["get", &obs, "-s", "600ms", "--json"]);
    for line in stdout(&o).lines() {
        let j: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(j["timestamp"].as_str().and_then(parse_timestamp).is_some(), "{j}");
    }
    assert_eq!(code(&corral(&["get", &obs, "--timestamps"])), 2, "--timestamps is for observations (-s)");
}

/// No `1.4585299999999994` or `-0.0`: measured numbers carry the digits the measurement has.
#[test]
fn json_numbers_are_rounded_to_what_was_measured() {
    let s = corral_serve("127.0.0.1", &[]);
    let base = format!("coap://127.0.0.1:{}", s.port);
    let bench = corral(&["bench", &format!("{base}/hello"), "-c", "2", "-n", "300", "--json", "-q"]);
    let stream = corral(&["stream", "send", &base, "--count", "5", "--interval", "20ms", "--json", "-q"]);
    for o in [bench, stream] {
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let text = stdout(&o);
        let j: serde_json::Value = serde_json::from_str(&text).unwrap();
        let mut numbers = Vec::new();
        collect_numbers(&j, &mut numbers);
        assert!(numbers.len() >= 5, "{text}");
        for n in numbers {
            let digits = n.split_once('.').map_or(0, |(_, d)| d.len());
            assert!(digits <= 3 && !n.starts_with("-0"), "{n} in {text}");
        }
    }
}

fn collect_numbers(j: &serde_json::Value, out: &mut Vec<String>) {
    match j {
        serde_json::Value::Number(n) => out.push(n.to_string()),
        serde_json::Value::Array(a) => a.iter().for_each(|v| collect_numbers(v, out)),
        serde_json::Value::Object(o) => o.values().for_each(|v| collect_numbers(v, out)),
        _ => {}
    }
}

/// `corral ARGS…` on a pseudo-terminal (`script`), where progress is shown: what it wrote.
fn on_a_terminal(args: &[&str]) -> String {
    let cmd = std::iter::once(CORRAL).chain(args.iter().copied()).map(|a| format!("'{a}'")).collect::<Vec<_>>();
    let o = run(Command::new("script").args(["-qec", &cmd.join(" "), "/dev/null"]), Duration::from_secs(20));
    stdout(&o)
}

/// Every client command that can take more than two seconds keeps a progress line on a terminal: a
/// request, discovery, an observation's registration, a multicast request's collection window.
#[test]
fn progress_on_a_terminal_after_two_seconds() {
    if Command::new("script").arg("--version").output().is_err() {
        println!("skipped: `script` (util-linux) is needed for a pseudo-terminal");
        return;
    }
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let uri = format!("coap://127.0.0.1:{}", silent.local_addr().unwrap().port());
    let group = format!("coap://239.255.77.{}:{}/x", 1 + std::process::id() % 200, free_udp_port());
    for (args, want) in [
        (vec!["get", &format!("{uri}/x"), "-B", "3"], "waiting for the response… 2 s"),
        (vec!["discover", &uri, "-B", "3"], "waiting for the response… 2 s"),
        (vec!["get", &format!("{uri}/obs"), "-s", "10", "-B", "3"], "waiting for the response… 2 s"),
        (vec!["get", &group, "--mcast-if", "127.0.0.1", "-B", "3"], "collecting answers… 2 s of 3s"),
    ] {
        let out = on_a_terminal(&args);
        assert!(out.contains(want), "{args:?}: {out:?}");
        assert!(out.contains("\r\x1b[2K"), "{args:?}: the line is cleared: {out:?}");
    }
}

/// `corral serve --require-oscore`: the banner says plain requests are refused, and every command it
/// suggests works as printed (they carry the client's credentials).
#[test]
fn a_server_requiring_oscore_says_so_and_its_suggestions_work() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_udp_port();
    let keys = dir.path().join("keys");
    let o =
        corral(&["oscore", "new", "--server", &format!("coap://127.0.0.1:{port}"), "--dir", keys.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let server = keys.join("server.json");
    let child = Command::new(CORRAL)
        .args(["serve", "--bind", &format!("127.0.0.1:{port}"), "--credentials", server.to_str().unwrap()])
        .arg("--require-oscore")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start corral serve");
    let mut server = Proc { child, port };
    let (tx, rx) = std::sync::mpsc::channel();
    let out = server.child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut banner = Vec::new();
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(20)) {
        let last = line.trim_start().starts_with("corral bench");
        banner.push(line);
        if last {
            break;
        }
    }
    let text = banner.join("\n");
    assert!(text.contains("OSCORE required") && text.contains("4.01"), "{text}");
    let suggested: Vec<&str> = banner.iter().filter(|l| l.starts_with("  corral ")).map(|l| l.trim()).collect();
    assert!(suggested.len() >= 5, "{text}");
    for cmd in suggested {
        assert!(cmd.starts_with("corral discover") || cmd.contains("--credentials"), "{cmd}");
        // As printed, through the shell (the suggestions quote their payloads).
        let o = run(
            Command::new("sh").arg("-c").arg(format!("PATH={}:$PATH {cmd}", dir_of(CORRAL))),
            Duration::from_secs(30),
        );
        assert_eq!(code(&o), 0, "`{cmd}`: {}", stderr(&o));
    }
    let o = corral(&["get", &format!("coap://127.0.0.1:{port}/hello")]);
    assert_eq!(code(&o), 4, "a plain request is refused: {}", stderr(&o));
    drop(server);
}

fn dir_of(binary: &str) -> String {
    std::path::Path::new(binary).parent().unwrap().display().to_string()
}

/// A group member that answers a multicast GET on loopback after `after`, as a server whose leisure ran
/// that long does.
fn late_member(group: std::net::Ipv4Addr, after: Duration) -> (std::net::UdpSocket, u16) {
    use corral_tokio::corral_proto::wire::{Code, Message, MessageType};
    let s = std::net::UdpSocket::bind("0.0.0.0:0").expect("bind");
    s.join_multicast_v4(&group, &std::net::Ipv4Addr::LOCALHOST).expect("join the group on lo");
    let port = s.local_addr().unwrap().port();
    let reader = s.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 1500];
        while let Ok((n, from)) = reader.recv_from(&mut buf) {
            let Ok(m) = Message::parse(&buf[..n]) else { continue };
            std::thread::sleep(after);
            let mut reply = Message::new(MessageType::Non, Code::CONTENT, m.mid, m.token);
            reply.payload = b"late".to_vec();
            let _ = reader.send_to(&reply.encode(), from);
        }
    });
    (s, port)
}

/// A multicast window shorter than the servers' leisure loses late answers: the client says so — when
/// answers were still coming late in the window, not when every server had answered early in it (issue
/// 46: the note came after every answer had arrived within 0.2 s of a 1 s window).
#[test]
fn a_multicast_window_shorter_than_the_leisure_is_pointed_out() {
    let group: std::net::Ipv4Addr = format!("239.255.79.{}", 1 + std::process::id() % 200).parse().unwrap();
    let (_late, port) = late_member(group, Duration::from_secs(3));
    let uri = format!("coap://{group}:{port}/hello");
    let o = corral(&["get", &uri, "--mcast-if", "127.0.0.1", "-B", "4s"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("late"), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("note: answers were collected for 4s") && stderr(&o).contains("-B 5s"),
        "{}",
        stderr(&o)
    );
}

/// Servers that answered early in the window: no note.
#[test]
fn a_multicast_window_that_heard_every_answer_early_has_no_note() {
    let group = format!("239.255.78.{}", 1 + std::process::id() % 200);
    let port = free_udp_port();
    let s = spawn_with_port(
        Command::new(CORRAL).args(["serve", "--bind", &format!("0.0.0.0:{port}"), "--join", &group]).args([
            "--mcast-if",
            "127.0.0.1",
            "--leisure",
            "200ms",
        ]),
        banner_port,
    );
    let uri = format!("coap://{group}:{}/hello", s.port);
    let o = corral(&["get", &uri, "--mcast-if", "127.0.0.1", "-B", "1s"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(!stderr(&o).contains("note:"), "every answer within 0.2 s of a 1 s window: {}", stderr(&o));
    let o = corral(&["get", &uri, "--mcast-if", "127.0.0.1", "-B", "5s"]);
    assert!(!stderr(&o).contains("note:"), "{}", stderr(&o));
}

/// Issue 46 item 8: `-q` is quiet on every server verb — no banner, no `try:` lines, nothing on either
/// stream once it is up (`corral gateway -q` printed its banner); `--json` still prints its one line.
#[test]
fn quiet_servers_print_nothing() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().display().to_string();
    let port = free_udp_port();
    let (bind, dev_bind) = (format!("127.0.0.1:{port}"), format!("127.0.164.1:{port}"));
    let servers: [&[&str]; 6] = [
        &["serve", "--bind", &bind, "-q"],
        &["gateway", "--bind", &bind, "--data", &dir, "--testbed", "2", "--testbed-from", &dev_bind, "-q"],
        &["device", "--bind", &dev_bind, "--count", "2", "-q"],
        &["proxy", "--bind", &bind, "-q"],
        &["rd", "--bind", &bind, "--data", &dir, "-q"],
        &["stream", "recv", "--bind", &bind, "-q"],
    ];
    for args in servers {
        // Up: it answers a request (each answers /.well-known/core, or at least refuses it).
        let probe = if args[0] == "device" { dev_bind.clone() } else { bind.clone() };
        let ready = move || {
            let o = corral(&["get", &format!("coap://{probe}/.well-known/core"), "-B", "0.5"]);
            matches!(code(&o), 0 | 4 | 5)
        };
        let o = interrupt(Command::new(CORRAL).args(args), Once::Ready(Box::new(ready)));
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        assert_eq!((stdout(&o).as_str(), stderr(&o).as_str()), ("", ""), "{args:?} under -q");
    }
    let o = interrupt(Command::new(CORRAL).args(["serve", "--bind", &bind, "-q", "--json"]), Once::Line);
    assert!(json_port(stdout(&o).trim()).is_some(), "--json's line stays: {}", stdout(&o));
}

/// The banner and logs name what they show in words: no Debug values (issue 46: `serving tcp=None`).
#[test]
fn a_server_log_has_no_debug_values() {
    let port = free_udp_port();
    let bind = format!("127.0.0.1:{port}");
    let ready = move || code(&corral(&["get", &format!("coap://{bind}/hello"), "-B", "0.5"])) == 0;
    let o = interrupt(
        Command::new(CORRAL).args(["serve", "--bind", &format!("127.0.0.1:{port}"), "-v", "--driver", "tokio"]),
        Once::Ready(Box::new(ready)),
    );
    let err = stderr(&o);
    assert!(err.contains("serving"), "{err}");
    assert!(!err.contains("None") && !err.contains("Some("), "{err}");
}

/// The admin API's JSON (and /readyz's) ends with a newline, as every JSON line corral prints does (issue 46).
#[test]
fn the_admin_apis_json_ends_with_a_newline() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().display().to_string();
    let (gw, j) = spawn_json(Command::new(CORRAL).args([
        "gateway",
        "--bind",
        "127.0.0.1:0",
        "--data",
        &dir,
        "--http",
        "127.0.0.1:0",
        "--json",
    ]));
    let http = j["http"].as_str().unwrap().to_string();
    for path in ["/api/entities", "/api/groups", "/api/entities/nope", "/readyz"] {
        let o = run(Command::new("curl").args(["-s", &format!("http://{http}{path}")]), Duration::from_secs(10));
        let body = stdout(&o);
        assert!(body.starts_with(['[', '{']) && (body.ends_with("}\n") || body.ends_with("]\n")), "{path}: {body:?}");
    }
    drop(gw);
}
