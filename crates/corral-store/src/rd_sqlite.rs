//! The directory's embedded SQLite store (one file, WAL, `synchronous=FULL`: a registration is
//! acknowledged only once it is on disk).
//!
//! Owns: the schema, its version (`PRAGMA user_version`) and migration, and the mapping of a
//! [`Registration`] onto its row. Every [`Store::apply`] is one transaction.
//!
//! # Schema (version 2)
//! ```sql
//! registration(id TEXT PRIMARY KEY, ep TEXT, d TEXT NULL, base TEXT, base_explicit INTEGER, lt INTEGER,
//!              extra TEXT, links TEXT, owner TEXT, expires_unix_ms INTEGER, identity TEXT NULL,
//!              UNIQUE (ep, d))
//! ```
//! `extra` is `k=v` items joined by `&` (percent-encoding `%`, `&`, `=`), `links` the link-format
//! document, `identity` the identity the name is bound to (RFC 9176 §7; `NULL`: its owner's address).
//! Version 1 lacked `identity`: opening such a file adds the column (its names stay bound to addresses).

use corral_proto::wire::link_format;
use corral_rd::store::{Store, StoreError, Stored, Write};
use corral_rd::Registration;
use rusqlite::{params, Connection, Transaction};
use std::net::IpAddr;
use std::path::Path;

fn sql(e: rusqlite::Error) -> StoreError {
    StoreError(e.to_string())
}

/// The directory's embedded SQLite store.
pub struct RdSqliteStore {
    conn: Connection,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS registration (
    id              TEXT PRIMARY KEY NOT NULL,
    ep              TEXT NOT NULL,
    d               TEXT,
    base            TEXT NOT NULL,
    base_explicit   INTEGER NOT NULL,
    lt              INTEGER NOT NULL,
    extra           TEXT NOT NULL,
    links           TEXT NOT NULL,
    owner           TEXT NOT NULL,
    expires_unix_ms INTEGER NOT NULL,
    identity        TEXT,
    UNIQUE (ep, d)
);
";

impl RdSqliteStore {
    /// Opens (creating) the store at `path`.
    pub fn open(path: &Path) -> Result<RdSqliteStore, StoreError> {
        let conn = Connection::open(path).map_err(|e| StoreError(format!("{}: {e}", path.display())))?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(sql)?;
        conn.pragma_update(None, "synchronous", "FULL").map_err(sql)?;
        let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(sql)?;
        if version > 2 {
            return Err(StoreError(format!(
                "{}: schema version {version} is newer than this corral (2); use a newer corral",
                path.display()
            )));
        }
        if version == 1 {
            conn.execute_batch("ALTER TABLE registration ADD COLUMN identity TEXT").map_err(sql)?;
        }
        conn.execute_batch(SCHEMA).map_err(sql)?;
        conn.pragma_update(None, "user_version", 2).map_err(sql)?;
        Ok(RdSqliteStore { conn })
    }
}

impl Store for RdSqliteStore {
    fn apply(&mut self, writes: &[Write]) -> Result<(), StoreError> {
        let tx = self.conn.transaction().map_err(sql)?;
        for w in writes {
            match w {
                Write::Save(s) => save(&tx, s)?,
                Write::Remove(id) => {
                    tx.execute("DELETE FROM registration WHERE id = ?1", params![id]).map_err(sql)?;
                }
            }
        }
        tx.commit().map_err(sql)
    }

