//! The Entity Manager end to end on the in-memory net (virtual time): a gateway, virtual devices, a client.

use crate::common;

use common::*;
use corral_group::output::aggregate;
use corral_group::senml;
use corral_group::Op;
use corral_proto::wire::{Code, ContentFormat, MessageType, OptionNumber};
use corral_proto::{Duration, Request};
use serde_json::json;
use std::net::{IpAddr, SocketAddr};

fn temps(lab: &Lab, range: std::ops::Range<usize>) -> Vec<f64> {
    range.map(|i| lab.reported_temperature(i)).collect()
}

#[test]
fn unicast_entity_answers_lst_avg_min_max_med_with_device_values() {
    let mut lab = lab(5);
    let er = lab.uris(0..5, "s/t");
    let r = lab.create("room1", json!({ "er": er }));
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
    let report = json(&r.payload);
    assert_eq!(report["profile"]["enr"], 5);
    assert_eq!(report["members"].as_array().unwrap().len(), 5);

    let r = lab.get("em/room1", &["eo=lst"], Some(ContentFormat::JSON));
    assert_eq!(r.code, Code::CONTENT);
    let doc = json(&r.payload);
    let reported = temps(&lab, 0..5);
    let values: Vec<(String, f64)> = doc["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["m"].as_str().unwrap().to_string(), v["v"].as_f64().unwrap()))
        .collect();
    assert_eq!(values.len(), 5);
    for (i, (m, v)) in values.iter().enumerate() {
        assert_eq!(m, &er[i]);
        assert_eq!(*v, reported[i], "member {i}");
    }

    for (op, o) in [("avg", Op::Avg), ("min", Op::Min), ("max", Op::Max), ("med", Op::Med), ("sum", Op::Sum)] {
        let r = lab.get("em/room1", &[&format!("eo={op}")], Some(ContentFormat::JSON));
        assert_eq!(r.code, Code::CONTENT, "{op}: {}", r.payload_text());
        let expected = aggregate(o, &temps(&lab, 0..5)).unwrap();
        assert_eq!(json(&r.payload)["v"].as_f64().unwrap(), expected, "{op}");
        // text/plain is the bare number.
        let r = lab.get("em/room1", &[&format!("eo={op}")], None);
        let expected = aggregate(o, &temps(&lab, 0..5)).unwrap();
        assert_eq!(r.payload_text().parse::<f64>().unwrap(), expected, "{op} as text");
    }
    let r = lab.get("em/room1", &["eo=count"], None);
    assert_eq!(r.payload_text(), "5");
    // Default operation: lst, text lines "<member> <value>".
    let r = lab.get("em/room1", &[], None);
    let text = r.payload_text().to_string();
    assert_eq!(text.lines().count(), 5);
    let first = text.lines().next().unwrap();
    assert_eq!(first, format!("{} {}", er[0], lab.reported_temperature(0)));
}

#[test]
fn enr_1_answers_with_the_first_reply() {
    let mut lab = lab(5);
    let er = lab.uris(0..5, "s/t");
    assert_eq!(lab.create("any", json!({ "er": er, "eo": ["avg"] })).code, Code::CREATED);
    let before = lab.net.records.len();
    let r = lab.get("em/any", &["enr=1", "delay=100"], Some(ContentFormat::JSON));
    assert_eq!(r.code, Code::CONTENT);
    let doc = json(&r.payload);
    assert_eq!(doc["replies"], 1);
    assert_eq!(doc["v"].as_f64().unwrap(), lab.reported_temperature(0), "the first member answered first");
    // With a delay the EM stops before asking the others.
    let gets = lab.net.records[before..]
        .iter()
        .filter(|r| r.from == gw_addr(false) && r.message().is_some_and(|m| m.code == Code::GET))
        .count();
    assert_eq!(gets, 1, "only one member was asked");
    // Without a delay everyone is asked, the first reply answers, and the rest is cancelled.
    let r = lab.get("em/any", &["enr=1", "eo=lst"], Some(ContentFormat::JSON));
    let doc = json(&r.payload);
    assert_eq!(doc["values"].as_array().unwrap().len(), 1);
    assert_eq!(doc["values"][0]["m"], er[0].as_str());
    lab.settle();
    assert_eq!(lab.em().jobs_in_progress(), 0);
}

#[test]
fn delay_spaces_member_requests_exactly_on_virtual_time() {
    // The delay given in the use's query, and the one stored in the profile (used when the query has none).
    for (profile, query, expected_ms) in [
        (None, Some("100"), 100u64),
        (None, Some("auto"), 100),
        (Some("100"), None, 100),
        (Some("250"), Some("100"), 100),
    ] {
        let mut lab = lab(5);
        let er = lab.uris(0..5, "s/t");
        let mut doc = json!({ "er": er });
        if let Some(d) = profile {
            doc["delay"] = json!(d);
        }
        assert_eq!(lab.create("room", doc).code, Code::CREATED);
        let q = query.map(|d| format!("delay={d}"));
        let r = lab.get("em/room", &q.iter().map(String::as_str).collect::<Vec<_>>(), None);
        assert_eq!(r.code, Code::CONTENT);
        let sent: Vec<_> = (0..5).map(|i| lab.requests_to(i).last().unwrap().0).collect();
        for w in sent.windows(2) {
            assert_eq!(w[1] - w[0], Duration::from_millis(expected_ms), "{profile:?}/{query:?}: {sent:?}");
        }
    }
    // Eq. (2) for 40 members: 82.051 ms.
    assert_eq!(corral_group::profile::auto_delay(40, 80, 1000).as_micros(), 82_051);
}

fn multicast_lifecycle(v6: bool) {
    let mut lab = lab_with(LabConfig { devices: 5, v6, ..LabConfig::default() });
    let er = lab.uris(0..5, "s/t");
    let r = lab.create("mcast1", json!({ "er": er, "ect": "multicast" }));
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
    let doc = json(&r.payload);
    let group: IpAddr = if v6 { "ff1e::89:1".parse().unwrap() } else { "239.255.89.1".parse().unwrap() };
    let expected_uri = if v6 { "coap://[ff1e::89:1]/s/t" } else { "coap://239.255.89.1/s/t" };
    assert_eq!(doc["profile"]["mcstURI"], expected_uri);
    assert_eq!(doc["profile"]["emt"], "non");
    for m in doc["members"].as_array().unwrap() {
        assert!(m["join"].as_str().unwrap().starts_with("2.04"), "{m}");
    }
    for i in 0..5 {
        assert_eq!(lab.mc(i).groups(), &[group], "device {i} joined");
        // GET /mc on the device (through the lab's client) shows the group too.
    }
    let mark = lab.net.now;
    let r = lab.get("em/mcast1", &["eo=lst"], Some(ContentFormat::JSON));
    assert_eq!(r.code, Code::CONTENT);
    let doc = json(&r.payload);
    assert_eq!(doc["replies"], 5);
    let reported = temps(&lab, 0..5);
    let mut got: Vec<(String, f64)> = doc["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["m"].as_str().unwrap().to_string(), v["v"].as_f64().unwrap()))
        .collect();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    for (i, u) in er.iter().enumerate() {
        let (_, v) = got.iter().find(|(m, _)| m == u).unwrap();
        assert_eq!(*v, reported[i]);
    }
    // Exactly one multicast NON from the gateway, no unicast GET to members.
    let mc: Vec<_> =
        lab.net.sent_by(gw_addr(v6)).into_iter().filter(|(t, m)| *t >= mark && m.code == Code::GET).collect();
    let to_group = lab
        .net
        .records
        .iter()
        .filter(|r| r.to.ip() == group && r.message().is_some_and(|m| m.code == Code::GET))
        .count();
    assert!(lab
        .net
        .records
        .iter()
        .filter(|r| r.sent_at >= mark)
        .all(|r| r.to.ip() == group || r.message().is_none_or(|m| m.code != Code::GET) || r.from != gw_addr(v6)));
    assert_eq!(to_group, 5, "one multicast datagram delivered to 5 members");
    assert_eq!(mc.len(), 1, "{mc:?}");
    assert_eq!(mc[0].1.mtype, MessageType::Non);
    // enr=1: anycast.
    let r = lab.get("em/mcast1", &["enr=1", "eo=avg"], Some(ContentFormat::JSON));
    assert_eq!(json(&r.payload)["replies"], 1);

    let r = lab.request(Request::new(Code::DELETE).with_path("em/mcast1").with_accept(ContentFormat::JSON));
    assert_eq!(r.code, Code::DELETED, "{}", r.payload_text());
    let doc = json(&r.payload);
    for m in doc["members"].as_array().unwrap() {
        assert!(m["leave"].as_str().unwrap().starts_with("2.02"), "{m}");
    }
    for i in 0..5 {
        assert!(lab.mc(i).groups().is_empty(), "device {i} left");
    }
    assert!(lab.em().entity_names().is_empty());
    // A new multicast entity gets the next address, not the freed one.
    let r = lab.create("mcast2", json!({ "er": er, "ect": "multicast" }));
    let next = if v6 { "coap://[ff1e::89:2]/s/t" } else { "coap://239.255.89.2/s/t" };
    assert_eq!(json(&r.payload)["profile"]["mcstURI"], next);
}

#[test]
fn multicast_entity_ipv6_created_used_with_one_request_and_deleted() {
    multicast_lifecycle(true);
}

#[test]
fn multicast_entity_ipv4_created_used_with_one_request_and_deleted() {
    multicast_lifecycle(false);
}

#[test]
fn device_without_free_mc_slot_fails_creation_with_that_member_named() {
    let mut lab = lab_with(LabConfig { devices: 5, v6: true, slots: vec![4, 4, 0, 4, 4], ..LabConfig::default() });
    let er = lab.uris(0..5, "s/t");
    let r = lab.create("mc", json!({ "er": er, "ect": "multicast" }));
    assert_eq!(r.code, Code::BAD_REQUEST);
    let text = r.payload_text().to_string();
    let first = text.lines().next().unwrap();
    assert!(first.contains(&er[2]) && first.contains("5.03") && first.contains("no free slot"), "{text}");
    for i in [0, 1, 3, 4] {
        assert!(text.contains(&format!("{} validate", er[i])), "{text}");
        assert!(lab.mc(i).groups().is_empty(), "device {i} rolled back");
    }
    assert!(text.contains("rollback leave: 2.02"), "{text}");
    assert!(lab.em().entity_names().is_empty());
    assert!(lab.store().load().unwrap().entities.is_empty());
}

#[test]
fn nested_room_floor_building_answers_avg_of_averages() {
    let mut lab = lab(6);
    for (room, range) in [("r1", 0..2), ("r2", 2..5), ("r3", 5..6)] {
        let er = lab.uris(range, "s/t");
        assert_eq!(lab.create(room, json!({ "er": er, "eo": "avg" })).code, Code::CREATED);
    }
    assert_eq!(lab.create("f1", json!({ "er": ["/em/r1", "/em/r2"] })).code, Code::CREATED);
    let gw_uri = "coap://192.0.2.1/em/r3";
    assert_eq!(lab.create("f2", json!({ "er": [gw_uri] })).code, Code::CREATED);
    assert_eq!(lab.create("building", json!({ "er": ["/em/f1", "/em/f2"] })).code, Code::CREATED);
    let r = lab.get("em/building", &["eo=avg"], Some(ContentFormat::JSON));
    assert_eq!(r.code, Code::CONTENT, "{}", r.payload_text());
    let t = temps(&lab, 0..6);
    let avg = |v: &[f64]| op(Op::Avg, v);
    let expected = avg(&[avg(&[avg(&t[0..2]), avg(&t[2..5])]), avg(&[avg(&t[5..6])])]);
    assert_eq!(json(&r.payload)["v"].as_f64().unwrap(), expected);
    // Nested members are resolved locally: the gateway never sends itself a request.
    let to_self = lab.net.records.iter().filter(|r| r.from == gw_addr(false) && r.to == gw_addr(false)).count();
    assert_eq!(to_self, 0);
    // The default (lst) of the building lists each room's average under floor and room.
    let r = lab.get("em/building", &[], Some(ContentFormat::SENML_JSON));
    let t = temps(&lab, 0..6);
    let recs = senml::resolve(&senml::decode_json(&r.payload).unwrap()).unwrap();
    let names: Vec<&str> = recs.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["em/f1/em/r1", "em/f1/em/r2", "em/f2/coap://192.0.2.1/em/r3"]);
    assert_eq!(recs[1].value, Some(senml::Value::Num(avg(&t[2..5]))));
}

#[test]
fn remote_entity_on_another_gateway_is_used_over_coap() {
    // Gateway 2 holds room r; gateway 1's entity has coap://<gw2>/em/r as a member.
    let mut lab = lab(3);
    let (_, _, gw2) = lab.add_gateway();
    let er = lab.uris(0..2, "s/t");
    let id = lab.create_at(gw2, "r", json!({"er": er, "eo": "avg"}));
    assert!(lab.outcome(id).is_some());
    let r = lab.create("both", json!({ "er": ["coap://192.0.2.9/em/r", lab.uri(2, "s/t")], "eo": "avg" }));
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
    let r = lab.get("em/both", &[], Some(ContentFormat::JSON));
    assert_eq!(r.code, Code::CONTENT, "{}", r.payload_text());
    let t = temps(&lab, 0..3);
    let expected = op(Op::Avg, &[op(Op::Avg, &t[0..2]), t[2]]);
    assert_eq!(json(&r.payload)["v"].as_f64().unwrap(), expected);
    // The remote entity was asked for SenML CBOR, eo=avg, with a Hop-Limit, the rest of the fan-out budget
    // (64 less this gateway's two requests) and this gateway's identity for loop detection.
    let asked = lab
        .net
        .records
        .iter()
        .filter(|r| r.from == gw_addr(false) && r.to == gw2)
        .filter_map(|r| r.message())
        .find(|m| m.code == Code::GET)
        .unwrap();
    let q = asked.options.query();
    assert!(q.starts_with("eo=avg&budget=62&via="), "{q}");
    assert_eq!(q.len(), "eo=avg&budget=62&via=".len() + 8, "{q}");
    assert_eq!(asked.options.accept(), Some(ContentFormat::SENML_CBOR));
    assert_eq!(asked.options.get_uint(OptionNumber::HOP_LIMIT), Some(15));
}

#[test]
fn senml_json_and_cbor_outputs_are_valid_senml() {
    let mut lab = lab_with(LabConfig { devices: 3, v6: true, ..LabConfig::default() });
    let er = lab.uris(0..3, "s/t");
    assert_eq!(lab.create("room", json!({ "er": er })).code, Code::CREATED);
    for cf in [ContentFormat::SENML_JSON, ContentFormat::SENML_CBOR] {
        let r = lab.get("em/room", &["eo=lst"], Some(cf));
        assert_eq!(r.options.content_format(), Some(cf));
        let pack = if cf == ContentFormat::SENML_JSON {
            senml::decode_json(&r.payload).unwrap()
        } else {
            senml::decode_cbor(&r.payload).unwrap()
        };
        let recs = senml::resolve(&pack).unwrap();
        assert_eq!(recs.len(), 3);
        for (i, rec) in recs.iter().enumerate() {
            assert!(senml::valid_name(&rec.name));
            // IPv6 literal without brackets, port explicit.
            assert_eq!(rec.name, format!("coap://2001:db8::{:x}:5683/s/t", 0x100 + i));
            assert_eq!(rec.value, Some(senml::Value::Num(lab.reported_temperature(i))));
        }
        let r = lab.get("em/room", &["eo=max"], Some(cf));
        let pack = if cf == ContentFormat::SENML_JSON {
            senml::decode_json(&r.payload).unwrap()
        } else {
            senml::decode_cbor(&r.payload).unwrap()
        };
        let recs = senml::resolve(&pack).unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].name, "em/room/max");
        let t = temps(&lab, 0..3);
        assert_eq!(recs[0].value, Some(senml::Value::Num(op(Op::Max, &t))));
    }
    // CBOR (60) output parses and matches JSON's structure.
    let r = lab.get("em/room", &["eo=min"], Some(ContentFormat::CBOR));
    let v: ciborium::Value = ciborium::from_reader(&r.payload[..]).unwrap();
    let j = corral_group::output::cbor_to_json(&v).unwrap();
    assert_eq!(j["eo"], "min");
    assert_eq!(j["v"].as_f64().unwrap(), op(Op::Min, &temps(&lab, 0..3)));
    let r = lab.get("em/room", &[], Some(ContentFormat(41)));
    assert_eq!(r.code, Code::NOT_ACCEPTABLE);
}

