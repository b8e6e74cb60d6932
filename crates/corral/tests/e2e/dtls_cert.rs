//! coaps:// with X.509 certificates between corral's own client verbs and `corral serve --dtls` (the real
//! binary): `-c CERT -j KEY -C CA` on the client, `--cert --key --ca` on the server, a certificate not
//! signed by the CA refused either way with exit status 8 and one line that says so; a PSK client served
//! by a server that has a certificate too. The test PKI is made with the openssl CLI (tests/common
//! `test_pki`). Interop with libcoap: interop_dtls_cert.rs, interop_dtls_mixed.rs.

use crate::common;
use common::*;
use std::process::Command;

/// `corral serve --dtls` with `server` as its certificate and `ca` as the clients' CA; its coaps:// port.
fn cert_server(server: &(String, String), ca: &str) -> Proc {
    let mut cmd = Command::new(CORRAL);
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--dtls", "127.0.0.1:0"]);
    cmd.args(["--cert", &server.0, "--key", &server.1, "--ca", ca]);
    spawn_with_port(&mut cmd, |line| {
        line.strip_prefix("corral serve: coaps:// (DTLS 1.2, X.509) on ")?.rsplit_once(':')?.1.parse().ok()
    })
}

fn get(port: u16, client: &(String, String), ca: &str) -> std::process::Output {
    let uri = format!("coaps://127.0.0.1:{port}/hello");
    corral(&["get", &uri, "-c", &client.0, "-j", &client.1, "-C", ca, "-B", "10"])
}

#[test]
fn client_and_server_certificates_signed_by_the_ca_carry_a_request() {
    let dir = tempfile::tempdir().unwrap();
    let pki = test_pki(dir.path());
    let s = cert_server(&pki.server, &pki.ca);
    let o = get(s.port, &pki.client, &pki.ca);
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "Hello from corral!\n"), "{}", stderr(&o));
}

#[test]
fn a_psk_client_is_served_by_a_server_with_a_certificate_too() {
    let (_psk_dir, psk) = crate::dtls::psk_file();
    let dir = tempfile::tempdir().unwrap();
    let pki = test_pki(dir.path());
    let flags = ["--psk-file", &psk, "--cert", &pki.server.0, "--key", &pki.server.1, "--ca", &pki.ca];
    let s = coaps_serve_with(&flags, "PSK, X.509");
    let uri = format!("coaps://127.0.0.1:{}/hello", s.port);
    let o = corral(&["get", &uri, "-k", "secretPSK", "-u", "alice", "-B", "10"]);
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "Hello from corral!\n"), "PSK: {}", stderr(&o));
    let o = get(s.port, &pki.client, &pki.ca);
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "Hello from corral!\n"), "X.509: {}", stderr(&o));
}

#[test]
fn a_server_certificate_not_signed_by_the_ca_fails_the_handshake_with_exit_status_8() {
    let dir = tempfile::tempdir().unwrap();
    let pki = test_pki(dir.path());
    let s = cert_server(&pki.rogue_server, &pki.ca);
    let o = get(s.port, &pki.client, &pki.ca);
    assert_eq!(code(&o), 8, "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("DTLS handshake") && err.contains("not signed by a trusted CA"), "{err}");
}

#[test]
fn a_client_certificate_not_signed_by_the_ca_is_refused_with_exit_status_8() {
    let dir = tempfile::tempdir().unwrap();
    let pki = test_pki(dir.path());
    let s = cert_server(&pki.server, &pki.ca);
    let o = get(s.port, &pki.rogue_client, &pki.ca);
    assert_eq!(code(&o), 8, "{}", stderr(&o));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("bad certificate"), "{}", stderr(&o));
}

#[test]
fn a_key_file_that_is_not_a_pem_key_is_a_usage_error_that_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let pki = test_pki(dir.path());
    let o = corral(&["get", "coaps://127.0.0.1:5684/hello", "-c", &pki.client.0, "-j", &pki.client.0, "-C", &pki.ca]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("the key is a PEM CERTIFICATE"), "{}", stderr(&o));
}

#[test]
fn certificate_flags_and_psk_flags_do_not_mix() {
    let o = corral(&[
        "get",
        "coaps://127.0.0.1:5684/hello",
        "-c",
        "c.pem",
        "-j",
        "k.pem",
        "-C",
        "ca.pem",
        "-k",
        "x",
        "-u",
        "y",
    ]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
}
