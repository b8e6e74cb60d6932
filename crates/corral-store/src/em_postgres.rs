//! The Entity Manager's store on PostgreSQL (issue 45's first step: the same writes as the SQLite store,
//! on a server several gateways can share).
//!
//! Owns: the schema in PostgreSQL, its version (row `em` of table `corral_schema`, which the directory's
//! store shares) and migrations, and the mapping of
//! [`StoredEntity`] onto tables. Every [`Store::apply`] is one transaction; a commit returns once the
//! server has it on disk (`synchronous_commit` is left at its default, `on`).
//!
//! What the schema holds true by itself, so that no client can break it (a second gateway included):
//! an entity name is unique (the primary key), **no multicast group is given to two entities** (`UNIQUE`
//! on `entity.grp`), members go with their entity (`ON DELETE CASCADE`), and a journal row is one
//! (group, member) pair. A write that breaks one of them fails its whole transaction: the EM answers 5.00
//! and nothing of the operation stays.
//!
//! Connections: a URL (`postgresql://user:password@host:port/db?sslmode=…`) or key=value pairs, as
//! libpq takes them; errors name the server without the password ([`crate::pg_target::redacted`]). Uses the `postgres`
//! crate (the blocking face of tokio-postgres), which runs a small runtime of its own: call it from the
//! store's thread ([`crate::StoreThread`]), never from inside an async runtime.
//!
//! # Schema (version 1)
//! ```sql
//! corral_schema(component TEXT PRIMARY KEY, version INTEGER)      -- 'em' (and 'rd': rd_postgres)
//! entity(name TEXT PRIMARY KEY, emt TEXT, ect TEXT, enr BIGINT NULL, eo TEXT, delay TEXT,
//!        timeout BIGINT NULL, mcst_uri TEXT NULL, grp TEXT NULL UNIQUE, pending BOOLEAN,
//!        repair TEXT, from_rd TEXT NULL, rd TEXT NULL)
//! member(entity TEXT REFERENCES entity(name) ON DELETE CASCADE, idx INTEGER, uri TEXT, joined BOOLEAN,
//!        PRIMARY KEY (entity, idx))
//! counter(key TEXT PRIMARY KEY, value BIGINT)
//! journal(grp TEXT, member TEXT, PRIMARY KEY (grp, member))
//! released(grp TEXT PRIMARY KEY, at_ms BIGINT)
//! ```
//! # Version 2: the change feed of several gateways
//! ```sql
//! em_clock(one BOOLEAN PRIMARY KEY CHECK (one), version BIGINT)   -- the last change's version
//! em_change(version BIGINT, entity TEXT, origin BIGINT, PRIMARY KEY (version, entity))
//! ```
//! Every [`Store::apply`] that changes entities takes `em_clock` up by one — its row lock orders such
//! transactions, so a reader never sees version N+1 committed before N — and records the entities with the
//! gateway that made the change, then `NOTIFY corral_em`, all in the same transaction. [`PgFeed`] answers
//! corral-group's [`ChangesSince`](corral_group::ChangesSince): it re-reads `em_change` from the last version
//! its gateway saw (the NOTIFY is only a wake-up: one lost while disconnected costs nothing) and the entities
//! named there as they are now; older than the [`FEED_KEEP`] changes kept, it reads everything again.
//! Creation is create-only across gateways ([`Write::CreateEntity`], and the primary key for two at once:
//! [`StoreError::Exists`]); a multicast group taken by another gateway's commit is
//! [`StoreError::Conflict`].

use crate::em_sqlite::{bad, eo_text, parse_eo};
use crate::pg_target::PgTarget;
use corral_group::profile::{Delay, Ect, Emt, Profile, Repair};
use corral_group::store::{ChangeFeed, CorruptRow, Feed, Snapshot, Store, StoreError, StoredEntity, Write};
use postgres::fallible_iterator::FallibleIterator;
use postgres::{Client, Transaction};
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;

/// The schema version this code writes.
pub const SCHEMA_VERSION: i32 = 2;

