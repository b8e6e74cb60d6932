//! coaps+tcp:// through the library on real loopback sockets: a [`Client`] made with
//! [`ClientBuilder::tls`](corral_tokio::ClientBuilder::tls) and a [`Server`] with
//! [`Server::listen_tls`], and the server's bounds on handshakes under way (per address and in all: a new
//! connection makes the oldest pending handshake give way, so a slowloris from one address cannot refuse
//! another's client). The certificates are made at test time with the openssl CLI.
//!
//! No assertion is about timing: waits are for conditions, bounded only so that a bug fails instead of
//! hanging (a closed connection's read waits at most half the handshake timeout). The slowloris test
//! prints how long the legitimate clients took, for the record.

use corral_tokio::tls::{HANDSHAKE_TIMEOUT, MAX_HANDSHAKES};
use corral_tokio::{Client, Code, Error, Server, TlsClientConfig, TlsServerConfig};
use std::io::Read;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A CA and a server certificate it signed for IP 127.0.0.1 (P-256), PEM: (ca, server cert, server key).
fn pki(dir: &Path) -> (String, String, String) {
    let openssl = |args: &[&str]| {
        let o = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl is installed");
        assert!(o.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    };
    std::fs::write(dir.join("server.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    for key in ["ca.key", "server.key"] {
        openssl(&["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key]);
    }
    openssl(&["req", "-x509", "-new", "-key", "ca.key", "-subj", "/CN=test CA", "-days", "2", "-out", "ca.pem"]);
    openssl(&["req", "-new", "-key", "server.key", "-subj", "/CN=127.0.0.1", "-out", "server.csr"]);
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "server.ext",
        "-out",
        "server.pem",
    ]);
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    (read("ca.pem"), read("server.pem"), read("server.key"))
}

/// A server with `/hello` over TLS only (its UDP socket aside); the TLS listener's address.
fn tls_server(cert: &str, key: &str) -> (corral_tokio::ServerHandle, SocketAddr) {
    let mut server = Server::builder().bind_addr("127.0.0.1:0".parse().unwrap()).unwrap();
    server.route("/hello", |_req| async move {
        corral_tokio::Response::content(corral_tokio::ContentFormat::TEXT_PLAIN, "hello over TLS")
    });
    let config = TlsServerConfig::from_pem(cert, key, None).unwrap();
    let at = server.listen_tls("127.0.0.1:0".parse().unwrap(), config).unwrap();
    (server.spawn().unwrap(), at)
}

#[tokio::test]
async fn a_tls_client_gets_from_a_tls_server_and_plain_coap_tcp_to_that_address_does_not_ride_its_connection() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = pki(dir.path());
    let (_server, at) = tls_server(&cert, &key);
    let client =
        Client::builder().tls(TlsClientConfig::from_pem(&ca, None).unwrap()).bind("127.0.0.1:0").await.unwrap();
    let r = client.get(&format!("coaps+tcp://{at}/hello")).await.unwrap();
    assert_eq!((r.code, r.payload_text().as_ref()), (Code::CONTENT, "hello over TLS"));
    // The same address over plain TCP gets a connection of its own, which the TLS listener closes.
    let plain = client.get(&format!("coap+tcp://{at}/hello")).timeout(std::time::Duration::from_secs(10)).await;
    assert!(plain.is_err(), "plain CoAP on the TLS port: {plain:?}");
    let r = client.get(&format!("coaps+tcp://{at}/hello")).await.unwrap();
    assert_eq!(r.payload_text(), "hello over TLS");
}

#[tokio::test]
async fn a_client_without_tls_settings_refuses_coaps_tcp_and_one_with_another_ca_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let (_, cert, key) = pki(dir.path());
    let (_server, at) = tls_server(&cert, &key);
    let plain = Client::bind("127.0.0.1:0").await.unwrap();
    let e = plain.get(&format!("coaps+tcp://{at}/hello")).await.unwrap_err();
    assert!(matches!(e, Error::InvalidUri(_)), "{e}");
    // Another CA of the same name (CN=test CA), whose key did not sign the server's certificate.
    let other = tempfile::tempdir().unwrap();
    let (other_ca, _, _) = pki(other.path());
    let client =
        Client::builder().tls(TlsClientConfig::from_pem(&other_ca, None).unwrap()).bind("127.0.0.1:0").await.unwrap();
    let e = client.get(&format!("coaps+tcp://{at}/hello")).await.unwrap_err();
    assert!(matches!(&e, Error::Tls { reason, .. } if reason.contains("unknown CA")), "{e}");
}

