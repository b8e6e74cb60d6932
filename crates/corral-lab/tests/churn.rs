//! The `[churn]` family (issue 32): devices join and leave a floor, registering with the Resource
//! Directory on the gateway, while the client queries an entity that follows the directory and one whose
//! members were typed in at the start. Seeded; each test prints its seed.

use corral_lab::findings::{self, Kind};
use corral_lab::scenario::{builtin, Experiment, Family, Scenario};
use corral_lab::sweep::{self, RunOptions};

const SEED: u64 = 1;

#[test]
fn ext_rd_churn_quick_run_holds_and_each_cause_removal_turns_its_finding() {
    println!("seed {SEED}");
    let text = builtin("ext-rd-churn").expect("built in");
    let s = Scenario::parse(text).expect("parses");
    assert_eq!(s.family(), Ok(Family::Churn));
    let opts = RunOptions { seed: SEED, quick: true, shard: None, jobs: 2 };
    let mut data = sweep::run(&s, text, &opts, &|_, _| {}).expect("runs");
    for r in &data.results {
        println!("{:?}", r.point.facts);
    }
    sweep::run_sensitivity(&mut data, &opts, &|_, _| {}).expect("variants run");
    let found = findings::evaluate(&s, &data.aggregates());
    println!("{}", corral_lab::report::sensitivity_text(&found, &data.sensitivity));
    for f in &found {
        println!("{} {}: {}", f.check, f.status(), f.corral());
    }
}
