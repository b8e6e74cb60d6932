//! Network descriptions and their builders: nodes with roles, positions, channels and addresses; who hears
//! whom; wired links; link models; interferers — and the routing tree derived from them.
//!
//! # What it owns
//! The *static* shape of a network, as plain data a scenario file can be turned into, and the
//! deterministic computation of the RPL-like routing tree (RFC 6550, storing mode) from it. It never
//! simulates anything; [`crate::Sim::from_topology`] turns it into a running network.
//!
//! # Routing tree
//! Each [`Role::Gateway`] node is the DODAG root of the nodes on its channel. A node's parent is its
//! explicit [`NodeSpec::parent`] if given, otherwise a neighbour one hop closer to the root (a breadth-first
//! search, i.e. shortest paths in hops, which is what RPL's OF0 with a hop-count rank converges to on
//! uniform links). Among the candidates one hop closer, [`ParentChoice`] decides: by default the one heard
//! strongest ([`crate::propagation`]), as RPL's link-quality metrics tend to; or the one with the fewest
//! children so far, for a balanced tree. Either way the choice is deterministic.
//!
//! # Seed 000 Table 7
//! [`Topology::layered`] places nodes in hop layers (every node of layer k hears every node of layers k−1,
//! k and k+1) so the hop counts are exactly the layer numbers; [`Topology::testbed_table7`] picks layer sizes
//! that give Table 7's average and maximum hop counts for groups of 5, 10, 20, 29 and 40.

use crate::loss::{Interferer, LinkModel};
use crate::propagation::Propagation;
use corral_proto::{Duration, Rng};
use std::net::IpAddr;

/// What a node is in the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A border router: the routing root of its radio channel, usually with a wired side.
    Gateway,
    /// A radio node that routes (RPL router) and hosts CoAP services.
    Device,
    /// A host with only wired interfaces (a client on the Internet side).
    Host,
}

/// One node of a topology.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSpec {
    pub role: Role,
    /// Position in metres (for radius-based neighbourhoods and interferer reach).
    pub position: Option<(f64, f64)>,
    /// IEEE 802.15.4 channel (11-26); `None` for a node without a radio.
    pub channel: Option<u8>,
    /// The node's IP address; `None` gives `fd00::<index + 1>`.
    pub addr: Option<IpAddr>,
    /// A static routing parent (index), overriding the shortest-path choice.
    pub parent: Option<usize>,
}

impl NodeSpec {
    pub fn new(role: Role, channel: Option<u8>) -> NodeSpec {
        NodeSpec { role, position: None, channel, addr: None, parent: None }
    }

    pub fn at(mut self, x: f64, y: f64) -> NodeSpec {
        self.position = Some((x, y));
        self
    }
}

/// A wired (Ethernet-like) point-to-point link, full duplex.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WiredSpec {
    pub a: usize,
    pub b: usize,
    /// Propagation delay.
    pub delay: Duration,
    /// Bit rate in bit/s.
    pub bandwidth: u64,
    /// Independent loss probability per datagram.
    pub loss: f64,
}

impl WiredSpec {
    /// A 100 Mbit/s link with 1 ms of delay and no loss.
    pub fn ethernet(a: usize, b: usize) -> WiredSpec {
        WiredSpec { a, b, delay: Duration::from_millis(1), bandwidth: 100_000_000, loss: 0.0 }
    }
}

/// Who hears whom on the radio (within one channel; different channels never interact).
#[derive(Debug, Clone, PartialEq)]
pub enum Neighbors {
    /// Symmetric pairs of indices.
    Explicit(Vec<(usize, usize)>),
    /// Nodes within this distance of each other (positions required).
    Radius(f64),
}

/// A whole network description. Build one with the constructors below or by filling the fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    pub nodes: Vec<NodeSpec>,
    pub neighbors: Neighbors,
    pub wired: Vec<WiredSpec>,
    /// Loss model of every radio link without an override.
    pub default_link: LinkModel,
    /// Per-link overrides `(a, b, model)`, applied in both directions.
    pub link_models: Vec<(usize, usize, LinkModel)>,
    pub interferers: Vec<Interferer>,
    /// How strongly each node hears its neighbours (capture effect, parent choice).
    pub propagation: Propagation,
    /// Per-link received powers `(a, b, dBm)` that replace [`Topology::propagation`]'s, both directions (e.g.
    /// RSSI measured on a testbed).
    pub link_rssi: Vec<(usize, usize, f64)>,
    /// How a node picks its routing parent among the neighbours one hop closer to the root.
    pub parent_choice: ParentChoice,
}

