//! CoAP over the simulated network: RFC 7252 retransmissions on the virtual clock, multi-hop routing,
//! unicast group requests, SMRF multicast, wired sides and two radio channels, pcap, scale.

mod common;

use common::{client, client_with, responders, run_round};
use corral_proto::wire::{Code, MessageType};
use corral_proto::{Duration, Endpoint, Instant, Node, Request, SendParams};
use corral_sim::seed::{check_determinism, for_seeds, with_seed};
use corral_sim::workload::{GroupClient, Pacing, Responder};
use corral_sim::{
    pcap, CoapSummary, DropReason, Interferer, LinkModel, NodeId, NodeSpec, RadioParams, RecordKind, Role, Sim,
    SimConfig, Topology, WiredSpec,
};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// With 30 % loss on the radio link and MAC retries off, CoAP itself retransmits: the gaps between the
/// transmissions of one CON are T0, 2·T0, 4·T0, … with T0 in [ACK_TIMEOUT, ACK_TIMEOUT·ACK_RANDOM_FACTOR]
/// (RFC 7252 §4.2), exactly, on the virtual clock.
#[test]
fn lossy_link_shows_coap_retransmissions_at_rfc_backoff_times() {
    for_seeds(&[31, 32], |seed| {
        let mut cfg = SimConfig::new(seed);
        cfg.radio.max_frame_retries = 0;
        let mut topo = Topology::star(1);
        topo.default_link = LinkModel::Bernoulli { p: 0.3 };
        let mut sim = Sim::from_topology(cfg, &topo);
        responders(&mut sim, [1], b"21.5");
        let h = client(&mut sim, 0, &[1], Pacing::AfterResponse);
        for round in 0..100 {
            let c = run_round(&mut sim, 0, h, Instant::from_secs(200 * (round + 1)));
            assert!(c.done());
            sim.run_until(Instant::from_secs(200 * (round + 1)));
        }
        // Every transmission of every CON request, grouped by message ID.
        let mut sends: BTreeMap<u16, Vec<Instant>> = BTreeMap::new();
        for d in sim.datagrams().iter().filter(|d| d.node == NodeId(0)) {
            let coap = d.coap.unwrap();
            assert_eq!((coap.mtype, coap.code), (MessageType::Con, Code::GET));
            sends.entry(coap.mid).or_default().push(d.at);
        }
        let (lo, hi) = (Duration::from_secs(2), Duration::from_secs(3));
        let mut retransmitted = 0;
        let mut deep = 0;
        for times in sends.values() {
            assert!(times.len() <= 5, "at most MAX_RETRANSMIT = 4 retransmissions");
            if times.len() < 2 {
                continue;
            }
            retransmitted += 1;
            let t0 = times[1] - times[0];
            assert!(t0 >= lo && t0 <= hi, "initial timeout {t0} outside [2 s, 3 s]");
            for (k, w) in times.windows(2).enumerate() {
                let gap = w[1] - w[0];
                assert_eq!(gap, t0.saturating_mul(1 << k), "gap {k} must be T0·2^{k}");
            }
            deep += usize::from(times.len() >= 3);
        }
        assert!(retransmitted >= 30, "30 % loss each way retransmits about half the requests ({retransmitted})");
        assert!(deep >= 2, "some requests need a second retransmission");
        let lost = sim
            .records()
            .iter()
            .filter(|r| r.kind == RecordKind::FrameLost && r.reason == Some(DropReason::Bernoulli))
            .count();
        let frames = sim.records().iter().filter(|r| r.kind == RecordKind::FrameSent).count();
        let rate = lost as f64 / frames as f64;
        assert!((0.2..0.42).contains(&rate), "data-frame loss {rate} (about 300 frames)");
    });
}

