//! The embedded SQLite store (one file, WAL mode).
//!
//! Owns: the schema, its version (`PRAGMA user_version`) and migrations, and the mapping of
//! [`StoredEntity`] onto tables. Every [`Store::apply`] is one transaction.
//!
//! # Durability *(decision)*
//! - `journal_mode=WAL`: readers never block the writer, and a commit is one append to the log.
//! - `synchronous=FULL`: each commit is fsynced before the call returns. With `NORMAL`, WAL survives a
//!   process crash (`kill -9`) but may lose the last commits on power loss; an EM write is rare and
//!   follows network round trips that take far longer than an fsync, and losing an allocator cursor on
//!   power loss would let the EM hand out a multicast address that is still bookmarked. So the stronger
//!   setting costs nothing that matters.
//! - Foreign keys with `ON DELETE CASCADE` keep members with their entity; saving an entity replaces its
//!   rows inside one transaction, so a crash leaves the old entity or the new one.
//!
//! - `auto_vacuum=INCREMENTAL` (v3): deletions give their pages back (`compact`, after each deletion),
//!   so the file shrinks after mass deletion instead of keeping its high-water mark forever.
//!
//! # Schema (version 4)
//! ```sql
//! entity(name TEXT PRIMARY KEY, emt TEXT, ect TEXT, enr INTEGER NULL, eo TEXT, delay TEXT,
//!        timeout INTEGER NULL, mcst_uri TEXT NULL, grp TEXT NULL, pending INTEGER,
//!        repair TEXT DEFAULT 'none',                                  -- v2: the `repair` field
//!        from_rd TEXT NULL, rd TEXT NULL)                             -- v4: members follow a directory
//! member(entity TEXT REFERENCES entity(name) ON DELETE CASCADE, idx INTEGER, uri TEXT, joined INTEGER,
//!        PRIMARY KEY (entity, idx))
//! counter(key TEXT PRIMARY KEY, value INTEGER)
//! journal(grp TEXT, member TEXT, PRIMARY KEY (grp, member))          -- v3: memberships in flight
//! released(grp TEXT PRIMARY KEY, at_ms INTEGER)                       -- v3: the quarantine
//! ```

use corral_group::profile::{Delay, Ect, Emt, Op, Profile, Repair};
use corral_group::store::{CorruptRow, Snapshot, Store, StoreError, StoredEntity, Write};
use rusqlite::{params, Connection, OptionalExtension};
use std::net::IpAddr;
use std::path::Path;

/// The schema version this code writes.
pub const SCHEMA_VERSION: i64 = 4;