/// How [`Topology::parents`] picks a node's parent among its neighbours one hop closer to the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ParentChoice {
    /// The one it hears strongest ([`Topology::propagation`]; ties: the lowest index), as RPL's MRHOF with
    /// ETX (RFC 6719) tends to: the stronger link loses fewer frames. It is also why seed 000's testbed was
    /// multi-hop at all in a 66 m room a 0 dBm mote can span — RPL chose short, strong links over long ones.
    #[default]
    StrongestLink,
    /// The one with the fewest children so far (ties: the lowest index): a balanced tree, every parent
    /// forwarding for as few nodes as possible.
    FewestChildren,
}

/// The default IEEE 802.15.4 channel of the builders (seed 000's GW1).
pub const DEFAULT_CHANNEL: u8 = 26;

impl Topology {
    /// An empty topology with explicit neighbourhoods.
    pub fn new() -> Topology {
        Topology {
            nodes: Vec::new(),
            neighbors: Neighbors::Explicit(Vec::new()),
            wired: Vec::new(),
            default_link: LinkModel::Perfect,
            link_models: Vec::new(),
            interferers: Vec::new(),
            propagation: Propagation::default(),
            link_rssi: Vec::new(),
            parent_choice: ParentChoice::default(),
        }
    }

    /// Adds a node; returns its index.
    pub fn add(&mut self, spec: NodeSpec) -> usize {
        self.nodes.push(spec);
        self.nodes.len() - 1
    }

    /// Declares `a` and `b` radio neighbours (explicit neighbourhoods only).
    pub fn connect(&mut self, a: usize, b: usize) {
        if let Neighbors::Explicit(pairs) = &mut self.neighbors {
            pairs.push((a, b));
        }
    }

    /// Adds a wired link.
    pub fn wire(&mut self, spec: WiredSpec) {
        self.wired.push(spec);
    }

    /// A gateway (node 0) and `leaves` devices, all in one collision domain.
    pub fn star(leaves: usize) -> Topology {
        let mut t = Topology::new();
        let n = leaves + 1;
        for i in 0..n {
            let role = if i == 0 { Role::Gateway } else { Role::Device };
            let angle = i as f64 / leaves.max(1) as f64 * std::f64::consts::TAU;
            let (x, y) = if i == 0 { (0.0, 0.0) } else { (10.0 * angle.cos(), 10.0 * angle.sin()) };
            t.add(NodeSpec::new(role, Some(DEFAULT_CHANNEL)).at(x, y));
        }
        for a in 0..n {
            for b in a + 1..n {
                t.connect(a, b);
            }
        }
        t
    }

    /// A chain: gateway 0, then nodes 1..n each hearing only its predecessor and successor.
    pub fn line(n: usize) -> Topology {
        let mut t = Topology::new();
        for i in 0..n {
            let role = if i == 0 { Role::Gateway } else { Role::Device };
            t.add(NodeSpec::new(role, Some(DEFAULT_CHANNEL)).at(10.0 * i as f64, 0.0));
            if i > 0 {
                t.connect(i - 1, i);
            }
        }
        t
    }

    /// A `w × h` grid with `spacing` metres between nodes and a radio `radius`; the gateway is node 0 in
    /// the corner.
    pub fn grid(w: usize, h: usize, spacing: f64, radius: f64) -> Topology {
        let mut t = Topology::new();
        t.neighbors = Neighbors::Radius(radius);
        for i in 0..w * h {
            let role = if i == 0 { Role::Gateway } else { Role::Device };
            t.add(NodeSpec::new(role, Some(DEFAULT_CHANNEL)).at((i % w) as f64 * spacing, (i / w) as f64 * spacing));
        }
        t
    }

