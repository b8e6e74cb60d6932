//! The first-answer credit of each source IP address (see [`AmplificationLimit`]): a token bucket per
//! address that pays for what an unverified peer's own credit (`factor` times what it sent) does not
//! cover, so that a client without Echo support still gets its first large answers, while a spoofer who
//! varies the source port gets no more for it than for one port.
//!
//! # What it owns
//! The buckets, at most [`AmplificationLimit::addresses`] of them. A bucket that has refilled to
//! [`AmplificationLimit::burst`] is the same as none and is the only kind forgotten to make room; when
//! every bucket in a full table is still refilling, an address without one gets no first-answer credit
//! until one has. So the bound holds exactly: to one address, unverified answers spend at most `burst`
//! plus `refill` bytes per second of elapsed time beyond the peers' own credit.
//!
//! # What it must never do
//! Grow beyond its bound, or give an address more than one bucket's worth at once.

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

/// Token buckets of first-answer credit, by source IP address, least recently spent first.
#[derive(Debug)]
pub(super) struct FirstAnswers {
    buckets: Map<IpAddr, Bucket>,
    /// (address, time of its last spend), oldest first; an entry whose time differs from its bucket's is
    /// stale (a later spend is further back).
    order: VecDeque<(IpAddr, Instant)>,
}

impl FirstAnswers {
    pub(super) fn new(hash_seed: u64) -> FirstAnswers {
        FirstAnswers { buckets: new_map(hash_seed), order: VecDeque::new() }
    }

    /// Bytes `ip` may still be sent beyond its peers' own credit.
    pub(super) fn available(&mut self, limit: &AmplificationLimit, ip: IpAddr, now: Instant) -> usize {
        self.current(limit, ip, now).unwrap_or(0)
    }

    /// Takes `bytes` (at most [`FirstAnswers::available`]) from `ip`'s bucket.
    pub(super) fn spend(&mut self, limit: &AmplificationLimit, ip: IpAddr, now: Instant, bytes: usize) {
        if bytes == 0 {
            return;
        }
        let Some(left) = self.current(limit, ip, now) else { return };
        self.buckets.insert(ip, Bucket { level: left.saturating_sub(bytes), at: now });
        self.order.push_back((ip, now));
        if self.order.len() > 2 * limit.addresses.max(1) {
            let buckets = &self.buckets;
            self.order.retain(|(ip, at)| buckets.get(ip).is_some_and(|b| b.at == *at));
        }
    }

    /// `ip`'s level; `None`: it has no bucket and none can be made.
    fn current(&mut self, limit: &AmplificationLimit, ip: IpAddr, now: Instant) -> Option<usize> {
        if let Some(b) = self.buckets.get(&ip) {
            return Some(level(limit, b, now));
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
                    if level(limit, b, now) < limit.burst {
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
fn level(limit: &AmplificationLimit, b: &Bucket, now: Instant) -> usize {
    let elapsed: Duration = now.saturating_since(b.at);
    let gained = (limit.refill as u128).saturating_mul(elapsed.as_micros() as u128) / 1_000_000;
    (b.level as u128).saturating_add(gained).min(limit.burst as u128) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn limit(addresses: usize) -> AmplificationLimit {
        AmplificationLimit { addresses, ..AmplificationLimit::default() }
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
        let mut fa = FirstAnswers::new(1);
        for (span_s, step_ms) in [(0u64, 1u64), (1, 1), (10, 3), (60, 250)] {
            let mut fa2 = FirstAnswers::new(span_s);
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
        let mut fa = FirstAnswers::new(7);
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
        let mut fa = FirstAnswers::new(3);
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
}
