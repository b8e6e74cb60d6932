//! An entity's life as its managers and observers see it (issue 26 item 10, issue 27 items 2, 3, 13): a
//! change killed while members leave is completed at the next start, a creation with a silent member
//! answers within the management wait (or keeps the member with `offline=allow`), an unreachable member
//! fails a use at once, `If-None-Match` refuses an existing name, observers hear what an update changed,
//! and a multicast timeout that would lose answers is refused.

use crate::common;

use common::*;
use corral_group::EmConfig;
use corral_proto::wire::{Code, ContentFormat, OptionNumber};
use corral_proto::{Duration, Outcome, Request};
use corral_store::SqliteStore;
use serde_json::json;
use std::net::IpAddr;

fn group_of(r: &corral_proto::Response) -> IpAddr {
    let uri = json(&r.payload)["profile"]["mcstURI"].as_str().unwrap().to_string();
    let host = uri.trim_start_matches("coap://").split('/').next().unwrap();
    host.split(':').next().unwrap().parse().unwrap()
}

/// A gateway on the SQLite file `path` with three devices; with `rejoin`, the devices start in `group`
/// (they kept their memberships while the gateway was down).
fn gateway_on(path: &std::path::Path, rejoin: Option<(IpAddr, &[usize])>) -> Lab {
    let store = SqliteStore::open(path).unwrap();
    let mut lab = lab_with(LabConfig { devices: 3, store: Some(Box::new(store)), ..LabConfig::default() });
    if let Some((group, members)) = rejoin {
        for &i in members {
            let (node, mc) = (lab.devices[i], lab.handles[i].mc);
            let now = lab.net.now;
            lab.net
                .node(node)
                .with_service(now, mc, |m: &mut corral_group::McResource, cx| m.join(cx, group).unwrap())
                .unwrap();
        }
    }
    lab
}

/// The gateway is killed while `change` makes members of the 3-member multicast entity `lights` leave:
/// device 1 has left, device 2 has not heard its leave yet. Returns the group.
fn killed_mid_leave(path: &std::path::Path, change: Request) -> IpAddr {
    let mut lab = gateway_on(path, None);
    let r = lab.create("lights", json!({ "er": lab.uris(0..3, "a/light"), "ect": "multicast" }));
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
    let g = group_of(&r);
    let d2 = dev_addr(2, false);
    lab.net.set_drop(move |r| r.to == d2 && r.message().is_some_and(|m| m.code == Code::POST));
    lab.send(change);
    lab.net.run_for(Duration::from_secs(3));
    assert!(lab.mc(1).groups().is_empty(), "device 1 left before the kill");
    assert_eq!(lab.mc(2).groups(), &[g], "device 2 is still in the group");
    g
} // kill -9: nothing after this point ran

#[test]
fn an_update_killed_mid_leave_is_completed_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("em.db");
    let profile = json!({ "er": [corral_group::uri::format_coap(dev_addr(0, false), &["a".into(), "light".into()])] });
    let change = Request::new(Code::POST)
        .with_path("em/lights/profile")
        .with_content_format(ContentFormat::JSON)
        .with_payload(profile.to_string());
    let g = killed_mid_leave(&path, change);
    let mut lab = gateway_on(&path, Some((g, &[0, 2])));
    lab.net.run_for(Duration::from_secs(10));
    let e = lab.em().entity("lights").unwrap().clone();
    assert_eq!(e.profile.er, lab.uris(0..1, "a/light"), "the stored entity is the updated one");
    assert!(lab.mc(2).groups().is_empty(), "the member still in the group was asked to leave");
    assert_eq!(lab.mc(0).groups(), &[g]);
    assert!(lab.store().load().unwrap().journal.is_empty());
    let r = lab.get("em/lights", &["eo=lst"], None);
    assert_eq!(r.code, Code::CONTENT, "every member the entity lists answers: {}", r.payload_text());
}

#[test]
fn a_deletion_killed_mid_leave_is_completed_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("em.db");
    let g = killed_mid_leave(&path, Request::new(Code::DELETE).with_path("em/lights"));
    let mut lab = gateway_on(&path, Some((g, &[0, 2])));
    lab.net.run_for(Duration::from_secs(10));
    assert!(lab.em().entity("lights").is_none(), "the entity is gone");
    assert!((0..3).all(|i| lab.mc(i).groups().is_empty()), "every member left");
    let snap = lab.store().load().unwrap();
    assert!(snap.journal.is_empty() && snap.released.contains_key(&g), "released: the group rests in quarantine");
}

