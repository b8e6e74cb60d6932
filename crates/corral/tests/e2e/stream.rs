//! `corral stream` over real sockets: a collector (`corral stream recv`, and `/stream` on `corral serve`)
//! and a sender with each scheme — CoAP-SC, CoAP over UDP, CoAP over TCP — completing a stream; and the
//! collector's resources still usable with plain CoAP by libcoap's client (with `CORRAL_INTEROP=1`).

use crate::common;
use common::*;
use std::process::Command;
use std::time::Duration;

fn send(uri: &str, scheme: &str) -> serde_json::Value {
    let o = run(
        Command::new(CORRAL).args([
            "stream",
            "send",
            uri,
            "--scheme",
            scheme,
            "--count",
            "40",
            "--interval",
            "10ms",
            "--buffer",
            "4",
            "--json",
        ]),
        Duration::from_secs(60),
    );
    assert_eq!(o.status.code(), Some(0), "{scheme}: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{scheme}: not JSON ({e}): {}", stdout(&o)))
}

#[test]
fn every_scheme_completes_a_stream_to_a_corral_collector() {
    let (_r, j) = spawn_json(Command::new(CORRAL).args(["stream", "recv", "--bind", "127.0.0.1:0", "--tcp", "--json"]));
    let udp = j["udp"].as_str().unwrap().to_string();
    let tcp = j["tcp"].as_str().unwrap().to_string();
    for (uri, scheme) in
        [(format!("coap://{udp}"), "sc"), (format!("coap://{udp}"), "udp"), (format!("coap+tcp://{tcp}"), "tcp")]
    {
        let m = send(&uri, scheme);
        assert_eq!(m["acknowledged"], 40, "{scheme}: {m}");
        assert_eq!(m["done"], true, "{scheme}: {m}");
        assert_eq!(m["nrp"], 0, "{scheme}: no loss on loopback: {m}");
        assert!(m["ttd_ms"].as_f64().unwrap() >= 390.0, "{scheme}: 40 readings 10 ms apart: {m}");
    }
    let o = corral(&["get", &format!("coap://{udp}/stream")]);
    let st: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(st["stats"]["delivered"], 120, "{st}");
    assert_eq!(st["stats"]["duplicates"], 0, "{st}");
}

#[test]
fn corral_serve_collects_streams_and_plain_clients_still_get_its_resources() {
    let s = corral_serve("127.0.0.1", &[]);
    let m = send(&format!("coap://127.0.0.1:{}", s.port), "sc");
    assert_eq!(m["acknowledged"], 40, "{m}");
    if std::env::var("CORRAL_INTEROP").as_deref() == Ok("1") {
        let o = run(
            Command::new("coap-client-notls").args(["-B", "5", &format!("coap://127.0.0.1:{}/stream", s.port)]),
            Duration::from_secs(20),
        );
        assert!(stdout(&o).contains("\"delivered\":40"), "libcoap reads /stream: {}", stdout(&o));
        let o = run(
            Command::new("coap-client-notls").args(["-B", "5", &format!("coap://127.0.0.1:{}/hello", s.port)]),
            Duration::from_secs(20),
        );
        assert!(stdout(&o).contains("Hello from corral!"), "{}", stdout(&o));
    }
    let o = corral(&["stream", "send", "--help"]);
    assert!(stdout(&o).contains("NRP") && stdout(&o).contains("--scheme"), "--help teaches");
    let o = corral(&["stream", "send", "coap://127.0.0.1:9", "--scheme", "sideways"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}
