//! The radio and MAC layer: airtime-derived latency, collisions and recovery, 6LoWPAN fragmentation,
//! link loss models and Wi-Fi interference.

mod common;

use common::{client, responders, run_round};
use corral_proto::{Duration, Instant};
use corral_sim::seed::{for_seeds, with_seed};
use corral_sim::workload::Pacing;
use corral_sim::{DropReason, Interferer, LinkModel, NodeId, RadioParams, RecordKind, Sim, SimConfig, Topology};

/// A lossless two-node exchange (CON GET, piggybacked 2.05) takes exactly two acknowledged frames: for each,
/// a random backoff of 0..=7 unit periods, CCA, turnaround, the frame, turnaround and the Imm-ACK.
#[test]
fn two_node_exchange_takes_the_airtime_derived_latency() {
    for_seeds(&[1, 2, 3, 4, 5, 6, 7, 8], |seed| {
        let mut sim = Sim::from_topology(SimConfig::new(seed), &Topology::star(1));
        responders(&mut sim, [1], b"21.5");
        let h = client(&mut sim, 0, &[1], Pacing::AfterResponse);
        let c = run_round(&mut sim, 0, h, Instant::from_secs(10));
        assert_eq!(c.successes(), 1);
        let rt = c.response_time().unwrap();

        let p = RadioParams::default();
        let d = sim.datagrams();
        assert_eq!(d.len(), 2, "request and piggybacked response only");
        let fixed: Duration = d
            .iter()
            .map(|dg| {
                let mpdu = p.mac_overhead_unicast + p.lowpan_header + dg.len;
                assert_eq!(dg.layout.unwrap().first as usize, mpdu);
                p.cca + p.turnaround + p.airtime(mpdu) + p.turnaround + p.ack_airtime()
            })
            .fold(Duration::ZERO, |a, b| a + b);
        let backoff = rt - fixed;
        assert!(rt >= fixed, "response time {rt} below the airtime bound {fixed}");
        assert!(backoff <= p.max_initial_backoff().saturating_mul(2), "backoff {backoff} exceeds 2 × 7 units");
        assert_eq!(backoff.as_micros() % p.unit_backoff.as_micros(), 0, "backoff is whole unit periods");
        // Frame-level check of the same: each frame starts CCA + turnaround + k·320 µs after it was queued.
        let sent: Vec<_> = sim.records().iter().filter(|r| r.kind == RecordKind::FrameSent).collect();
        assert_eq!(sent.len(), 2);
        assert!(sent.iter().all(|r| r.attempt == 0));
        let first_delay = sent[0].at - Instant::ZERO - p.cca - p.turnaround;
        assert_eq!(first_delay.as_micros() % 320, 0);
        assert!(first_delay <= p.max_initial_backoff());
    });
}

/// Two nodes in one collision domain send at the same instants; when their backoffs pick the same slot
/// the frames collide at the gateway, and MAC retries (CSMA/CA again) deliver every datagram anyway.
#[test]
fn simultaneous_senders_collide_and_recover() {
    for_seeds(&[11, 12, 13], |seed| {
        let mut sim = Sim::from_topology(SimConfig::new(seed), &Topology::star(2));
        let gw = sim.addr(NodeId(0));
        let mut ids = Vec::new();
        for round in 0..60u64 {
            sim.run_until(Instant::from_millis(100 * round));
            ids.push(sim.inject(NodeId(1), gw, vec![0x50; 40]));
            ids.push(sim.inject(NodeId(2), gw, vec![0x50; 40]));
        }
        sim.run_for(Duration::from_secs(1));
        let recs = sim.records();
        let collisions =
            recs.iter().filter(|r| r.kind == RecordKind::FrameLost && r.reason == Some(DropReason::Collision)).count();
        assert!(collisions > 0, "equal backoffs must collide sometimes (1 in 8 rounds)");
        let delivered = recs.iter().filter(|r| r.kind == RecordKind::Delivered).count();
        assert_eq!(delivered, ids.len(), "MAC retries recover every collision");
        let retries = sim.counters(NodeId(1)).mac_retries + sim.counters(NodeId(2)).mac_retries;
        assert!(retries as usize >= collisions, "every collision costs a retransmission");
        let busy = sim.counters(NodeId(1)).busy_ccas + sim.counters(NodeId(2)).busy_ccas;
        assert!(busy > 0, "CSMA defers to the other sender when their slots differ");
        assert!(recs.iter().any(|r| r.kind == RecordKind::FrameSent && r.attempt > 0));
    });
}

