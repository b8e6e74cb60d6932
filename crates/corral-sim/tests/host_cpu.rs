//! The CPU model ([`SimConfig::processing_delay`], [`SimConfig::rx_queue`]) is a mote's: a wired host — a
//! PC on the Ethernet side — takes every datagram at once. Charging it a mote's serial CPU made an empty
//! ACK and the separate response right behind it queue up at seed 000's client (fig14's ACK_TIMEOUT 2 s
//! was 35 ms slower than 1 s with no interference at all).

use corral_proto::{Duration, Instant};
use corral_sim::{DropReason, NodeId, RecordKind, Sim, SimConfig, Topology, WiredSpec};

/// Two datagrams 15 ms apart from the gateway to its mote or (`to_host`) to its wired host, on a network
/// whose nodes' CPU takes 50 ms with no room to queue: how many were dropped there as queue overflow.
fn dropped(to_host: bool) -> u64 {
    let mut topo = Topology::star(1);
    let host = topo.add_wired_host(0, WiredSpec::ethernet(0, 0));
    let mut cfg = SimConfig::new(7);
    cfg.processing_delay = Duration::from_millis(50);
    cfg.rx_queue = Some(0);
    let mut sim = Sim::from_topology(cfg, &topo);
    let dst_node = if to_host { host } else { 1 };
    let dst = sim.addr(NodeId(dst_node as u32));
    for k in 0..2u64 {
        sim.run_until(Instant::from_millis(15 * k));
        sim.inject(NodeId(0), dst, vec![0; 20]);
    }
    sim.run_for(Duration::from_secs(1));
    let delivered = sim.records().iter().filter(|r| r.kind == RecordKind::Delivered && r.node.0 as usize == dst_node);
    assert_eq!(delivered.count() as u64 + sim.counters(NodeId(dst_node as u32)).drops(DropReason::QueueOverflow), 2);
    sim.counters(NodeId(dst_node as u32)).drops(DropReason::QueueOverflow)
}

#[test]
fn a_wired_host_takes_datagrams_without_a_motes_cpu_delay() {
    // The mote drops the second datagram: it arrives while the first still has the CPU.
    assert_eq!(dropped(false), 1, "a mote's serial CPU with no waiting slot");
    // The host takes both.
    assert_eq!(dropped(true), 0, "the wired host is a PC");
}
