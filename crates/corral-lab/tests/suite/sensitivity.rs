//! Every seed-000 scenario, in quick form, rerun with the deliberately wrong models of its
//! `[[sensitivity]]` list: the findings must be able to tell. For each scenario this prints the table
//! (kind or status per finding and model) and checks that some wrong model changes some finding — a set
//! of findings that no wrong model can move would be checking nothing.

use corral_lab::scenario::{builtin, Scenario};
use corral_lab::sweep::{self, RunOptions};

const SEED_000: &[&str] = &[
    "fig07-delay",
    "fig08-group-size",
    "fig10-interference",
    "fig13-two-gateways",
    "fig14-ack-timeout",
    "table8-office",
];

#[test]
fn wrong_models_flip_verdicts_in_every_seed_000_scenario() {
    for name in SEED_000 {
        let text = builtin(name).expect("a builtin");
        let s = Scenario::parse(text).expect("parses");
        assert!(!s.sensitivity.is_empty(), "{name} has no [[sensitivity]] variants");
        let opts = RunOptions { seed: 1, quick: true, shard: None, jobs: 2 };
        let mut data = sweep::run(&s, text, &opts, &|_, _| {}).expect("runs");
        sweep::run_sensitivity(&mut data, &opts, &|_, _| {}).expect("variants run");
        let found = corral_lab::findings::evaluate(&s, &data.aggregates());
        println!("{}", corral_lab::report::sensitivity_text(&found, &data.sensitivity));
        // Consequences of the configuration are expected to survive a wrong model; claims and fitted
        // numbers that hold must not all survive every one (one that already fails cannot be broken).
        let evidence: Vec<_> =
            found.iter().filter(|f| f.role != corral_lab::scenario::Role::Consequence && f.holds()).collect();
        if evidence.is_empty() {
            println!("{name}: no claim or fitted number holds in the quick run; nothing to break");
            continue;
        }
        let moved = data.sensitivity.iter().any(|v| {
            evidence
                .iter()
                .any(|f| v.findings.iter().find(|g| g.check == f.check).map(|g| g.status()) != Some(f.status()))
        });
        assert!(moved, "{name} (seed 1, quick): no wrong model changes any claim or fitted finding");
    }
}
