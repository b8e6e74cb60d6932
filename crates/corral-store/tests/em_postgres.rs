//! The Entity Manager's store on a real PostgreSQL server (Debian's, started in a temporary directory by
//! `corral_store::testing`): the SQLite store's behaviour — round trip, replace, delete with members,
//! journal, quarantine, counters, a newer schema refused — and what only a shared server needs: the schema
//! refuses a multicast group given to two entities (a whole operation fails, nothing of it stays), two
//! stores on one database see each other's commits, the database going away fails a write in words and
//! the next write after it is back succeeds, and no message carries a password.

use corral_group::profile::{Delay, Ect, Emt, Profile, Repair};
use corral_group::store::{ChangeFeed, Feed, Store, StoreError, StoredEntity, Write};
use corral_store::testing::TempPostgres;
use corral_store::PgStore;

/// The server, or `None` with a note when this machine has none (see `testing::for_test`).
fn server() -> Option<TempPostgres> {
    corral_store::testing::for_test()
}

fn entity(name: &str, group: Option<&str>) -> StoredEntity {
    StoredEntity {
        name: name.into(),
        profile: Profile {
            er: vec!["coap://10.0.0.1/s/t".into(), "/em/x".into()],
            enr: Some(1),
            delay: Delay::Auto,
            timeout: Some(300),
            mcst_uri: group.map(|g| format!("coap://{g}/s/t")),
            ect: if group.is_some() { Ect::Multicast } else { Ect::Unicast },
            emt: Emt::Non,
            repair: Repair::Unicast,
            from_rd: Some("rt=temperature".into()),
            ..Profile::default()
        },
        group: group.map(|g| g.parse().unwrap()),
        joined: vec![true, false],
        pending: group.is_some(),
    }
}

#[test]
fn what_the_sqlite_store_keeps_postgresql_keeps_too() {
    let Some(pg) = server() else { return };
    let mut s = PgStore::connect(&pg.url()).unwrap();
    assert_eq!(s.schema_version().unwrap(), corral_store::em_postgres::SCHEMA_VERSION);
    let a = entity("a", Some("239.255.89.1"));
    let mut b = entity("b", None);
    b.profile.er.pop();
    b.joined.pop();
    s.save_entity(&a).unwrap();
    s.save_entity(&b).unwrap();
    s.save_entity(&b).unwrap(); // replaced, not doubled
    s.set_counter("pool", 7).unwrap();
    s.set_counter("pool", 8).unwrap();
    s.delete_entity("missing").unwrap();
    let g: std::net::IpAddr = "239.255.89.9".parse().unwrap();
    let m1: std::net::SocketAddr = "10.0.0.1:5683".parse().unwrap();
    let m2: std::net::SocketAddr = "[2001:db8::1]:5683".parse().unwrap();
    s.journal_add(g, &[m1, m2]).unwrap();
    s.journal_add(g, &[m1]).unwrap(); // no second row
    s.journal_remove(g, &[m2]).unwrap();
    s.apply(&[Write::ReleaseGroup(g, 1_700_000_000_000)]).unwrap();
    drop(s);

    // Reconnected: everything as written.
    let mut s = PgStore::connect(&pg.url()).unwrap();
    let snap = s.load().unwrap();
    assert_eq!(snap.entities, vec![a.clone(), b]);
    assert_eq!(snap.counters.get("pool"), Some(&8));
    assert_eq!(snap.journal, vec![(g, m1)]);
    assert_eq!(snap.released.get(&g), Some(&1_700_000_000_000));
    // A deletion takes the members with it.
    s.apply(&[Write::DeleteEntity("a".into()), Write::Compact]).unwrap();
    assert_eq!(s.load().unwrap().entities.len(), 1);
}

#[test]
fn no_multicast_group_goes_to_two_entities_and_a_refused_operation_leaves_nothing() {
    let Some(pg) = server() else { return };
    let mut s = PgStore::connect(&pg.url()).unwrap();
    s.save_entity(&entity("first", Some("239.255.89.2"))).unwrap();
    // One operation: a counter, then an entity on the same group. The constraint refuses the second write,
    // and the first goes with it.
    let err = s
        .apply(&[Write::SetCounter("cursor".into(), 3), Write::SaveEntity(entity("second", Some("239.255.89.2")))])
        .unwrap_err();
    // In the EM's words (issue 45): another gateway's entity took the group; the EM answers 5.03.
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
    assert!(err.to_string().contains("multicast group"), "{err}");
    let snap = s.load().unwrap();
    assert_eq!(snap.entities.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), ["first"]);
    assert_eq!(snap.counters.get("cursor"), None, "nothing of the refused operation stays");
}

#[test]
fn two_stores_on_one_database_see_each_others_commits() {
    let Some(pg) = server() else { return };
    let mut one = PgStore::connect(&pg.url()).unwrap();
    let two = PgStore::connect(&pg.url()).unwrap(); // the schema exists: no second creation
    one.save_entity(&entity("shared", None)).unwrap();
    assert_eq!(two.load().unwrap().entities.len(), 1);
}

