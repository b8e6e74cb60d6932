//! Crash-safe multicast membership on virtual time: the journal and its reconciliation, the quarantine of
//! released groups and the allocation rate limit (issue 11, item 4).

use crate::common;

use common::*;
use corral_group::store::{run_op, StoreOp, Write};
use corral_group::{AddressPool, EmConfig, StoreDone, StoreError};
use corral_proto::wire::{Code, OptionNumber};
use corral_proto::{Duration, EffectDone, EffectId, EffectOp, EffectRunner, Instant};
use corral_store::SqliteStore;
use serde_json::json;
use std::net::IpAddr;

fn mcst_group(r: &corral_proto::Response) -> IpAddr {
    let uri = json(&r.payload)["profile"]["mcstURI"].as_str().unwrap().to_string();
    let host = uri.trim_start_matches("coap://").split('/').next().unwrap();
    host.trim_start_matches('[').split(']').next().unwrap().parse().unwrap()
}

#[test]
fn a_crash_during_an_update_leaves_no_stray_member() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("em.db");
    let er = |lab: &Lab, n: usize| lab.uris(0..n, "a/light");
    let group = {
        let store = SqliteStore::open(&path).unwrap();
        let mut lab = lab_with(LabConfig { devices: 3, store: Some(Box::new(store)), ..LabConfig::default() });
        let r = lab.create("lights", json!({ "er": er(&lab, 2), "ect": "multicast" }));
        assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
        let g = mcst_group(&r);
        // Device 2's answer to its join is lost: it joins, the EM waits (and retransmits) — and crashes.
        let d2 = dev_addr(2, false);
        lab.net.set_drop(move |r| r.from == d2 && r.message().is_some_and(|m| m.code == Code::CHANGED));
        let profile = json!({ "er": er(&lab, 3) });
        let req = corral_proto::Request::new(Code::POST)
            .with_path("em/lights/profile")
            .with_content_format(corral_proto::wire::ContentFormat::JSON)
            .with_payload(profile.to_string());
        lab.send(req);
        lab.net.run_for(Duration::from_secs(1));
        assert_eq!(lab.mc(2).groups(), &[g], "device 2 joined before the crash");
        let journal = lab.store().load().unwrap().journal;
        assert_eq!(journal, vec![(g, d2)], "the join was journaled before it was sent");
        g
    }; // the gateway is gone (kill -9: nothing after this point ran)

    // The restarted gateway finds the journal entry, which no entity records, and asks device 2 to leave.
    let store = SqliteStore::open(&path).unwrap();
    let mut lab = lab_with(LabConfig { devices: 3, store: Some(Box::new(store)), ..LabConfig::default() });
    for i in 0..3 {
        // The devices kept their memberships (they did not restart).
        let (node, mc) = (lab.devices[i], lab.handles[i].mc);
        let now = lab.net.now;
        if i < 3 {
            lab.net
                .node(node)
                .with_service(now, mc, |m: &mut corral_group::McResource, cx| m.join(cx, group).unwrap())
                .unwrap();
        }
    }
    lab.net.run_for(Duration::from_secs(10));
    assert!(lab.mc(2).groups().is_empty(), "the stray member left");
    assert_eq!(lab.mc(0).groups(), &[group], "recorded members stay");
    assert!(lab.store().load().unwrap().journal.is_empty());
    assert_eq!(lab.em().entity("lights").unwrap().profile.er.len(), 2, "the update never committed");
    // Deleting the entity now leaves nobody in the group.
    let r = lab.request(corral_proto::Request::new(Code::DELETE).with_path("em/lights"));
    assert_eq!(r.code, Code::DELETED);
    assert!((0..3).all(|i| lab.mc(i).groups().is_empty()));
}

#[test]
fn a_member_that_missed_its_leave_keeps_its_group_out_of_the_pool() {
    let pool = AddressPool { base: "239.255.89.0".parse().unwrap(), first: 1, size: 2 };
    let em = EmConfig { pool_v4: pool, quarantine: Duration::from_secs(60), ..EmConfig::default() };
    let mut lab = lab_with(LabConfig { devices: 2, em, ..LabConfig::default() });
    let er = lab.uris(0..2, "a/light");
    let r = lab.create("a", json!({ "er": er, "ect": "multicast" }));
    let g1 = mcst_group(&r);
    // Device 1 is unreachable while "a" is deleted: its leave fails, the journal keeps it.
    let d1 = dev_addr(1, false);
    lab.net.set_drop(move |r| r.to == d1);
    assert_eq!(lab.request(corral_proto::Request::new(Code::DELETE).with_path("em/a")).code, Code::DELETED);
    lab.net.clear_drop();
    assert_eq!(lab.mc(1).groups(), &[g1]);
    assert_eq!(lab.store().load().unwrap().journal, vec![(g1, d1)]);
    // The quarantine ends, but g1 still has a stray member: "b" gets the other address.
    lab.net.run_for(Duration::from_secs(61));
    let r = lab.create("b", json!({ "er": lab.uris(0..1, "a/light"), "ect": "multicast" }));
    assert_ne!(mcst_group(&r), g1);
    // The periodic reconciliation asks device 1 again; once it left, g1 is free.
    lab.net.run_for(Duration::from_secs(300));
    assert!(lab.mc(1).groups().is_empty());
    assert!(lab.store().load().unwrap().journal.is_empty());
}

