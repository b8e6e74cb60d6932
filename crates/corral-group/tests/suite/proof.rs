//! Proof of address before the gateway works or changes anything for a source beyond loopback (issue 26
//! items 3 and 5, RFC 9175 §2.4): a blind spoofer — one who sends with another's address and never sees the
//! answers — gets Echo challenges sent to that address, and nothing else happens; a real client repeats
//! with the Echo value by itself and is served. Devices treat `/mc` changes the same way.

use crate::common;

use common::*;
use corral_group::policy::{Budget, Prefix};
use corral_group::EmConfig;
use corral_proto::wire::{Code, ContentFormat, Message, MessageId, MessageType, OptionNumber, Token};
use corral_proto::{Duration, Endpoint, EndpointConfig, Node, Request};
use serde_json::json;
use std::net::SocketAddr;

fn proving(devices: usize, budget: Budget) -> Lab {
    lab_with(LabConfig {
        devices,
        em: EmConfig { challenge_unverified: true, budget, ..EmConfig::default() },
        ..LabConfig::default()
    })
}

/// A datagram from `from` delivered to net node `to` (a spoofer's: its answers go to `from`, which no node
/// of the net holds, or which is a node that never asked).
fn spoof(lab: &mut Lab, to: usize, from: SocketAddr, msg: &Message) {
    let now = lab.net.now;
    let dst = lab.net.addr(to).ip();
    lab.net.node(to).handle_datagram(now, from, Some(dst), &msg.encode());
    lab.net.flush();
}

fn request(code: Code, mid: u16, path: &str, query: &[&str]) -> Message {
    let mut m = Message::new(MessageType::Con, code, MessageId(mid), Token::new(&mid.to_be_bytes()).unwrap());
    for seg in path.split('/') {
        m.options.push(OptionNumber::URI_PATH, seg.as_bytes());
    }
    for q in query {
        m.options.push(OptionNumber::URI_QUERY, q.as_bytes());
    }
    m
}

/// What the gateway sent to `to`, parsed.
fn sent_to(lab: &Lab, to: SocketAddr) -> Vec<Message> {
    let gw = gw_addr(lab.v6);
    lab.net.records.iter().filter(|r| r.from == gw && r.to == to).filter_map(|r| r.message()).collect()
}

fn member_requests(lab: &Lab, n: usize) -> usize {
    (0..n).map(|i| lab.requests_to(i).len()).sum()
}

#[test]
fn spoofed_uses_hold_nothing_and_a_real_client_is_served_after_one_challenge() {
    let budget = Budget { per_client: 1000, per_entity: 6, uses_total: 1000, ..Budget::default() };
    let mut lab = proving(3, budget);
    let r = lab.create("slow", json!({ "er": lab.uris(0..3, "s/t"), "delay": 60_000 }));
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
    let before = member_requests(&lab, 3);
    // 20 uses from 20 spoofed sources: each would hold 3 of the entity's 6 exchanges for two minutes.
    for i in 0..20u16 {
        let mut get = request(Code::GET, 100 + i, "em/slow", &["delay=1000"]);
        get.mtype = MessageType::Non;
        let gw = lab.gw;
        spoof(&mut lab, gw, format!("198.51.100.{}:40000", i + 1).parse().unwrap(), &get);
    }
    lab.net.run_for(Duration::from_secs(1));
    assert_eq!(member_requests(&lab, 3), before, "no member was asked for a spoofer");
    for i in 0..20u16 {
        let to: SocketAddr = format!("198.51.100.{}:40000", i + 1).parse().unwrap();
        let answers = sent_to(&lab, to);
        assert_eq!(answers.len(), 1, "{answers:?}");
        assert_eq!(answers[0].code, Code::UNAUTHORIZED);
        assert!(answers[0].options.get(OptionNumber::ECHO).is_some(), "an Echo challenge");
    }
    assert_eq!(lab.em().jobs_in_progress(), 0);
    // A real client: challenged once, then served (its endpoint repeats with the Echo value).
    let r = lab.get("em/slow", &[], None);
    assert_eq!(r.code, Code::CONTENT, "{}", r.payload_text());
}

#[test]
fn changes_from_beyond_loopback_need_their_own_echo_round_trip() {
    let mut lab = proving(2, Budget::default());
    let r = lab.create("room", json!({ "er": lab.uris(0..2, "s/t") }));
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
    let client = client_addr(false);
    let first = &sent_to(&lab, client)[0];
    assert_eq!(first.code, Code::UNAUTHORIZED, "the creation was challenged first");
    // Spoofed changes, from a stranger and from the (now verified) client's own address and port.
    for (i, from) in ["198.51.100.9:5683".parse().unwrap(), client].into_iter().enumerate() {
        let i = i as u16 * 10;
        let gw = lab.gw;
        spoof(&mut lab, gw, from, &request(Code::DELETE, 500 + i, "em/room", &[]));
        let mut echo = request(Code::DELETE, 501 + i, "em/room", &[]);
        echo.options.set(OptionNumber::ECHO, &[1, 2, 3, 4, 5, 6, 7, 8]);
        let gw = lab.gw;
        spoof(&mut lab, gw, from, &echo);
        let mut create = request(Code::PUT, 502 + i, "em/evil", &[]).with_payload_json(&lab.uris(0..1, "s/t"));
        create.options.set_uint(OptionNumber::CONTENT_FORMAT, 50);
        let gw = lab.gw;
        spoof(&mut lab, gw, from, &create);
        let mut actuate = request(Code::PUT, 503 + i, "em/room", &[]);
        actuate.payload = b"on".to_vec();
        let gw = lab.gw;
        spoof(&mut lab, gw, from, &actuate);
    }
    lab.net.run_for(Duration::from_secs(2));
    assert_eq!(lab.em().entity_names(), vec!["room".to_string()], "nothing changed");
    assert_eq!(member_requests(&lab, 2), 2, "only the creation's validation reached the members");
    // The real client's change: challenged, repeated, done.
    let r = lab.request(Request::new(Code::DELETE).with_path("em/room"));
    assert_eq!(r.code, Code::DELETED, "{}", r.payload_text());
    assert!(lab.em().entity_names().is_empty());
}

