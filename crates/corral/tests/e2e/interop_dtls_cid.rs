//! Connection ID (RFC 9146) against an implementation that is not corral's: pion/dtls through go-coap
//! (`tools/dtls-cid-peer`, built here with `go build`). libcoap 4.3.1's GnuTLS and OpenSSL builds on
//! this machine do not negotiate Connection IDs (neither library has RFC 9146), so pion is the peer.
//! - pion's client against `corral serve --dtls`: its records carry corral's CID (tls12_cid, RFC 9146
//!   §5's additional data), and after it moves to a new source port mid-session corral still answers,
//!   on the same session.
//! - `corral get coaps://` against pion's server, which gives the session a CID: corral's records carry
//!   it (a relay in between sees every protected record as tls12_cid).
//!
//! Runs when `CORRAL_INTEROP=1` (scripts/test.sh sets it); otherwise each test says it was skipped.

use crate::common;
use common::*;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

fn out(o: &std::process::Output) -> String {
    format!("status {:?}\nstdout: {}\nstderr: {}", o.status.code(), stdout(o), stderr(o))
}

/// Builds tools/dtls-cid-peer (once per test binary run) and returns its path.
fn peer() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tools/dtls-cid-peer");
            let bin = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dtls-cid-peer");
            let o = run(
                Command::new("go")
                    .args(["build", "-o"])
                    .arg(&bin)
                    .arg(".")
                    .current_dir(dir)
                    .env("GOTOOLCHAIN", "local")
                    .env("GOFLAGS", "-mod=mod"),
                Duration::from_secs(300),
            );
            assert!(o.status.success(), "go build tools/dtls-cid-peer: {}", out(&o));
            bin
        })
        .clone()
}

#[test]
fn pions_client_keeps_its_session_with_corral_serve_after_changing_port() {
    if !interop_enabled(&["go"]) {
        return;
    }
    let (_dir, s) = corral_dtls_server();
    let addr = format!("127.0.0.1:{}", s.port);
    let o = run(
        Command::new(peer()).args([
            "client",
            "-addr",
            &addr,
            "-path",
            "/hello",
            "-id",
            "alice",
            "-psk",
            "secretPSK",
            "-rebind",
        ]),
        LIMIT,
    );
    assert!(o.status.success(), "{}", out(&o));
    let lines: Vec<String> = stdout(&o).lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 2, "{}", out(&o));
    let port = |l: &str| l.strip_prefix("port ").and_then(|r| r.split_once(':')).map(|(p, _)| p.to_owned());
    assert_ne!(port(&lines[0]), port(&lines[1]), "the second GET left from another port: {}", out(&o));
    for l in &lines {
        assert!(l.ends_with(": Hello from corral!"), "{}", out(&o));
    }
}

#[test]
fn corral_get_sends_the_connection_id_pions_server_gave_it() {
    if !interop_enabled(&["go"]) {
        return;
    }
    let mut cmd = Command::new(peer());
    cmd.args(["server", "-addr", "127.0.0.1:0", "-id", "alice", "-psk", "secretPSK"]);
    let s = spawn_with_port(&mut cmd, |line| line.strip_prefix("listening on ")?.rsplit_once(':')?.1.parse().ok());
    let (relay, seen) = relay(s.port);
    let uri = format!("coaps://127.0.0.1:{relay}/hello");
    let o = corral(&["get", &uri, "-k", "secretPSK", "-u", "alice", "-B", "20"]);
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "Hello from pion\n"), "{}", out(&o));
    let seen = seen.lock().unwrap().clone();
    let protected: Vec<&Vec<u8>> = seen.iter().filter(|d| d.len() > 13 && d[3..5] != [0, 0]).collect();
    assert!(!protected.is_empty(), "corral sent protected records: {seen:?}");
    assert!(protected.iter().all(|d| d[0] == 25), "every protected record is tls12_cid: {protected:?}");
}

/// A UDP relay on loopback to `port`: forwards both ways and keeps the datagrams the client sent.
fn relay(port: u16) -> (u16, std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>) {
    use std::net::{SocketAddr, UdpSocket};
    let front = UdpSocket::bind("127.0.0.1:0").unwrap();
    let back = UdpSocket::bind("127.0.0.1:0").unwrap();
    back.connect(("127.0.0.1", port)).unwrap();
    let relay_port = front.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let client: std::sync::Arc<std::sync::Mutex<Option<SocketAddr>>> = Default::default();
    let (f, b, c, k) = (front.try_clone().unwrap(), back.try_clone().unwrap(), client.clone(), seen.clone());
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = f.recv_from(&mut buf) {
            *c.lock().unwrap() = Some(from);
            k.lock().unwrap().push(buf[..n].to_vec());
            let _ = b.send(&buf[..n]);
        }
    });
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while let Ok(n) = back.recv(&mut buf) {
            if let Some(to) = *client.lock().unwrap() {
                let _ = front.send_to(&buf[..n], to);
            }
        }
    });
    (relay_port, seen)
}