/// A gateway (node 0) and two devices that reach it on channel 26 but not each other.
fn hidden_terminals() -> Topology {
    let mut t = Topology::new();
    for i in 0..3 {
        let role = if i == 0 { corral_sim::Role::Gateway } else { corral_sim::Role::Device };
        t.add(corral_sim::NodeSpec::new(role, Some(26)));
    }
    t.connect(0, 1);
    t.connect(0, 2);
    t
}

/// Hidden terminals (both hear the gateway, not each other) collide much more; retries still mostly recover.
#[test]
fn hidden_terminals_collide_more_than_neighbours() {
    with_seed(21, |seed| {
        let t = hidden_terminals();
        let count = |topo: &Topology| {
            let mut sim = Sim::from_topology(SimConfig::new(seed), topo);
            let gw = sim.addr(NodeId(0));
            for round in 0..40u64 {
                sim.run_until(Instant::from_millis(100 * round));
                sim.inject(NodeId(1), gw, vec![0; 90]);
                sim.inject(NodeId(2), gw, vec![0; 90]);
            }
            sim.run_for(Duration::from_secs(1));
            sim.records().iter().filter(|r| r.reason == Some(DropReason::Collision)).count()
        };
        let hidden = count(&t);
        let visible = count(&Topology::star(2));
        assert!(hidden > visible, "hidden {hidden} vs visible {visible}");
    });
}

/// A 300-byte response goes as 4 RFC 4944 fragments; dropping one (with MAC retries off) loses the whole
/// datagram at the reassembly, and CoAP's retransmission of the request brings the response again.
#[test]
fn large_datagram_is_fragmented_and_lost_with_one_fragment() {
    with_seed(5, |seed| {
        let payload = vec![b'x'; 300];
        let mut cfg = SimConfig::new(seed);
        cfg.radio.max_frame_retries = 0;
        let mut sim = Sim::from_topology(cfg.clone(), &Topology::star(1));
        responders(&mut sim, [1], &payload);
        let h = client(&mut sim, 0, &[1], Pacing::AfterResponse);
        let c = run_round(&mut sim, 0, h, Instant::from_secs(10));
        assert_eq!(c.successes(), 1);
        // (The response is the large datagram: an Echo challenge, were the first answer beyond the
        // client address's first-answer credit, would come before it.)
        let large = cfg.radio.max_unfragmented_payload(false);
        let resp = sim.datagrams().iter().find(|d| d.node == NodeId(1) && d.len > large).unwrap().clone();
        let layout = resp.layout.unwrap();
        assert!(resp.len > cfg.radio.max_unfragmented_payload(false));
        assert_eq!(layout.frames, 4);
        let frames = sim.records().iter().filter(|r| r.kind == RecordKind::FrameSent && r.datagram == resp.id).count();
        assert_eq!(frames, 4);
        assert!(sim.records().iter().any(|r| r.kind == RecordKind::Delivered && r.datagram == resp.id));

        // Again, dropping fragment 2 of the first response.
        let mut sim = Sim::from_topology(cfg, &Topology::star(1));
        responders(&mut sim, [1], &payload);
        let h = client(&mut sim, 0, &[1], Pacing::AfterResponse);
        let mut dropped = false;
        sim.set_frame_rule(move |f| {
            let hit = !dropped && f.from == NodeId(1) && f.frag == 2;
            dropped |= hit;
            hit
        });
        let c = run_round(&mut sim, 0, h, Instant::from_secs(20));
        assert_eq!(c.successes(), 1, "CoAP recovers the lost datagram");
        let first = sim.datagrams().iter().find(|d| d.node == NodeId(1) && d.len > large).unwrap().id;
        let recs: Vec<_> = sim.records().iter().filter(|r| r.datagram == first).collect();
        assert!(!recs.iter().any(|r| r.kind == RecordKind::Delivered), "one fragment lost loses the datagram");
        assert!(recs.iter().any(|r| r.kind == RecordKind::FrameLost && r.reason == Some(DropReason::Rule)));
        assert!(recs.iter().any(|r| r.kind == RecordKind::Dropped
            && r.reason == Some(DropReason::FragmentLost)
            && r.node == NodeId(0)));
        assert!(recs.iter().any(|r| r.kind == RecordKind::Dropped
            && r.reason == Some(DropReason::MacRetriesExhausted)
            && r.node == NodeId(1)));
        // The remaining fragment was never sent: the sender abandons the datagram.
        assert!(!recs.iter().any(|r| r.kind == RecordKind::FrameSent && r.frag == 3));
        let client_sends = sim.datagrams().iter().filter(|d| d.node == NodeId(0)).count();
        assert_eq!(client_sends, 2, "one CoAP retransmission of the request");
    });
}

