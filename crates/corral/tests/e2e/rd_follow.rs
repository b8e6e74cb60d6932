//! Entities that follow a Resource Directory (issue 32) on real sockets with the real binary: `corral rd`
//! (or `corral gateway --rd`), a gateway, an entity created `--from-rd`, and `corral device --rd` devices
//! that come, leave cleanly, or are killed and expire; an observer of the entity is told of each change; a
//! restarted gateway follows again.

use crate::common;
use common::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn corral_rd(data: &std::path::Path) -> Proc {
    spawn_with_port(
        Command::new(CORRAL).args(["rd", "--bind", "127.0.0.1:0", "--data", data.to_str().unwrap()]),
        banner_port,
    )
}

/// `corral gateway` on loopback with its data in `data`, members allowed on `member_port`.
fn gateway(data: &std::path::Path, member_port: u16, extra: &[&str]) -> (Proc, String) {
    let port = member_port.to_string();
    let mut args = vec!["gateway", "--bind", "127.0.0.1:0", "--member-port", &port, "--json"];
    args.extend(["--data", data.to_str().unwrap()]);
    args.extend_from_slice(extra);
    let (p, j) = spawn_json(Command::new(CORRAL).args(&args));
    let uri = j["uri"].as_str().expect("the gateway's URI").to_string();
    (p, uri)
}

/// `corral device --rd RD` at `bind` (lifetime 60 s).
fn device(bind: &str, rd: &str) -> Proc {
    device_for(bind, rd, 60)
}

/// `corral device --rd RD` at `bind` registering for `lifetime` seconds.
fn device_for(bind: &str, rd: &str, lifetime: u32) -> Proc {
    let lt = lifetime.to_string();
    let (p, _) =
        spawn_json(Command::new(CORRAL).args(["device", "--bind", bind, "--rd", rd, "--rd-lifetime", &lt, "--json"]));
    p
}

