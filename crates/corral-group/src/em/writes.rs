//! Store writes in flight: [`Writes`], what waits for each write the EM started, under its effect id.
//!
//! The EM never calls its store (see [`crate::store`]): a write leaves as an effect, and the flow that
//! needs it done — before members are asked to join or leave, before a client is answered — is parked
//! here with the step it takes next ([`Next`]). When the completion comes back, late and in whatever order,
//! the flow goes on or fails; meanwhile the EM serves other inputs, and the entity's name stays busy.
//! Writes nothing waits for (a settled journal entry, a release time, compaction) are parked too, so that
//! their failure is logged and the memory they mirror changes only once they are done.
//!
//! Owns: the parked waits. Must never: apply a write to the in-memory state before it is done.

use super::jobs::Kind;
use super::{EntityManager, Flow, Item};
use corral_proto::EffectId;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

/// What waits for one store write.
#[derive(Debug)]
pub(super) enum Wait {
    /// A flow waits for its write and goes on with `next`.
    Flow { flow: Box<Flow>, next: Next },
    /// Journal entries the store is removing: they leave the in-memory journal once they are gone from the
    /// store too (until then a reconciliation still counts them).
    Settled(IpAddr, Vec<SocketAddr>),
    /// Nothing waits: a failure is logged, naming what the write was for.
    Detached(&'static str),
    /// A pending record being removed (a refused multicast creation's, an unreadable one): its name stays
    /// busy until it is gone from the store, so that no creation of the name meanwhile is deleted by a
    /// retry; a failure leaves it to the next reconciliation.
    PendingRemoved(String),
}

/// A flow's next step once its write is done.
#[derive(Debug)]
pub(super) enum Next {
    /// The journal entries of a join or leave (and, before members leave, the change itself) are written:
    /// the fan-out starts.
    Job {
        kind: Kind,
        items: Vec<Item>,
        /// Journal entries written, to mirror in memory.
        journal: Option<(IpAddr, Vec<SocketAddr>)>,
        /// The change was written too (see `flows::persist_writes`), with the release of a deleted
        /// entity's group (Unix ms).
        persisted: Option<Option<(IpAddr, u64)>>,
    },
    /// The allocator's cursor (and a creation's pending record, `pending`) are written: members join.
    Allocated { group: IpAddr, pending: bool },
    /// The flow's result is written (with the generated-name sequence, if it advanced): it is installed
    /// and answered.
    Committed { names_seq: Option<u64> },
}

/// The waits, by the effect id of their write.
#[derive(Debug, Default)]
pub(super) struct Writes {
    waits: HashMap<EffectId, Wait>,
}

impl Writes {
    pub(super) fn park(&mut self, id: EffectId, wait: Wait) {
        self.waits.insert(id, wait);
    }

    pub(super) fn take(&mut self, id: EffectId) -> Option<Wait> {
        self.waits.remove(&id)
    }

    pub(super) fn len(&self) -> usize {
        self.waits.len()
    }
}

impl EntityManager {
    /// Starts `writes` as one store operation; `wait` goes on when it is done.
    pub(super) fn write(&mut self, cx: &mut corral_proto::Context<'_>, writes: Vec<crate::store::Write>, wait: Wait) {
        let id = cx.effect(Box::new(crate::store::StoreOp(writes)));
        self.writes.park(id, wait);
    }
}
