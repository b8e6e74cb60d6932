//! Group members and a group-forwarding proxy for the tests of `corral proxy --allow-group`
//! (draft-ietf-core-groupcomm-proxy): `proxy_group.rs`, `proxy_group_cache.rs`.

use super::*;
use std::path::PathBuf;
use std::process::Command;

/// Three devices from `first` (ADDR, port 0: one free port for all) joined to `group`, with a request log.
pub struct Members {
    _proc: Proc,
    pub addrs: Vec<String>,
    pub port: u16,
    group: [u8; 4],
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Members {
    pub fn start(first: &str, group: [u8; 4]) -> Members {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("requests.jsonl");
        let (proc, j) = spawn_json(Command::new(CORRAL).args([
            "device",
            "--bind",
            &format!("{first}:0"),
            "--count",
            "3",
            "--leisure",
            "0.3",
            "--request-log",
            log.to_str().unwrap(),
            "--json",
        ]));
        let addrs: Vec<String> =
            j["devices"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect();
        let port = addrs[0].rsplit_once(':').unwrap().1.parse().unwrap();
        let coap = Coap::new();
        for a in &addrs {
            let r = coap.request(corral_tokio::Code::POST, &format!("coap://{a}/mc?act=add"), None, Some(&group));
            assert_eq!(r.code, corral_tokio::Code::CHANGED, "{a} joins: {}", r.payload_text());
        }
        Members { _proc: proc, addrs, port, group, log, _dir: dir }
    }

    /// The requests the devices received on the group address: (device, from, mid).
    pub fn group_requests(&self) -> Vec<(String, String, u64)> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|l| !l["dst"].is_null())
            .map(|l| {
                let s = |k: &str| l[k].as_str().unwrap().to_string();
                (s("device"), s("from"), l["mid"].as_u64().unwrap())
            })
            .collect()
    }

    /// The member at `addr` leaves the group (`/mc?act=del`).
    pub fn leave(&self, addr: &str) {
        let coap = Coap::new();
        let r = coap.request(corral_tokio::Code::POST, &format!("coap://{addr}/mc?act=del"), None, Some(&self.group));
        assert_eq!(r.code, corral_tokio::Code::DELETED, "{addr} leaves: {}", r.payload_text());
    }
}

/// `corral proxy` on a free port with `extra` arguments: the process and its URI.
pub fn proxy(extra: &[&str]) -> (Proc, String) {
    let mut args = vec!["proxy", "--bind", "127.0.0.1:0", "--json"];
    args.extend_from_slice(extra);
    let (p, j) = spawn_json(Command::new(CORRAL).args(&args));
    (p, j["proxy_uri"].as_str().expect("proxy_uri in the summary").to_string())
}

/// A command's exit status and output, for assertion messages.
pub fn out(o: &std::process::Output) -> String {
    format!("status {:?}\nstdout: {}\nstderr: {}", o.status.code(), stdout(o), stderr(o))
}

/// `corral get -P proxy uri extra…`.
pub fn get_via(proxy: &str, uri: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["get", "-P", proxy, uri];
    args.extend_from_slice(extra);
    corral(&args)
}
