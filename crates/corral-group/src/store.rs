//! Persistence of the Entity Manager: entities with their profiles and members, multicast memberships,
//! and counters (the multicast address allocator cursors, the generated-name sequence).
//!
//! Owns: what the EM asks of a store — a [`StoreOp`] of [`Write`]s applied in one atomic transaction, and
//! its completion [`StoreDone`] —, the [`Store`] trait a store implements, [`MemStore`] for tests and
//! the simulator, and [`StoreRunner`], which does a store's writes as the EM's effects. The stores that
//! do I/O (SQLite, PostgreSQL) and the runners that keep their I/O off the driver's thread live in
//! `corral-store`.
//!
//! # Storage as an effect
//! The EM never calls a store. A change it must make durable leaves it as an effect
//! ([`corral_proto::Context::effect`]) — a [`StoreOp`] — and whatever waits for it (a flow's next step,
//! the client's answer) waits parked under the effect's id until the [`StoreDone`] comes back, as a
//! member's response would; the EM serves other requests meanwhile, and never answers a change before its
//! write is done. Completions may come late and in any order; a store applies operations in the order the
//! EM started them. Use requests never touch the store: the EM serves them from its in-memory copy, which
//! the driver loads once at start-up ([`Store::load`], handed to [`crate::EntityManager::new`]).
//!
//! # Durability
//! Every [`StoreOp`] is one atomic transaction: after a crash the store holds all of its writes or none,
//! never a mix; one the store reported done survives any crash. One not reported done may or may not have
//! been applied: the EM's recovery at start-up (pending records, the membership journal) is built for
//! exactly that.

use crate::pool::PoolError;
use crate::profile::Profile;
use corral_proto::{EffectDone, EffectId, EffectOp, EffectRunner, InlineRunner, Instant};
use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

/// An entity as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEntity {
    pub name: String,
    pub profile: Profile,
    /// The multicast group of a multicast entity.
    pub group: Option<IpAddr>,
    /// Per member (in `profile.er` order): whether it confirmed joining `group`.
    pub joined: Vec<bool>,
    /// A multicast creation in progress: the group is allocated and members may be joining. Written before
    /// the first join so that, after a crash, the EM asks every member to leave and removes the record.
    pub pending: bool,
}

/// Everything a store holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub entities: Vec<StoredEntity>,
    pub counters: BTreeMap<String, u64>,
    /// The membership journal: (group, member) pairs that may exist without an entity recording them.
    pub journal: Vec<(IpAddr, SocketAddr)>,
    /// Released multicast groups and when (Unix ms), for the quarantine.
    pub released: BTreeMap<IpAddr, u64>,
    /// A store that several gateways share: the version of its change feed this snapshot was read at
    /// (see [`ChangesSince`]); `None` for a store of one gateway's own.
    pub feed: Option<u64>,
}

/// A store failure, by fault; the EM answers 5.00 and changes nothing. Shown as `store: <what>`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreError {
    /// The database cannot be opened, read or written (permissions, a full disk, an I/O error): the
    /// message of the layer that failed.
    Io(String),
    /// The database refused an operation (locked, a constraint, not a database): SQLite's message.
    Sqlite(String),
    /// PostgreSQL refused an operation or could not be reached: where (the URL without its password) and
    /// the server's or the connection's message.
    Postgres(String),
    /// A row that does not read back.
    Corrupt(CorruptRow),
    /// The database was written by a newer corral: its schema version and the newest this one knows.
    NewerSchema { found: i64, supported: i64 },
    /// A stored entity this EM cannot use (a member URI that does not resolve): the entity and why.
    Entity { name: String, why: String },
    /// The configuration the entities are loaded with is invalid: an address pool, and why.
    Config(PoolError),
    /// A write refused on purpose ([`MemStore::fail_writes`]).
    Refused,
    /// [`Write::CreateEntity`] of a name that exists: another gateway sharing the store created it first.
    Exists(String),
    /// A write that another gateway's committed first made impossible (a multicast group it took): what.
    Conflict(String),
    /// A bug: what was asked of the store makes no sense.
    Internal(&'static str),
}

