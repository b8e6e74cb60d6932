//! The gateway's policy on virtual time: who may use `/em`, where members may be, how much one request may
//! cost through nesting and across gateways, and the exchange quotas (issue 11).

use crate::common;

use common::*;
use corral_group::policy::{AccessPolicy, Budget, MemberPolicy, Prefix, Role};
use corral_group::EmConfig;
use corral_proto::wire::{Code, ContentFormat, OptionNumber};
use corral_proto::{Duration, Outcome, Request};
use serde_json::json;

fn p(s: &str) -> Prefix {
    s.parse().unwrap()
}

fn lab_em(devices: usize, em: EmConfig) -> Lab {
    lab_with(LabConfig { devices, em, ..LabConfig::default() })
}

#[test]
fn access_policy_gives_each_client_its_role() {
    // The client (192.0.2.2) may only read.
    let access = AccessPolicy {
        rules: vec![(p("192.0.2.2"), Role::Read), (p("192.0.2.0/24"), Role::Read)],
        ..Default::default()
    };
    let mut lab = lab_em(3, EmConfig { access, ..EmConfig::default() });
    let r = lab.create("room", json!({ "er": lab.uris(0..2, "s/t") }));
    assert_eq!(r.code, Code::FORBIDDEN);
    assert!(r.payload_text().contains("may read entities, not manage them"), "{}", r.payload_text());
    let r = lab.get("em", &[], None);
    assert_eq!(r.code, Code::CONTENT, "listing is reading");

    // Nobody: 4.03 saying so.
    let access = AccessPolicy { rules: vec![(p("10.0.0.0/8"), Role::Manage)], ..Default::default() };
    let mut lab = lab_em(3, EmConfig { access, ..EmConfig::default() });
    let r = lab.get("em", &[], None);
    assert_eq!(r.code, Code::FORBIDDEN);
    assert!(r.payload_text().contains("may not use this gateway"), "{}", r.payload_text());

    // Actuate: may use and actuate an existing entity, not change it.
    let mut lab = lab_em(3, EmConfig::default());
    assert_eq!(lab.create("lights", json!({ "er": lab.uris(0..2, "a/light") })).code, Code::CREATED);
    lab.net
        .node(lab.gw)
        .service_mut::<corral_group::EntityManager>(lab.em)
        .unwrap()
        .set_access(AccessPolicy { rules: vec![(p("192.0.2.0/24"), Role::Actuate)], ..Default::default() });
    let put = |payload: &str| Request::new(Code::PUT).with_path("em/lights").with_payload(payload.to_string());
    assert_eq!(lab.request(put("on")).code, Code::CHANGED, "actuation is allowed");
    let r = lab.send_json(Code::POST, "em/lights/profile", json!({ "enr": 1 }));
    assert_eq!(r.code, Code::FORBIDDEN, "{}", r.payload_text());
    let r = lab.request(Request::new(Code::DELETE).with_path("em/lights"));
    assert_eq!(r.code, Code::FORBIDDEN);
}

#[test]
fn member_policy_refuses_relays_with_a_reason() {
    let members = MemberPolicy {
        prefixes: vec![p("192.0.2.0/24")],
        ports: vec![5683],
        gateway: vec![p("192.0.2.1")],
        gateway_port: 5683,
    };
    let mut lab = lab_em(2, EmConfig { members, ..EmConfig::default() });
    for (member, why) in [
        ("coap://198.51.100.7/s/t", "outside the allowed member networks"),
        ("coap://192.0.2.100:22/s/t", "port 22 is not an allowed member port"),
        ("coap://192.0.2.255/s/t", "broadcast"),
        ("coap://255.255.255.255/s/t", "broadcast"),
        ("coap://192.0.2.1/mc", "is this gateway"),
        ("coap://192.0.2.1/d/../em", "is this gateway"),
    ] {
        let r = lab.create("relay", json!({ "er": [lab.uri(0, "s/t"), member] }));
        assert_eq!(r.code, Code::FORBIDDEN, "{member}: {}", r.payload_text());
        assert!(r.payload_text().contains(why), "{member}: {}", r.payload_text());
        assert!(r.payload_text().contains(member), "the reason names the member: {}", r.payload_text());
    }
    // Nothing was sent to any of them.
    assert!(lab.net.records.iter().all(|r| r.to.ip().to_string().starts_with("192.0.2.") && r.to.port() == 5683));
    assert!(lab.net.records.iter().all(|r| r.to != "192.0.2.1:5683".parse().unwrap() || r.from != r.to));
}

