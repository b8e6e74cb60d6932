//! The questions seed 000 left open, answered by corral's own experiments: hypotheses stated before the
//! run, each with its tolerance (there is no paper number to compare with).

use crate::findings::{n, need, num, pick, rt_s, t, values, Aggs, Check, Inconclusive, Measure, Tolerance};
use crate::scenario::Scenario;

pub const CHECKS: &[Check] = &[
    Check {
        name: "leisure_lower_bound",
        title: "leisure at Eq. (1)'s lower bound instead of 5 s",
        run: leisure_lower_bound,
    },
    Check {
        name: "auto_delay_near_best",
        title: "delay=auto (Eq. (2)) is as good as the best fixed delay",
        run: auto_delay_near_best,
    },
    Check {
        name: "observe_vs_poll",
        title: "observing an entity is never beaten by polling it on both cost and freshness",
        run: observe_vs_poll,
    },
    Check {
        name: "repair_best_of_both",
        title: "multicast with unicast repair keeps unicast's reliability with fewer frames than unicast",
        run: repair_best_of_both,
    },
];

type Out = Result<Vec<Measure>, Inconclusive>;

/// Eq. (1): S·G/R with S = 80 B, R = 1 kB/s. At the smallest leisure at or above each group's bound,
/// response time falls below the 5 s default's (ratio < 1) and member reliability stays within 5 points.
fn leisure_lower_bound(_: &Scenario, aggs: &Aggs) -> Out {
    let leisures = values(aggs, "leisure_ms");
    let mut m = Vec::new();
    for g in values(aggs, "group") {
        let bound = 80.0 * g;
        let near = leisures.iter().copied().filter(|l| *l >= bound).fold(f64::INFINITY, f64::min);
        let (Some(a), Some(b)) = (
            pick(aggs, &[("group", n(g)), ("leisure_ms", n(5000.0))]),
            pick(aggs, &[("group", n(g)), ("leisure_ms", n(near))]),
        ) else {
            continue;
        };
        m.push(Measure::new(
            format!("G={g} response time at {near} ms / at 5 s"),
            rt_s(b) / rt_s(a),
            None,
            "×",
            Tolerance::AtMost(0.95),
        ));
        m.push(Measure::new(
            format!("G={g} member reliability lost at the bound"),
            a.member_reliability - b.member_reliability,
            None,
            " points",
            Tolerance::AtMost(5.0),
        ));
    }
    need(m, "needs leisure_ms points at 5000 and at or above each group's bound")
}

/// delay=auto within 15 % of the best fixed delay's response time.
fn auto_delay_near_best(_: &Scenario, aggs: &Aggs) -> Out {
    let mut m = Vec::new();
    for g in values(aggs, "group") {
        let auto = pick(aggs, &[("group", n(g)), ("delay", t("auto"))]).map(rt_s);
        let best = aggs
            .iter()
            .filter(|(p, _)| num(p, "group") == Some(g) && num(p, "delay").is_some())
            .map(|(_, a)| rt_s(a))
            .filter(|x| x.is_finite())
            .fold(f64::NAN, f64::min);
        let Some(auto) = auto.filter(|_| best.is_finite()) else { continue };
        m.push(Measure::new(format!("G={g} auto / best fixed delay"), auto / best, None, "×", Tolerance::AtMost(1.15)));
    }
    need(m, "needs delay = \"auto\" and fixed delays")
}

/// For each group: no polling period both at least as fresh and at most as costly (frames per hour) as
/// observing. The measure is the count of such periods (must be 0).
fn observe_vs_poll(_: &Scenario, aggs: &Aggs) -> Out {
    let mut m = Vec::new();
    for g in values(aggs, "group") {
        let Some(obs) = pick(aggs, &[("group", n(g)), ("follow", t("observe"))]) else { continue };
        let (fo, so) = (obs.frames_per_hour, obs.staleness());
        let polls: Vec<_> = aggs
            .iter()
            .filter(|(p, _)| num(p, "group") == Some(g) && num(p, "follow").is_some())
            .map(|(_, a)| a)
            .filter(|a| a.staleness().is_finite() && a.frames_per_hour.is_finite())
            .collect();
        if polls.is_empty() || !so.is_finite() {
            continue;
        }
        let dominating = polls.iter().filter(|a| a.staleness() <= so && a.frames_per_hour <= fo).count();
        m.push(Measure::new(
            format!("G={g} polling periods as fresh and as cheap as observing"),
            dominating as f64,
            None,
            "",
            Tolerance::AtMost(0.0),
        ));
    }
    need(m, "needs follow = \"observe\" and polling periods for a group")
}

