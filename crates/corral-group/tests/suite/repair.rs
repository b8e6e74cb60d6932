//! `repair=unicast` (beyond the paper): a multicast entity asks the members that stayed silent during its
//! multicast window once more, by unicast CON.

use crate::common;

use common::*;
use corral_proto::wire::{Code, ContentFormat, MessageType};
use corral_proto::Request;
use serde_json::json;

#[test]
fn multicast_with_unicast_repair_asks_only_the_silent_members_by_con() {
    let mut lab = lab_with(LabConfig { devices: 5, v6: true, ..LabConfig::default() });
    let er = lab.uris(0..5, "s/t");
    let r = lab.create("room", json!({ "er": er, "ect": "multicast", "repair": "unicast" }));
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
    assert_eq!(json(&r.payload)["profile"]["repair"], "unicast");

    // Device 2's answers to the group request are lost on their way back.
    let (dev, gw) = (dev_addr(2, true), gw_addr(true));
    lab.net.set_drop(move |r| r.from == dev && r.to == gw && r.message().is_some_and(|m| m.mtype == MessageType::Non));
    let mark = lab.net.now;
    let r = lab.get("em/room", &["eo=lst"], Some(ContentFormat::JSON));
    assert_eq!(r.code, Code::CONTENT, "{}", r.payload_text());
    assert_eq!(json(&r.payload)["replies"], 5, "{}", r.payload_text());
    for i in 0..5 {
        let unicast: Vec<_> = lab.requests_to(i).into_iter().filter(|(t, _)| *t >= mark).collect();
        if i == 2 {
            assert_eq!(unicast.len(), 1, "the silent member is asked again: {unicast:?}");
            assert_eq!(unicast[0].1.mtype, MessageType::Con);
            let window = corral_proto::Duration::from_secs(6);
            assert!(unicast[0].0 >= mark + window, "after the multicast window: {:?}", unicast[0].0 - mark);
        } else {
            assert!(unicast.is_empty(), "device {i} answered the group request: {unicast:?}");
        }
    }

    // Per request, repair=none is seed 000's multicast: the silent member is missing (what arrived, the
    // silent member named; issue 46: was 5.04).
    let r = lab.get("em/room", &["eo=lst", "repair=none"], Some(ContentFormat::JSON));
    assert_eq!(r.code, Code::CONTENT, "{}", r.payload_text());
    assert_eq!(json(&r.payload)["replies"], 4);
    assert_eq!(json(&r.payload)["silent"].as_array().map(Vec::len), Some(1), "{}", r.payload_text());
}

#[test]
fn repair_applies_to_multicast_entities_only_and_persists() {
    let mut lab = lab_with(LabConfig { devices: 2, v6: true, ..LabConfig::default() });
    let er = lab.uris(0..2, "s/t");
    let r = lab.create("u", json!({ "er": er, "repair": "unicast" }));
    assert_eq!(r.code, Code::BAD_REQUEST);
    assert!(r.payload_text().contains("multicast entities"), "{}", r.payload_text());
    assert_eq!(lab.create("u", json!({ "er": er })).code, Code::CREATED);
    let r = lab.get("em/u", &["repair=unicast"], None);
    assert_eq!(r.code, Code::BAD_REQUEST);
    assert!(r.payload_text().contains("repair=unicast applies to multicast entities"), "{}", r.payload_text());
    let r = lab.create("m", json!({ "er": er, "ect": "multicast", "repair": "sometimes" }));
    assert_eq!(r.code, Code::BAD_REQUEST);
    assert!(r.payload_text().contains("none or unicast"), "{}", r.payload_text());
}

#[test]
fn actuation_repairs_an_idempotent_put_but_never_repeats_a_post() {
    let mut lab = lab_with(LabConfig { devices: 3, v6: true, ..LabConfig::default() });
    let er = lab.uris(0..3, "a/light");
    let r = lab.create("lights", json!({ "er": er, "ect": "multicast", "repair": "unicast" }));
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
    let (dev, gw) = (dev_addr(1, true), gw_addr(true));
    lab.net.set_drop(move |r| r.from == dev && r.to == gw && r.message().is_some_and(|m| m.mtype == MessageType::Non));
    let unicast_to_1 = |lab: &Lab, since| lab.requests_to(1).into_iter().filter(|(t, _)| *t >= since).count();

    let mark = lab.net.now;
    let r = lab.request(Request::new(Code::PUT).with_path("em/lights").with_payload("on"));
    assert_eq!(r.code, Code::CHANGED, "{}", r.payload_text());
    assert_eq!(unicast_to_1(&lab, mark), 1, "the silent member gets the PUT again, by unicast");

    // POST is not idempotent: the member may have acted on the multicast request already.
    let mark = lab.net.now;
    let r = lab.request(Request::new(Code::POST).with_path("em/lights").with_payload("toggle"));
    assert_eq!(r.code, Code::GATEWAY_TIMEOUT, "{}", r.payload_text());
    assert_eq!(unicast_to_1(&lab, mark), 0, "no second POST");
}
