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
    /// Events of sources that have at most one pending at a time (a Wi-Fi interferer's next burst start
    /// or end), each in its own slot instead of the heap.
    lanes: Vec<Option<Entry<E>>>,
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
        EventQueue { heap: BinaryHeap::new(), lanes: Vec::new(), seq: 0, now: Instant::ZERO, processed: 0 }
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

    /// Schedules `event` at `at` in `lane`, a slot for a source that has one event pending at a time. It
    /// takes its sequence number as [`EventQueue::schedule`] would and fires in the same `(time, sequence
    /// number)` order, but never enters the heap: a busy Wi-Fi interferer schedules two events per burst,
    /// thousands per simulated second, and pushing and popping them through the heap was most of a run's
    /// time. If the lane holds an event already, this one is queued in the heap as usual.
    pub fn schedule_in_lane(&mut self, lane: usize, at: Instant, event: E) {
        if self.lanes.len() <= lane {
            self.lanes.resize_with(lane + 1, || None);
        }
        if self.lanes[lane].is_some() {
            return self.schedule(at, event);
        }
        self.seq += 1;
        self.lanes[lane] = Some(Entry { at: at.max(self.now), seq: self.seq, event });
    }

    /// The lane whose event is the earliest, and its `(time, sequence number)`.
    fn first_lane(&self) -> Option<(usize, (Instant, u64))> {
        self.lanes
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.as_ref().map(|e| (i, (e.at, e.seq))))
            .min_by_key(|(_, k)| *k)
    }

    /// The time of the next event.
    pub fn peek_time(&self) -> Option<Instant> {
        let heap = self.heap.peek().map(|e| e.at);
        let lane = self.first_lane().map(|(_, (at, _))| at);
        heap.into_iter().chain(lane).min()
    }

    /// Pops the next event if it is due at or before `limit`, advancing the clock to it.
    pub fn pop_until(&mut self, limit: Instant) -> Option<(Instant, E)> {
        let heap = self.heap.peek().map(|e| (e.at, e.seq));
        let e = match self.first_lane() {
            Some((lane, key)) if heap.is_none_or(|h| key < h) => {
                if key.0 > limit {
                    return None;
                }
                self.lanes[lane].take()?
            }
            _ => {
                if heap?.0 > limit {
                    return None;
                }
                self.heap.pop()?
            }
        };
        self.now = e.at;
        self.processed += 1;
        Some((e.at, e.event))
    }

    /// Moves the clock forward to `t` (never back), e.g. at the end of `run_until`.
    pub fn advance_to(&mut self, t: Instant) {
        self.now = self.now.max(t);
    }

    pub fn len(&self) -> usize {
        self.heap.len() + self.lanes.iter().filter(|e| e.is_some()).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Events processed so far.
    pub fn processed(&self) -> u64 {
        self.processed
    }

    /// Heap and lane capacity in entries (for memory accounting).
    pub fn capacity(&self) -> usize {
        self.heap.capacity() + self.lanes.capacity()
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

    /// Events in lanes pop exactly where a plain binary heap on `(time, sequence number)` pops them, through
    /// pushes at now, near and far, pops up to a limit that leave events queued, and the clock moved on by hand.
    #[test]
    fn lanes_pop_in_the_order_of_a_binary_heap() {
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
                    // Every third event goes to one of three lanes; an occupied lane queues it as usual.
                    match seq % 3 {
                        0 => q.schedule_in_lane((seq / 3 % 3) as usize, at, seq),
                        _ => q.schedule(at, seq),
                    }
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
        assert!(q.lanes.iter().any(Option::is_some), "lanes in use at the end");
        while let Some(Reverse(want)) = reference.pop() {
            assert_eq!(q.pop_until(Instant::MAX), Some(want));
        }
        assert!(q.is_empty());
    }
}
