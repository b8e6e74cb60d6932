//! Network faults every driver of the simulator shares, in the manner of smoltcp's fault injector: a value
//! the driver installs once ([`Sim::set_frame_rule`](crate::Sim::set_frame_rule)) and changes while the
//! simulation runs, rather than code of its own in each harness.
//!
//! # What it owns
//! [`Cuts`]: partitions — pairs of nodes that cannot hear each other until a given time, both ways, every
//! frame (data and Imm-ACK) lost with reason `rule`. Loss bursts are link models
//! ([`LinkModel::bursty`](crate::LinkModel::bursty)) and need nothing here. It never draws randomness: the
//! driver decides who is cut off and for how long, from its own seeded stream.

use crate::{FrameInfo, NodeId};
use corral_proto::Instant;
use std::cell::RefCell;
use std::rc::Rc;

/// Partitions in force: a shared handle, so that the driver adds cuts while the rule it installed runs.
#[derive(Debug, Clone, Default)]
pub struct Cuts {
    cuts: Rc<RefCell<Vec<(NodeId, NodeId, Instant)>>>,
}

impl Cuts {
    pub fn new() -> Cuts {
        Cuts::default()
    }

    /// Cuts `a` off from each of `others` (both ways) until `until`.
    pub fn cut(&self, a: NodeId, others: &[NodeId], until: Instant) {
        let mut cuts = self.cuts.borrow_mut();
        cuts.extend(others.iter().map(|&b| (a, b, until)));
    }

    /// Heals every partition now.
    pub fn heal(&self) {
        self.cuts.borrow_mut().clear();
    }

    /// Whether `a` and `b` are cut off from each other at `now` (forgets cuts that ended).
    pub fn severed(&self, a: NodeId, b: NodeId, now: Instant) -> bool {
        let mut cuts = self.cuts.borrow_mut();
        cuts.retain(|&(_, _, until)| until > now);
        cuts.iter().any(|&(x, y, _)| (x == a && y == b) || (x == b && y == a))
    }

    /// The frame rule to install: drops every frame between two nodes cut off from each other.
    pub fn rule(&self) -> impl FnMut(&FrameInfo) -> bool + 'static {
        let cuts = self.clone();
        move |f: &FrameInfo| cuts.severed(f.from, f.to, f.at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_holds_both_ways_until_its_end_and_heals() {
        let c = Cuts::new();
        let (a, b, x) = (NodeId(0), NodeId(1), NodeId(2));
        c.cut(a, &[b], Instant::from_secs(10));
        assert!(c.severed(a, b, Instant::from_secs(1)));
        assert!(c.severed(b, a, Instant::from_secs(9)));
        assert!(!c.severed(a, x, Instant::from_secs(1)), "only the pairs named");
        assert!(!c.severed(a, b, Instant::from_secs(10)), "ended");
        c.cut(a, &[b, x], Instant::from_secs(20));
        c.heal();
        assert!(!c.severed(a, x, Instant::from_secs(11)));
    }
}