const SCHEMA_V1: &str = "
CREATE TABLE entity (
    name     TEXT PRIMARY KEY NOT NULL,
    emt      TEXT NOT NULL,
    ect      TEXT NOT NULL,
    enr      INTEGER,
    eo       TEXT NOT NULL,
    delay    TEXT NOT NULL,
    timeout  INTEGER,
    mcst_uri TEXT,
    grp      TEXT,
    pending  INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE member (
    entity TEXT NOT NULL REFERENCES entity(name) ON DELETE CASCADE,
    idx    INTEGER NOT NULL,
    uri    TEXT NOT NULL,
    joined INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (entity, idx)
);
CREATE TABLE counter (
    key   TEXT PRIMARY KEY NOT NULL,
    value INTEGER NOT NULL
);
";

/// Version 2: multicast entities may repair by unicast (`repair`); existing entities keep seed 000's none.
const SCHEMA_V2: &str = "ALTER TABLE entity ADD COLUMN repair TEXT NOT NULL DEFAULT 'none';";

/// Version 3: the membership journal and the quarantine of released groups (issue 11).
const SCHEMA_V3: &str = "
CREATE TABLE journal (
    grp    TEXT NOT NULL,
    member TEXT NOT NULL,
    PRIMARY KEY (grp, member)
);
CREATE TABLE released (
    grp   TEXT PRIMARY KEY NOT NULL,
    at_ms INTEGER NOT NULL
);
";

/// Version 4 (issue 32): an entity's members may follow a Resource Directory lookup (`fromRd`, `rd`);
/// existing entities follow none.
const SCHEMA_V4: &str = "ALTER TABLE entity ADD COLUMN from_rd TEXT; ALTER TABLE entity ADD COLUMN rd TEXT;";

/// A SQLite failure by fault: the file system's (cannot open, read or write the file) or the database's.
fn e(err: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode::{CannotOpen, DiskFull, PermissionDenied, ReadOnly, SystemIoFailure};
    match &err {
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(f.code, CannotOpen | DiskFull | PermissionDenied | ReadOnly | SystemIoFailure) =>
        {
            StoreError::Io(err.to_string())
        }
        _ => StoreError::Sqlite(err.to_string()),
    }
}

/// The SQLite store. See the module docs.
pub struct SqliteStore {
    conn: Connection,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").field("path", &self.conn.path()).finish()
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database file and brings its schema up to date.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        let conn = Connection::open(path).map_err(e)?;
        SqliteStore::init(conn)
    }

    /// An in-memory database (same code path as a file, no durability).
    pub fn open_in_memory() -> Result<SqliteStore, StoreError> {
        SqliteStore::init(Connection::open_in_memory().map_err(e)?)
    }

    fn init(mut conn: Connection) -> Result<SqliteStore, StoreError> {
        conn.busy_timeout(std::time::Duration::from_secs(2)).map_err(e)?;
        // auto_vacuum must be chosen before the first table exists (or be followed by a VACUUM, below).
        let fresh: i64 = conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0)).map_err(e)?;
        if fresh == 0 {
            conn.execute_batch("PRAGMA auto_vacuum=INCREMENTAL;").map_err(e)?;
        }
        // journal_mode returns a row; in-memory databases answer "memory".
        let _: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0)).map_err(e)?;
        conn.execute_batch("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;").map_err(e)?;
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(e)?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema { found: version, supported: SCHEMA_VERSION });
        }
        if version < 1 {
            let tx = conn.transaction().map_err(e)?;
            tx.execute_batch(SCHEMA_V1).map_err(e)?;
            tx.pragma_update(None, "user_version", 1).map_err(e)?;
            tx.commit().map_err(e)?;
        }
        if version < 2 {
            let tx = conn.transaction().map_err(e)?;
            tx.execute_batch(SCHEMA_V2).map_err(e)?;
            tx.pragma_update(None, "user_version", 2).map_err(e)?;
            tx.commit().map_err(e)?;
        }
        if version < 3 {
            let tx = conn.transaction().map_err(e)?;
            tx.execute_batch(SCHEMA_V3).map_err(e)?;
            tx.pragma_update(None, "user_version", 3).map_err(e)?;
            tx.commit().map_err(e)?;
        }
        // A database made before v3 has no incremental vacuum: switching needs one full VACUUM.
        let av: i64 = conn.query_row("PRAGMA auto_vacuum", [], |r| r.get(0)).map_err(e)?;
        if av != 2 {
            conn.execute_batch("PRAGMA auto_vacuum=INCREMENTAL; VACUUM;").map_err(e)?;
        }
        if version < 4 {
            let tx = conn.transaction().map_err(e)?;
            tx.execute_batch(SCHEMA_V4).map_err(e)?;
            tx.pragma_update(None, "user_version", 4).map_err(e)?;
            tx.commit().map_err(e)?;
        }
        // Future migrations: `if version < 5 { … user_version = 5 }`, each in its own transaction.
        Ok(SqliteStore { conn })
    }

    /// The schema version of the open database.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        self.conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(e)
    }
}

/// An entity's operations as stored: their names, space-separated (shared with the PostgreSQL store).
pub(crate) fn eo_text(eo: &[Op]) -> String {
    eo.iter().map(|o| o.as_str()).collect::<Vec<_>>().join(" ")
}

