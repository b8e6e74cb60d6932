//! A byte bound on a node's transmit queue (RIOT GNRC's packet buffer, `RadioParams::queue_bytes`): what
//! does not fit is dropped and counted, whatever the datagram count allows; without the bound nothing is.

use corral_proto::Duration;
use corral_sim::seed::with_seed;
use corral_sim::{DropReason, NodeId, RecordKind, Sim, SimConfig, Topology};

/// Injects ten 500-byte datagrams at node 0 for its neighbour, at once; returns (overflows, delivered).
fn burst(queue_bytes: Option<usize>, seed: u64) -> (u64, usize) {
    let mut cfg = SimConfig::new(seed);
    cfg.radio.queue_capacity = 64;
    cfg.radio.queue_bytes = queue_bytes;
    let mut sim = Sim::from_topology(cfg, &Topology::line(2));
    let dst = sim.addr(NodeId(1));
    for _ in 0..10 {
        sim.inject(NodeId(0), dst, vec![0; 500]);
    }
    sim.run_for(Duration::from_secs(10));
    let delivered = sim.records().iter().filter(|r| r.kind == RecordKind::Delivered).count();
    (sim.counters(NodeId(0)).drops(DropReason::QueueOverflow), delivered)
}

#[test]
fn a_full_packet_buffer_drops_what_does_not_fit() {
    with_seed(29, |seed| {
        // 6144 B hold 11 datagrams of 548 B (500 + 48 of IPv6 and UDP headers); 2000 B hold 3.
        assert_eq!(burst(None, seed), (0, 10), "no byte bound: all ten go through");
        assert_eq!(burst(Some(6144), seed), (0, 10), "GNRC's default buffer holds the burst");
        assert_eq!(burst(Some(2000), seed), (7, 3), "a 2000-byte buffer holds three");
    });
}
