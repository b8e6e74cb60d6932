//! [`StoreThread`]: a store's writes on a thread of their own, as a node's effect runner.
//!
//! Owns: the thread and the two channels to it. The thread applies operations in the order they were
//! started (a store's writes must not overtake each other: a counter set twice, a journal entry added then
//! removed) and reports each when it is done; the node collects the reports when it next wakes, which is
//! at most [`POLL`] after an operation started while one is in flight. A second thread may do the operations
//! that wait (the change feed of a shared store, issue 45), polled at [`FEED_POLL`]. Must never: block the driver
//! (`start` sends, `poll_done` tries to receive).

use corral_proto::{Duration, EffectDone, EffectId, EffectOp, EffectRunner, Instant};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};

/// How often a node with writes in flight looks for their completion. An entity change waits a round trip
/// to its members anyway; a millisecond is lost in it.
pub const POLL: Duration = Duration::from_millis(1);

/// How often a node whose only effect in flight is a wait on the change feed (issue 45) looks for its
/// completion: a change through another gateway arrives within it after the store's wake-up, and an idle
/// gateway wakes 20 times a second, not a thousand.
pub const FEED_POLL: Duration = Duration::from_millis(50);

/// Which operations go to the second thread, and the way to it.
type SideTo = (fn(&EffectOp) -> bool, Sender<(EffectId, EffectOp)>);

/// The second thread of a [`StoreThread`]: which operations go to it, and what does them.
pub type Side = (fn(&EffectOp) -> bool, Box<dyn FnMut(EffectOp) -> EffectDone + Send>);

/// Does a node's effects on a thread of its own (see the module docs). Dropping it ends the thread once
/// the operations already started are done.
pub struct StoreThread {
    to: Sender<(EffectId, EffectOp)>,
    from: Receiver<(EffectId, EffectDone)>,
    in_flight: usize,
    /// The side thread (the change feed's waits), which is polled at [`FEED_POLL`].
    side: Option<SideTo>,
    side_in_flight: std::collections::HashSet<EffectId>,
    /// The latest `now` a driver gave: completions are looked for [`POLL`] after it.
    last: Instant,
}

impl StoreThread {
    /// A thread named `name` that does each effect with `exec`.
    pub fn spawn(
        name: &str,
        exec: impl FnMut(EffectOp) -> EffectDone + Send + 'static,
    ) -> std::io::Result<StoreThread> {
        StoreThread::spawn_with(name, Box::new(exec), None)
    }

    /// [`StoreThread::spawn`], with the operations `side` picks done on a second thread by its own
    /// function (in their own order): a wait there never holds up a write.
    pub fn spawn_with(
        name: &str,
        exec: Box<dyn FnMut(EffectOp) -> EffectDone + Send>,
        side: Option<Side>,
    ) -> std::io::Result<StoreThread> {
        let (done, from) = channel();
        let to = worker(name, exec, done.clone())?;
        let side = match side {
            Some((picks, exec)) => Some((picks, worker(&format!("{name}-feed"), exec, done)?)),
            None => None,
        };
        Ok(StoreThread { to, from, in_flight: 0, side, side_in_flight: Default::default(), last: Instant::ZERO })
    }
}

/// A thread that does each operation sent to it with `exec` and reports it on `done`.
fn worker(
    name: &str,
    mut exec: Box<dyn FnMut(EffectOp) -> EffectDone + Send>,
    done: Sender<(EffectId, EffectDone)>,
) -> std::io::Result<Sender<(EffectId, EffectOp)>> {
    let (to, ops) = channel::<(EffectId, EffectOp)>();
    std::thread::Builder::new().name(name.to_string()).spawn(move || {
        for (id, op) in ops {
            if done.send((id, exec(op))).is_err() {
                return; // the node is gone
            }
        }
    })?;
    Ok(to)
}

impl EffectRunner for StoreThread {
    fn start(&mut self, now: Instant, id: EffectId, op: EffectOp) {
        self.last = now;
        if let Some((_, to)) = self.side.as_ref().filter(|(picks, _)| picks(&op)) {
            if to.send((id, op)).is_ok() {
                self.side_in_flight.insert(id);
            } else {
                tracing::error!("the store's feed thread is gone");
            }
            return;
        }
        if self.to.send((id, op)).is_err() {
            tracing::error!("the store's thread is gone: the write is lost and its change is never answered");
            return;
        }
        self.in_flight += 1;
    }

    fn poll_done(&mut self, now: Instant) -> Option<(EffectId, EffectDone)> {
        self.last = now;
        match self.from.try_recv() {
            Ok(done) => {
                if !self.side_in_flight.remove(&done.0) {
                    self.in_flight = self.in_flight.saturating_sub(1);
                }
                Some(done)
            }
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => {
                if self.in_flight > 0 {
                    tracing::error!(writes = self.in_flight, "the store's thread ended with writes in flight");
                    self.in_flight = 0;
                }
                self.side_in_flight.clear();
                None
            }
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        if self.in_flight > 0 {
            Some(self.last + POLL)
        } else {
            (!self.side_in_flight.is_empty()).then(|| self.last + FEED_POLL)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_are_done_in_order_and_reported() {
        let mut t = StoreThread::spawn("test-store", |op| {
            let n = *op.downcast::<u32>().unwrap();
            Box::new(n * 2)
        })
        .unwrap();
        for i in 0..10u32 {
            t.start(Instant::ZERO, EffectId(u64::from(i)), Box::new(i));
        }
        assert_eq!(t.poll_timeout(), Some(Instant::ZERO + POLL));
        let mut got = Vec::new();
        while got.len() < 10 {
            if let Some((id, done)) = t.poll_done(Instant::ZERO) {
                got.push((id.0, *done.downcast::<u32>().unwrap()));
            } else {
                std::thread::yield_now();
            }
        }
        assert_eq!(got, (0..10u64).map(|i| (i, i as u32 * 2)).collect::<Vec<_>>());
        assert_eq!(t.poll_timeout(), None, "nothing in flight");
    }
}