/// Each bad input: a 4.xx, a diagnostic naming the problem, and nothing changed.
#[test]
fn bad_input_gets_4xx_naming_the_problem_and_changes_nothing() {
    let mut lab = lab(3);
    let er = lab.uris(0..3, "s/t");
    assert_eq!(lab.create("a", json!({ "er": er[..2] })).code, Code::CREATED);
    assert_eq!(lab.create("b", json!({ "er": ["/em/a"] })).code, Code::CREATED);
    assert_eq!(lab.create("lights", json!({ "er": lab.uris(0..2, "a/light") })).code, Code::CREATED);
    let before = lab.store().load().unwrap();
    let put = |path: &str, doc: serde_json::Value| {
        Request::new(Code::PUT).with_path(path).with_content_format(ContentFormat::JSON).with_payload(doc.to_string())
    };
    let cases: Vec<(&str, Request, Code, &str)> = vec![
        (
            "unknown operation at creation",
            put("em/x", json!({"er": er, "eo": "mode"})),
            Code::BAD_REQUEST,
            "unknown operation",
        ),
        (
            "unknown operation at use",
            Request::get("em/a").with_query("eo=mode"),
            Code::BAD_REQUEST,
            "unknown operation",
        ),
        ("enr=0 at creation", put("em/x", json!({"er": er, "enr": 0})), Code::BAD_REQUEST, "enr=0"),
        ("enr=0 at use", Request::get("em/a").with_query("enr=0"), Code::BAD_REQUEST, "enr=0"),
        ("enr above members at creation", put("em/x", json!({"er": er, "enr": 4})), Code::BAD_REQUEST, "enr=4 exceeds"),
        ("enr above members at use", Request::get("em/a").with_query("enr=3"), Code::BAD_REQUEST, "enr=3 exceeds"),
        (
            "malformed member URI",
            put("em/x", json!({"er": ["coap://[2001:db8::1/s/t"]})),
            Code::BAD_REQUEST,
            "coap://[2001:db8::1/s/t",
        ),
        ("non-coap member", put("em/x", json!({"er": ["http://192.0.2.100/s/t"]})), Code::BAD_REQUEST, "not coap"),
        (
            "cycle on update",
            put("em/a/profile", json!({"er": [er[0].clone(), "/em/b".to_string()]})),
            Code::BAD_REQUEST,
            "cycle",
        ),
        ("self cycle", put("em/x", json!({"er": ["/em/x"]})), Code::BAD_REQUEST, "cycle"),
        ("missing nested entity", put("em/x", json!({"er": ["/em/nope"]})), Code::BAD_REQUEST, "no entity nope"),
        (
            "non-numeric member under avg",
            put("em/x", json!({"er": lab.uris(0..2, "a/light"), "eo": "avg"})),
            Code::BAD_REQUEST,
            "not numeric",
        ),
        ("non-numeric at use", Request::get("em/lights").with_query("eo=avg"), Code::BAD_REQUEST, "non-numeric"),
        ("changing ect", put("em/a/profile", json!({"er": er[..2], "ect": "multicast"})), Code::CONFLICT, "ect"),
        (
            "changing ect with POST",
            Request::new(Code::POST).with_path("em/a/profile").with_query("ect=multicast"),
            Code::CONFLICT,
            "ect",
        ),
        ("ect in a use query", Request::get("em/a").with_query("ect=multicast"), Code::BAD_REQUEST, "ect"),
        ("unknown profile field", put("em/x", json!({"er": er, "eoo": "avg"})), Code::BAD_REQUEST, "eoo"),
        ("duplicate member", put("em/x", json!({"er": [er[0].clone(), er[0].clone()]})), Code::BAD_REQUEST, "twice"),
        ("empty member list", put("em/x", json!({"er": []})), Code::BAD_REQUEST, "at least one member"),
        (
            "bad JSON",
            Request::new(Code::PUT).with_path("em/x").with_content_format(ContentFormat::JSON).with_payload("{"),
            Code::BAD_REQUEST,
            "JSON",
        ),
        (
            "unsupported format",
            Request::new(Code::PUT).with_path("em/x").with_content_format(ContentFormat::XML).with_payload("<a/>"),
            Code::UNSUPPORTED_CONTENT_FORMAT,
            "link-format",
        ),
        ("bad delay", Request::get("em/a").with_query("delay=-1"), Code::BAD_REQUEST, "delay"),
        ("bad name", put("em/..x", json!({"er": er})), Code::BAD_REQUEST, "entity name"),
        (
            "multicast with mixed paths",
            put("em/x", json!({"er": [er[0].clone(), lab.uri(1, "s/h")], "ect": "multicast"})),
            Code::BAD_REQUEST,
            "share one resource path",
        ),
        (
            "multicast with an entity member",
            put("em/x", json!({"er": ["/em/a"], "ect": "multicast"})),
            Code::BAD_REQUEST,
            "device resources",
        ),
        (
            "mcstURI is read-only",
            put("em/x", json!({"er": er, "mcstURI": "coap://[ff1e::1]/s/t"})),
            Code::BAD_REQUEST,
            "mcstURI",
        ),
        (
            "unreachable member",
            put("em/x", json!({"er": ["coap://192.0.2.250/s/t"], "timeout": 5000})),
            Code::BAD_REQUEST,
            "coap://192.0.2.250/s/t",
        ),
        ("missing member resource", put("em/x", json!({"er": [lab.uri(0, "s/zz")]})), Code::BAD_REQUEST, "4.04"),
        ("unknown entity", Request::get("em/nope"), Code::NOT_FOUND, "nope"),
        ("delete a nested member", Request::new(Code::DELETE).with_path("em/a"), Code::CONFLICT, "member of b"),
        ("unknown use query", Request::get("em/a").with_query("foo=1"), Code::BAD_REQUEST, "foo"),
    ];
    for (what, req, code, needle) in cases {
        let r = lab.request(req);
        assert_eq!(r.code, code, "{what}: {}", r.payload_text());
        assert!(r.code.is_client_error());
        assert!(r.payload_text().contains(needle), "{what}: diagnostic {:?} lacks {needle:?}", r.payload_text());
        assert_eq!(lab.store().load().unwrap(), before, "{what}: store changed");
        assert_eq!(lab.em().entity_names(), ["a", "b", "lights"], "{what}");
    }
}

