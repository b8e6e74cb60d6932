//! coaps:// interop with libcoap's DTLS builds, PSK (TLS_PSK_WITH_AES_128_CCM_8 or whatever suite both
//! sides share): `coap-client-gnutls` and `coap-client-openssl` against `corral serve --dtls`, and
//! `corral get coaps://` against `coap-server-gnutls` and `coap-server-openssl`.
//!
//! Runs when `CORRAL_INTEROP=1` (scripts/test.sh sets it); otherwise each test says it was skipped.
//!
//! Known differences: libcoap's server listens for DTLS on its `-p` port + 1; its client appends a newline
//! to a payload it prints.

use crate::common;
use common::*;
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

fn out(o: &std::process::Output) -> String {
    format!("status {:?}\nstdout: {}\nstderr: {}", o.status.code(), stdout(o), stderr(o))
}

fn libcoap_client_against_corral(client: &str) {
    if !interop_enabled(&[client]) {
        return;
    }
    let (_dir, s) = corral_dtls_server();
    let uri = format!("coaps://127.0.0.1:{}/hello", s.port);
    let o = run(Command::new(client).args(["-B", "10", "-k", "secretPSK", "-u", "alice", &uri]), LIMIT);
    assert_eq!(stdout(&o).trim_end(), "Hello from corral!", "{}", out(&o));
    let put = format!("coaps://127.0.0.1:{}/test", s.port);
    let o = run(
        Command::new(client).args([
            "-B",
            "10",
            "-k",
            "secretPSK",
            "-u",
            "alice",
            "-m",
            "put",
            "-e",
            "from libcoap",
            &put,
        ]),
        LIMIT,
    );
    assert!(o.status.success(), "{}", out(&o));
    let o = corral(&["get", &put, "-k", "secretPSK", "-u", "alice"]);
    assert_eq!(stdout(&o).trim_end(), "from libcoap", "{}", out(&o));
    let o = run(Command::new(client).args(["-B", "10", "-k", "wrong", "-u", "mallory", &uri]), LIMIT);
    assert!(!stdout(&o).contains("Hello"), "an unknown identity gets nothing: {}", out(&o));
}

#[test]
fn coap_client_gnutls_against_corral_serve_dtls() {
    libcoap_client_against_corral("coap-client-gnutls");
}

#[test]
fn coap_client_openssl_against_corral_serve_dtls() {
    libcoap_client_against_corral("coap-client-openssl");
}

fn corral_against_libcoap(server: &str) {
    if !interop_enabled(&[server]) {
        return;
    }
    let s = libcoap_dtls_server(server, &["-k", "secretPSK"]);
    let uri = format!("coaps://127.0.0.1:{}/", s.port);
    let o = run(Command::new(CORRAL).args(["get", &uri, "-k", "secretPSK", "-u", "alice", "-B", "10"]), LIMIT);
    assert_eq!(code(&o), 0, "{}", out(&o));
    assert!(stdout(&o).contains("libcoap"), "libcoap's server describes itself at /: {}", out(&o));
    let data = format!("coaps://127.0.0.1:{}/example_data", s.port);
    let o =
        run(Command::new(CORRAL).args(["put", &data, "-e", "from corral", "-k", "secretPSK", "-u", "alice"]), LIMIT);
    assert_eq!(code(&o), 0, "{}", out(&o));
    let o = run(Command::new(CORRAL).args(["get", &data, "-k", "secretPSK", "-u", "alice"]), LIMIT);
    assert_eq!(stdout(&o).trim_end(), "from corral", "{}", out(&o));
    let o = run(Command::new(CORRAL).args(["get", &uri, "-k", "wrong", "-u", "alice", "-B", "5"]), LIMIT);
    assert_eq!(code(&o), 8, "a wrong key is a handshake failure: {}", out(&o));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", out(&o));
}

#[test]
fn corral_get_coaps_against_coap_server_gnutls() {
    corral_against_libcoap("coap-server-gnutls");
}

#[test]
fn corral_get_coaps_against_coap_server_openssl() {
    corral_against_libcoap("coap-server-openssl");
}
