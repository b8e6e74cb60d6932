//! `corral rd` on real sockets: corral's, libcoap's and aiocoap's clients register with it and look up
//! what they registered; a registration survives `kill -9`; bad arguments are usage errors.

use crate::common;
use common::*;
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

fn corral_rd(data: &std::path::Path) -> Proc {
    spawn_with_port(
        Command::new(CORRAL).args(["rd", "--bind", "127.0.0.1:0", "--data", data.to_str().unwrap()]),
        banner_port,
    )
}

/// The registration's location (`/rd/…`) from `corral post -v` output (one `Location-Path: SEG` line per
/// segment).
fn location_of(o: &std::process::Output) -> String {
    let text = format!("{}{}", stdout(o), stderr(o));
    let segs: Vec<&str> = text.lines().filter_map(|l| l.trim().strip_prefix("Location-Path: ")).collect();
    assert_eq!(segs.len(), 2, "{text}");
    format!("/{}", segs.join("/"))
}

#[test]
fn corral_registers_looks_up_and_removes_and_a_registration_survives_kill_9() {
    let data = tempfile::tempdir().unwrap();
    let rd = corral_rd(data.path());
    let base = format!("coap://127.0.0.1:{}", rd.port);
    let o = corral(&[
        "post",
        &format!("{base}/rd?ep=node1&lt=600&d=floor2"),
        "-t",
        "link",
        "-e",
        "</temp>;rt=temperature;ct=0",
        "-v",
    ]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let loc = location_of(&o);
    let o = corral(&["get", &format!("{base}/rd-lookup/res?rt=temperature")]);
    let res = stdout(&o);
    assert!(res.contains("/temp>;rt=\"temperature\";ct=0;anchor=\"coap://127.0.0.1:"), "{res}");
    // kill -9: the registration was stored before it was acknowledged.
    drop(rd);
    let rd = corral_rd(data.path());
    let base = format!("coap://127.0.0.1:{}", rd.port);
    let eps = stdout(&corral(&["get", &format!("{base}/rd-lookup/ep?ep=node1")]));
    assert!(eps.contains(&format!("<{loc}>;ep=\"node1\";d=\"floor2\"")), "{eps}");
    // The restarted directory has another port, and so has this new client: the name belongs to the
    // address (127.0.0.1), which is the same, so the owner may remove it.
    let o = corral(&["delete", &format!("{base}{loc}")]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&corral(&["get", &format!("{base}/rd-lookup/ep")])).trim(), "");
}

