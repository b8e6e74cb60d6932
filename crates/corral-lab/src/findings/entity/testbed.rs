//! Seed 000's open-room testbed (w-iLab.t Zwijnaarde): Figs. 7-14 and their text. Paper numbers are the
//! ones the OCR text states; figures without a number in the text are compared on what the text says
//! (a direction, a bound), with the tolerance written next to it.

use crate::findings::{n, need, pick, rt_s, t, values, Aggs, Check, Inconclusive, Measure, Tolerance};
use crate::scenario::Scenario;

pub const CHECKS: &[Check] = &[
    Check { name: "fig07_shape", title: "Fig. 7: response time at no delay, 50 ms and 100 ms", run: fig07_shape },
    Check {
        name: "no_delay_vs_best",
        title: "no delay between requests is several times slower than the best delay",
        run: no_delay_vs_best,
    },
    Check { name: "best_delay_eq2", title: "the best delay lies near Eq. (2)'s 82-100 ms", run: best_delay_eq2 },
    Check { name: "larger_groups_later", title: "larger groups answer later", run: larger_groups_later },
    Check {
        name: "reliability_by_group_size",
        title: "without interference: 100 % below 40 members, 99.8-99.9 % at 40",
        run: reliability_by_group_size,
    },
    Check {
        name: "fig10_fitted",
        title: "30 members at 28.5 Mb/s: multicast 94.6 %, unicast 99.5 % of the members (the calibration target)",
        run: fig10_fitted,
    },
    Check {
        name: "unicast_member_max_load",
        title: "unicast member reliability at 28.5 Mb/s: 100 % for 10, 99.9 % for 20 members",
        run: unicast_member_max_load,
    },
    Check {
        name: "unicast_group_max_load",
        title: "unicast group reliability at 28.5 Mb/s: 100 % for 10 and 20, 98 % for 30 members",
        run: unicast_group_max_load,
    },
    Check {
        name: "multicast_group_15mbps",
        title: "multicast group reliability of 20 and 30 members at 15 Mb/s: about 80 %",
        run: multicast_group_15mbps,
    },
    Check {
        name: "multicast_falls_with_load",
        title: "multicast member reliability falls with the Wi-Fi load",
        run: multicast_falls_with_load,
    },
    Check {
        name: "unicast_rt_sum_of_delays",
        title: "without interference, unicast response time is just above the sum of the delays",
        run: unicast_rt_sum_of_delays,
    },
    Check {
        name: "multicast_rt_below_leisure",
        title: "multicast response time (until the last reply) stays below the 5 s leisure",
        run: multicast_rt_below_leisure,
    },
    Check {
        name: "multicast_rt_flat",
        title: "multicast response time hardly changes with interference",
        run: multicast_rt_flat,
    },
    Check { name: "unicast_rt_grows", title: "unicast response time grows with interference", run: unicast_rt_grows },
    Check {
        name: "nested_faster",
        title: "two 10-member groups on two channels answer faster than one 20-member group",
        run: nested_faster,
    },
    Check {
        name: "ack_timeout_1s_beats_2s",
        title: "ACK_TIMEOUT 1 s beats 2 s under interference",
        run: ack_1_beats_2,
    },
    Check {
        name: "ack_timeout_half_worse",
        title: "ACK_TIMEOUT 0.5 s is worse than 1 s under interference",
        run: ack_half_worse,
    },
];

type Out = Result<Vec<Measure>, Inconclusive>;

fn delay_curve(aggs: &Aggs, group: Option<f64>) -> Vec<(f64, f64)> {
    let mut c: Vec<(f64, f64)> = aggs
        .iter()
        .filter(|(p, _)| group.is_none_or(|g| crate::findings::num(p, "group") == Some(g)))
        .filter_map(|(p, a)| Some((crate::findings::num(p, "delay")?, rt_s(a))))
        .filter(|(_, y)| y.is_finite())
        .collect();
    c.sort_by(|a, b| a.0.total_cmp(&b.0));
    c
}

fn best(c: &[(f64, f64)]) -> Option<(f64, f64)> {
    c.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1))
}

fn groups(aggs: &Aggs) -> Vec<Option<f64>> {
    let g = values(aggs, "group");
    if g.is_empty() {
        vec![None]
    } else {
        g.into_iter().map(Some).collect()
    }
}

