//! The network layer's tables: which node has which address, the members of each multicast group and
//! the wired links (the routing tree itself lives in the nodes: parent, children, tree intervals).
//!
//! Owns: the address map, the group memberships, the wired links' queues, outages and loss streams. Must
//! never: change a node's place in the routing tree (that is `Sim::build_routes`, once, at construction).

use super::*;

/// A wired link between two nodes.
pub(super) struct WiredLink {
    pub(super) spec: WiredSpec,
    /// Per direction (a→b, b→a): when the transmitter is free again.
    pub(super) free_at: [Instant; 2],
    /// Timed outages of the link, both directions ([`Sim::set_wired_outages`]), and where they are.
    pub(super) outages: Option<(Outages, OutageState)>,
}

/// The network layer's tables (see the module docs).
pub(super) struct Routing {
    pub(super) by_addr: HashMap<IpAddr, u32>,
    /// Members of each multicast group: (the member's tree position, node).
    pub(super) groups: HashMap<IpAddr, Vec<(u32, u32)>>,
    pub(super) wired: Vec<WiredLink>,
    /// Loss draws of the wired links.
    pub(super) wired_rng: Rng,
    /// Outage draws of the wired links (a stream of its own, so that they do not depend on the traffic).
    pub(super) outage_rng: Rng,
    /// Whole-datagram discard at the destination by fragment count ([`Sim::set_message_discard`]).
    pub(super) discard: Vec<f64>,
    pub(super) discard_at: Option<u32>,
    pub(super) discard_rng: Rng,
}

impl Routing {
    pub(super) fn new(seed: u64, by_addr: HashMap<IpAddr, u32>) -> Routing {
        Routing {
            by_addr,
            groups: HashMap::new(),
            wired: Vec::new(),
            wired_rng: Rng::stream(seed, 0x4_0000_0000),
            outage_rng: Rng::stream(seed, 0x4_0000_0001),
            discard: Vec::new(),
            discard_at: None,
            discard_rng: Rng::stream(seed, 0x4_0000_0002),
        }
    }

    /// Adds a wired link; returns its index.
    pub(super) fn add_wired(&mut self, spec: WiredSpec) -> u32 {
        let l = self.wired.len() as u32;
        self.wired.push(WiredLink { spec, free_at: [Instant::ZERO; 2], outages: None });
        l
    }
}