#[test]
fn answers_piggybacked_when_fast_and_separately_when_slow() {
    let mut lab = lab(5);
    let er = lab.uris(0..5, "s/t");
    assert_eq!(lab.create("room", json!({ "er": er })).code, Code::CREATED);
    let mark = lab.net.records.len();
    let r = lab.get("em/room", &["eo=avg"], None);
    assert_eq!(r.code, Code::CONTENT);
    let replies: Vec<_> = lab.to_client().into_iter().filter(|(t, _)| *t >= lab.net.records[mark].sent_at).collect();
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert_eq!(replies[0].1.mtype, MessageType::Ack);
    assert_eq!(replies[0].1.code, Code::CONTENT, "piggybacked");

    let t0 = lab.net.now;
    let r = lab.get("em/room", &["eo=avg", "delay=600"], None);
    assert_eq!(r.code, Code::CONTENT);
    let replies: Vec<_> = lab.to_client().into_iter().filter(|(t, _)| *t >= t0).collect();
    assert_eq!(replies.len(), 2, "{replies:?}");
    assert_eq!((replies[0].1.mtype, replies[0].1.code), (MessageType::Ack, Code::EMPTY), "empty ACK first");
    assert_eq!((replies[1].1.mtype, replies[1].1.code), (MessageType::Con, Code::CONTENT), "then a separate CON");
    assert!(replies[1].0 - t0 >= Duration::from_millis(2400));
}