/// Where an unreadable row is: its table and key.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CorruptRow {
    /// Column `column` of entity `name`.
    Entity { name: String, column: &'static str },
    /// A membership journal entry, as stored.
    Journal { group: String, member: String },
    /// A released group, as stored.
    Released { group: String },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("store: ")?;
        match self {
            StoreError::Io(m) | StoreError::Sqlite(m) => f.write_str(m),
            StoreError::Postgres(m) => write!(f, "PostgreSQL: {m}"),
            StoreError::Config(e) => write!(f, "{e}"),
            StoreError::Corrupt(CorruptRow::Entity { name, column }) => {
                write!(f, "entity {name}: unreadable {column} in the database")
            }
            StoreError::Corrupt(CorruptRow::Journal { group, member }) => {
                write!(f, "unreadable journal entry {group} {member} in the database")
            }
            StoreError::Corrupt(CorruptRow::Released { group }) => {
                write!(f, "unreadable released group {group} in the database")
            }
            StoreError::NewerSchema { found, supported } => write!(
                f,
                "database schema version {found} is newer than this corral ({supported}); refusing to touch it"
            ),
            StoreError::Entity { name, why } => write!(f, "entity {name}: {why}"),
            StoreError::Refused => f.write_str("write refused (fail_writes is set)"),
            StoreError::Exists(name) => write!(f, "entity {name} exists (created through another gateway)"),
            StoreError::Conflict(what) => write!(f, "{what}"),
            StoreError::Internal(m) => write!(f, "internal: {m}"),
        }
    }
}

impl std::error::Error for StoreError {}

/// One change of the EM's durable state.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// Inserts or replaces an entity (profile, members, memberships) as a whole.
    SaveEntity(StoredEntity),
    /// Inserts an entity that must not exist yet: the whole operation fails with [`StoreError::Exists`] if
    /// it does (create-only across gateways sharing a store), and otherwise is [`Write::SaveEntity`].
    CreateEntity(StoredEntity),
    /// Removes an entity; absent is not an error.
    DeleteEntity(String),
    /// Sets a counter (allocator cursors, name sequence).
    SetCounter(String, u64),
    /// Records that these members may become (or stay) members of the group: written before a join or
    /// leave request goes out, so that after a crash the EM knows whom to ask to leave.
    JournalAdd(IpAddr, Vec<SocketAddr>),
    /// Removes journal entries: the membership is recorded by an entity, or the member confirmed leaving.
    JournalRemove(IpAddr, Vec<SocketAddr>),
    /// Records that the group was released at this time (Unix ms); it rests in quarantine from then on.
    ReleaseGroup(IpAddr, u64),
    /// Gives the space of deleted rows back to the file system (a no-op for stores without a file); done
    /// after the transaction of the other writes.
    Compact,
}

/// What the EM asks of its store: writes applied in one atomic transaction (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct StoreOp(pub Vec<Write>);

/// What came of a [`StoreOp`].
#[derive(Debug, Clone, PartialEq)]
pub struct StoreDone(pub Result<(), StoreError>);

/// How long a [`ChangesSince`] waits at most for a change before it is completed with none: a change made
/// through another gateway reaches this one within it even when the store's wake-up is lost.
pub const FEED_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// The change feed of a store several gateways share (issue 45): an effect the EM keeps in flight to learn
/// of the changes other gateways commit. The runner completes it with the entities changed after version
/// `.0`, re-read from the store as they are now, as soon as there are any — a wake-up from the store
/// (PostgreSQL's LISTEN/NOTIFY) only says "look" — or with none after at most [`FEED_WAIT`]; or with
/// everything when the store no longer holds every change since `.0` (the gateway fell too far behind).
///
/// This effect is the seam a simulation uses to stand in for PostgreSQL: a simulated shared store answers
/// `ChangesSince` from its own versioned model (and [`Write::CreateEntity`] with [`StoreError::Exists`]),
/// and the EM cannot tell the difference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangesSince(pub u64);