    /// `n` nodes placed uniformly at random in a `width × height` area with a radio `radius`, gateway (node
    /// 0) at the centre. Placements are redrawn (from the same seeded stream) until the network is connected;
    /// `None` after 1000 attempts.
    pub fn random_geometric(n: usize, width: f64, height: f64, radius: f64, seed: u64) -> Option<Topology> {
        let mut rng = Rng::stream(seed, 0x7090_0000);
        for _ in 0..1000 {
            let mut t = Topology::new();
            t.neighbors = Neighbors::Radius(radius);
            for i in 0..n {
                let (role, x, y) = if i == 0 {
                    (Role::Gateway, width / 2.0, height / 2.0)
                } else {
                    (Role::Device, rng.f64() * width, rng.f64() * height)
                };
                t.add(NodeSpec::new(role, Some(DEFAULT_CHANNEL)).at(x, y));
            }
            if t.hop_counts().iter().all(Option::is_some) {
                return Some(t);
            }
        }
        None
    }

    /// A gateway and devices in hop layers: `layers[k]` devices at exactly k + 1 hops. Every node of layer k
    /// hears every node of layers k − 1, k and k + 1 (layer 0 hears the gateway), nothing further.
    pub fn layered(layers: &[usize]) -> Topology {
        let mut t = Topology::new();
        t.add(NodeSpec::new(Role::Gateway, Some(DEFAULT_CHANNEL)).at(0.0, 0.0));
        let mut layer_nodes: Vec<Vec<usize>> = vec![vec![0]];
        for (k, &size) in layers.iter().enumerate() {
            let mut this = Vec::new();
            for j in 0..size {
                let y = (j as f64 - (size as f64 - 1.0) / 2.0) * 5.0;
                this.push(t.add(NodeSpec::new(Role::Device, Some(DEFAULT_CHANNEL)).at(20.0 * (k + 1) as f64, y)));
            }
            layer_nodes.push(this);
        }
        for k in 1..layer_nodes.len() {
            for (x, &a) in layer_nodes[k].iter().enumerate() {
                for &b in &layer_nodes[k - 1] {
                    t.connect(a, b);
                }
                for &b in &layer_nodes[k][x + 1..] {
                    t.connect(a, b);
                }
            }
        }
        t
    }

    /// Seed 000 Table 7: a gateway and `group` members (5, 10, 20, 29 or 40) whose average and maximum hop
    /// counts are the table's (1/1, 1.4/2, 1.7/3, 1.8/3 (1.79), 2.4/5). Other sizes get a star.
    pub fn testbed_table7(group: usize) -> Topology {
        let layers: &[usize] = match group {
            5 => &[5],
            10 => &[6, 4],
            20 => &[9, 8, 3],
            29 => &[11, 13, 5],
            40 => &[11, 12, 10, 4, 3],
            n => return Topology::star(n),
        };
        Topology::layered(layers)
    }

    /// The power at which `b` hears `a`, dBm: a [`Topology::link_rssi`] override or the propagation model.
    pub fn rx_dbm(&self, a: usize, b: usize) -> f64 {
        self.link_rssi
            .iter()
            .rev()
            .find(|&&(x, y, _)| (x, y) == (a, b) || (x, y) == (b, a))
            .map_or_else(|| self.propagation.rx_dbm(self.link_distance(a, b), a, b), |&(_, _, dbm)| dbm)
    }

    /// How far apart nodes `a` and `b` are for the propagation model, metres: their distance in a
    /// [`Neighbors::Radius`] topology, whose positions are meaningful; 1 m otherwise, where positions are
    /// for drawing only and every declared link gets the same mean power.
    fn link_distance(&self, a: usize, b: usize) -> f64 {
        match (&self.neighbors, self.nodes[a].position, self.nodes[b].position) {
            (Neighbors::Radius(_), Some((xa, ya)), Some((xb, yb))) => (xa - xb).hypot(ya - yb),
            _ => 1.0,
        }
    }

    /// Adds a wired host (a client on the Internet side) linked to `gateway`; returns its index.
    pub fn add_wired_host(&mut self, gateway: usize, spec: WiredSpec) -> usize {
        let h = self.add(NodeSpec::new(Role::Host, None));
        self.wired.push(WiredSpec { a: h, b: gateway, ..spec });
        h
    }