/// Version 2: the change feed of several gateways (issue 45). `em_clock` is one row, the version of the
/// last change to any entity; every transaction that changes entities takes it up by one (its row lock
/// orders such transactions, so versions commit in order) and records the entities in `em_change` with
/// the gateway that made the change, in the same transaction.
const SCHEMA_V2: &str = "
CREATE TABLE em_clock (
    one     BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    version BIGINT NOT NULL
);
INSERT INTO em_clock (one, version) VALUES (TRUE, 0);
CREATE TABLE em_change (
    version BIGINT NOT NULL,
    entity  TEXT NOT NULL,
    origin  BIGINT NOT NULL,
    PRIMARY KEY (version, entity)
);
";

/// The channel of the feed's wake-up (`NOTIFY corral_em`, the payload the version).
const CHANNEL: &str = "corral_em";

/// Changes kept in `em_change`: a gateway that fell further behind reads everything again.
pub const FEED_KEEP: i64 = 4096;

const SCHEMA_V1: &str = "
CREATE TABLE entity (
    name     TEXT PRIMARY KEY NOT NULL,
    emt      TEXT NOT NULL,
    ect      TEXT NOT NULL,
    enr      BIGINT,
    eo       TEXT NOT NULL,
    delay    TEXT NOT NULL,
    timeout  BIGINT,
    mcst_uri TEXT,
    grp      TEXT UNIQUE,
    pending  BOOLEAN NOT NULL DEFAULT FALSE,
    repair   TEXT NOT NULL DEFAULT 'none',
    from_rd  TEXT,
    rd       TEXT
);
CREATE TABLE member (
    entity TEXT NOT NULL REFERENCES entity(name) ON DELETE CASCADE,
    idx    INTEGER NOT NULL,
    uri    TEXT NOT NULL,
    joined BOOLEAN NOT NULL DEFAULT FALSE,
    PRIMARY KEY (entity, idx)
);
CREATE TABLE counter (
    key   TEXT PRIMARY KEY NOT NULL,
    value BIGINT NOT NULL
);
CREATE TABLE journal (
    grp    TEXT NOT NULL,
    member TEXT NOT NULL,
    PRIMARY KEY (grp, member)
);
CREATE TABLE released (
    grp   TEXT PRIMARY KEY NOT NULL,
    at_ms BIGINT NOT NULL
);
";

/// The Entity Manager's store on a PostgreSQL server. See the module docs.
pub struct PgStore {
    // `Store::load` takes `&self`; the client needs `&mut` for every query.
    client: Mutex<Client>,
    /// Where, without the password: every error names it.
    at: String,
    /// This gateway in `em_change.origin`: its own feed skips its own changes.
    origin: i64,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").field("at", &self.at).finish()
    }
}

impl PgStore {
    /// Connects to `url` (without TLS) and brings the schema up to date; a schema newer than this code
    /// is refused with both versions named.
    pub fn connect(url: &str) -> Result<PgStore, StoreError> {
        PgStore::open(&PgTarget::new(url, None).map_err(StoreError::Postgres)?)
    }

    /// [`PgStore::connect`] to a target already read (`--store`, the `PG*` variables, a password file).
    pub fn open(target: &PgTarget) -> Result<PgStore, StoreError> {
        let at = target.shown().to_string();
        let mut client = target.connect().map_err(|err| StoreError::Postgres(format!("{at}: {err}")))?;
        init(&mut client).map_err(|err| in_words(&at, err))?;
        Ok(PgStore { client: Mutex::new(client), at, origin: origin() })
    }

    /// The schema version of the database.
    pub fn schema_version(&self) -> Result<i32, StoreError> {
        let mut c = self.lock()?;
        let mut tx = c.transaction().map_err(|err| self.err(err))?;
        schema_version(&mut tx, "em").map_err(|err| self.err(err))
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Client>, StoreError> {
        self.client.lock().map_err(|_| StoreError::Internal("the PostgreSQL connection's lock is poisoned"))
    }

    fn err(&self, err: postgres::Error) -> StoreError {
        in_words(&self.at, Failure::Db(err))
    }
}

/// What failed while setting up or writing.
pub(crate) enum Failure {
    Db(postgres::Error),
    Store(StoreError),
}

impl From<postgres::Error> for Failure {
    fn from(e: postgres::Error) -> Failure {
        Failure::Db(e)
    }
}

pub(crate) fn in_words(at: &str, f: Failure) -> StoreError {
    match f {
        Failure::Store(e) => e,
        // The server's own message (a constraint by name, a lost connection), after where.
        Failure::Db(e) => match e.as_db_error() {
            Some(db) => StoreError::Postgres(format!("{at}: {}", db.message())),
            None => StoreError::Postgres(format!("{at}: {e}")),
        },
    }
}

/// The schema version `component` (`em`, `rd`) has in the database, 0 for none; the version table is made
/// if missing. Call inside [`lock_schema`]'s transaction.
pub(crate) fn schema_version(tx: &mut Transaction<'_>, component: &str) -> Result<i32, postgres::Error> {
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS corral_schema (component TEXT PRIMARY KEY NOT NULL, version INTEGER NOT NULL)",
    )?;
    let row = tx.query_opt("SELECT version FROM corral_schema WHERE component = $1", &[&component])?;
    Ok(row.map_or(0, |r| r.get(0)))
}