fn label(g: Option<f64>) -> String {
    g.map(|g| format!("G={g} ")).unwrap_or_default()
}

/// Fig. 7, 5 members: ≈3 s at no delay, 390 ms at 50 ms, 550 ms at 100 ms (±15 %).
fn fig07_shape(_: &Scenario, aggs: &Aggs) -> Out {
    let g = values(aggs, "group").first().copied();
    let c = delay_curve(aggs, g);
    let at = |d: f64| c.iter().find(|(x, _)| *x == d).map(|x| x.1);
    let mut m = Vec::new();
    for (d, paper) in [(0.0, 3.0), (50.0, 0.39), (100.0, 0.55)] {
        if let Some(v) = at(d) {
            m.push(Measure::new(format!("response time at {d} ms"), v, Some(paper), " s", Tolerance::Relative(0.15)));
        }
    }
    need(m, "needs delays 0, 50 and 100 ms")
}

/// No delay against the best delay: "several times" slower (≥ 3×; Fig. 7 reads 3 s / 0.39 s = 7.7×).
fn no_delay_vs_best(_: &Scenario, aggs: &Aggs) -> Out {
    let g = values(aggs, "group").first().copied();
    let c = delay_curve(aggs, g);
    let zero = c.iter().find(|(d, _)| *d == 0.0).ok_or("the run has no delay = 0 point")?.1;
    if c.len() < 3 {
        return Err("too few delays to find the best one".into());
    }
    let (_, bt) = best(&c).ok_or("no response times")?;
    Ok(vec![Measure::new(
        format!("{}no delay / best delay", label(g)),
        zero / bt,
        Some(3.0 / 0.39),
        "×",
        Tolerance::AtLeast(3.0),
    )])
}

/// Fig. 7's group size: the `testbed` set's CPU constants were fitted on it (calibrate-cpu).
const FIG07_GROUP: f64 = 5.0;

/// Fig. 8: the best delay near Eq. (2)'s 82-100 ms, for every group size (within 50-150 ms: one step of
/// the sweep's grid either side). Where the run has other sizes, Fig. 7's 5 members are left out: the CPU
/// constants were fitted there, and a claim checked at its calibration point is FITTED, not agreement.
fn best_delay_eq2(_: &Scenario, aggs: &Aggs) -> Out {
    let all = groups(aggs);
    let held_out: Vec<Option<f64>> = all.iter().copied().filter(|g| *g != Some(FIG07_GROUP)).collect();
    let mut m = Vec::new();
    for g in if held_out.is_empty() { all } else { held_out } {
        let c = delay_curve(aggs, g);
        if c.len() < 4 {
            return Err("too few delays to locate the best one (run without --quick)".into());
        }
        let (bd, _) = best(&c).ok_or("no response times")?;
        m.push(Measure::new(format!("{}best delay", label(g)), bd, Some(91.0), " ms", Tolerance::Between(50.0, 150.0)));
    }
    need(m, "no groups")
}

