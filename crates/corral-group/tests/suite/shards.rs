//! A sharded gateway (`em::shards`): a manager EM that makes every change and a replica on another worker
//! that serves uses from the table the manager publishes. On the in-memory net the two workers are two
//! nodes; the kernel's steering between them is corral-tokio's and is tested there and in `corral`.

use crate::common;

use common::*;
use corral_group::{Directory, EmConfig, EntityManager};
use corral_proto::wire::{Code, ContentFormat, OptionNumber};
use corral_proto::{Duration, Endpoint, EndpointConfig, Node, Outcome, Request, Response, ServiceHandle};
use serde_json::json;
use std::net::SocketAddr;

const REPLICA: &str = "192.0.2.11:5683";

struct Sharded {
    lab: Lab,
    replica: SocketAddr,
    replica_em: (usize, ServiceHandle),
}

/// A lab whose gateway is a manager, plus its replica (worker 1) at [`REPLICA`]; `room` exists before
/// the replica starts.
fn sharded(devices: usize, observable: bool) -> Sharded {
    let directory = Directory::new();
    let mut lab =
        lab_with(LabConfig { devices, observable, directory: Some(directory.clone()), ..LabConfig::default() });
    let er = lab.uris(0..devices, "s/t");
    assert_eq!(lab.create("room", json!({ "er": er })).code, Code::CREATED);
    let replica: SocketAddr = REPLICA.parse().unwrap();
    let mut node = Node::new(Endpoint::new(EndpointConfig::with_seed(11)));
    let config = EmConfig { local_addrs: vec![gw_addr(false)], ..EmConfig::default() };
    let h = node.mount("em", EntityManager::replica(config, directory, 1).expect("replica loads"));
    let idx = lab.net.add(replica, node);
    Sharded { lab, replica, replica_em: (idx, h) }
}

impl Sharded {
    fn at_replica(&mut self, req: Request) -> Response {
        let id = self.lab.send_at(self.replica, req);
        let limit = self.lab.net.now + Duration::from_secs(120);
        while self.lab.outcome(id).is_none() {
            assert!(self.lab.net.step(limit), "no answer from the replica");
        }
        match self.lab.outcome(id).unwrap().1 {
            Outcome::Response { response, .. } => response,
            other => panic!("request failed: {other:?}"),
        }
    }

    fn replica(&mut self) -> &EntityManager {
        let (n, h) = self.replica_em;
        self.lab.net.node(n).service::<EntityManager>(h).unwrap()
    }
}

fn text(r: &Response) -> String {
    String::from_utf8_lossy(&r.payload).into_owned()
}

#[test]
fn a_replica_serves_what_the_manager_created_and_follows_its_changes() {
    let mut s = sharded(4, false);
    assert_eq!(s.replica().entity_names(), vec!["room".to_string()]);
    let r = s.at_replica(Request::get("em/room").with_query("eo=max"));
    assert_eq!(r.code, Code::CONTENT, "{}", text(&r));
    assert!(text(&r).parse::<f64>().is_ok(), "a temperature: {}", text(&r));

    // A change on the manager is on the replica by the time the client has its answer.
    let er = s.lab.uris(0..2, "s/h");
    assert_eq!(s.lab.create("hall", json!({ "er": er, "eo": "min" })).code, Code::CREATED);
    let r = s.at_replica(Request::get("em/hall"));
    assert_eq!(r.code, Code::CONTENT, "{}", text(&r));
    let list = s.at_replica(Request::get("em"));
    assert!(text(&list).contains("hall") && text(&list).contains("room"), "{}", text(&list));

    let r = s.lab.request(Request::new(Code::DELETE).with_path("em/room"));
    assert_eq!(r.code, Code::DELETED);
    let r = s.at_replica(Request::get("em/room"));
    assert_eq!(r.code, Code::NOT_FOUND, "{}", text(&r));
    assert_eq!(s.replica().entity_names(), vec!["hall".to_string()]);
}

#[test]
fn a_replica_refuses_changes_it_does_not_own() {
    let mut s = sharded(2, false);
    let profile = Request::new(Code::PUT)
        .with_path("em/room/profile")
        .with_content_format(ContentFormat::JSON)
        .with_payload(json!({ "eo": "min" }).to_string());
    for req in [profile, Request::new(Code::DELETE).with_path("em/room")] {
        let r = s.at_replica(req);
        assert_eq!(r.code, Code::INTERNAL_SERVER_ERROR);
        assert!(text(&r).contains("worker 1") && text(&r).contains("steering"), "{}", text(&r));
    }
    // Nothing changed anywhere.
    assert_eq!(s.lab.em().entity_names(), vec!["room".to_string()]);
    assert_eq!(s.lab.get("em/room", &["eo=avg"], None).code, Code::CONTENT);
}

#[test]
fn observers_on_a_replica_get_the_last_rendering_of_a_deleted_entity() {
    let mut s = sharded(3, true);
    let id =
        s.lab.send_at(s.replica, Request::get("em/room").with_query("eo=avg").with_option(OptionNumber::OBSERVE, &[]));
    s.lab.net.run_for(Duration::from_secs(30));
    let first = s.lab.responses(id);
    assert!(!first.is_empty() && first[0].code == Code::CONTENT, "registered on the replica");
    assert_eq!(s.replica().watched_entities(), 1);

    let del = s.lab.send(Request::new(Code::DELETE).with_path("em/room"));
    let limit = s.lab.net.now + Duration::from_secs(60);
    while s.lab.outcome(del).is_none() {
        assert!(s.lab.net.step(limit));
    }
    let deleted_at = s.lab.outcome(del).unwrap().0;
    s.lab.net.run_for(Duration::from_secs(2));
    let last = s.lab.responses(id).last().cloned().expect("notifications");
    assert_eq!(last.code, Code::NOT_FOUND, "the observer hears the entity is gone: {}", text(&last));
    let heard_at = s
        .lab
        .net
        .records
        .iter()
        .filter(|r| r.from == s.replica && r.to == client_addr(false))
        .filter_map(|r| r.message().map(|m| (r.sent_at, m)))
        .find(|(_, m)| m.code == Code::NOT_FOUND)
        .map(|(t, _)| t)
        .expect("a 4.04 notification");
    let late = heard_at - deleted_at;
    assert!(late <= corral_group::em::SYNC_PERIOD, "4.04 {late:?} after the delete was answered");
    assert_eq!(s.replica().watched_entities(), 0);
}
