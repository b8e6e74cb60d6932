//! Persistence of the Entity Manager: entities with their profiles and members, multicast memberships,
//! and counters (the multicast address allocator cursors, the generated-name sequence).
//!
//! Owns: the [`Store`] trait the EM writes through, and [`MemStore`] for tests and the simulator. The
//! SQLite implementation is [`crate::SqliteStore`].
//!
//! The EM is sans-IO, yet a store call is synchronous local I/O *(documented exception)*: an entity change
//! is rare (creation, update, deletion, address allocation), is a single small transaction, and happens
//! after the network work for it is done, so a blocking call of a few hundred microseconds (an fsync on
//! commit) is cheaper and simpler than an asynchronous store protocol. Use requests never touch the store:
//! the EM serves them from its in-memory copy. Every write is one atomic transaction: after a crash the
//! store holds the old state or the new one, never a mix.

use crate::pool::PoolError;
use crate::profile::Profile;
use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};

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
            StoreError::Internal(m) => write!(f, "internal: {m}"),
        }
    }
}

impl std::error::Error for StoreError {}

/// Where the EM keeps its state. Each method is one atomic transaction.
pub trait Store: Send + 'static {
    /// Everything, for start-up.
    fn load(&self) -> Result<Snapshot, StoreError>;
    /// Inserts or replaces an entity (profile, members, memberships) as a whole.
    fn save_entity(&mut self, entity: &StoredEntity) -> Result<(), StoreError>;
    /// Removes an entity; absent is not an error.
    fn delete_entity(&mut self, name: &str) -> Result<(), StoreError>;
    /// Sets a counter (allocator cursors, name sequence).
    fn set_counter(&mut self, key: &str, value: u64) -> Result<(), StoreError>;
    /// Records that `members` may become (or stay) members of `group`: written before a join or leave
    /// request goes out, so that after a crash the EM knows whom to ask to leave.
    fn journal_add(&mut self, group: IpAddr, members: &[SocketAddr]) -> Result<(), StoreError>;
    /// Removes journal entries: the membership is recorded by an entity, or the member confirmed leaving.
    fn journal_remove(&mut self, group: IpAddr, members: &[SocketAddr]) -> Result<(), StoreError>;
    /// Records that `group` was released at `at_ms` (Unix ms); it rests in quarantine from then on.
    fn release_group(&mut self, group: IpAddr, at_ms: u64) -> Result<(), StoreError>;
    /// Gives the space of deleted rows back to the file system (a no-op for stores without a file).
    fn compact(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// An in-memory store for tests and the simulator (no durability).
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

    fn check(&self) -> Result<(), StoreError> {
        if self.fail_writes {
            Err(StoreError::Refused)
        } else {
            Ok(())
        }
    }
}

impl Store for MemStore {
    fn load(&self) -> Result<Snapshot, StoreError> {
        Ok(self.snapshot.clone())
    }

    fn save_entity(&mut self, entity: &StoredEntity) -> Result<(), StoreError> {
        self.check()?;
        match self.snapshot.entities.iter_mut().find(|e| e.name == entity.name) {
            Some(e) => *e = entity.clone(),
            None => self.snapshot.entities.push(entity.clone()),
        }
        Ok(())
    }

    fn delete_entity(&mut self, name: &str) -> Result<(), StoreError> {
        self.check()?;
        self.snapshot.entities.retain(|e| e.name != name);
        Ok(())
    }

    fn set_counter(&mut self, key: &str, value: u64) -> Result<(), StoreError> {
        self.check()?;
        self.snapshot.counters.insert(key.to_string(), value);
        Ok(())
    }

    fn journal_add(&mut self, group: IpAddr, members: &[SocketAddr]) -> Result<(), StoreError> {
        self.check()?;
        for m in members {
            if !self.snapshot.journal.contains(&(group, *m)) {
                self.snapshot.journal.push((group, *m));
            }
        }
        Ok(())
    }

    fn journal_remove(&mut self, group: IpAddr, members: &[SocketAddr]) -> Result<(), StoreError> {
        self.check()?;
        self.snapshot.journal.retain(|(g, m)| *g != group || !members.contains(m));
        Ok(())
    }

    fn release_group(&mut self, group: IpAddr, at_ms: u64) -> Result<(), StoreError> {
        self.check()?;
        self.snapshot.released.insert(group, at_ms);
        Ok(())
    }
}
