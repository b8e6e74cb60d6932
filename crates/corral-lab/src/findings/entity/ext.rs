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
        title: "observing an entity is about as fresh as polling it every minute at half its frames or fewer",
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

/// Observing pays a notification when a member's reading moved by its step, polling pays every period
/// whether anything moved. For each group, against polling every 60 s: observing's frames per hour at most
/// half of polling's (the cause: few readings move by a step in a minute), and its mean staleness at most
/// 0.02 °C (a tenth of the members' 0.2 °C step) above polling's — about as fresh, not bought by staleness.
fn observe_vs_poll(_: &Scenario, aggs: &Aggs) -> Out {
    let mut m = Vec::new();
    for g in values(aggs, "group") {
        let at = |follow| pick(aggs, &[("group", n(g)), ("follow", follow)]);
        let (Some(obs), Some(poll)) = (at(t("observe")), at(n(POLL_S))) else { continue };
        m.push(Measure::new(
            format!("G={g} frames per hour, observing / polling every {POLL_S} s"),
            obs.frames_per_hour / poll.frames_per_hour,
            None,
            "×",
            Tolerance::AtMost(0.5),
        ));
        m.push(Measure::new(
            format!("G={g} mean staleness, observing − polling every {POLL_S} s"),
            obs.staleness() - poll.staleness(),
            None,
            " °C",
            Tolerance::AtMost(0.02),
        ));
    }
    need(m, "needs follow = \"observe\" and follow = 60 (s) for a group")
}

/// The polling period observing is held against: a minute.
const POLL_S: f64 = 60.0;

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
        assert_eq!(follow(0.04, 600.0).holds("observe_vs_poll"), Ok(true), "fresher polling within 0.02 °C");
        assert_eq!(follow(0.02, 250.0).holds("observe_vs_poll"), Ok(false), "observing over half polling's frames");
        assert_eq!(follow(0.005, 600.0).holds("observe_vs_poll"), Ok(false), "polling fresher by 0.025 °C");

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
