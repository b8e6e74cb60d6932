//! `corral proxy` between coap:// and coaps://, with the real binary: a Proxy-Uri or a FIB next hop
//! `coaps://…` is reached over DTLS with the credentials of `--peer-psk-file`; `--dtls --psk-file` accepts
//! coaps:// clients on the proxy's own port and forwards them to coap://; OSCORE travels inside DTLS.

use crate::common;
use common::*;
use std::process::Command;

const KEYS: &str = r#"{"alice": "secretPSK", "proxy": "proxyKey"}"#;

/// `corral proxy --json` on an ephemeral loopback port with `extra` flags; the proxy and its port.
fn proxy(extra: &[&str]) -> (Proc, u16) {
    let mut args = vec!["proxy", "--bind", "127.0.0.1:0", "--json"];
    args.extend_from_slice(extra);
    let (p, j) = spawn_json(Command::new(CORRAL).args(&args));
    let port = j["udp"].as_str().and_then(|a| a.rsplit_once(':')).and_then(|(_, p)| p.parse().ok());
    (p, port.expect("the summary names the proxy's port"))
}

fn peers_for(port: u16, key: &str) -> String {
    format!(r#"{{"coaps://127.0.0.1:{port}": {{"identity": "proxy", "key": "{key}"}}}}"#)
}

#[test]
fn a_coap_client_reaches_a_coaps_origin_through_the_proxy() {
    let (_d, paths) = write_files(&[("psk.json", KEYS)]);
    let origin = coaps_serve(&paths[0]);
    let (_p, peers) = write_files(&[("peers.json", &peers_for(origin.port, "proxyKey"))]);
    let (_px, port) = proxy(&["--peer-psk-file", &peers[0]]);
    let o = corral(&[
        "get",
        &format!("coaps://127.0.0.1:{}/hello", origin.port),
        "-P",
        &format!("coap://127.0.0.1:{port}"),
    ]);
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "Hello from corral!\n"), "{}", stderr(&o));
}

#[test]
fn a_fib_next_hop_over_coaps_is_reached_with_the_peer_credentials() {
    let (_d, paths) = write_files(&[("psk.json", KEYS)]);
    let origin = coaps_serve(&paths[0]);
    let fib = format!(
        "[[rule]]\nmatch = \"/hello\"\nnext = [{{ to = \"coaps://127.0.0.1:{}\", send_host = false }}]\n",
        origin.port
    );
    let (_p, f) = write_files(&[("peers.json", &peers_for(origin.port, "proxyKey")), ("fib.toml", &fib)]);
    let (_px, port) = proxy(&["--peer-psk-file", &f[0], "--fib", &f[1]]);
    // The client names a plain origin; the FIB sends it to the coaps:// hop.
    let o = corral(&["get", "coap://127.0.0.1:9/hello", "-P", &format!("coap://127.0.0.1:{port}")]);
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "Hello from corral!\n"), "{}", stderr(&o));
    // A coaps:// hop without credentials is the operator's error at start-up.
    let (_q, g) = write_files(&[("fib.toml", &fib)]);
    let o = corral(&["proxy", "--bind", "127.0.0.1:0", "--fib", &g[0]]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("no DTLS credentials"), "{}", stderr(&o));
}

#[test]
fn a_coaps_client_reaches_a_coap_origin_through_the_proxy() {
    let (_d, paths) = write_files(&[("psk.json", KEYS)]);
    let origin = corral_serve("127.0.0.1", &[]);
    let (_px, port) = proxy(&["--dtls", "--psk-file", &paths[0]]);
    let target = format!("coap://127.0.0.1:{}/hello", origin.port);
    let o = corral(&["get", &target, "-P", &format!("coaps://127.0.0.1:{port}"), "-k", "secretPSK", "-u", "alice"]);
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "Hello from corral!\n"), "{}", stderr(&o));
    // The same port still takes plain CoAP.
    let o = corral(&["get", &target, "-P", &format!("coap://127.0.0.1:{port}")]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

#[test]
fn a_coaps_origin_the_proxy_has_no_credentials_for_is_refused_and_a_failed_handshake_named() {
    let (_d, paths) = write_files(&[("psk.json", KEYS)]);
    let origin = coaps_serve(&paths[0]);
    let (_p, peers) = write_files(&[("peers.json", &peers_for(origin.port, "WRONG"))]);
    let (_px, port) = proxy(&["--peer-psk-file", &peers[0]]);
    let via = format!("coap://127.0.0.1:{port}");
    let o = corral(&["get", &format!("coaps://127.0.0.1:{}/hello", origin.port + 1), "-P", &via]);
    assert_eq!(code(&o), 5, "{}", stderr(&o));
    assert!(stderr(&o).contains("5.05") && stderr(&o).contains("no DTLS credentials"), "{}", stderr(&o));
    let o = corral(&["get", &format!("coaps://127.0.0.1:{}/hello", origin.port), "-P", &via]);
    assert_eq!(code(&o), 5, "{}", stderr(&o));
    assert!(stderr(&o).contains("5.02") && stderr(&o).contains("the keys do not match"), "{}", stderr(&o));
}