#[test]
fn duplicates_are_compared_after_normalisation() {
    let mut lab = lab(2);
    let a = lab.uri(0, "s/t");
    for dup in [
        "coap://192.0.2.100:5683/s/t",
        "coap://192.0.2.100/x/../s/t",
        "coap://192.0.2.100/./s/%74",
        "COAP://192.0.2.100/s/t",
    ] {
        let r = lab.create("dup", json!({ "er": [a, dup] }));
        assert_eq!(r.code, Code::BAD_REQUEST, "{dup}: {}", r.payload_text());
        assert!(r.payload_text().contains("again (the same resource)"), "{}", r.payload_text());
    }
}

#[test]
fn fan_out_budget_bounds_creation_and_nesting() {
    let budget = Budget { datagrams: 4, ..Budget::default() };
    let mut lab = lab_em(6, EmConfig { budget, ..EmConfig::default() });
    let r = lab.create("big", json!({ "er": lab.uris(0..5, "s/t") }));
    assert_eq!(r.code, Code::FORBIDDEN);
    assert!(r.payload_text().contains("would send 5 member requests"), "{}", r.payload_text());
    assert_eq!(lab.create("r1", json!({ "er": lab.uris(0..3, "s/t") })).code, Code::CREATED);
    assert_eq!(lab.create("r2", json!({ "er": lab.uris(3..5, "s/t") })).code, Code::CREATED);
    // Nesting adds up: 3 + 2 > 4.
    let r = lab.create("floor", json!({ "er": ["/em/r1", "/em/r2"] }));
    assert_eq!(r.code, Code::FORBIDDEN, "{}", r.payload_text());
    assert!(r.payload_text().contains("would send 5 member requests"), "{}", r.payload_text());
    // A change of a member entity is judged for the entities that contain it too.
    assert_eq!(lab.create("floor", json!({ "er": ["/em/r1"] })).code, Code::CREATED);
    let r = lab.send_json(Code::POST, "em/r1/profile", json!({ "er": lab.uris(0..5, "s/t") }));
    assert_eq!(r.code, Code::FORBIDDEN, "{}", r.payload_text());
    // A use that a parent gateway limits with budget= is refused when it cannot fit.
    let r = lab.get("em/r1", &["budget=2"], None);
    assert_eq!(r.code, Code::FORBIDDEN);
    assert!(r.payload_text().contains("at most 2"), "{}", r.payload_text());
    assert_eq!(lab.get("em/r1", &["budget=3"], None).code, Code::CONTENT);
}

#[test]
fn nesting_deeper_than_the_limit_is_refused_at_creation() {
    let mut lab = lab_em(1, EmConfig { max_depth: 3, ..EmConfig::default() });
    assert_eq!(lab.create("n0", json!({ "er": [lab.uri(0, "s/t")] })).code, Code::CREATED);
    for i in 1..3 {
        assert_eq!(lab.create(&format!("n{i}"), json!({ "er": [format!("/em/n{}", i - 1)] })).code, Code::CREATED);
    }
    let r = lab.create("n3", json!({ "er": ["/em/n2"] }));
    assert_eq!(r.code, Code::BAD_REQUEST, "{}", r.payload_text());
    assert!(r.payload_text().contains("would nest 4 levels"), "{}", r.payload_text());
}

