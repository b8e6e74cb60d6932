//! What the Entity Manager counts, for operators (the gateway's `/metrics` and console): member exchanges
//! and their outcomes, answers to group (multicast) requests, the latency of member answers, counters per
//! member address and per entity member, and refusals by the fan-out budget and the exchange quotas.
//!
//! Owns: [`EmStats`], plain integers a driver copies out (`EntityManager::stats`). Bounded: at most
//! [`MAX_MEMBERS`] rows in each per-member table (the rest together under [`OTHER`]), and only requests in
//! flight are remembered for their latency (each is forgotten when it ends). The rows of one entity's
//! members go when the entity goes ([`EmStats::forget_entity`]), so that a later entity of the same name
//! starts from zero.

use corral_proto::{Instant, Metric, MetricSink, MetricUnit, MetricValue, RequestId};
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

/// Counters of one member (by its address, or as one entity's member).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemberStats {
    /// Unicast requests sent to it.
    pub requests: u64,
    /// Answers to those.
    pub answers: u64,
    /// Unicast requests that ended without an answer (timeout, reset, unreachable).
    pub failures: u64,
    /// Group requests of a multicast entity it was asked through (one per use of the entity).
    pub group_requests: u64,
    /// Its answers to those (a member silent in the multicast window counts none).
    pub group_answers: u64,
    /// The latency of its last answer (unicast or group), in microseconds.
    pub last_latency_us: Option<u64>,
}

/// A member of an entity: the entity's name and the member's URI as the profile's `er` gives it.
pub type EntityMember = (String, String);

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
    /// Answers to unicast member requests.
    pub member_answers: u64,
    /// Members' answers to multicast requests (each member's first answer to each request).
    pub multicast_answers: u64,
    pub member_failures: u64,
    /// Uses refused because their fan-out exceeds the budget, and creations or changes that would.
    pub budget_refusals: u64,
    /// Uses refused because a client's or an entity's exchange quota is reached (5.03).
    pub quota_refusals: u64,
    pub latency: Latency,
    /// Per member address (`OTHER` beyond [`MAX_MEMBERS`]): the metrics' rows.
    pub members: BTreeMap<String, MemberStats>,
    /// Per entity member (`(OTHER, OTHER)` beyond [`MAX_MEMBERS`]): the console's rows, so that one
    /// entity's traffic to a device never shows under another entity that shares the device.
    pub entity_members: BTreeMap<EntityMember, MemberStats>,
    /// Unicast member requests in flight: to whom and when they went.
    in_flight: HashMap<RequestId, (Asked, Instant)>,
    /// Multicast requests in flight (their window open): when each went.
    groups_in_flight: HashMap<RequestId, Instant>,
}

/// A member a request asks: its address and, as an entity's member, the entity and the member's URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Asked {
    pub addr: SocketAddr,
    pub member: EntityMember,
}

/// The row of `key` in `table`, or the [`OTHER`] row when the table is full.
fn row<'a, K: Ord + Clone>(table: &'a mut BTreeMap<K, MemberStats>, key: &K, other: K) -> &'a mut MemberStats {
    let key = if table.len() >= MAX_MEMBERS && !table.contains_key(key) { other } else { key.clone() };
    table.entry(key).or_default()
}

impl EmStats {
    /// Applies `f` to `to`'s rows: its address's and its entity member's.
    fn each_row(&mut self, to: &Asked, f: impl Fn(&mut MemberStats)) {
        f(row(&mut self.members, &to.addr.to_string(), OTHER.into()));
        f(row(&mut self.entity_members, &to.member, (OTHER.into(), OTHER.into())));
    }

    /// A unicast member request went out.
    pub(super) fn sent(&mut self, rid: RequestId, to: Asked, now: Instant) {
        self.count_sent(&to);
        self.in_flight.insert(rid, (to, now));
    }

    fn count_sent(&mut self, to: &Asked) {
        self.member_requests += 1;
        self.each_row(to, |m| m.requests += 1);
    }

    /// A unicast member request ended: answered (`true`) or failed.
    pub(super) fn ended(&mut self, rid: RequestId, answered: bool, now: Instant) {
        if let Some((to, at)) = self.in_flight.remove(&rid) {
            self.count_end(&to, now.saturating_since(at).as_micros(), answered);
        }
    }

