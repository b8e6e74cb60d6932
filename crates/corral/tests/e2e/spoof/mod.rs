//! A blind spoofer on a real network (root only): two network namespaces joined by a veth pair — `g` for
//! the servers (10.77.0.1/24 and any extra addresses), `c` for the clients and the attacker (10.77.0.2/24).
//! The attacker sends UDP datagrams with any source address from a raw socket in `c` (IP_HDRINCL), so the
//! answers go to that address, which nobody in `c` holds unless a test gives it to a real client: the
//! attacker never sees them, as on a real network.
//!
//! The raw socket (common's [`Spoofer`]) must be opened inside `c`, so the test binary re-executes itself
//! there (`ip netns exec`) running its `spoof::spoof_child` test, which calls [`child`] with the datagrams in an
//! environment variable.
//!
//! A carpet ([`Pair::carpet`]) spoofs sources all over a network beyond the link (a /20 by default,
//! [`VICTIMS`]): the servers' side routes it to `c`, which takes every address of it as its own (an AnyIP
//! local route), so the victims' answers cross the wire and are counted, per victim address, by one
//! socket in `c` on the spoofed source port — it only receives, as a victim would.
#![allow(dead_code)]

use super::common::{netns_pair, run, stderr, stdout, Netns, Spoofer};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::process::Command;
use std::time::{Duration, Instant};

const SPOOF_ENV: &str = "CORRAL_SPOOF_DATAGRAMS";
const CARPET_ENV: &str = "CORRAL_SPOOF_CARPET";
const IN_C_ENV: &str = "CORRAL_TEST_IN_C";

/// Inside a test that [`Pair::run_in_c`] re-executed in the clients' namespace: the value it was given
/// (the servers' addresses, say). `None` in the test's first run.
pub fn in_c() -> Option<String> {
    std::env::var(IN_C_ENV).ok()
}

/// The victims' network of a carpet: 10.78.0.0/20, 4,096 addresses beyond the link.
pub const VICTIMS: (Ipv4Addr, u32) = (Ipv4Addr::new(10, 78, 0, 0), 20);

/// A carpet attack ([`Pair::carpet`]): `request` (a CoAP message with a 2-byte token; each copy gets its
/// own message ID and token) spoofed from every address of [`VICTIMS`] in turn, all from `port`, to `to`,
/// `rate` a second for `secs`; the victims' socket then counts for `linger` seconds more
/// (retransmissions, separate responses).
pub struct CarpetSpec {
    pub request: Vec<u8>,
    pub port: u16,
    pub to: SocketAddrV4,
    pub rate: u32,
    pub secs: f64,
    pub linger: f64,
}

/// What a carpet sent and what the victims received (CoAP bytes, UDP payloads).
#[derive(Debug, Default)]
pub struct Carpet {
    pub sent: usize,
    pub sent_bytes: usize,
    pub received: usize,
    pub received_bytes: usize,
    /// Per victim address: (bytes sent in its name, bytes it received).
    pub per_victim: HashMap<Ipv4Addr, (usize, usize)>,
    /// From the first spoofed datagram to the end of counting.
    pub secs: f64,
}

impl Carpet {
    /// Bytes received over bytes sent, over all victims.
    pub fn factor(&self) -> f64 {
        self.received_bytes as f64 / self.sent_bytes.max(1) as f64
    }