/// What came of a [`ChangesSince`].
#[derive(Debug, Clone, PartialEq)]
pub struct Changes(pub Result<Feed, StoreError>);

/// What the change feed says.
#[derive(Debug, Clone, PartialEq)]
pub enum Feed {
    /// The entities other gateways changed since the version asked about, as they are now (`None`:
    /// deleted), and the version this brings the reader to.
    Changed { version: u64, entities: Vec<(String, Option<StoredEntity>)> },
    /// Too far behind to catch up change by change: everything, at its version ([`Snapshot::feed`]).
    Resync(Snapshot),
}

/// The reading side of a shared store's change feed, on a connection of its own: its runner keeps it on a
/// thread of its own, so that a wait never holds up a write.
pub trait ChangeFeed: Send + 'static {
    /// See [`ChangesSince`]; waits at most `wait` for a change.
    fn changes_since(&mut self, version: u64, wait: std::time::Duration) -> Result<Feed, StoreError>;
}

/// Where the EM keeps its state: it loads everything once and applies the EM's operations.
pub trait Store: Send + 'static {
    /// Everything, for start-up.
    fn load(&self) -> Result<Snapshot, StoreError>;
    /// Applies `writes` in one atomic transaction, durably before it returns ([`Write::Compact`] after
    /// it).
    fn apply(&mut self, writes: &[Write]) -> Result<(), StoreError>;

    /// [`Write::SaveEntity`] on its own.
    fn save_entity(&mut self, entity: &StoredEntity) -> Result<(), StoreError> {
        self.apply(&[Write::SaveEntity(entity.clone())])
    }
    /// [`Write::DeleteEntity`] on its own.
    fn delete_entity(&mut self, name: &str) -> Result<(), StoreError> {
        self.apply(&[Write::DeleteEntity(name.to_string())])
    }
    /// [`Write::SetCounter`] on its own.
    fn set_counter(&mut self, key: &str, value: u64) -> Result<(), StoreError> {
        self.apply(&[Write::SetCounter(key.to_string(), value)])
    }
    /// [`Write::JournalAdd`] on its own.
    fn journal_add(&mut self, group: IpAddr, members: &[SocketAddr]) -> Result<(), StoreError> {
        self.apply(&[Write::JournalAdd(group, members.to_vec())])
    }
    /// [`Write::JournalRemove`] on its own.
    fn journal_remove(&mut self, group: IpAddr, members: &[SocketAddr]) -> Result<(), StoreError> {
        self.apply(&[Write::JournalRemove(group, members.to_vec())])
    }
    /// [`Write::ReleaseGroup`] on its own.
    fn release_group(&mut self, group: IpAddr, at_ms: u64) -> Result<(), StoreError> {
        self.apply(&[Write::ReleaseGroup(group, at_ms)])
    }
}

impl<S: Store + ?Sized> Store for Box<S> {
    fn load(&self) -> Result<Snapshot, StoreError> {
        (**self).load()
    }
    fn apply(&mut self, writes: &[Write]) -> Result<(), StoreError> {
        (**self).apply(writes)
    }
}

impl Snapshot {
    /// Why `writes` cannot be applied to this snapshot as one transaction, if they cannot: a
    /// [`Write::CreateEntity`] of a name that exists (the model every store follows).
    pub fn check(&self, writes: &[Write]) -> Result<(), StoreError> {
        for w in writes {
            if let Write::CreateEntity(e) = w {
                if self.entities.iter().any(|x| x.name == e.name) {
                    return Err(StoreError::Exists(e.name.clone()));
                }
            }
        }
        Ok(())
    }