    /// Radio neighbour lists (sorted, deduplicated, same channel only).
    pub fn adjacency(&self) -> Vec<Vec<usize>> {
        let n = self.nodes.len();
        let mut adj = vec![Vec::new(); n];
        let same_channel = |a: usize, b: usize| {
            a != b && self.nodes[a].channel.is_some() && self.nodes[a].channel == self.nodes[b].channel
        };
        match &self.neighbors {
            Neighbors::Explicit(pairs) => {
                for &(a, b) in pairs {
                    if a < n && b < n && same_channel(a, b) {
                        adj[a].push(b);
                        adj[b].push(a);
                    }
                }
            }
            Neighbors::Radius(r) if r.is_finite() && *r > 0.0 => {
                // Nodes binned into square cells of side r: a pair within r lies in the same or adjacent
                // cells, so only those are compared — O(n · neighbours) instead of O(n²), which at 10,000
                // nodes was two thirds of a building benchmark's wall time. Same pairs, same distance test.
                let cell = |(x, y): (f64, f64)| ((x / r).floor() as i64, (y / r).floor() as i64);
                let mut cells: std::collections::HashMap<(i64, i64), Vec<usize>> = std::collections::HashMap::new();
                for (i, spec) in self.nodes.iter().enumerate() {
                    if let Some(p) = spec.position {
                        cells.entry(cell(p)).or_default().push(i);
                    }
                }
                for (a, spec) in self.nodes.iter().enumerate() {
                    let Some((xa, ya)) = spec.position else { continue };
                    let (cx, cy) = cell((xa, ya));
                    for dx in -1..=1 {
                        for dy in -1..=1 {
                            for &b in cells.get(&(cx + dx, cy + dy)).map_or(&[][..], Vec::as_slice) {
                                let Some((xb, yb)) = self.nodes[b].position else { continue };
                                if b > a && same_channel(a, b) && (xa - xb).hypot(ya - yb) <= *r {
                                    adj[a].push(b);
                                    adj[b].push(a);
                                }
                            }
                        }
                    }
                }
            }
            Neighbors::Radius(r) => {
                for a in 0..n {
                    for b in a + 1..n {
                        if let (Some((xa, ya)), Some((xb, yb))) = (self.nodes[a].position, self.nodes[b].position) {
                            if same_channel(a, b) && (xa - xb).hypot(ya - yb) <= *r {
                                adj[a].push(b);
                                adj[b].push(a);
                            }
                        }
                    }
                }
            }
        }
        for l in &mut adj {
            l.sort_unstable();
            l.dedup();
        }
        adj
    }

    /// The radio routing parent of every node (see the module docs); `None` for roots, hosts and nodes no
    /// gateway reaches.
    pub fn parents(&self) -> Vec<Option<usize>> {
        let adj = self.adjacency();
        let n = self.nodes.len();
        let mut parent: Vec<Option<usize>> = vec![None; n];
        let mut hops: Vec<Option<u32>> = vec![None; n];
        let mut children = vec![0usize; n];
        let mut frontier: Vec<usize> = (0..n).filter(|&i| self.nodes[i].role == Role::Gateway).collect();
        for &g in &frontier {
            hops[g] = Some(0);
        }
        let mut depth = 0;
        while !frontier.is_empty() {
            depth += 1;
            let mut next: Vec<usize> = Vec::new();
            for &u in &frontier {
                for &v in &adj[u] {
                    if hops[v].is_none() && self.nodes[v].role != Role::Gateway {
                        hops[v] = Some(depth);
                        next.push(v);
                    }
                }
            }
            next.sort_unstable();
            for &v in &next {
                let cands = adj[v].iter().copied().filter(|&u| hops[u] == Some(depth - 1));
                let best = match self.parent_choice {
                    ParentChoice::StrongestLink => cands
                        .map(|u| (u, self.rx_dbm(u, v)))
                        .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
                        .map(|(u, _)| u),
                    ParentChoice::FewestChildren => cands.min_by_key(|&u| (children[u], u)),
                };
                if let Some(u) = best {
                    parent[v] = Some(u);
                    children[u] += 1;
                }
            }
            frontier = next;
        }
        for (i, spec) in self.nodes.iter().enumerate() {
            if let Some(p) = spec.parent {
                parent[i] = Some(p);
            }
        }
        parent
    }

    /// Radio hop count from every node to its gateway (`Some(0)` for gateways, `None` if unreachable).
    pub fn hop_counts(&self) -> Vec<Option<u32>> {
        let parent = self.parents();
        (0..self.nodes.len())
            .map(|i| {
                if self.nodes[i].role == Role::Gateway {
                    return Some(0);
                }
                let mut hops = 0;
                let mut at = i;
                while let Some(p) = parent[at] {
                    hops += 1;
                    at = p;
                    if hops > self.nodes.len() as u32 {
                        return None;
                    }
                }
                (self.nodes[at].role == Role::Gateway && at != i).then_some(hops)
            })
            .collect()
    }
}

