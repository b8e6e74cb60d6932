//! coaps:// with raw public keys (RFC 7250) between corral's own client verbs and `corral serve --dtls`
//! (the real binary): `-M KEY --peer-key KEYS` on the client, `--rpk KEY --peer-key KEYS` on the server; a
//! peer whose key is not trusted refused either way with exit status 8 and one line that says why; a
//! server without raw public keys named as such; key files that are wrong named by their flag; a PSK client
//! served by a server that has a raw public key too. Keys are made with the openssl CLI (tests/common
//! `test_rpk_keys`). Interop with libcoap: interop_dtls_rpk.rs, interop_dtls_mixed.rs.

use crate::common;
use common::*;
use std::process::Command;

/// `corral serve --dtls` with `key` as its raw public key, trusting the client keys of `peers`; its
/// coaps:// port.
fn rpk_server(key: &str, peers: &str) -> Proc {
    let mut cmd = Command::new(CORRAL);
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--dtls", "127.0.0.1:0", "--rpk", key, "--peer-key", peers]);
    spawn_with_port(&mut cmd, |line| {
        line.strip_prefix("corral serve: coaps:// (DTLS 1.2, RPK) on ")?.rsplit_once(':')?.1.parse().ok()
    })
}

fn get(port: u16, key: &str, peers: &str) -> std::process::Output {
    let uri = format!("coaps://127.0.0.1:{port}/hello");
    corral(&["get", &uri, "-M", key, "--peer-key", peers, "-B", "10"])
}

/// Asserts that `o` failed its handshake: exit status 8, one line on stderr that contains `why`.
fn refused(o: &std::process::Output, why: &str) {
    let err = stderr(o);
    assert_eq!(code(o), 8, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("DTLS handshake") && err.contains(why), "{err}");
}

#[test]
fn a_psk_client_is_served_by_a_server_with_a_raw_public_key_too() {
    let (_psk_dir, psk) = crate::dtls::psk_file();
    let dir = tempfile::tempdir().unwrap();
    let keys = test_rpk_keys(dir.path());
    let s = coaps_serve_with(&["--psk-file", &psk, "--rpk", &keys.server.0, "--peer-key", &keys.client.1], "PSK, RPK");
    let uri = format!("coaps://127.0.0.1:{}/hello", s.port);
    let o = corral(&["get", &uri, "-k", "secretPSK", "-u", "alice", "-B", "10"]);
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "Hello from corral!\n"), "PSK: {}", stderr(&o));
    let o = get(s.port, &keys.client.0, &keys.server.1);
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "Hello from corral!\n"), "RPK: {}", stderr(&o));
}

#[test]
fn client_and_server_with_trusted_raw_public_keys_carry_a_request() {
    let dir = tempfile::tempdir().unwrap();
    let keys = test_rpk_keys(dir.path());
    let s = rpk_server(&keys.server.0, &keys.client.1);
    let o = get(s.port, &keys.client.0, &keys.server.1);
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "Hello from corral!\n"), "{}", stderr(&o));
}

#[test]
fn a_client_key_the_server_does_not_trust_is_refused_with_exit_status_8() {
    let dir = tempfile::tempdir().unwrap();
    let keys = test_rpk_keys(dir.path());
    let s = rpk_server(&keys.server.0, &keys.client.1);
    refused(&get(s.port, &keys.rogue.0, &keys.server.1), "does not trust our raw public key");
}

#[test]
fn a_server_key_the_client_does_not_trust_fails_the_handshake_with_exit_status_8() {
    let dir = tempfile::tempdir().unwrap();
    let keys = test_rpk_keys(dir.path());
    let s = rpk_server(&keys.rogue.0, &keys.client.1);
    refused(&get(s.port, &keys.client.0, &keys.server.1), "is not a trusted key (check --peer-key)");
}

#[test]
fn a_server_with_certificates_only_is_named_as_not_using_raw_public_keys() {
    let dir = tempfile::tempdir().unwrap();
    let pki = test_pki(dir.path());
    let rpk_dir = dir.path().join("rpk");
    std::fs::create_dir(&rpk_dir).unwrap();
    let keys = test_rpk_keys(&rpk_dir);
    let mut cmd = Command::new(CORRAL);
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--dtls", "127.0.0.1:0"]);
    cmd.args(["--cert", &pki.server.0, "--key", &pki.server.1, "--ca", &pki.ca]);
    let s = spawn_with_port(&mut cmd, |line| {
        line.strip_prefix("corral serve: coaps:// (DTLS 1.2, X.509) on ")?.rsplit_once(':')?.1.parse().ok()
    });
    refused(&get(s.port, &keys.client.0, &keys.server.1), "does not use raw public keys");
}

#[test]
fn key_files_that_are_wrong_are_usage_errors_that_name_their_flag() {
    let dir = tempfile::tempdir().unwrap();
    let keys = test_rpk_keys(dir.path());
    // A public key where the private key goes, and a private key where the trusted keys go.
    let o = get(5684, &keys.client.1, &keys.server.1);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).starts_with("error: -M ") && stderr(&o).contains("no PEM EC PRIVATE KEY"), "{}", stderr(&o));
    let o = get(5684, &keys.client.0, &keys.server.0);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("--peer-key ") && stderr(&o).contains("not EC PRIVATE KEY"), "{}", stderr(&o));
    let o = corral(&[
        "serve",
        "--bind",
        "127.0.0.1:0",
        "--dtls",
        "--rpk",
        "/nonexistent.key",
        "--peer-key",
        &keys.client.1,
    ]);
    assert_ne!(code(&o), 0);
    assert!(stderr(&o).contains("cannot read --rpk /nonexistent.key"), "{}", stderr(&o));
}

#[test]
fn raw_public_key_flags_do_not_mix_with_psk_or_certificate_flags() {
    let o = corral(&["get", "coaps://127.0.0.1:5684/", "-M", "k.pem", "--peer-key", "p.pem", "-k", "x", "-u", "y"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let o = corral(&["get", "coaps://127.0.0.1:5684/", "-M", "k.pem"]);
    assert_eq!(code(&o), 2, "-M needs --peer-key: {}", stderr(&o));
}
