//! The HTTP baselines inside the simulator (`corral_sim::http`): HTTP/1.1 over the simulated TCP stack,
//! persistent or a connection per request, and HTTP over UDP — over a lossy wired link (TCP recovers, and
//! its retransmissions show in the counter and in the pcap) and over one IEEE 802.15.4 hop with 6LoWPAN
//! fragmentation. The pcap must dissect as IPv6 + TCP + HTTP: checked byte by byte here, and by `tshark`
//! when it is installed.

use corral_proto::Instant;
use corral_sim::http::{HttpClient, HttpServer, HttpTransport};
use corral_sim::pcap;
use corral_sim::seed::{for_seeds, with_seed};
use corral_sim::{NodeId, NodeSpec, RecordKind, Role, Sim, SimConfig, Topology, WiredSpec};

fn wired(loss: f64) -> Topology {
    let mut topo = Topology::new();
    let gw = topo.add(NodeSpec::new(Role::Gateway, None));
    topo.add_wired_host(gw, WiredSpec { loss, bandwidth: 1_000_000, ..WiredSpec::ethernet(0, 0) });
    topo
}

/// Runs `n` GETs of a `body`-byte resource from node `client` to node `server`; the simulator after it.
fn run(topo: &Topology, seed: u64, transport: HttpTransport, body: usize, n: usize) -> Sim {
    let (server, client) = (NodeId(0), NodeId(1));
    let mut cfg = SimConfig::new(seed);
    cfg.record = true;
    let mut sim = Sim::from_topology(cfg, topo);
    sim.capture_pcap();
    sim.attach_app(server, Box::new(HttpServer::new("test", body)));
    let dst = std::net::SocketAddr::new(sim.addr(server).ip(), corral_sim::http::HTTP_PORT);
    sim.attach_app(client, Box::new(HttpClient::new(dst, transport, "test", n)));
    sim.with_app(client, |now, c: &mut HttpClient| c.start(now));
    sim.run_until_cond(Instant::from_secs(3600), |s| s.app::<HttpClient>(client).is_some_and(HttpClient::done));
    sim
}

fn client(sim: &Sim) -> &HttpClient {
    sim.app::<HttpClient>(NodeId(1)).expect("the client")
}

#[test]
fn every_transport_completes_on_a_clean_link() {
    for_seeds(&[1], every_transport_with);
}

fn every_transport_with(seed: u64) {
    for t in [HttpTransport::Tcp, HttpTransport::Persistent, HttpTransport::Udp] {
        let sim = run(&wired(0.0), seed, t, 300, 10);
        let c = client(&sim);
        assert_eq!(c.answered(), 10, "{t:?}");
        assert!(c.transactions.iter().all(|x| x.body == 300), "{t:?}");
        let server = sim.app::<HttpServer>(NodeId(0)).unwrap();
        let conns = match t {
            HttpTransport::Tcp => 10,
            HttpTransport::Persistent => 1,
            HttpTransport::Udp => 0,
        };
        assert_eq!((server.served, server.connections), (10, conns), "{t:?}");
        assert_eq!(sim.tcp_retransmissions(NodeId(0)) + sim.tcp_retransmissions(NodeId(1)), 0, "{t:?}");
    }
}

/// TCP segments with data that a flow carried more than once (same flow, same sequence number), read from
/// the pcap.
fn repeated_segments(packets: &[(Instant, Vec<u8>)]) -> usize {
    let mut seen = std::collections::HashSet::new();
    let mut repeated = 0;
    for (_, p) in packets {
        let tcp = &p[40..];
        let off = usize::from(tcp[12] >> 4) * 4;
        if tcp.len() == off {
            continue;
        }
        let key = (p[8..40].to_vec(), tcp[0..8].to_vec());
        if !seen.insert(key) {
            repeated += 1;
        }
    }
    repeated
}

#[test]
fn a_transfer_completes_under_loss_with_retransmissions_in_the_counter_and_the_trace() {
    with_seed(7, |seed| {
        for t in [HttpTransport::Tcp, HttpTransport::Persistent] {
            let mut sim = run(&wired(0.2), seed, t, 600, 30);
            assert_eq!(client(&sim).answered(), 30, "{t:?}: TCP delivers every response at 20 % loss");
            let retx = sim.tcp_retransmissions(NodeId(0)) + sim.tcp_retransmissions(NodeId(1));
            assert!(retx > 0, "{t:?}: losses show up as TCP retransmissions");
            // The trace: records of lost datagrams, and the segments sent again in the pcap.
            let lost = sim.records().iter().filter(|r| r.kind == RecordKind::Dropped).count();
            assert!(lost > 0, "{t:?}: the link's losses are in the records");
            let packets = pcap::read_raw(&sim.take_pcap().unwrap()).unwrap();
            assert_eq!(repeated_segments(&packets) as u64, retx, "{t:?}: the counter counts what the pcap shows");
        }
    });
}

