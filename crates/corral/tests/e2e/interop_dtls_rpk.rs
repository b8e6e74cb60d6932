//! coaps:// with raw public keys (RFC 7250) against libcoap's DTLS builds: `coap-client-gnutls -M KEY`
//! against `corral serve --dtls --rpk KEY --peer-key KEYS`, and `corral get coaps:// -M KEY --peer-key
//! KEYS` against `coap-server-gnutls -M KEY`. libcoap's OpenSSL build has no raw public keys (its usage
//! says "no RPK support"; its client logs "RPK Support not available in OpenSSL"): those tests say
//! `skipped:` with that reason, and run if a later build offers them. Keys are made at test time with
//! the openssl CLI (tests/common `test_rpk_keys`).
//!
//! Runs when `CORRAL_INTEROP=1` (scripts/test.sh sets it); otherwise each test says it was skipped.
//! libcoap's server listens for DTLS on its `-p` port + 1; libcoap accepts any peer key (it reports it),
//! so only corral's side checks the peer's key here.

use crate::common;
use common::*;
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

fn out(o: &std::process::Output) -> String {
    format!("status {:?}\nstdout: {}\nstderr: {}", o.status.code(), stdout(o), stderr(o))
}

/// Whether libcoap's `tool` was built with raw public keys (its usage line says "no RPK support" if
/// not); says `skipped:` if not.
fn offers_rpk(tool: &str) -> bool {
    let o = Command::new(tool).arg("-h").output().expect("the tool runs");
    let usage = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let offers = !usage.contains("no RPK support");
    if !offers {
        println!("skipped: {tool} has no raw public keys (its usage says \"no RPK support\")");
    }
    offers
}

fn libcoap_client_against_corral(client: &str) {
    if !interop_enabled(&[client, "openssl"]) || !offers_rpk(client) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let keys = test_rpk_keys(dir.path());
    let mut cmd = Command::new(CORRAL);
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--dtls", "127.0.0.1:0"]);
    cmd.args(["--rpk", &keys.server.0, "--peer-key", &keys.client.1]);
    let s = spawn_with_port(&mut cmd, |line| {
        line.strip_prefix("corral serve: coaps:// (DTLS 1.2, RPK) on ")?.rsplit_once(':')?.1.parse().ok()
    });
    let uri = format!("coaps://127.0.0.1:{}/hello", s.port);
    let o = run(Command::new(client).args(["-B", "10", "-M", &keys.client.0, &uri]), LIMIT);
    assert_eq!(stdout(&o).trim_end(), "Hello from corral!", "{}", out(&o));
    // A key corral does not trust gets nothing.
    let o = run(Command::new(client).args(["-B", "3", "-M", &keys.rogue.0, &uri]), LIMIT);
    assert!(!stdout(&o).contains("Hello from corral!"), "{}", out(&o));
}

fn corral_against_libcoap_server(server: &str) {
    if !interop_enabled(&[server, "openssl"]) || !offers_rpk(server) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let keys = test_rpk_keys(dir.path());
    let s = libcoap_dtls_server(server, &["-M", &keys.server.0]);
    let uri = format!("coaps://127.0.0.1:{}/", s.port);
    let o = corral(&["get", &uri, "-M", &keys.client.0, "--peer-key", &keys.server.1, "-B", "10"]);
    assert_eq!(code(&o), 0, "{}", out(&o));
    assert!(stdout(&o).contains("libcoap"), "libcoap's / resource: {}", out(&o));
    // The same server is refused when its key is not the trusted one.
    let o = corral(&["get", &uri, "-M", &keys.client.0, "--peer-key", &keys.rogue.1, "-B", "10"]);
    assert_eq!(code(&o), 8, "{}", out(&o));
    assert!(stderr(&o).contains("is not a trusted key"), "{}", out(&o));
}

#[test]
fn coap_client_gnutls_gets_from_corral_serve_with_raw_public_keys() {
    libcoap_client_against_corral("coap-client-gnutls");
}

#[test]
fn coap_client_openssl_gets_from_corral_serve_with_raw_public_keys() {
    libcoap_client_against_corral("coap-client-openssl");
}

#[test]
fn corral_get_reaches_coap_server_gnutls_with_raw_public_keys() {
    corral_against_libcoap_server("coap-server-gnutls");
}

#[test]
fn corral_get_reaches_coap_server_openssl_with_raw_public_keys() {
    corral_against_libcoap_server("coap-server-openssl");
}