    fn load(&mut self) -> Result<(Vec<Stored>, usize), StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT id, ep, d, base, base_explicit, lt, extra, links, owner, expires_unix_ms, identity FROM registration ORDER BY rowid",
        ).map_err(sql)?;
        let rows = stmt
            .query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, Option<String>>(2)?,
                    row.get::<_, String>(3)?,
                    row.get::<_, bool>(4)?,
                    row.get::<_, u32>(5)?,
                    row.get::<_, String>(6)?,
                    row.get::<_, String>(7)?,
                    row.get::<_, String>(8)?,
                    row.get::<_, i64>(9)?,
                    row.get::<_, Option<String>>(10)?,
                ))
            })
            .map_err(sql)?;
        let (mut out, mut bad) = (Vec::new(), 0);
        for row in rows {
            let (id, ep, d, base, base_explicit, lt, extra, links, owner, expires, identity) = row.map_err(sql)?;
            let links: Result<Vec<_>, _> = link_format::parse(&links).map(|l| l.map(|l| l.into_owned())).collect();
            let (Ok(links), Ok(owner), Some(extra)) = (links, owner.parse::<IpAddr>(), decode_extra(&extra)) else {
                bad += 1;
                continue;
            };
            out.push(Stored {
                reg: Registration {
                    id,
                    ep,
                    d,
                    base,
                    base_explicit,
                    lt,
                    extra,
                    links,
                    owner,
                    identity,
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
fn save(tx: &Transaction<'_>, s: &Stored) -> Result<(), StoreError> {
    let r = &s.reg;
    let mut links = String::new();
    link_format::serialize(&r.links, &mut links);
    tx.execute("DELETE FROM registration WHERE ep = ?1 AND d IS ?2 AND id <> ?3", params![r.ep, r.d, r.id])
        .map_err(sql)?;
    tx.execute(
        "INSERT OR REPLACE INTO registration
         (id, ep, d, base, base_explicit, lt, extra, links, owner, expires_unix_ms, identity)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        params![
            r.id,
            r.ep,
            r.d,
            r.base,
            r.base_explicit,
            r.lt,
            encode_extra(&r.extra),
            links,
            r.owner.to_string(),
            i64::try_from(s.expires_unix_ms).unwrap_or(i64::MAX),
            r.identity,
        ],
    )
    .map_err(sql)?;
    Ok(())
}

fn escape(s: &str) -> String {
    s.replace('%', "%25").replace('&', "%26").replace('=', "%3D")
}

fn unescape(s: &str) -> String {
    s.replace("%3D", "=").replace("%26", "&").replace("%25", "%")
}

pub(crate) fn encode_extra(extra: &[(String, String)]) -> String {
    extra.iter().map(|(k, v)| format!("{}={}", escape(k), escape(v))).collect::<Vec<_>>().join("&")
}

pub(crate) fn decode_extra(text: &str) -> Option<Vec<(String, String)>> {
    if text.is_empty() {
        return Some(Vec::new());
    }
    text.split('&').map(|kv| kv.split_once('=').map(|(k, v)| (unescape(k), unescape(v)))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(identity: Option<&str>) -> Stored {
        let reg = Registration {
            id: "00000000000000a1".into(),
            ep: "node1".into(),
            d: None,
            base: "coap://192.0.2.1:5683".into(),
            base_explicit: false,
            lt: 600,
            extra: Vec::new(),
            links: Vec::new(),
            owner: "192.0.2.1".parse().unwrap(),
            identity: identity.map(str::to_string),
            expires: corral_proto::Instant::ZERO,
        };
        Stored { reg, expires_unix_ms: 1 }
    }

    #[test]
    fn a_names_identity_is_stored_and_a_version_1_file_gains_the_column() {
        let dir = std::env::temp_dir().join(format!("corral-rd-store-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rd.db");
        let _ = std::fs::remove_file(&path);
        {
            // A file as corral wrote it before names were bound to identities.
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(&SCHEMA.replace("identity        TEXT,", "")).unwrap();
            conn.execute_batch(
                "INSERT INTO registration VALUES ('b2', 'old', NULL, 'coap://192.0.2.2:5683', 0, 60, '', '', \
                 '192.0.2.2', 1); PRAGMA user_version = 1;",
            )
            .unwrap();
        }
        let mut store = RdSqliteStore::open(&path).unwrap();
        store.save(&stored(Some("dtls:alice"))).unwrap();
        drop(store);
        let (rows, bad) = RdSqliteStore::open(&path).unwrap().load().unwrap();
        assert_eq!(bad, 0);
        let ids: Vec<_> = rows.iter().map(|r| (r.reg.ep.as_str(), r.reg.identity.as_deref())).collect();
        assert_eq!(ids, vec![("old", None), ("node1", Some("dtls:alice"))]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn extra_attributes_survive_their_encoding() {
        let extra = vec![("et".to_string(), "a&b=c%d".to_string()), ("x".to_string(), String::new())];
        assert_eq!(decode_extra(&encode_extra(&extra)), Some(extra));
        assert_eq!(decode_extra(""), Some(Vec::new()));
    }
}
