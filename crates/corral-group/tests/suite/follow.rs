//! Entities that follow a Resource Directory (issue 32) on the in-memory net (virtual time): a directory
//! (corral-rd's service), devices registered in it, and entities whose members are a resource lookup.

use crate::common;

use common::*;
use corral_group::EmConfig;
use corral_proto::wire::{Code, ContentFormat, OptionNumber};
use corral_proto::{Duration, Endpoint, EndpointConfig, Node, Request, Response};
use corral_rd::{Limits, RdService};
use serde_json::json;
use std::net::{IpAddr, SocketAddr};

const RD: &str = "192.0.2.50:5683";

fn rd_addr() -> SocketAddr {
    RD.parse().unwrap()
}

/// A lab of `n` devices whose gateway follows the directory at [`RD`] (which runs unless `rd_up` is false).
fn rd_lab(n: usize, em: EmConfig, observable: bool, rd_up: bool) -> Lab {
    let mut lab = lab_with(LabConfig {
        devices: n,
        observable,
        em: EmConfig { rd: Some(rd_addr()), ..em },
        ..LabConfig::default()
    });
    if rd_up {
        start_rd(&mut lab);
    }
    lab
}

fn start_rd(lab: &mut Lab) {
    let mut node = Node::new(Endpoint::new(EndpointConfig::with_seed(50)));
    node.mount("", RdService::new(Limits::default()));
    lab.net.add(rd_addr(), node);
}

fn member(i: usize) -> String {
    format!("coap://{}/s/t", dev_addr(i, false))
}

/// Registers device `i`'s `/s/t` (rt=temperature) for `lt` seconds; returns the registration's path.
fn register(lab: &mut Lab, i: usize, lt: u32) -> String {
    let req = Request::new(Code::POST)
        .with_path("rd")
        .with_query(&format!("ep=dev{i}"))
        .with_query(&format!("lt={lt}"))
        .with_query(&format!("base=coap://{}", dev_addr(i, false)))
        .with_content_format(ContentFormat::LINK_FORMAT)
        .with_payload("</s/t>;rt=temperature");
    let id = lab.send_to(rd_addr(), req);
    let r = last(lab, id);
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
    let parts: Vec<String> =
        r.options.get_all(OptionNumber::LOCATION_PATH).map(|p| String::from_utf8_lossy(p).into_owned()).collect();
    parts.join("/")
}

fn last(lab: &mut Lab, id: corral_proto::RequestId) -> Response {
    lab.responses(id).pop().expect("an answer")
}

fn members(lab: &mut Lab, name: &str) -> Vec<String> {
    let mut er = lab.em().entity(name).expect("the entity exists").profile.er.clone();
    er.sort();
    er
}

fn follow(lab: &mut Lab, name: &str, extra: serde_json::Value) -> Response {
    let mut doc = json!({ "fromRd": "rt=temperature" });
    for (k, v) in extra.as_object().unwrap() {
        doc[k] = v.clone();
    }
    lab.create(name, doc)
}

#[test]
fn members_follow_registrations_removals_and_expiry() {
    let mut lab = rd_lab(4, EmConfig::default(), false, true);
    register(&mut lab, 0, 3600);
    register(&mut lab, 1, 3600);
    let r = follow(&mut lab, "room", json!({ "eo": ["avg"] }));
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
    lab.net.run_for(Duration::from_secs(5));
    assert_eq!(members(&mut lab, "room"), vec![member(0), member(1)], "the lookup's result at creation");

    let third = register(&mut lab, 2, 60);
    lab.net.run_for(Duration::from_secs(5));
    assert_eq!(members(&mut lab, "room"), vec![member(0), member(1), member(2)], "a new registration joins");

    let gone = register(&mut lab, 3, 3600);
    lab.net.run_for(Duration::from_secs(5));
    assert_eq!(members(&mut lab, "room").len(), 4);
    let id = lab.send_to(rd_addr(), Request::new(Code::DELETE).with_path(&gone));
    assert_eq!(last(&mut lab, id).code, Code::DELETED);
    lab.net.run_for(Duration::from_secs(5));
    assert_eq!(members(&mut lab, "room"), vec![member(0), member(1), member(2)], "a removal leaves at once");

    // Device 2 stops refreshing: it leaves when its lifetime (60 s) ends.
    let _ = third;
    lab.net.run_for(Duration::from_secs(60));
    assert_eq!(members(&mut lab, "room"), vec![member(0), member(1)], "an expired registration leaves");

    let r = lab.get("em/room", &["eo=count"], None);
    assert_eq!((r.code, r.payload_text().to_string()), (Code::CONTENT, "2".to_string()));
    // The lookup and the followed members are in the store, for a restarted gateway.
    let snap = lab.store().load().unwrap();
    let stored = snap.entities.iter().find(|e| e.name == "room").unwrap();
    assert_eq!(stored.profile.from_rd.as_deref(), Some("rt=temperature"));
    assert_eq!(stored.profile.er.len(), 2);
}

