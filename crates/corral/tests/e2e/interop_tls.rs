//! coaps+tcp:// (CoAP over TLS, RFC 8323) against libcoap's TLS builds: `coap-client-gnutls` and
//! `coap-client-openssl coaps+tcp://… -C CA` (and `-c CERT -j KEY`) against `corral serve --tls`, and
//! `corral get coaps+tcp://… -C CA -c -j` against `coap-server-gnutls` and `coap-server-openssl`, whose
//! `-C` makes them require a client certificate that CA signed (refused without one, exit status 8). The
//! CA and certificates are made at test time with the openssl CLI (tests/common `test_pki`).
//!
//! Runs when `CORRAL_INTEROP=1` (scripts/test.sh sets it); otherwise each test says it was skipped.
//! libcoap's server listens for TLS on its `-p` port + 1, as for DTLS.

use crate::common;
use common::*;
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

fn libcoap_client_against_corral(client: &str) {
    if !interop_enabled(&[client, "openssl"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pki = test_pki(dir.path());
    let s = corral_tls_server("127.0.0.1:0", &pki.server, Some(&pki.ca), &[]);
    let base = format!("coaps+tcp://127.0.0.1:{}", s.port);
    let identity = ["-c", &pki.client.0, "-j", &pki.client.1, "-C", &pki.ca];
    let o = run(Command::new(client).args(["-B", "10"]).args(identity).arg(format!("{base}/hello")), LIMIT);
    assert_eq!(stdout(&o).trim_end(), "Hello from corral!", "{}", described(&o));
    // A block-wise body (libcoap asks for 64-byte blocks) arrives whole.
    let plain = corral_serve("127.0.0.1", &[]);
    let want = stdout(&corral(&["get", &format!("coap://127.0.0.1:{}/large", plain.port)]));
    let o = run(Command::new(client).args(["-B", "10", "-b", "64"]).args(identity).arg(format!("{base}/large")), LIMIT);
    assert_eq!(stdout(&o).trim_end(), want.trim_end(), "{}", described(&o));
}

fn corral_against_libcoap_server(server: &str) {
    if !interop_enabled(&[server, "openssl"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pki = test_pki(dir.path());
    let s = libcoap_dtls_server(server, &["-c", &pki.server.0, "-j", &pki.server.1, "-C", &pki.ca]);
    let uri = format!("coaps+tcp://127.0.0.1:{}/", s.port);
    let o = corral(&["get", &uri, "-c", &pki.client.0, "-j", &pki.client.1, "-C", &pki.ca, "-B", "10"]);
    assert_eq!(code(&o), 0, "{}", described(&o));
    assert!(stdout(&o).contains("libcoap"), "libcoap's / resource: {}", described(&o));
    // Without a client certificate the server refuses the handshake; the line says it was TLS's.
    let o = corral(&["get", &uri, "-C", &pki.ca, "-B", "10"]);
    assert_eq!(code(&o), 8, "{}", described(&o));
    assert!(stderr(&o).contains("TLS handshake"), "{}", described(&o));
}

#[test]
fn coap_client_gnutls_gets_from_corral_serve_tls() {
    libcoap_client_against_corral("coap-client-gnutls");
}

#[test]
fn coap_client_openssl_gets_from_corral_serve_tls() {
    libcoap_client_against_corral("coap-client-openssl");
}

#[test]
fn corral_get_reaches_coap_server_gnutls_over_tls() {
    corral_against_libcoap_server("coap-server-gnutls");
}

#[test]
fn corral_get_reaches_coap_server_openssl_over_tls() {
    corral_against_libcoap_server("coap-server-openssl");
}
