//! The directory's store on PostgreSQL (issue 45): the registrations of `corral rd` on a server that
//! several directories can share, beside the Entity Manager's tables ([`crate::em_postgres`]) in one
//! database if the operator likes.
//!
//! Owns: table `rd_registration`, its version (row `rd` of `corral_schema`), and the mapping of a
//! [`Registration`] onto its row. Every [`Store::apply`] is one transaction. A name (`ep`, `d`) is one row
//! by the schema's own constraint (`UNIQUE NULLS NOT DISTINCT`: a name without a sector is one name too),
//! so two directories registering one name at once cannot both keep it.
//!
//! # Schema (version 1)
//! ```sql
//! rd_registration(id TEXT PRIMARY KEY, ep TEXT, d TEXT NULL, base TEXT, base_explicit BOOLEAN, lt BIGINT,
//!                 extra TEXT, links TEXT, owner TEXT, expires_unix_ms BIGINT, identity TEXT NULL,
//!                 seq BIGSERIAL, UNIQUE NULLS NOT DISTINCT (ep, d))
//! ```
//! `extra` and `links` as in the SQLite store; `seq` keeps the order registrations arrived in.

use crate::em_postgres::{in_words, lock_schema, schema_version, set_schema_version, Failure};
use crate::pg_target::PgTarget;
use crate::rd_sqlite::{decode_extra, encode_extra};
use corral_proto::wire::link_format;
use corral_rd::store::{Store, StoreError, Stored, Write};
use corral_rd::Registration;
use postgres::{Client, Transaction};
use std::net::IpAddr;

/// The schema version of `rd_registration` this code writes.
pub const SCHEMA_VERSION: i32 = 1;

const SCHEMA_V1: &str = "
CREATE TABLE rd_registration (
    id              TEXT PRIMARY KEY NOT NULL,
    ep              TEXT NOT NULL,
    d               TEXT,
    base            TEXT NOT NULL,
    base_explicit   BOOLEAN NOT NULL,
    lt              BIGINT NOT NULL,
    extra           TEXT NOT NULL,
    links           TEXT NOT NULL,
    owner           TEXT NOT NULL,
    expires_unix_ms BIGINT NOT NULL,
    identity        TEXT,
    seq             BIGSERIAL NOT NULL,
    UNIQUE NULLS NOT DISTINCT (ep, d)
);
";

/// The directory's store on a PostgreSQL server. See the module docs.
pub struct RdPgStore {
    client: Client,
    at: String,
}

impl std::fmt::Debug for RdPgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RdPgStore").field("at", &self.at).finish()
    }
}

fn words(at: &str, f: Failure) -> StoreError {
    StoreError(in_words(at, f).to_string().trim_start_matches("store: ").to_string())
}

impl RdPgStore {
    /// Connects to `url` and makes or migrates the table; a newer schema is refused naming both versions.
    pub fn connect(url: &str) -> Result<RdPgStore, StoreError> {
        RdPgStore::open(&PgTarget::new(url, None).map_err(StoreError)?)
    }

    /// [`RdPgStore::connect`] to a target already read (`--store`, the `PG*` variables, a password file).
    pub fn open(target: &PgTarget) -> Result<RdPgStore, StoreError> {
        let at = target.shown().to_string();
        let mut client = target.connect().map_err(|e| words(&at, Failure::Db(e)))?;
        let init = |client: &mut Client| -> Result<(), Failure> {
            let mut tx = lock_schema(client)?;
            let version = schema_version(&mut tx, "rd")?;
            if version > SCHEMA_VERSION {
                return Err(Failure::Store(corral_group::StoreError::NewerSchema {
                    found: i64::from(version),
                    supported: i64::from(SCHEMA_VERSION),
                }));
            }
            if version < 1 {
                tx.batch_execute(SCHEMA_V1)?;
                set_schema_version(&mut tx, "rd", 1)?;
            }
            tx.commit()?;
            Ok(())
        };
        init(&mut client).map_err(|f| words(&at, f))?;
        Ok(RdPgStore { client, at })
    }
}

impl Store for RdPgStore {
    fn apply(&mut self, writes: &[Write]) -> Result<(), StoreError> {
        let run = |c: &mut Client| -> Result<(), Failure> {
            let mut tx = c.transaction()?;
            for w in writes {
                match w {
                    Write::Save(s) => save(&mut tx, s)?,
                    Write::Remove(id) => {
                        tx.execute("DELETE FROM rd_registration WHERE id = $1", &[id])?;
                    }
                }
            }
            tx.commit()?;
            Ok(())
        };
        run(&mut self.client).map_err(|f| words(&self.at, f))
    }

    fn load(&mut self) -> Result<(Vec<Stored>, usize), StoreError> {
        let rows = self
            .client
            .query(
                "SELECT id, ep, d, base, base_explicit, lt, extra, links, owner, expires_unix_ms, identity FROM rd_registration ORDER BY seq",
                &[],
            )
            .map_err(|e| words(&self.at, Failure::Db(e)))?;
        let (mut out, mut bad) = (Vec::new(), 0);
        for row in rows {
            let (extra, links, owner, lt): (String, String, String, i64) =
                (row.get(6), row.get(7), row.get(8), row.get(5));
            let links: Result<Vec<_>, _> = link_format::parse(&links).map(|l| l.map(|l| l.into_owned())).collect();
            let (Ok(links), Ok(owner), Some(extra), Ok(lt)) =
                (links, owner.parse::<IpAddr>(), decode_extra(&extra), u32::try_from(lt))
            else {
                bad += 1;
                continue;
            };
            let expires: i64 = row.get(9);
            out.push(Stored {
                reg: Registration {
                    id: row.get(0),
                    ep: row.get(1),
                    d: row.get(2),
                    base: row.get(3),
                    base_explicit: row.get(4),
                    lt,
                    extra,
                    links,
                    owner,
                    identity: row.get(10),
                    expires: corral_proto::Instant::ZERO,
                },
                expires_unix_ms: u64::try_from(expires).unwrap_or(0),
            });
        }
        Ok((out, bad))
    }
}

/// Writes one registration in `tx`; a name registered again under a new location (after a removal)
/// replaces the old row.
fn save(tx: &mut Transaction<'_>, s: &Stored) -> Result<(), Failure> {
    let r = &s.reg;
    let mut links = String::new();
    link_format::serialize(&r.links, &mut links);
    tx.execute(
        "DELETE FROM rd_registration WHERE ep = $1 AND d IS NOT DISTINCT FROM $2 AND id <> $3",
        &[&r.ep, &r.d, &r.id],
    )?;
    tx.execute(
        "INSERT INTO rd_registration (id, ep, d, base, base_explicit, lt, extra, links, owner, expires_unix_ms, identity)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
         ON CONFLICT (id) DO UPDATE SET ep = EXCLUDED.ep, d = EXCLUDED.d, base = EXCLUDED.base,
             base_explicit = EXCLUDED.base_explicit, lt = EXCLUDED.lt, extra = EXCLUDED.extra, links = EXCLUDED.links,
             owner = EXCLUDED.owner, expires_unix_ms = EXCLUDED.expires_unix_ms, identity = EXCLUDED.identity",
        &[
            &r.id,
            &r.ep,
            &r.d,
            &r.base,
            &r.base_explicit,
            &i64::from(r.lt),
            &encode_extra(&r.extra),
            &links,
            &r.owner.to_string(),
            &i64::try_from(s.expires_unix_ms).unwrap_or(i64::MAX),
            &r.identity,
        ],
    )?;
    Ok(())
}
