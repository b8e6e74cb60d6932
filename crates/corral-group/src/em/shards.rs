//! One gateway, several workers: a *manager* EM that owns the store and makes every change, and *replica*
//! EMs that serve uses from a copy of the entity table the manager publishes in a [`Directory`]. What a
//! worker's role decides (may it change, publish, wake) is `impl Part`; a replica's sync, which changes
//! the table, the jobs and the watches, is `impl EntityManager`.
//!
//! The workers share one port (corral-tokio's `steer`): the kernel hands a worker the answers to its own
//! member requests, spreads GETs (reads and observations of entities, listings, profiles) over the
//! workers by the client's address, and gives the manager every other request — creations, updates,
//! deletions and actuations, and every OSCORE request. So only the manager writes the store, allocates
//! multicast groups, keeps the membership journal and recovers after a crash; a replica never does.
//!
//! # Consistency
//! The manager publishes its table after every committed change, before the answer leaves (the driver
//! sends answers after the service returns). A replica compares the directory's generation — one atomic
//! load — at every input and, when it moved, takes the new table: a client that saw `2.01 Created` finds
//! the entity on any worker. Uses already running keep the members they started with, as on the manager.
//! A replica's observers of a changed or deleted entity get their last rendering (the new entity, or
//! 4.04) at the replica's next input; while it has observed entities it wakes every
//! [`SYNC_PERIOD`] to look, so that rendering is at most that late.
//!
//! # Quotas
//! Each worker enforces the exchange quotas on its own traffic. A client (address and port) stays on one
//! worker, so the per-client quota holds as configured; the per-entity quota is divided among the
//! workers; the total is per worker, because it protects that worker's endpoint.
//!
//! # What a member sees
//! One peer: every worker asks from the gateway's one address and port, with message IDs and tokens from
//! disjoint slices, so the member's duplicate detection never mistakes one worker's request for
//! another's, and the gateway's message IDs towards one member last as long as a single worker's would.
//! NSTART (RFC 7252 §4.7) holds per worker: towards one member the gateway may have up to one request
//! outstanding per worker, not one in all.
//!
//! A replica that receives a change anyway (the steering is off) answers 5.00 naming the worker, rather
//! than write a store it does not own.

use super::{EmConfig, EntityManager, Fail};
use crate::store::{Snapshot, StoreError, StoredEntity};
use corral_proto::wire::Code;
use corral_proto::{Context, Duration, Instant};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tracing::debug;

/// How often a replica with observed entities looks for changes when nothing else wakes it.
pub const SYNC_PERIOD: Duration = Duration::from_millis(100);

type Published = Arc<BTreeMap<String, StoredEntity>>;

/// The entity table a manager publishes to its replicas. Cloning it shares it.
#[derive(Debug, Clone, Default)]
pub struct Directory {
    inner: Arc<DirectoryInner>,
}

#[derive(Debug, Default)]
struct DirectoryInner {
    generation: AtomicU64,
    table: Mutex<Published>,
}

impl Directory {
    pub fn new() -> Directory {
        Directory::default()
    }

    /// How many times the table was published.
    pub fn generation(&self) -> u64 {
        self.inner.generation.load(Ordering::Acquire)
    }

    fn publish(&self, table: BTreeMap<String, StoredEntity>) {
        let mut slot = self.inner.table.lock().unwrap_or_else(|p| p.into_inner());
        *slot = Arc::new(table);
        self.inner.generation.fetch_add(1, Ordering::Release);
    }

    /// The table and the generation it belongs to (read under the lock, so they match).
    fn snapshot(&self) -> (u64, Published) {
        let slot = self.inner.table.lock().unwrap_or_else(|p| p.into_inner());
        (self.generation(), slot.clone())
    }
}

/// What this EM is among a gateway's workers.
#[derive(Debug)]
pub(super) enum Part {
    /// The only worker.
    Sole,
    Manager(Directory),
    Replica {
        directory: Directory,
        worker: u8,
        /// The generation of the table this replica holds.
        seen: u64,
        /// The time of the last input, for the wake-up while entities are observed.
        last_input: Instant,
    },
}

impl EntityManager {
    /// The manager of a sharded gateway: as [`EntityManager::new`], and it publishes its entity table to
    /// `directory` now and after every change.
    pub fn manager(config: EmConfig, snapshot: Snapshot, directory: Directory) -> Result<Self, StoreError> {
        let mut em = EntityManager::new(config, snapshot)?;
        em.part = Part::Manager(directory);
        em.part.publish(&em.entities);
        Ok(em)
    }

    /// Replica `worker` of a sharded gateway: it serves uses of the entities `directory` holds and
    /// follows the manager's changes (see the module docs). The manager must exist first.
    pub fn replica(config: EmConfig, directory: Directory, worker: u8) -> Result<Self, StoreError> {
        let (seen, table) = directory.snapshot();
        let snapshot = Snapshot { entities: table.values().cloned().collect(), ..Snapshot::default() };
        let mut em = EntityManager::load(config, snapshot)?;
        debug!(worker, entities = em.entities.len(), generation = seen, "replica loaded the manager's entities");
        em.part = Part::Replica { directory, worker, seen, last_input: Instant::ZERO };
        Ok(em)
    }

    /// A replica takes the manager's changes, if there are any: entities added, replaced or gone; the
    /// observers of those that changed get their last rendering (`cluster`'s `take_changes`, as changes
    /// through another gateway do).
    pub(super) fn sync(&mut self, cx: &mut Context<'_>) {
        let Part::Replica { directory, seen, last_input, .. } = &mut self.part else { return };
        *last_input = cx.now();
        if directory.generation() == *seen {
            return;
        }
        let (generation, table) = directory.snapshot();
        *seen = generation;
        let changes = self.entities.difference(table.values().cloned().collect());
        debug!(generation, changed = changes.len(), "replica took the manager's changes");
        // A replica changes nothing itself: it leaves nothing alone.
        self.take_changes(cx, changes);
    }
}

impl Part {
    /// Whether this EM makes changes (it is the only worker or the manager).
    pub(super) fn may_change(&self) -> Result<(), Fail> {
        match self {
            Part::Replica { worker, .. } => Err((
                Code::INTERNAL_SERVER_ERROR,
                format!(
                    "entity changes are made by worker 0 of this gateway and this request reached worker {worker}: \
                     the socket's steering is not working"
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The manager's table to its replicas, after a change.
    pub(super) fn publish(&self, entities: &super::Table) {
        if let Part::Manager(d) = self {
            d.publish(entities.iter().map(|(n, e)| (n.clone(), e.stored.clone())).collect());
        }
    }

    /// A replica with observed entities (`watching`) wakes to look for changes (see the module docs).
    pub(super) fn sync_timeout(&self, watching: bool) -> Option<Instant> {
        match self {
            Part::Replica { last_input, .. } if watching => Some(*last_input + SYNC_PERIOD),
            _ => None,
        }
    }
}
