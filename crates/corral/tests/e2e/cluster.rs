//! Gateways and directories on a shared PostgreSQL store (issue 45): `--store postgres://…`, against a
//! throwaway server of the test's own (`corral_store::testing`, a Unix socket in a temporary directory).
//! A machine without PostgreSQL skips with a note, unless `CORRAL_INTEROP=1` (the test command).
//!
//! Devices run in a process of their own (`corral device`), so that they outlive a gateway's `kill -9`.
//! Each test has its own loopback subnet (127.0.45.x, 127.0.46.x, …).

use crate::common;
use common::*;
use corral_store::testing::{for_test, TempPostgres};
use serde_json::Value as Json;
use std::net::SocketAddr;
use std::process::Command;

fn addrs(j: &Json) -> Vec<SocketAddr> {
    j.as_array().unwrap().iter().map(|a| a.as_str().unwrap().parse().unwrap()).collect()
}

/// `corral device --count n` on `first` (port 0: a free one): the process and the devices' addresses.
fn devices(first: &str, n: usize) -> (Proc, Vec<SocketAddr>) {
    let (p, j) =
        spawn_json(Command::new(CORRAL).args(["device", "--bind", first, "--count", &n.to_string(), "--json"]));
    (p, addrs(&j["devices"]))
}

/// `corral gateway --store <pg>` on `bind`, members at `port`: the process and its summary.
fn gateway(pg: &TempPostgres, bind: &str, port: u16) -> (Proc, Json) {
    let port = port.to_string();
    spawn_json(Command::new(CORRAL).args([
        "gateway",
        "--store",
        &pg.url(),
        "--bind",
        bind,
        "--member-port",
        &port,
        "--mcast-port",
        &port,
        "--leisure",
        "0.3",
        "--json",
    ]))
}

