//! Counter snapshots: the simulator's counters (frames, MAC retries, busy CCAs, drops by reason, per link
//! and per node, the gateways' CoAP retransmissions) taken before a query, or a query phase, and differenced
//! after it into rows.

use super::Network;
use crate::record::{Facts, LinkRow, NodeRole, NodeRow, PointRow};
use corral_proto::Instant;
use corral_sim::{NodeId, Role, Sim};
use std::collections::BTreeMap;

/// Totals of the counters a query's row differences.
#[derive(Debug, Clone, Copy, Default)]
pub struct Totals {
    pub frames: u64,
    pub mac_retries: u64,
    pub coap_retx: u64,
}

/// Frames and MAC retries of every node, CoAP retransmissions of the `gateways`' endpoints, so far.
pub fn totals(sim: &Sim, gateways: &[usize]) -> Totals {
    let mut t = Totals::default();
    for i in 0..sim.len() {
        let c = sim.counters(NodeId(i as u32));
        t.frames += c.frames_sent;
        t.mac_retries += c.mac_retries;
    }
    for &g in gateways {
        if let Some(n) = sim.node(NodeId(g as u32)) {
            t.coap_retx += n.endpoint().stats().retransmissions;
        }
    }
    t
}

/// Frames lost to interference, to collisions (incl. half-duplex), datagrams dropped after the MAC gave up
/// (or found the channel busy) and datagrams a full CPU queue dropped, over all links and nodes so far.
#[derive(Debug, Clone, Copy, Default)]
struct Drops {
    interference: u64,
    collision: u64,
    mac: u64,
    cpu: u64,
}

impl Drops {
    fn of(sim: &Sim) -> Drops {
        use corral_sim::DropReason as R;
        let mut out = Drops::default();
        for (_, _, c) in sim.link_counters() {
            out.interference += c.lost(R::Interference);
            out.collision += c.lost(R::Collision) + c.lost(R::HalfDuplex);
        }
        for i in 0..sim.len() {
            let c = sim.counters(NodeId(i as u32));
            out.mac += c.drops(R::MacRetriesExhausted) + c.drops(R::ChannelBusy);
            out.cpu += c.drops(R::QueueOverflow);
        }
        out
    }
}

/// The counters at the start of a query phase, to difference at its end ([`QueryPhase::finish`]).
pub struct QueryPhase {
    start: Instant,
    links: BTreeMap<(u32, u32), (u64, u64, u64)>,
    nodes: Vec<(u64, u64, u64)>,
    totals: Totals,
    busy: u64,
    drops: Drops,
}

/// How a point's set-up went, for its row: whether it succeeded and how long it took, ms.
pub struct Created {
    pub created: bool,
    pub create_ms: f64,
}

impl QueryPhase {
    /// Snapshots the counters now.
    pub fn start(sim: &Sim, net: &Network) -> QueryPhase {
        QueryPhase {
            start: sim.now(),
            links: sim
                .link_counters()
                .into_iter()
                .map(|(a, b, c)| ((a.0, b.0), (c.frames, c.retransmissions, c.received)))
                .collect(),
            nodes: (0..sim.len())
                .map(|i| {
                    let c = sim.counters(NodeId(i as u32));
                    (c.frames_sent, c.frames_received, c.datagrams_forwarded)
                })
                .collect(),
            totals: totals(sim, &net.gateways),
            busy: busy_ccas(sim),
            drops: Drops::of(sim),
        }
    }

    /// The phase's rows: the point's (with the members' hop counts and `facts`), every link that carried
    /// or received a frame, every node.
    pub fn finish(
        self,
        sim: &Sim,
        net: &Network,
        (point, seed): (usize, u64),
        created: Created,
        facts: Facts,
    ) -> (PointRow, Vec<LinkRow>, Vec<NodeRow>) {
        let hops = net.topology.hop_counts();
        let member_hops: Vec<u32> = net.members.iter().flatten().filter_map(|&m| hops[m]).collect();
        let avg_hops = member_hops.iter().sum::<u32>() as f64 / member_hops.len().max(1) as f64;
        let max_hops = member_hops.iter().copied().max().unwrap_or(0);
        let mut links = Vec::new();
        for (from, to, c) in sim.link_counters() {
            let (f0, r0, x0) = self.links.get(&(from.0, to.0)).copied().unwrap_or_default();
            let row = LinkRow {
                point,
                from: from.0,
                to: to.0,
                frames: c.frames - f0,
                retransmissions: c.retransmissions - r0,
                received: c.received - x0,
            };
            if row.frames > 0 || row.received > 0 {
                links.push(row);
            }
        }
        let mut nodes = Vec::new();
        for (i, &(s0, r0, f0)) in self.nodes.iter().enumerate() {
            let c = sim.counters(NodeId(i as u32));
            let role = match sim.role(NodeId(i as u32)) {
                Role::Gateway => NodeRole::Gateway,
                Role::Device => NodeRole::Device,
                Role::Host => NodeRole::Client,
            };
            nodes.push(NodeRow {
                point,
                node: i as u32,
                role,
                hops: hops.get(i).copied().flatten().unwrap_or(0),
                frames_sent: c.frames_sent - s0,
                frames_received: c.frames_received - r0,
                datagrams_forwarded: c.datagrams_forwarded - f0,
            });
        }
        let (max_link_frames, max_link) = links
            .iter()
            .map(|l| (l.frames, format!("{}->{}", l.from, l.to)))
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
            .unwrap_or((0, String::new()));
        let (max_node_frames, max_node) = nodes
            .iter()
            .map(|n| (n.frames_sent + n.frames_received, n.node))
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
            .unwrap_or((0, 0));
        let after = totals(sim, &net.gateways);
        let drops = Drops::of(sim);
        let row = PointRow {
            point,
            seed,
            created: created.created,
            create_ms: created.create_ms,
            avg_hops,
            max_hops,
            frames: after.frames - self.totals.frames,
            mac_retries: after.mac_retries - self.totals.mac_retries,
            busy_ccas: busy_ccas(sim) - self.busy,
            coap_retx: after.coap_retx - self.totals.coap_retx,
            drops_interference: drops.interference - self.drops.interference,
            drops_collision: drops.collision - self.drops.collision,
            drops_mac: drops.mac - self.drops.mac,
            drops_cpu: drops.cpu - self.drops.cpu,
            max_link_frames,
            max_link,
            max_node_frames,
            max_node,
            events: sim.events_processed(),
            window_s: (sim.now() - self.start).as_micros() as f64 / 1e6,
            facts,
        };
        (row, links, nodes)
    }
}

fn busy_ccas(sim: &Sim) -> u64 {
    (0..sim.len()).map(|i| sim.counters(NodeId(i as u32)).busy_ccas).sum()
}
