//! The first-answer credit of unverified sources (see [`AmplificationLimit`]): what pays for the answers
//! an unverified peer's own credit (`factor` times what it sent) does not cover, so that a client without
//! Echo support still gets its first large answers, while a spoofer gets no more for varying the source
//! port, the source address or the network it pretends to be in.
//!
//! # Two tiers
//! - **Per address**: a token bucket per source IP address (`burst`, refilled at `refill` bytes per
//!   second), so that one victim address gets at most that, whatever the ports.
//! - **Shared**: one bucket (`shared_burst`, `shared_refill`) that every first answer to every address is
//!   paid from too, so that spreading a flood over the addresses of a network (a /20 carpet: 4,096
//!   addresses, each with a full bucket of its own) buys nothing: what the endpoint sends to all unverified
//!   sources together is `factor` times what they sent, plus this one allowance.
//!
//! Why one bucket per endpoint and not one per prefix (a /24 for IPv4, a /56 for IPv6): a per-prefix
//! bucket bounds what one victim *network* gets, but not what the reflector sends in total — a carpet over
//! an ISP's /16 (256 /24s) or over any number of IPv6 /56s would still buy one allowance per prefix. A
//! per-endpoint bucket bounds the total, in constant state, however the sources are chosen. Its price:
//! under a spoofed flood, Echo-less clients from unverified networks share the allowance with the flood
//! and may be challenged (4.01 + Echo) for their first large answers; clients that support Echo (RFC
//! 9175) are served after one round trip, and sources in verified networks
//! ([`EndpointConfig::verified_nets`](super::EndpointConfig), loopback always) are not bounded at all.
//! Endpoints that share a port (`--workers`, one [`crate::Shard`] each) split the shared allowance
//! between them, so the server's total stays the same.
//!
//! # What it owns
//! The buckets, at most [`AmplificationLimit::addresses`] per-address ones plus the shared one. A bucket
//! that has refilled to [`AmplificationLimit::burst`] is the same as none and is the only kind forgotten to
//! make room; when every bucket in a full table is still refilling, an address without one gets no
//! first-answer credit until one has. So the bounds hold exactly: to one address, unverified answers
//! spend at most `burst` plus `refill` bytes per second of elapsed time beyond the peers' own credit; to
//! all addresses together, at most the shared bucket's burst plus its refill per second.
//!
//! # What it must never do
//! Grow beyond its bound, give an address more than one bucket's worth at once, or give all addresses
//! together more than the shared bucket's.

use super::config::AmplificationLimit;
use super::{new_map, Map};
use crate::time::{Duration, Instant};
use std::collections::VecDeque;
use std::net::IpAddr;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Bytes left at `at`.
    level: usize,
    at: Instant,
}

/// Token buckets of first-answer credit: one by source IP address, least recently spent first, and the
/// one they all share.
#[derive(Debug)]
pub(super) struct FirstAnswers {
    buckets: Map<IpAddr, Bucket>,
    /// (address, time of its last spend), oldest first; an entry whose time differs from its bucket's is
    /// stale (a later spend is further back).
    order: VecDeque<(IpAddr, Instant)>,
    /// The shared bucket; `None`: full (never spent, or refilled since).
    shared: Option<Bucket>,
    /// Endpoints that split the shared allowance (the shards of one port).
    sharers: usize,
}

impl FirstAnswers {
    /// `sharers`: how many endpoints share the port, and so split the shared allowance.
    pub(super) fn new(hash_seed: u64, sharers: usize) -> FirstAnswers {
        FirstAnswers { buckets: new_map(hash_seed), order: VecDeque::new(), shared: None, sharers: sharers.max(1) }
    }

    /// Bytes `ip` may still be sent beyond its peers' own credit: its own bucket's level, at most what the
    /// shared bucket holds.
    pub(super) fn available(&mut self, limit: &AmplificationLimit, ip: IpAddr, now: Instant) -> usize {
        let own = self.current(limit, ip, now).unwrap_or(0);
        own.min(self.shared_level(limit, now))
    }

