//! A run whose point fails stops at that point: the error comes back at once instead of after every other
//! point has run (seed 004's full run is 46 minutes of real time; a CoAP point that cannot start its
//! programs used to surface only at the end).

use std::sync::atomic::{AtomicUsize, Ordering};

use corral_lab::error::RunError;
use corral_lab::scenario::{builtin, Scenario};
use corral_lab::sweep::{self, RunOptions};

/// seed004's CoAP points start the `corral` executable running the lab; this test binary is not it, so the
/// first point fails before it starts any program (no root, no network namespace needed).
#[test]
fn a_failing_point_stops_the_run_at_once() {
    let text = builtin("seed004-throughput").expect("a builtin");
    let s = Scenario::parse(text).expect("parses");
    let opts = RunOptions { seed: 1, quick: true, shard: None, jobs: 2 };
    let ran = AtomicUsize::new(0);
    let total = AtomicUsize::new(0);
    let r = sweep::run(&s, text, &opts, &|_, n| {
        ran.fetch_add(1, Ordering::Relaxed);
        total.store(n, Ordering::Relaxed);
    });
    let Err(e) = r else { panic!("a CoAP point cannot start outside the corral executable") };
    assert!(matches!(e, RunError::Point { index: 0, .. }), "the first point's error, got {e}");
    assert!(e.to_string().contains("corral"), "the error says what is missing: {e}");
    assert!(total.load(Ordering::Relaxed) > 1, "the quick run has more than one point");
    assert_eq!(ran.load(Ordering::Relaxed), 1, "no point runs after the one that failed");
}
