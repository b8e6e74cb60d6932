//! Storage as an effect (issue 42): the Entity Manager asks for its writes and waits for them, so a store
//! whose completions arrive late and in any order changes nothing a client sees but the time it waits, no
//! change is answered before its write is done, and a crash between a write and its completion leaves the
//! old state or the new one in the store, never a mix.

use crate::common::*;
use corral_group::store::run_op;
use corral_group::{MemStore, Snapshot, Store, StoreDone, StoredEntity};
use corral_proto::wire::Code;
use corral_proto::{Duration, EffectDone, EffectId, EffectOp, EffectRunner, Instant, Outcome, Request};
use serde_json::json;
use std::sync::{Arc, Mutex};

type Shared = Arc<Mutex<Box<dyn Store>>>;

/// A store that applies each operation when it starts (in the order started) but reports it done only
/// later: the first after 3 s, the next after 0.2 s, alternating, and the latest due first — so
/// completions come back late and out of order. With `hold`, it applies and never reports (the process
/// dies before the completion); with `lose`, it neither applies nor reports (the write never reached the
/// disk).
struct Slow {
    store: Shared,
    held: Vec<(Instant, EffectId, EffectDone)>,
    started: u64,
    hold: bool,
    lose: bool,
}

impl Slow {
    fn new(store: Shared) -> Slow {
        Slow { store, held: Vec::new(), started: 0, hold: false, lose: false }
    }
}

impl EffectRunner for Slow {
    fn start(&mut self, now: Instant, id: EffectId, op: EffectOp) {
        self.started += 1;
        if self.lose {
            return;
        }
        let done: StoreDone = run_op(&mut **self.store.lock().unwrap(), op);
        if self.hold {
            return;
        }
        let delay = if self.started % 2 == 1 { Duration::from_secs(3) } else { Duration::from_millis(200) };
        self.held.push((now + delay, id, Box::new(done)));
    }

    fn poll_done(&mut self, now: Instant) -> Option<(EffectId, EffectDone)> {
        // Of those due, the one started last: out of order whenever two are due together.
        let i = self.held.iter().rposition(|(due, _, _)| *due <= now)?;
        let (_, id, done) = self.held.remove(i);
        Some((id, done))
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.held.iter().map(|(due, _, _)| *due).min()
    }
}

fn put(lab: &mut Lab, name: &str, doc: serde_json::Value) -> corral_proto::RequestId {
    let req = Request::new(Code::PUT)
        .with_path(&format!("em/{name}"))
        .with_content_format(corral_proto::wire::ContentFormat::JSON)
        .with_payload(doc.to_string());
    lab.send(req)
}

fn code_of(lab: &mut Lab, id: corral_proto::RequestId) -> Option<Code> {
    match lab.outcome(id)?.1 {
        Outcome::Response { response, .. } => Some(response.code),
        other => panic!("request failed: {other:?}"),
    }
}

#[test]
fn late_and_reordered_completions_change_nothing_but_the_wait() {
    let mut lab = lab_with(LabConfig { devices: 6, v6: true, ..LabConfig::default() });
    let store = lab.store.clone();
    lab.net.node(lab.gw).set_effect_runner(Box::new(Slow::new(store)));
    // Four changes at once: two unicast creations, a multicast creation (a cursor, a pending record, the
    // journal, the commit), and a generated name.
    let a = {
        let er = lab.uris(0..2, "s/t");
        put(&mut lab, "a", json!({ "er": er }))
    };
    let b = {
        let er = lab.uris(2..4, "s/t");
        put(&mut lab, "b", json!({ "er": er, "eo": ["max"] }))
    };
    let m = {
        let er = lab.uris(0..3, "s/t");
        put(&mut lab, "m", json!({ "er": er, "ect": "multicast" }))
    };
    lab.net.run_for(Duration::from_millis(100));
    assert!(lab.em().writes_in_flight() > 0, "the writes are on their way");
    assert_eq!(code_of(&mut lab, a), None, "not answered before its write is done");
    lab.net.run_for(Duration::from_secs(60));
    assert_eq!(code_of(&mut lab, a), Some(Code::CREATED));
    assert_eq!(code_of(&mut lab, b), Some(Code::CREATED));
    assert_eq!(code_of(&mut lab, m), Some(Code::CREATED));
    assert_eq!(lab.em().writes_in_flight(), 0);
    // While a write is on its way, the entity's name is busy and uses of the others go on.
    let u = {
        let er = lab.uris(4..6, "s/t");
        put(&mut lab, "a", json!({ "er": er }))
    };
    lab.net.run_for(Duration::from_millis(50));
    assert_eq!(lab.get("em/b", &[], None).code, Code::CONTENT, "a use while a change waits for its write");
    lab.net.run_for(Duration::from_secs(60));
    assert_eq!(code_of(&mut lab, u), Some(Code::CHANGED));
    // The store holds exactly what the EM serves, and the multicast members joined.
    let snap = lab.store().load().unwrap();
    let mut names: Vec<&str> = snap.entities.iter().map(|e| e.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["a", "b", "m"]);
    for e in &snap.entities {
        assert_eq!(Some(e), lab.em().entity(&e.name), "{}: the store and the EM agree", e.name);
        assert!(!e.pending, "{}", e.name);
    }
    let m = snap.entities.iter().find(|e| e.name == "m").unwrap();
    assert_eq!(m.joined, vec![true; 3]);
    assert!(snap.journal.is_empty(), "every journal entry settled: {:?}", snap.journal);
    for i in 0..3 {
        assert_eq!(lab.mc(i).groups().len(), 1, "member {i} is in m's group");
    }
}