    /// Takes `bytes` (at most [`FirstAnswers::available`]) from `ip`'s bucket and the shared one.
    pub(super) fn spend(&mut self, limit: &AmplificationLimit, ip: IpAddr, now: Instant, bytes: usize) {
        if bytes == 0 {
            return;
        }
        let Some(left) = self.current(limit, ip, now) else { return };
        let shared = self.shared_level(limit, now);
        self.shared = Some(Bucket { level: shared.saturating_sub(bytes), at: now });
        self.buckets.insert(ip, Bucket { level: left.saturating_sub(bytes), at: now });
        self.order.push_back((ip, now));
        if self.order.len() > 2 * limit.addresses.max(1) {
            let buckets = &self.buckets;
            self.order.retain(|(ip, at)| buckets.get(ip).is_some_and(|b| b.at == *at));
        }
    }

    /// The shared bucket's (burst, refill) on this endpoint: its share of the port's, never less than one
    /// address's bucket (so that an Echo-less client can still get a first answer on every shard).
    fn shared_share(&self, limit: &AmplificationLimit) -> (usize, usize) {
        let split = |total: usize, floor: usize| (total / self.sharers).max(floor.min(total));
        (split(limit.shared_burst, limit.burst), split(limit.shared_refill, limit.refill))
    }

    fn shared_level(&self, limit: &AmplificationLimit, now: Instant) -> usize {
        let (burst, refill) = self.shared_share(limit);
        self.shared.map_or(burst, |b| level(burst, refill, &b, now))
    }

    /// `ip`'s level; `None`: it has no bucket and none can be made.
    fn current(&mut self, limit: &AmplificationLimit, ip: IpAddr, now: Instant) -> Option<usize> {
        if let Some(b) = self.buckets.get(&ip) {
            return Some(level(limit.burst, limit.refill, b, now));
        }
        self.room(limit, now).then_some(limit.burst)
    }

    /// Whether a new address can have a bucket: the table has room, or its least recently spent bucket
    /// has refilled (and is forgotten).
    fn room(&mut self, limit: &AmplificationLimit, now: Instant) -> bool {
        if self.buckets.len() < limit.addresses {
            return true;
        }
        while let Some(&(ip, at)) = self.order.front() {
            match self.buckets.get(&ip) {
                Some(b) if b.at == at => {
                    if level(limit.burst, limit.refill, b, now) < limit.burst {
                        return false;
                    }
                    self.buckets.remove(&ip);
                    self.order.pop_front();
                    return true;
                }
                _ => {
                    self.order.pop_front(); // stale
                }
            }
        }
        false
    }
}

