//! corral's own questions about entities that follow a Resource Directory (issue 32), on the `[churn]`
//! family (`crate::family::churn`): no paper gives numbers for them, so every measure is corral's against
//! a tolerance fixed here, and each claim is one a wrong model must be able to break (the scenario's
//! `[[sensitivity]]` variants remove each claim's cause).
//!
//! - `churn_follow_fewer_stale`: the following entity is off the devices present for fewer member-seconds than
//!   the fixed one, at every lifetime (strict: a tie — no churn — does not count).
//! - `churn_vanished_leave_within_lifetime`: a device that stops refreshing leaves the following entity within
//!   its lifetime and the tenth of it the registrant keeps as refresh margin, and none stays.
//! - `churn_cost_grows_as_lifetime_shrinks`: the directory's frames fall at every step of the lifetime axis
//!   (arithmetic of the refresh period, so CONSEQUENCE: `super::ARITHMETIC`).

use super::{need, num, steps, Aggs, Check, Inconclusive, Measure, Tolerance, Trend};
use crate::record::ChurnFacts;
use crate::scenario::Scenario;

pub const CHECKS: &[Check] = &[
    Check {
        name: "churn_follow_fewer_stale",
        title: "An entity that follows the directory is off the devices present for fewer member-seconds than one fixed at creation, at every lifetime",
        run: follow_fewer_stale,
    },
    Check {
        name: "churn_vanished_leave_within_lifetime",
        title: "A device that stops refreshing leaves the following entity within its lifetime (+ the tenth kept as refresh margin)",
        run: vanished_leave_within_lifetime,
    },
    Check {
        name: "churn_cost_grows_as_lifetime_shrinks",
        title: "The directory's radio frames grow as the lifetime shrinks, at every step",
        run: cost_grows_as_lifetime_shrinks,
    },
];

type Out = Result<Vec<Measure>, Inconclusive>;