/// At every group and load: repair's member reliability within half a point of unicast's, with fewer
/// frames per query than unicast.
fn repair_best_of_both(_: &Scenario, aggs: &Aggs) -> Out {
    let mut m = Vec::new();
    for g in values(aggs, "group") {
        for w in values(aggs, "wifi_mbps") {
            let at = |mode: &str| pick(aggs, &[("mode", t(mode)), ("group", n(g)), ("wifi_mbps", n(w))]);
            let (Some(u), Some(r)) = (at("unicast"), at("multicast+repair")) else { continue };
            m.push(Measure::new(
                format!("G={g} at {w} Mb/s: repair member reliability − unicast's"),
                r.member_reliability - u.member_reliability,
                None,
                " points",
                Tolerance::AtLeast(-0.5),
            ));
            m.push(Measure::new(
                format!("G={g} at {w} Mb/s: repair frames / unicast frames"),
                r.frames_per_query / u.frames_per_query,
                None,
                "×",
                Tolerance::AtMost(0.99),
            ));
        }
    }
    need(m, "needs mode = unicast and multicast+repair at the same group and load")
}

#[cfg(test)]
mod tests {
    use crate::findings::testing::Synth;
    use crate::findings::{n, t};
    use crate::record::{Facts, Staleness};

    #[test]
    fn hypotheses_can_fail() {
        let leisure = |rt_bound: f64, rel_bound: f64| {
            let mut s = Synth::new();
            s.add(&[("group", n(10.0)), ("leisure_ms", n(5000.0))], 4.8, 98.0, 80.0);
            s.add(&[("group", n(10.0)), ("leisure_ms", n(800.0))], rt_bound, rel_bound, 60.0);
            s
        };
        assert_eq!(leisure(1.2, 95.0).holds("leisure_lower_bound"), Ok(true));
        assert_eq!(leisure(4.9, 95.0).holds("leisure_lower_bound"), Ok(false));
        assert_eq!(leisure(1.2, 90.0).holds("leisure_lower_bound"), Ok(false));

        let auto = |rt: f64| {
            let mut s = Synth::new();
            s.add(&[("group", n(10.0)), ("delay", n(50.0))], 1.0, 100.0, 100.0);
            s.add(&[("group", n(10.0)), ("delay", t("auto"))], rt, 100.0, 100.0);
            s
        };
        assert_eq!(auto(1.1).holds("auto_delay_near_best"), Ok(true));
        assert_eq!(auto(1.5).holds("auto_delay_near_best"), Ok(false));

        let stale = |mean: f64| Facts::Entity { staleness: Some(Staleness { mean, max: mean }) };
        let follow = |poll_stale: f64, poll_frames: f64| {
            let mut s = Synth::new();
            let o = s.add(&[("group", n(5.0)), ("follow", t("observe"))], 0.0, 100.0, 100.0);
            (o.facts, o.frames_per_hour) = (stale(0.03), 150.0);
            let p = s.add(&[("group", n(5.0)), ("follow", n(60.0))], 1.0, 100.0, 100.0);
            (p.facts, p.frames_per_hour) = (stale(poll_stale), poll_frames);
            s
        };
        assert_eq!(follow(0.02, 600.0).holds("observe_vs_poll"), Ok(true));
        assert_eq!(follow(0.02, 100.0).holds("observe_vs_poll"), Ok(false), "polling both fresher and cheaper");

        let repair = |rel: f64, frames: f64| {
            let mut s = Synth::new();
            let u = s.add(&[("mode", t("unicast")), ("group", n(10.0)), ("wifi_mbps", n(0.0))], 1.0, 100.0, 100.0);
            u.frames_per_query = 28.0;
            let r =
                s.add(&[("mode", t("multicast+repair")), ("group", n(10.0)), ("wifi_mbps", n(0.0))], 5.0, rel, 100.0);
            r.frames_per_query = frames;
            s
        };
        assert_eq!(repair(100.0, 19.0).holds("repair_best_of_both"), Ok(true));
        assert_eq!(repair(97.0, 19.0).holds("repair_best_of_both"), Ok(false));
        assert_eq!(repair(100.0, 30.0).holds("repair_best_of_both"), Ok(false));
    }
}
