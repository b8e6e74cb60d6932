//! A blind spoofer on a real network (root only): two network namespaces joined by a veth pair — `g` for
//! the servers (10.77.0.1/24 and any extra addresses), `c` for the clients and the attacker (10.77.0.2/24).
//! The attacker sends UDP datagrams with any source address from a raw socket in `c` (IP_HDRINCL), so the
//! answers go to that address, which nobody in `c` holds unless a test gives it to a real client: the
//! attacker never sees them, as on a real network.
//!
//! The raw socket must be opened inside `c`, so the test binary re-executes itself there (`ip netns exec`)
//! running its `spoof_child` test, which calls [`child`] with the datagrams in an environment variable.
#![allow(dead_code)]

use super::common::{run, stderr};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::Command;
use std::time::Duration;

const SPOOF_ENV: &str = "CORRAL_SPOOF_DATAGRAMS";

/// The two namespaces; deleted on drop.
pub struct Pair {
    pub g: String,
    pub c: String,
}

pub const SERVER: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
pub const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);

impl Pair {
    /// `None` (after printing `skipped: …`) when namespaces cannot be made (not root, no iproute2).
    pub fn new(tag: &str, extra_server_addrs: &[Ipv4Addr]) -> Option<Pair> {
        let pid = std::process::id();
        let pair = Pair { g: format!("corral-{tag}-g-{pid}"), c: format!("corral-{tag}-c-{pid}") };
        let made = ["add", "add"]
            .iter()
            .zip([&pair.g, &pair.c])
            .all(|(verb, ns)| Command::new("ip").args(["netns", verb, ns]).output().is_ok_and(|o| o.status.success()));
        if !made {
            println!("skipped: cannot create network namespaces (needs root and iproute2)");
            return None;
        }
        let mut steps: Vec<Vec<String>> = vec![
            vec!["-n", &pair.g, "link", "set", "lo", "up"],
            vec!["-n", &pair.c, "link", "set", "lo", "up"],
            vec!["-n", &pair.g, "link", "add", "veth0", "type", "veth", "peer", "name", "veth1", "netns", &pair.c],
            vec!["-n", &pair.g, "addr", "add", "10.77.0.1/24", "dev", "veth0"],
            vec!["-n", &pair.c, "addr", "add", "10.77.0.2/24", "dev", "veth1"],
            vec!["-n", &pair.g, "link", "set", "veth0", "up"],
            vec!["-n", &pair.c, "link", "set", "veth1", "up"],
        ]
        .into_iter()
        .map(|v| v.into_iter().map(String::from).collect())
        .collect();
        for a in extra_server_addrs {
            steps.push(["-n", &pair.g, "addr", "add", &format!("{a}/32"), "dev", "veth0"].map(String::from).to_vec());
        }
        for args in steps {
            let o = run(Command::new("ip").args(&args), Duration::from_secs(10));
            assert!(o.status.success(), "ip {args:?}: {}", stderr(&o));
        }
        Some(pair)
    }

    /// `program` run in the servers' namespace (`ip netns exec` execs it: the child's pid is the program's).
    pub fn in_g(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.g, program]);
        c
    }

    /// `program` run in the clients' namespace.
    pub fn in_c(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.c, program]);
        c
    }

    /// Gives the clients' side the address `addr` instead of 10.77.0.2: a real client there (the one a
    /// spoofer pretended to be).
    pub fn client_becomes(&self, addr: Ipv4Addr) {
        for args in [
            vec!["-n".to_string(), self.c.clone(), "addr".into(), "flush".into(), "dev".into(), "veth1".into()],
            vec![
                "-n".to_string(),
                self.c.clone(),
                "addr".into(),
                "add".into(),
                format!("{addr}/24"),
                "dev".into(),
                "veth1".into(),
            ],
        ] {
            let o = run(Command::new("ip").args(&args), Duration::from_secs(10));
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
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.c]).arg(exe).args(["--exact", "spoof_child", "--nocapture"]);
        cmd.env(SPOOF_ENV, spec.join("\n"));
        let o = run(&mut cmd, Duration::from_secs(30));
        assert!(o.status.success(), "the spoofer failed: {}", stderr(&o));
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for ns in [&self.g, &self.c] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

/// The spoofer's work inside the clients' namespace; a no-op unless the environment variable is set.
pub fn child() {
    let Ok(spec) = std::env::var(SPOOF_ENV) else { return };
    use socket2::{Domain, Protocol, SockAddr, Socket, Type};
    // IPPROTO_RAW: we write the IP header ourselves (IP_HDRINCL); the kernel fills in its checksum and
    // total length.
    let raw = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::from(255))).expect("a raw socket (root)");
    for line in spec.lines().filter(|l| !l.is_empty()) {
        let mut parts = line.split(' ');
        let from: SocketAddrV4 = parts.next().unwrap().parse().unwrap();
        let to: SocketAddrV4 = parts.next().unwrap().parse().unwrap();
        let hex = parts.next().unwrap_or("");
        let payload: Vec<u8> =
            (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
        let packet = ipv4_udp(from, to, &payload);
        raw.send_to(&packet, &SockAddr::from(std::net::SocketAddr::V4(to))).expect("send a spoofed datagram");
    }
}

/// An IPv4 header and a UDP header (checksum 0: none, RFC 768) around `payload`.
fn ipv4_udp(from: SocketAddrV4, to: SocketAddrV4, payload: &[u8]) -> Vec<u8> {
    let udp_len = (8 + payload.len()) as u16;
    let total = 20 + udp_len;
    let mut p = vec![0x45, 0, (total >> 8) as u8, total as u8, 0, 0, 0x40, 0, 64, 17, 0, 0];
    p.extend_from_slice(&from.ip().octets());
    p.extend_from_slice(&to.ip().octets());
    p.extend_from_slice(&from.port().to_be_bytes());
    p.extend_from_slice(&to.port().to_be_bytes());
    p.extend_from_slice(&udp_len.to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(payload);
    p
}