/// A gateway that died with `writes` in flight restarts from what its store holds.
fn restart(old: &Lab, devices: usize) -> Lab {
    let snap = old.store().load().unwrap();
    lab_with(LabConfig { devices, v6: true, store: Some(Box::new(MemStore::from(snap))), ..LabConfig::default() })
}

fn same_entity(stored: &StoredEntity, expected: &StoredEntity) -> bool {
    stored.profile == expected.profile && stored.group == expected.group && stored.joined == expected.joined
}

#[test]
fn a_crash_between_a_write_and_its_completion_leaves_the_old_or_the_new_entity() {
    for lose in [false, true] {
        let mut lab = lab_with(LabConfig { devices: 4, v6: true, ..LabConfig::default() });
        let er = lab.uris(0..2, "s/t");
        assert_eq!(lab.create("e", json!({ "er": er, "eo": ["avg"] })).code, Code::CREATED);
        let old = lab.em().entity("e").unwrap().clone();
        let mut runner = Slow::new(lab.store.clone());
        runner.hold = !lose;
        runner.lose = lose;
        lab.net.node(lab.gw).set_effect_runner(Box::new(runner));
        let u = {
            let er = lab.uris(1..4, "s/t");
            put(&mut lab, "e", json!({ "er": er, "eo": ["max", "min"] }))
        };
        lab.net.run_for(Duration::from_secs(30));
        assert_eq!(code_of(&mut lab, u), None, "lose={lose}: no answer without the completion");
        // The crash: the process is gone; the store holds what it applied.
        let mut lab2 = restart(&lab, 4);
        let stored = lab2.store().load().unwrap().entities;
        assert_eq!(stored.len(), 1);
        let now = lab2.em().entity("e").unwrap().clone();
        assert_eq!(stored[0], now, "the restarted EM serves what is stored");
        let mut new = old.clone();
        new.profile.er = lab.uris(1..4, "s/t");
        new.profile.eo = vec![corral_group::Op::Max, corral_group::Op::Min];
        new.joined = vec![false; 3];
        if lose {
            assert!(same_entity(&stored[0], &old), "a write that never reached the disk: the old entity");
        } else {
            assert!(same_entity(&stored[0], &new), "a write applied but never reported: the new entity whole");
        }
        assert_eq!(lab2.get("em/e", &[], None).code, Code::CONTENT, "lose={lose}");
    }
}

#[test]
fn a_multicast_creation_cut_by_a_crash_before_its_first_write_completes_is_undone() {
    // The cursor and the pending record are one write: after a crash both are there (and the creation is
    // undone at start-up) or neither is (and nothing happened).
    for lose in [false, true] {
        let mut lab = lab_with(LabConfig { devices: 3, v6: true, ..LabConfig::default() });
        let mut runner = Slow::new(lab.store.clone());
        runner.hold = !lose;
        runner.lose = lose;
        lab.net.node(lab.gw).set_effect_runner(Box::new(runner));
        let m = {
            let er = lab.uris(0..3, "s/t");
            put(&mut lab, "m", json!({ "er": er, "ect": "multicast" }))
        };
        lab.net.run_for(Duration::from_secs(30));
        assert_eq!(code_of(&mut lab, m), None);
        for i in 0..3 {
            assert!(lab.mc(i).groups().is_empty(), "lose={lose}: nobody joined before the write was done");
        }
        let snap: Snapshot = lab.store().load().unwrap();
        match lose {
            true => assert_eq!(snap, Snapshot::default(), "nothing reached the disk"),
            false => {
                assert_eq!(snap.entities.len(), 1);
                assert!(snap.entities[0].pending, "the pending record");
                assert_eq!(snap.counters.get("pool.v6"), Some(&1), "with its cursor: {:?}", snap.counters);
            }
        }
        let mut lab2 = restart(&lab, 3);
        lab2.net.run_for(Duration::from_secs(30));
        assert!(lab2.em().entity_names().is_empty(), "lose={lose}");
        assert!(lab2.store().load().unwrap().entities.is_empty(), "lose={lose}: the pending record is gone");
        let er = lab2.uris(0..3, "s/t");
        assert_eq!(lab2.create("m", json!({ "er": er, "ect": "multicast" })).code, Code::CREATED);
    }
}
