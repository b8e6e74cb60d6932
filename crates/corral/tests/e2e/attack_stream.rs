//! Issue 26 item 8 and issue 27 item 4: `corral stream` against a spoofer and a dead collector. The
//! spoofing tests run the collector on host `a` and a raw-socket spoofer on host `b` of two network
//! namespaces (root only; skipped otherwise): the spoofer sends as a victim address of `b`'s, and a socket
//! there that never sends anything counts what the collector sends the victim.

use crate::common;
use common::*;
use corral_proto::wire::{Code, Message, MessageId, MessageType, OptionNumber, Token};
use corral_stream::{ScOption, SC_OPTION};
use std::process::{Command, Output};
use std::time::Duration;

fn out(o: &Output) -> String {
    format!("status {:?}\nstdout: {}\nstderr: {}", o.status.code(), stdout(o), stderr(o))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A request to `path` as the spoofer sends it.
fn request(mtype: MessageType, code: Code, mid: u16, path: &str) -> Message {
    let mut m = Message::new(mtype, code, MessageId(mid), Token::new(&[0x5c, mid as u8]).unwrap());
    for seg in path.split('/').filter(|s| !s.is_empty()) {
        m.options.push(OptionNumber::URI_PATH, seg.as_bytes());
    }
    m
}

/// `spoof.py`: the datagrams (source port, message) sent from `src` inside `ns`, and for `listen` seconds
/// what the first source port gets back.
fn spoof(ns: &Netns, src: &str, dst: &str, listen: f64, grams: &[(u16, Message)]) -> serde_json::Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peers/spoof.py");
    let (ip, port) = dst.rsplit_once(':').unwrap();
    let mut cmd = ns.command("python3");
    cmd.args([script, src, ip, port, &listen.to_string()]);
    cmd.args(grams.iter().map(|(p, m)| format!("{p}:{}", hex(&m.encode()))));
    let o = run(&mut cmd, Duration::from_secs(60));
    assert!(o.status.success(), "{}", out(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", out(&o)))
}

/// `corral stream recv` on host `a`; its UDP address.
fn collector(a: &Netns, ip: &str) -> (Proc, String) {
    let (p, j) = spawn_json(a.command(CORRAL).args(["stream", "recv", "--bind", &format!("{ip}:0"), "--json"]));
    (p, j["udp"].as_str().unwrap().to_string())
}

/// Streams the collector holds, asked from its own host (the figure before the fix listed them all).
fn held(a: &Netns, udp: &str) -> u64 {
    let o = run(a.command(CORRAL).args(["get", &format!("coap://{udp}/stream")]), Duration::from_secs(20));
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    j["held"].as_u64().unwrap_or_else(|| j["streams"].as_array().map_or(0, |s| s.len() as u64))
}

/// The attack of issue 26 item 8: as the victim, create a stream, start it, and send one reading whose
/// sequence number reveals a gap of 64 — before, 66 control datagrams went to the victim (and the idle
/// asks after them). Now the creation is challenged and the stream does not exist: the victim gets at most
/// three times what was sent in its name.
#[test]
fn a_spoofer_cannot_make_the_collector_send_its_victim_more_than_it_sent() {
    let Some((a, b)) = netns_pair("sts", 241, &["10.241.0.9"]) else { return };
    let (_c, udp) = collector(&a, "10.241.0.1");
    let mut post = request(MessageType::Non, Code::POST, 1, "stream");
    post.payload = b"3".to_vec();
    let mut start = request(MessageType::Non, Code::GET, 2, "stream/1");
    start.options.push(SC_OPTION, &ScOption { sn: 0, an: 0 }.encode());
    let mut reading = request(MessageType::Non, Code::PUT, 3, "stream/1");
    reading.options.push(SC_OPTION, &ScOption { sn: 65, an: 0 }.encode());
    reading.options.push_uint(OptionNumber::NO_RESPONSE, 26);
    let victim = 40_000;
    let r = spoof(&b, "10.241.0.9", &udp, 6.0, &[(victim, post), (victim, start), (victim, reading)]);
    let (sent, got) = (r["sent_bytes"].as_f64().unwrap(), r["received_bytes"].as_f64().unwrap());
    println!(
        "spoofed {sent} bytes in 3 datagrams; the victim got {} datagrams, {got} bytes: {:.1}x",
        r["received"],
        got / sent
    );
    assert!(got <= 3.0 * sent, "{r}");
    assert!(r["received"].as_u64().unwrap() <= 3, "{r}");
    assert_eq!(held(&a, &udp), 0, "nothing was created in the victim's name");
}

/// Before, 71 spoofed POSTs filled the collector's 64 streams for 600 s and a real sender got 5.03; now
/// none of them holds a slot, and the real sender streams.
#[test]
fn spoofed_creations_hold_no_slots() {
    let Some((a, b)) = netns_pair("stp", 242, &["10.242.0.9"]) else { return };
    let (_c, udp) = collector(&a, "10.242.0.1");
    let grams: Vec<(u16, Message)> = (0..71u16)
        .map(|i| {
            let mut post = request(MessageType::Non, Code::POST, 100 + i, "stream");
            post.payload = b"5".to_vec();
            (41_000 + i, post)
        })
        .collect();
    spoof(&b, "10.242.0.9", &udp, 0.0, &grams);
    std::thread::sleep(Duration::from_millis(300));
    let taken = held(&a, &udp);
    println!("after 71 spoofed creations the collector holds {taken} streams");
    assert_eq!(taken, 0);
    let o = run(
        b.command(CORRAL).args([
            "stream",
            "send",
            &format!("coap://{udp}"),
            "--count",
            "20",
            "--interval",
            "10ms",
            "--json",
        ]),
        Duration::from_secs(60),
    );
    assert_eq!(o.status.code(), Some(0), "a real sender streams: {}", out(&o));
}

/// Issue 27 item 4: a collector that does not answer (a socket that swallows everything) and one that
/// is not there (nothing on the port): `corral stream send` gives up after `--timeout` with exit status 3
/// and one line naming the collector.
#[test]
fn stream_send_gives_up_on_a_collector_that_does_not_answer() {
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let closed = free_udp_port();
    for uri in [format!("coap://{}", silent.local_addr().unwrap()), format!("coap://127.0.0.1:{closed}")] {
        let o =
            run(Command::new(CORRAL).args(["stream", "send", &uri, "--timeout", "1", "-q"]), Duration::from_secs(30));
        assert_eq!(o.status.code(), Some(3), "{uri}: {}", out(&o));
        let text = stderr(&o);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "{uri}: one line: {}", out(&o));
        assert!(lines[0].starts_with("error: ") && lines[0].contains(&uri), "it names the collector: {}", out(&o));
    }
}

/// The collector goes away in the middle of a stream: the sender's buffer fills, nothing answers, and it
/// gives up after `--timeout` instead of waiting forever.
#[test]
fn stream_send_gives_up_when_the_collector_dies_mid_stream() {
    let (recv, j) = spawn_json(Command::new(CORRAL).args(["stream", "recv", "--bind", "127.0.0.1:0", "--json"]));
    let uri = format!("coap://{}", j["udp"].as_str().unwrap());
    let mut send = Command::new(CORRAL)
        .args(["stream", "send", &uri, "--count", "100000", "--interval", "10ms", "--buffer", "4", "--timeout", "2"])
        .args(["-q"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    drop(recv); // SIGKILL
    let started = std::time::Instant::now();
    let o = loop {
        if send.try_wait().unwrap().is_some() {
            break send.wait_with_output().unwrap();
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = send.kill();
            panic!(
                "stream send still running 30 s after the collector died: {}",
                out(&send.wait_with_output().unwrap())
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(o.status.code(), Some(3), "{}", out(&o));
    assert!(stderr(&o).contains(&uri), "{}", out(&o));
}
