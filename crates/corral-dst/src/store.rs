//! The simulated store: the Entity Manager's writes as effects on the virtual clock, with latency, slow
//! spells, unavailability, errors, and what a crash loses.
//!
//! # What it owns
//! [`SimStore`], the durable state and the log of operations not yet durable, shared between the runner
//! the gateway's node holds ([`SimRunner`]) and the harness, which keeps it across a crash. Its model is a
//! real database's: operations are applied in the order they were started; an operation is reported done
//! only once it and every operation before it are durable; one reported done survives any crash; of the
//! operations not reported, a crash keeps a random prefix (a transaction may be on disk before its
//! completion is delivered) and loses the rest, never a part of one. A failed operation (the store
//! unavailable, a random error) changes nothing and is reported as a `StoreError::Io`.
//!
//! It also holds the store-side defects ([`crate::Defect`]), which break exactly this contract on purpose.
//! It never reads a clock (the runner is told `now`) and draws only from its own seeded stream.

use crate::Defect;
use corral_group::{Snapshot, StoreDone, StoreError, StoreOp, Write};
use corral_proto::{Duration, EffectDone, EffectId, EffectOp, EffectRunner, Instant, Rng};
use std::sync::{Arc, Mutex, MutexGuard};

/// One operation the store took and has not reported done.
struct Pending {
    id: EffectId,
    writes: Vec<Write>,
    /// When it will be durable (and reported).
    due: Instant,
    /// It fails when due (and changes nothing).
    fails: bool,
    /// Already reported done (the `ack-before-durable` defect only).
    reported: bool,
}

/// What the store holds and what is on its way (see the module docs).
pub struct SimStore {
    durable: Snapshot,
    pending: Vec<Pending>,
    /// Completions to deliver, in the order they became due.
    done: Vec<(EffectId, StoreDone)>,
    rng: Rng,
    defect: Option<Defect>,
    /// Latency of an operation: uniform in this range.
    latency: (Duration, Duration),
    /// Until then, every operation takes 1-8 s (a slow disk, a database under load).
    slow_until: Instant,
    /// Until then, every operation fails (the database is unreachable).
    down_until: Instant,
    /// Probability that an operation fails on its own.
    error_rate: f64,
    /// Operations reported done (for the report and the checks' sake).
    pub acknowledged: u64,
    /// Operations lost by crashes (started, never reported).
    pub lost: u64,
}

/// The store, shared by the runner and the harness.
#[derive(Clone)]
pub struct SharedStore(Arc<Mutex<SimStore>>);

impl SharedStore {
    pub fn new(seed: u64, defect: Option<Defect>) -> SharedStore {
        SharedStore(Arc::new(Mutex::new(SimStore {
            durable: Snapshot::default(),
            pending: Vec::new(),
            done: Vec::new(),
            rng: Rng::stream(seed, 0xD57_0001),
            defect,
            latency: (Duration::from_micros(200), Duration::from_millis(40)),
            slow_until: Instant::ZERO,
            down_until: Instant::ZERO,
            error_rate: 0.002,
            acknowledged: 0,
            lost: 0,
        })))
    }

    pub fn lock(&self) -> MutexGuard<'_, SimStore> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A runner for a (re)started gateway's node.
    pub fn runner(&self) -> SimRunner {
        SimRunner(self.clone())
    }
}

impl SimStore {
    /// What a gateway starting now loads.
    pub fn durable(&self) -> &Snapshot {
        &self.durable
    }

    /// Operations taken and not yet durable.
    pub fn in_flight(&self) -> usize {
        self.pending.iter().filter(|p| !p.fails).count()
    }

    pub fn slow_until(&mut self, t: Instant) {
        self.slow_until = self.slow_until.max(t);
    }

    pub fn down_until(&mut self, t: Instant) {
        self.down_until = self.down_until.max(t);
    }

    /// Heals the store (the end of a run's faults): normal latency, no unavailability, no random errors.
    pub fn heal(&mut self, now: Instant) {
        self.slow_until = now;
        self.down_until = now;
        self.error_rate = 0.0;
    }

    /// The gateway's process died: what was not reported done is kept up to a random prefix, the rest is
    /// lost, and no completion will ever be delivered (the process that waited is gone).
    pub fn crash(&mut self) {
        let keep = self.rng.below(self.pending.len() as u64 + 1) as usize;
        let lost: Vec<Pending> = self.pending.drain(..).collect();
        for (k, p) in lost.into_iter().enumerate() {
            if k < keep && !p.fails {
                self.durable.apply(&p.writes);
            } else if !p.fails {
                self.lost += 1;
            }
        }
        self.done.clear();
    }

    fn take(&mut self, now: Instant, id: EffectId, op: EffectOp) {
        let writes = match op.downcast::<StoreOp>() {
            Ok(op) => op.0,
            Err(_) => {
                let e = StoreError::Internal("an effect that is not a store operation");
                self.done.push((id, StoreDone(Err(e))));
                return;
            }
        };
        let writes = match self.defect {
            Some(Defect::SkipJournalWrite) => {
                writes.into_iter().filter(|w| !matches!(w, Write::JournalAdd(..))).collect()
            }
            _ => writes,
        };
        let (lo, hi) =
            if now < self.slow_until { (Duration::from_secs(1), Duration::from_secs(8)) } else { self.latency };
        let span = (hi - lo).as_micros();
        let due = now + lo + Duration::from_micros(self.rng.below(span.max(1)));
        let fails = now < self.down_until || self.rng.chance(self.error_rate);
        let reported = self.defect == Some(Defect::AckBeforeDurable) && !fails;
        if reported {
            self.done.push((id, StoreDone(Ok(()))));
            self.acknowledged += 1;
        }
        self.pending.push(Pending { id, writes, due, fails, reported });
    }

    /// Makes durable, in order, every operation up to the last one due by `now`, and queues their
    /// completions (a due failure changes nothing).
    fn advance(&mut self, now: Instant) {
        let Some(last) = self.pending.iter().rposition(|p| p.due <= now) else { return };
        for p in self.pending.drain(..=last).collect::<Vec<_>>() {
            let result = if p.fails {
                Err(StoreError::Io("the simulated store is unavailable".into()))
            } else {
                let dropped = self.defect == Some(Defect::DropWrite) && self.rng.chance(0.05);
                if !dropped {
                    self.durable.apply(&p.writes);
                }
                Ok(())
            };
            if !p.reported {
                if result.is_ok() {
                    self.acknowledged += 1;
                }
                self.done.push((p.id, StoreDone(result)));
            }
        }
    }
}

/// The runner a gateway's node holds: hands the EM's operations to the shared store.
pub struct SimRunner(SharedStore);

impl EffectRunner for SimRunner {
    fn start(&mut self, now: Instant, id: EffectId, op: EffectOp) {
        self.0.lock().take(now, id, op);
    }

    fn poll_done(&mut self, now: Instant) -> Option<(EffectId, EffectDone)> {
        let mut s = self.0.lock();
        s.advance(now);
        if s.done.is_empty() {
            return None;
        }
        let (id, done) = s.done.remove(0);
        Some((id, Box::new(done)))
    }

    fn poll_timeout(&self) -> Option<Instant> {
        // Completions already queued are taken after the input that queued them (the node polls until
        // none is left), so only the operations still to become durable set a deadline.
        self.0.lock().pending.iter().map(|p| p.due).min()
    }
}
