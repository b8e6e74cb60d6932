//! The Resource Directory's security policies by identity (RFC 9176 §7), with the real binary on real
//! sockets: a name registered over coaps:// is bound to the PSK identity that registered it — another
//! identity (4.03) or plain CoAP (4.01) can neither update, remove nor register it again, its owner can,
//! and a restarted directory keeps the binding; `--rd-policy identity` refuses plain registrations; `corral
//! gateway --rd` takes the same flag.

use crate::common;
use common::*;
use std::process::Command;

const KEYS: &str = r#"{"alice": "alicesKey", "bob": "bobsKey"}"#;
const ALICE: [&str; 4] = ["-k", "alicesKey", "-u", "alice"];
const BOB: [&str; 4] = ["-k", "bobsKey", "-u", "bob"];

/// `corral rd --dtls --psk-file PSK` with `extra` flags on an ephemeral loopback port (coap:// and
/// coaps:// share it), its registrations in `data`.
fn corral_rd(data: &std::path::Path, psk: &str, extra: &[&str]) -> Proc {
    let mut args = vec!["rd", "--bind", "127.0.0.1:0", "--data", data.to_str().unwrap(), "--dtls", "--psk-file", psk];
    args.extend_from_slice(extra);
    spawn_with_port(Command::new(CORRAL).args(&args), banner_port)
}

/// `corral ARGS… CREDENTIALS…`.
fn with(args: &[&str], credentials: &[&str]) -> std::process::Output {
    corral(&[args, credentials].concat())
}

/// The registration's location (`/rd/…`) from `corral post -v` output.
fn location_of(o: &std::process::Output) -> String {
    let text = format!("{}{}", stdout(o), stderr(o));
    let segs: Vec<&str> = text.lines().filter_map(|l| l.trim().strip_prefix("Location-Path: ")).collect();
    assert_eq!(segs.len(), 2, "{text}");
    format!("/{}", segs.join("/"))
}

/// Registers `ep` at `rd` (a coap:// or coaps:// base) with `credentials`; the output.
fn register(rd: &str, ep: &str, credentials: &[&str]) -> std::process::Output {
    let uri = format!("{rd}/rd?ep={ep}&lt=600");
    with(&["post", &uri, "-t", "link", "-e", "</temp>;rt=temperature", "-v"], credentials)
}

#[test]
fn a_name_registered_over_coaps_is_changed_only_by_its_identity_even_after_a_restart() {
    let (dir, paths) = write_files(&[("psk.json", KEYS)]);
    let data = dir.path().join("rd");
    let rd = corral_rd(&data, &paths[0], &[]);
    let (coap, coaps) = (format!("coap://127.0.0.1:{}", rd.port), format!("coaps://127.0.0.1:{}", rd.port));
    let o = register(&coaps, "node1", &ALICE);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let loc = location_of(&o);

    // bob, over coaps:// from the same address, can neither register the name again, update nor remove it.
    let o = register(&coaps, "node1", &BOB);
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(stderr(&o).contains("4.03") && stderr(&o).contains("bound to the identity dtls:alice"), "{}", stderr(&o));
    let o = with(&["post", &format!("{coaps}{loc}?lt=60")], &BOB);
    assert!(code(&o) == 4 && stderr(&o).contains("4.03"), "{}", stderr(&o));
    let o = with(&["delete", &format!("{coaps}{loc}")], &BOB);
    assert!(code(&o) == 4 && stderr(&o).contains("4.03"), "{}", stderr(&o));
    // Nor can plain CoAP from that address (which "first come, first remembered" alone would let through).
    let o = register(&coap, "node1", &[]);
    assert!(code(&o) == 4 && stderr(&o).contains("4.01"), "{}", stderr(&o));
    let o = corral(&["delete", &format!("{coap}{loc}")]);
    assert!(code(&o) == 4 && stderr(&o).contains("4.01"), "{}", stderr(&o));
    assert!(stderr(&o).contains("over coaps:// or OSCORE as that identity"), "{}", stderr(&o));
    let eps = stdout(&corral(&["get", &format!("{coap}/rd-lookup/ep")]));
    assert!(eps.contains(&format!("<{loc}>;ep=\"node1\"")), "{eps}");
    assert!(eps.contains("base=\"coaps://127.0.0.1:"), "found the way it registered: {eps}");

    // A restart keeps the binding (stored with the registration).
    drop(rd);
    let rd = corral_rd(&data, &paths[0], &[]);
    let (coap, coaps) = (format!("coap://127.0.0.1:{}", rd.port), format!("coaps://127.0.0.1:{}", rd.port));
    let o = with(&["delete", &format!("{coaps}{loc}")], &BOB);
    assert!(code(&o) == 4 && stderr(&o).contains("4.03"), "{}", stderr(&o));
    let o = corral(&["delete", &format!("{coap}{loc}")]);
    assert!(code(&o) == 4 && stderr(&o).contains("4.01"), "{}", stderr(&o));
    // alice updates and removes it.
    let o = with(&["post", &format!("{coaps}{loc}?lt=60")], &ALICE);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = with(&["delete", &format!("{coaps}{loc}")], &ALICE);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&corral(&["get", &format!("{coap}/rd-lookup/ep")])).trim(), "");
}

