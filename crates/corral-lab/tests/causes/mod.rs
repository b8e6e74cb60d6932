//! Running a scenario with and without a finding's cause: its quick run (with some lines edited) and its
//! `[[sensitivity]]` variants, seed 1 — for the tests that check each AGREES fails when its cause is
//! removed (`seed000_causes.rs`, `seed002_causes.rs`, `ext_causes.rs`).

use corral_lab::data::Variant;
use corral_lab::findings::Finding;
use corral_lab::scenario::{builtin, Scenario};
use corral_lab::sweep::{self, RunOptions};

/// Findings of a run and of its sensitivity variants.
pub type Run = (Vec<Finding>, Vec<Variant>);

/// `name`'s quick run, seed 1, with each `(from, to)` of `edits` replaced once in its text (each must
/// occur), and its sensitivity variants.
pub fn run(name: &str, edits: &[(&str, &str)]) -> Run {
    let mut text = builtin(name).expect("built in").to_string();
    for (from, to) in edits {
        assert!(text.contains(from), "{name} has no {from:?}");
        text = text.replacen(from, to, 1);
    }
    let s = Scenario::parse(&text).expect("parses");
    let opts = RunOptions { seed: 1, quick: true, shard: None, jobs: 2 };
    let mut data = sweep::run(&s, &text, &opts, &|_, _| {}).expect("runs");
    sweep::run_sensitivity(&mut data, &opts, &|_, _| {}).expect("variants run");
    let found = corral_lab::findings::evaluate(&s, &data.aggregates());
    (found, data.sensitivity)
}

/// The finding `check` of the run, and of the variant whose name starts with `variant`; both printed.
pub fn with_and_without<'a>(
    name: &str,
    (found, variants): &'a Run,
    check: &str,
    variant: &str,
) -> (&'a Finding, &'a Finding) {
    let f = found.iter().find(|f| f.check == check).unwrap_or_else(|| panic!("{name}: no finding {check}"));
    let v = variants
        .iter()
        .find(|v| v.name.starts_with(variant))
        .unwrap_or_else(|| panic!("{name}: no [[sensitivity]] variant {variant:?}"));
    let g = v.findings.iter().find(|g| g.check == check).expect("the variant evaluates every finding");
    println!("{name} seed 1: {check} {} — {}", f.status(), f.corral());
    println!("{name} seed 1, {}: {check} {} — {}", v.name, g.status(), g.corral());
    (f, g)
}

/// Asserts that `check` does not hold in the variant that removes its cause, and holds in the run.
pub fn cause_matters(name: &str, run: &Run, check: &str, variant: &str) {
    let (f, g) = with_and_without(name, run, check, variant);
    assert!(!g.holds(), "{name} (seed 1), {variant}: {check} still holds without its cause: {}", g.corral());
    assert!(f.holds(), "{name} (seed 1): {check} should hold with its cause present: {}", f.corral());
}