/// Larger groups answer later (mean over the delays): the EM paces its requests, so this follows from the
/// configuration — a CONSEQUENCE in fig08's scenario.
fn larger_groups_later(_: &Scenario, aggs: &Aggs) -> Out {
    let gs = values(aggs, "group");
    if gs.len() < 2 {
        return Err("one group size only".into());
    }
    let delays = values(aggs, "delay");
    let mean = |g: f64| {
        let v: Vec<f64> = delays
            .iter()
            .filter_map(|&d| pick(aggs, &[("group", n(g)), ("delay", n(d))]).map(rt_s))
            .filter(|x| x.is_finite())
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    Ok(gs
        .windows(2)
        .map(|w| {
            Measure::new(
                format!("mean response time G={} / G={}", w[1], w[0]),
                mean(w[1]) / mean(w[0]),
                None,
                "×",
                Tolerance::Above(1.0),
            )
        })
        .collect())
}

/// §5.2.1: member reliability 100 % for every group below 40 members (≥ 99.9 %: one miss in a thousand
/// is within), and between 99.8 and 99.9 % — never 100 % — for 40 (99.5-99.95 %).
fn reliability_by_group_size(_: &Scenario, aggs: &Aggs) -> Out {
    let mut m = Vec::new();
    for g in values(aggs, "group") {
        let v: Vec<f64> = aggs
            .iter()
            .filter(|(p, _)| crate::findings::num(p, "group") == Some(g))
            .map(|(_, a)| a.member_reliability)
            .filter(|x| x.is_finite())
            .collect();
        if v.is_empty() {
            continue;
        }
        let r = v.iter().sum::<f64>() / v.len() as f64;
        let (paper, tol) =
            if g < 40.0 { (100.0, Tolerance::AtLeast(99.9)) } else { (99.85, Tolerance::Between(99.5, 99.95)) };
        m.push(Measure::new(format!("G={g} member reliability"), r, Some(paper), " %", tol));
    }
    need(m, "no group sizes")
}

fn max_wifi(aggs: &Aggs) -> Result<f64, Inconclusive> {
    values(aggs, "wifi_mbps")
        .last()
        .copied()
        .filter(|w| *w > 0.0)
        .ok_or_else(|| "needs points under interference".into())
}

fn at<'a>(aggs: &'a Aggs<'a>, mode: &str, g: f64, w: f64) -> Option<&'a crate::results::Aggregate> {
    pick(aggs, &[("mode", t(mode)), ("group", n(g)), ("wifi_mbps", n(w))])
}

/// The calibration target of the `testbed` set (docs/lab.md step 2): FITTED by construction.
fn fig10_fitted(_: &Scenario, aggs: &Aggs) -> Out {
    let w = max_wifi(aggs)?;
    let mut m = Vec::new();
    if let Some(a) = at(aggs, "multicast", 30.0, w) {
        m.push(Measure::new(
            "G=30 multicast member reliability",
            a.member_reliability,
            Some(94.6),
            " %",
            Tolerance::Absolute(1.5),
        ));
    }
    if let Some(a) = at(aggs, "unicast", 30.0, w) {
        m.push(Measure::new(
            "G=30 unicast member reliability",
            a.member_reliability,
            Some(99.5),
            " %",
            Tolerance::AtLeast(99.0),
        ));
    }
    need(m, "needs 30 members at the highest load")
}

/// What interference does to the multicast members of `g` at load `w`: the member reliability lost against
/// 0 Mb/s, at least one point (Fig. 10: multicast falls "as soon as there is a packet loss due to the Wi-Fi
/// interference"). The claims that something *stays* under interference carry it too, so that they hold
/// only where the interference does cost packets — with the Wi-Fi switched off they must not.
fn multicast_loss(aggs: &Aggs, g: f64, w: f64) -> Option<Measure> {
    let (a, b) = (at(aggs, "multicast", g, 0.0)?, at(aggs, "multicast", g, w)?);
    Some(Measure::new(
        format!("G={g} multicast member reliability lost at {w} Mb/s"),
        a.member_reliability - b.member_reliability,
        None,
        " points",
        Tolerance::AtLeast(1.0),
    ))
}

/// Fig. 10 text: unicast members at 28.5 Mb/s: 100 % (10), 99.9 % (20); within half a point — while the
/// same load costs the multicast members of that group at least a point ([`multicast_loss`]: unicast's
/// retransmissions repair what interference takes).
fn unicast_member_max_load(_: &Scenario, aggs: &Aggs) -> Out {
    let w = max_wifi(aggs)?;
    let mut m = Vec::new();
    for (g, paper) in [(10.0, 100.0), (20.0, 99.9)] {
        if let Some(a) = at(aggs, "unicast", g, w) {
            m.push(Measure::new(
                format!("G={g} unicast member reliability"),
                a.member_reliability,
                Some(paper),
                " %",
                Tolerance::Absolute(0.5),
            ));
            m.extend(multicast_loss(aggs, g, w));
        }
    }
    need(m, "needs unicast 10 and 20 members at the highest load")
}

/// Fig. 11 text: unicast groups 100 % (10, 20) and 98 % (30) at 28.5 Mb/s — while the same load costs the
/// multicast members of that group at least a point ([`multicast_loss`]).
fn unicast_group_max_load(_: &Scenario, aggs: &Aggs) -> Out {
    let w = max_wifi(aggs)?;
    let mut m = Vec::new();
    for (g, paper, tol) in [
        (10.0, 100.0, Tolerance::AtLeast(98.0)),
        (20.0, 100.0, Tolerance::AtLeast(98.0)),
        (30.0, 98.0, Tolerance::Absolute(4.0)),
    ] {
        if let Some(a) = at(aggs, "unicast", g, w) {
            m.push(Measure::new(
                format!("G={g} unicast group reliability"),
                a.group_reliability,
                Some(paper),
                " %",
                tol,
            ));
            m.extend(multicast_loss(aggs, g, w));
        }
    }
    need(m, "needs unicast groups at the highest load")
}

/// Fig. 11 text: "already at 15 Mb/s the reliability of 20- and 30-member groups drops to about 80 %"
/// (within 15 points).
fn multicast_group_15mbps(_: &Scenario, aggs: &Aggs) -> Out {
    let m = [20.0, 30.0]
        .iter()
        .filter_map(|&g| {
            at(aggs, "multicast", g, 15.0).map(|a| {
                Measure::new(
                    format!("G={g} multicast group reliability at 15 Mb/s"),
                    a.group_reliability,
                    Some(80.0),
                    " %",
                    Tolerance::Absolute(15.0),
                )
            })
        })
        .collect();
    need(m, "needs multicast 20 and 30 members at 15 Mb/s")
}

/// Fig. 10: multicast member reliability falls "as soon as there is a packet loss due to the Wi-Fi
/// interference": at least one point lower at the highest load than without it, for every group.
fn multicast_falls_with_load(_: &Scenario, aggs: &Aggs) -> Out {
    let w = max_wifi(aggs)?;
    let m = values(aggs, "group").into_iter().filter_map(|g| multicast_loss(aggs, g, w)).collect();
    need(m, "needs multicast at 0 Mb/s and under interference")
}

fn delay_of(s: &Scenario) -> Option<f64> {
    s.entity.delay.as_integer().map(|d| d as f64)
}

/// Fig. 12: with no loss unicast takes just above G × delay (between 0.9× and the sum + 1 s): the EM's
/// pacing, a CONSEQUENCE.
fn unicast_rt_sum_of_delays(s: &Scenario, aggs: &Aggs) -> Out {
    let d = delay_of(s).ok_or("entity.delay is not a number")? / 1000.0;
    let m = values(aggs, "group")
        .into_iter()
        .filter_map(|g| {
            let a = at(aggs, "unicast", g, 0.0)?;
            let sum = g * d;
            Some(Measure::new(
                format!("G={g} unicast response time at 0 Mb/s"),
                rt_s(a),
                Some(sum),
                " s",
                Tolerance::Between(0.9 * sum, sum + 1.0),
            ))
        })
        .collect();
    need(m, "needs unicast at 0 Mb/s")
}

/// Mean response time of the queries every member answered, s: the EM answers at the last reply then,
/// which is what the paper reports for multicast ("the value until the last response was received").
fn rt_complete_s(a: &crate::results::Aggregate) -> f64 {
    a.rt_complete.map_or(f64::NAN, |s| s.mean / 1000.0)
}

/// Fig. 12 text: multicast "is always lower than 5 s" (the leisure), measured until the last reply:
/// every load's mean over complete queries at most the leisure.
fn multicast_rt_below_leisure(s: &Scenario, aggs: &Aggs) -> Out {
    let leisure = s.transmission.leisure_ms as f64 / 1000.0;
    let m = values(aggs, "group")
        .into_iter()
        .filter_map(|g| {
            let worst = values(aggs, "wifi_mbps")
                .iter()
                .filter_map(|&w| at(aggs, "multicast", g, w).map(rt_complete_s))
                .filter(|x| x.is_finite())
                .fold(f64::NAN, f64::max);
            worst.is_finite().then(|| {
                Measure::new(
                    format!("G={g} multicast response time until the last reply, slowest load"),
                    worst,
                    Some(leisure),
                    " s",
                    Tolerance::AtMost(leisure),
                )
            })
        })
        .collect();
    need(m, "needs multicast points")
}

/// Fig. 12 text: multicast response times "remain almost unchanged" as interference grows (within 15 %),
/// because "a packet is delivered on time or dropped": so the same load must drop packets
/// ([`multicast_loss`]); without loss, an unchanged time says nothing.
fn multicast_rt_flat(_: &Scenario, aggs: &Aggs) -> Out {
    let w = max_wifi(aggs)?;
    let mut m = Vec::new();
    for g in values(aggs, "group") {
        let (Some(a), Some(b)) = (at(aggs, "multicast", g, 0.0), at(aggs, "multicast", g, w)) else { continue };
        m.push(Measure::new(
            format!("G={g} multicast response time {w} Mb/s / 0 Mb/s"),
            rt_complete_s(b) / rt_complete_s(a),
            None,
            "×",
            Tolerance::Between(0.85, 1.15),
        ));
        m.extend(multicast_loss(aggs, g, w));
    }
    need(m, "needs multicast at 0 Mb/s and under interference")
}

/// Fig. 12 text: unicast response time increases with interference (≥ 1.2× at the highest load: beyond
/// the ±5 % the replicates differ by without interference).
fn unicast_rt_grows(_: &Scenario, aggs: &Aggs) -> Out {
    let w = max_wifi(aggs)?;
    let has_mode = aggs.iter().any(|(p, _)| p.get("mode").is_some());
    let m = groups(aggs)
        .into_iter()
        .filter_map(|g| {
            let get = |wifi: f64| {
                let mut want = vec![("wifi_mbps", n(wifi))];
                if let Some(g) = g {
                    want.push(("group", n(g)));
                }
                if has_mode {
                    want.push(("mode", t("unicast")));
                }
                pick(aggs, &want).map(rt_s)
            };
            let (a, b) = (get(0.0)?, get(w)?);
            Some(Measure::new(
                format!("{}unicast response time {w} Mb/s / 0 Mb/s", label(g)),
                b / a,
                None,
                "×",
                Tolerance::AtLeast(1.2),
            ))
        })
        .collect();
    need(m, "needs unicast points at 0 Mb/s and under interference")
}

/// Fig. 13: the nested 2 × 10 entity answers faster than one of 20 members (mean over the loads): the
/// halves are paced in parallel, a CONSEQUENCE of the configuration.
fn nested_faster(_: &Scenario, aggs: &Aggs) -> Out {
    let (mut sn, mut ss, mut k) = (0.0, 0.0, 0);
    for w in values(aggs, "wifi_mbps") {
        let a = pick(aggs, &[("layout", t("nested")), ("wifi_mbps", n(w))]).map(rt_s);
        let b = pick(aggs, &[("layout", t("single")), ("wifi_mbps", n(w))]).map(rt_s);
        if let (Some(a), Some(b)) = (a, b) {
            sn += a;
            ss += b;
            k += 1;
        }
    }
    if k == 0 {
        return Err("needs layout = nested and single points".into());
    }
    Ok(vec![Measure::new("mean response time nested / single", sn / ss, None, "×", Tolerance::Below(1.0))])
}

/// Fig. 14: the mean response time under interference with ACK_TIMEOUT `short` over `long`.
fn ack_ratio(aggs: &Aggs, short: f64, long: f64) -> Result<f64, Inconclusive> {
    let (mut sa, mut sb, mut k) = (0.0, 0.0, 0);
    for w in values(aggs, "wifi_mbps").into_iter().filter(|w| *w > 0.0) {
        let a = pick(aggs, &[("ack_timeout_ms", n(short)), ("wifi_mbps", n(w))]).map(rt_s);
        let b = pick(aggs, &[("ack_timeout_ms", n(long)), ("wifi_mbps", n(w))]).map(rt_s);
        if let (Some(a), Some(b)) = (a, b) {
            sa += a;
            sb += b;
            k += 1;
        }
    }
    if k == 0 {
        return Err(format!("needs ACK_TIMEOUT {short} and {long} ms under interference").into());
    }
    Ok(sa / sb)
}

fn ack_1_beats_2(_: &Scenario, aggs: &Aggs) -> Out {
    Ok(vec![Measure::new(
        "mean response time under interference, ACK_TIMEOUT 1 s / 2 s",
        ack_ratio(aggs, 1000.0, 2000.0)?,
        None,
        "×",
        Tolerance::AtMost(0.98),
    )])
}

fn ack_half_worse(_: &Scenario, aggs: &Aggs) -> Out {
    Ok(vec![Measure::new(
        "mean response time under interference, ACK_TIMEOUT 0.5 s / 1 s",
        ack_ratio(aggs, 500.0, 1000.0)?,
        None,
        "×",
        Tolerance::AtLeast(1.02),
    )])
}

#[cfg(test)]
mod tests {
    use crate::findings::testing::Synth;
    use crate::findings::{n, t};

    /// Fig. 7-like data: `at0`, `at50`, `at100` seconds and a curve around them.
    fn delays(at0: f64, at50: f64, at100: f64, best_at: f64) -> Synth {
        let mut s = Synth::new();
        for d in [0.0, 25.0, 50.0, 75.0, 100.0, 150.0, 200.0] {
            let rt = match d {
                0.0 => at0,
                50.0 => at50,
                100.0 => at100,
                _ if d == best_at => 0.2,
                _ => 1.0 + d / 200.0,
            };
            s.add(&[("group", n(5.0)), ("delay", n(d))], rt, 100.0, 100.0);
        }
        s
    }

    #[test]
    fn fig07_checks_can_fail() {
        assert_eq!(delays(3.0, 0.39, 0.55, -1.0).holds("fig07_shape"), Ok(true));
        assert_eq!(delays(2.0, 0.39, 0.55, -1.0).holds("fig07_shape"), Ok(false));
        assert_eq!(delays(3.0, 0.39, 0.55, -1.0).holds("no_delay_vs_best"), Ok(true));
        assert_eq!(delays(0.9, 0.39, 0.55, -1.0).holds("no_delay_vs_best"), Ok(false));
        assert_eq!(delays(3.0, 0.39, 0.55, -1.0).holds("best_delay_eq2"), Ok(true));
        assert_eq!(delays(3.0, 0.39, 0.55, 25.0).holds("best_delay_eq2"), Ok(false), "best at 25 ms");
        assert_eq!(delays(3.0, 0.39, 0.55, 200.0).holds("best_delay_eq2"), Ok(false), "best at 200 ms");
    }

    /// fig08's best-delay claim is judged without Fig. 7's 5 members, where the CPU was fitted: a run whose
    /// only good size is 5 must not agree, one whose other sizes are good must, whatever 5 does.
    #[test]
    fn best_delay_leaves_out_the_calibration_point() {
        let build = |best5: f64, best_rest: f64| {
            let mut s = Synth::new();
            for g in [5.0, 20.0] {
                let best_at = if g == 5.0 { best5 } else { best_rest };
                for d in [0.0, 25.0, 50.0, 75.0, 100.0, 150.0] {
                    s.add(&[("group", n(g)), ("delay", n(d))], if d == best_at { 0.2 } else { 1.0 }, 100.0, 100.0);
                }
            }
            s
        };
        assert_eq!(build(100.0, 25.0).holds("best_delay_eq2"), Ok(false), "only the fitted size is good");
        assert_eq!(build(25.0, 100.0).holds("best_delay_eq2"), Ok(true), "the held-out size is good");
    }

    #[test]
    fn group_size_checks_can_fail() {
        let build = |rts: [f64; 3], rel40: f64| {
            let mut s = Synth::new();
            for (g, rt) in [(10.0, rts[0]), (20.0, rts[1]), (40.0, rts[2])] {
                for d in [0.0, 100.0] {
                    s.add(&[("group", n(g)), ("delay", n(d))], rt, if g == 40.0 { rel40 } else { 100.0 }, 100.0);
                }
            }
            s
        };
        assert_eq!(build([1.0, 2.0, 4.0], 99.8).holds("larger_groups_later"), Ok(true));
        assert_eq!(build([1.0, 3.0, 2.0], 99.8).holds("larger_groups_later"), Ok(false));
        assert_eq!(build([1.0, 2.0, 4.0], 99.85).holds("reliability_by_group_size"), Ok(true));
        assert_eq!(build([1.0, 2.0, 4.0], 100.0).holds("reliability_by_group_size"), Ok(false), "never 100 % at 40");
        assert_eq!(build([1.0, 2.0, 4.0], 98.0).holds("reliability_by_group_size"), Ok(false));
    }

    /// Fig. 10-12-like data: per (mode, group, load) the member/group reliability and response time.
    fn interference(uni_member: f64, mc_group_15: f64, mc_rt_max: f64, uni_rt_max: f64) -> Synth {
        let mut s = Synth::new();
        for g in [10.0, 20.0, 30.0] {
            for w in [0.0, 15.0, 28.5] {
                let loaded = w > 0.0;
                let uni_rt = if w == 28.5 { uni_rt_max * g / 10.0 } else { g / 10.0 + 0.1 };
                s.add(
                    &[("mode", t("unicast")), ("group", n(g)), ("wifi_mbps", n(w))],
                    uni_rt,
                    if loaded { uni_member } else { 100.0 },
                    if g == 30.0 && w == 28.5 { 98.0 } else { 100.0 },
                );
                let mc_group = if w == 15.0 {
                    mc_group_15
                } else if loaded {
                    50.0
                } else {
                    95.0
                };
                let rt = if w == 28.5 { mc_rt_max } else { 4.5 };
                s.add(
                    &[("mode", t("multicast")), ("group", n(g)), ("wifi_mbps", n(w))],
                    rt,
                    if loaded { 94.6 } else { 99.5 },
                    mc_group,
                );
            }
        }
        s
    }

    #[test]
    fn interference_checks_can_fail() {
        let good = interference(100.0, 80.0, 4.7, 1.5);
        for c in [
            "unicast_member_max_load",
            "unicast_group_max_load",
            "multicast_group_15mbps",
            "multicast_falls_with_load",
            "unicast_rt_sum_of_delays",
            "multicast_rt_below_leisure",
            "multicast_rt_flat",
            "unicast_rt_grows",
            "fig10_fitted",
        ] {
            assert_eq!(good.holds(c), Ok(true), "{c}");
        }
        assert_eq!(interference(98.0, 80.0, 4.7, 1.5).holds("unicast_member_max_load"), Ok(false));
        assert_eq!(interference(100.0, 40.0, 4.7, 1.5).holds("multicast_group_15mbps"), Ok(false));
        assert_eq!(interference(100.0, 80.0, 6.1, 1.5).holds("multicast_rt_below_leisure"), Ok(false));
        assert_eq!(interference(100.0, 80.0, 6.1, 1.5).holds("multicast_rt_flat"), Ok(false));
        assert_eq!(interference(100.0, 80.0, 4.7, 1.05).holds("unicast_rt_grows"), Ok(false));
        let mut flat = interference(100.0, 80.0, 4.7, 1.5);
        for (p, a) in flat.points.iter().zip(flat.aggs.iter_mut()) {
            if p.get("mode") == Some(&t("multicast")) {
                a.member_reliability = 99.0;
            }
        }
        assert_eq!(flat.holds("multicast_falls_with_load"), Ok(false), "no loss with load");
        // Without packets lost to the interference, what "stays" under it is no evidence.
        for c in ["unicast_member_max_load", "unicast_group_max_load", "multicast_rt_flat"] {
            assert_eq!(flat.holds(c), Ok(false), "{c} with interference that costs nothing");
        }
    }

    #[test]
    fn nested_and_ack_timeout_checks_can_fail() {
        let mut s = Synth::new();
        for w in [0.0, 10.0] {
            s.add(&[("layout", t("nested")), ("wifi_mbps", n(w))], 1.5, 100.0, 100.0);
            s.add(&[("layout", t("single")), ("wifi_mbps", n(w))], 2.1, 100.0, 100.0);
        }
        assert_eq!(s.holds("nested_faster"), Ok(true));
        let mut s2 = Synth::new();
        for w in [0.0, 10.0] {
            s2.add(&[("layout", t("nested")), ("wifi_mbps", n(w))], 2.5, 100.0, 100.0);
            s2.add(&[("layout", t("single")), ("wifi_mbps", n(w))], 2.1, 100.0, 100.0);
        }
        assert_eq!(s2.holds("nested_faster"), Ok(false));
        let ack = |half: f64, one: f64, two: f64| {
            let mut s = Synth::new();
            for w in [5.0, 20.0] {
                for (a, rt) in [(500.0, half), (1000.0, one), (2000.0, two)] {
                    s.add(&[("ack_timeout_ms", n(a)), ("wifi_mbps", n(w))], rt, 100.0, 100.0);
                }
            }
            s
        };
        assert_eq!(ack(1.3, 1.1, 1.3).holds("ack_timeout_1s_beats_2s"), Ok(true));
        assert_eq!(ack(1.3, 1.3, 1.1).holds("ack_timeout_1s_beats_2s"), Ok(false));
        assert_eq!(ack(1.3, 1.1, 1.3).holds("ack_timeout_half_worse"), Ok(true));
        assert_eq!(ack(1.0, 1.1, 1.3).holds("ack_timeout_half_worse"), Ok(false));
    }
}
