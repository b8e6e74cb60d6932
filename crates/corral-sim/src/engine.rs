//! The discrete-event core: a priority queue of events on corral's virtual [`Instant`].
//!
//! # What it owns
//! Ordering. Events fire in `(time, sequence number)` order, where the sequence number is the order in
//! which they were scheduled — so two events at the same microsecond always fire in the same order, run
//! after run, whatever the heap's internal layout. That tie-break is the whole of the simulator's
//! determinism at this level; everything else is seeded RNG streams.
//!
//! It never reads a clock and never sleeps: time is whatever the next event says. Events are plain values
//! (no boxed closures), as quinn's timer table and turmoil's fabric keep them, so the hot path allocates
//! only when a bucket of the queue grows.

use corral_proto::Instant;

/// Buckets of the radix heap: bucket 0 holds the key equal to the last one taken out, bucket `b` (1-128)
/// the keys whose highest bit that differs from it is bit `b - 1`.
const BUCKETS: usize = 129;

/// `(time, sequence number)` as one number that orders the same way: time in the high 64 bits.
fn key(at: Instant, seq: u64) -> u128 {
    (u128::from(at.as_micros()) << 64) | u128::from(seq)
}

fn time_of(key: u128) -> Instant {
    Instant::from_micros((key >> 64) as u64)
}

/// The bucket of `key` relative to `last` (`key ≥ last`).
fn bucket(last: u128, key: u128) -> usize {
    (128 - (key ^ last).leading_zeros()) as usize
}

/// A deterministic event queue: a radix heap over `(time, sequence number)`.
///
/// A radix heap (Ahuja, Mehlhorn, Orlin and Tarjan, 1990) needs keys that never go below the last one
/// taken out, which holds here: an event is never scheduled before now, and the sequence number only
/// grows. Keys are unique, so the order is the same total order a binary heap on the same keys gives; but
/// an event moves down a few buckets over its life instead of sifting through `log n` levels on every
/// push and pop, which was most of the simulator's time under a busy Wi-Fi interferer (an event per burst
/// start and end, thousands per simulated second).
pub struct EventQueue<E> {
    buckets: Vec<Vec<(u128, E)>>,
    /// Bit `b - 1` set: bucket `b` (1-128) is not empty.
    nonempty: u128,
    /// The key of the last event taken into bucket 0 (every key queued is at least it).
    last: u128,
    len: usize,
    seq: u64,
    now: Instant,
    processed: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue::new()
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> EventQueue<E> {
        EventQueue {
            buckets: (0..BUCKETS).map(|_| Vec::new()).collect(),
            nonempty: 0,
            last: 0,
            len: 0,
            seq: 0,
            now: Instant::ZERO,
            processed: 0,
        }
    }

    /// The time of the last event popped (or set by [`EventQueue::advance_to`]).
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Schedules `event` at `at`; an `at` in the past is clamped to now (events never go back in time).
    pub fn schedule(&mut self, at: Instant, event: E) {
        self.seq += 1;
        let k = key(at.max(self.now), self.seq);
        self.put(k, event);
        self.len += 1;
    }

    fn put(&mut self, k: u128, event: E) {
        debug_assert!(k >= self.last, "a key below the last one taken out");
        let b = bucket(self.last, k);
        self.buckets[b].push((k, event));
        if b > 0 {
            self.nonempty |= 1 << (b - 1);
        }
    }

    /// The first non-empty bucket above 0 and the smallest key in it.
    fn smallest(&self) -> Option<(usize, u128)> {
        if self.nonempty == 0 {
            return None;
        }
        let b = self.nonempty.trailing_zeros() as usize + 1;
        let min = self.buckets[b].iter().map(|(k, _)| *k).min().expect("a non-empty bucket");
        Some((b, min))
    }

    /// The time of the next event.
    pub fn peek_time(&self) -> Option<Instant> {
        match self.buckets[0].first() {
            Some((k, _)) => Some(time_of(*k)),
            None => self.smallest().map(|(_, k)| time_of(k)),
        }
    }