/// Each loss model drops frames with its own reason, at about its configured rate.
#[test]
fn link_models_drop_with_their_reason() {
    with_seed(9, |seed| {
        for (model, reason) in [
            (LinkModel::Bernoulli { p: 0.2 }, DropReason::Bernoulli),
            (LinkModel::bursty(0.2, 4.0, 0.9), DropReason::Burst),
            (LinkModel::Snr { snr_db: 30.0 }, DropReason::Snr),
        ] {
            let mut cfg = SimConfig::new(seed);
            cfg.radio.max_frame_retries = 0;
            let mut sim = Sim::from_topology(cfg, &Topology::star(1));
            sim.set_link_model(NodeId(0), NodeId(1), model);
            let dst = sim.addr(NodeId(1));
            for i in 0..1500u64 {
                sim.run_until(Instant::from_millis(15 * i));
                sim.inject(NodeId(0), dst, vec![0; 60]);
            }
            sim.run_for(Duration::from_secs(1));
            let lost = sim
                .records()
                .iter()
                .filter(|r| r.kind == RecordKind::FrameLost && r.peer == Some(NodeId(0)))
                .inspect(|r| assert_eq!(r.reason, Some(reason)))
                .count();
            let expected = model.mean_loss(60 + 23 + 10 + 6) * 1500.0;
            assert!((lost as f64 - expected).abs() < 0.3 * expected + 10.0, "{model:?}: {lost} vs {expected}");
            assert_eq!(sim.link(NodeId(0), NodeId(1)).unwrap().lost(reason), lost as u64);
        }
    });
}

/// A Wi-Fi interferer on an overlapping channel makes CCAs busy and corrupts frames, more at higher load;
/// nodes on a non-overlapping channel do not notice it.
#[test]
fn wifi_interference_grows_with_load_and_respects_channels() {
    with_seed(3, |seed| {
        let run = |mbps: f64, channel: u8| {
            let mut cfg = SimConfig::new(seed);
            cfg.radio.max_frame_retries = 0;
            let mut topo = Topology::star(1);
            for n in &mut topo.nodes {
                n.channel = Some(channel);
            }
            let mut i = Interferer::constant(13, mbps);
            i.cca_busy_prob = 0.8;
            i.corruption_prob = 0.3;
            topo.interferers.push(i);
            let mut sim = Sim::from_topology(cfg, &topo);
            let dst = sim.addr(NodeId(1));
            for k in 0..300u64 {
                sim.run_until(Instant::from_millis(20 * k));
                sim.inject(NodeId(0), dst, vec![0; 80]);
            }
            sim.run_for(Duration::from_secs(1));
            let corrupted = sim.records().iter().filter(|r| r.reason == Some(DropReason::Interference)).count();
            (corrupted, sim.counters(NodeId(0)).busy_ccas)
        };
        let (c0, b0) = run(0.0, 26);
        let (c10, b10) = run(10.0, 26);
        let (c25, b25) = run(25.0, 26);
        assert_eq!((c0, b0), (0, 0));
        assert!(c10 > 0 && c25 > c10, "corruption {c10} → {c25}");
        assert!(b25 > b10 && b10 > 0, "busy CCAs {b10} → {b25}");
        assert_eq!(run(25.0, 15), (0, 0), "channel 15 does not overlap Wi-Fi channel 13");
    });
}