/// [`eo_text`] read back; an unknown name is a corrupt `eo` of entity `name`.
pub(crate) fn parse_eo(text: &str, name: &str) -> Result<Vec<Op>, StoreError> {
    text.split(' ').filter(|s| !s.is_empty()).map(Op::parse).collect::<Option<_>>().ok_or_else(|| bad("eo", name))
}

/// An unreadable `column` of entity `name`.
pub(crate) fn bad(column: &'static str, name: &str) -> StoreError {
    StoreError::Corrupt(CorruptRow::Entity { name: name.to_string(), column })
}

impl Store for SqliteStore {
    fn load(&self) -> Result<Snapshot, StoreError> {
        let mut snap = Snapshot::default();
        let mut st = self
            .conn
            .prepare(
                "SELECT name, emt, ect, enr, eo, delay, timeout, mcst_uri, grp, pending, repair, from_rd, rd FROM entity ORDER BY name",
            )
            .map_err(e)?;
        let rows = st
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Option<i64>>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, Option<i64>>(6)?,
                    r.get::<_, Option<String>>(7)?,
                    r.get::<_, Option<String>>(8)?,
                    r.get::<_, i64>(9)? != 0,
                    r.get::<_, String>(10)?,
                    r.get::<_, Option<String>>(11)?,
                    r.get::<_, Option<String>>(12)?,
                ))
            })
            .map_err(e)?;
        let mut mst = self.conn.prepare("SELECT uri, joined FROM member WHERE entity = ?1 ORDER BY idx").map_err(e)?;
        for row in rows {
            let (name, emt, ect, enr, eo, delay, timeout, mcst_uri, grp, pending, repair, from_rd, rd) =
                row.map_err(e)?;
            let members: Vec<(String, bool)> = mst
                .query_map([&name], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? != 0)))
                .map_err(e)?
                .collect::<Result<_, _>>()
                .map_err(e)?;
            let eo = parse_eo(&eo, &name)?;
            let profile = Profile {
                er: members.iter().map(|(u, _)| u.clone()).collect(),
                emt: Emt::parse(&emt).ok_or_else(|| bad("emt", &name))?,
                ect: Ect::parse(&ect).ok_or_else(|| bad("ect", &name))?,
                enr: enr.map(|v| u32::try_from(v).map_err(|_| bad("enr", &name))).transpose()?,
                eo,
                delay: Delay::parse(&delay).ok_or_else(|| bad("delay", &name))?,
                timeout: timeout.map(|v| u64::try_from(v).map_err(|_| bad("timeout", &name))).transpose()?,
                mcst_uri,
                repair: Repair::parse(&repair).ok_or_else(|| bad("repair", &name))?,
                from_rd,
                rd,
            };
            let group = grp.map(|g| g.parse::<IpAddr>().map_err(|_| bad("group", &name))).transpose()?;
            snap.entities.push(StoredEntity {
                name,
                profile,
                group,
                joined: members.iter().map(|(_, j)| *j).collect(),
                pending,
            });
        }
        let mut cst = self.conn.prepare("SELECT key, value FROM counter").map_err(e)?;
        for row in cst.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))).map_err(e)? {
            let (k, v) = row.map_err(e)?;
            snap.counters.insert(k, v as u64);
        }
        let mut st = self.conn.prepare("SELECT grp, member FROM journal ORDER BY grp, member").map_err(e)?;
        let rows = st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))).map_err(e)?;
        for row in rows {
            let (g, m) = row.map_err(e)?;
            match (g.parse::<IpAddr>(), m.parse::<std::net::SocketAddr>()) {
                (Ok(g), Ok(m)) => snap.journal.push((g, m)),
                _ => return Err(StoreError::Corrupt(CorruptRow::Journal { group: g, member: m })),
            }
        }
        let mut st = self.conn.prepare("SELECT grp, at_ms FROM released").map_err(e)?;
        let rows = st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))).map_err(e)?;
        for row in rows {
            let (g, at) = row.map_err(e)?;
            let g = g.parse::<IpAddr>().map_err(|_| StoreError::Corrupt(CorruptRow::Released { group: g.clone() }))?;
            snap.released.insert(g, at.max(0) as u64);
        }
        Ok(snap)
    }

    fn apply(&mut self, writes: &[Write]) -> Result<(), StoreError> {
        let tx = self.conn.transaction().map_err(e)?;
        for w in writes {
            match w {
                Write::SaveEntity(ent) => save_entity(&tx, ent)?,
                Write::CreateEntity(ent) => {
                    let exists = tx
                        .query_row("SELECT COUNT(*) FROM entity WHERE name = ?1", [&ent.name], |r| r.get::<_, i64>(0));
                    if exists.map_err(e)? > 0 {
                        return Err(StoreError::Exists(ent.name.clone()));
                    }
                    save_entity(&tx, ent)?
                }
                Write::DeleteEntity(name) => {
                    tx.execute("DELETE FROM entity WHERE name = ?1", [name]).map_err(e)?;
                }
                Write::SetCounter(key, value) => {
                    tx.execute(
                        "INSERT INTO counter (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                        params![key, *value as i64],
                    )
                    .map_err(e)?;
                }
                Write::JournalAdd(group, members) => {
                    let mut st =
                        tx.prepare("INSERT OR IGNORE INTO journal (grp, member) VALUES (?1, ?2)").map_err(e)?;
                    for m in members {
                        st.execute(params![group.to_string(), m.to_string()]).map_err(e)?;
                    }
                }
                Write::JournalRemove(group, members) => {
                    let mut st = tx.prepare("DELETE FROM journal WHERE grp = ?1 AND member = ?2").map_err(e)?;
                    for m in members {
                        st.execute(params![group.to_string(), m.to_string()]).map_err(e)?;
                    }
                }
                Write::ReleaseGroup(group, at_ms) => {
                    tx.execute(
                        "INSERT INTO released (grp, at_ms) VALUES (?1, ?2) ON CONFLICT(grp) DO UPDATE SET at_ms = excluded.at_ms",
                        params![group.to_string(), *at_ms as i64],
                    )
                    .map_err(e)?;
                }
                Write::Compact => {}
            }
        }
        tx.commit().map_err(e)?;
        if writes.contains(&Write::Compact) {
            self.compact()?;
        }
        Ok(())
    }
}