/// Issue 46 item 9: one silent member does not spoil the entity. At the entity's timeout the use answers
/// 2.05 with the value over the members that answered and names the silent one (JSON `silent`, the text
/// answer's `silent:` line after the number); `enr` still says how many to wait for; only when no member
/// answered is it 5.04.
#[test]
fn a_silent_member_leaves_the_value_over_the_others_at_the_entity_timeout() {
    let mut lab = lab(5);
    let er = lab.uris(0..5, "s/t");
    assert_eq!(lab.create("room", json!({ "er": er })).code, Code::CREATED);
    let dead = dev_addr(4, false);
    lab.net.set_drop(move |r| r.to == dead);
    let t0 = lab.net.now;
    let r = lab.get("em/room", &["timeout=3000"], Some(ContentFormat::JSON));
    assert_eq!(r.code, Code::CONTENT, "{}", r.payload_text());
    let doc = json(&r.payload);
    assert_eq!(doc["replies"], 4);
    assert_eq!(doc["values"].as_array().unwrap().len(), 4);
    assert_eq!(doc["silent"], json!([er[4]]));
    assert_eq!(doc["errors"][0]["m"], er[4].as_str());
    assert!(doc["errors"][0]["error"].as_str().unwrap().contains("timeout"));
    let (t, _) = lab.to_client().into_iter().rfind(|(_, m)| m.code == Code::CONTENT).unwrap();
    assert_eq!(t - t0, Duration::from_millis(3010), "answered when the entity timeout fired");
    // An arithmetic answer: the value over the four, the silent member named after it.
    let r = lab.get("em/room", &["timeout=3000", "eo=avg"], None);
    assert_eq!(r.code, Code::CONTENT, "{}", r.payload_text());
    let text = r.payload_text().to_string();
    let mut lines = text.lines();
    assert_eq!(lines.next().unwrap().parse::<f64>().unwrap(), op(Op::Avg, &temps(&lab, 0..4)), "{text}");
    assert_eq!(lines.next().unwrap(), format!("silent: {} (no reply before the entity timeout)", er[4]), "{text}");
    assert_eq!(lines.next(), None, "{text}");
    // Four replies suffice with enr=4: nobody is named.
    let r = lab.get("em/room", &["timeout=3000", "enr=4", "eo=avg"], None);
    assert_eq!(r.code, Code::CONTENT);
    assert_eq!(r.payload_text().parse::<f64>().unwrap(), op(Op::Avg, &temps(&lab, 0..4)));
    // Without a timeout, CoAP's own: the dead member's CON fails after its retransmissions.
    let r = lab.get("em/room", &["eo=avg"], Some(ContentFormat::JSON));
    assert_eq!(r.code, Code::CONTENT, "{}", r.payload_text());
    assert_eq!(json(&r.payload)["v"].as_f64().unwrap(), op(Op::Avg, &temps(&lab, 0..4)));
    assert_eq!(json(&r.payload)["errors"][0]["error"], "timed out");
    assert_eq!(json(&r.payload)["silent"], json!([er[4]]));
    // SenML carries the values only.
    let r = lab.get("em/room", &["timeout=3000", "eo=avg"], Some(ContentFormat::SENML_JSON));
    assert_eq!(r.code, Code::CONTENT);
    assert_eq!(senml::decode_json(&r.payload).unwrap().len(), 1);
    // No member answered: no value to give.
    let all: Vec<SocketAddr> = (0..5).map(|i| dev_addr(i, false)).collect();
    lab.net.set_drop(move |r| all.contains(&r.to));
    let r = lab.get("em/room", &["timeout=2000", "eo=avg"], None);
    assert_eq!(r.code, Code::GATEWAY_TIMEOUT, "{}", r.payload_text());
    assert!(
        r.payload_text().starts_with("5.04 Gateway Timeout: 0 of 5 members of room answered"),
        "{}",
        r.payload_text()
    );
}