/// Every node of a multi-hop tree answers, and each datagram crosses exactly the topology's hop count.
#[test]
fn multi_hop_tree_delivers_with_the_topology_hop_counts() {
    for_seeds(&[41, 42], |seed| {
        for topo in [Topology::testbed_table7(20), Topology::line(6), Topology::grid(5, 5, 10.0, 14.5)] {
            let hops = topo.hop_counts();
            let n = topo.nodes.len() as u32;
            let mut sim = Sim::from_topology(SimConfig::new(seed), &topo);
            responders(&mut sim, 1..n, b"21.5");
            let targets: Vec<u32> = (1..n).collect();
            let h = client(&mut sim, 0, &targets, Pacing::Interval(Duration::from_millis(100)));
            let c = run_round(&mut sim, 0, h, Instant::from_secs(120));
            assert_eq!(c.successes(), targets.len(), "every member answers");
            for r in sim.records().iter().filter(|r| r.kind == RecordKind::Delivered) {
                let d = sim.datagram(r.datagram).unwrap();
                let member = if d.node == NodeId(0) { r.node } else { d.node };
                assert_eq!(Some(u32::from(r.hops)), hops[member.index()], "datagram {:?} to/from {member:?}", d.id);
                assert_eq!(sim.hops(d.node, r.node), Some(usize::from(r.hops)));
            }
            // Intermediate nodes forwarded: a member at h hops costs h − 1 forwards each way.
            let forwards: u64 = (0..n).map(|i| sim.counters(NodeId(i)).datagrams_forwarded).sum();
            let expected: u32 = hops.iter().flatten().map(|h| 2 * h.saturating_sub(1)).sum();
            assert!(forwards >= u64::from(expected));
        }
    });
}

/// One client sends GETs to N servers one after another (default transmission parameters, no loss): the
/// response time grows with N and never beats the shared airtime — every request and response must cross
/// the gateway's collision domain as an acknowledged frame.
#[test]
fn unicast_group_request_time_grows_with_shared_airtime() {
    with_seed(51, |seed| {
        let p = RadioParams::default();
        for pacing in
            [Pacing::AfterResponse, Pacing::Interval(Duration::ZERO), Pacing::Interval(Duration::from_millis(20))]
        {
            let mut last = Duration::ZERO;
            for n in [1u32, 2, 4, 8, 16] {
                let mut sim = Sim::from_topology(SimConfig::new(seed), &Topology::star(n as usize));
                responders(&mut sim, 1..=n, b"21.5");
                let targets: Vec<u32> = (1..=n).collect();
                let h = client(&mut sim, 0, &targets, pacing);
                let c = run_round(&mut sim, 0, h, Instant::from_secs(300));
                assert_eq!(c.successes(), n as usize, "{pacing:?} N={n}");
                let rt = c.response_time().unwrap();
                let airtime: Duration = sim
                    .datagrams()
                    .iter()
                    .map(|d| p.min_unicast_exchange(d.layout.unwrap().total_mpdu()))
                    .fold(Duration::ZERO, |a, b| a + b);
                let req = sim.datagrams()[0].len;
                let one = p.min_unicast_exchange(p.mac_overhead_unicast + p.lowpan_header + req);
                assert!(rt >= airtime, "{pacing:?} N={n}: {rt} < shared airtime {airtime}");
                assert!(rt >= one.saturating_mul(u64::from(2 * n)).min(airtime));
                assert!(rt > last, "{pacing:?}: N={n} answered in {rt}, not slower than {last}");
                if pacing == Pacing::AfterResponse {
                    // Nothing contends: the time is the airtime plus at most 7 unit backoffs per frame.
                    let slack = p.max_initial_backoff().saturating_mul(2 * u64::from(n));
                    assert!(rt <= airtime + slack, "N={n}: {rt} > {airtime} + {slack}");
                }
                last = rt;
            }
        }
    });
}

