//! coaps+tcp:// (CoAP over TLS, RFC 8323 §9) between corral's own client verbs and `corral serve --tls`
//! (the real binary, real TCP sockets): `-C CA` (and `-c CERT -j KEY`) on the client, `--cert --key` (and
//! `--ca` to require client certificates) on the server; GET, PUT/POST/DELETE, an observation, a
//! block-wise body; a handshake that fails says why in one line with exit status 8 (unknown CA, name
//! mismatch, no client certificate); garbage on the TLS port closes that connection only. The test PKI
//! is made with the openssl CLI (tests/common `test_pki`). Interop with libcoap: interop_tls.rs.

use crate::common;
use common::*;
use std::io::{Read, Write};
use std::time::Duration;

/// One line on stderr, exit status 8, naming a TLS handshake and `why`.
fn assert_handshake_failure(o: &std::process::Output, why: &str) {
    let err = stderr(o);
    assert_eq!(code(o), 8, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("TLS handshake") && err.contains(why), "expected `{why}`: {err}");
}

#[test]
fn client_verbs_speak_coaps_tcp_to_corral_serve_tls_verified_by_the_ca() {
    let dir = tempfile::tempdir().unwrap();
    let pki = test_pki(dir.path());
    let s = corral_tls_server("127.0.0.1:0", &pki.server, None, &[]);
    let base = format!("coaps+tcp://127.0.0.1:{}", s.port);
    let ca = ["-C", pki.ca.as_str()];
    let o = corral(&[&["get", &format!("{base}/hello")][..], &ca].concat());
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "Hello from corral!\n"), "{}", stderr(&o));
    let o = corral(&[&["put", &format!("{base}/test"), "-e", "over TLS", "-t", "text"][..], &ca].concat());
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = corral(&[&["get", &format!("{base}/test")][..], &ca].concat());
    assert_eq!(stdout(&o), "over TLS\n");
    let o = corral(&[&["post", &format!("{base}/test"), "-e", "x"][..], &ca].concat());
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = corral(&[&["delete", &format!("{base}/test")][..], &ca].concat());
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

#[test]
fn a_block_wise_body_crosses_coaps_tcp_whole() {
    let dir = tempfile::tempdir().unwrap();
    let pki = test_pki(dir.path());
    let s = corral_tls_server("127.0.0.1:0", &pki.server, None, &[]);
    let base = format!("coaps+tcp://127.0.0.1:{}", s.port);
    let plain = corral_serve("127.0.0.1", &[]);
    let want = corral(&["get", &format!("coap://127.0.0.1:{}/large", plain.port)]);
    assert!(want.stdout.len() > 1024, "{} bytes", want.stdout.len());
    let o = corral(&["get", &format!("{base}/large"), "-b", "64", "-C", &pki.ca]);
    assert_eq!(code(&o), 0, "block-wise over TLS: {}", stderr(&o));
    assert_eq!(o.stdout, want.stdout);
    let body = "b".repeat(3000);
    let o = corral(&["put", &format!("{base}/large-update"), "-e", &body, "-b", "256", "-C", &pki.ca]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = corral(&["get", &format!("{base}/large-update"), "-C", &pki.ca]);
    assert_eq!(stdout(&o).trim_end(), body);
}

#[test]
fn observe_over_coaps_tcp_sees_notifications() {
    let dir = tempfile::tempdir().unwrap();
    let pki = test_pki(dir.path());
    let s = corral_tls_server("127.0.0.1:0", &pki.server, None, &["--obs-period", "0.3"]);
    let uri = format!("coaps+tcp://127.0.0.1:{}/obs", s.port);
    let o = corral(&["get", &uri, "-s", "2", "-C", &pki.ca]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).lines().count() >= 3, "several notifications: {}", stdout(&o));
}

#[test]
fn a_server_certificate_of_another_ca_fails_as_unknown_ca_with_exit_status_8() {
    let dir = tempfile::tempdir().unwrap();
    let pki = test_pki(dir.path());
    let s = corral_tls_server("127.0.0.1:0", &pki.rogue_server, None, &[]);
    let o = corral(&["get", &format!("coaps+tcp://127.0.0.1:{}/hello", s.port), "-C", &pki.ca]);
    assert_handshake_failure(&o, "unknown CA");
}

#[test]
fn a_host_the_server_certificate_does_not_name_fails_as_a_name_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let pki = test_pki(dir.path());
    // The certificate names IP 127.0.0.1 only; `localhost` resolves to 127.0.0.1 or ::1, both served.
    let s = corral_tls_server("[::]:0", &pki.server, None, &[]);
    let o = corral(&["get", &format!("coaps+tcp://localhost:{}/hello", s.port), "-C", &pki.ca]);
    assert_handshake_failure(&o, "name mismatch");
}