#[test]
fn if_none_match_refuses_an_existing_name_and_says_to_update() {
    let mut lab = lab(3);
    assert_eq!(lab.create("room", json!({ "er": lab.uris(0..3, "s/t"), "eo": "avg" })).code, Code::CREATED);
    let doc = json!({ "er": lab.uris(0..1, "s/h") }).to_string();
    let put = |path: &str| {
        Request::new(Code::PUT)
            .with_path(path)
            .with_content_format(ContentFormat::JSON)
            .with_option(OptionNumber::IF_NONE_MATCH, &[])
            .with_payload(doc.clone())
    };
    let r = lab.request(put("em/room"));
    assert_eq!(r.code, Code::PRECONDITION_FAILED, "{}", r.payload_text());
    assert!(r.payload_text().contains("corral entity update room"), "{}", r.payload_text());
    let e = lab.em().entity("room").unwrap().clone();
    assert_eq!((e.profile.er.len(), e.profile.eo.len()), (3, 1), "unchanged");
    // A new name is created as usual.
    let r = lab.request(put("em/other"));
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
}

#[test]
fn an_update_tells_the_observers_what_changed() {
    let mut lab = lab_with(LabConfig { devices: 3, observable: true, ..LabConfig::default() });
    assert_eq!(lab.create("room", json!({ "er": lab.uris(0..3, "s/t"), "eo": "avg" })).code, Code::CREATED);
    let id = lab.send(Request::get("em/room").with_accept(ContentFormat::JSON).with_option(OptionNumber::OBSERVE, &[]));
    lab.net.run_for(Duration::from_secs(5));
    let before = lab.responses(id).len();
    let r = lab.send_json(Code::POST, "em/room/profile", json!({ "er": lab.uris(0..2, "s/t"), "eo": "max" }));
    assert_eq!(r.code, Code::CHANGED, "{}", r.payload_text());
    lab.net.run_for(Duration::from_secs(5));
    let notes = lab.responses(id);
    let after = json(&notes[before].payload);
    let changed: Vec<&str> =
        after["changed"].as_array().expect("a changed list").iter().filter_map(|c| c.as_str()).collect();
    assert!(changed.iter().any(|c| c.starts_with("er: -coap://192.0.2.102")), "{changed:?}");
    assert!(changed.contains(&"eo: avg → max"), "{changed:?}");
    assert_eq!(after["members"], 2);
    // Later notifications are plain renderings again.
    lab.net.run_for(Duration::from_secs(600));
    let last = json(&lab.responses(id).last().unwrap().payload);
    assert!(last.get("changed").is_none(), "{last}");
}

fn managing(devices: usize) -> Lab {
    let em = EmConfig { management_wait: Some(Duration::from_secs(20)), ..EmConfig::default() };
    lab_with(LabConfig { devices, em, ..LabConfig::default() })
}

/// Creates `name` with the members of devices `0..3` (device 2 silent), `query` added; returns the
/// response and how long it took.
fn create_with_silent_member(lab: &mut Lab, name: &str, query: &[&str]) -> (corral_proto::Response, Duration) {
    let d2 = dev_addr(2, false);
    lab.net.set_drop(move |r| r.to == d2);
    let body = json!({ "er": lab.uris(0..3, "s/t") }).to_string();
    let put = query.iter().fold(
        Request::new(Code::PUT).with_path(&format!("em/{name}")).with_content_format(ContentFormat::JSON),
        |r, q| r.with_query(q),
    );
    let start = lab.net.now;
    let r = lab.request(put.with_payload(body));
    (r, lab.net.now.saturating_since(start))
}

#[test]
fn a_creation_with_a_silent_member_answers_within_the_management_wait() {
    let mut lab = managing(3);
    let (r, took) = create_with_silent_member(&mut lab, "room", &[]);
    assert_eq!(r.code, Code::BAD_REQUEST, "{}", r.payload_text());
    assert!(r.payload_text().contains("member coap://192.0.2.102/s/t"), "{}", r.payload_text());
    assert!(took <= Duration::from_secs(21), "answered after {took:?} of virtual time");
}

