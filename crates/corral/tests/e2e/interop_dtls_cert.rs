//! coaps:// with X.509 certificates against libcoap's DTLS builds: `coap-client-gnutls` and
//! `coap-client-openssl -c CERT -j KEY -C CA` against `corral serve --dtls --cert --key --ca`, and
//! `corral get coaps:// -c -j -C` against `coap-server-gnutls` and `coap-server-openssl` with the same
//! options. The CA and certificates are made at test time with the openssl CLI (tests/common `test_pki`).
//!
//! Runs when `CORRAL_INTEROP=1` (scripts/test.sh sets it); otherwise each test says it was skipped.
//! libcoap's server listens for DTLS on its `-p` port + 1; its client appends a newline to a payload.

use crate::common;
use common::*;
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

fn out(o: &std::process::Output) -> String {
    format!("status {:?}\nstdout: {}\nstderr: {}", o.status.code(), stdout(o), stderr(o))
}

fn libcoap_client_against_corral(client: &str) {
    if !interop_enabled(&[client, "openssl"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pki = test_pki(dir.path());
    let mut cmd = Command::new(CORRAL);
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--dtls", "127.0.0.1:0"]);
    cmd.args(["--cert", &pki.server.0, "--key", &pki.server.1, "--ca", &pki.ca]);
    let s = spawn_with_port(&mut cmd, |line| {
        line.strip_prefix("corral serve: coaps:// (DTLS 1.2, X.509) on ")?.rsplit_once(':')?.1.parse().ok()
    });
    let uri = format!("coaps://127.0.0.1:{}/hello", s.port);
    let o = run(
        Command::new(client).args(["-B", "10", "-c", &pki.client.0, "-j", &pki.client.1, "-C", &pki.ca, &uri]),
        LIMIT,
    );
    assert_eq!(stdout(&o).trim_end(), "Hello from corral!", "{}", out(&o));
}

fn corral_against_libcoap_server(server: &str) {
    if !interop_enabled(&[server, "openssl"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pki = test_pki(dir.path());
    let s = libcoap_dtls_server(server, &["-c", &pki.server.0, "-j", &pki.server.1, "-C", &pki.ca]);
    let uri = format!("coaps://127.0.0.1:{}/", s.port);
    let o = corral(&["get", &uri, "-c", &pki.client.0, "-j", &pki.client.1, "-C", &pki.ca, "-B", "10"]);
    assert_eq!(code(&o), 0, "{}", out(&o));
    assert!(stdout(&o).contains("libcoap"), "libcoap's / resource: {}", out(&o));
}

#[test]
fn coap_client_gnutls_gets_from_corral_serve_with_certificates() {
    libcoap_client_against_corral("coap-client-gnutls");
}

#[test]
fn coap_client_openssl_gets_from_corral_serve_with_certificates() {
    libcoap_client_against_corral("coap-client-openssl");
}

#[test]
fn corral_get_reaches_coap_server_gnutls_with_certificates() {
    corral_against_libcoap_server("coap-server-gnutls");
}

#[test]
fn corral_get_reaches_coap_server_openssl_with_certificates() {
    corral_against_libcoap_server("coap-server-openssl");
}