    /// The victim that received the most, and its (sent, received).
    pub fn worst_victim(&self) -> Option<(Ipv4Addr, usize, usize)> {
        self.per_victim.iter().map(|(a, (s, r))| (*a, *s, *r)).max_by_key(|(_, _, r)| *r)
    }
}

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

    /// Routes [`VICTIMS`] from the servers' side to the clients', which takes all of it as its own.
    fn route_victims(&self) {
        let net = format!("{}/{}", VICTIMS.0, VICTIMS.1);
        let via = CLIENT.to_string();
        for (ns, args) in [
            (&self.g, vec!["route", "add", &net, "via", &via, "dev", "v0"]),
            (&self.c, vec!["route", "add", "local", &net, "dev", "lo"]),
        ] {
            let o = run(Command::new("ip").arg("-n").arg(&ns.name).args(&args), Duration::from_secs(10));
            assert!(o.status.success(), "ip {args:?}: {}", stderr(&o));
        }
    }

    /// Runs the test `name` (its path in this binary, `attack_endpoint::…`) again inside the clients'
    /// namespace, where [`in_c`] returns `value`, with [`VICTIMS`] routed there so that a test may bind a
    /// victim's socket on any of its addresses; prints what it printed and fails if it failed. The client
    /// side of a test runs there: none of its addresses is on loopback, which counts as verified.
    pub fn run_in_c(&self, name: &str, value: &str) {
        self.route_victims();
        let exe = std::env::current_exe().expect("the test binary");
        let mut cmd = self.c.command(exe.to_str().expect("a UTF-8 path"));
        cmd.args(["--exact", name, "--nocapture", "--test-threads", "1"]);
        cmd.env(IN_C_ENV, value);
        let o = run(&mut cmd, Duration::from_secs(120));
        println!("{}", stdout(&o));
        assert!(o.status.success(), "{name} in the clients' namespace failed:\n{}\n{}", stdout(&o), stderr(&o));
        assert!(stdout(&o).contains("1 passed"), "{name} did not run in the clients' namespace: {}", stdout(&o));
    }

    /// Runs the carpet `spec` from the clients' namespace and returns what it sent and what came back.
    pub fn carpet(&self, spec: &CarpetSpec) -> Carpet {
        self.route_victims();
        let hex: String = spec.request.iter().map(|b| format!("{b:02x}")).collect();
        let line = format!("{} {} {} {} {} {} {hex}", spec.port, spec.to, spec.rate, spec.secs, spec.linger, VICTIMS.0);
        let exe = std::env::current_exe().expect("the test binary");
        let mut cmd = self.c.command(exe.to_str().expect("a UTF-8 path"));
        cmd.args(["--exact", "spoof::spoof_child", "--nocapture"]);
        cmd.env(CARPET_ENV, line);
        let o = run(&mut cmd, Duration::from_secs_f64(spec.secs + spec.linger + 60.0));
        assert!(o.status.success(), "the carpet failed: {}", stderr(&o));
        let out = stdout(&o);
        let mut c = Carpet::default();
        for l in out.lines() {
            let f: Vec<&str> = l.split_whitespace().collect();
            match f.as_slice() {
                ["carpet", sent, sent_bytes, received, received_bytes, secs] => {
                    c.sent = sent.parse().unwrap();
                    c.sent_bytes = sent_bytes.parse().unwrap();
                    c.received = received.parse().unwrap();
                    c.received_bytes = received_bytes.parse().unwrap();
                    c.secs = secs.parse().unwrap();
                }
                ["victim", addr, sent, received] => {
                    c.per_victim.insert(addr.parse().unwrap(), (sent.parse().unwrap(), received.parse().unwrap()));
                }
                _ => {}
            }
        }
        assert!(c.sent > 0, "the carpet reported nothing: {out}");
        c
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

/// The spoofer's work inside the clients' namespace; a no-op unless an environment variable is set.
fn child() {
    if let Ok(spec) = std::env::var(CARPET_ENV) {
        return carpet_child(&spec);
    }
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

/// The carpet's work inside the clients' namespace (see [`Pair::carpet`]): sends, counts, and prints one
/// `carpet SENT SENT_BYTES RECEIVED RECEIVED_BYTES SECS` line and one `victim ADDR SENT RECEIVED` line per
/// victim address.
fn carpet_child(spec: &str) {
    let f: Vec<&str> = spec.split(' ').collect();
    let port: u16 = f[0].parse().unwrap();
    let to: SocketAddrV4 = f[1].parse().unwrap();
    let rate: u32 = f[2].parse().unwrap();
    let (secs, linger): (f64, f64) = (f[3].parse().unwrap(), f[4].parse().unwrap());
    let first = u32::from(f[5].parse::<Ipv4Addr>().unwrap());
    let template: Vec<u8> =
        (0..f[6].len()).step_by(2).map(|i| u8::from_str_radix(&f[6][i..i + 2], 16).unwrap()).collect();
    assert_eq!(template[0] & 0x0f, 2, "the request has a 2-byte token");
    let addresses = 1u32 << (32 - VICTIMS.1);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let victims = rt
        .block_on(async {
            corral_tokio::socket::CoapSocket::bind(SocketAddr::from(([0, 0, 0, 0], port)), Default::default())
        })
        .expect("the victims' socket");
    let mut spoofer = Spoofer::new().expect("a raw socket (root)");
    let mut per_victim: HashMap<Ipv4Addr, (usize, usize)> = HashMap::new();
    let (mut received, mut received_bytes) = (0usize, 0usize);
    let mut bufs = corral_tokio::socket::RecvBuffers::new(64, 2048);
    let mut drain = |per_victim: &mut HashMap<Ipv4Addr, (usize, usize)>| {
        while let Ok(n) = victims.try_recv_now(&mut bufs) {
            if n == 0 {
                break;
            }
            for (_, dst, bytes) in bufs.datagrams() {
                received += 1;
                received_bytes += bytes.len();
                if let Some(IpAddr::V4(v)) = dst {
                    per_victim.entry(v).or_default().1 += bytes.len();
                }
            }
        }
    };
    let started = Instant::now();
    let total = (f64::from(rate) * secs) as u32;
    for i in 0..total {
        // Paced: request i leaves i / rate seconds in.
        let due = Duration::from_secs_f64(f64::from(i) / f64::from(rate));
        while started.elapsed() < due {
            drain(&mut per_victim);
            std::thread::sleep(Duration::from_micros(500));
        }
        let victim = Ipv4Addr::from(first + i % addresses);
        let mut m = template.clone();
        m[2..4].copy_from_slice(&(i as u16).to_be_bytes());
        m[4..6].copy_from_slice(&(i as u16).to_be_bytes());
        spoofer.send(SocketAddrV4::new(victim, port), to, &m);
        per_victim.entry(victim).or_default().0 += m.len();
    }
    let until = started.elapsed() + Duration::from_secs_f64(linger);
    while started.elapsed() < until {
        drain(&mut per_victim);
        std::thread::sleep(Duration::from_millis(2));
    }
    drain(&mut per_victim);
    println!("carpet {total} {} {received} {received_bytes} {:.3}", spoofer.sent, started.elapsed().as_secs_f64());
    for (a, (s, r)) in &per_victim {
        println!("victim {a} {s} {r}");
    }
}