#[test]
fn offline_allow_keeps_a_silent_member_and_the_profile_names_it_until_it_answers() {
    let mut lab = managing(3);
    let (r, _) = create_with_silent_member(&mut lab, "room", &["offline=allow"]);
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
    assert!(r.payload_text().contains("accepted offline"), "{}", r.payload_text());
    let p = json(&lab.get("em/room/profile", &[], None).payload);
    assert!(p["unreachable"]["coap://192.0.2.102/s/t"].is_string(), "{p}");
    // A profile document sent back as read (with its status) is accepted.
    let r = lab.send_json(Code::PUT, "em/room/profile", p.clone());
    assert_eq!(r.code, Code::CHANGED, "{}", r.payload_text());
    // The member comes back: the next use reaches it and the profile no longer names it.
    lab.net.clear_drop();
    assert_eq!(lab.get("em/room", &[], None).code, Code::CONTENT);
    let p = json(&lab.get("em/room/profile", &[], None).payload);
    assert!(p.get("unreachable").is_none(), "{p}");
    // Multicast entities cannot: their members must join now.
    let body = json!({ "er": lab.uris(0..2, "a/light"), "ect": "multicast" }).to_string();
    let put = Request::new(Code::PUT).with_path("em/lights").with_query("offline=allow");
    let r = lab.request(put.with_content_format(ContentFormat::JSON).with_payload(body));
    assert_eq!(r.code, Code::BAD_REQUEST, "{}", r.payload_text());
}

#[test]
fn an_unreachable_member_fails_a_use_at_once_with_its_reason() {
    let mut lab = lab(3);
    assert_eq!(lab.create("room", json!({ "er": lab.uris(0..3, "s/t") })).code, Code::CREATED);
    let d2 = dev_addr(2, false);
    lab.net.set_drop(move |r| r.to == d2);
    let start = lab.net.now;
    let id = lab.send(Request::get("em/room"));
    lab.net.run_for(Duration::from_secs(1));
    assert!(lab.outcome(id).is_none(), "still waiting for the silent member");
    // The network says nothing listens there (an ICMP port unreachable the driver read).
    let now = lab.net.now;
    let gw = lab.gw;
    lab.net.node(gw).endpoint_mut().handle_unreachable(now, d2, None);
    lab.net.node(gw).handle_timeout(now);
    lab.net.run_for(Duration::from_millis(100));
    let (at, Outcome::Response { response, .. }) = lab.outcome(id).expect("answered") else { panic!("no response") };
    assert!(at.saturating_since(start) < Duration::from_secs(2), "answered at once");
    assert_eq!(response.code, Code::GATEWAY_TIMEOUT);
    assert!(response.payload_text().contains("coap://192.0.2.102/s/t: unreachable"), "{}", response.payload_text());
    let p = json(&lab.get("em/room/profile", &[], None).payload);
    assert!(p["unreachable"]["coap://192.0.2.102/s/t"].as_str().unwrap().contains("unreachable"), "{p}");
}

#[test]
fn a_multicast_timeout_shorter_than_the_window_is_refused_with_what_to_set() {
    let mut lab = lab(2);
    let er = lab.uris(0..2, "a/light");
    let r = lab.create("lights", json!({ "er": er, "ect": "multicast", "timeout": 2000 }));
    assert_eq!(r.code, Code::BAD_REQUEST, "{}", r.payload_text());
    assert!(r.payload_text().contains("set timeout to at least 6000 ms"), "{}", r.payload_text());
    let r = lab.create("lights", json!({ "er": er, "ect": "multicast", "timeout": 6000 }));
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
    let r = lab.send_json(Code::POST, "em/lights/profile", json!({ "timeout": 1000 }));
    assert_eq!(r.code, Code::BAD_REQUEST, "{}", r.payload_text());
    // A use that asks for less hears who was cut off, and why.
    let r = lab.get("em/lights", &["timeout=1"], None);
    assert_eq!(r.code, Code::GATEWAY_TIMEOUT, "{}", r.payload_text());
    assert!(r.payload_text().contains("shorter than the members' multicast leisure"), "{}", r.payload_text());
}