#[test]
fn a_cycle_across_two_gateways_fails_at_once() {
    let mut lab = lab(2);
    let (_, _, gw2) = lab.add_gateway();
    let gw1 = gw_addr(false);
    // cb on gateway 2 (a device), ca on gateway 1 with cb as its member.
    let id = lab.create_at(gw2, "cb", json!({ "er": [lab.uri(0, "s/t")] }));
    assert!(matches!(lab.outcome(id), Some((_, Outcome::Response { response, .. })) if response.code == Code::CREATED));
    assert_eq!(lab.create("ca", json!({ "er": [format!("coap://{gw2}/em/cb")] })).code, Code::CREATED);
    // Closing the cycle (cb gets ca as a member) is refused during validation, within seconds.
    let start = lab.net.now;
    let req = Request::new(Code::POST)
        .with_path("em/cb/profile")
        .with_content_format(ContentFormat::JSON)
        .with_payload(json!({ "er": [lab.uri(0, "s/t"), format!("coap://{gw1}/em/ca")] }).to_string());
    let id = lab.send_at(gw2, req);
    while lab.outcome(id).is_none() {
        assert!(lab.net.step(start + Duration::from_secs(30)), "no answer within 30 s");
    }
    let (at, Outcome::Response { response, .. }) = lab.outcome(id).unwrap() else { panic!("no response") };
    assert_eq!(response.code, Code::BAD_REQUEST, "{}", response.payload_text());
    assert!(response.payload_text().contains("loop"), "{}", response.payload_text());
    assert!(at.saturating_since(start) < Duration::from_secs(5), "took {:?}", at.saturating_since(start));
    // A use that arrives with this gateway already in its via list is refused as a loop.
    let r = lab.get("em/ca", &[], None);
    assert_eq!(r.code, Code::CONTENT, "{}", r.payload_text());
}

#[test]
fn quotas_keep_one_entity_from_taking_every_exchange() {
    // A silent entity (its devices stop answering after creation) used again and again.
    let budget = Budget { per_client: 1000, per_entity: 6, uses_total: 1000, ..Budget::default() };
    let mut lab = lab_em(5, EmConfig { budget, ..EmConfig::default() });
    assert_eq!(lab.create("silent", json!({ "er": lab.uris(0..3, "s/t") })).code, Code::CREATED);
    assert_eq!(lab.create("other", json!({ "er": lab.uris(3..5, "s/t") })).code, Code::CREATED);
    let silent: Vec<_> = (0..3).map(|i| dev_addr(i, false)).collect();
    lab.net.set_drop(move |r| silent.contains(&r.to));
    let clients: Vec<_> = (0..4).map(|i| lab.add_client(format!("192.0.2.{}:5683", 50 + i).parse().unwrap())).collect();
    let uses: Vec<_> =
        clients.iter().map(|c| (*c, lab.send_from(*c, Request::new(Code::GET).with_path("em/silent")))).collect();
    lab.net.run_for(Duration::from_secs(1));
    // Two uses (3 exchanges each) fit the entity's quota of 6; the third and fourth get 5.03 + Max-Age.
    let refused: Vec<_> = uses.iter().filter_map(|(c, id)| lab.response_of(*c, *id)).collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    for r in &refused {
        assert_eq!(r.code, Code::SERVICE_UNAVAILABLE);
        assert!(r.options.get_uint(OptionNumber::MAX_AGE).is_some_and(|s| s > 0));
        assert!(r.payload_text().contains("entity silent has 6 member requests in progress"), "{}", r.payload_text());
    }
    // The other entity is served meanwhile.
    let r = lab.get("em/other", &[], None);
    assert_eq!(r.code, Code::CONTENT, "{}", r.payload_text());
}

#[test]
fn queries_that_are_not_utf8_are_refused() {
    let mut lab = lab(2);
    assert_eq!(lab.create("room", json!({ "er": lab.uris(0..2, "s/t") })).code, Code::CREATED);
    let mut req = Request::new(Code::GET).with_path("em/room");
    req.options.push(OptionNumber::URI_QUERY, b"eo=\xff");
    let r = lab.request(req);
    assert_eq!(r.code, Code::BAD_REQUEST);
    assert!(r.payload_text().contains("not UTF-8"), "{}", r.payload_text());
}