#[test]
fn released_groups_rest_in_quarantine() {
    let pool = AddressPool { base: "239.255.89.0".parse().unwrap(), first: 1, size: 2 };
    let em = EmConfig { pool_v4: pool, quarantine: Duration::from_secs(60), ..EmConfig::default() };
    let mut lab = lab_with(LabConfig { devices: 2, em, ..LabConfig::default() });
    let er = lab.uris(0..2, "a/light");
    let mut used = Vec::new();
    for name in ["a", "b"] {
        let r = lab.create(name, json!({ "er": er, "ect": "multicast" }));
        assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
        used.push(mcst_group(&r));
        assert_eq!(
            lab.request(corral_proto::Request::new(Code::DELETE).with_path(&format!("em/{name}"))).code,
            Code::DELETED
        );
    }
    let r = lab.create("c", json!({ "er": er, "ect": "multicast" }));
    assert_eq!(r.code, Code::SERVICE_UNAVAILABLE, "{}", r.payload_text());
    assert!(r.payload_text().contains("quarantined"), "{}", r.payload_text());
    lab.net.run_for(Duration::from_secs(61));
    let r = lab.create("c", json!({ "er": er, "ect": "multicast" }));
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
    assert_eq!(mcst_group(&r), used[0], "the pool wraps to the address released first");
}

#[test]
fn allocation_is_rate_limited() {
    let em = EmConfig { allocation_burst: 2, allocation_interval: Duration::from_secs(10), ..EmConfig::default() };
    let mut lab = lab_with(LabConfig { devices: 2, em, ..LabConfig::default() });
    let er = lab.uris(0..2, "a/light");
    for name in ["a", "b"] {
        assert_eq!(lab.create(name, json!({ "er": er, "ect": "multicast" })).code, Code::CREATED);
    }
    let r = lab.create("c", json!({ "er": er, "ect": "multicast" }));
    assert_eq!(r.code, Code::SERVICE_UNAVAILABLE, "{}", r.payload_text());
    let wait = r.options.get_uint(OptionNumber::MAX_AGE).unwrap();
    assert!((1..=11).contains(&wait), "{wait}");
    assert!(lab.em().entity("c").is_none());
    lab.net.run_for(Duration::from_secs(wait));
    assert_eq!(lab.create("c", json!({ "er": er, "ect": "multicast" })).code, Code::CREATED);
    // Unicast entities allocate nothing and are never limited.
    assert_eq!(lab.create("u", json!({ "er": er })).code, Code::CREATED);
}

/// K5 of corral-dst (seed 2184): an update's removed member whose leave times out is a stray of the new
/// entity, and the reconciliation its commit schedules asks it to leave again.
#[test]
fn an_updates_removed_member_that_missed_its_leave_is_reconciled() {
    let mut lab = lab_with(LabConfig { devices: 3, ..LabConfig::default() });
    let r = lab.create("a", json!({ "er": lab.uris(0..3, "a/light"), "ect": "multicast" }));
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
    let g = mcst_group(&r);
    // Whatever the creation scheduled has run.
    lab.net.run_for(Duration::from_secs(310));
    // Device 2 is unreachable while the update removes it: its leave times out.
    let d2 = dev_addr(2, false);
    lab.net.set_drop(move |r| r.to == d2);
    let r = lab.send_json(Code::POST, "em/a/profile", json!({ "er": lab.uris(0..2, "a/light") }));
    assert_eq!(r.code, Code::CHANGED, "{}", r.payload_text());
    lab.net.clear_drop();
    assert_eq!(lab.mc(2).groups(), &[g], "the leave never arrived");
    assert_eq!(lab.store().load().unwrap().journal, vec![(g, d2)]);
    // The reconciliation the commit scheduled asks device 2 again.
    lab.net.run_for(Duration::from_secs(310));
    assert!(lab.mc(2).groups().is_empty(), "the stray member left");
    assert_eq!(lab.mc(0).groups(), &[g], "the entity's members stay");
    assert!(lab.store().load().unwrap().journal.is_empty());
}