    /// Pops the next event if it is due at or before `limit`, advancing the clock to it.
    pub fn pop_until(&mut self, limit: Instant) -> Option<(Instant, E)> {
        if self.buckets[0].is_empty() {
            let (b, min) = self.smallest()?;
            if time_of(min) > limit {
                // Not due: leave `last` where it is, so that events scheduled before it stay in order.
                return None;
            }
            // Redistribute the bucket around its smallest key: every element lands in a lower bucket,
            // the smallest in bucket 0.
            self.last = min;
            self.nonempty &= !(1 << (b - 1));
            let mut moved = std::mem::take(&mut self.buckets[b]);
            for (k, e) in moved.drain(..) {
                self.put(k, e);
            }
            self.buckets[b] = moved;
        }
        let (k, _) = self.buckets[0].first()?;
        if time_of(*k) > limit {
            return None;
        }
        let (k, e) = self.buckets[0].pop().expect("bucket 0 holds one key: keys are unique");
        self.len -= 1;
        self.now = time_of(k);
        self.processed += 1;
        Some((self.now, e))
    }

    /// Moves the clock forward to `t` (never back), e.g. at the end of `run_until`.
    pub fn advance_to(&mut self, t: Instant) {
        self.now = self.now.max(t);
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Events processed so far.
    pub fn processed(&self) -> u64 {
        self.processed
    }

    /// Capacity in entries, all buckets together (for memory accounting).
    pub fn capacity(&self) -> usize {
        self.buckets.iter().map(Vec::capacity).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_fire_in_scheduling_order() {
        let mut q = EventQueue::new();
        q.schedule(Instant::from_micros(5), 'b');
        q.schedule(Instant::from_micros(3), 'a');
        q.schedule(Instant::from_micros(5), 'c');
        q.schedule(Instant::from_micros(5), 'd');
        let order: Vec<char> = std::iter::from_fn(|| q.pop_until(Instant::MAX).map(|(_, e)| e)).collect();
        assert_eq!(order, ['a', 'b', 'c', 'd']);
        assert_eq!(q.now(), Instant::from_micros(5));
        q.schedule(Instant::ZERO, 'e');
        assert_eq!(q.pop_until(Instant::MAX), Some((Instant::from_micros(5), 'e')));
        assert_eq!(q.processed(), 5);
    }

    /// The radix heap pops exactly what a binary heap on `(time, sequence number)` pops, through pushes
    /// at now, near and far, pops up to a limit that leave events queued, and the clock moved on by hand.
    #[test]
    fn pops_in_the_order_of_a_binary_heap() {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut rng = corral_proto::Rng::new(42);
        let mut q = EventQueue::new();
        let mut reference: BinaryHeap<Reverse<(Instant, u64)>> = BinaryHeap::new();
        let (mut seq, mut now) = (0u64, Instant::ZERO);
        let mut popped = 0;
        for round in 0..20_000u64 {
            match rng.below(10) {
                0..=4 => {
                    let ahead = match rng.below(4) {
                        0 => 0,
                        1 => rng.below(10),
                        2 => rng.below(100_000),
                        _ => rng.below(1 << 40),
                    };
                    let at = Instant::from_micros((now.as_micros() + ahead).saturating_sub(rng.below(3)));
                    seq += 1;
                    q.schedule(at, seq);
                    reference.push(Reverse((at.max(now), seq)));
                }
                5 => {
                    now = now.max(Instant::from_micros(now.as_micros() + rng.below(1000)));
                    q.advance_to(now);
                }
                _ => {
                    let limit = Instant::from_micros(now.as_micros() + rng.below(50_000));
                    let want = reference.peek().filter(|Reverse((t, _))| *t <= limit).map(|r| r.0);
                    assert_eq!(q.peek_time(), reference.peek().map(|Reverse((t, _))| *t), "round {round}");
                    let got = q.pop_until(limit);
                    assert_eq!(got, want, "round {round}");
                    if got.is_some() {
                        reference.pop();
                        popped += 1;
                    }
                    now = q.now();
                }
            }
            assert_eq!(q.len(), reference.len());
        }
        assert!(popped > 5_000, "{popped}");
        while let Some(Reverse(want)) = reference.pop() {
            assert_eq!(q.pop_until(Instant::MAX), Some(want));
        }
        assert!(q.is_empty());
    }
}