/// Records `version` for `component`.
pub(crate) fn set_schema_version(
    tx: &mut Transaction<'_>,
    component: &str,
    version: i32,
) -> Result<(), postgres::Error> {
    tx.execute(
        "INSERT INTO corral_schema (component, version) VALUES ($1, $2) ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version",
        &[&component, &version],
    )?;
    Ok(())
}

/// A transaction that holds the schema lock: gateways and directories starting at once make or migrate
/// the schema one after the other (the second then finds it made).
pub(crate) fn lock_schema(client: &mut Client) -> Result<Transaction<'_>, postgres::Error> {
    let mut tx = client.transaction()?;
    tx.batch_execute("SELECT pg_advisory_xact_lock(4711045)")?;
    Ok(tx)
}

/// Creates or migrates the schema (see [`lock_schema`]).
fn init(client: &mut Client) -> Result<(), Failure> {
    let mut tx = lock_schema(client)?;
    let version = schema_version(&mut tx, "em")?;
    if version > SCHEMA_VERSION {
        return Err(Failure::Store(StoreError::NewerSchema {
            found: i64::from(version),
            supported: i64::from(SCHEMA_VERSION),
        }));
    }
    if version < 1 {
        tx.batch_execute(SCHEMA_V1)?;
        set_schema_version(&mut tx, "em", 1)?;
    }
    if version < 2 {
        tx.batch_execute(SCHEMA_V2)?;
        set_schema_version(&mut tx, "em", 2)?;
    }
    tx.commit()?;
    Ok(())
}

impl Store for PgStore {
    fn load(&self) -> Result<Snapshot, StoreError> {
        let mut c = self.lock()?;
        load(&mut c).map_err(|f| in_words(&self.at, f))
    }

    fn apply(&mut self, writes: &[Write]) -> Result<(), StoreError> {
        let at = self.at.clone();
        let mut c = self.lock()?;
        let origin = self.origin;
        let run = |c: &mut Client| -> Result<(), Failure> {
            let mut tx = c.transaction()?;
            for w in writes {
                apply_one(&mut tx, w)?;
            }
            record_changes(&mut tx, writes, origin)?;
            tx.commit()?;
            Ok(())
        };
        run(&mut c).map_err(|f| conflict(f).unwrap_or_else(|f| in_words(&at, f)))
    }
}

impl PgStore {
    /// The reading side of this store's change feed, on a connection of its own (see [`PgFeed`]).
    pub fn feed(&self, target: &PgTarget) -> PgFeed {
        PgFeed { target: target.clone(), client: None, origin: self.origin, at: self.at.clone() }
    }
}

/// An id for this gateway's changes, distinct from every other gateway's with overwhelming odds: the
/// process, the time and an address of the heap, hashed (no CSPRNG is needed, nothing rests on it).
fn origin() -> i64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0));
    h.finish() as i64
}

/// A write refused by a constraint another gateway's commit made binding, in the EM's words: an entity
/// name that exists (create-only), or a multicast group an entity of another gateway holds.
fn conflict(f: Failure) -> Result<StoreError, Failure> {
    let Failure::Db(e) = &f else { return Err(f) };
    match e.as_db_error() {
        Some(db) if *db.code() == postgres::error::SqlState::UNIQUE_VIOLATION => match db.constraint() {
            Some("entity_pkey") => {
                // "Key (name)=(room) already exists."
                let name = db.detail().and_then(|d| d.split_once("=(")).and_then(|(_, r)| r.rsplit_once(") already"));
                Ok(StoreError::Exists(name.map(|(n, _)| n.to_string()).unwrap_or_default()))
            }
            Some("entity_grp_key") => Ok(StoreError::Conflict(
                "its multicast group was just given to an entity through another gateway; try again".into(),
            )),
            _ => Err(f),
        },
        _ => Err(f),
    }
}

