//! What the directory writes so that a directory that crashes or restarts still knows who registered
//! (devices refresh only every few hours): every registration, written when it changes.
//!
//! Owns: what the directory asks of a store — a [`StoreOp`] of [`Write`]s applied in one atomic
//! transaction, and its completion [`StoreDone`] —, the [`Store`] trait a store implements, [`MemStore`]
//! for tests and the simulator, and [`run_op`], which does one operation on a store. The SQLite store and
//! the thread that keeps its fsyncs off the driver live in `corral-store`.
//!
//! # Storage as an effect
//! The directory never calls a store. A change it must make durable (a registration, an update, a removal,
//! an expiry) leaves it as an effect ([`corral_proto::Context::effect`]) and the request waits, parked
//! under the effect's id, until the [`StoreDone`] comes back; the directory serves lookups meanwhile.
//! A change is answered only once its write is done; a failed write undoes the change and answers 5.00.
//! Lookups never touch the store: the directory keeps its registrations in memory, loaded once at
//! start-up by the driver ([`Store::load`], handed to [`crate::RdService::durable`]).
//!
//! Lifetimes are stored as wall-clock times (Unix milliseconds), since the sans-IO clock starts again with
//! each process: the service converts with the wall-clock time of its clock's zero, which the driver gives.

use crate::directory::Registration;
use corral_proto::{EffectDone, EffectOp};
use std::fmt;

/// A registration as stored: the registration with its end as a wall-clock time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub reg: Registration,
    pub expires_unix_ms: u64,
}

/// A store failed; the change it was for is not made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError(pub String);

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "registration store: {}", self.0)
    }
}

impl std::error::Error for StoreError {}

/// One change to the stored registrations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// Writes (or replaces) a registration; one with the same name (`ep`, `d`) under another id goes.
    Save(Stored),
    /// Removes the registration with this id, if stored.
    Remove(String),
}

/// What the directory asks its store to do: these writes, in one atomic transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOp(pub Vec<Write>);

/// What came of a [`StoreOp`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreDone(pub Result<(), StoreError>);

/// Where the directory keeps its registrations.
pub trait Store: Send + 'static {
    /// Applies `writes` in one atomic transaction, durably before it returns.
    fn apply(&mut self, writes: &[Write]) -> Result<(), StoreError>;
    /// Every registration stored, for start-up; rows that do not parse are skipped and counted.
    fn load(&mut self) -> Result<(Vec<Stored>, usize), StoreError>;

    /// Writes one registration (see [`Write::Save`]).
    fn save(&mut self, s: &Stored) -> Result<(), StoreError> {
        self.apply(&[Write::Save(s.clone())])
    }

    /// Removes one registration.
    fn remove(&mut self, id: &str) -> Result<(), StoreError> {
        self.apply(&[Write::Remove(id.to_string())])
    }
}

/// The result of `op` on `store`: its writes applied, or why not (an operation of another type is a bug).
pub fn run_op(store: &mut dyn Store, op: EffectOp) -> EffectDone {
    let done = match op.downcast::<StoreOp>() {
        Ok(op) => StoreDone(store.apply(&op.0)),
        Err(_) => StoreDone(Err(StoreError("an effect that is not a directory store operation".into()))),
    };
    Box::new(done)
}

/// A store in memory (tests, the simulator).
#[derive(Debug, Default)]
pub struct MemStore {
    pub rows: Vec<Stored>,
    /// Refuse every write (a full disk), to test that a failed write changes nothing.
    pub fail_writes: bool,
}

impl Store for MemStore {
    fn apply(&mut self, writes: &[Write]) -> Result<(), StoreError> {
        if self.fail_writes {
            return Err(StoreError("writes refused (MemStore::fail_writes)".into()));
        }
        for w in writes {
            match w {
                Write::Save(s) => {
                    self.rows.retain(|r| r.reg.id != s.reg.id && (r.reg.ep != s.reg.ep || r.reg.d != s.reg.d));
                    self.rows.push(s.clone());
                }
                Write::Remove(id) => self.rows.retain(|r| &r.reg.id != id),
            }
        }
        Ok(())
    }

    fn load(&mut self) -> Result<(Vec<Stored>, usize), StoreError> {
        Ok((self.rows.clone(), 0))
    }
}
