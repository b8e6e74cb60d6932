//! `corral wait`: what the docs' pasteable blocks use to wait for the servers they start in the background.
//! It returns once a server answers (a CoAP ping, a TCP connection, a DTLS ClientHello, a GET with the
//! text asked for), including one that starts after the wait began, and fails with status 3 naming what
//! did not answer.

use crate::common::*;
use std::process::Command;
use std::time::Duration;

#[test]
fn wait_returns_once_a_server_started_later_answers() {
    let port = free_udp_port();
    let uri = format!("coap://127.0.0.1:{port}");
    let waiting = Command::new(CORRAL).args(["wait", &uri, "-B", "20s"]).spawn().expect("corral wait starts");
    // The server starts while `wait` is already probing the port (nothing listened when it began).
    let mut server = Command::new(CORRAL)
        .args(["serve", "--bind", &format!("127.0.0.1:{port}"), "-q"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("corral serve starts");
    let status = waiting.wait_with_output().expect("wait ends").status;
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(status.code(), Some(0), "corral wait {uri}");
}

#[test]
fn wait_knows_each_transport_and_needs_no_key_for_coaps() {
    let (dir, files) = write_files(&[("psk.json", r#"{"alice": "secretPSK"}"#)]);
    let coaps = coaps_serve(&files[0]);
    let tcp = corral_serve("127.0.0.1", &["--tcp"]); // TCP on the UDP port
    let o = corral(&["wait", &format!("coaps://127.0.0.1:{}", coaps.port), "-v"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stderr(&o).contains("answered after"), "-v says when: {}", stderr(&o));
    let both = [format!("coap://127.0.0.1:{}", tcp.port), format!("coap+tcp://127.0.0.1:{}", tcp.port)];
    let o = corral(&["wait", &both[0], &both[1], "-q"]);
    assert_eq!((code(&o), stdout(&o), stderr(&o)), (0, String::new(), String::new()), "quiet on success");
    drop(dir);
}

#[test]
fn wait_for_text_gets_the_resource_until_it_contains_it() {
    let server = corral_serve("127.0.0.1", &[]);
    let hello = format!("coap://127.0.0.1:{}/hello", server.port);
    let o = corral(&["wait", &hello, "--for", "Hello from corral"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = corral(&["wait", &hello, "--for", "goodbye", "-B", "500ms"]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("answered no 2.xx containing `goodbye`")
            && stderr(&o).contains("last: 2.05 Content: Hello from corral!"),
        "names what it waited for and what came: {}",
        stderr(&o)
    );
    let missing = format!("coap://127.0.0.1:{}/nope", server.port);
    let o = corral(&["wait", &missing, "-B", "300ms"]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(stderr(&o).contains("4.04 Not Found"), "{}", stderr(&o));
}

#[test]
fn wait_fails_with_status_3_naming_the_silent_uri() {
    let port = free_udp_port();
    let uri = format!("coap://127.0.0.1:{port}");
    let o = run(Command::new(CORRAL).args(["wait", &uri, "-B", "300ms"]), Duration::from_secs(10));
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(
        stderr(&o)
            .contains(&format!("error: {uri} did not answer within 300ms (last: 127.0.0.1:{port}: port unreachable)")),
        "{}",
        stderr(&o)
    );
    let o = corral(&["wait", &uri, "--for", "x"]);
    assert_eq!(code(&o), 2, "--for needs a path: {}", stderr(&o));
    let o = corral(&["wait", "coaps://127.0.0.1/hello"]);
    assert_eq!(code(&o), 2, "a coaps:// GET needs keys: {}", stderr(&o));
}