    /// `writes` applied to this snapshot, as a store applies them (the model every store follows; they
    /// passed [`Snapshot::check`]).
    pub fn apply(&mut self, writes: &[Write]) {
        for w in writes {
            match w {
                Write::SaveEntity(entity) | Write::CreateEntity(entity) => {
                    match self.entities.iter_mut().find(|e| e.name == entity.name) {
                        Some(e) => *e = entity.clone(),
                        None => self.entities.push(entity.clone()),
                    }
                }
                Write::DeleteEntity(name) => self.entities.retain(|e| e.name != *name),
                Write::SetCounter(key, value) => {
                    self.counters.insert(key.clone(), *value);
                }
                Write::JournalAdd(group, members) => {
                    for m in members {
                        if !self.journal.contains(&(*group, *m)) {
                            self.journal.push((*group, *m));
                        }
                    }
                }
                Write::JournalRemove(group, members) => {
                    self.journal.retain(|(g, m)| g != group || !members.contains(m));
                }
                Write::ReleaseGroup(group, at) => {
                    self.released.insert(*group, *at);
                }
                Write::Compact => {}
            }
        }
    }
}

/// An in-memory store for tests and the simulator: what it acknowledged it keeps as long as it lives.
#[derive(Debug, Clone, Default)]
pub struct MemStore {
    snapshot: Snapshot,
    /// Fail every write from now on (tests of the EM's behaviour on store errors).
    pub fail_writes: bool,
}

impl MemStore {
    pub fn new() -> MemStore {
        MemStore::default()
    }
}

impl From<Snapshot> for MemStore {
    /// A store that holds `snapshot` (what another store held when its process died, in a test).
    fn from(snapshot: Snapshot) -> MemStore {
        MemStore { snapshot, fail_writes: false }
    }
}

impl Store for MemStore {
    fn load(&self) -> Result<Snapshot, StoreError> {
        Ok(self.snapshot.clone())
    }

    fn apply(&mut self, writes: &[Write]) -> Result<(), StoreError> {
        if self.fail_writes {
            return Err(StoreError::Refused);
        }
        self.snapshot.check(writes)?;
        self.snapshot.apply(writes);
        Ok(())
    }
}

/// Does the EM's store operations as its effects ([`corral_proto::EffectRunner`]), each at once when it
/// starts, on a store held behind a shared handle (so a test or the simulator can look into it, or keep it
/// across a simulated crash). For [`MemStore`] and other stores that do no I/O: a store that does (SQLite,
/// PostgreSQL) would block the driver here, and runs under corral-store's runners instead.
pub struct StoreRunner<S: Store> {
    store: Arc<Mutex<S>>,
    inline: InlineRunner,
}

impl<S: Store> StoreRunner<S> {
    pub fn new(store: S) -> StoreRunner<S> {
        StoreRunner::shared(Arc::new(Mutex::new(store)))
    }

    /// A runner on a store another holder keeps too.
    pub fn shared(store: Arc<Mutex<S>>) -> StoreRunner<S> {
        let held = store.clone();
        let inline = InlineRunner::new(move |op| {
            let mut store = held.lock().unwrap_or_else(|p| p.into_inner());
            Box::new(run_op(&mut *store, op))
        });
        StoreRunner { store, inline }
    }

    /// The store, shared.
    pub fn store(&self) -> Arc<Mutex<S>> {
        self.store.clone()
    }
}

/// The result of `op` on `store`: its writes applied, or why not (an operation of another type is a bug).
pub fn run_op(store: &mut dyn Store, op: EffectOp) -> StoreDone {
    match op.downcast::<StoreOp>() {
        Ok(op) => StoreDone(store.apply(&op.0)),
        Err(_) => StoreDone(Err(StoreError::Internal("an effect that is not a store operation"))),
    }
}

impl<S: Store> EffectRunner for StoreRunner<S> {
    fn start(&mut self, now: Instant, id: EffectId, op: EffectOp) {
        self.inline.start(now, id, op);
    }

    fn poll_done(&mut self, now: Instant) -> Option<(EffectId, EffectDone)> {
        self.inline.poll_done(now)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.inline.poll_timeout()
    }
}
