//! Seed 001 with radio contact from node positions and under rising load (`seed001-load`): nodes beyond
//! the next hop carrier-sense and collide, and at four times the paper's request rate the deployments
//! without cross-client aggregation lose client 9 while NDN keeps it.

use corral_lab::family::multiparty::{fig6, SHARED};
use corral_lab::record::MpStats;
use corral_lab::scenario::{builtin, AxisValue, Experiment, Point, Scenario};
use std::sync::Arc;

#[test]
fn positions_put_two_hops_in_contact_and_three_out_of_it() {
    let fig = fig6(25.0);
    let adj = fig.topology.adjacency();
    let f = &fig.shared;
    for i in 0..SHARED - 3 {
        assert!(adj[f[i]].contains(&f[i + 1]) && adj[f[i]].contains(&f[i + 2]), "f{} hears two hops on", i + 1);
        assert!(!adj[f[i]].contains(&f[i + 3]), "f{} and f{} are hidden from each other", i + 1, i + 4);
    }
    // The first model: only the route table's next hops.
    let old = fig6(0.0);
    let adj = old.topology.adjacency();
    assert!(!adj[old.shared[0]].contains(&old.shared[2]));
    // Routes stay the route table's whatever the contact: every client eight hops from the server.
    for c in &fig.clients {
        let (mut hops, mut at) = (0, *c);
        while let Some(p) = fig.parent[at] {
            hops += 1;
            at = p;
        }
        assert_eq!((hops, at), (8, fig.server));
    }
}

fn run(deployment: &str, interval_ms: u64, seed: u64) -> Arc<MpStats> {
    let s = Scenario::parse(builtin("seed001-load").expect("built in")).expect("parses");
    let p = Point {
        index: 0,
        values: vec![
            ("interval_ms".into(), AxisValue::Num(interval_ms as f64)),
            ("deployment".into(), AxisValue::Text(deployment.into())),
        ],
    };
    let mut setup = s.setup(&p, true).expect("resolves");
    let Experiment::Multiparty(m) = &mut setup.experiment else { panic!("a [multiparty] section") };
    assert_eq!(m.interval_ms, interval_ms, "the sweep sets the interval");
    m.requests = 120;
    let r = corral_lab::run::run_point(&setup, 0, seed).expect("runs");
    r.point.facts.multiparty().cloned().expect("multiparty stats")
}

#[test]
fn at_four_times_the_load_oscore_loses_client_9_and_ndn_does_not() {
    let seed = 1;
    let (e2e, ndn) = (run("oscore", 250, seed), run("ndn", 250, seed));
    let lost = |s: &MpStats| s.success(1) - s.success(9);
    println!("seed {seed}, 250 ms: OSCORE client 1 − 9 {} points, NDN {} points", lost(&e2e), lost(&ndn));
    assert!(lost(&e2e) >= 30.0, "seed {seed}: OSCORE at 250 ms loses {} points", lost(&e2e));
    assert!(lost(&ndn) <= 8.0, "seed {seed}: NDN at 250 ms loses {} points", lost(&ndn));
    // At the paper's load, one request a second, end-to-end OSCORE does not collapse in corral.
    let slow = run("oscore", 1000, seed);
    println!("seed {seed}, 1000 ms: OSCORE client 1 − 9 {} points", lost(&slow));
    assert!(lost(&slow) < 10.0, "seed {seed}: OSCORE at 1000 ms loses {} points", lost(&slow));
}