#[test]
fn the_identity_policy_takes_registrations_over_coaps_only_and_plain_names_stay_first_come() {
    let (dir, paths) = write_files(&[("psk.json", KEYS)]);
    let rd = corral_rd(&dir.path().join("rd"), &paths[0], &["--rd-policy", "identity"]);
    let (coap, coaps) = (format!("coap://127.0.0.1:{}", rd.port), format!("coaps://127.0.0.1:{}", rd.port));
    let o = register(&coap, "plain", &[]);
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(stderr(&o).contains("4.01") && stderr(&o).contains("register over coaps://"), "{}", stderr(&o));
    assert_eq!(code(&register(&coaps, "secure", &BOB)), 0);
    // Lookups stay open to plain CoAP.
    let res = stdout(&corral(&["get", &format!("{coap}/rd-lookup/ep")]));
    assert!(res.contains("ep=\"secure\"") && !res.contains("ep=\"plain\""), "{res}");
    drop(rd);

    // The default policy: a plain registration is first come, first remembered, and its own address may
    // bind it to an identity by registering it again over coaps://.
    let rd = corral_rd(&dir.path().join("rd2"), &paths[0], &[]);
    let (coap, coaps) = (format!("coap://127.0.0.1:{}", rd.port), format!("coaps://127.0.0.1:{}", rd.port));
    let o = register(&coap, "plain", &[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(code(&register(&coap, "plain", &[])), 0);
    assert_eq!(code(&register(&coaps, "plain", &ALICE)), 0);
    let o = register(&coap, "plain", &[]);
    assert!(code(&o) == 4 && stderr(&o).contains("4.01"), "{}", stderr(&o));
}

#[test]
fn the_gateways_directory_takes_the_policy_flag() {
    let (dir, paths) = write_files(&[("psk.json", KEYS)]);
    let data = dir.path().join("gw").display().to_string();
    let args = [
        "gateway",
        "--bind",
        "127.0.0.1:0",
        "--json",
        "--data",
        &data,
        "--rd",
        "--rd-policy",
        "identity",
        "--dtls",
        "--psk-file",
        &paths[0],
    ];
    let (_gw, j) = spawn_json(Command::new(CORRAL).args(args));
    let port = j["gateway"].as_str().and_then(|g| g.rsplit_once(':')).map(|(_, p)| p.to_string()).unwrap();
    let o = register(&format!("coap://127.0.0.1:{port}"), "plain", &[]);
    assert!(code(&o) == 4 && stderr(&o).contains("4.01"), "{}", stderr(&o));
    let o = register(&format!("coaps://127.0.0.1:{port}"), "secure", &ALICE);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    // Without --rd the flag means nothing: a usage error.
    let o = corral(&["gateway", "--bind", "127.0.0.1:0", "--data", &data, "--rd-policy", "identity"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
}

#[test]
fn a_name_registered_with_oscore_is_bound_to_the_clients_kid_on_the_gateways_directory() {
    let (dir, paths) = write_files(&[("psk.json", KEYS)]);
    let port = free_udp_port();
    let (coap, coaps) = (format!("coap://127.0.0.1:{port}"), format!("coaps://127.0.0.1:{port}"));
    let keys = dir.path().join("keys");
    let o = corral(&["oscore", "new", "--server", &coap, "--dir", keys.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let (server, client) = (keys.join("server.json"), keys.join("client.json"));
    let oscore = ["--credentials", client.to_str().unwrap()];
    let (data, bind) = (dir.path().join("gw").display().to_string(), format!("127.0.0.1:{port}"));
    let args = ["gateway", "--bind", &bind, "--json", "--data", &data, "--rd", "--dtls", "--psk-file", &paths[0]];
    let (_gw, _) = spawn_json(Command::new(CORRAL).args(args).args(["--credentials", server.to_str().unwrap()]));
    let o = register(&coap, "node1", &oscore);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let loc = location_of(&o);
    // Plain CoAP from the same address, and another identity over coaps://, are refused.
    let o = corral(&["delete", &format!("{coap}{loc}")]);
    assert!(code(&o) == 4 && stderr(&o).contains("4.01"), "{}", stderr(&o));
    assert!(stderr(&o).contains("bound to the identity oscore:01"), "{}", stderr(&o));
    let o = with(&["delete", &format!("{coaps}{loc}")], &ALICE);
    assert!(code(&o) == 4 && stderr(&o).contains("4.03"), "{}", stderr(&o));
    // The client whose kid registered it removes it.
    let o = with(&["delete", &format!("{coap}{loc}")], &oscore);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}