/// With the default MAC (3 retries), a 30 % lossy link still delivers most frames: Eq. (3) of seed 002
/// (loss P^(r+1)) emerges from the simulated retries.
#[test]
fn mac_retries_realise_seed_002_eq3() {
    with_seed(17, |seed| {
        let mut sim = Sim::from_topology(SimConfig::new(seed), &Topology::star(1));
        // Loss only on data frames (0 → 1); ACKs come back cleanly, as Eq. (3) assumes.
        sim.set_link_model_directed(NodeId(0), NodeId(1), LinkModel::Bernoulli { p: 0.5 });
        let dst = sim.addr(NodeId(1));
        let n = 2000u64;
        for i in 0..n {
            sim.run_until(Instant::from_millis(30 * i));
            sim.inject(NodeId(0), dst, vec![0; 50]);
        }
        sim.run_for(Duration::from_secs(1));
        let lost = sim.counters(NodeId(0)).drops(DropReason::MacRetriesExhausted) as f64 / n as f64;
        let eq3 = corral_sim::loss::snr::mac_loss(0.5, 3);
        assert!((lost - eq3).abs() < 0.025, "{lost} vs {eq3}");
    });
}

/// A channel with its own bit rate stretches frame airtime accordingly (frame start to reception end).
#[test]
fn per_channel_bit_rate_sets_the_airtime() {
    with_seed(23, |seed| {
        let mut cfg = SimConfig::new(seed);
        cfg.channel_bit_rates = vec![(26, 125_000)];
        let mut sim = Sim::from_topology(cfg, &Topology::star(1));
        let dst = sim.addr(NodeId(1));
        sim.inject(NodeId(0), dst, vec![0; 40]);
        sim.run_for(Duration::from_secs(1));
        let p = RadioParams::default();
        let sent = sim.records().iter().find(|r| r.kind == RecordKind::FrameSent).unwrap();
        let got = sim.records().iter().find(|r| r.kind == RecordKind::FrameReceived).unwrap();
        let mpdu = p.mac_overhead_unicast + p.lowpan_header + 40;
        assert_eq!(got.at - sent.at, p.airtime_at(mpdu, 125_000));
        assert_eq!(p.airtime_at(mpdu, 125_000), p.airtime(mpdu).saturating_mul(2));
    });
}

/// An interferer's load follows its schedule: no corruption or busy channel while it is off.
#[test]
fn interferer_load_follows_its_schedule() {
    with_seed(29, |seed| {
        let mut cfg = SimConfig::new(seed);
        cfg.radio.max_frame_retries = 0;
        let mut topo = Topology::star(1);
        let mut wifi = Interferer::constant(13, 0.0);
        wifi.load = vec![(Instant::from_secs(2), 28.5), (Instant::from_secs(4), 0.0)];
        wifi.corruption_prob = 0.5;
        topo.interferers.push(wifi);
        let mut sim = Sim::from_topology(cfg, &topo);
        let dst = sim.addr(NodeId(1));
        for k in 0..300u64 {
            sim.run_until(Instant::from_millis(20 * k));
            sim.inject(NodeId(0), dst, vec![0; 80]);
        }
        sim.run_for(Duration::from_secs(1));
        let hit: Vec<Instant> = sim
            .records()
            .iter()
            .filter(|r| matches!(r.reason, Some(DropReason::Interference | DropReason::ChannelBusy)))
            .map(|r| r.at)
            .collect();
        assert!(!hit.is_empty());
        assert!(hit.iter().all(|t| *t >= Instant::from_secs(2) && *t < Instant::from_millis(4100)), "{hit:?}");
    });
}

/// A processing delay postpones the endpoint's answer by exactly that much per received datagram.
#[test]
fn processing_delay_adds_to_the_exchange() {
    with_seed(2, |seed| {
        let rt = |delay: Duration| {
            let mut cfg = SimConfig::new(seed);
            cfg.processing_delay = delay;
            let mut sim = Sim::from_topology(cfg, &Topology::star(1));
            responders(&mut sim, [1], b"21.5");
            let h = client(&mut sim, 0, &[1], Pacing::AfterResponse);
            run_round(&mut sim, 0, h, Instant::from_secs(10)).response_time().unwrap()
        };
        assert_eq!(rt(Duration::from_millis(5)), rt(Duration::ZERO) + Duration::from_millis(10));
    });
}