/// A bucket's level at `now`: what was left, plus `refill` bytes per second since, at most `burst`.
fn level(burst: usize, refill: usize, b: &Bucket, now: Instant) -> usize {
    let elapsed: Duration = now.saturating_since(b.at);
    let gained = (refill as u128).saturating_mul(elapsed.as_micros() as u128) / 1_000_000;
    (b.level as u128).saturating_add(gained).min(burst as u128) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    /// Per-address buckets alone: a shared bucket too large to matter.
    fn limit(addresses: usize) -> AmplificationLimit {
        AmplificationLimit {
            addresses,
            shared_burst: usize::MAX,
            shared_refill: usize::MAX,
            ..AmplificationLimit::default()
        }
    }

    fn ip(n: u32) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + n))
    }

    /// Spends greedily from `victim` every `step` for `span`, as a flood would; returns what it got.
    fn drain(fa: &mut FirstAnswers, l: &AmplificationLimit, victim: IpAddr, span: Duration, step: Duration) -> usize {
        let (mut now, mut total) = (Instant::ZERO, 0);
        while now.as_micros() <= span.as_micros() {
            let got = fa.available(l, victim, now);
            fa.spend(l, victim, now, got);
            total += got;
            now += step;
        }
        total
    }

    #[test]
    fn one_address_gets_burst_plus_refill_per_second() {
        let l = limit(16);
        let mut fa = FirstAnswers::new(1, 1);
        for (span_s, step_ms) in [(0u64, 1u64), (1, 1), (10, 3), (60, 250)] {
            let mut fa2 = FirstAnswers::new(span_s, 1);
            let got = drain(&mut fa2, &l, ip(1), Duration::from_secs(span_s), Duration::from_millis(step_ms));
            let bound = l.burst + l.refill * span_s as usize;
            assert!(got <= bound, "{span_s} s: {got} B > {bound} B");
            assert!(got + l.refill >= bound, "{span_s} s: {got} B, far under {bound} B: the bucket does not refill");
        }
        // Spending from one address never gives another less (buckets are per address).
        fa.spend(&l, ip(1), Instant::ZERO, l.burst);
        assert_eq!(fa.available(&l, ip(1), Instant::ZERO), 0);
        assert_eq!(fa.available(&l, ip(2), Instant::ZERO), l.burst);
    }

    #[test]
    fn table_stays_bounded_and_a_new_address_waits_while_every_bucket_refills() {
        let l = limit(8);
        let mut fa = FirstAnswers::new(7, 1);
        for n in 0..1000 {
            let got = fa.available(&l, ip(n), Instant::ZERO);
            fa.spend(&l, ip(n), Instant::ZERO, got);
            assert!(fa.buckets.len() <= l.addresses, "{} buckets", fa.buckets.len());
            assert!(fa.order.len() <= 2 * l.addresses + 1, "{} order entries", fa.order.len());
        }
        // The first eight addresses took a bucket each; the table is full of empty buckets, so no one else
        // gets any first-answer credit, and the first eight cannot get theirs back by being forgotten.
        assert_eq!(fa.available(&l, ip(5000), Instant::ZERO), 0);
        for n in 0..8 {
            assert_eq!(fa.available(&l, ip(n), Instant::ZERO), 0, "address {n} regained its bucket");
        }
        // Once a bucket has refilled it is forgotten to make room.
        let full = Instant::ZERO + Duration::from_secs((l.burst / l.refill) as u64 + 1);
        assert_eq!(fa.available(&l, ip(5000), full), l.burst);
        fa.spend(&l, ip(5000), full, 1);
        assert!(fa.buckets.len() <= l.addresses);
    }

    #[test]
    fn many_addresses_each_get_at_most_their_own_bucket() {
        // However the flood interleaves addresses, each address's total stays within its bound.
        let l = limit(64);
        let mut fa = FirstAnswers::new(3, 1);
        let mut got = vec![0usize; 200];
        let span_s = 5u64;
        for ms in 0..=span_s * 1000 {
            let now = Instant::from_millis(ms);
            let n = (ms * 7919 % 200) as usize;
            let take = fa.available(&l, ip(n as u32), now);
            fa.spend(&l, ip(n as u32), now, take);
            got[n] += take;
        }
        let bound = l.burst + l.refill * span_s as usize;
        for (n, g) in got.iter().enumerate() {
            assert!(*g <= bound, "address {n}: {g} B > {bound} B");
        }
        assert!(fa.buckets.len() <= l.addresses);
    }

    /// A carpet: 4,096 addresses of one /20, each with a full bucket of its own, asked in turn for 10 s.
    /// Together they get the shared bucket's burst plus its refill, as four victims would — not 4,096
    /// buckets' worth.
    #[test]
    fn addresses_of_a_network_together_get_the_shared_bucket_only() {
        let l = AmplificationLimit::default();
        let mut fa = FirstAnswers::new(5, 1);
        let (span_s, mut total) = (10u64, 0usize);
        for ms in 0..=span_s * 1000 {
            let now = Instant::from_millis(ms);
            let n = (ms as u32 * 4) % 4096;
            for k in 0..4 {
                let got = fa.available(&l, ip(n + k), now);
                fa.spend(&l, ip(n + k), now, got);
                total += got;
            }
        }
        let bound = l.shared_burst + l.shared_refill * span_s as usize;
        assert!(total <= bound, "{total} B > {bound} B");
        assert!(total + l.shared_refill >= bound, "{total} B, far under {bound} B: the shared bucket does not refill");
        assert!(fa.buckets.len() <= l.addresses);
    }

    /// Shards of one port split the shared allowance, each keeping at least one address's bucket.
    #[test]
    fn shards_split_the_shared_bucket() {
        let l = AmplificationLimit::default();
        for (sharers, burst) in [(1, l.shared_burst), (2, l.shared_burst / 2), (4, l.burst), (64, l.burst)] {
            let mut fa = FirstAnswers::new(9, sharers);
            let mut got = 0;
            for n in 0..64 {
                let take = fa.available(&l, ip(n), Instant::ZERO);
                fa.spend(&l, ip(n), Instant::ZERO, take);
                got += take;
            }
            assert_eq!(got, burst, "{sharers} shards");
        }
    }
}