/// A multicast request from the gateway reaches the members of a multi-hop group as link-layer broadcasts
/// (one per forwarding node, after SMRF's random delay, never acknowledged nor retransmitted), and members
/// answer after leisure. Without MAC retries, link loss and collisions between forwarders lose members.
/// Whether 20% loss per hop loses the tail of a 7-hop chain depends on the draws (it survives all seven
/// hops with probability 0.8^7 ≈ 0.21), so that is a property over ten seeds: at least half of them lose it.
#[test]
fn smrf_multicast_floods_down_the_tree_without_mac_acks() {
    let seeds = corral_sim::seed::seeds(&(61..71).collect::<Vec<u64>>());
    let mut lost_tail = 0;
    for_seeds(&seeds, |seed| {
        let group: IpAddr = "ff05::fd".parse().unwrap();
        let run = |topo: &Topology, loss: f64| {
            let mut topo = topo.clone();
            topo.default_link = LinkModel::Bernoulli { p: loss };
            let n = topo.nodes.len() as u32;
            let mut sim = Sim::from_topology(SimConfig::new(seed), &topo);
            responders(&mut sim, 1..n, b"21.5");
            for i in 1..n {
                sim.join_group(NodeId(i), group);
            }
            sim.attach(NodeId(0), Node::new(Endpoint::new(sim.endpoint_config(NodeId(0)))));
            let dst = std::net::SocketAddr::new(group, corral_sim::COAP_PORT);
            sim.with_node(NodeId(0), |now, n| {
                n.endpoint_mut().request(now, dst, Request::get("temp"), SendParams::non())
            })
            .unwrap()
            .unwrap();
            sim.run_until(Instant::from_secs(15));
            let mcast = sim.datagrams()[0].id;
            let got = sim.records().iter().filter(|r| r.kind == RecordKind::Delivered && r.datagram == mcast).count();
            let frames: Vec<_> = sim
                .records()
                .iter()
                .filter(|r| r.kind == RecordKind::FrameSent && r.datagram == mcast)
                .cloned()
                .collect();
            assert!(frames.iter().all(|f| f.peer.is_none() && f.attempt == 0), "broadcast, no retransmission");
            assert!(!sim.records().iter().any(|r| r.kind == RecordKind::AckReceived && r.datagram == mcast));
            let forwarders = (0..n - 1).filter(|&i| (1..n).any(|j| sim.parent(NodeId(j)) == Some(NodeId(i)))).count();
            assert!(frames.len() <= forwarders);
            let answers = sim
                .take_node_events()
                .iter()
                .filter(|(_, _, e)| matches!(e, corral_proto::Event::Response { .. }))
                .count();
            assert!(answers <= got && (loss > 0.0 || answers == got), "members answer what they got");
            (got, frames.len(), forwarders)
        };
        let line = Topology::line(8);
        let (got, frames, forwarders) = run(&line, 0.0);
        assert_eq!((got, frames, forwarders), (7, 7, 7), "a lossless chain reaches every member");
        let (lossy, _, _) = run(&line, 0.2);
        lost_tail += usize::from(lossy < 7);
        // Seed 000's 20-member group: forwarders in one layer all hear each other and contend.
        let (got, _, _) = run(&Topology::testbed_table7(20), 0.0);
        println!("seed {seed}: the lossy chain reached {lossy}/7, the dense group {got}/20");
        assert!(got >= 16, "most of the dense group is reached ({got}/20)");
    });
    assert!(lost_tail >= seeds.len() / 2, "a lossy chain loses the tail in only {lost_tail} of {} seeds", seeds.len());
}