/// The `[churn]` points as (lifetime, facts), sorted by lifetime.
fn points(aggs: &Aggs) -> Vec<(f64, ChurnFacts)> {
    let mut v: Vec<(f64, ChurnFacts)> = aggs
        .iter()
        .filter_map(|(p, a)| Some((num(p, "lifetime_s").unwrap_or(a.churn()?.lifetime_s), *a.churn()?)))
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

/// Stale plus missing member-seconds of the following entity minus the fixed one's, below zero.
fn follow_fewer_stale(_: &Scenario, aggs: &Aggs) -> Out {
    let m = points(aggs)
        .into_iter()
        .map(|(lt, f)| {
            let off = (f.follow_stale_s + f.follow_missing_s) - (f.fixed_stale_s + f.fixed_missing_s);
            Measure::new(
                format!("lifetime {lt} s: member-seconds off the devices present, following − fixed"),
                off,
                None,
                " member-s",
                Tolerance::Below(0.0),
            )
        })
        .collect();
    need(m, "needs [churn] points")
}

/// At every lifetime where a device left without a word early enough to be due: the longest time to its
/// removal at most 1.1 × the lifetime, and no such device still a member at the end.
fn vanished_leave_within_lifetime(_: &Scenario, aggs: &Aggs) -> Out {
    let mut m = Vec::new();
    for (lt, f) in points(aggs) {
        if f.vanish_leave_max_s.is_nan() && f.vanish_unremoved == 0 {
            continue;
        }
        m.push(Measure::new(
            format!("lifetime {lt} s: longest silent departure → removal / lifetime"),
            f.vanish_leave_max_s / lt,
            None,
            "×",
            Tolerance::AtMost(1.1),
        ));
        m.push(Measure::new(
            format!("lifetime {lt} s: silent devices due but still members at the end"),
            f.vanish_unremoved as f64,
            None,
            "",
            Tolerance::AtMost(0.0),
        ));
    }
    need(m, "needs a device that left without a word a lifetime before the end")
}

/// The directory's frames at each lifetime, falling at every step as it grows.
fn cost_grows_as_lifetime_shrinks(_: &Scenario, aggs: &Aggs) -> Out {
    let row: Vec<(f64, f64)> = points(aggs).into_iter().map(|(lt, f)| (lt, f.rd_frames as f64)).collect();
    if row.len() < 2 {
        return Err("needs two lifetimes or more".into());
    }
    Ok(steps("directory frames at lifetime (s)", &row, Trend::Falls, " frames"))
}

#[cfg(test)]
mod tests {
    use super::super::testing::Synth;
    use super::super::{n, ARITHMETIC};
    use crate::record::{ChurnFacts, Facts};

    fn add(s: &mut Synth, lt: f64, f: ChurnFacts) {
        s.add(&[("lifetime_s", n(lt))], 1.0, 100.0, 100.0).facts = Facts::Churn(ChurnFacts { lifetime_s: lt, ..f });
    }

    fn churned(rd_frames: u64) -> ChurnFacts {
        ChurnFacts {
            follow_stale_s: 100.0,
            follow_missing_s: 20.0,
            fixed_stale_s: 900.0,
            fixed_missing_s: 1200.0,
            vanish_leave_max_s: 50.0,
            rd_frames,
            ..ChurnFacts::empty()
        }
    }

    #[test]
    fn following_is_fewer_stale_only_strictly() {
        let mut s = Synth::new();
        add(&mut s, 60.0, churned(900));
        add(&mut s, 300.0, churned(300));
        assert_eq!(s.holds("churn_follow_fewer_stale"), Ok(true));
        let still = ChurnFacts {
            follow_stale_s: 0.0,
            follow_missing_s: 0.0,
            fixed_stale_s: 0.0,
            fixed_missing_s: 0.0,
            ..churned(1)
        };
        let mut s = Synth::new();
        add(&mut s, 60.0, still);
        assert_eq!(s.holds("churn_follow_fewer_stale"), Ok(false), "a tie (no churn) does not count");
    }

    #[test]
    fn a_vanished_device_must_leave_within_its_lifetime_and_none_may_stay() {
        let mut s = Synth::new();
        add(&mut s, 60.0, churned(900));
        assert_eq!(s.holds("churn_vanished_leave_within_lifetime"), Ok(true));
        let mut s = Synth::new();
        add(&mut s, 60.0, ChurnFacts { vanish_leave_max_s: 70.0, ..churned(900) });
        assert_eq!(s.holds("churn_vanished_leave_within_lifetime"), Ok(false), "70 s > 1.1 × 60 s");
        let mut s = Synth::new();
        add(&mut s, 60.0, ChurnFacts { vanish_leave_max_s: f64::NAN, vanish_unremoved: 2, ..churned(900) });
        assert_eq!(s.holds("churn_vanished_leave_within_lifetime"), Ok(false), "devices that kept refreshing");
        let mut s = Synth::new();
        add(&mut s, 60.0, ChurnFacts { vanish_leave_max_s: f64::NAN, ..churned(900) });
        assert!(s.holds("churn_vanished_leave_within_lifetime").is_err(), "nobody vanished: inconclusive");
    }

    #[test]
    fn the_cost_must_fall_at_every_step_of_the_lifetime() {
        let mut s = Synth::new();
        for (lt, f) in [(60.0, 900), (300.0, 300), (900.0, 200)] {
            add(&mut s, lt, churned(f));
        }
        assert_eq!(s.holds("churn_cost_grows_as_lifetime_shrinks"), Ok(true));
        let mut s = Synth::new();
        for (lt, f) in [(60.0, 900), (300.0, 200), (900.0, 200)] {
            add(&mut s, lt, churned(f));
        }
        assert_eq!(s.holds("churn_cost_grows_as_lifetime_shrinks"), Ok(false), "a flat step fails");
        assert!(ARITHMETIC.iter().any(|(c, _)| *c == "churn_cost_grows_as_lifetime_shrinks"));
    }
}