#[test]
fn libcoap_and_aiocoap_clients_register_and_look_up() {
    if !interop_enabled(&["coap-client-notls", "aiocoap-client"]) {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let rd = corral_rd(data.path());
    let base = format!("coap://127.0.0.1:{}", rd.port);
    let o = run(
        Command::new("coap-client-notls").args([
            "-m",
            "post",
            "-t",
            "40",
            "-e",
            "</sensors/temp>;rt=temperature;if=sensor",
            &format!("{base}/rd?ep=libcoap-node&lt=300"),
        ]),
        LIMIT,
    );
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let o = run(
        Command::new("aiocoap-client").args([
            "-m",
            "POST",
            "--content-format",
            "application/link-format",
            "--payload",
            "</light>;rt=light-lux",
            &format!("{base}/rd?ep=aiocoap-node&lt=300"),
        ]),
        LIMIT,
    );
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    // Each looks up the other's resources.
    let o = run(Command::new("coap-client-notls").arg(format!("{base}/rd-lookup/res?rt=light-lux")), LIMIT);
    assert!(stdout(&o).contains("/light>;rt=\"light-lux\""), "{}{}", stdout(&o), stderr(&o));
    let o = run(Command::new("aiocoap-client").arg(format!("{base}/rd-lookup/ep?ep=libcoap*")), LIMIT);
    assert!(stdout(&o).contains("ep=\"libcoap-node\""), "{}{}", stdout(&o), stderr(&o));
    // Discovery names the interfaces by their resource types.
    let o = run(Command::new("coap-client-notls").arg(format!("{base}/.well-known/core?rt=core.rd*")), LIMIT);
    let wkc = stdout(&o);
    for rt in ["core.rd\"", "core.rd-lookup-ep", "core.rd-lookup-res"] {
        assert!(wkc.contains(rt), "{rt}: {wkc}");
    }
}

#[test]
fn a_bad_bind_address_is_a_usage_error() {
    let o = corral(&["rd", "--bind", "nowhere"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("not ADDR:PORT"), "{}", stderr(&o));
}

/// Waits (at most 15 s) until `ep` lookups at `base` satisfy `ok`; the last answer.
fn wait_for_lookup(base: &str, ok: impl Fn(&str) -> bool) -> String {
    let mut last = String::new();
    for _ in 0..30 {
        last = stdout(&corral(&["get", &format!("{base}/rd-lookup/ep")]));
        if ok(&last) {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    last
}

#[test]
fn devices_register_themselves_and_remove_their_registrations_when_they_stop() {
    let data = tempfile::tempdir().unwrap();
    let rd = corral_rd(data.path());
    let base = format!("coap://127.0.0.1:{}", rd.port);
    let (mut dev, j) = rd_devices(&base, 2);
    let port = j["devices"][0].as_str().unwrap().rsplit_once(':').unwrap().1.to_string();
    let eps = wait_for_lookup(&base, |t| t.matches("ep=\"dev-").count() == 2);
    assert_eq!(eps.matches("ep=\"dev-").count(), 2, "{eps}");
    assert!(eps.contains(&format!("base=\"coap://127.0.0.1:{port}\"")), "the base is the device's own address: {eps}");
    let res = stdout(&corral(&["get", &format!("{base}/rd-lookup/res?rt=temperature*")]));
    assert!(res.contains(&format!("<coap://127.0.0.1:{port}/s/t>")), "{res}");
    // A graceful stop removes the registrations.
    let pid = dev.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let status = dev.child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let eps = stdout(&corral(&["get", &format!("{base}/rd-lookup/ep")]));
    assert_eq!(eps.trim(), "", "removed on the way out");
}

/// Issue 41 item 8: a squatter registers, from another address, the name `corral device --rd` used to
/// register under (`dev-ADDR-PORT`), for 136 years. That lifetime is refused (4.00 naming the longest
/// kept); with the longest allowed the squatter gets the name — and the device, which registers under a
/// name nobody could guess, is listed all the same.
#[test]
fn a_squatter_can_neither_hold_a_name_for_136_years_nor_keep_a_device_out() {
    let data = tempfile::tempdir().unwrap();
    let rd = corral_rd(data.path());
    let base = format!("coap://127.0.0.1:{}", rd.port);
    let port = free_udp_port();
    let old_name = format!("dev-127.0.87.2-{port}");
    let squat = |lt: &str| {
        let uri = format!("{base}/rd?ep={old_name}&lt={lt}&base=coap://127.0.87.66:{port}");
        corral(&["post", &uri, "-t", "link", "-e", "</s/t>;rt=temperature"])
    };
    let o = squat("4294967295");
    assert_ne!(code(&o), 0, "{}", described(&o));
    assert!(stderr(&o).contains("4.00") && stderr(&o).contains("at most 90000 seconds"), "{}", described(&o));
    let o = squat("90000");
    assert_eq!(code(&o), 0, "{}", described(&o));

    let args = ["device", "--bind", &format!("127.0.87.2:{port}"), "--rd", &base, "--rd-lifetime", "60", "--json"];
    let (_device, _) = spawn_json(Command::new(CORRAL).args(args));
    let eps = wait_for_lookup(&base, |t| t.matches("ep=\"dev-127.0.87.2-").count() == 2);
    assert_eq!(eps.matches("ep=\"dev-127.0.87.2-").count(), 2, "the squatter's and the device's: {eps}");
    assert!(eps.contains(&format!("base=\"coap://127.0.87.2:{port}\"")), "the device is listed: {eps}");
}