/// The entities `writes` change, recorded in the change feed under the next version, with a wake-up for
/// every gateway's feed at commit.
fn record_changes(tx: &mut Transaction<'_>, writes: &[Write], origin: i64) -> Result<(), Failure> {
    let names: Vec<&String> = writes
        .iter()
        .filter_map(|w| match w {
            Write::SaveEntity(e) | Write::CreateEntity(e) => Some(&e.name),
            Write::DeleteEntity(n) => Some(n),
            _ => None,
        })
        .collect();
    if names.is_empty() {
        return Ok(());
    }
    let version: i64 = tx.query_one("UPDATE em_clock SET version = version + 1 RETURNING version", &[])?.get(0);
    let st =
        tx.prepare("INSERT INTO em_change (version, entity, origin) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING")?;
    for n in names {
        tx.execute(&st, &[&version, n, &origin])?;
    }
    if version % 256 == 0 {
        tx.execute("DELETE FROM em_change WHERE version <= $1", &[&(version - FEED_KEEP)])?;
    }
    tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &version.to_string()])?;
    Ok(())
}

/// The reading side of a [`PgStore`]'s change feed: a connection of its own that LISTENs for the wake-up
/// and reads `em_change` from the last version seen (a wake-up lost while disconnected costs nothing: the
/// next read finds the changes). Reconnects at the next read after an error.
pub struct PgFeed {
    target: PgTarget,
    client: Option<Client>,
    origin: i64,
    at: String,
}

impl ChangeFeed for PgFeed {
    fn changes_since(&mut self, version: u64, wait: std::time::Duration) -> Result<Feed, StoreError> {
        let at = self.at.clone();
        let result = self.read(version, wait);
        result.map_err(|f| {
            // Reconnect next time; wait here, so that the EM asking again at once backs off.
            self.client = None;
            std::thread::sleep(wait);
            in_words(&at, f)
        })
    }
}

impl PgFeed {
    fn read(&mut self, since: u64, wait: std::time::Duration) -> Result<Feed, Failure> {
        if self.client.is_none() {
            let mut c = self.target.connect()?;
            c.batch_execute(&format!("LISTEN {CHANNEL}"))?;
            self.client = Some(c);
        }
        let origin = self.origin;
        let Some(c) = self.client.as_mut() else { return Err(Failure::Store(StoreError::Internal("no connection"))) };
        // Wake-ups of changes the read below sees anyway must not end the wait after it.
        while c.notifications().iter().next()?.is_some() {}
        let feed = changes(c, since, origin)?;
        if !matches!(&feed, Feed::Changed { version, .. } if *version == since) {
            return Ok(feed);
        }
        // Nothing new: wait for a wake-up (or the end of `wait`), then look again.
        c.notifications().timeout_iter(wait).next()?;
        changes(c, since, origin)
    }
}

/// What changed after `since`, in one snapshot of the database.
fn changes(c: &mut Client, since: u64, origin: i64) -> Result<Feed, Failure> {
    let since = i64::try_from(since).map_err(|_| Failure::Store(StoreError::Internal("a version past i64")))?;
    let mut tx =
        c.build_transaction().isolation_level(postgres::IsolationLevel::RepeatableRead).read_only(true).start()?;
    let now: i64 = tx.query_one("SELECT version FROM em_clock", &[])?.get(0);
    if now == since {
        tx.commit()?;
        return Ok(Feed::Changed { version: since as u64, entities: Vec::new() });
    }
    let oldest: Option<i64> = tx.query_one("SELECT min(version) FROM em_change", &[])?.get(0);
    if now < since || oldest.is_none_or(|o| o > since + 1) {
        // Behind the oldest change kept (or ahead of a store that was replaced): everything again.
        let snap = load_in(&mut tx)?;
        tx.commit()?;
        return Ok(Feed::Resync(snap));
    }
    let names: Vec<String> = tx
        .query(
            "SELECT DISTINCT entity FROM em_change WHERE version > $1 AND origin <> $2 ORDER BY entity",
            &[&since, &origin],
        )?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut found = read_entities(&mut tx, Some(&names))?;
    let entities = names
        .into_iter()
        .map(|n| {
            let e = found.iter().position(|e| e.name == n).map(|i| found.swap_remove(i));
            (n, e)
        })
        .collect();
    tx.commit()?;
    Ok(Feed::Changed { version: now as u64, entities })
}

