//! What the Entity Manager counts, for operators (the gateway's `/metrics`): member exchanges and their
//! outcomes, the latency of member answers, failures per member, and refusals by the fan-out budget and
//! the exchange quotas.
//!
//! Owns: [`EmStats`], plain integers a driver copies out (`EntityManager::stats`). Bounded: at most
//! [`MAX_MEMBERS`] members are counted one by one (the rest together under [`OTHER`]), and only requests
//! in flight are remembered for their latency (each is forgotten when it ends).

use corral_proto::{Instant, RequestId};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;

/// Members counted one by one; more go into one row.
pub const MAX_MEMBERS: usize = 1024;

/// The key of the row that sums the members beyond [`MAX_MEMBERS`].
pub const OTHER: &str = "other";

/// Upper bounds of the latency histogram's buckets, in microseconds (1 ms … 10 s); a last bucket holds
/// the rest.
pub const LATENCY_BOUNDS_US: [u64; 12] =
    [1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 10_000_000];

/// Counters of one member (by its address).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemberStats {
    pub requests: u64,
    pub answers: u64,
    /// Requests that ended without an answer (timeout, reset, unreachable).
    pub failures: u64,
    /// The latency of its last answer, in microseconds.
    pub last_latency_us: Option<u64>,
}

/// The member answers' latency: bucket counts (cumulative form is the reader's business) and the sum.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Latency {
    /// `counts[i]`: answers no slower than `LATENCY_BOUNDS_US[i]` and slower than the bound before; the
    /// last entry counts the slower ones.
    pub counts: [u64; LATENCY_BOUNDS_US.len() + 1],
    pub sum_us: u64,
}

impl Latency {
    fn record(&mut self, us: u64) {
        let i = LATENCY_BOUNDS_US.iter().position(|b| us <= *b).unwrap_or(LATENCY_BOUNDS_US.len());
        self.counts[i] += 1;
        self.sum_us = self.sum_us.saturating_add(us);
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// The Entity Manager's counters (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct EmStats {
    /// Unicast member requests sent.
    pub member_requests: u64,
    /// Multicast member requests sent (one per group request).
    pub multicast_requests: u64,
    pub member_answers: u64,
    pub member_failures: u64,
    /// Uses refused because their fan-out exceeds the budget, and creations or changes that would.
    pub budget_refusals: u64,
    /// Uses refused because a client's or an entity's exchange quota is reached (5.03).
    pub quota_refusals: u64,
    pub latency: Latency,
    /// Per member address (`OTHER` beyond [`MAX_MEMBERS`]).
    pub members: BTreeMap<String, MemberStats>,
    /// Unicast member requests in flight: where and when they went.
    in_flight: HashMap<RequestId, (SocketAddr, Instant)>,
}

impl EmStats {
    fn member(&mut self, addr: SocketAddr) -> &mut MemberStats {
        let key = addr.to_string();
        let key =
            if self.members.len() >= MAX_MEMBERS && !self.members.contains_key(&key) { OTHER.into() } else { key };
        self.members.entry(key).or_default()
    }

    /// A unicast member request went out.
    pub(super) fn sent(&mut self, rid: RequestId, to: SocketAddr, now: Instant) {
        self.count_sent(to);
        self.in_flight.insert(rid, (to, now));
    }

    fn count_sent(&mut self, to: SocketAddr) {
        self.member_requests += 1;
        self.member(to).requests += 1;
    }

    /// A unicast member request ended: answered (`true`) or failed.
    pub(super) fn ended(&mut self, rid: RequestId, answered: bool, now: Instant) {
        if let Some((to, at)) = self.in_flight.remove(&rid) {
            self.count_end(to, now.saturating_since(at).as_micros(), answered);
        }
    }

    fn count_end(&mut self, to: SocketAddr, us: u64, answered: bool) {
        let m = self.member(to);
        if answered {
            m.answers += 1;
            m.last_latency_us = Some(us);
            self.member_answers += 1;
            self.latency.record(us);
        } else {
            m.failures += 1;
            self.member_failures += 1;
        }
    }

    /// A request the EM no longer follows (cancelled without an outcome).
    pub(super) fn forget(&mut self, rid: RequestId) {
        self.in_flight.remove(&rid);
    }

    /// Member requests in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_buckets_and_member_rows_are_bounded() {
        let mut s = EmStats::default();
        for i in 0..(MAX_MEMBERS as u32 + 10) {
            let addr = SocketAddr::from(([10, 0, (i >> 8) as u8, i as u8], 5683));
            s.count_sent(addr);
            s.count_end(addr, 3_000, i % 2 == 0);
        }
        assert_eq!(s.members.len(), MAX_MEMBERS + 1, "the rows beyond the bound are one");
        assert_eq!(s.members[OTHER].requests, 10, "the 10 members past the bound are summed");
        assert_eq!(s.member_answers + s.member_failures, MAX_MEMBERS as u64 + 10);
        assert_eq!(s.latency.counts[2], s.member_answers, "3 ms falls in the 5 ms bucket");
        assert_eq!(s.in_flight(), 0);
    }
}
