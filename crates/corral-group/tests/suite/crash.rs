//! The store survives `kill -9`: a child process (this test binary, re-executed) creates entities through
//! the Entity Manager on a SQLite file and is SIGKILLed at an arbitrary point; the parent reopens the file
//! and finds every entity the child reported created, and the allocator hands out a fresh address.

use crate::common;

use common::*;
use corral_group::EmConfig;
use corral_group::Store;
use corral_proto::wire::Code;
use corral_store::SqliteStore;
use serde_json::json;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const CHILD_ENV: &str = "CORRAL_GROUP_CRASH_CHILD_DB";

/// The child's work. A no-op unless re-executed by the parent test with the database path set.
#[test]
fn crash_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else { return };
    let store = SqliteStore::open(&path).expect("child opens the database");
    let mut lab = lab_with(LabConfig {
        devices: 3,
        v6: true,
        slots: vec![usize::MAX; 3],
        store: Some(Box::new(store)),
        // Creations as fast as the net allows: this test is about the store, not the allocation rate.
        em: EmConfig { allocation_interval: corral_proto::Duration::ZERO, ..EmConfig::default() },
        ..LabConfig::default()
    });
    let er = lab.uris(0..3, "s/t");
    for i in 0.. {
        let (name, ect) = if i % 2 == 0 { (format!("m{i}"), "multicast") } else { (format!("u{i}"), "unicast") };
        let r = lab.create(&name, json!({ "er": er, "ect": ect, "eo": "avg" }));
        assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
        let doc = json(&r.payload);
        let uri = doc["profile"]["mcstURI"].as_str().unwrap_or("-").to_string();
        // One line per committed entity; println! flushes at the newline only when stdout is a terminal.
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        writeln!(out, "CREATED {name} {uri}").unwrap();
        out.flush().unwrap();
    }
}

/// A `CREATED <name> <uri>` line of the child. libtest may have written `test crash_child ... ` on the
/// same line first (its progress line ends only when the test does).
fn created(line: &str) -> Option<(String, String)> {
    let rest = &line[line.find("CREATED ")? + "CREATED ".len()..];
    let (name, uri) = rest.split_once(' ')?;
    Some((name.to_string(), uri.to_string()))
}

#[test]
fn entities_and_allocator_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("em.db");
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args(["--exact", "crash::crash_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the child");
    let mut reported = BTreeMap::new();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    while reported.len() < 40 {
        let line = lines.next().expect("child ended early").unwrap();
        if let Some((name, uri)) = created(&line) {
            reported.insert(name, uri);
        }
    }
    child.kill().expect("SIGKILL the child"); // std: SIGKILL on Unix
    let status = child.wait().unwrap();
    assert!(!status.success(), "the child was killed, not finished");
    // The child kept creating while the 40th line was read and the kill was on its way: what it reported
    // meanwhile waits in the pipe and counts as reported too.
    for line in lines.map_while(Result::ok) {
        if let Some((name, uri)) = created(&line) {
            reported.insert(name, uri);
        }
    }

    let store = SqliteStore::open(&path).expect("reopen after kill -9");
    let snap = store.load().unwrap();
    for (name, uri) in &reported {
        let e = snap.entities.iter().find(|e| &e.name == name).unwrap_or_else(|| panic!("{name} lost"));
        assert_eq!(e.profile.er.len(), 3);
        if uri != "-" {
            assert_eq!(e.profile.mcst_uri.as_deref(), Some(uri.as_str()), "{name}");
            assert_eq!(e.joined, vec![true; 3], "{name}: memberships");
        }
    }
    // At most one more entity than reported (committed, killed before printing).
    let extra: Vec<(&str, bool)> = snap
        .entities
        .iter()
        .filter(|e| !reported.contains_key(&e.name))
        .map(|e| (e.name.as_str(), e.pending))
        .collect();
    assert!(extra.len() <= 1, "unreported entities {extra:?} ({} reported)", reported.len());
    let used: Vec<String> = snap.entities.iter().filter_map(|e| e.profile.mcst_uri.clone()).collect();

    // A restarted gateway serves the entities and never reuses an address, even one allocated by a
    // creation the kill interrupted.
    let mut lab = lab_with(LabConfig { devices: 3, v6: true, store: Some(Box::new(store)), ..LabConfig::default() });
    lab.net.run_for(corral_proto::Duration::from_secs(10));
    assert!(
        lab.store().load().unwrap().entities.iter().all(|e| !e.pending),
        "an interrupted creation is undone at start-up"
    );
    let name = reported.keys().find(|n| n.starts_with('u')).unwrap().clone();
    let r = lab.get(&format!("em/{name}"), &[], None);
    assert_eq!(r.code, Code::CONTENT, "{}", r.payload_text());
    let er = lab.uris(0..3, "s/t");
    let r = lab.create("fresh", json!({ "er": er, "ect": "multicast" }));
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
    let fresh = json(&r.payload)["profile"]["mcstURI"].as_str().unwrap().to_string();
    assert!(!used.contains(&fresh), "{fresh} reused");
    let seq =
        |u: &str| u16::from_str_radix(u.trim_start_matches("coap://[ff1e::89:").trim_end_matches("]/s/t"), 16).unwrap();
    let max_used = used.iter().map(|u| seq(u)).max().unwrap();
    assert!(seq(&fresh) > max_used, "{fresh} after {max_used:x}: the sequence continues");
}