/// Replaces entity `ent`'s rows inside `tx`.
fn save_entity(tx: &rusqlite::Transaction<'_>, ent: &StoredEntity) -> Result<(), StoreError> {
    tx.execute("DELETE FROM entity WHERE name = ?1", [&ent.name]).map_err(e)?;
    let p = &ent.profile;
    tx.execute(
        "INSERT INTO entity (name, emt, ect, enr, eo, delay, timeout, mcst_uri, grp, pending, repair, from_rd, rd) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)",
        params![
            ent.name,
            p.emt.as_str(),
            p.ect.as_str(),
            p.enr.map(i64::from),
            eo_text(&p.eo),
            p.delay.to_string(),
            p.timeout.map(|t| t as i64),
            p.mcst_uri,
            ent.group.map(|g| g.to_string()),
            ent.pending as i64,
            p.repair.as_str(),
            p.from_rd,
            p.rd,
        ],
    )
    .map_err(e)?;
    let mut st = tx.prepare("INSERT INTO member (entity, idx, uri, joined) VALUES (?1, ?2, ?3, ?4)").map_err(e)?;
    for (i, uri) in p.er.iter().enumerate() {
        let joined = ent.joined.get(i).copied().unwrap_or(false);
        st.execute(params![ent.name, i as i64, uri, joined as i64]).map_err(e)?;
    }
    Ok(())
}

