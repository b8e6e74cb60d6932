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
//! only when the heap grows.

use corral_proto::Instant;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

struct Entry<E> {
    at: Instant,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Entry<E> {
    // Reversed: BinaryHeap is a max-heap and we want the earliest (then first scheduled) on top.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

/// A deterministic event queue.
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
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
        EventQueue { heap: BinaryHeap::new(), seq: 0, now: Instant::ZERO, processed: 0 }
    }

    /// The time of the last event popped (or set by [`EventQueue::advance_to`]).
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Schedules `event` at `at`; an `at` in the past is clamped to now (events never go back in time).
    pub fn schedule(&mut self, at: Instant, event: E) {
        self.seq += 1;
        self.heap.push(Entry { at: at.max(self.now), seq: self.seq, event });
    }

    /// The time of the next event.
    pub fn peek_time(&self) -> Option<Instant> {
        self.heap.peek().map(|e| e.at)
    }

    /// Pops the next event if it is due at or before `limit`, advancing the clock to it.
    pub fn pop_until(&mut self, limit: Instant) -> Option<(Instant, E)> {
        if self.heap.peek()?.at > limit {
            return None;
        }
        let e = self.heap.pop()?;
        self.now = e.at;
        self.processed += 1;
        Some((e.at, e.event))
    }

    /// Moves the clock forward to `t` (never back), e.g. at the end of `run_until`.
    pub fn advance_to(&mut self, t: Instant) {
        self.now = self.now.max(t);
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Events processed so far.
    pub fn processed(&self) -> u64 {
        self.processed
    }

    /// Heap capacity in entries (for memory accounting).
    pub fn capacity(&self) -> usize {
        self.heap.capacity()
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
}