/// Seed 000 §5.2.4: two gateways on channels 25 and 26, wired to one client host. Each network answers;
/// the channels never interfere, and the wired hop adds its delay and serialisation.
#[test]
fn two_gateways_on_two_channels_behind_a_wired_client() {
    with_seed(71, |seed| {
        let mut topo = Topology::new();
        let mut members = Vec::new();
        for (g, channel) in [(0usize, 25u8), (1, 26)] {
            let gw = topo.add(NodeSpec::new(Role::Gateway, Some(channel)).at(0.0, g as f64));
            assert_eq!(gw, g);
        }
        for (g, channel) in [(0usize, 25u8), (1, 26)] {
            for k in 0..5 {
                let m = topo.add(NodeSpec::new(Role::Device, Some(channel)).at(1.0 + k as f64, g as f64));
                topo.connect(g, m);
                members.push(m as u32);
            }
        }
        // Every device hears every other device, across channels too: only the channel separates them.
        for a in 2..12 {
            for b in a + 1..12 {
                topo.connect(a, b);
            }
        }
        let host = topo.add_wired_host(0, WiredSpec::ethernet(0, 0));
        topo.wire(WiredSpec { a: host, b: 1, delay: Duration::from_millis(1), bandwidth: 100_000_000, loss: 0.0 });
        let mut sim = Sim::from_topology(SimConfig::new(seed), &topo);
        for a in 0..12u32 {
            for b in sim.neighbors(NodeId(a)) {
                assert_eq!(topo.nodes[a as usize].channel, topo.nodes[b.index()].channel);
            }
        }
        responders(&mut sim, members.iter().copied(), b"21.5");
        let h = client(&mut sim, host as u32, &members, Pacing::Interval(Duration::ZERO));
        let c = run_round(&mut sim, host as u32, h, Instant::from_secs(60));
        assert_eq!(c.successes(), 10);
        for &m in &members {
            assert_eq!(sim.hops(NodeId(host as u32), NodeId(m)), Some(2), "wired hop + one radio hop");
        }
        // The wired hop: 1 ms of delay plus (payload + 48 + 18) · 8 bits at 100 Mbit/s.
        let req = &sim.datagrams()[0];
        let arrive = sim
            .records()
            .iter()
            .find(|r| r.kind == RecordKind::Forwarded && r.datagram == req.id)
            .expect("the gateway forwards the request");
        let bits = ((req.len + 48 + 18) * 8) as u64;
        assert_eq!(arrive.at - req.at, Duration::from_millis(1) + Duration::from_micros(bits.div_ceil(100)));
    });
}

/// The same seed gives the same trace, for several seeds, on a scenario with every random element: CSMA,
/// loss, bursts, interference, multicast, fragmentation, CoAP retransmissions.
#[test]
fn determinism_across_seeds() {
    fn scenario(seed: u64) -> u64 {
        let mut topo = Topology::testbed_table7(10);
        topo.default_link = LinkModel::Bernoulli { p: 0.05 };
        topo.link_models.push((0, 1, LinkModel::bursty(0.2, 3.0, 0.8)));
        let mut wifi = Interferer::constant(13, 0.0);
        wifi.load = vec![(Instant::ZERO, 5.0), (Instant::from_secs(3), 20.0)];
        topo.interferers.push(wifi);
        let mut sim = Sim::from_topology(SimConfig::new(seed), &topo);
        responders(&mut sim, 1..11, &[b'v'; 120]);
        let group: IpAddr = "ff05::1".parse().unwrap();
        for i in 1..11 {
            sim.join_group(NodeId(i), group);
        }
        let targets: Vec<u32> = (1..11).collect();
        let h = client(&mut sim, 0, &targets, Pacing::Interval(Duration::from_millis(10)));
        run_round(&mut sim, 0, h, Instant::from_secs(20));
        let dst = std::net::SocketAddr::new(group, corral_sim::COAP_PORT);
        sim.with_node(NodeId(0), |now, n| n.endpoint_mut().request(now, dst, Request::get("temp"), SendParams::non()));
        sim.run_until(Instant::from_secs(40));
        sim.trace_hash()
    }
    let hashes: Vec<u64> = [1u64, 2, 3, 4, 5].iter().map(|&s| check_determinism(s, scenario)).collect();
    let mut distinct = hashes.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), hashes.len(), "different seeds give different runs");
}

/// A failing simulation test names the seed that reproduces it.
#[test]
fn a_failing_simulation_prints_its_seed() {
    let err = std::panic::catch_unwind(|| {
        with_seed(77, |seed| {
            let mut sim = Sim::from_topology(SimConfig::new(seed), &Topology::star(1));
            sim.run_for(Duration::from_secs(1));
            assert_eq!(sim.records().len(), 1, "deliberately wrong expectation");
        })
    })
    .unwrap_err();
    let msg = err.downcast_ref::<String>().unwrap();
    assert!(msg.starts_with("SEED=77: ") && msg.contains("deliberately wrong"), "{msg}");
}