#[test]
fn an_entity_of_no_registered_device_is_empty_and_says_so_when_used() {
    let mut lab = rd_lab(1, EmConfig::default(), false, true);
    assert_eq!(follow(&mut lab, "empty", json!({})).code, Code::CREATED);
    lab.net.run_for(Duration::from_secs(5));
    assert!(members(&mut lab, "empty").is_empty());
    let r = lab.get("em/empty", &[], None);
    assert_eq!(r.code, Code::SERVICE_UNAVAILABLE);
    assert!(r.payload_text().contains("no members yet"), "{}", r.payload_text());
    let r = lab.create("both", json!({ "fromRd": "rt=temperature", "er": [member(0)] }));
    assert_eq!(r.code, Code::BAD_REQUEST, "members are listed or follow the directory, not both");
}

#[test]
fn a_multicast_entity_withdraws_the_membership_of_a_device_that_leaves() {
    let mut lab = rd_lab(2, EmConfig::default(), false, true);
    let r = follow(&mut lab, "lights", json!({ "ect": "multicast" }));
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
    let first = register(&mut lab, 0, 3600);
    register(&mut lab, 1, 3600);
    lab.net.run_for(Duration::from_secs(10));
    assert_eq!(members(&mut lab, "lights"), vec![member(0), member(1)]);
    let group: IpAddr = lab.em().entity("lights").unwrap().group.expect("a group with the first members");
    assert!(lab.mc(0).groups().contains(&group) && lab.mc(1).groups().contains(&group), "both joined {group}");

    let id = lab.send_to(rd_addr(), Request::new(Code::DELETE).with_path(&first));
    assert_eq!(last(&mut lab, id).code, Code::DELETED);
    lab.net.run_for(Duration::from_secs(10));
    assert_eq!(members(&mut lab, "lights"), vec![member(1)]);
    assert!(!lab.mc(0).groups().contains(&group), "the device that left the directory left the group");
    assert!(lab.mc(1).groups().contains(&group));
}

#[test]
fn a_lookup_past_the_member_limit_is_cut_with_a_note_in_the_profile() {
    let mut lab = rd_lab(3, EmConfig { rd_max_members: 2, ..EmConfig::default() }, false, true);
    for i in 0..3 {
        register(&mut lab, i, 3600);
    }
    assert_eq!(follow(&mut lab, "room", json!({})).code, Code::CREATED);
    lab.net.run_for(Duration::from_secs(5));
    assert_eq!(members(&mut lab, "room").len(), 2, "never more than the limit");
    let r = lab.get("em/room/profile", &[], Some(ContentFormat::JSON));
    let doc = json(&r.payload);
    let note = doc["rdNote"].as_str().expect("the cut shows with the profile");
    assert!(note.contains("3 members") && note.contains("first 2"), "{note}");
}

#[test]
fn observers_of_a_following_entity_are_told_of_each_change() {
    let mut lab = rd_lab(3, EmConfig::default(), true, true);
    register(&mut lab, 0, 3600);
    assert_eq!(follow(&mut lab, "room", json!({ "eo": ["count"] })).code, Code::CREATED);
    lab.net.run_for(Duration::from_secs(5));
    let id = lab.send(Request::get("em/room").with_query("eo=count").with_option(OptionNumber::OBSERVE, &[]));
    lab.net.run_for(Duration::from_secs(5));
    let seen = |lab: &mut Lab| lab.responses(id).iter().map(|r| r.payload_text().to_string()).collect::<Vec<_>>();
    assert_eq!(seen(&mut lab).last().map(String::as_str), Some("1"));
    register(&mut lab, 1, 3600);
    lab.net.run_for(Duration::from_secs(5));
    assert_eq!(
        seen(&mut lab).last().map(String::as_str),
        Some("2"),
        "told of the device that came: {:?}",
        seen(&mut lab)
    );
    register(&mut lab, 2, 3600);
    lab.net.run_for(Duration::from_secs(5));
    assert_eq!(seen(&mut lab).last().map(String::as_str), Some("3"), "{:?}", seen(&mut lab));
}

#[test]
fn a_directory_that_is_down_is_asked_again_until_it_answers() {
    let mut lab = rd_lab(2, EmConfig::default(), false, false);
    assert_eq!(follow(&mut lab, "room", json!({})).code, Code::CREATED);
    lab.net.run_for(Duration::from_secs(120));
    let r = lab.get("em/room/profile", &[], Some(ContentFormat::JSON));
    let note = json(&r.payload)["rdNote"].as_str().map(str::to_string).expect("the failing lookup shows");
    assert!(note.contains("did not answer"), "{note}");
    start_rd(&mut lab);
    register(&mut lab, 0, 3600);
    lab.net.run_for(Duration::from_secs(300));
    assert_eq!(members(&mut lab, "room"), vec![member(0)], "the entity follows once the directory is up");
    let r = lab.get("em/room/profile", &[], Some(ContentFormat::JSON));
    assert!(json(&r.payload).get("rdNote").is_none(), "the note goes when the lookup answers");
}
