//! The `[churn]` family (issue 32): devices join and leave a floor, registering with the Resource
//! Directory on the gateway, while the client queries an entity that follows the directory and one whose
//! members were typed in at the start. Seeded; each test prints its seed.

use corral_lab::findings::{self, Finding, Kind};
use corral_lab::record::ChurnFacts;
use corral_lab::run::run_point;
use corral_lab::scenario::{builtin, Experiment, Family, Scenario};
use corral_lab::sweep::{self, RunOptions};

const SEED: u64 = 1;

fn scenario() -> (&'static str, Scenario) {
    let text = builtin("ext-rd-churn").expect("built in");
    (text, Scenario::parse(text).expect("parses"))
}

/// The facts of the built-in's quick point at `lifetime_s`, run with `seed`.
fn facts(s: &Scenario, lifetime_s: f64, seed: u64) -> ChurnFacts {
    let p = s
        .points(true)
        .into_iter()
        .find(|p| p.get("lifetime_s").and_then(|v| v.num()) == Some(lifetime_s))
        .expect("a quick point at that lifetime");
    let setup = s.setup(&p, true).expect("resolves");
    assert!(matches!(setup.experiment, Experiment::Churn(_)));
    let r = run_point(&setup, p.index, seed).expect("runs");
    assert!(r.point.created, "both entities created");
    *r.point.facts.churn().expect("churn facts")
}

#[test]
fn the_following_entity_takes_in_arrivals_and_drops_departures_while_the_fixed_one_keeps_its_list() {
    println!("seed {SEED}");
    let (_, s) = scenario();
    assert_eq!(s.family(), Ok(Family::Churn));
    let f = facts(&s, 60.0, SEED);
    println!("{f:?}");
    // Six devices arrive and six leave in ten minutes: the typed list lacks every arrival and keeps every
    // departure, for thousands of member-seconds; the following entity is off for a few lifetimes at most.
    assert!(f.fixed_stale_s + f.fixed_missing_s > 1000.0, "{f:?}");
    assert!(f.follow_stale_s + f.follow_missing_s < 0.2 * (f.fixed_stale_s + f.fixed_missing_s), "{f:?}");
    // An arrival registers at once and the directory notifies the EM: in the next second's sample.
    assert!(f.join_max_s <= 2.0, "{f:?}");
    // A clean departure's DELETE removes it at once; a silent one within the lifetime.
    assert!(f.clean_leave_max_s <= 2.0, "{f:?}");
    assert!(f.vanish_leave_max_s <= 60.0 * 1.1 && f.vanish_unremoved == 0, "{f:?}");
    // Every query of the following entity has every present device's value; the fixed one's lack the
    // arrivals once there are any.
    assert_eq!(f.follow_full, f.queries, "{f:?}");
    assert!(f.fixed_full < f.queries / 2, "{f:?}");
    // The directory's traffic is on the air, its notifications to the EM are not (loopback).
    assert!(f.rd_frames > 0 && f.rd_bytes > 0 && f.query_frames > 0 && f.notifications > 0, "{f:?}");
    assert_eq!(f, facts(&s, 60.0, SEED), "a point is a function of its seed");
}

fn finding<'a>(found: &'a [Finding], check: &str) -> &'a Finding {
    found.iter().find(|f| f.check == check).unwrap_or_else(|| panic!("{check} evaluated"))
}

#[test]
fn ext_rd_churn_quick_run_holds_and_each_cause_removal_turns_its_finding() {
    println!("seed {SEED}");
    let (text, s) = scenario();
    let opts = RunOptions { seed: SEED, quick: true, shard: None, jobs: 2 };
    let mut data = sweep::run(&s, text, &opts, &|_, _| {}).expect("runs");
    sweep::run_sensitivity(&mut data, &opts, &|_, _| {}).expect("variants run");
    let found = findings::evaluate(&s, &data.aggregates());
    println!("{}", corral_lab::report::sensitivity_text(&found, &data.sensitivity));
    for f in &found {
        println!("{} {}: {}", f.check, f.status(), f.corral());
    }
    assert_eq!(finding(&found, "churn_follow_fewer_stale").kind, Kind::Agrees);
    assert_eq!(finding(&found, "churn_vanished_leave_within_lifetime").kind, Kind::Agrees);
    let cost = finding(&found, "churn_cost_grows_as_lifetime_shrinks");
    assert_eq!((cost.kind, cost.holds()), (Kind::Consequence, true), "arithmetic, and it holds");
    // Each variant removes one finding's cause, and that finding turns.
    let variant = |name: &str, check: &str| -> Finding {
        let v = data.sensitivity.iter().find(|v| v.name.starts_with(name)).expect("the variant ran");
        finding(&v.findings, check).clone()
    };
    let still = variant("no churn", "churn_follow_fewer_stale");
    assert_eq!(still.kind, Kind::Disagrees, "with nobody coming or going both entities are exact: a tie");
    let zombies = variant("silent devices keep refreshing", "churn_vanished_leave_within_lifetime");
    assert_eq!(zombies.kind, Kind::Disagrees, "a device that keeps refreshing is never removed");
    let long = variant("lifetimes longer than the window", "churn_cost_grows_as_lifetime_shrinks");
    println!("{}: {}", long.check, long.corral());
    assert!(!long.holds(), "without a refresh in the window the lifetime costs nothing: {}", long.corral());
}
