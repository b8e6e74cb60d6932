//! A store failure says what failed, by fault, with the message users have always seen: a corrupt row
//! names its table and key, a newer schema its versions, a file that cannot be opened is an I/O fault.

use corral_group::profile::Profile;
use corral_group::{CorruptRow, Store, StoreError, StoredEntity};
use corral_store::SqliteStore;

fn entity(name: &str) -> StoredEntity {
    StoredEntity {
        name: name.into(),
        profile: Profile { er: vec!["coap://[::1]:5683/s".into()], ..Profile::default() },
        group: None,
        joined: vec![false],
        pending: false,
    }
}

#[test]
fn a_corrupt_entity_row_names_the_entity_and_the_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("em.db");
    SqliteStore::open(&path).unwrap().save_entity(&entity("lights")).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute("UPDATE entity SET emt = 'sometimes' WHERE name = 'lights'", []).unwrap();
    drop(conn);
    let err = SqliteStore::open(&path).unwrap().load().unwrap_err();
    assert_eq!(err, StoreError::Corrupt(CorruptRow::Entity { name: "lights".into(), column: "emt" }));
    assert_eq!(err.to_string(), "store: entity lights: unreadable emt in the database");
}

#[test]
fn a_corrupt_journal_row_names_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("em.db");
    drop(SqliteStore::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute("INSERT INTO journal (grp, member) VALUES ('ff1e::89:1', 'not-an-address')", []).unwrap();
    drop(conn);
    let err = SqliteStore::open(&path).unwrap().load().unwrap_err();
    assert_eq!(
        err,
        StoreError::Corrupt(CorruptRow::Journal { group: "ff1e::89:1".into(), member: "not-an-address".into() })
    );
    assert_eq!(err.to_string(), "store: unreadable journal entry ff1e::89:1 not-an-address in the database");
}

#[test]
fn a_database_of_a_newer_corral_is_refused_with_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("em.db");
    drop(SqliteStore::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    let err = SqliteStore::open(&path).unwrap_err();
    let supported = corral_store::em_sqlite::SCHEMA_VERSION;
    assert_eq!(err, StoreError::NewerSchema { found: 99, supported });
    assert_eq!(
        err.to_string(),
        format!("store: database schema version 99 is newer than this corral ({supported}); refusing to touch it")
    );
}

#[test]
fn a_database_that_cannot_be_opened_is_an_io_fault() {
    let dir = tempfile::tempdir().unwrap();
    let err = SqliteStore::open(dir.path().join("no-such-directory").join("em.db")).unwrap_err();
    assert!(matches!(err, StoreError::Io(_)), "{err:?}");
    assert!(err.to_string().starts_with("store: "), "{err}");
}