#[test]
fn mc_obeys_only_its_managers_and_never_joins_reserved_groups() {
    // The gateway (192.0.2.1) manages the devices; the client (192.0.2.2) is a stranger.
    let mut lab = lab_with(LabConfig { devices: 2, managers: vec![p("192.0.2.1")], ..LabConfig::default() });
    let r = lab.create("lights", json!({ "er": lab.uris(0..2, "a/light"), "ect": "multicast" }));
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
    let g = lab.mc(0).groups()[0];
    let octets = |g: std::net::IpAddr| match g {
        std::net::IpAddr::V4(a) => a.octets().to_vec(),
        std::net::IpAddr::V6(a) => a.octets().to_vec(),
    };
    let mc = |act: &str, g: std::net::IpAddr| {
        Request::new(Code::POST).with_path("mc").with_query(act).with_payload(octets(g))
    };
    let id = lab.send_to(dev_addr(0, false), mc("act=del", g));
    let Some((_, Outcome::Response { response, .. })) = lab.outcome(id) else { panic!("no answer") };
    assert_eq!(response.code, Code::FORBIDDEN);
    assert!(response.payload_text().contains("does not manage"), "{}", response.payload_text());
    assert_eq!(lab.mc(0).groups(), &[g], "still in its group");
    // A stranger cannot fill the slots either.
    let other: std::net::IpAddr = "239.255.1.1".parse().unwrap();
    let id = lab.send_to(dev_addr(0, false), mc("act=add", other));
    assert!(
        matches!(lab.outcome(id), Some((_, Outcome::Response { response, .. })) if response.code == Code::FORBIDDEN)
    );
    assert_eq!(lab.mc(0).groups(), &[g]);
    // Reading stays open.
    let id = lab.send_to(dev_addr(0, false), Request::new(Code::GET).with_path("mc"));
    assert!(matches!(lab.outcome(id), Some((_, Outcome::Response { response, .. })) if response.code == Code::CONTENT));

    // Reserved groups are refused even from an unrestricted device's manager.
    let mut lab = common::lab(1);
    for g in ["224.0.0.1", "224.0.1.187", "ff02::1", "ff01::1", "ff05::fd"] {
        let id = lab.send_to(dev_addr(0, false), mc("act=add", g.parse().unwrap()));
        let Some((_, Outcome::Response { response, .. })) = lab.outcome(id) else { panic!("no answer") };
        assert_eq!(response.code, Code::FORBIDDEN, "{g}");
        assert!(response.payload_text().contains("is not joined"), "{}", response.payload_text());
    }
    assert!(lab.mc(0).groups().is_empty());
}

#[test]
fn the_store_has_a_byte_budget() {
    let mut lab = lab_em(3, EmConfig { max_store_bytes: 300, ..EmConfig::default() });
    assert_eq!(lab.create("a", json!({ "er": lab.uris(0..3, "s/t") })).code, Code::CREATED);
    assert_eq!(lab.create("b", json!({ "er": lab.uris(0..3, "s/h") })).code, Code::CREATED);
    let r = lab.create("c", json!({ "er": lab.uris(0..3, "s/l") }));
    assert_eq!(r.code, Code::SERVICE_UNAVAILABLE, "{}", r.payload_text());
    assert!(r.payload_text().contains("the store holds at most 300"), "{}", r.payload_text());
    // Deleting gives the room back.
    assert_eq!(lab.request(Request::new(Code::DELETE).with_path("em/a")).code, Code::DELETED);
    assert_eq!(lab.create("c", json!({ "er": lab.uris(0..3, "s/l") })).code, Code::CREATED);
    // One entity's member list is bounded on its own: 4.13.
    let mut lab = lab_em(1, EmConfig { budget: Budget::unlimited(), ..EmConfig::default() });
    let seg = "x".repeat(200);
    let long: Vec<String> = (0..100).map(|i| format!("coap://192.0.2.100/{seg}/{seg}/{seg}/{seg}/{i}")).collect();
    let r = lab.create("huge", json!({ "er": long }));
    assert_eq!(r.code, Code::REQUEST_ENTITY_TOO_LARGE, "{}", r.payload_text());
}
