//! [`StoreThread`]: a store's writes on a thread of their own, as a node's effect runner.
//!
//! Owns: the thread and the two channels to it. The thread applies operations in the order they were
//! started (a store's writes must not overtake each other: a counter set twice, a journal entry added then
//! removed) and reports each when it is done; the node collects the reports when it next wakes, which is
//! at most [`POLL`] after an operation started while one is in flight. Must never: block the driver
//! (`start` sends, `poll_done` tries to receive).

use corral_proto::{Duration, EffectDone, EffectId, EffectOp, EffectRunner, Instant};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};

/// How often a node with writes in flight looks for their completion. An entity change waits a round trip
/// to its members anyway; a millisecond is lost in it.
pub const POLL: Duration = Duration::from_millis(1);

/// Does a node's effects on a thread of its own (see the module docs). Dropping it ends the thread once
/// the operations already started are done.
pub struct StoreThread {
    to: Sender<(EffectId, EffectOp)>,
    from: Receiver<(EffectId, EffectDone)>,
    in_flight: usize,
    /// The latest `now` a driver gave: completions are looked for [`POLL`] after it.
    last: Instant,
}

impl StoreThread {
    /// A thread named `name` that does each effect with `exec`.
    pub fn spawn(
        name: &str,
        mut exec: impl FnMut(EffectOp) -> EffectDone + Send + 'static,
    ) -> std::io::Result<StoreThread> {
        let (to, ops) = channel::<(EffectId, EffectOp)>();
        let (done, from) = channel();
        std::thread::Builder::new().name(name.to_string()).spawn(move || {
            for (id, op) in ops {
                if done.send((id, exec(op))).is_err() {
                    return; // the node is gone
                }
            }
        })?;
        Ok(StoreThread { to, from, in_flight: 0, last: Instant::ZERO })
    }
}

impl EffectRunner for StoreThread {
    fn start(&mut self, now: Instant, id: EffectId, op: EffectOp) {
        self.last = now;
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
                self.in_flight -= 1;
                Some(done)
            }
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => {
                if self.in_flight > 0 {
                    tracing::error!(writes = self.in_flight, "the store's thread ended with writes in flight");
                    self.in_flight = 0;
                }
                None
            }
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        (self.in_flight > 0).then(|| self.last + POLL)
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