/// Whether the server closed `s` (its read ends) within half the handshake timeout.
fn closed_by_the_server(mut s: std::net::TcpStream) -> bool {
    s.set_read_timeout(Some(HANDSHAKE_TIMEOUT / 2)).unwrap();
    let mut buf = [0u8; 16];
    match s.read(&mut buf) {
        Ok(0) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(_) => false,
    }
}

/// A TLS client on a fresh connection gets `/hello`; the time it took.
async fn served(ca: &str, at: SocketAddr) -> Duration {
    let started = Instant::now();
    let client = Client::builder().tls(TlsClientConfig::from_pem(ca, None).unwrap()).bind("127.0.0.1:0").await.unwrap();
    let r = client.get(&format!("coaps+tcp://{at}/hello")).timeout(Duration::from_secs(20)).await;
    let r = r.unwrap_or_else(|e| panic!("the legitimate TLS client failed: {e}"));
    assert_eq!(r.payload_text(), "hello over TLS");
    started.elapsed()
}

#[tokio::test]
async fn a_new_connection_makes_the_oldest_pending_handshake_give_way_not_itself() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = pki(dir.path());
    let (_server, at) = tls_server(&cert, &key);
    // Connections that never send a ClientHello, as many as the whole table, from one address: that
    // address's limit (64) counts them, and each beyond it makes its oldest give way.
    let mut idle: Vec<std::net::TcpStream> =
        (0..MAX_HANDSHAKES).map(|_| std::net::TcpStream::connect(at).unwrap()).collect();
    let first = idle.remove(0);
    let closed = tokio::task::spawn_blocking(move || closed_by_the_server(first)).await.unwrap();
    assert!(closed, "the oldest pending handshake was not closed for the newer ones");
    // The newcomer from the same address is not refused: its handshake makes another idle one give way.
    served(&ca, at).await;
    drop(idle);
}

/// Issue 41 item 2: one address keeps 256 connections in the handshake — half silent, half having sent
/// 11 bytes of a ClientHello — and opens each again as soon as it is closed. A `coaps+tcp://` client from
/// another address is served, ten times out of ten, each on a connection of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_slowloris_from_one_address_leaves_another_addresss_clients_served() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = pki(dir.path());
    let (_server, at) = tls_server(&cert, &key);
    let stop = Arc::new(AtomicBool::new(false));
    let (connected, reopened) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    // A TLS record header and the start of a ClientHello: 11 bytes, then nothing.
    const HELLO_START: [u8; 11] = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03];
    let mut attackers = Vec::new();
    for i in 0..256 {
        let (stop, connected, reopened) = (stop.clone(), connected.clone(), reopened.clone());
        attackers.push(tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut first = true;
            while !stop.load(Ordering::Relaxed) {
                let socket = tokio::net::TcpSocket::new_v4().unwrap();
                socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
                let Ok(mut s) = socket.connect(at).await else { continue };
                if first {
                    connected.fetch_add(1, Ordering::Relaxed);
                    first = false;
                } else {
                    reopened.fetch_add(1, Ordering::Relaxed);
                }
                if i % 2 == 1 && s.write_all(&HELLO_START).await.is_err() {
                    continue;
                }
                let mut buf = [0u8; 64];
                // Held until the server closes it (or the test ends).
                let _ = tokio::time::timeout(Duration::from_secs(30), s.read(&mut buf)).await;
            }
        }));
    }
    for _ in 0..200 {
        if connected.load(Ordering::Relaxed) == 256 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(connected.load(Ordering::Relaxed), 256, "the attacker's connections are up");
    let mut took = Vec::new();
    for _ in 0..10 {
        took.push(served(&ca, at).await);
    }
    stop.store(true, Ordering::Relaxed);
    for a in attackers {
        a.abort();
    }
    took.sort();
    println!(
        "slowloris (256 handshakes from 127.0.0.2, {} re-opened): 10 of 10 legitimate clients served; \
         time to the first response: median {:?}, max {:?}",
        reopened.load(Ordering::Relaxed),
        took[5],
        took[9]
    );
}
