//! Seeded test helpers: run a body with a seed and name the seed if it panics; run a scenario twice and
//! compare trace hashes (madsim's `check_determinism`).
//!
//! # What it owns
//! Only test plumbing. A failing simulation must be reproducible from one number, so every panic inside
//! [`with_seed`] is re-raised with `SEED=<n>` in front of its message (and printed to stderr), and
//! `CORRAL_SIM_SEED=<n>` makes [`seeds`] run just that seed.

use std::panic::{self, AssertUnwindSafe};

/// Runs `body(seed)`; if it panics, prints `SEED=<seed>` and panics again with the seed in the message.
pub fn with_seed<R>(seed: u64, body: impl FnOnce(u64) -> R) -> R {
    match panic::catch_unwind(AssertUnwindSafe(|| body(seed))) {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("(non-string panic)");
            eprintln!("SEED={seed} reproduces this failure (CORRAL_SIM_SEED={seed} runs only it)");
            panic::panic_any(format!("SEED={seed}: {msg}"))
        }
    }
}

/// The seeds a seeded test should run: `CORRAL_SIM_SEED` alone if set, else `defaults`.
pub fn seeds(defaults: &[u64]) -> Vec<u64> {
    match std::env::var("CORRAL_SIM_SEED").ok().and_then(|s| s.trim().parse().ok()) {
        Some(s) => vec![s],
        None => defaults.to_vec(),
    }
}

/// Runs `body` for each seed of [`seeds`], each under [`with_seed`].
pub fn for_seeds(defaults: &[u64], mut body: impl FnMut(u64)) {
    for seed in seeds(defaults) {
        with_seed(seed, &mut body);
    }
}

/// Runs `scenario(seed)` twice and asserts both runs return the same trace hash; returns it.
pub fn check_determinism(seed: u64, scenario: impl Fn(u64) -> u64) -> u64 {
    with_seed(seed, |seed| {
        let a = scenario(seed);
        let b = scenario(seed);
        assert_eq!(a, b, "two runs with the same seed diverged");
        a
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_body_names_its_seed() {
        let err = panic::catch_unwind(|| with_seed(4242, |s| assert_eq!(s, 0, "boom"))).unwrap_err();
        let msg = err.downcast_ref::<String>().unwrap();
        assert!(msg.starts_with("SEED=4242: "), "{msg}");
        assert!(msg.contains("boom"));
        assert_eq!(with_seed(7, |s| s + 1), 8);
    }
}