#[test]
fn a_newer_schema_is_refused_naming_both_versions() {
    let Some(pg) = server() else { return };
    drop(PgStore::connect(&pg.url()).unwrap());
    pg.psql("UPDATE corral_schema SET version = 99 WHERE component = 'em'").unwrap();
    let err = PgStore::connect(&pg.url()).unwrap_err();
    assert_eq!(err, StoreError::NewerSchema { found: 99, supported: corral_store::em_postgres::SCHEMA_VERSION.into() });
    assert!(err.to_string().contains("99") && err.to_string().contains("refusing"), "{err}");
}

#[test]
fn a_database_that_goes_away_fails_writes_in_words_and_an_unreachable_one_names_the_server_not_the_password() {
    let Some(mut pg) = server() else { return };
    let mut s = PgStore::connect(&pg.url()).unwrap();
    s.save_entity(&entity("before", None)).unwrap();
    pg.stop().unwrap();
    let err = s.save_entity(&entity("during", None)).unwrap_err();
    assert!(matches!(err, StoreError::Postgres(_)), "{err:?}");
    assert!(err.to_string().contains("PostgreSQL"), "{err}");
    pg.start().unwrap();
    // What was acknowledged survived the crash of the server; the failed write is not there.
    let again = PgStore::connect(&pg.url()).unwrap();
    let names: Vec<String> = again.load().unwrap().entities.into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["before"]);

    let err = PgStore::connect("postgresql://corral:s3cret@127.0.0.1:1/corral?connect_timeout=2").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("127.0.0.1:1") && !text.contains("s3cret"), "{text}");
}

#[test]
fn a_creation_is_create_only_across_stores_sharing_the_database() {
    let Some(pg) = server() else { return };
    let mut one = PgStore::connect(&pg.url()).unwrap();
    let mut two = PgStore::connect(&pg.url()).unwrap();
    one.apply(&[Write::CreateEntity(entity("name", None))]).unwrap();
    let err = two.apply(&[Write::SetCounter("seq".into(), 1), Write::CreateEntity(entity("name", None))]).unwrap_err();
    assert_eq!(err, StoreError::Exists("name".into()));
    assert_eq!(two.load().unwrap().counters.get("seq"), None, "nothing of the refused operation stays");
    // A replacement of an existing entity is no creation.
    two.save_entity(&entity("name", None)).unwrap();
}

#[test]
fn the_feed_brings_the_changes_of_other_stores_as_they_are_now_and_everything_when_too_far_behind() {
    let Some(pg) = server() else { return };
    let target = corral_store::PgTarget::new(&pg.url(), None).unwrap();
    let mut mine = PgStore::open(&target).unwrap();
    let mut feed = mine.feed(&target);
    let mut other = PgStore::open(&target).unwrap();
    let v0 = mine.load().unwrap().feed.expect("a shared store has a feed");
    let wait = std::time::Duration::from_secs(1);
    // Nothing yet: an empty answer at the same version (after at most `wait`).
    assert_eq!(feed.changes_since(v0, wait).unwrap(), Feed::Changed { version: v0, entities: Vec::new() });

    // This store's own change is not reported back to it; the other's is, as it is now.
    mine.save_entity(&entity("mine", None)).unwrap();
    other.save_entity(&entity("theirs", None)).unwrap();
    let mut changed = entity("theirs", None);
    changed.profile.enr = Some(2);
    other.save_entity(&changed).unwrap();
    let Feed::Changed { version: v1, entities } = feed.changes_since(v0, wait).unwrap() else { panic!("no resync") };
    assert_eq!(v1, v0 + 3);
    assert_eq!(entities, vec![("theirs".to_string(), Some(changed))]);

    // A change committed while the feed waits wakes it (NOTIFY); a deletion is reported as `None`. (A read
    // may also end empty, woken by an earlier change: the EM asks again, as here.)
    let deleter = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(200));
        other.delete_entity("theirs").unwrap();
    });
    let mut v2 = v1;
    let mut seen = Vec::new();
    for _ in 0..5 {
        let Feed::Changed { version, entities } = feed.changes_since(v2, wait).unwrap() else { panic!("no resync") };
        v2 = version;
        seen.extend(entities);
        if !seen.is_empty() {
            break;
        }
    }
    deleter.join().unwrap();
    assert_eq!((v2, seen), (v1 + 1, vec![("theirs".to_string(), None)]));

    // Changes the store no longer keeps: everything again, at its version.
    pg.psql("DELETE FROM em_change").unwrap();
    mine.save_entity(&entity("later", None)).unwrap();
    let Feed::Resync(snap) = feed.changes_since(v2 - 1, wait).unwrap() else { panic!("a resync") };
    assert_eq!(snap.feed, Some(v2 + 1));
    let names: Vec<&str> = snap.entities.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["later", "mine"]);
}