fn apply_one(tx: &mut Transaction<'_>, w: &Write) -> Result<(), Failure> {
    match w {
        Write::SaveEntity(ent) => save_entity(tx, ent)?,
        Write::CreateEntity(ent) => {
            if tx.query_opt("SELECT 1 FROM entity WHERE name = $1", &[&ent.name])?.is_some() {
                return Err(Failure::Store(StoreError::Exists(ent.name.clone())));
            }
            // A creation of the same name by another gateway at this very moment: the primary key
            // refuses the second commit (`conflict`).
            save_entity(tx, ent)?
        }
        Write::DeleteEntity(name) => {
            tx.execute("DELETE FROM entity WHERE name = $1", &[name])?;
        }
        Write::SetCounter(key, value) => {
            let v = i64::try_from(*value).map_err(|_| Failure::Store(StoreError::Internal("a counter past i64")))?;
            tx.execute(
                "INSERT INTO counter (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                &[key, &v],
            )?;
        }
        Write::JournalAdd(group, members) => {
            let st = tx.prepare("INSERT INTO journal (grp, member) VALUES ($1, $2) ON CONFLICT DO NOTHING")?;
            for m in members {
                tx.execute(&st, &[&group.to_string(), &m.to_string()])?;
            }
        }
        Write::JournalRemove(group, members) => {
            let st = tx.prepare("DELETE FROM journal WHERE grp = $1 AND member = $2")?;
            for m in members {
                tx.execute(&st, &[&group.to_string(), &m.to_string()])?;
            }
        }
        Write::ReleaseGroup(group, at_ms) => {
            let at = i64::try_from(*at_ms).map_err(|_| Failure::Store(StoreError::Internal("a time past i64")))?;
            tx.execute(
                "INSERT INTO released (grp, at_ms) VALUES ($1, $2) ON CONFLICT (grp) DO UPDATE SET at_ms = EXCLUDED.at_ms",
                &[&group.to_string(), &at],
            )?;
        }
        // The server reclaims deleted rows' space itself (autovacuum).
        Write::Compact => {}
    }
    Ok(())
}

/// Replaces entity `ent`'s rows inside `tx`.
fn save_entity(tx: &mut Transaction<'_>, ent: &StoredEntity) -> Result<(), Failure> {
    tx.execute("DELETE FROM entity WHERE name = $1", &[&ent.name])?;
    let p = &ent.profile;
    let timeout = p
        .timeout
        .map(|t| i64::try_from(t).map_err(|_| Failure::Store(StoreError::Internal("a timeout past i64"))))
        .transpose()?;
    tx.execute(
        "INSERT INTO entity (name, emt, ect, enr, eo, delay, timeout, mcst_uri, grp, pending, repair, from_rd, rd) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13)",
        &[
            &ent.name,
            &p.emt.as_str(),
            &p.ect.as_str(),
            &p.enr.map(i64::from),
            &eo_text(&p.eo),
            &p.delay.to_string(),
            &timeout,
            &p.mcst_uri,
            &ent.group.map(|g| g.to_string()),
            &ent.pending,
            &p.repair.as_str(),
            &p.from_rd,
            &p.rd,
        ],
    )?;
    let st = tx.prepare("INSERT INTO member (entity, idx, uri, joined) VALUES ($1, $2, $3, $4)")?;
    for (i, uri) in p.er.iter().enumerate() {
        let joined = ent.joined.get(i).copied().unwrap_or(false);
        let idx = i32::try_from(i).map_err(|_| Failure::Store(StoreError::Internal("a member index past i32")))?;
        tx.execute(&st, &[&ent.name, &idx, uri, &joined])?;
    }
    Ok(())
}