/// A serial CPU with no room to queue (`rx_queue = Some(0)`) drops replies that arrive while it is busy,
/// after the radio acknowledged them, so only CoAP's retransmission recovers them; with room for all of
/// them nothing is lost and they are handled one `processing_delay` apart.
#[test]
fn busy_cpu_drops_what_it_cannot_queue() {
    with_seed(3, |seed| {
        let run = |rx_queue: Option<u16>| {
            let mut cfg = SimConfig::new(seed);
            cfg.processing_delay = Duration::from_millis(30);
            cfg.rx_queue = rx_queue;
            let mut sim = Sim::from_topology(cfg, &Topology::star(3));
            responders(&mut sim, [1, 2, 3], b"21.5");
            let h = client(&mut sim, 0, &[1, 2, 3], Pacing::Interval(Duration::ZERO));
            let rt = run_round(&mut sim, 0, h, Instant::from_secs(60)).response_time().unwrap();
            (rt, sim.counters(NodeId(0)).drops(DropReason::QueueOverflow))
        };
        let (fast, none_dropped) = run(Some(8));
        assert_eq!(none_dropped, 0);
        assert!(fast < Duration::from_millis(300), "{fast:?}");
        let (slow, dropped) = run(Some(0));
        assert!(dropped >= 1, "replies arriving while the CPU is busy are lost");
        assert!(slow >= Duration::from_secs(2), "recovered by a CoAP retransmission: {slow:?}");
    });
}

/// The capture effect: of two overlapping frames from hidden terminals, the one 10 dB stronger survives when
/// the receiver locked on it first, or when it started within the weaker one's synchronisation header
/// (preamble + SFD, 160 µs); the weaker never survives the stronger. Below the 3 dB threshold, and with
/// capture off, every overlap destroys both.
#[test]
fn capture_keeps_the_stronger_of_two_overlapping_frames() {
    for_seeds(&[31, 32, 33], |seed| {
        // Nodes 1 and 2 reach the gateway but not each other, so CSMA/CA cannot keep them apart.
        let topo = |weak_dbm: f64| {
            let mut t = hidden_terminals();
            t.link_rssi = vec![(0, 1, -60.0), (0, 2, weak_dbm)];
            t
        };
        let p = RadioParams::default();
        let shr = Duration::from_micros(160);
        // Per round: (start of 1's frame, start of 2's frame, 1's received, 2's received).
        let run = |t: &Topology, capture: Option<f64>| {
            let mut cfg = SimConfig::new(seed);
            cfg.radio.capture_threshold_db = capture;
            cfg.radio.max_frame_retries = 0;
            let mut sim = Sim::from_topology(cfg, t);
            let gw = sim.addr(NodeId(0));
            let mut pairs = Vec::new();
            for round in 0..150u64 {
                sim.run_until(Instant::from_millis(50 * round));
                pairs.push((sim.inject(NodeId(1), gw, vec![0; 90]), sim.inject(NodeId(2), gw, vec![0; 90])));
            }
            sim.run_for(Duration::from_secs(1));
            let recs = sim.records();
            let start = |d| recs.iter().find(|r| r.kind == RecordKind::FrameSent && r.datagram == d).unwrap().at;
            let got = |d| recs.iter().any(|r| r.kind == RecordKind::FrameReceived && r.datagram == d);
            pairs.iter().map(|&(a, b)| (start(a), start(b), got(a), got(b))).collect::<Vec<_>>()
        };
        let air = p.airtime(p.mac_overhead_unicast + p.lowpan_header + 90);
        let overlap = |a: Instant, b: Instant| a.max(b) < a.min(b) + air;
        let (mut strong_kept, mut both_lost) = (0, 0);
        for (a, b, got_a, got_b) in run(&topo(-70.0), Some(3.0)) {
            if !overlap(a, b) {
                assert!(got_a && got_b, "no overlap, no loss");
            } else if a <= b || a < b + shr {
                assert!(got_a && !got_b, "the stronger frame (locked first or in the SHR) survives, the weaker not");
                strong_kept += 1;
            } else {
                assert!(!got_a && !got_b, "locked on the weak frame: the strong one corrupts it and is missed");
                both_lost += 1;
            }
        }
        assert!(strong_kept > 5 && both_lost > 5, "both orders occur ({strong_kept}, {both_lost})");
        for (t, capture) in [(topo(-61.0), Some(3.0)), (topo(-70.0), None)] {
            let rounds = run(&t, capture);
            let overlapping = rounds.iter().filter(|(a, b, _, _)| overlap(*a, *b)).count();
            assert!(overlapping > 10);
            for (a, b, got_a, got_b) in rounds {
                assert_eq!(got_a && got_b, !overlap(a, b), "1 dB apart or no capture: an overlap loses both");
                assert_eq!(got_a, got_b);
            }
        }
    });
}