#[test]
fn a_loopback_client_is_not_challenged() {
    let mut lab = proving(2, Budget::default());
    let local: SocketAddr = "127.0.0.1:5683".parse().unwrap();
    let mut node = Node::new(Endpoint::new(EndpointConfig::with_seed(77)));
    let svc = node.mount("", Client::default());
    let c = lab.net.add(local, node);
    let body = json!({ "er": lab.uris(0..2, "s/t") }).to_string();
    let put = Request::new(Code::PUT).with_path("em/room").with_content_format(ContentFormat::JSON).with_payload(body);
    let id = lab.send_from((c, svc), put);
    lab.net.run_for(Duration::from_secs(5));
    assert_eq!(lab.response_of((c, svc), id).expect("an answer").code, Code::CREATED);
    let to_local = sent_to(&lab, local);
    assert!(to_local.iter().all(|m| m.code != Code::UNAUTHORIZED), "{to_local:?}");
}

#[test]
fn an_observer_beyond_loopback_registers_after_one_challenge() {
    let mut lab = lab_with(LabConfig {
        devices: 2,
        observable: true,
        em: EmConfig { challenge_unverified: true, ..EmConfig::default() },
        ..LabConfig::default()
    });
    assert_eq!(lab.create("room", json!({ "er": lab.uris(0..2, "s/t") })).code, Code::CREATED);
    let id = lab.send(Request::get("em/room").with_option(OptionNumber::OBSERVE, &[]));
    lab.net.run_for(Duration::from_secs(600));
    let notes = lab.responses(id);
    assert!(notes.len() >= 2, "a registration and notifications: {notes:?}");
    assert!(notes.iter().all(|n| n.code == Code::CONTENT && n.options.observe().is_some()), "{notes:?}");
}

#[test]
fn mc_changes_need_an_echo_round_trip_even_from_the_gateways_own_address() {
    let mut lab = lab_with(LabConfig {
        devices: 2,
        managers: vec!["192.0.2.1".parse::<Prefix>().unwrap()],
        verify_managers: true,
        ..LabConfig::default()
    });
    let r = lab.create("lights", json!({ "er": lab.uris(0..2, "a/light"), "ect": "multicast" }));
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
    let g = lab.mc(0).groups()[0];
    // Each device challenged the gateway's join, and the gateway's endpoint repeated it with the value.
    let dev = dev_addr(0, false);
    let from_dev: Vec<Message> = lab
        .net
        .records
        .iter()
        .filter(|r| r.from == dev && r.to == gw_addr(false))
        .filter_map(|r| r.message())
        .collect();
    assert!(from_dev.iter().any(|m| m.code == Code::UNAUTHORIZED), "{from_dev:?}");
    // A spoofer using the gateway's own address and port: challenged, never obeyed.
    for (i, g) in ["239.1.2.3", "239.1.2.4", "239.1.2.5", "239.1.2.6"].iter().enumerate() {
        let mut add = request(Code::POST, 900 + i as u16, "mc", &["act=add"]);
        add.payload = g.parse::<std::net::Ipv4Addr>().unwrap().octets().to_vec();
        let dev0 = lab.devices[0];
        spoof(&mut lab, dev0, gw_addr(false), &add);
    }
    let mut del = request(Code::POST, 950, "mc", &["act=del"]);
    del.payload = match g {
        std::net::IpAddr::V4(a) => a.octets().to_vec(),
        std::net::IpAddr::V6(a) => a.octets().to_vec(),
    };
    let dev0 = lab.devices[0];
    spoof(&mut lab, dev0, gw_addr(false), &del);
    lab.net.run_for(Duration::from_secs(2));
    assert_eq!(lab.mc(0).groups(), &[g], "the spoofed joins and the leave were not obeyed");
    // The gateway still manages: deleting the entity makes every member leave.
    assert_eq!(lab.request(Request::new(Code::DELETE).with_path("em/lights")).code, Code::DELETED);
    assert!(lab.mc(0).groups().is_empty() && lab.mc(1).groups().is_empty());
}

/// A JSON profile `{"er": members}` as a message payload.
trait JsonPayload {
    fn with_payload_json(self, er: &[String]) -> Self;
}

impl JsonPayload for Message {
    fn with_payload_json(mut self, er: &[String]) -> Message {
        self.payload = json!({ "er": er }).to_string().into_bytes();
        self
    }
}

#[test]
fn a_change_too_large_for_one_datagram_is_served_after_its_echo_round_trip() {
    let mut lab = proving(2, Budget::default());
    let long = "q".repeat(200);
    let er: Vec<String> =
        lab.uris(0..2, "s/t").into_iter().map(|u| format!("{u}?a={long}&b={long}&c={long}")).collect();
    let body = json!({ "er": er }).to_string();
    assert!(body.len() > 1024, "a block-wise upload");
    let r = lab.create("big", json!({ "er": er }));
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
}
