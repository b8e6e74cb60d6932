//! coaps:// with the real binary: `corral serve --dtls` and the client verbs with `-k KEY -u IDENTITY`
//! (DTLS 1.2, TLS_PSK_WITH_AES_128_CCM_8), a failed handshake's one line and exit status 8, and the
//! usage errors. Interop with libcoap's GnuTLS and OpenSSL builds: interop_dtls.rs.

use crate::common;
use common::*;
use std::process::Command;
use std::time::Duration;

/// A PSK file with `alice`'s key, in a directory that lives as long as the returned guard.
pub fn psk_file() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("psk.json");
    std::fs::write(&path, r#"{"alice": "secretPSK", "bob": {"hex": "0102030405"}}"#).unwrap();
    (dir, path.display().to_string())
}

/// `corral serve` with plain CoAP on an ephemeral port and coaps:// on another; its coaps:// port.
fn dtls_server(psk: &str) -> Proc {
    let mut cmd = Command::new(CORRAL);
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--dtls", "127.0.0.1:0", "--psk-file", psk]);
    spawn_with_port(&mut cmd, |line| {
        let addr = line.strip_prefix("corral serve: coaps:// (DTLS 1.2, PSK) on ")?;
        addr.rsplit_once(':')?.1.parse().ok()
    })
}

