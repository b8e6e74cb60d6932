//! The network layer's tables: which node has which address, the members of each multicast group and
//! the wired links (the routing tree itself lives in the nodes: parent, children, tree intervals).
//!
//! Owns: the address map, the group memberships, the wired links' queues and their loss stream. Must
//! never: change a node's place in the routing tree (that is `Sim::build_routes`, once, at construction).

use super::*;

/// A wired link between two nodes.
pub(super) struct WiredLink {
    pub(super) spec: WiredSpec,
    /// Per direction (a→b, b→a): when the transmitter is free again.
    pub(super) free_at: [Instant; 2],
}

/// The network layer's tables (see the module docs).
pub(super) struct Routing {
    pub(super) by_addr: HashMap<IpAddr, u32>,
    /// Members of each multicast group: (the member's tree position, node).
    pub(super) groups: HashMap<IpAddr, Vec<(u32, u32)>>,
    pub(super) wired: Vec<WiredLink>,
    /// Loss draws of the wired links.
    pub(super) wired_rng: Rng,
}

impl Routing {
    pub(super) fn new(seed: u64, by_addr: HashMap<IpAddr, u32>) -> Routing {
        Routing { by_addr, groups: HashMap::new(), wired: Vec::new(), wired_rng: Rng::stream(seed, 0x4_0000_0000) }
    }

    /// Adds a wired link; returns its index.
    pub(super) fn add_wired(&mut self, spec: WiredSpec) -> u32 {
        let l = self.wired.len() as u32;
        self.wired.push(WiredLink { spec, free_at: [Instant::ZERO; 2] });
        l
    }
}
