//! `corral gateway` over coaps://, with the real binary: coaps:// clients on the gateway's own port
//! (`--dtls --psk-file`), access roles by PSK identity (`--allow manage=psk:alice`), and coaps:// members
//! reached with `--peer-psk-file` (a member's failed handshake is that member's error, naming the reason).

use crate::common;
use common::*;
use std::process::Command;

const CLIENT_KEYS: &str = r#"{"alice": "secretPSK", "bob": "bobsKey", "gw": "memberKey"}"#;

/// `corral gateway --json` on an ephemeral loopback port with a scratch database and `extra` flags; the
/// gateway and its port.
fn gateway(data: &tempfile::TempDir, extra: &[&str]) -> (Proc, u16) {
    let dir = data.path().join("gw").display().to_string();
    let mut args = vec!["gateway", "--bind", "127.0.0.1:0", "--json", "--data", &dir];
    args.extend_from_slice(extra);
    let (p, j) = spawn_json(Command::new(CORRAL).args(&args));
    let port = j["gateway"].as_str().and_then(|g| g.rsplit_once(':')).and_then(|(_, p)| p.parse().ok());
    (p, port.expect("the summary names the gateway's port"))
}

fn profile(members: &[String]) -> String {
    serde_json::json!({ "er": members }).to_string()
}

