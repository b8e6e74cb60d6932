//! Nothing a reader sends holds the gateway's quotas for long (issue 26 item 3): a use gives its member
//! requests back as they end, a reader may not pace a use for days, and a use whose entity changes or is
//! deleted ends at once — so neither spoofed nor real readers can lock an entity until a restart.

use crate::common;

use common::*;
use corral_group::policy::{AccessPolicy, Budget, Prefix, Role};
use corral_group::{EmConfig, EntityManager};
use corral_proto::wire::{Code, ContentFormat};
use corral_proto::{Duration, Request, Response};
use serde_json::json;

fn lab_em(devices: usize, em: EmConfig) -> Lab {
    lab_with(LabConfig { devices, em, ..LabConfig::default() })
}

/// A lab whose entity quota holds `per_entity` member exchanges, with the entity `slow`: `n` members asked
/// `delay_ms` apart (a manager's profile may set any delay).
fn slow_entity(n: usize, per_entity: usize, delay_ms: u64) -> Lab {
    let budget = Budget { per_client: 1000, per_entity, uses_total: 1000, ..Budget::default() };
    let mut lab = lab_em(n, EmConfig { budget, ..EmConfig::default() });
    let r = lab.create("slow", json!({ "er": lab.uris(0..n, "s/t"), "delay": delay_ms, "eo": "lst" }));
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
    lab
}

fn client(lab: &mut Lab, i: u8) -> (usize, corral_proto::ServiceHandle) {
    lab.add_client(format!("192.0.2.{}:5683", 50 + i).parse().unwrap())
}

fn answered(lab: &mut Lab, c: (usize, corral_proto::ServiceHandle), id: corral_proto::RequestId) -> Response {
    lab.response_of(c, id).expect("an answer")
}

#[test]
fn a_paced_use_gives_its_quota_back_as_its_members_answer() {
    // 4 members 10 s apart: the first use holds 4 exchanges, and the quota is 5.
    let mut lab = slow_entity(4, 5, 10_000);
    let (a, b, c) = (client(&mut lab, 0), client(&mut lab, 1), client(&mut lab, 2));
    let ua = lab.send_from(a, Request::get("em/slow"));
    lab.net.run_for(Duration::from_secs(1));
    let ub = lab.send_from(b, Request::get("em/slow"));
    lab.net.run_for(Duration::from_secs(1));
    let r = answered(&mut lab, b, ub);
    assert_eq!(r.code, Code::SERVICE_UNAVAILABLE, "4 + 4 > 5: {}", r.payload_text());
    // 25 s in, three members answered: the first use holds one exchange, so a second use fits.
    lab.net.run_for(Duration::from_secs(23));
    let uc = lab.send_from(c, Request::get("em/slow"));
    lab.net.run_for(Duration::from_secs(60));
    let r = answered(&mut lab, c, uc);
    assert_eq!(r.code, Code::CONTENT, "{}", r.payload_text());
    assert_eq!(answered(&mut lab, a, ua).code, Code::CONTENT);
}

#[test]
fn a_reader_may_not_pace_a_use_beyond_a_second_unless_the_profile_does() {
    let mut lab = lab_em(3, EmConfig::default());
    assert_eq!(lab.create("room", json!({ "er": lab.uris(0..3, "s/t") })).code, Code::CREATED);
    assert_eq!(lab.create("paced", json!({ "er": lab.uris(0..3, "s/h"), "delay": 5000 })).code, Code::CREATED);
    let reader =
        AccessPolicy { rules: vec![("192.0.2.0/24".parse::<Prefix>().unwrap(), Role::Read)], ..Default::default() };
    fn em(lab: &mut Lab) -> &mut EntityManager {
        lab.net.node(lab.gw).service_mut::<EntityManager>(lab.em).unwrap()
    }
    em(&mut lab).set_access(reader);
    for q in ["delay=86400000", "timeout=86400000"] {
        let r = lab.get("em/room", &[q], None);
        assert_eq!(r.code, Code::FORBIDDEN, "{q}: {}", r.payload_text());
        assert!(r.payload_text().contains("may not manage entities may ask for at most"), "{}", r.payload_text());
    }
    assert_eq!(lab.get("em/room", &["delay=1000"], None).code, Code::CONTENT);
    assert_eq!(lab.get("em/paced", &["delay=5000"], None).code, Code::CONTENT, "the profile's own delay");
    // A manager may ask for more.
    em(&mut lab).set_access(AccessPolicy::open());
    assert_eq!(lab.get("em/room", &["delay=3000", "timeout=200000"], None).code, Code::CONTENT);
}

/// Two uses fill the entity's quota of 6; a third is refused. Returns the two clients and their requests.
fn fill(lab: &mut Lab) -> Vec<((usize, corral_proto::ServiceHandle), corral_proto::RequestId)> {
    let uses: Vec<_> = (0..2)
        .map(|i| {
            let c = client(lab, i);
            (c, lab.send_from(c, Request::get("em/slow")))
        })
        .collect();
    lab.net.run_for(Duration::from_secs(1));
    let c = client(lab, 9);
    let id = lab.send_from(c, Request::get("em/slow"));
    lab.net.run_for(Duration::from_secs(1));
    assert_eq!(answered(lab, c, id).code, Code::SERVICE_UNAVAILABLE, "the quota is full");
    uses
}

#[test]
fn deleting_an_entity_ends_its_uses_and_gives_their_quota_back() {
    let mut lab = slow_entity(3, 6, 60_000);
    let uses = fill(&mut lab);
    let r = lab.request(Request::new(Code::DELETE).with_path("em/slow"));
    assert_eq!(r.code, Code::DELETED);
    lab.net.run_for(Duration::from_secs(1));
    for (c, id) in &uses {
        let r = answered(&mut lab, *c, *id);
        assert_eq!(r.code, Code::GATEWAY_TIMEOUT, "{}", r.payload_text());
        assert!(r.payload_text().contains("deleted meanwhile"), "{}", r.payload_text());
    }
    assert_eq!(lab.em().jobs_in_progress(), 0);
    // The name's quota is free again for a new entity of that name.
    assert_eq!(lab.create("slow", json!({ "er": lab.uris(0..3, "s/t") })).code, Code::CREATED);
    let c = client(&mut lab, 7);
    let id = lab.send_from(c, Request::get("em/slow"));
    lab.net.run_for(Duration::from_secs(5));
    assert_eq!(answered(&mut lab, c, id).code, Code::CONTENT);
}

#[test]
fn updating_an_entity_gives_the_quota_of_its_uses_back() {
    let mut lab = slow_entity(3, 6, 60_000);
    let uses = fill(&mut lab);
    let r = lab.send_json(Code::POST, "em/slow/profile", json!({ "delay": 0 }));
    assert_eq!(r.code, Code::CHANGED, "{}", r.payload_text());
    // A new use of the changed entity fits at once.
    let c = client(&mut lab, 7);
    let id = lab.send_from(c, Request::get("em/slow").with_accept(ContentFormat::JSON));
    lab.net.run_for(Duration::from_secs(5));
    let r = answered(&mut lab, c, id);
    assert_eq!(r.code, Code::CONTENT, "{}", r.payload_text());
    assert_eq!(json(&r.payload)["replies"], 3);
    // The uses that were running finish with the members they started with.
    lab.net.run_for(Duration::from_secs(180));
    for (c, id) in &uses {
        assert_eq!(answered(&mut lab, *c, *id).code, Code::CONTENT);
    }
}