#[test]
fn actuation_fans_out_and_reports_per_member() {
    let mut lab = lab(3);
    let er = lab.uris(0..3, "a/light");
    assert_eq!(lab.create("lights", json!({ "er": er })).code, Code::CREATED);
    let r = lab.request(
        Request::new(Code::PUT)
            .with_path("em/lights")
            .with_content_format(ContentFormat::TEXT_PLAIN)
            .with_payload("on"),
    );
    assert_eq!(r.code, Code::CHANGED, "{}", r.payload_text());
    assert_eq!(r.payload_text().lines().filter(|l| l.contains("result: 2.04")).count(), 3);
    for i in 0..3 {
        let (d, h) = (lab.devices[i], lab.handles[i].actuators);
        assert!(lab.net.node(d).service::<corral_group::device::Actuators>(h).unwrap().light());
    }
    let r = lab
        .request(Request::new(Code::POST).with_path("em/lights").with_payload("dim").with_accept(ContentFormat::JSON));
    assert_eq!(r.code, Code::BAD_GATEWAY);
    let doc = json(&r.payload);
    assert!(doc["members"][0]["result"].as_str().unwrap().starts_with("4.00"), "{doc}");
    // A shutter group via multicast.
    let er = lab.uris(0..3, "a/shutter");
    assert_eq!(lab.create("shutters", json!({ "er": er, "ect": "multicast" })).code, Code::CREATED);
    let r = lab.request(Request::new(Code::PUT).with_path("em/shutters").with_payload("close"));
    assert_eq!(r.code, Code::CHANGED, "{}", r.payload_text());
    for i in 0..3 {
        let (d, h) = (lab.devices[i], lab.handles[i].actuators);
        assert_eq!(lab.net.node(d).service::<corral_group::device::Actuators>(h).unwrap().shutter(), 100);
    }
}