#[test]
fn a_psk_identity_proved_over_coaps_gets_its_role_on_the_gateways_own_port() {
    let (dir, paths) = write_files(&[("psk.json", CLIENT_KEYS)]);
    let member = corral_serve("127.0.0.1", &[]);
    let ports = format!("5683,{}", member.port);
    let (_gw, port) = gateway(
        &dir,
        &["--dtls", "--psk-file", &paths[0], "--allow", "read=127.0.0.0/8", "--allow", "manage=psk:alice"]
            .into_iter()
            .chain(["--member-port", &ports])
            .collect::<Vec<_>>(),
    );
    let body = profile(&[format!("coap://127.0.0.1:{}/hello", member.port)]);
    // Plain CoAP from loopback may only read.
    let o = corral(&["put", &format!("coap://127.0.0.1:{port}/em/room1"), "-t", "json", "-e", &body]);
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(stderr(&o).contains("may read entities, not manage"), "{}", stderr(&o));
    // bob proves his identity, which has no role of its own: still only the address's read, and the
    // refusal names him.
    let uri = format!("coaps://127.0.0.1:{port}/em/room1");
    let o = corral(&["put", &uri, "-t", "json", "-e", &body, "-k", "bobsKey", "-u", "bob"]);
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(stderr(&o).contains("PSK identity \"bob\""), "{}", stderr(&o));
    // alice manages, over DTLS on the gateway's own port.
    let o = corral(&["put", &uri, "-t", "json", "-e", &body, "-k", "secretPSK", "-u", "alice"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = corral(&["get", &uri, "-k", "secretPSK", "-u", "alice"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("Hello from corral!"), "{}", stdout(&o));
    // The same port still serves plain CoAP.
    let o = corral(&["get", &format!("coap://127.0.0.1:{port}/em/room1")]);
    assert!(stdout(&o).contains("Hello from corral!"), "{}", stderr(&o));
    // A wrong key is the client's handshake failure (exit status 8).
    let o = corral(&["get", &uri, "-k", "nope", "-u", "alice"]);
    assert_eq!(code(&o), 8, "{}", stderr(&o));
}

#[test]
fn a_coaps_member_is_reached_over_dtls_with_the_peer_credentials() {
    let (dir, paths) = write_files(&[("psk.json", CLIENT_KEYS)]);
    let member = coaps_serve(&paths[0]);
    let peers = format!(r#"{{"coaps://127.0.0.1:{}": {{"identity": "gw", "key": "memberKey"}}}}"#, member.port);
    let (_d, p) = write_files(&[("peers.json", &peers)]);
    let (_gw, port) = gateway(&dir, &["--peer-psk-file", &p[0]]);
    let body = profile(&[format!("coaps://127.0.0.1:{}/hello", member.port)]);
    let o = corral(&["put", &format!("coap://127.0.0.1:{port}/em/room1"), "-t", "json", "-e", &body]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = corral(&["get", &format!("coap://127.0.0.1:{port}/em/room1")]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), format!("coaps://127.0.0.1:{}/hello Hello from corral!", member.port));
}

#[test]
fn a_members_failed_handshake_is_that_members_error_and_names_the_reason() {
    let (dir, paths) = write_files(&[("psk.json", CLIENT_KEYS)]);
    let secure = coaps_serve(&paths[0]);
    let plain = corral_serve("127.0.0.1", &[]);
    let peers = format!(r#"{{"coaps://127.0.0.1:{}": {{"identity": "gw", "key": "WRONG"}}}}"#, secure.port);
    let (_d, p) = write_files(&[("peers.json", &peers)]);
    let ports = format!("5683,{}", plain.port);
    let (_gw, port) = gateway(&dir, &["--peer-psk-file", &p[0], "--member-port", &ports]);
    let (s, c) = (format!("coaps://127.0.0.1:{}/hello", secure.port), format!("coap://127.0.0.1:{}/hello", plain.port));
    let o = corral(&[
        "put",
        &format!("coap://127.0.0.1:{port}/em/room1"),
        "-t",
        "json",
        "-e",
        &profile(&[s.clone(), c.clone()]),
    ]);
    let err = stderr(&o);
    assert_eq!(code(&o), 4, "{err}");
    assert!(err.contains(&format!("{s} validate: DTLS handshake failed: the keys do not match")), "{err}");
    assert!(err.contains(&format!("{c} validate: 2.05 Content")), "the other member answers: {err}");
}

#[test]
fn a_coaps_member_without_credentials_is_refused_rather_than_sent_plain_coap() {
    let (dir, _) = write_files(&[]);
    let plain = corral_serve("127.0.0.1", &[]);
    let ports = format!("5683,{}", plain.port);
    let (_gw, port) = gateway(&dir, &["--member-port", &ports]);
    let body = profile(&[format!("coaps://127.0.0.1:{}/hello", plain.port)]);
    let o = corral(&["put", &format!("coap://127.0.0.1:{port}/em/room1"), "-t", "json", "-e", &body]);
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(stderr(&o).contains("no DTLS credentials"), "{}", stderr(&o));
}

#[test]
fn gateway_dtls_flags_say_what_to_fix() {
    let (dir, paths) = write_files(&[("bad.json", r#"{"coap://127.0.0.1": {"identity": "g", "key": "k"}}"#)]);
    let data = dir.path().join("gw").display().to_string();
    let o = corral(&["gateway", "--bind", "127.0.0.1:0", "--data", &data, "--peer-psk-file", &paths[0]]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("expected coaps://ADDR[:PORT]"), "{}", stderr(&o));
    let o = corral(&["gateway", "--bind", "127.0.0.1:0", "--data", &data, "--dtls"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("--psk-file"), "{}", stderr(&o));
    let o = corral(&["gateway", "--bind", "127.0.0.1:0", "--data", &data, "--allow", "read=psk:"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
}

#[test]
fn an_oscore_request_travels_inside_dtls_to_the_gateway() {
    let (dir, paths) = write_files(&[("psk.json", CLIENT_KEYS)]);
    let port = free_udp_port();
    let uri = format!("coaps://127.0.0.1:{port}");
    let keys = dir.path().join("oscore").display().to_string();
    let o = corral(&["oscore", "new", "--server", &uri, "--dir", &keys]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let (server, client) = (format!("{keys}/server.json"), format!("{keys}/client.json"));
    let bind = format!("127.0.0.1:{port}");
    let data = dir.path().join("gw").display().to_string();
    let args = ["gateway", "--bind", &bind, "--json", "--data", &data, "--dtls", "--psk-file", &paths[0]];
    let (_gw, _) = spawn_json(Command::new(CORRAL).args(args).args(["--credentials", &server, "--require-oscore"]));
    let dtls = ["-k", "secretPSK", "-u", "alice"];
    // DTLS alone is not enough for a gateway that requires OSCORE...
    let o = corral(&[&["get", &format!("{uri}/em")][..], &dtls].concat());
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(stderr(&o).contains("4.01"), "{}", stderr(&o));
    // ...and the OSCORE-protected request inside the DTLS session is served.
    let o = corral(&[&["get", &format!("{uri}/em"), "--credentials", &client][..], &dtls].concat());
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

/// The HTTP window's cross-proxy reaches a coaps:// member with the gateway's credentials for it
/// (`/hc/coaps://…`), and names the flag when it has none for the target.
#[test]
fn the_cross_proxy_reaches_a_coaps_member_with_the_gateways_credentials() {
    let (dir, paths) = write_files(&[("psk.json", CLIENT_KEYS)]);
    let member = coaps_serve(&paths[0]);
    let peers = format!(r#"{{"coaps://127.0.0.1:{}": {{"identity": "gw", "key": "memberKey"}}}}"#, member.port);
    let (_d, p) = write_files(&[("peers.json", &peers)]);
    let data = dir.path().join("gw").display().to_string();
    let other = member.port.wrapping_add(1);
    let ports = format!("5683,{},{other}", member.port);
    let (_gw, j) = spawn_json(Command::new(CORRAL).args([
        "gateway",
        "--member-port",
        &ports,
        "--bind",
        "127.0.0.1:0",
        "--json",
        "--data",
        &data,
        "--peer-psk-file",
        &p[0],
        "--http",
        "127.0.0.1:0",
    ]));
    let http = j["http"].as_str().expect("the summary names the HTTP listener");
    let get = |uri: String| {
        let out = Command::new("curl").args(["-s", "--max-time", "20", "-w", "\n%{http_code}", &uri]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, status) = text.rsplit_once('\n').unwrap_or(("", ""));
        (status.to_string(), body.to_string())
    };
    let (status, body) = get(format!("http://{http}/hc/coaps://127.0.0.1:{}/hello", member.port));
    assert_eq!(status, "200", "{body}");
    assert_eq!(body.trim(), "Hello from corral!");
    // A coaps:// server the gateway holds no credentials for: a problem that says how to give them.
    let (status, body) = get(format!("http://{http}/hc/coaps://127.0.0.1:{other}/hello"));
    assert_eq!(status, "502", "{body}");
    assert!(body.contains("no DTLS credentials") && body.contains("--peer-psk-file"), "{body}");
}