    fn count_end(&mut self, to: &Asked, us: u64, answered: bool) {
        if answered {
            self.each_row(to, |m| {
                m.answers += 1;
                m.last_latency_us = Some(us);
            });
            self.member_answers += 1;
            self.latency.record(us);
        } else {
            self.each_row(to, |m| m.failures += 1);
            self.member_failures += 1;
        }
    }

    /// A multicast request to `members` (an entity's) went out.
    pub(super) fn group_sent(&mut self, rid: RequestId, members: &[Asked], now: Instant) {
        self.multicast_requests += 1;
        for m in members {
            self.each_row(m, |s| s.group_requests += 1);
        }
        self.groups_in_flight.insert(rid, now);
    }

    /// Member `to` answered multicast request `rid` while its window was open (its first answer to it: the
    /// caller counts each member once).
    pub(super) fn group_answered(&mut self, rid: RequestId, to: &Asked, now: Instant) {
        let Some(at) = self.groups_in_flight.get(&rid) else { return };
        let us = now.saturating_since(*at).as_micros();
        // Not in `latency`: that histogram is the unicast exchanges', and a group answer waits for the
        // member's leisure on purpose.
        self.multicast_answers += 1;
        self.each_row(to, |m| {
            m.group_answers += 1;
            m.last_latency_us = Some(us);
        });
    }

    /// A request the EM no longer follows: answered or cancelled without an outcome, or a multicast
    /// request whose window closed.
    pub(super) fn forget(&mut self, rid: RequestId) {
        self.in_flight.remove(&rid);
        self.groups_in_flight.remove(&rid);
    }

    /// Entity `name` is gone: its members' rows go too (the per-address rows stay: they count a device's
    /// traffic whatever asked for it).
    pub(super) fn forget_entity(&mut self, name: &str) {
        self.entity_members.retain(|(entity, _), _| entity != name);
    }

    /// Member requests in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }
}

impl EmStats {
    /// The Entity Manager's counters as metrics (`docs/metrics.md`, "The Entity Manager"), the members'
    /// rows labelled `member`; the member answers' latency as a histogram in seconds.
    pub fn describe(&self, out: &mut MetricSink<'_>) {
        let c = Metric::counter;
        out(c("em_member_requests", "unicast requests sent to members", self.member_requests));
        out(c("em_multicast_requests", "group requests sent to multicast entities' members", self.multicast_requests));
        out(c("em_member_answers", "member requests answered", self.member_answers));
        out(c("em_multicast_answers", "members' answers to group requests", self.multicast_answers));
        out(c("em_member_failures", "member requests that ended without an answer", self.member_failures));
        out(c(
            "em_budget_refusals",
            "uses, creations and changes refused by the fan-out budget (4.03)",
            self.budget_refusals,
        ));
        out(c(
            "em_quota_refusals",
            "uses refused by a client's or an entity's exchange quota (5.03)",
            self.quota_refusals,
        ));
        let requests = |v| c("em_member_requests_by_member", "unicast requests sent to each member", v);
        let failures = |v| c("em_member_failures_by_member", "requests to each member that ended without an answer", v);
        let group_answers = |v| c("em_member_group_answers_by_member", "each member's answers to group requests", v);
        let last = |us: u64| Metric {
            value: MetricValue::GaugeF64(seconds(us)),
            ..Metric::gauge("em_member_last_latency", "latency of each member's last answer", 0)
                .in_unit(MetricUnit::Seconds)
        };
        for m in [requests(0), failures(0), group_answers(0), last(0)] {
            out(m.announced());
        }
        for (member, s) in &self.members {
            let labels = [("member", member.as_str())];
            out(requests(s.requests).labelled(&labels));
            out(failures(s.failures).labelled(&labels));
            out(group_answers(s.group_answers).labelled(&labels));
            if let Some(us) = s.last_latency_us {
                out(last(us).labelled(&labels));
            }
        }
        // The last bound is f64::MAX, which the encoder writes +Inf.
        let buckets: Vec<(f64, u64)> = LATENCY_BOUNDS_US
            .iter()
            .map(|b| seconds(*b))
            .chain([f64::MAX])
            .zip(self.latency.counts.iter().copied())
            .collect();
        let value = MetricValue::Histogram {
            sum: seconds(self.latency.sum_us),
            count: self.latency.count(),
            buckets: &buckets,
        };
        out(Metric {
            value,
            ..c("em_member_latency", "time from a member request to its answer", 0).in_unit(MetricUnit::Seconds)
        });
    }
}

