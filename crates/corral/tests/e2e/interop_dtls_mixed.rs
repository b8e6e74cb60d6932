//! coaps:// against a server with PSK keys beside a certificate or a raw public key (`corral serve --dtls
//! --psk-file FILE --cert …` or `--rpk …`), with libcoap's DTLS builds as clients: a PSK-only client
//! (`-k KEY -u IDENTITY`) is served, and so is a client with a certificate or raw public key on the same
//! port. libcoap's GnuTLS build is the one that showed dimpl refusing the PSK suite there (issue 46); the
//! OpenSSL build has no raw public keys, so it is run with a certificate only.
//!
//! Runs when `CORRAL_INTEROP=1` (scripts/test.sh sets it); otherwise each test says it was skipped.

use crate::common;
use common::*;
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

/// `client -B 10 ARGS… coaps://…/hello` answers corral's greeting.
fn greets(client: &str, port: u16, args: &[&str]) {
    let uri = format!("coaps://127.0.0.1:{port}/hello");
    let o = run(Command::new(client).args(["-B", "10"]).args(args).arg(&uri), LIMIT);
    assert_eq!(stdout(&o).trim_end(), "Hello from corral!", "{client} {args:?}: {}", described(&o));
}

fn psk_beside_a_certificate(client: &str) {
    if !interop_enabled(&[client, "openssl"]) {
        return;
    }
    let (_psk_dir, psk) = crate::dtls::psk_file();
    let dir = tempfile::tempdir().unwrap();
    let pki = test_pki(dir.path());
    let flags = ["--psk-file", &psk, "--cert", &pki.server.0, "--key", &pki.server.1, "--ca", &pki.ca];
    let s = coaps_serve_with(&flags, "PSK, X.509");
    greets(client, s.port, &["-k", "secretPSK", "-u", "alice"]);
    greets(client, s.port, &["-c", &pki.client.0, "-j", &pki.client.1, "-C", &pki.ca]);
}

#[test]
fn coap_client_gnutls_with_psk_gets_from_a_server_with_a_certificate_too() {
    psk_beside_a_certificate("coap-client-gnutls");
}

#[test]
fn coap_client_openssl_with_psk_gets_from_a_server_with_a_certificate_too() {
    psk_beside_a_certificate("coap-client-openssl");
}

#[test]
fn coap_client_gnutls_with_psk_gets_from_a_server_with_a_raw_public_key_too() {
    let client = "coap-client-gnutls";
    if !interop_enabled(&[client, "openssl"]) {
        return;
    }
    let (_psk_dir, psk) = crate::dtls::psk_file();
    let dir = tempfile::tempdir().unwrap();
    let keys = test_rpk_keys(dir.path());
    let s = coaps_serve_with(&["--psk-file", &psk, "--rpk", &keys.server.0, "--peer-key", &keys.client.1], "PSK, RPK");
    greets(client, s.port, &["-k", "secretPSK", "-u", "alice"]);
    greets(client, s.port, &["-M", &keys.client.0]);
}
