//! Regression tests of the defects the harness found in the gateway (the crate docs list them): each runs
//! the seed that found it and fails while that defect (and only that one) shows; one whose fix has not
//! landed is ignored — once fixed it passes and loses its `#[ignore]`.

use corral_dst::check::{KNOWN_JOURNAL, KNOWN_LEFT, KNOWN_PENDING, KNOWN_REBOOT};
use corral_dst::{replay_command, run_seed, Options};

fn clean_of(seed: u64, tag: &str) {
    let opts = Options::default();
    let r = run_seed(seed, opts);
    let hits: Vec<&String> = r.known.iter().filter(|k| k.contains(tag)).collect();
    assert!(r.failures.is_empty(), "seed {seed}: {:?}", r.failures);
    assert!(
        hits.is_empty(),
        "seed {seed}:\n  {}\n  replay: CORRAL_DST_STRICT=1 {}",
        hits.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n  "),
        replay_command(seed, &opts)
    );
}

#[test]
fn k1_a_committed_joins_journal_entries_settle_after_a_crash_seed_72() {
    clean_of(72, KNOWN_JOURNAL);
}

#[test]
#[ignore = "K2: a member that rebooted is never asked to join its entity's group again"]
fn k2_a_rebooted_member_is_back_in_its_group_at_quiescence_seed_1() {
    clean_of(1, KNOWN_REBOOT);
}

#[test]
fn k3_a_failed_multicast_creation_leaves_no_pending_record_seeds_1690_and_2243() {
    clean_of(1690, KNOWN_PENDING);
    clean_of(2243, KNOWN_PENDING);
}

#[test]
fn k4_every_member_recorded_as_joined_is_in_its_group_seeds_79_and_86() {
    clean_of(86, KNOWN_LEFT);
    clean_of(79, KNOWN_LEFT);
}

#[test]
fn k5_strays_of_an_updates_timed_out_leaves_are_undone_seed_2184() {
    let opts = Options { faults: corral_dst::fault::parse("partition").expect("a kind"), ..Options::default() };
    let r = run_seed(2184, opts);
    assert!(
        r.failures.is_empty(),
        "seed 2184:\n  {}\n  replay: {}",
        r.failures.join("\n  "),
        replay_command(2184, &opts)
    );
}