fn seconds(us: u64) -> f64 {
    us as f64 / 1e6
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    #[test]
    fn latency_buckets_and_member_rows_are_bounded() {
        let mut s = EmStats::default();
        for i in 0..(MAX_MEMBERS as u32 + 10) {
            let addr = SocketAddr::from(([10, 0, (i >> 8) as u8, i as u8], 5683));
            let to = asked("e", addr);
            s.count_sent(&to);
            s.count_end(&to, 3_000, i % 2 == 0);
        }
        assert_eq!(s.members.len(), MAX_MEMBERS + 1, "the rows beyond the bound are one");
        assert_eq!(s.members[OTHER].requests, 10, "the 10 members past the bound are summed");
        assert_eq!(s.entity_members.len(), MAX_MEMBERS + 1);
        assert_eq!(s.entity_members[&(OTHER.to_string(), OTHER.to_string())].requests, 10);
        assert_eq!(s.member_answers + s.member_failures, MAX_MEMBERS as u64 + 10);
        assert_eq!(s.latency.counts[2], s.member_answers, "3 ms falls in the 5 ms bucket");
        assert_eq!(s.in_flight(), 0);
    }

    fn asked(entity: &str, addr: SocketAddr) -> Asked {
        Asked { addr, member: (entity.into(), format!("coap://{addr}/s/t")) }
    }

    /// Request ids as an endpoint hands them out.
    pub(in crate::em) fn rids(n: usize) -> Vec<RequestId> {
        use corral_proto::{Endpoint, EndpointConfig, Request, SendParams};
        let mut ep = Endpoint::new(EndpointConfig::with_seed(1));
        let dst = SocketAddr::from(([10, 0, 0, 9], 5683));
        (0..n)
            .map(|_| ep.request(Instant::ZERO, dst, Request::new(corral_proto::wire::Code::GET), SendParams::default()))
            .map(|r| r.expect("an endpoint starts a request"))
            .collect()
    }

    /// Two entities that share a device: each entity's rows count its own traffic only; the device's
    /// address row counts both; a group request's answers count for the member that answered.
    #[test]
    fn entity_members_count_their_own_traffic_and_group_answers() {
        let mut s = EmStats::default();
        let dev = SocketAddr::from(([10, 0, 0, 2], 5683));
        let other = SocketAddr::from(([10, 0, 0, 3], 5683));
        let (t0, ids) = (Instant::ZERO, rids(2));
        s.sent(ids[0], asked("a", dev), t0);
        s.ended(ids[0], true, t0 + corral_proto::Duration::from_millis(4));
        s.group_sent(ids[1], &[asked("b", dev), asked("b", other)], t0);
        s.group_answered(ids[1], &asked("b", dev), t0 + corral_proto::Duration::from_millis(9));
        s.forget(ids[1]);
        let a = s.entity_members[&("a".to_string(), format!("coap://{dev}/s/t"))];
        assert_eq!((a.requests, a.answers, a.group_requests, a.group_answers), (1, 1, 0, 0));
        let b = s.entity_members[&("b".to_string(), format!("coap://{dev}/s/t"))];
        assert_eq!((b.requests, b.group_requests, b.group_answers, b.last_latency_us), (0, 1, 1, Some(9_000)));
        let silent = s.entity_members[&("b".to_string(), format!("coap://{other}/s/t"))];
        assert_eq!((silent.group_requests, silent.group_answers), (1, 0));
        let d = s.members[&dev.to_string()];
        assert_eq!((d.requests, d.answers, d.group_answers), (1, 1, 1), "the address row counts both entities");
        assert_eq!((s.multicast_requests, s.multicast_answers, s.member_answers), (1, 1, 1));
        s.group_answered(ids[1], &asked("b", other), t0);
        assert_eq!(s.multicast_answers, 1, "an answer after the window closed is not counted");
        s.forget_entity("b");
        assert!(s.entity_members.keys().all(|(e, _)| e == "a"), "{:?}", s.entity_members.keys());
        assert_eq!(s.members.len(), 2, "the address rows stay");
    }
}