/// The pcap of a run reads back as IPv6/UDP packets with correct lengths and checksums, one per datagram,
/// carrying the CoAP messages the records describe.
#[test]
fn pcap_reads_back_with_valid_headers() {
    with_seed(81, |seed| {
        let mut sim = Sim::from_topology(SimConfig::new(seed), &Topology::line(3));
        sim.capture_pcap();
        responders(&mut sim, [1, 2], &[b'p'; 150]);
        let h = client(&mut sim, 0, &[1, 2], Pacing::AfterResponse);
        assert_eq!(run_round(&mut sim, 0, h, Instant::from_secs(30)).successes(), 2);
        let bytes = sim.take_pcap().unwrap();
        assert_eq!(&bytes[20..24], &101u32.to_le_bytes(), "LINKTYPE_RAW");
        let pkts = pcap::read(&bytes).unwrap();
        assert_eq!(pkts.len(), sim.datagrams().len());
        for (p, d) in pkts.iter().zip(sim.datagrams()) {
            assert!(p.checksum_ok);
            assert_eq!((p.at, p.src, p.dst, p.payload.len()), (d.at, d.src, d.dst, d.len));
            assert_eq!(p.src.port(), 5683);
            assert_eq!(CoapSummary::parse(&p.payload), d.coap);
        }
        // The raw bytes: IPv6 version nibble, payload length = UDP length, next header UDP.
        let first = &bytes[24 + 16..];
        assert_eq!(first[0] >> 4, 6);
        let plen = u16::from_be_bytes([first[4], first[5]]);
        assert_eq!((first[6], plen, u16::from_be_bytes([first[44], first[45]])), (17, plen, plen));
    });
}

/// A bounded forwarding queue drops what does not fit, and counts it.
#[test]
fn forwarding_queue_overflow_is_counted() {
    with_seed(91, |seed| {
        let mut cfg = SimConfig::new(seed);
        cfg.radio.queue_capacity = 4;
        let mut sim = Sim::from_topology(cfg, &Topology::line(3));
        let dst = sim.addr(NodeId(2));
        for _ in 0..10 {
            sim.inject(NodeId(0), dst, vec![0; 50]);
        }
        sim.run_for(Duration::from_secs(2));
        assert_eq!(sim.counters(NodeId(0)).drops(DropReason::QueueOverflow), 6);
        let delivered = sim.records().iter().filter(|r| r.kind == RecordKind::Delivered).count();
        assert_eq!(delivered, 4);
        // Node 2 is hidden from node 0: its ACKs to node 1 may collide with node 0's frames, which then
        // cost MAC retransmissions; each link still carries every datagram once.
        for (a, b) in [(0, 1), (1, 2)] {
            let l = sim.link(NodeId(a), NodeId(b)).unwrap();
            assert_eq!(l.frames - l.retransmissions, 4, "{a}→{b}");
        }
        let to_nowhere = std::net::SocketAddr::new("fd00::999".parse().unwrap(), 5683);
        sim.inject(NodeId(1), to_nowhere, vec![1]);
        assert_eq!(sim.counters(NodeId(1)).drops(DropReason::NoRoute), 1);
    });
}

/// A 1,000-node random geometric network builds, routes and serves a group request.
#[test]
fn thousand_node_network_runs() {
    with_seed(101, |seed| {
        let topo = Topology::random_geometric(1000, 400.0, 400.0, 30.0, seed).expect("connected placement");
        let hops = topo.hop_counts();
        let mut cfg = SimConfig::new(seed);
        cfg.record = false;
        let mut sim = Sim::from_topology(cfg, &topo);
        responders(&mut sim, 1..1000, b"21.5");
        let targets: Vec<u32> = (1..1000).step_by(37).collect();
        let ep = sim.endpoint_config(NodeId(0));
        let h = client_with(&mut sim, 0, &targets, Pacing::Interval(Duration::from_millis(200)), ep);
        let c = run_round(&mut sim, 0, h, Instant::from_secs(300));
        assert_eq!(c.successes(), targets.len());
        assert!(targets.iter().any(|&t| hops[t as usize].unwrap() >= 5), "a real multi-hop network");
        // 4,160 B until the reflection bound's verified networks (a Vec in each endpoint's config) and its
        // shared first-answer bucket came in: 4,189 B, a bound of 4,200.
        assert!(sim.footprint() / 1000 < 4200, "simulator state per node: {} B", sim.footprint() / 1000);
        let _ = sim.service::<GroupClient>(NodeId(0), h).unwrap();
        let _ = Responder::new("x");
    });
}

