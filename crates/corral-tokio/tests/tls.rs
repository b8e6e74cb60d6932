//! coaps+tcp:// through the library on real loopback sockets: a [`Client`] made with
//! [`ClientBuilder::tls`](corral_tokio::ClientBuilder::tls) and a [`Server`] with
//! [`Server::listen_tls`], and the server's bound on handshakes under way (a connection beyond
//! [`MAX_HANDSHAKES`] is closed at once instead of holding a socket and a task for the handshake
//! timeout). The certificates are made at test time with the openssl CLI.
//!
//! No assertion is about timing: waits are for conditions, bounded only so that a bug fails instead of
//! hanging (the refused connection's read waits at most half the handshake timeout).

use corral_tokio::tls::{HANDSHAKE_TIMEOUT, MAX_HANDSHAKES};
use corral_tokio::{Client, Code, Error, Server, TlsClientConfig, TlsServerConfig};
use std::io::Read;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

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

#[tokio::test]
async fn connections_beyond_the_handshakes_under_way_are_closed_at_once_and_the_server_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = pki(dir.path());
    let (_server, at) = tls_server(&cert, &key);
    // Connections that never send a ClientHello: each holds one handshake slot.
    let idle: Vec<std::net::TcpStream> =
        (0..MAX_HANDSHAKES).map(|_| std::net::TcpStream::connect(at).unwrap()).collect();
    let extra = tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(at).unwrap();
        s.set_read_timeout(Some(HANDSHAKE_TIMEOUT / 2)).unwrap();
        let mut buf = [0u8; 16];
        s.read(&mut buf)
    })
    .await
    .unwrap();
    match extra {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("the connection beyond {MAX_HANDSHAKES} handshakes was not closed at once: {other:?}"),
    }
    drop(idle);
    // The slots come free as the server reads the idle connections' end; a client is served then.
    let client =
        Client::builder().tls(TlsClientConfig::from_pem(&ca, None).unwrap()).bind("127.0.0.1:0").await.unwrap();
    let mut last = None;
    for _ in 0..50 {
        match client.get(&format!("coaps+tcp://{at}/hello")).await {
            Ok(r) => return assert_eq!(r.payload_text(), "hello over TLS"),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the server serves no TLS client after the idle connections closed: {last:?}");
}
