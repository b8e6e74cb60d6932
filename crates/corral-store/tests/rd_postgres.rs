//! The directory's store on a real PostgreSQL server (`corral_store::testing`): registrations round-trip
//! in the order they came, a name registered again under a new id replaces the old row (also without a
//! sector: `d` NULL is one name), two directories on one database see each other's registrations, and the
//! directory's and the Entity Manager's tables live side by side with a schema version each.

use corral_rd::store::{Store, Stored};
use corral_rd::Registration;
use corral_store::testing::TempPostgres;
use corral_store::{PgStore, RdPgStore};

fn server() -> Option<TempPostgres> {
    corral_store::testing::for_test()
}

fn stored(id: &str, ep: &str, d: Option<&str>) -> Stored {
    let links = corral_proto::wire::link_format::parse("</s/t>;rt=temperature;if=sensor")
        .map(|l| l.unwrap().into_owned())
        .collect();
    let reg = Registration {
        id: id.into(),
        ep: ep.into(),
        d: d.map(str::to_string),
        base: "coap://192.0.2.1:5683".into(),
        base_explicit: false,
        lt: 600,
        extra: vec![("et".into(), "a&b=c%d".into())],
        links,
        owner: "192.0.2.1".parse().unwrap(),
        identity: Some("dtls:alice".into()),
        expires: corral_proto::Instant::ZERO,
    };
    Stored { reg, expires_unix_ms: 1_700_000_000_000 }
}

#[test]
fn registrations_round_trip_and_a_name_is_one_row() {
    let Some(pg) = server() else { return };
    let mut one = RdPgStore::connect(&pg.url()).unwrap();
    one.save(&stored("a1", "node1", None)).unwrap();
    one.save(&stored("a2", "node2", Some("floor1"))).unwrap();
    one.save(&stored("a3", "node1", None)).unwrap(); // node1 again, new id: replaces a1
    one.save(&stored("a2", "node2", Some("floor1"))).unwrap(); // a refresh: the same row
    let mut two = RdPgStore::connect(&pg.url()).unwrap();
    let (rows, bad) = two.load().unwrap();
    assert_eq!(bad, 0);
    let ids: Vec<(&str, &str)> = rows.iter().map(|r| (r.reg.id.as_str(), r.reg.ep.as_str())).collect();
    assert_eq!(ids, [("a2", "node2"), ("a3", "node1")]);
    assert_eq!(rows[1], stored("a3", "node1", None), "every field as written");
    two.remove("a2").unwrap();
    assert_eq!(one.load().unwrap().0.len(), 1, "the other directory sees the removal");

    // The Entity Manager's store shares the database and the version table.
    let em = PgStore::connect(&pg.url()).unwrap();
    assert_eq!(em.schema_version().unwrap(), corral_store::em_postgres::SCHEMA_VERSION);
    assert_eq!(RdPgStore::connect(&pg.url()).unwrap().load().unwrap().0.len(), 1);
}