impl SqliteStore {
    /// Gives the pages of deleted rows back to the file system, and folds the WAL in, so that the file
    /// shrinks now (after a deletion: `Write::Compact`).
    fn compact(&mut self) -> Result<(), StoreError> {
        // Each step of the pragma frees pages; run it to the end.
        let mut st = self.conn.prepare("PRAGMA incremental_vacuum").map_err(e)?;
        let mut rows = st.query([]).map_err(e)?;
        while rows.next().map_err(e)?.is_some() {}
        drop(rows);
        drop(st);
        let _: (i64, i64, i64) = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map_err(e)?;
        Ok(())
    }
}

impl SqliteStore {
    /// A counter's value, for diagnostics.
    pub fn counter(&self, key: &str) -> Result<Option<u64>, StoreError> {
        self.conn
            .query_row("SELECT value FROM counter WHERE key = ?1", [key], |r| r.get::<_, i64>(0))
            .optional()
            .map(|v| v.map(|v| v as u64))
            .map_err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(name: &str) -> StoredEntity {
        StoredEntity {
            name: name.into(),
            profile: Profile {
                er: vec!["coap://10.0.0.1/s/t".into(), "/em/x".into()],
                enr: Some(1),
                delay: Delay::Auto,
                timeout: Some(300),
                mcst_uri: Some("coap://239.255.89.1/s/t".into()),
                ect: Ect::Multicast,
                emt: Emt::Non,
                repair: Repair::Unicast,
                ..Profile::default()
            },
            group: Some("239.255.89.1".parse().unwrap()),
            joined: vec![true, false],
            pending: false,
        }
    }

    #[test]
    fn round_trip_replace_delete_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("em.db");
        {
            let mut s = SqliteStore::open(&path).unwrap();
            assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
            s.save_entity(&entity("a")).unwrap();
            let mut b = entity("b");
            b.profile.er.pop();
            b.joined.pop();
            s.save_entity(&b).unwrap();
            s.save_entity(&b).unwrap();
            s.set_counter("pool", 7).unwrap();
            s.set_counter("pool", 8).unwrap();
            s.delete_entity("missing").unwrap();
        }
        let mut s = SqliteStore::open(&path).unwrap();
        let snap = s.load().unwrap();
        assert_eq!(snap.entities.len(), 2);
        assert_eq!(snap.entities[0], entity("a"));
        assert_eq!(snap.entities[1].profile.er.len(), 1);
        assert_eq!(snap.counters["pool"], 8);
        s.delete_entity("a").unwrap();
        let n: i64 = s.conn.query_row("SELECT count(*) FROM member", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 1, "members cascade with their entity");
    }