/// SMRF forwards as Contiki's `smrf.c` does under Null-RDC: a `ctimer` of 4·(1 + rand % 4) ticks of the
/// forwarder's own 128 Hz clock, counted from the tick in progress, so the forward leaves ((4k − 1)·T, 4k·T]
/// after the reception (T = 1/128 s) — never exactly 31.25 ms after it, and at a different phase on each
/// node. With `smrf_delay_ticks` 0 the forwarder queues the datagram at once.
#[test]
fn smrf_forwards_on_the_forwarders_clock_ticks() {
    for_seeds(&[81, 82], |seed| {
        let group: IpAddr = "ff05::fd".parse().unwrap();
        let dst = std::net::SocketAddr::new(group, corral_sim::COAP_PORT);
        // Gateway 0 and three forwarders 1-3 in a chain to member 4 (all members).
        let run = |ticks: u32| {
            let mut cfg = SimConfig::new(seed);
            cfg.smrf_delay_ticks = ticks;
            cfg.radio.min_be = 0; // no CSMA/CA backoff on a first attempt: the forward's timing is SMRF's alone
            let mut sim = Sim::from_topology(cfg, &Topology::line(5));
            for i in 1..5 {
                sim.join_group(NodeId(i), group);
            }
            for round in 0..40u64 {
                sim.run_until(Instant::from_millis(300 * round));
                sim.inject(NodeId(0), dst, vec![0x50; 20]);
            }
            sim.run_for(Duration::from_secs(1));
            // Per forwarder: reception from its parent → its own broadcast, µs, for every datagram.
            let recs = sim.records();
            let mut delays: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
            for rx in recs.iter().filter(|r| r.kind == RecordKind::FrameReceived && r.node.0 < 4) {
                let fwd = recs
                    .iter()
                    .find(|r| r.kind == RecordKind::FrameSent && r.node == rx.node && r.datagram == rx.datagram)
                    .expect("every forwarder forwards on a lossless chain");
                delays.entry(rx.node.0).or_default().push((fwd.at - rx.at).as_micros());
            }
            delays
        };
        let p = RadioParams::default();
        let mac = (p.cca + p.turnaround).as_micros();
        let tick = 1e6 / 128.0;
        let mut phases = Vec::new();
        for (node, ds) in run(4) {
            assert_eq!(ds.len(), 40);
            let mut slots = [0; 4];
            for d in &ds {
                let smrf = (d - mac) as f64;
                let k = (smrf / (4.0 * tick)).ceil() as usize;
                assert!((1..=4).contains(&k), "node {node}: {smrf} µs is not within 1-4 slots of 4 ticks");
                let lo = (4 * k - 1) as f64 * tick;
                assert!(smrf > lo - 1.0 && smrf <= 4.0 * k as f64 * tick + 1.0, "node {node}: {smrf} µs");
                slots[k - 1] += 1;
            }
            assert!(slots.iter().all(|&n| n > 0), "node {node}: every multiple is drawn ({slots:?})");
            phases.push(ds[0] as f64 % tick);
        }
        phases.dedup_by(|a, b| (*a - *b).abs() < 1.0);
        assert!(phases.len() > 1, "the forwarders' clocks tick at different phases");
        for (_, ds) in run(0) {
            assert!(ds.iter().all(|&d| d == mac), "no SMRF delay: CCA and turnaround only");
        }
    });
}
