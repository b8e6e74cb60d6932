//! Observed entities (entity-manager.md, "observe"): one member observation each, notifications of the
//! combined value rendered from the members' latest notifications, deregistration when nobody observes.

use crate::common;

use common::*;
use corral_group::Op;
use corral_proto::wire::{Code, ContentFormat, OptionNumber};
use corral_proto::{Duration, Instant, Request};
use serde_json::json;

fn observable_lab(n: usize) -> Lab {
    lab_with(LabConfig { devices: n, observable: true, ..LabConfig::default() })
}

/// `n` observable devices and the unicast entity `room` of their temperatures.
fn room(n: usize) -> Lab {
    let mut lab = observable_lab(n);
    let er = lab.uris(0..n, "s/t");
    assert_eq!(lab.create("room", json!({ "er": er })).code, Code::CREATED);
    lab
}

/// A registration (Observe=0) for `path` with `a=b&c=d` queries.
fn observe(path: &str, query: &str) -> Request {
    query.split('&').fold(Request::get(path), |r, q| r.with_query(q)).with_option(OptionNumber::OBSERVE, &[])
}

/// The text value device `i` last sent the gateway in a 2.05 (a response or a notification).
fn last_value_sent(lab: &Lab, i: usize) -> f64 {
    last_value_sent_to(lab, i, gw_addr(lab.v6))
}

fn last_value_sent_to(lab: &Lab, i: usize, gw: std::net::SocketAddr) -> f64 {
    let dev = dev_addr(i, lab.v6);
    lab.net
        .records
        .iter()
        .rev()
        .filter(|r| r.from == dev && r.to == gw)
        .filter_map(|r| r.message())
        .find(|m| m.code == Code::CONTENT)
        .map(|m| String::from_utf8_lossy(&m.payload).parse::<f64>().expect("a number"))
        .expect("device answered")
}

/// Requests (not ACKs or RSTs) the gateway sent device `i` after `since`.
fn requests_since(lab: &Lab, i: usize, since: Instant) -> Vec<corral_proto::wire::Message> {
    lab.requests_to(i).into_iter().filter(|(t, _)| *t >= since).map(|(_, m)| m).collect()
}

#[test]
fn observed_entity_notifies_the_combined_value_from_member_notifications() {
    let mut lab = room(3);
    let start = lab.net.now;
    let id = lab.send(observe("em/room", "eo=avg"));
    lab.net.run_for(Duration::from_secs(900));

    let notes = lab.responses(id);
    assert!(notes.len() >= 4, "the first answer and several notifications, got {}", notes.len());
    let mut last_seq = None;
    for n in &notes {
        assert_eq!(n.code, Code::CONTENT, "{}", n.payload_text());
        let seq = n.options.observe().expect("every answer carries Observe");
        assert!(last_seq.is_none_or(|l| seq > l), "sequence numbers grow");
        last_seq = Some(seq);
    }
    // The last notification is the average of what the members last notified.
    let values: Vec<f64> = (0..3).map(|i| last_value_sent(&lab, i)).collect();
    let expected = op(Op::Avg, &values);
    let got: f64 = notes.last().unwrap().payload_text().parse().unwrap();
    assert!((got - expected).abs() < 1e-9, "last notification {got}, members' last values average {expected}");
    // One registration per member, no fan-out per notification.
    for i in 0..3 {
        let sent = requests_since(&lab, i, start);
        assert_eq!(sent.len(), 1, "device {i}: {sent:?}");
        assert_eq!(sent[0].options.observe(), Some(0), "device {i} is asked with Observe=0");
    }
    assert_eq!(lab.em().watched_entities(), 1);
}