    /// A database written by the first schema opens, gains `repair` (none: seed 000's behaviour) and
    /// keeps its entities.
    #[test]
    fn migrates_a_version_1_database() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("em.db");
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(SCHEMA_V1).unwrap();
            c.execute_batch(
                "INSERT INTO entity (name, emt, ect, enr, eo, delay, timeout, mcst_uri, grp, pending)
                 VALUES ('lights', 'non', 'multicast', NULL, 'lst', '0', NULL, 'coap://239.255.89.1/a/light', '239.255.89.1', 0);
                 INSERT INTO member (entity, idx, uri, joined) VALUES ('lights', 0, 'coap://10.0.0.1/a/light', 1);
                 PRAGMA user_version = 1;",
            )
            .unwrap();
        }
        let mut s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        let av: i64 = s.conn.query_row("PRAGMA auto_vacuum", [], |r| r.get(0)).unwrap();
        assert_eq!(av, 2, "an old database is switched to incremental vacuum");
        let snap = s.load().unwrap();
        assert_eq!(snap.entities.len(), 1);
        assert_eq!(snap.entities[0].profile.repair, Repair::None);
        assert_eq!(snap.entities[0].profile.er, vec!["coap://10.0.0.1/a/light".to_string()]);
        let mut e = snap.entities[0].clone();
        e.profile.repair = Repair::Unicast;
        s.save_entity(&e).unwrap();
        assert_eq!(SqliteStore::open(&path).unwrap().load().unwrap().entities[0].profile.repair, Repair::Unicast);
    }

    /// A version 3 database (before entities followed a directory) opens, its entities follow none, and
    /// an entity's lookup query and directory are kept across reopening (issue 32).
    #[test]
    fn migrates_a_version_3_database_and_keeps_the_directory_lookup() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("em.db");
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(SCHEMA_V1).unwrap();
            c.execute_batch(SCHEMA_V2).unwrap();
            c.execute_batch(SCHEMA_V3).unwrap();
            c.execute_batch(
                "INSERT INTO entity (name, emt, ect, enr, eo, delay, timeout, mcst_uri, grp, pending)
                 VALUES ('room1', 'con', 'unicast', NULL, 'avg', '0', NULL, NULL, NULL, 0);
                 INSERT INTO member (entity, idx, uri, joined) VALUES ('room1', 0, 'coap://10.0.0.1/s/t', 0);
                 PRAGMA user_version = 3;",
            )
            .unwrap();
        }
        let mut s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.schema_version().unwrap(), 4);
        let mut e = s.load().unwrap().entities.remove(0);
        assert_eq!((e.profile.from_rd.as_deref(), e.profile.rd.as_deref()), (None, None));
        e.profile.from_rd = Some("rt=temperature&d=floor1".into());
        e.profile.rd = Some("coap://127.0.0.1:5690".into());
        e.profile.er.clear();
        e.joined.clear();
        s.save_entity(&e).unwrap();
        drop(s);
        let back = SqliteStore::open(&path).unwrap().load().unwrap().entities.remove(0);
        assert_eq!(back, e, "an empty member list and the lookup come back as written");
    }

    #[test]
    fn journal_and_released_groups_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("em.db");
        let g: IpAddr = "239.255.89.7".parse().unwrap();
        let m1: std::net::SocketAddr = "10.0.0.1:5683".parse().unwrap();
        let m2: std::net::SocketAddr = "[2001:db8::2]:6000".parse().unwrap();
        {
            let mut s = SqliteStore::open(&path).unwrap();
            s.journal_add(g, &[m1, m2]).unwrap();
            s.journal_add(g, &[m1]).unwrap();
            s.release_group(g, 1_700_000_000_000).unwrap();
        }
        let mut s = SqliteStore::open(&path).unwrap();
        let snap = s.load().unwrap();
        assert_eq!(snap.journal, vec![(g, m1), (g, m2)]);
        assert_eq!(snap.released[&g], 1_700_000_000_000);
        s.journal_remove(g, &[m2]).unwrap();
        assert_eq!(s.load().unwrap().journal, vec![(g, m1)]);
    }

    #[test]
    fn the_file_shrinks_after_mass_deletion() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("em.db");
        let mut s = SqliteStore::open(&path).unwrap();
        let long = format!("coap://10.0.0.1/{}", "x".repeat(900));
        for i in 0..200 {
            let mut e = entity(&format!("e{i}"));
            e.profile.er = (0..20).map(|k| format!("{long}{k}")).collect();
            e.joined = vec![false; 20];
            s.save_entity(&e).unwrap();
        }
        s.compact().unwrap();
        let full = std::fs::metadata(&path).unwrap().len();
        for i in 0..200 {
            s.delete_entity(&format!("e{i}")).unwrap();
        }
        s.compact().unwrap();
        let after = std::fs::metadata(&path).unwrap().len();
        assert!(full > 3_000_000, "{full}");
        assert!(after * 10 < full, "{after} of {full} bytes left after deleting everything");
    }

    #[test]
    fn refuses_newer_schema() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("em.db");
        {
            let c = Connection::open(&path).unwrap();
            c.pragma_update(None, "user_version", 99).unwrap();
        }
        assert!(SqliteStore::open(&path).unwrap_err().to_string().contains("newer"));
    }
}