#[test]
fn http_over_udp_loses_what_the_link_loses() {
    for_seeds(&[3], |seed| {
        let sim = run(&wired(0.2), seed, HttpTransport::Udp, 100, 50);
        let c = client(&sim);
        assert!(c.done());
        assert!(c.answered() < 50 && c.answered() > 20, "about (1 − 0.2)² of 50: {}", c.answered());
    });
}

fn sum16(mut acc: u32, b: &[u8]) -> u32 {
    for c in b.chunks(2) {
        acc += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// One IPv6 + TCP packet: the header fields are consistent and the TCP checksum verifies. The TCP payload.
fn check_ipv6_tcp(p: &[u8]) -> &[u8] {
    assert_eq!(p[0] >> 4, 6, "IPv6");
    assert_eq!(usize::from(u16::from_be_bytes([p[4], p[5]])), p.len() - 40, "payload length");
    assert_eq!(p[6], 6, "next header TCP");
    let tcp = &p[40..];
    let mut acc = sum16(0, &p[8..40]);
    acc += tcp.len() as u32 + 6;
    acc = sum16(acc, tcp);
    assert_eq!(fold(acc), 0xffff, "TCP checksum over the IPv6 pseudo-header");
    &tcp[usize::from(tcp[12] >> 4) * 4..]
}

#[test]
fn the_pcap_is_ipv6_tcp_with_http_inside() {
    with_seed(5, pcap_check);
}

fn pcap_check(seed: u64) {
    // Over one IEEE 802.15.4 hop, a 500-byte body is fragmented; the pcap has the whole IP packets.
    let mut sim = run(&Topology::star(1), seed, HttpTransport::Persistent, 500, 3);
    assert_eq!(client(&sim).answered(), 3);
    let frags = sim.records().iter().filter(|r| r.kind == RecordKind::FrameSent && r.frags > 1).count();
    assert!(frags > 0, "the response needs 6LoWPAN fragments");
    let bytes = sim.take_pcap().unwrap();
    assert_eq!(u32::from_le_bytes(bytes[20..24].try_into().unwrap()), pcap::LINKTYPE_RAW);
    let packets = pcap::read_raw(&bytes).unwrap();
    let mut http = Vec::new();
    for (_, p) in &packets {
        http.extend_from_slice(check_ipv6_tcp(p));
    }
    let text = String::from_utf8_lossy(&http);
    assert_eq!(text.matches("GET /test HTTP/1.1\r\n").count(), 3, "{text}");
    assert_eq!(text.matches("HTTP/1.1 200 OK\r\nContent-Length: 500\r\n").count(), 3);
    assert!(pcap::read(&bytes).unwrap().is_empty(), "no UDP in this capture");

    // Wireshark's dissectors, when tshark is installed.
    let file = std::env::temp_dir().join(format!("corral-http-{}.pcap", std::process::id()));
    std::fs::write(&file, &bytes).unwrap();
    match std::process::Command::new("tshark")
        .args(["-r", file.to_str().unwrap(), "-T", "fields", "-e", "frame.protocols", "-e", "tcp.checksum.status"])
        .args(["-o", "tcp.check_checksum:TRUE"])
        .output()
    {
        Err(e) => println!("skipped the tshark check: tshark is not installed ({e})"),
        Ok(o) => {
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(o.status.success(), "tshark: {}", String::from_utf8_lossy(&o.stderr));
            assert_eq!(out.lines().count(), packets.len());
            assert!(out.lines().all(|l| l.starts_with("raw:ipv6:tcp")), "{out}");
            assert_eq!(out.lines().filter(|l| l.contains(":http")).count(), 6, "3 requests, 3 responses:\n{out}");
            assert!(out.lines().all(|l| l.ends_with("\t1")), "every TCP checksum good (status 1):\n{out}");
        }
    }
    let _ = std::fs::remove_file(file);
}

#[test]
fn http_runs_are_deterministic() {
    let f = |seed| {
        let sim = run(&wired(0.1), seed, HttpTransport::Tcp, 200, 10);
        (sim.trace_hash(), client(&sim).transactions.clone())
    };
    assert_eq!(f(11), f(11));
}