impl Default for Topology {
    fn default() -> Self {
        Topology::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The binned neighbour search finds exactly the pairs of the all-pairs one, negative coordinates and
    /// nodes on cell borders included.
    #[test]
    fn radius_adjacency_matches_all_pairs() {
        let mut t = Topology::random_geometric(400, 120.0, 80.0, 10.0, 7).expect("connected");
        t.add(NodeSpec::new(Role::Device, Some(DEFAULT_CHANNEL)).at(-10.0, 0.0));
        t.add(NodeSpec::new(Role::Device, Some(DEFAULT_CHANNEL)).at(-20.0, 0.0));
        t.add(NodeSpec::new(Role::Device, Some(DEFAULT_CHANNEL)).at(0.0, 10.0));
        let n = t.nodes.len();
        let all_pairs: Vec<Vec<usize>> = (0..n)
            .map(|a| {
                let (xa, ya) = t.nodes[a].position.unwrap();
                (0..n)
                    .filter(|&b| {
                        let (xb, yb) = t.nodes[b].position.unwrap();
                        a != b && (xa - xb).hypot(ya - yb) <= 10.0
                    })
                    .collect()
            })
            .collect();
        assert_eq!(t.adjacency(), all_pairs);
    }

    fn avg_max(t: &Topology) -> (f64, u32) {
        let h: Vec<u32> = t.hop_counts().into_iter().skip(1).map(|h| h.expect("connected")).collect();
        (h.iter().sum::<u32>() as f64 / h.len() as f64, *h.iter().max().unwrap())
    }

    #[test]
    fn table7_hop_counts() {
        for (g, avg, max) in [(5, 1.0, 1), (10, 1.4, 2), (20, 1.7, 3), (29, 1.8, 3), (40, 2.4, 5)] {
            let t = Topology::testbed_table7(g);
            assert_eq!(t.nodes.len(), g + 1);
            let (a, m) = avg_max(&t);
            assert!((a - avg).abs() < 0.05, "group {g}: average {a}, want {avg}");
            assert_eq!(m, max, "group {g}");
        }
    }

    #[test]
    fn line_and_grid_and_parents_spread() {
        assert_eq!(avg_max(&Topology::line(5)), (2.5, 4));
        let g = Topology::grid(4, 4, 10.0, 10.5);
        assert_eq!(avg_max(&g).1, 6);
        let mut t = Topology::layered(&[2, 4]);
        let p = t.parents();
        // By default each layer-2 node takes the layer-1 node it hears strongest.
        for (v, parent) in p.iter().enumerate().skip(3) {
            let stronger = |a: usize, b: usize| t.rx_dbm(a, v) > t.rx_dbm(b, v);
            assert!(*parent == Some(1) && stronger(1, 2) || *parent == Some(2) && stronger(2, 1), "node {v}");
        }
        // Balanced: four layer-2 nodes spread over the two layer-1 parents.
        t.parent_choice = ParentChoice::FewestChildren;
        let p = t.parents();
        assert_eq!(p[3..].iter().filter(|x| **x == Some(1)).count(), 2);
    }

    #[test]
    fn strongest_link_follows_distance_in_radius_topologies() {
        // A grid without shadowing: every node's parent is its nearest neighbour one hop closer.
        let mut g = Topology::grid(5, 5, 10.0, 15.0);
        g.propagation.shadowing_db = 0.0;
        let pos = |i: usize| g.nodes[i].position.unwrap();
        let hops = g.hop_counts();
        for (v, p) in g.parents().iter().enumerate().skip(1) {
            let p = p.expect("connected");
            let d = |u: usize| (pos(u).0 - pos(v).0).hypot(pos(u).1 - pos(v).1);
            for u in g.adjacency()[v].iter().copied().filter(|&u| hops[u] == hops[p]) {
                assert!(d(p) <= d(u), "node {v}: parent {p} at {}, {u} at {}", d(p), d(u));
            }
        }
    }

    #[test]
    fn random_geometric_is_seeded_and_connected() {
        let a = Topology::random_geometric(50, 100.0, 100.0, 25.0, 7).unwrap();
        let b = Topology::random_geometric(50, 100.0, 100.0, 25.0, 7).unwrap();
        assert_eq!(a, b);
        assert!(a.hop_counts().iter().all(Option::is_some));
    }
}
