//! The simulation test of the gateway (issue 44): two hundred seeds, each an hour of a 20-member gateway
//! under faults, hold every invariant and replay byte for byte; and each injected defect is caught within
//! 200 seeds, so that a harness that checks nothing cannot pass. `scripts/dst.sh` runs more.

use corral_dst::{replay_command, run_seed, Defect, Options, Report};

const SEEDS: u64 = 200;

fn describe(r: &Report, opts: &Options) -> String {
    format!("seed {}:\n  {}\n  replay: {}", r.seed, r.failures.join("\n  "), replay_command(r.seed, opts))
}

#[test]
fn two_hundred_seeds_of_an_hour_under_faults_hold_every_invariant_and_replay_byte_for_byte() {
    let opts = Options::default();
    let mut failed = Vec::new();
    let (mut virtual_s, mut crashes, mut requests) = (0.0, 0, 0);
    for seed in 1..=SEEDS {
        let a = run_seed(seed, opts);
        let b = run_seed(seed, opts);
        assert_eq!(a.trace_hash, b.trace_hash, "seed {seed} diverged on its second run: not deterministic");
        assert!(a.virtual_s >= 3600.0, "seed {seed} ran {} virtual s", a.virtual_s);
        virtual_s += a.virtual_s;
        crashes += a.crashes;
        requests += a.requests;
        if !a.failures.is_empty() {
            failed.push(describe(&a, &opts));
        }
    }
    // The faults happened: a harness whose gateway never crashes proves nothing.
    assert!(crashes >= SEEDS as u32, "{crashes} crashes in {SEEDS} seeds");
    assert!(requests >= 100 * SEEDS as usize, "{requests} requests in {SEEDS} seeds");
    println!("{SEEDS} seeds, {virtual_s:.0} virtual s, {crashes} crashes, {requests} requests");
    assert!(failed.is_empty(), "{} seeds failed:\n{}", failed.len(), failed.join("\n"));
}

#[test]
fn every_injected_defect_is_caught_within_two_hundred_seeds() {
    for defect in Defect::ALL {
        let opts = Options { defect: Some(defect), ..Options::default() };
        let caught = (1..=SEEDS).map(|seed| run_seed(seed, opts)).find(|r| !r.failures.is_empty());
        let r = caught.unwrap_or_else(|| panic!("{defect}: no seed of {SEEDS} caught it"));
        println!("{defect}: caught by {}", describe(&r, &opts));
    }
}