fn entity(uri: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["entity"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--gateway", uri]);
    corral(&all)
}

fn kill_9(p: &mut Proc) {
    let pid = p.child.id().to_string();
    assert!(Command::new("kill").args(["-KILL", &pid]).status().unwrap().success());
    let _ = p.child.wait();
}

#[test]
fn an_entity_created_through_a_gateway_killed_with_9_is_served_by_the_next_on_the_same_database() {
    let Some(pg) = for_test() else { return };
    let (_devices, devs) = devices("127.0.45.1:0", 3);
    let port = devs[0].port();
    let (mut gw, j) = gateway(&pg, "127.0.45.100:0", port);
    // The summary names the store by URL, with no data directory of its own.
    let store = j["data"].as_str().unwrap();
    assert!(store.starts_with("postgresql://postgres@/corral?host="), "{store}");
    let uri = j["uri"].as_str().unwrap().to_string();
    let mut args = vec!["create", "room"];
    let members: Vec<String> = devs.iter().map(|d| format!("coap://{d}/s/t")).collect();
    args.extend(members.iter().map(String::as_str));
    args.extend(["--eo", "avg,lst", "--enr", "2"]);
    let o = entity(&uri, &args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    kill_9(&mut gw);

    // Another gateway (another address) on the same database: the entity is there and answers.
    let (_gw2, j) = gateway(&pg, "127.0.45.101:0", port);
    assert_eq!(j["entities"], serde_json::json!(["room"]));
    let uri = j["uri"].as_str().unwrap().to_string();
    let o = entity(&uri, &["show", "room", "--json"]);
    let p: Json = serde_json::from_slice(&o.stdout).expect("show --json");
    assert_eq!((p["profile"]["enr"].as_u64(), p["profile"]["er"].as_array().map(Vec::len)), (Some(2), Some(3)));
    let o = entity(&uri, &["use", "room"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).trim().parse::<f64>().is_ok(), "{}", stdout(&o));
}

#[test]
fn a_store_that_cannot_be_used_at_start_exits_9_naming_it_without_the_password() {
    // Nothing listens on this socket directory: the reason is the connection's.
    let dir = tempfile::tempdir().unwrap();
    let url = format!("host={} port=7 user=corral password=s3cret dbname=corral", dir.path().display());
    for verb in [&["gateway", "--bind", "127.0.46.1:0"][..], &["rd", "--bind", "127.0.46.1:0"][..]] {
        let o = corral(&[verb, &["--store", &url]].concat());
        assert_eq!(o.status.code(), Some(9), "{verb:?}: {}", stderr(&o));
        let err = stderr(&o);
        let shown = format!("postgresql://corral@/corral?host={}&port=7", dir.path().display());
        assert!(err.contains(&shown), "{verb:?} names the store: {err}");
        assert!(!err.contains("s3cret"), "{verb:?} shows no password: {err}");
    }
    // A password file is read; a missing one is named (status 1, as any unreadable file).
    let o = corral(&["gateway", "--store", "postgres://", "--store-password-file", "/nonexistent/pw"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("/nonexistent/pw"), "{}", stderr(&o));

    // A schema newer than this corral's: refused with both versions, nothing touched.
    let Some(pg) = for_test() else { return };
    let (mut gw, _) = gateway(&pg, "127.0.46.2:0", 5683);
    kill_9(&mut gw);
    pg.psql("UPDATE corral_schema SET version = 99 WHERE component = 'em'").unwrap();
    let o = corral(&["gateway", "--bind", "127.0.46.2:0", "--store", &pg.url()]);
    assert_eq!(o.status.code(), Some(9), "{}", stderr(&o));
    assert!(stderr(&o).contains("version 99 is newer than this corral (2)"), "{}", stderr(&o));
}

#[test]
fn a_registration_made_through_one_directory_is_restored_by_the_next_on_the_same_database() {
    let Some(pg) = for_test() else { return };
    let start =
        || spawn_json(Command::new(CORRAL).args(["rd", "--bind", "127.0.47.1:0", "--store", &pg.url(), "--json"]));
    let (mut rd, j) = start();
    assert_eq!(j["registrations"], 0);
    let base = j["uri"].as_str().unwrap().to_string();
    let o = corral(&["post", &format!("{base}/rd?ep=node1&lt=600"), "-t", "link", "-e", "</t>;rt=temperature"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    kill_9(&mut rd);
    let (_rd2, j) = start();
    assert_eq!(j["registrations"], 1, "{j}");
    let base = j["uri"].as_str().unwrap().to_string();
    let o = corral(&["get", &format!("{base}/rd-lookup/res?rt=temperature")]);
    assert!(stdout(&o).contains("/t>"), "{}{}", stdout(&o), stderr(&o));
}

/// Asks `f` every 100 ms until it says yes, for at most 20 s (a deadline, not a measurement): whether it did.
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    false
}

/// Entity `name`'s profile through the gateway at `uri`, or `None` if it has none.
fn profile(uri: &str, name: &str) -> Option<Json> {
    let o = entity(uri, &["show", name, "--json"]);
    o.status.success().then(|| serde_json::from_slice(&o.stdout).expect("show --json"))
}

#[test]
fn three_gateways_on_one_database_serve_the_same_entities_and_a_name_is_created_once() {
    let Some(pg) = for_test() else { return };
    let (_devices, devs) = devices("127.0.48.10:0", 3);
    let port = devs[0].port();
    let gws: Vec<(Proc, Json)> = (1..=3).map(|i| gateway(&pg, &format!("127.0.48.{i}:0"), port)).collect();
    let uris: Vec<String> = gws.iter().map(|(_, j)| j["uri"].as_str().unwrap().to_string()).collect();
    let members: Vec<String> = devs.iter().map(|d| format!("coap://{d}/s/t")).collect();
    let create = |uri: &str, name: &str| {
        let mut args = vec!["create", name];
        args.extend(members.iter().map(String::as_str));
        args.extend(["--eo", "avg"]);
        entity(uri, &args)
    };

    // Created through the first: used through the other two.
    let o = create(&uris[0], "room");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for uri in &uris[1..] {
        assert!(eventually(|| profile(uri, "room").is_some()), "{uri} never saw the entity");
        let o = entity(uri, &["use", "room"]);
        assert_eq!(o.status.code(), Some(0), "{uri}: {}", stderr(&o));
        assert!(stdout(&o).trim().parse::<f64>().is_ok(), "{}", stdout(&o));
    }
    // Updated through the second: seen by the others.
    let o = entity(&uris[1], &["update", "room", "--enr", "1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for uri in [&uris[0], &uris[2]] {
        assert!(
            eventually(|| profile(uri, "room").is_some_and(|p| p["profile"]["enr"] == 1)),
            "{uri} never saw the update"
        );
    }
    // Deleted through the third: gone everywhere.
    let o = entity(&uris[2], &["delete", "room"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for uri in &uris[..2] {
        assert!(eventually(|| profile(uri, "room").is_none()), "{uri} still has the deleted entity");
        let o = entity(uri, &["use", "room"]);
        assert_eq!(o.status.code(), Some(4), "{uri}: {}", stderr(&o));
    }

    // One name through two gateways at once: one 2.01, one 4.12 (never 5.00), one entity everywhere.
    for round in 0..3 {
        let name = format!("twin{round}");
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| create(&uris[0], &name));
            let b = s.spawn(|| create(&uris[1], &name));
            (a.join().unwrap(), b.join().unwrap())
        });
        let mut codes = [a.status.code(), b.status.code()];
        codes.sort();
        assert_eq!(codes, [Some(0), Some(4)], "{}\n{}", stderr(&a), stderr(&b));
        let loser = if a.status.success() { &b } else { &a };
        assert!(stderr(loser).contains("4.12"), "{}", stderr(loser));
        for uri in &uris {
            assert!(eventually(|| profile(uri, &name).is_some()), "{uri} never saw {name}");
        }
    }
    let listed = |uri: &str| stdout(&entity(uri, &["list"]));
    assert!(eventually(|| listed(&uris[0]) == listed(&uris[1]) && listed(&uris[1]) == listed(&uris[2])));
}