/// A store that fails (without applying them) the operations `fails` picks, and applies the others at
/// once.
struct Failing<F> {
    store: std::sync::Arc<std::sync::Mutex<Box<dyn corral_group::Store>>>,
    fails: F,
    done: Vec<(EffectId, StoreDone)>,
}

impl<F: FnMut(&[Write]) -> bool + Send + 'static> EffectRunner for Failing<F> {
    fn start(&mut self, _now: Instant, id: EffectId, op: EffectOp) {
        let Ok(op) = op.downcast::<StoreOp>() else { panic!("a store operation") };
        let done = if (self.fails)(&op.0) {
            StoreDone(Err(StoreError::Io("the disk is gone".into())))
        } else {
            run_op(&mut **self.store.lock().unwrap(), op)
        };
        self.done.push((id, done));
    }

    fn poll_done(&mut self, _now: Instant) -> Option<(EffectId, EffectDone)> {
        (!self.done.is_empty()).then(|| {
            let (id, done) = self.done.remove(0);
            (id, Box::new(done) as EffectDone)
        })
    }

    fn poll_timeout(&self) -> Option<Instant> {
        (!self.done.is_empty()).then_some(Instant::ZERO)
    }
}

fn failing(lab: &mut Lab, fails: impl FnMut(&[Write]) -> bool + Send + 'static) {
    let runner = Failing { store: lab.store.clone(), fails, done: Vec::new() };
    lab.net.node(lab.gw).set_effect_runner(Box::new(runner));
}

/// K1 of corral-dst (seed 72): a committed join's journal entries whose removal failed (or was lost to a
/// crash) are removed again by the reconciliation, so that they do not keep the group out of the pool.
#[test]
fn a_committed_joins_journal_entries_whose_removal_failed_are_removed_again() {
    let mut lab = lab_with(LabConfig { devices: 2, ..LabConfig::default() });
    let mut first = true;
    failing(&mut lab, move |w| {
        let fail = first && w.iter().any(|w| matches!(w, Write::JournalRemove(..)));
        first &= !fail;
        fail
    });
    let r = lab.create("a", json!({ "er": lab.uris(0..2, "a/light"), "ect": "multicast" }));
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
    let g = mcst_group(&r);
    lab.net.run_for(Duration::from_secs(1));
    assert_eq!(lab.store().load().unwrap().journal.len(), 2, "the removal failed");
    lab.net.run_for(Duration::from_secs(300));
    assert!(lab.store().load().unwrap().journal.is_empty(), "removed again");
    assert!((0..2).all(|i| lab.mc(i).groups() == [g]), "the members stay in the group");
}

/// K4 of corral-dst (seed 86): a change of an entity waits for the reconciliation of its group, so that a
/// member it asks to join is not met by a stray leave still on its way to the same member.
#[test]
fn a_change_waits_for_the_reconciliation_of_its_entitys_group() {
    let mut lab = lab_with(LabConfig { devices: 3, ..LabConfig::default() });
    let r = lab.create("a", json!({ "er": lab.uris(0..3, "a/light"), "ect": "multicast" }));
    let g = mcst_group(&r);
    lab.net.run_for(Duration::from_secs(310));
    // Device 2 misses its leave when an update removes it: a stray.
    let d2 = dev_addr(2, false);
    lab.net.set_drop(move |r| r.to == d2);
    let r = lab.send_json(Code::POST, "em/a/profile", json!({ "er": lab.uris(0..2, "a/light") }));
    assert_eq!(r.code, Code::CHANGED, "{}", r.payload_text());
    // The reconciliation asks it to leave; the leave is lost and retransmitted.
    let leave = |m: &corral_proto::wire::Message| m.options.get_all(OptionNumber::URI_QUERY).any(|q| q == b"act=del");
    lab.net.set_drop(move |r| r.to == d2 && r.message().is_some_and(|m| leave(&m)));
    lab.net.run_for(Duration::from_secs(301));
    // Adding device 2 back meanwhile would race that leave: the change is refused until it ends.
    let r = lab.send_json(Code::POST, "em/a/profile", json!({ "er": lab.uris(0..3, "a/light") }));
    assert_eq!(r.code, Code::CONFLICT, "{}", r.payload_text());
    lab.net.clear_drop();
    lab.net.run_for(Duration::from_secs(100));
    assert!(lab.mc(2).groups().is_empty(), "the stray left");
    let r = lab.send_json(Code::POST, "em/a/profile", json!({ "er": lab.uris(0..3, "a/light") }));
    assert_eq!(r.code, Code::CHANGED, "{}", r.payload_text());
    lab.net.run_for(Duration::from_secs(400));
    assert_eq!(lab.em().entity("a").unwrap().joined, vec![true; 3]);
    assert_eq!(lab.mc(2).groups(), &[g], "recorded as joined, and in the group");
}