#[test]
fn generated_names_link_format_creation_list_and_profile_updates() {
    let mut lab = lab(4);
    let links = lab.uris(0..3, "s/t").iter().map(|u| format!("<{u}>")).collect::<Vec<_>>().join(",");
    let r = lab.request(
        Request::new(Code::POST)
            .with_path("em")
            .with_content_format(ContentFormat::LINK_FORMAT)
            .with_query("eo=avg,min")
            .with_query("enr=2")
            .with_payload(links),
    );
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
    let loc: Vec<&[u8]> = r.options.get_all(OptionNumber::LOCATION_PATH).collect();
    assert_eq!(loc, [b"em".as_slice(), b"e1".as_slice()]);
    let r = lab.get("em", &[], None);
    assert_eq!(r.payload_text(), r#"</em/e1>;rt="core.entity";ect="unicast""#);
    let r = lab.get("em/e1/profile", &[], None);
    let p = json(&r.payload);
    assert_eq!(p["eo"], json!(["avg", "min"]));
    assert_eq!(p["enr"], 2);
    let r = lab.get("em/e1/profile", &[], Some(ContentFormat::CBOR));
    assert_eq!(r.options.content_format(), Some(ContentFormat::CBOR));
    // POST changes single fields; PUT replaces the profile (re-validating the members).
    let r = lab.request(Request::new(Code::POST).with_path("em/e1/profile").with_query("delay=50"));
    assert_eq!(r.code, Code::CHANGED, "{}", r.payload_text());
    assert_eq!(lab.em().entity("e1").unwrap().profile.delay, corral_group::Delay::Millis(50));
    let er = lab.uris(1..4, "s/t");
    let r = lab.request(
        Request::new(Code::PUT)
            .with_path("em/e1/profile")
            .with_content_format(ContentFormat::JSON)
            .with_payload(json!({"er": er, "eo": "max"}).to_string()),
    );
    assert_eq!(r.code, Code::CHANGED, "{}", r.payload_text());
    let stored = lab.store().load().unwrap();
    assert_eq!(stored.entities[0].profile.er, er);
    assert_eq!(stored.entities[0].profile.enr, None);
    assert_eq!(stored.entities[0].profile.delay, corral_group::Delay::Millis(0));
    let r = lab.get("em/e1", &[], None);
    assert_eq!(r.payload_text().parse::<f64>().unwrap(), op(Op::Max, &temps(&lab, 1..4)));
    // PUT of a profile document on the entity itself updates it too (anything else would actuate).
    let r = lab.request(
        Request::new(Code::PUT)
            .with_path("em/e1")
            .with_content_format(ContentFormat::JSON)
            .with_payload(json!({"er": er, "eo": "min"}).to_string()),
    );
    assert_eq!(r.code, Code::CHANGED, "{}", r.payload_text());
    assert_eq!(lab.em().entity("e1").unwrap().profile.eo, vec![Op::Min]);
    // A CBOR profile document creates too.
    let doc = corral_group::output::encode_doc(&json!({"er": lab.uris(0..1, "s/h")}), ContentFormat::CBOR);
    let r = lab
        .request(Request::new(Code::POST).with_path("em").with_content_format(ContentFormat::CBOR).with_payload(doc));
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
    assert_eq!(lab.em().entity_names(), ["e1", "e2"]);
    let r = lab.request(Request::new(Code::DELETE).with_path("em/e2"));
    assert_eq!(r.code, Code::DELETED);
    let r = lab.request(Request::new(Code::DELETE).with_path("em/e2"));
    assert_eq!(r.code, Code::NOT_FOUND);
}

#[test]
fn multicast_update_joins_added_and_leaves_removed_members() {
    let mut lab = lab_with(LabConfig { devices: 4, v6: true, ..LabConfig::default() });
    let er = lab.uris(0..3, "s/t");
    assert_eq!(lab.create("m", json!({ "er": er, "ect": "multicast" })).code, Code::CREATED);
    let g: IpAddr = "ff1e::89:1".parse().unwrap();
    let er2 = lab.uris(1..4, "s/t");
    let r = lab.send_json(Code::PUT, "em/m/profile", json!({"er": er2}));
    assert_eq!(r.code, Code::CHANGED, "{}", r.payload_text());
    assert!(lab.mc(0).groups().is_empty(), "removed member left");
    for i in 1..4 {
        assert_eq!(lab.mc(i).groups(), &[g]);
    }
    let e = lab.em().entity("m").unwrap().clone();
    assert_eq!(e.joined, vec![true, true, true]);
    assert_eq!(e.group, Some(g));
    let r = lab.get("em/m", &["eo=count"], None);
    assert_eq!(r.payload_text(), "3");
}

#[test]
fn validation_falls_back_to_well_known_core_for_resources_that_refuse_get() {
    use corral_proto::{Context, IncomingRequest, ResourceLink, Response, Service};
    struct PostOnly;
    impl Service for PostOnly {
        fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
            let code = if req.request.method == Code::GET { Code::METHOD_NOT_ALLOWED } else { Code::CHANGED };
            cx.respond(req.id, Response::new(code));
        }
        fn links(&self) -> Vec<ResourceLink> {
            vec![ResourceLink::new("").attr("rt", "trigger")]
        }
    }
    let mut lab = lab(1);
    let d = lab.devices[0];
    lab.net.node(d).mount("trigger", PostOnly);
    let r = lab.create("t", json!({ "er": [lab.uri(0, "trigger")] }));
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
    let asked: Vec<String> = lab
        .requests_to(0)
        .iter()
        .map(|(_, m)| format!("{} {}?{}", m.code, m.options.path(), m.options.query()))
        .collect();
    assert_eq!(asked, ["GET /trigger?", "GET /.well-known/core?href=/trigger"]);
}