#[test]
fn a_server_with_a_client_ca_serves_only_clients_with_a_certificate_it_signed() {
    let dir = tempfile::tempdir().unwrap();
    let pki = test_pki(dir.path());
    let s = corral_tls_server("127.0.0.1:0", &pki.server, Some(&pki.ca), &[]);
    let uri = format!("coaps+tcp://127.0.0.1:{}/hello", s.port);
    let o = corral(&["get", &uri, "-C", &pki.ca, "-c", &pki.client.0, "-j", &pki.client.1]);
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "Hello from corral!\n"), "{}", stderr(&o));
    let o = corral(&["get", &uri, "-C", &pki.ca]);
    assert_handshake_failure(&o, "no certificate");
    let o = corral(&["get", &uri, "-C", &pki.ca, "-c", &pki.rogue_client.0, "-j", &pki.rogue_client.1]);
    assert_handshake_failure(&o, "refused this client's certificate");
}

#[test]
fn garbage_and_plain_coap_on_the_tls_port_close_that_connection_only() {
    let dir = tempfile::tempdir().unwrap();
    let pki = test_pki(dir.path());
    let s = corral_tls_server("127.0.0.1:0", &pki.server, None, &[]);
    // Not a TLS record: the server closes the connection (no CoAP answer, no crash).
    let mut garbage = std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    garbage.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    garbage.write_all(&[0xff; 64]).unwrap();
    let mut buf = [0u8; 256];
    let mut read = 0;
    loop {
        match garbage.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => read += n,
        }
        assert!(read < 4096, "the server keeps talking to garbage");
    }
    // A plain coap+tcp:// client (its CSM in the clear) is not served either.
    let o = corral(&["get", &format!("coap+tcp://127.0.0.1:{}/hello", s.port), "-B", "5"]);
    assert_ne!(code(&o), 0, "plain CoAP over the TLS port: {}", stdout(&o));
    // A truncated ClientHello, left hanging while a real client is served.
    let mut hanging = std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    hanging.write_all(&[22, 3, 1, 0, 200, 1, 0]).unwrap();
    let o = corral(&["get", &format!("coaps+tcp://127.0.0.1:{}/hello", s.port), "-C", &pki.ca]);
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "Hello from corral!\n"), "{}", stderr(&o));
}

#[test]
fn coaps_tcp_credentials_that_do_not_fit_are_usage_errors_naming_the_flag() {
    let o = corral(&["get", "coaps+tcp://127.0.0.1:5684/hello"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("-C CA"), "{}", stderr(&o));
    let o = corral(&["get", "coaps+tcp://127.0.0.1:5684/hello", "-k", "key", "-u", "alice"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("not a pre-shared key"), "{}", stderr(&o));
    let o = corral(&["get", "coaps+tcp://127.0.0.1:5684/hello", "-M", "client.key", "--peer-key", "server.pub"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("not a raw public key"), "{}", stderr(&o));
    let o = corral(&["get", "coap://127.0.0.1:5683/hello", "-C", "ca.pem"]);
    assert_eq!(code(&o), 2, "-C on coap://: {}", stderr(&o));
    let (_dir, files) = write_files(&[("ca.pem", "not PEM")]);
    let o = corral(&["get", "coaps+tcp://127.0.0.1:5684/hello", "-C", &files[0]]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("CA file") && stderr(&o).contains(&files[0]), "{}", stderr(&o));
}

#[test]
fn serve_tls_without_a_certificate_is_a_usage_error() {
    let o = corral(&["serve", "--bind", "127.0.0.1:0", "--tls"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("--cert CERT --key KEY"), "{}", stderr(&o));
}

/// A key that is not the certificate's (the raw-public-key example used to overwrite `server.key`): one
/// line in words on either side, never rustls' variant name (`KeyMismatch`).
#[test]
fn a_key_of_another_pair_is_refused_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let pki = test_pki(dir.path());
    let (cert, other_key) = (&pki.server.0, &pki.rogue_server.1);
    let o = corral(&["serve", "--bind", "127.0.0.1:0", "--tls", "127.0.0.1:0", "--cert", cert, "--key", other_key]);
    let err = stderr(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(err.contains("the private key does not belong to the certificate"), "{err}");
    assert!(!err.contains("KeyMismatch") && !err.contains("may not be consistent"), "{err}");
    let s = corral_tls_server("127.0.0.1:0", &pki.server, None, &[]);
    let uri = format!("coaps+tcp://127.0.0.1:{}/hello", s.port);
    let o = corral(&["get", &uri, "-C", &pki.ca, "-c", &pki.client.0, "-j", &pki.rogue_client.1]);
    let err = stderr(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(
        err.contains("the private key does not belong to the certificate") && !err.contains("KeyMismatch"),
        "{err}"
    );
}