/// The entity's profile as `corral entity show --json` prints it.
fn show(gw: &str, name: &str) -> serde_json::Value {
    let o = corral(&["entity", "-g", gw, "show", name, "--json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    serde_json::from_str::<serde_json::Value>(&stdout(&o)).expect("JSON")["profile"].clone()
}

fn members(gw: &str, name: &str) -> Vec<String> {
    let mut er: Vec<String> =
        show(gw, name)["er"].as_array().unwrap().iter().map(|m| m.as_str().unwrap().to_string()).collect();
    er.sort();
    er
}

/// Polls `entity show --json` (every 0.5 s, at most `limit`) until the members are `want`.
fn wait_members(gw: &str, name: &str, want: &[String], limit: Duration) -> Vec<String> {
    let start = Instant::now();
    loop {
        let er = members(gw, name);
        if er == want || start.elapsed() > limit {
            return er;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// `corral get -s` running in the background: every line it prints.
struct Observer {
    child: std::process::Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Observer {
    fn start(uri: &str) -> Observer {
        let mut child = Command::new(CORRAL)
            .args(["get", uri, "-s", "600"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("corral get -s");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(l.trim().to_string());
            }
        });
        Observer { child, lines }
    }

    /// Waits (at most 20 s) until the observer has printed `value` after its first `from` lines; returns
    /// the index after that line.
    fn wait_for(&self, value: &str, from: usize) -> usize {
        let start = Instant::now();
        loop {
            let lines = self.lines.lock().unwrap().clone();
            if let Some(i) = lines.iter().skip(from).position(|l| l == value) {
                return from + i + 1;
            }
            assert!(start.elapsed() < Duration::from_secs(20), "the observer was not told {value}: {lines:?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn kill(p: &Proc, signal: &str) {
    let pid = p.child.id().to_string();
    assert!(Command::new("kill").args([signal, &pid]).status().unwrap().success());
}

#[test]
fn an_entity_follows_devices_that_register_and_leave_and_its_observer_is_told_even_after_a_restart() {
    let (rd_data, gw_data) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let rd = corral_rd(rd_data.path());
    let rd_uri = format!("coap://127.0.0.1:{}", rd.port);
    let port = free_udp_port();
    let (gw, gw_uri) = gateway(gw_data.path(), port, &[]);
    let o = corral(&[
        "entity",
        "-g",
        &gw_uri,
        "create",
        "temps",
        "--from-rd",
        "rt=temperature",
        "--rd",
        &rd_uri,
        "--eo",
        "count",
    ]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("members from the directory (rt=temperature)"), "{}", stdout(&o));
    let p = show(&gw_uri, "temps");
    assert_eq!((p["fromRd"].as_str(), p["rd"].as_str()), (Some("rt=temperature"), Some(rd_uri.as_str())));
    assert_eq!(p["er"].as_array().unwrap().len(), 0, "nobody registered yet");

    let member = |host: &str| format!("coap://{host}:{port}/s/t");
    let a = device(&format!("127.0.71.2:{port}"), &rd_uri);
    let er = wait_members(&gw_uri, "temps", &[member("127.0.71.2")], Duration::from_secs(20));
    assert_eq!(er, vec![member("127.0.71.2")], "a device that registers joins within one refresh");

    let observer = Observer::start(&format!("{gw_uri}/em/temps?eo=count"));
    let seen = observer.wait_for("1", 0);
    let b = device(&format!("127.0.71.3:{port}"), &rd_uri);
    let both = vec![member("127.0.71.2"), member("127.0.71.3")];
    assert_eq!(wait_members(&gw_uri, "temps", &both, Duration::from_secs(20)), both);
    let seen = observer.wait_for("2", seen);
    // A device that stops cleanly removes its registration: it leaves at once.
    kill(&b, "-TERM");
    assert_eq!(
        wait_members(&gw_uri, "temps", &[member("127.0.71.2")], Duration::from_secs(10)),
        [member("127.0.71.2")]
    );
    observer.wait_for("1", seen);
    drop(observer);

    // The gateway killed and restarted with the same data follows again.
    kill(&gw, "-KILL");
    drop(gw);
    let (_gw, gw_uri) = gateway(gw_data.path(), port, &[]);
    assert_eq!(members(&gw_uri, "temps"), vec![member("127.0.71.2")], "the members were stored");
    let _c = device(&format!("127.0.71.4:{port}"), &rd_uri);
    let want = vec![member("127.0.71.2"), member("127.0.71.4")];
    assert_eq!(wait_members(&gw_uri, "temps", &want, Duration::from_secs(20)), want, "followed after the restart");
    let o = corral(&["entity", "-g", &gw_uri, "show", "temps"]);
    assert!(stdout(&o).contains("fromRd   rt=temperature (lookup at coap://127.0.0.1:"), "{}", stdout(&o));
    assert!(stdout(&o).contains("members (from the directory):"), "{}", stdout(&o));
    drop(a);
}

#[test]
fn a_device_killed_without_a_farewell_leaves_when_its_registration_expires() {
    let (rd_data, gw_data) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let rd = corral_rd(rd_data.path());
    let rd_uri = format!("coap://127.0.0.1:{}", rd.port);
    let port = free_udp_port();
    let (_gw, gw_uri) = gateway(gw_data.path(), port, &[]);
    let o = corral(&["entity", "-g", &gw_uri, "create", "temps", "--from-rd", "rt=temperature", "--rd", &rd_uri]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    // A lifetime of 15 s: it refreshes at 90 % of it, and the directory forgets it 15 s after the last.
    let spawned = Instant::now();
    let dev = device_for(&format!("127.0.72.2:{port}"), &rd_uri, 15);
    let one = vec![format!("coap://127.0.72.2:{port}/s/t")];
    assert_eq!(wait_members(&gw_uri, "temps", &one, Duration::from_secs(20)), one);
    let killed = Instant::now();
    kill(&dev, "-KILL");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(members(&gw_uri, "temps"), one, "no farewell: still a member until the lifetime ends");
    let er = wait_members(&gw_uri, "temps", &[], Duration::from_secs(45));
    assert!(er.is_empty(), "gone once its 15 s lifetime ended: {er:?}");
    // It registered after it was spawned, so its lifetime (and that of any refresh) ends 15 s later at
    // the earliest.
    assert!(spawned.elapsed() >= Duration::from_secs(15), "not before its lifetime ended");
    assert!(killed.elapsed() >= Duration::from_secs(3));
}

#[test]
fn gateway_rd_serves_a_directory_that_its_testbed_registers_with_and_entities_follow() {
    let data = tempfile::tempdir().unwrap();
    let port = free_udp_port();
    let bind = format!("127.0.0.1:{port}");
    let (p, j) = spawn_json(Command::new(CORRAL).args([
        "gateway",
        "--bind",
        &bind,
        "--testbed",
        "2",
        "--testbed-from",
        "127.0.73.1:0",
        "--rd",
        "--json",
        "--data",
        data.path().to_str().unwrap(),
    ]));
    assert!(j["rd"].as_str().is_some_and(|db| db.ends_with("rd.db")), "{j}");
    let gw_uri = j["uri"].as_str().unwrap().to_string();
    let wkc = stdout(&corral(&["get", &format!("{gw_uri}/.well-known/core")]));
    assert!(wkc.contains("core.rd-lookup-res") && wkc.contains("</em>"), "the directory beside the EM: {wkc}");
    let o = corral(&["entity", "-g", &gw_uri, "create", "temps", "--from-rd", "rt=temperature"]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let want: Vec<String> =
        j["devices"].as_array().unwrap().iter().map(|d| format!("coap://{}/s/t", d.as_str().unwrap())).collect();
    let mut want = want;
    want.sort();
    assert_eq!(wait_members(&gw_uri, "temps", &want, Duration::from_secs(20)), want, "the testbed registered");
    let o = corral(&["entity", "-g", &gw_uri, "use", "temps", "--eo", "count"]);
    assert_eq!(stdout(&o).trim(), "2", "{}", stderr(&o));
    drop(p);
    let o = corral(&[
        "gateway",
        "--rd",
        "--workers",
        "2",
        "--bind",
        "127.0.0.1:0",
        "--data",
        data.path().to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
}
