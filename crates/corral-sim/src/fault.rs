//! Network faults every driver of the simulator shares, in the manner of smoltcp's fault injector: a value
//! the driver installs once ([`Sim::set_frame_rule`](crate::Sim::set_frame_rule)) and changes while the
//! simulation runs, rather than code of its own in each harness.
//!
//! # What it owns
//! - [`Cuts`]: partitions — pairs of nodes that cannot hear each other until a given time, both ways, every
//!   frame (data and Imm-ACK) lost with reason `rule` (a frame rule,
//!   [`Sim::set_frame_rule`](crate::Sim::set_frame_rule)).
//! - [`Jumble`]: duplicated, delayed and so reordered datagrams at their receiver (a datagram rule,
//!   [`Sim::set_datagram_rule`](crate::Sim::set_datagram_rule)), as a network path with several routes or
//!   a retransmitting link layer makes them.
//!
//! Loss bursts are link models ([`LinkModel::bursty`](crate::LinkModel::bursty)) and need nothing here.
//! Whatever is random comes from a stream the driver hands in, seeded from its run.

use crate::{DatagramId, FrameInfo, NodeId};
use corral_proto::{Duration, Instant, Rng};
use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;

/// What a datagram rule sees of a datagram about to be delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatagramInfo {
    pub at: Instant,
    pub to: NodeId,
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub id: DatagramId,
    /// Its UDP payload's size (bytes).
    pub len: usize,
}

/// What becomes of a datagram at its receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mangle {
    Deliver,
    /// Delivered this much later (datagrams behind it overtake it).
    Delay(Duration),
    /// Delivered now, and a copy this much later.
    Duplicate(Duration),
}

pub(crate) type DatagramRule = Box<dyn FnMut(&DatagramInfo) -> Mangle>;

/// Duplication and delay, switched on for a while by the driver: a shared handle, like [`Cuts`].
#[derive(Debug, Clone)]
pub struct Jumble {
    state: Rc<RefCell<JumbleState>>,
}

#[derive(Debug)]
struct JumbleState {
    rng: Rng,
    until: Instant,
    duplicate: f64,
    delay: f64,
    max_delay: Duration,
}

impl Jumble {
    /// Off until [`Jumble::start`]; draws from `rng`.
    pub fn new(rng: Rng) -> Jumble {
        let state = JumbleState { rng, until: Instant::ZERO, duplicate: 0.0, delay: 0.0, max_delay: Duration::ZERO };
        Jumble { state: Rc::new(RefCell::new(state)) }
    }

    /// Until `until`, each datagram is copied with probability `duplicate`, else held back up to
    /// `max_delay` with probability `delay`.
    pub fn start(&self, until: Instant, duplicate: f64, delay: f64, max_delay: Duration) {
        let mut s = self.state.borrow_mut();
        *s = JumbleState { rng: s.rng.fork(), until, duplicate, delay, max_delay };
    }

    pub fn stop(&self) {
        self.state.borrow_mut().until = Instant::ZERO;
    }

    /// What becomes of the datagram `d`.
    pub fn mangle(&self, d: &DatagramInfo) -> Mangle {
        let mut guard = self.state.borrow_mut();
        let s = &mut *guard;
        if d.at >= s.until {
            return Mangle::Deliver;
        }
        let late = |s: &mut JumbleState| Duration::from_micros(1 + s.rng.below(s.max_delay.as_micros().max(1)));
        if s.rng.chance(s.duplicate) {
            Mangle::Duplicate(late(s))
        } else if s.rng.chance(s.delay) {
            Mangle::Delay(late(s))
        } else {
            Mangle::Deliver
        }
    }

    /// The datagram rule to install.
    pub fn rule(&self) -> impl FnMut(&DatagramInfo) -> Mangle + 'static {
        let j = self.clone();
        move |d: &DatagramInfo| j.mangle(d)
    }
}

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
    fn a_jumble_copies_and_delays_only_while_it_lasts() {
        let j = Jumble::new(Rng::new(7));
        let at = |s: u64| DatagramInfo {
            at: Instant::from_secs(s),
            to: NodeId(1),
            src: "[fd00::1]:5683".parse().unwrap(),
            dst: "[fd00::2]:5683".parse().unwrap(),
            id: DatagramId(0),
            len: 10,
        };
        assert_eq!(j.mangle(&at(0)), Mangle::Deliver, "off until started");
        j.start(Instant::from_secs(10), 0.5, 1.0, Duration::from_millis(100));
        let ms: Vec<Mangle> = (0..200).map(|_| j.mangle(&at(1))).collect();
        assert!(ms.iter().any(|m| matches!(m, Mangle::Duplicate(_))));
        assert!(ms.iter().all(|m| match m {
            Mangle::Duplicate(d) | Mangle::Delay(d) => *d <= Duration::from_millis(100) && !d.is_zero(),
            Mangle::Deliver => false,
        }));
        assert_eq!(j.mangle(&at(10)), Mangle::Deliver, "over");
    }

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