#[test]
fn entities_survive_a_restart_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("em.db");
    {
        let store = corral_store::SqliteStore::open(&path).unwrap();
        let mut lab =
            lab_with(LabConfig { devices: 3, v6: true, store: Some(Box::new(store)), ..LabConfig::default() });
        let er = lab.uris(0..3, "s/t");
        assert_eq!(lab.create("m", json!({ "er": er, "ect": "multicast", "eo": "avg" })).code, Code::CREATED);
        assert_eq!(lab.create("u", json!({ "er": er, "delay": "auto" })).code, Code::CREATED);
    }
    let store = corral_store::SqliteStore::open(&path).unwrap();
    let mut lab = lab_with(LabConfig { devices: 3, v6: true, store: Some(Box::new(store)), ..LabConfig::default() });
    assert_eq!(lab.em().entity_names(), ["m", "u"]);
    let r = lab.get("em/u", &["eo=avg"], None);
    assert_eq!(r.code, Code::CONTENT);
    // The devices of this new lab never joined: a multicast use reaches nobody until they do; the EM still
    // knows the group and the next allocation skips it.
    assert_eq!(lab.em().entity("m").unwrap().group, Some("ff1e::89:1".parse().unwrap()));
    let er = lab.uris(0..3, "s/t");
    let r = lab.create("m2", json!({ "er": er, "ect": "multicast" }));
    assert_eq!(json(&r.payload)["profile"]["mcstURI"], "coap://[ff1e::89:2]/s/t");
}

#[test]
fn device_well_known_core_and_mc_resource_over_coap() {
    let mut lab = lab(1);
    let dev = dev_addr(0, false);
    let ask = |lab: &mut Lab, req: Request| {
        let id = lab.send_to(dev, req);
        match lab.outcome(id).unwrap().1 {
            corral_proto::Outcome::Response { response, .. } => response,
            o => panic!("{o:?}"),
        }
    };
    let r = ask(&mut lab, Request::get(".well-known/core"));
    let text = r.payload_text().to_string();
    for needle in [
        r#"</s/t>;rt="temperature";if="core.s";ct="0 50 60 110 112""#,
        "</a/shutter>",
        "</a/light>",
        r#"</mc>;rt="core.mc""#,
    ] {
        assert!(text.contains(needle), "{text}");
    }
    let g6: std::net::Ipv6Addr = "ff1e::89:7".parse().unwrap();
    let add = |p: Vec<u8>| Request::new(Code::POST).with_path("mc").with_query("act=add").with_payload(p);
    assert_eq!(ask(&mut lab, add(g6.octets().to_vec())).code, Code::CHANGED);
    assert_eq!(ask(&mut lab, add(vec![239, 1, 2, 3])).code, Code::CHANGED);
    assert_eq!(ask(&mut lab, add(vec![1, 2, 3])).code, Code::BAD_REQUEST);
    assert_eq!(ask(&mut lab, add(vec![10, 0, 0, 1])).code, Code::BAD_REQUEST);
    let r = ask(&mut lab, Request::get("mc"));
    assert_eq!(r.payload_text(), "ff1e::89:7\n239.1.2.3\n");
    let r = ask(&mut lab, Request::get("mc").with_accept(ContentFormat::CBOR));
    let v: ciborium::Value = ciborium::from_reader(&r.payload[..]).unwrap();
    assert_eq!(
        v,
        ciborium::Value::Array(vec![
            ciborium::Value::Bytes(g6.octets().to_vec()),
            ciborium::Value::Bytes(vec![239, 1, 2, 3])
        ])
    );
    let del = |p: Vec<u8>| Request::new(Code::POST).with_path("mc").with_query("act=del").with_payload(p);
    assert_eq!(ask(&mut lab, del(vec![239, 1, 2, 3])).code, Code::DELETED);
    assert_eq!(ask(&mut lab, del(vec![239, 1, 2, 3])).code, Code::NOT_FOUND);
    // Slots: 4 by default.
    for k in 0..3u8 {
        assert_eq!(ask(&mut lab, add(vec![239, 9, 9, k])).code, Code::CHANGED);
    }
    assert_eq!(ask(&mut lab, add(vec![239, 9, 9, 9])).code, Code::SERVICE_UNAVAILABLE);
    let r = ask(&mut lab, Request::new(Code::PUT).with_path("a/shutter").with_payload("42"));
    assert_eq!(r.code, Code::CHANGED);
    let r = ask(&mut lab, Request::get("a/shutter").with_accept(ContentFormat::SENML_JSON));
    let recs = senml::resolve(&senml::decode_json(&r.payload).unwrap()).unwrap();
    assert_eq!(recs[0].value, Some(senml::Value::Num(42.0)));
}