#[test]
fn a_second_observer_is_answered_from_the_cache_with_its_own_operation() {
    let mut lab = room(3);
    let first = lab.send(observe("em/room", "eo=avg"));
    lab.net.run_for(Duration::from_secs(5));
    let before = lab.net.now;
    let second = lab.send(observe("em/room", "eo=max").with_accept(ContentFormat::JSON));
    lab.net.run_for(Duration::from_millis(100));
    let r = lab.responses(second);
    assert_eq!(r.len(), 1);
    assert!(r[0].options.observe().is_some(), "registered");
    let values: Vec<f64> = (0..3).map(|i| last_value_sent(&lab, i)).collect();
    assert_eq!(json(&r[0].payload)["v"].as_f64().unwrap(), op(Op::Max, &values));
    for i in 0..3 {
        assert!(requests_since(&lab, i, before).is_empty(), "device {i} was not asked again");
    }
    lab.net.run_for(Duration::from_secs(600));
    assert!(lab.responses(first).len() > 1 && lab.responses(second).len() > 1, "both are notified");
}

#[test]
fn members_are_deregistered_when_the_last_observer_leaves() {
    let mut lab = room(2);
    let id = lab.send(observe("em/room", "eo=min"));
    lab.net.run_for(Duration::from_secs(120));
    for d in 0..2 {
        let node = lab.devices[d];
        assert_eq!(lab.net.node(node).endpoint().observer_count("/s/t"), 1, "the EM observes device {d}");
    }
    // The client forgets its observation: the EM's next notification gets RST, and the member
    // notification after that finds the entity without observers.
    let now = lab.net.now;
    let client = lab.client;
    lab.net.node(client).with_service(now, lab.client_svc, |_: &mut Client, cx| cx.cancel(id));
    lab.net.run_for(Duration::from_secs(900));
    assert_eq!(lab.em().watched_entities(), 0);
    for d in 0..2 {
        let node = lab.devices[d];
        assert_eq!(lab.net.node(node).endpoint().observer_count("/s/t"), 0, "device {d} no longer observed");
    }
    // Quiet afterwards: no notification flows to the gateway any more.
    let quiet = lab.net.now;
    lab.net.run_for(Duration::from_secs(600));
    let gw = gw_addr(lab.v6);
    assert!(!lab.net.records.iter().any(|r| r.sent_at > quiet && r.to == gw), "traffic after deregistration");
}

#[test]
fn deleting_an_observed_entity_ends_the_observation_with_4_04() {
    let mut lab = room(2);
    let id = lab.send(observe("em/room", "eo=lst"));
    lab.net.run_for(Duration::from_secs(10));
    let r = lab.request(Request::new(Code::DELETE).with_path("em/room"));
    assert_eq!(r.code, Code::DELETED);
    lab.net.run_for(Duration::from_secs(5));
    let last = lab.responses(id).pop().unwrap();
    assert_eq!(last.code, Code::NOT_FOUND, "{}", last.payload_text());
    assert_eq!(lab.em().watched_entities(), 0);
    lab.net.run_for(Duration::from_secs(120));
    for d in 0..2 {
        let node = lab.devices[d];
        assert_eq!(lab.net.node(node).endpoint().observer_count("/s/t"), 0);
    }
}

#[test]
fn entities_that_cannot_be_watched_answer_once_without_observe() {
    let mut lab = observable_lab(2);
    let er = lab.uris(0..2, "s/t");
    assert_eq!(lab.create("a", json!({ "er": er })).code, Code::CREATED);
    // Nested: a local member.
    assert_eq!(lab.create("b", json!({ "er": ["coap://192.0.2.1/em/a"], "eo": ["avg"] })).code, Code::CREATED);
    let id = lab.send(observe("em/b", "eo=avg"));
    lab.net.run_for(Duration::from_secs(300));
    let r = lab.responses(id);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].code, Code::CONTENT);
    assert!(r[0].options.observe().is_none(), "not registered: the client knows it is not observing");
    assert_eq!(lab.em().watched_entities(), 0);
}