fn load(c: &mut Client) -> Result<Snapshot, Failure> {
    // One snapshot of the database for every table: a concurrent writer's transaction is all in or out.
    let mut tx =
        c.build_transaction().isolation_level(postgres::IsolationLevel::RepeatableRead).read_only(true).start()?;
    let snap = load_in(&mut tx)?;
    tx.commit()?;
    Ok(snap)
}

/// Everything, with the change feed's version, inside a repeatable-read transaction.
fn load_in(tx: &mut Transaction<'_>) -> Result<Snapshot, Failure> {
    let mut snap = Snapshot { entities: read_entities(tx, None)?, ..Snapshot::default() };
    let version: i64 = tx.query_one("SELECT version FROM em_clock", &[])?.get(0);
    snap.feed = Some(version.max(0) as u64);
    for r in tx.query("SELECT key, value FROM counter", &[])? {
        let v: i64 = r.get(1);
        snap.counters.insert(r.get(0), v.max(0) as u64);
    }
    for r in tx.query("SELECT grp, member FROM journal ORDER BY grp, member", &[])? {
        let (g, m): (String, String) = (r.get(0), r.get(1));
        match (g.parse::<IpAddr>(), m.parse::<SocketAddr>()) {
            (Ok(g), Ok(m)) => snap.journal.push((g, m)),
            _ => return Err(Failure::Store(StoreError::Corrupt(CorruptRow::Journal { group: g, member: m }))),
        }
    }
    for r in tx.query("SELECT grp, at_ms FROM released", &[])? {
        let (g, at): (String, i64) = (r.get(0), r.get(1));
        let g = g
            .parse::<IpAddr>()
            .map_err(|_| Failure::Store(StoreError::Corrupt(CorruptRow::Released { group: g.clone() })))?;
        snap.released.insert(g, at.max(0) as u64);
    }
    Ok(snap)
}

/// The entities named (all without `names`), by name.
fn read_entities(tx: &mut Transaction<'_>, names: Option<&[String]>) -> Result<Vec<StoredEntity>, Failure> {
    let mut out = Vec::new();
    let members = tx.prepare("SELECT uri, joined FROM member WHERE entity = $1 ORDER BY idx")?;
    const COLUMNS: &str =
        "SELECT name, emt, ect, enr, eo, delay, timeout, mcst_uri, grp, pending, repair, from_rd, rd FROM entity";
    let rows = match names {
        None => tx.query(&format!("{COLUMNS} ORDER BY name"), &[])?,
        Some(names) => tx.query(&format!("{COLUMNS} WHERE name = ANY($1) ORDER BY name"), &[&names])?,
    };
    for r in rows {
        let name: String = r.get(0);
        let (emt, ect, eo, delay, repair): (String, String, String, String, String) =
            (r.get(1), r.get(2), r.get(4), r.get(5), r.get(10));
        let (enr, timeout): (Option<i64>, Option<i64>) = (r.get(3), r.get(6));
        let grp: Option<String> = r.get(8);
        let list: Vec<(String, bool)> = tx.query(&members, &[&name])?.iter().map(|m| (m.get(0), m.get(1))).collect();
        let store = |e: StoreError| Failure::Store(e);
        let profile = Profile {
            er: list.iter().map(|(u, _)| u.clone()).collect(),
            emt: Emt::parse(&emt).ok_or_else(|| store(bad("emt", &name)))?,
            ect: Ect::parse(&ect).ok_or_else(|| store(bad("ect", &name)))?,
            enr: enr.map(|v| u32::try_from(v).map_err(|_| store(bad("enr", &name)))).transpose()?,
            eo: parse_eo(&eo, &name).map_err(store)?,
            delay: Delay::parse(&delay).ok_or_else(|| store(bad("delay", &name)))?,
            timeout: timeout.map(|v| u64::try_from(v).map_err(|_| store(bad("timeout", &name)))).transpose()?,
            mcst_uri: r.get(7),
            repair: Repair::parse(&repair).ok_or_else(|| store(bad("repair", &name)))?,
            from_rd: r.get(11),
            rd: r.get(12),
        };
        let group = grp.map(|g| g.parse::<IpAddr>().map_err(|_| store(bad("group", &name)))).transpose()?;
        out.push(StoredEntity {
            name,
            profile,
            group,
            joined: list.iter().map(|(_, j)| *j).collect(),
            pending: r.get(9),
        });
    }
    Ok(out)
}