/// A store whose final entity writes fail (a full disk): counters and the pending record still work, so a
/// multicast creation gets as far as joining before the commit fails.
struct FailingSaves(corral_group::MemStore);

impl corral_group::Store for FailingSaves {
    fn load(&self) -> Result<corral_group::Snapshot, corral_group::StoreError> {
        self.0.load()
    }
    fn apply(&mut self, writes: &[corral_group::Write]) -> Result<(), corral_group::StoreError> {
        // The small pending record still fits; a final entity does not.
        if writes.iter().any(|w| matches!(w, corral_group::Write::SaveEntity(e) if !e.pending)) {
            return Err(corral_group::StoreError::Io("disk full".into()));
        }
        self.0.apply(writes)
    }
}

#[test]
fn a_name_another_gateway_created_first_in_the_shared_store_answers_4_12_and_changes_nothing() {
    let mut lab = lab_with(LabConfig { devices: 3, v6: true, ..LabConfig::default() });
    let er = lab.uris(0..3, "s/t");
    // Another gateway sharing the store created the name after this one loaded (issue 45).
    let theirs = corral_group::StoredEntity {
        name: "x".into(),
        profile: corral_group::profile::Profile { er: er.clone(), ..Default::default() },
        group: None,
        joined: Vec::new(),
        pending: false,
    };
    lab.store().apply(&[corral_group::Write::SaveEntity(theirs.clone())]).unwrap();
    for ect in ["unicast", "multicast"] {
        let r = lab.create("x", json!({ "er": er, "ect": ect }));
        assert_eq!(r.code, Code::PRECONDITION_FAILED, "{ect}: {}", r.payload_text());
        assert!(r.payload_text().contains("created through another gateway"), "{}", r.payload_text());
        assert!(lab.em().entity_names().is_empty());
        assert_eq!(lab.store().load().unwrap().entities, vec![theirs.clone()], "theirs is untouched");
        for i in 0..3 {
            assert!(lab.mc(i).groups().is_empty(), "no member joined");
        }
    }
}

#[test]
fn store_failure_at_commit_rolls_the_joins_back_and_answers_5_00() {
    let store = FailingSaves(corral_group::MemStore::new());
    let mut lab = lab_with(LabConfig { devices: 3, v6: true, store: Some(Box::new(store)), ..LabConfig::default() });
    let er = lab.uris(0..3, "s/t");
    let r = lab.create("m", json!({ "er": er, "ect": "multicast" }));
    assert_eq!(r.code, Code::INTERNAL_SERVER_ERROR);
    let text = r.payload_text().to_string();
    assert!(text.contains("disk full"), "{text}");
    assert_eq!(text.matches("rollback leave: 2.02").count(), 3, "{text}");
    for i in 0..3 {
        assert!(lab.mc(i).groups().is_empty());
    }
    assert!(lab.em().entity_names().is_empty());
    assert!(lab.store().load().unwrap().entities.is_empty(), "the pending record is gone");
    // The name is free again.
    let r = lab.create("m", json!({ "er": er, "ect": "multicast" }));
    assert_eq!(r.code, Code::INTERNAL_SERVER_ERROR);
}

/// The same seeds give the same datagrams, byte for byte (madsim-style determinism check).
#[test]
fn runs_are_deterministic() {
    let run = || {
        let mut lab = lab_with(LabConfig { devices: 4, v6: true, ..LabConfig::default() });
        let er = lab.uris(0..4, "s/t");
        lab.create("m", json!({ "er": er, "ect": "multicast" }));
        lab.create("u", json!({ "er": er, "delay": "auto" }));
        lab.get("em/m", &["eo=avg"], Some(ContentFormat::SENML_CBOR));
        lab.get("em/u", &["eo=lst"], Some(ContentFormat::JSON));
        lab.request(Request::new(Code::DELETE).with_path("em/m"));
        lab.net.records.iter().map(|r| (r.sent_at, r.from, r.to, r.bytes.clone())).collect::<Vec<_>>()
    };
    let a = run();
    assert!(a.len() > 30);
    assert_eq!(a, run());
}

#[test]
fn a_multicast_creation_interrupted_by_a_crash_is_undone_at_start_up() {
    use corral_group::{McResource, MemStore, Profile, Store, StoredEntity};
    let g: IpAddr = "ff1e::89:5".parse().unwrap();
    let mut store = MemStore::new();
    let er: Vec<String> =
        (0..3).map(|i| corral_group::uri::format_coap(dev_addr(i, true), &["s".into(), "t".into()])).collect();
    let pending = StoredEntity {
        name: "half".into(),
        profile: Profile { er, ect: corral_group::Ect::Multicast, emt: corral_group::Emt::Non, ..Profile::default() },
        group: Some(g),
        joined: vec![false; 3],
        pending: true,
    };
    store.save_entity(&pending).unwrap();
    let mut lab = lab_with(LabConfig { devices: 3, v6: true, store: Some(Box::new(store)), ..LabConfig::default() });
    // Two members had joined before the crash.
    for i in 0..2 {
        let (d, h, now) = (lab.devices[i], lab.handles[i].mc, lab.net.now);
        lab.net.node(d).with_service(now, h, |mc: &mut McResource, cx| mc.join(cx, g).unwrap());
    }
    assert!(lab.em().entity_names().is_empty(), "a pending entity is not served");
    let r = lab.create("half", json!({ "er": ["coap://192.0.2.1/x"] }));
    assert_eq!(r.code, Code::CONFLICT, "the name is busy while it is undone");
    lab.net.run_for(Duration::from_secs(10));
    for i in 0..3 {
        assert!(lab.mc(i).groups().is_empty(), "device {i}");
    }
    assert!(lab.store().load().unwrap().entities.is_empty());
    assert_eq!(lab.em().jobs_in_progress(), 0);
}
