//! A blind spoofer on a real network (root only): two network namespaces joined by a veth pair — `g` for
//! the servers (10.77.0.1/24 and any extra addresses), `c` for the clients and the attacker (10.77.0.2/24).
//! The attacker sends UDP datagrams with any source address from a raw socket in `c` (IP_HDRINCL), so the
//! answers go to that address, which nobody in `c` holds unless a test gives it to a real client: the
//! attacker never sees them, as on a real network.
//!
//! The raw socket (common's [`Spoofer`]) must be opened inside `c`, so the test binary re-executes itself
//! there (`ip netns exec`) running its `spoof::spoof_child` test, which calls [`child`] with the datagrams in an
//! environment variable.
#![allow(dead_code)]

use super::common::{netns_pair, run, stderr, Netns, Spoofer};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::Command;
use std::time::Duration;

const SPOOF_ENV: &str = "CORRAL_SPOOF_DATAGRAMS";

/// The two namespaces (common's [`netns_pair`] on 10.77.0.0/24); deleted on drop.
pub struct Pair {
    pub g: Netns,
    pub c: Netns,
}

pub const SERVER: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
pub const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);

impl Pair {
    /// `None` (after printing `skipped: …`) when namespaces cannot be made (not root, no iproute2).
    pub fn new(tag: &str, extra_server_addrs: &[Ipv4Addr]) -> Option<Pair> {
        let (g, c) = netns_pair(tag, 77, &[])?;
        for a in extra_server_addrs {
            let args = ["-n", &g.name, "addr", "add", &format!("{a}/32"), "dev", "v0"];
            let o = run(Command::new("ip").args(args), Duration::from_secs(10));
            assert!(o.status.success(), "ip {args:?}: {}", stderr(&o));
        }
        Some(Pair { g, c })
    }

    /// `program` run in the servers' namespace (`ip netns exec` execs it: the child's pid is the program's).
    pub fn in_g(&self, program: &str) -> Command {
        self.g.command(program)
    }

    /// `program` run in the clients' namespace.
    pub fn in_c(&self, program: &str) -> Command {
        self.c.command(program)
    }

    /// Gives the clients' side the address `addr` instead of 10.77.0.2: a real client there (the one a
    /// spoofer pretended to be).
    pub fn client_becomes(&self, addr: Ipv4Addr) {
        let with_prefix = format!("{addr}/24");
        for args in [vec!["addr", "flush", "dev", "v1"], vec!["addr", "add", &with_prefix, "dev", "v1"]] {
            let o = run(Command::new("ip").arg("-n").arg(&self.c.name).args(&args), Duration::from_secs(10));
            assert!(o.status.success(), "ip {args:?}: {}", stderr(&o));
        }
    }

    /// Sends each `(from, to, payload)` as one UDP datagram with that source address, from a raw socket in
    /// the clients' namespace. Returns once all are sent.
    pub fn spoof(&self, datagrams: &[(SocketAddrV4, SocketAddrV4, Vec<u8>)]) {
        let spec: Vec<String> = datagrams
            .iter()
            .map(|(f, t, p)| format!("{f} {t} {}", p.iter().map(|b| format!("{b:02x}")).collect::<String>()))
            .collect();
        let exe = std::env::current_exe().expect("the test binary");
        let mut cmd = self.c.command(exe.to_str().expect("a UTF-8 path"));
        cmd.args(["--exact", "spoof::spoof_child", "--nocapture"]);
        cmd.env(SPOOF_ENV, spec.join("\n"));
        let o = run(&mut cmd, Duration::from_secs(30));
        assert!(o.status.success(), "the spoofer failed: {}", stderr(&o));
    }
}

/// The spoofer's half of every namespace test: a no-op unless re-executed by [`Pair::spoof`], which runs
/// this binary again inside the clients' namespace with only this test.
#[test]
fn spoof_child() {
    child();
}

/// The spoofer's work inside the clients' namespace; a no-op unless the environment variable is set.
fn child() {
    let Ok(spec) = std::env::var(SPOOF_ENV) else { return };
    let mut spoofer = Spoofer::new().expect("a raw socket (root)");
    for line in spec.lines().filter(|l| !l.is_empty()) {
        let mut parts = line.split(' ');
        let from: SocketAddrV4 = parts.next().unwrap().parse().unwrap();
        let to: SocketAddrV4 = parts.next().unwrap().parse().unwrap();
        let hex = parts.next().unwrap_or("");
        let payload: Vec<u8> =
            (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
        spoofer.send(from, to, &payload);
    }
}