#[test]
fn observing_across_gateways_keeps_one_watch_per_operation_of_a_remote_entity() {
    use corral_group::EntityManager;
    // Gateway 2 holds room r (devices 0 and 1); gateway 1's entity "both" is r plus device 2.
    let mut lab = observable_lab(3);
    let (gw2_node, em2, gw2) = lab.add_gateway();
    let er = lab.uris(0..2, "s/t");
    lab.create_at(gw2, "r", json!({ "er": er }));
    let r = lab.create("both", json!({ "er": ["coap://192.0.2.9/em/r", lab.uri(2, "s/t")] }));
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());

    let avg = lab.send(observe("em/both", "eo=avg"));
    let max = lab.send(observe("em/both", "eo=max"));
    lab.net.run_for(Duration::from_secs(900));
    // r is asked for its average by one watch and for its maximum by the other; gateway 2 serves both
    // from one watch of its own members.
    assert_eq!(lab.em().watched_entities(), 2);
    let em2 = lab.net.node(gw2_node).service::<EntityManager>(em2).unwrap().watched_entities();
    assert_eq!(em2, 1);
    let (a, m) = (lab.responses(avg), lab.responses(max));
    assert!(a.len() > 2 && m.len() > 2, "notifications: avg {}, max {}", a.len(), m.len());
    assert!(a.iter().chain(&m).all(|r| r.code == Code::CONTENT && r.options.observe().is_some()));
    let room: Vec<f64> = (0..2).map(|i| last_value_sent_to(&lab, i, gw2)).collect();
    let dev2 = last_value_sent(&lab, 2);
    let want_avg = op(Op::Avg, &[op(Op::Avg, &room), dev2]);
    let want_max = op(Op::Max, &[op(Op::Max, &room), dev2]);
    let got = |r: &[corral_proto::Response]| r.last().unwrap().payload_text().parse::<f64>().unwrap();
    assert!((got(&a) - want_avg).abs() < 1e-9, "avg {} vs {want_avg}", got(&a));
    assert!((got(&m) - want_max).abs() < 1e-9, "max {} vs {want_max}", got(&m));
}

#[test]
fn a_first_answer_from_enr_1_still_watches_every_member() {
    // enr=1 with a delay: the first reply answers the registration before the others were asked; the
    // watch then registers with the rest, and later notifications cover the whole entity.
    let mut lab = room(3);
    let id = lab.send(observe("em/room", "eo=lst&enr=1&delay=200").with_accept(ContentFormat::JSON));
    lab.net.run_for(Duration::from_secs(900));
    let notes = lab.responses(id);
    assert!(notes.len() > 2, "{} notifications", notes.len());
    assert_eq!(json(&notes[0].payload)["replies"], 1, "the first answer is the first reply");
    let last = json(&notes.last().unwrap().payload);
    assert_eq!(last["values"].as_array().map(Vec::len), Some(3), "{last}");
    for d in 0..3 {
        let node = lab.devices[d];
        assert_eq!(lab.net.node(node).endpoint().observer_count("/s/t"), 1, "device {d} is observed");
    }
}

#[test]
fn an_entity_changed_while_its_first_watch_runs_is_followed_by_a_new_watch() {
    // The first registration's use paces three members 2 s apart; the entity shrinks to two members a
    // second in, and a second observer registers on the new entity while the old use still runs.
    let mut lab = room(3);
    let first = lab.send(observe("em/room", "eo=avg&delay=2000"));
    lab.net.run_for(Duration::from_secs(1));
    let er = lab.uris(0..2, "s/t");
    let r = lab.send_json(Code::POST, "em/room/profile", json!({ "er": er }));
    assert_eq!(r.code, Code::CHANGED, "{}", r.payload_text());
    let second = lab.send(observe("em/room", "eo=avg"));
    lab.net.run_for(Duration::from_secs(900));
    for id in [first, second] {
        let r = lab.responses(id);
        assert!(
            !r.is_empty() && r.iter().all(|r| r.code == Code::CONTENT),
            "{:?}",
            r.iter().map(|r| r.code).collect::<Vec<_>>()
        );
    }
    let values: Vec<f64> = (0..2).map(|i| last_value_sent(&lab, i)).collect();
    let got: f64 = lab.responses(second).last().unwrap().payload_text().parse().unwrap();
    assert!((got - op(Op::Avg, &values)).abs() < 1e-9, "{got} vs {values:?}");
    assert_eq!(lab.em().watched_entities(), 1);
    let node = lab.devices[2];
    assert_eq!(lab.net.node(node).endpoint().observer_count("/s/t"), 0, "the removed member is not observed");
}