#[test]
fn client_verbs_speak_coaps_to_corral_serve_with_a_pre_shared_key() {
    let (_dir, psk) = psk_file();
    let s = dtls_server(&psk);
    let base = format!("coaps://127.0.0.1:{}", s.port);
    let creds = ["-k", "secretPSK", "-u", "alice"];
    let o = corral(&[&["get", &format!("{base}/hello")][..], &creds].concat());
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "Hello from corral!\n"), "{}", stderr(&o));
    let o = corral(&[&["put", &format!("{base}/test"), "-e", "over DTLS", "-t", "text"][..], &creds].concat());
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = corral(&[&["get", &format!("{base}/test")][..], &creds].concat());
    assert_eq!(stdout(&o), "over DTLS\n");
    let o = corral(&[&["post", &format!("{base}/test"), "-e", "x"][..], &creds].concat());
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = corral(&[&["delete", &format!("{base}/test")][..], &creds].concat());
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = corral(&[&["get", &format!("{base}/large"), "-b", "64"][..], &creds].concat());
    assert_eq!(code(&o), 0, "block-wise over DTLS: {}", stderr(&o));
    assert!(o.stdout.len() > 1024, "{} bytes", o.stdout.len());
    // A hex key from the file.
    let o = corral(&["get", &format!("{base}/hello"), "-k", "\u{1}\u{2}\u{3}\u{4}\u{5}", "-u", "bob"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

#[test]
fn observe_over_coaps_sees_notifications() {
    let (_dir, psk) = psk_file();
    let mut cmd = Command::new(CORRAL);
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--dtls", "127.0.0.1:0", "--psk-file", &psk, "--obs-period", "0.3"]);
    let s = spawn_with_port(&mut cmd, |line| {
        line.strip_prefix("corral serve: coaps:// (DTLS 1.2, PSK) on ")?.rsplit_once(':')?.1.parse().ok()
    });
    let uri = format!("coaps://127.0.0.1:{}/obs", s.port);
    let o = corral(&["get", &uri, "-s", "2", "-k", "secretPSK", "-u", "alice"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).lines().count() >= 3, "several notifications: {}", stdout(&o));
}

/// The server answers an unknown identity as it answers a wrong key (RFC 4279 §2, issue 41), so the client
/// cannot tell them apart either: one line that names both causes and both flags.
#[test]
fn an_unknown_identity_fails_the_handshake_in_one_line_with_exit_status_8() {
    let (_dir, psk) = psk_file();
    let s = dtls_server(&psk);
    let uri = format!("coaps://127.0.0.1:{}/hello", s.port);
    let o = corral(&["get", &uri, "-k", "secretPSK", "-u", "mallory", "-B", "5"]);
    assert_eq!(code(&o), 8, "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    let why = "the keys do not match, or the server knows no key for this identity (check -k and -u)";
    assert!(err.contains("DTLS handshake") && err.contains(why), "{err}");
    let wrong_key = corral(&["get", &uri, "-k", "not the key", "-u", "alice", "-B", "5"]);
    assert_eq!(stderr(&wrong_key), err, "a wrong key reads the same");
}

#[test]
fn a_wrong_key_fails_the_handshake_in_one_line_with_exit_status_8() {
    let (_dir, psk) = psk_file();
    let s = dtls_server(&psk);
    let uri = format!("coaps://127.0.0.1:{}/hello", s.port);
    let o = corral(&["get", &uri, "-k", "not the key", "-u", "alice", "-B", "5"]);
    assert_eq!(code(&o), 8, "{}", stderr(&o));
    assert!(stderr(&o).contains("the keys do not match"), "{}", stderr(&o));
}

#[test]
fn a_server_that_does_not_answer_the_handshake_is_a_handshake_failure() {
    // A UDP socket that reads nothing: the ClientHello goes unanswered.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let uri = format!("coaps://127.0.0.1:{}/hello", silent.local_addr().unwrap().port());
    let o = run(Command::new(CORRAL).args(["get", &uri, "-k", "k", "-u", "alice", "-B", "3"]), Duration::from_secs(60));
    assert_eq!(code(&o), 8, "{}", stderr(&o));
    assert!(stderr(&o).contains("no answer to the handshake"), "{}", stderr(&o));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
}

#[test]
fn coaps_without_credentials_is_a_usage_error_that_names_the_flags() {
    let o = corral(&["get", "coaps://127.0.0.1:5684/hello"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("-k KEY -u IDENTITY"), "{}", stderr(&o));
    let o = corral(&["get", "coaps://127.0.0.1:5684/hello", "-k", "key"]);
    assert_eq!(code(&o), 2, "-k without -u: {}", stderr(&o));
}

#[test]
fn serve_dtls_without_a_psk_file_is_a_usage_error() {
    let o = corral(&["serve", "--bind", "127.0.0.1:0", "--dtls"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("--psk-file"), "{}", stderr(&o));
}

#[test]
fn the_plain_port_still_speaks_coap_when_dtls_is_served_too() {
    let (_dir, psk) = psk_file();
    let mut cmd = Command::new(CORRAL);
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--dtls", "127.0.0.1:0", "--psk-file", &psk]);
    let s = spawn_with_port(&mut cmd, banner_port);
    let o = corral(&["get", &format!("coap://127.0.0.1:{}/hello", s.port)]);
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "Hello from corral!\n"));
}

/// One node behind both schemes: what a client PUTs over coap:// another reads back over coaps://, and
/// the other way round (the resources are not copied per transport).
#[test]
fn a_put_over_coap_is_read_back_over_coaps_and_the_other_way_round() {
    let (_dir, psk) = psk_file();
    let (plain, secure) = (free_udp_port(), free_udp_port());
    let mut cmd = Command::new(CORRAL);
    cmd.args(["serve", "--bind", &format!("127.0.0.1:{plain}"), "--dtls", &format!("127.0.0.1:{secure}")]);
    cmd.args(["--psk-file", &psk]);
    let s = spawn_with_port(&mut cmd, |line| {
        line.strip_prefix("corral serve: coaps:// (DTLS 1.2, PSK) on ")?.rsplit_once(':')?.1.parse().ok()
    });
    assert_eq!(s.port, secure);
    let creds = ["-k", "secretPSK", "-u", "alice"];
    let (coap, coaps) = (format!("coap://127.0.0.1:{plain}/test"), format!("coaps://127.0.0.1:{secure}/test"));
    let o = corral(&["put", &coap, "-e", "written over coap", "-t", "text"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = corral(&[&["get", &coaps][..], &creds].concat());
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "written over coap\n"), "{}", stderr(&o));
    let o = corral(&[&["put", &coaps, "-e", "written over coaps", "-t", "text"][..], &creds].concat());
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = corral(&["get", &coap]);
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "written over coaps\n"), "{}", stderr(&o));
}
