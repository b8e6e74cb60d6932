//! The paper's findings, checked against a run's aggregates. A scenario names the checks it wants
//! (`[[finding]] check = "…"`) with the paper's words; each check here computes corral's numbers from the
//! data — nothing is hard-coded but the criterion — and says AGREES or DISAGREES, or INCONCLUSIVE when the
//! run lacks the points it needs (e.g. a `--quick` run without the middle delays).
//!
//! Criteria, in words, are part of each check's `corral` text so a reader can judge them.

use crate::results::Aggregate;
use crate::scenario::{AxisValue, Point, Scenario};

/// The checks a scenario may name.
pub const CHECKS: &[&str] = &[
    "no_delay_vs_best",
    "best_delay_eq2",
    "larger_groups_later",
    "unicast_reliable_multicast_not",
    "unicast_rt_sum_of_delays",
    "multicast_rt_near_leisure",
    "unicast_rt_grows",
    "nested_faster",
    "ack_timeout_1s_beats_2s",
    "ack_timeout_half_worse",
    "office_reliability",
    "office_response_time",
    "leisure_lower_bound",
    "auto_delay_near_best",
    "observe_vs_poll",
    "repair_best_of_both",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Agrees,
    Disagrees,
    Inconclusive,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Agrees => "AGREES",
            Verdict::Disagrees => "DISAGREES",
            Verdict::Inconclusive => "INCONCLUSIVE",
        }
    }

    fn of(ok: bool) -> Verdict {
        if ok {
            Verdict::Agrees
        } else {
            Verdict::Disagrees
        }
    }
}

/// One checked finding.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub check: String,
    pub figure: String,
    pub title: String,
    pub paper: String,
    /// corral's numbers and the criterion.
    pub corral: String,
    pub verdict: Verdict,
    pub explain: String,
}

type Aggs<'a> = [(&'a Point, Aggregate)];

fn rt_s(a: &Aggregate) -> f64 {
    a.rt.map_or(f64::NAN, |s| s.mean / 1000.0)
}

fn num(p: &Point, axis: &str) -> Option<f64> {
    p.get(axis).and_then(AxisValue::num)
}

fn text(p: &Point, axis: &str) -> Option<String> {
    p.get(axis).map(|v| v.to_string())
}

/// Distinct values of a numeric axis, sorted.
fn values(aggs: &Aggs, axis: &str) -> Vec<f64> {
    let mut v: Vec<f64> = aggs.iter().filter_map(|(p, _)| num(p, axis)).collect();
    v.sort_by(f64::total_cmp);
    v.dedup();
    v
}

fn pick<'a>(aggs: &'a Aggs<'a>, want: &[(&str, AxisValue)]) -> Option<&'a Aggregate> {
    aggs.iter().find(|(p, _)| want.iter().all(|(a, v)| p.get(a) == Some(v))).map(|(_, a)| a)
}

fn n(x: f64) -> AxisValue {
    AxisValue::Num(x)
}

fn t(s: &str) -> AxisValue {
    AxisValue::Text(s.into())
}

fn s3(x: f64) -> String {
    format!("{x:.2} s")
}

/// Evaluates every finding the scenario names.
pub fn evaluate(s: &Scenario, aggs: &Aggs) -> Vec<Finding> {
    s.findings
        .iter()
        .map(|spec| {
            let (title, result) = check(&spec.check, s, aggs);
            let (verdict, corral) = result.unwrap_or_else(|why| (Verdict::Inconclusive, why));
            Finding {
                check: spec.check.clone(),
                figure: spec.figure.clone(),
                title: title.to_string(),
                paper: spec.paper.clone(),
                corral,
                verdict,
                explain: spec.explain.clone(),
            }
        })
        .collect()
}

type Outcome = Result<(Verdict, String), String>;

/// A check's outcome from its per-group texts: inconclusive with `missing` when the run had no points to
/// compare, else the verdict and the texts followed by the criterion in words.
fn joined(ok: bool, parts: &[String], criterion: &str, missing: &str) -> Outcome {
    if parts.is_empty() {
        return Err(missing.into());
    }
    Ok((Verdict::of(ok), format!("{} ({criterion})", parts.join("; "))))
}

fn check(name: &str, s: &Scenario, aggs: &Aggs) -> (&'static str, Outcome) {
    match name {
        "no_delay_vs_best" => {
            ("no delay between requests is several times slower than the best delay", no_delay_vs_best(aggs))
        }
        "best_delay_eq2" => ("the best delay lies near Eq. (2)'s 82-100 ms", best_delay_eq2(aggs)),
        "larger_groups_later" => ("larger groups answer later", larger_groups_later(aggs)),
        "unicast_reliable_multicast_not" => (
            "unicast member reliability stays near 100 % where multicast group reliability falls far",
            unicast_reliable_multicast_not(aggs),
        ),
        "unicast_rt_sum_of_delays" => (
            "without interference, unicast response time is just above the sum of the delays",
            unicast_rt_sum_of_delays(s, aggs),
        ),
        "multicast_rt_near_leisure" => {
            ("multicast response time stays near the leisure", multicast_rt_near_leisure(s, aggs))
        }
        "unicast_rt_grows" => ("unicast response time grows with interference", unicast_rt_grows(aggs)),
        "nested_faster" => {
            ("two 10-member groups on two channels answer faster than one 20-member group", nested_faster(aggs))
        }
        "ack_timeout_1s_beats_2s" => {
            ("ACK_TIMEOUT 1 s beats 2 s under interference", ack_timeout(aggs, 1000.0, 2000.0, true))
        }
        "ack_timeout_half_worse" => {
            ("ACK_TIMEOUT 0.5 s is worse than 1 s under interference", ack_timeout(aggs, 500.0, 1000.0, false))
        }
        "office_reliability" => {
            ("office floor: unicast stays reliable, multicast loses members and whole groups", office_reliability(aggs))
        }
        "office_response_time" => {
            ("office floor: busier hours slow unicast a lot, multicast hardly", office_response_time(aggs))
        }
        "leisure_lower_bound" => ("leisure at Eq. (1)'s lower bound instead of 5 s", leisure_lower_bound(s, aggs)),
        "auto_delay_near_best" => {
            ("delay=auto (Eq. (2)) is as good as the best fixed delay", auto_delay_near_best(aggs))
        }
        "observe_vs_poll" => {
            ("observing an entity is never beaten by polling it on both cost and freshness", observe_vs_poll(aggs))
        }
        "repair_best_of_both" => (
            "multicast with unicast repair keeps unicast's reliability with fewer frames than unicast",
            repair_best_of_both(aggs),
        ),
        _ => ("unknown check", Err(format!("no check named {name}"))),
    }
}

/// The 5-member group (or the smallest in the run).
fn smallest_group(aggs: &Aggs) -> Option<f64> {
    values(aggs, "group").first().copied()
}

fn delay_curve(aggs: &Aggs, group: Option<f64>) -> Vec<(f64, f64)> {
    let mut c: Vec<(f64, f64)> = aggs
        .iter()
        .filter(|(p, _)| group.is_none_or(|g| num(p, "group") == Some(g)))
        .filter_map(|(p, a)| Some((num(p, "delay")?, rt_s(a))))
        .filter(|(_, y)| y.is_finite())
        .collect();
    c.sort_by(|a, b| a.0.total_cmp(&b.0));
    c
}

fn best(c: &[(f64, f64)]) -> Option<(f64, f64)> {
    c.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1))
}

fn no_delay_vs_best(aggs: &Aggs) -> Outcome {
    let g = smallest_group(aggs);
    let c = delay_curve(aggs, g);
    let zero = c.iter().find(|(d, _)| *d == 0.0).ok_or("the run has no delay = 0 point")?.1;
    let (bd, bt) = best(&c).ok_or("no response times")?;
    if bd == 0.0 || c.len() < 3 {
        return Ok((Verdict::of(false), format!("the best delay is 0 ms ({})", s3(zero))));
    }
    let ratio = zero / bt;
    let who = g.map(|g| format!("{g}-member entity: ")).unwrap_or_default();
    Ok((
        Verdict::of(ratio >= 3.0),
        format!("{who}no delay {}, best {} at {bd} ms: {ratio:.1}× (criterion: at least 3×)", s3(zero), s3(bt)),
    ))
}

fn best_delay_eq2(aggs: &Aggs) -> Outcome {
    let groups = values(aggs, "group");
    let groups: Vec<Option<f64>> = if groups.is_empty() { vec![None] } else { groups.into_iter().map(Some).collect() };
    let mut parts = Vec::new();
    let mut ok = true;
    for g in groups {
        let c = delay_curve(aggs, g);
        if c.len() < 4 {
            return Err("too few delays in this run to locate the best one (run without --quick)".into());
        }
        let (bd, bt) = best(&c).ok_or("no response times")?;
        let at100 = c.iter().find(|(d, _)| *d == 100.0).map(|x| x.1);
        ok &= (50.0..=150.0).contains(&bd);
        let label = g.map(|g| format!("G={g}: ")).unwrap_or_default();
        parts.push(match at100 {
            Some(r) => format!("{label}best {bd} ms ({}), 100 ms {}", s3(bt), s3(r)),
            None => format!("{label}best {bd} ms ({})", s3(bt)),
        });
    }
    Ok((
        Verdict::of(ok),
        format!("{} (criterion: best delay within 50-150 ms, i.e. one sweep step of 82-100 ms)", parts.join("; ")),
    ))
}

fn larger_groups_later(aggs: &Aggs) -> Outcome {
    let groups = values(aggs, "group");
    if groups.len() < 2 {
        return Err("one group size only".into());
    }
    let delays = values(aggs, "delay");
    let mut means = Vec::new();
    for &g in &groups {
        let v: Vec<f64> = delays
            .iter()
            .filter_map(|&d| pick(aggs, &[("group", n(g)), ("delay", n(d))]).map(rt_s))
            .filter(|x| x.is_finite())
            .collect();
        means.push((g, v.iter().sum::<f64>() / v.len().max(1) as f64));
    }
    let monotone = means.windows(2).all(|w| w[1].1 > w[0].1);
    // Per delay: how many adjacent group pairs answer later.
    let mut ordered = 0;
    let mut pairs = 0;
    for &d in &delays {
        for w in groups.windows(2) {
            let a = pick(aggs, &[("group", n(w[0])), ("delay", n(d))]).map(rt_s);
            let b = pick(aggs, &[("group", n(w[1])), ("delay", n(d))]).map(rt_s);
            if let (Some(a), Some(b)) = (a, b) {
                pairs += 1;
                ordered += usize::from(b > a);
            }
        }
    }
    let list = means.iter().map(|(g, m)| format!("G={g}: {}", s3(*m))).collect::<Vec<_>>().join(", ");
    Ok((
        Verdict::of(monotone),
        format!("mean over delays {list}; larger group slower in {ordered} of {pairs} (delay, neighbouring size) pairs (criterion: the mean grows with the group)"),
    ))
}

fn max_wifi(aggs: &Aggs) -> Option<f64> {
    values(aggs, "wifi_mbps").last().copied()
}

fn unicast_reliable_multicast_not(aggs: &Aggs) -> Outcome {
    let w = max_wifi(aggs).ok_or("no wifi_mbps axis")?;
    if w <= 0.0 {
        return Err("no interference in this run".into());
    }
    let groups = values(aggs, "group");
    let mut parts = Vec::new();
    let mut uni_ok = true;
    let mut worst_mc_group: f64 = 100.0;
    for &g in &groups {
        let u = pick(aggs, &[("mode", t("unicast")), ("group", n(g)), ("wifi_mbps", n(w))]);
        let m = pick(aggs, &[("mode", t("multicast")), ("group", n(g)), ("wifi_mbps", n(w))]);
        let (Some(u), Some(m)) = (u, m) else { continue };
        uni_ok &= u.member_reliability >= 99.0;
        worst_mc_group = worst_mc_group.min(m.group_reliability);
        parts.push(format!(
            "G={g}: unicast member {:.1} % / group {:.0} %, multicast member {:.1} % / group {:.0} %",
            u.member_reliability, u.group_reliability, m.member_reliability, m.group_reliability
        ));
    }
    if parts.is_empty() {
        return Err("needs unicast and multicast points".into());
    }
    Ok((
        Verdict::of(uni_ok && worst_mc_group <= 80.0),
        format!(
            "at {w} Mb/s: {} (criterion: unicast member ≥ 99 % for every group, multicast group ≤ 80 % for some group)",
            parts.join("; ")
        ),
    ))
}

fn delay_of(s: &Scenario) -> Option<f64> {
    s.entity.delay.as_integer().map(|d| d as f64)
}

fn unicast_rt_sum_of_delays(s: &Scenario, aggs: &Aggs) -> Outcome {
    let d = delay_of(s).ok_or("entity.delay is not a number")? / 1000.0;
    let mut parts = Vec::new();
    let mut ok = true;
    for g in values(aggs, "group") {
        let Some(a) = pick(aggs, &[("mode", t("unicast")), ("group", n(g)), ("wifi_mbps", n(0.0))]) else { continue };
        let rt = rt_s(a);
        let sum = g * d;
        ok &= rt >= sum * 0.9 && rt <= sum + 1.0;
        parts.push(format!("G={g}: {} vs {}", s3(rt), s3(sum)));
    }
    joined(ok, &parts, "criterion: between 0.9× and the sum + 1 s", "needs unicast points at 0 Mb/s")
}

fn multicast_rt_near_leisure(s: &Scenario, aggs: &Aggs) -> Outcome {
    let leisure = s.transmission.leisure_ms as f64 / 1000.0;
    let rts: Vec<(f64, f64, f64)> = aggs
        .iter()
        .filter(|(p, _)| text(p, "mode").as_deref() == Some("multicast"))
        .filter_map(|(p, a)| Some((num(p, "group")?, num(p, "wifi_mbps")?, rt_s(a))))
        .collect();
    if rts.is_empty() {
        return Err("no multicast points".into());
    }
    let lo = rts.iter().map(|x| x.2).fold(f64::INFINITY, f64::min);
    let hi = rts.iter().map(|x| x.2).fold(0.0, f64::max);
    let ok = lo >= 0.6 * leisure && hi <= leisure + 1.5;
    Ok((
        Verdict::of(ok),
        format!("multicast mean response time between {} and {} over all groups and loads; leisure {} (criterion: within 0.6× leisure and leisure + 1.5 s)", s3(lo), s3(hi), s3(leisure)),
    ))
}

fn unicast_rt_grows(aggs: &Aggs) -> Outcome {
    let w = max_wifi(aggs).ok_or("no wifi_mbps axis")?;
    let mut parts = Vec::new();
    let mut ok = true;
    let series: Vec<Vec<(&str, AxisValue)>> = if values(aggs, "group").is_empty() {
        vec![vec![]]
    } else {
        values(aggs, "group").into_iter().map(|g| vec![("group", n(g))]).collect()
    };
    for base in series {
        let at = |wifi: f64| {
            let mut want = base.clone();
            want.push(("wifi_mbps", n(wifi)));
            if aggs.iter().any(|(p, _)| p.get("mode").is_some()) {
                want.push(("mode", t("unicast")));
            }
            pick(aggs, &want).map(rt_s)
        };
        let (Some(a), Some(b)) = (at(0.0), at(w)) else { continue };
        ok &= b >= 1.2 * a;
        let label = base.first().map(|(_, v)| format!("G={v}: ")).unwrap_or_default();
        parts.push(format!("{label}{} at 0 → {} at {w} Mb/s", s3(a), s3(b)));
    }
    joined(
        ok,
        &parts,
        "criterion: at least 1.2× at the highest load",
        "needs unicast points at 0 Mb/s and under interference",
    )
}

fn nested_faster(aggs: &Aggs) -> Outcome {
    let ws = values(aggs, "wifi_mbps");
    let mut faster = 0;
    let mut total = 0;
    let (mut sn, mut ss) = (0.0, 0.0);
    for &w in &ws {
        let a = pick(aggs, &[("layout", t("nested")), ("wifi_mbps", n(w))]).map(rt_s);
        let b = pick(aggs, &[("layout", t("single")), ("wifi_mbps", n(w))]).map(rt_s);
        if let (Some(a), Some(b)) = (a, b) {
            total += 1;
            faster += usize::from(a < b);
            sn += a;
            ss += b;
        }
    }
    if total == 0 {
        return Err("needs layout = nested and single points".into());
    }
    let (sn, ss) = (sn / total as f64, ss / total as f64);
    Ok((
        Verdict::of(sn < ss && faster * 4 >= total * 3),
        format!("nested faster at {faster} of {total} loads; mean {} nested vs {} single (criterion: faster on average and at ≥ 3/4 of the loads)", s3(sn), s3(ss)),
    ))
}

fn ack_timeout(aggs: &Aggs, short: f64, long: f64, expect_short_better: bool) -> Outcome {
    let ws: Vec<f64> = values(aggs, "wifi_mbps").into_iter().filter(|w| *w > 0.0).collect();
    let mut sa = 0.0;
    let mut sb = 0.0;
    let mut k = 0;
    for &w in &ws {
        let a = pick(aggs, &[("ack_timeout_ms", n(short)), ("wifi_mbps", n(w))]).map(rt_s);
        let b = pick(aggs, &[("ack_timeout_ms", n(long)), ("wifi_mbps", n(w))]).map(rt_s);
        if let (Some(a), Some(b)) = (a, b) {
            sa += a;
            sb += b;
            k += 1;
        }
    }
    if k == 0 {
        return Err(format!("needs ACK_TIMEOUT {short} and {long} ms under interference"));
    }
    let (sa, sb) = (sa / k as f64, sb / k as f64);
    let ok = if expect_short_better { sa < sb } else { sa > sb };
    Ok((
        Verdict::of(ok),
        format!(
            "mean response time under interference: ACK_TIMEOUT {} s {}, {} s {} (criterion: {} is lower)",
            short / 1000.0,
            s3(sa),
            long / 1000.0,
            s3(sb),
            if expect_short_better { format!("{} s", short / 1000.0) } else { format!("{} s", long / 1000.0) }
        ),
    ))
}

fn office(aggs: &Aggs, mode: &str, usage: &str) -> Option<Aggregate> {
    pick(aggs, &[("mode", t(mode)), ("usage", t(usage))]).cloned()
}

fn office_reliability(aggs: &Aggs) -> Outcome {
    let (Some(ul), Some(un), Some(ml), Some(mn)) = (
        office(aggs, "unicast", "low"),
        office(aggs, "unicast", "normal"),
        office(aggs, "multicast", "low"),
        office(aggs, "multicast", "normal"),
    ) else {
        return Err("needs unicast and multicast under low and normal usage".into());
    };
    let ok = ul.member_reliability >= 99.0
        && un.member_reliability >= 99.0
        && ml.group_reliability < ul.group_reliability
        && mn.group_reliability < un.group_reliability
        && mn.group_reliability <= 80.0;
    Ok((
        Verdict::of(ok),
        format!(
            "member/group reliability: unicast low {:.1}/{:.0} %, normal {:.1}/{:.0} %; multicast low {:.1}/{:.0} %, normal {:.1}/{:.0} % (criterion: unicast members ≥ 99 %, multicast groups below unicast and ≤ 80 % under normal usage)",
            ul.member_reliability, ul.group_reliability, un.member_reliability, un.group_reliability,
            ml.member_reliability, ml.group_reliability, mn.member_reliability, mn.group_reliability
        ),
    ))
}

fn office_response_time(aggs: &Aggs) -> Outcome {
    let (Some(ul), Some(un), Some(ml), Some(mn)) = (
        office(aggs, "unicast", "low"),
        office(aggs, "unicast", "normal"),
        office(aggs, "multicast", "low"),
        office(aggs, "multicast", "normal"),
    ) else {
        return Err("needs unicast and multicast under low and normal usage".into());
    };
    let five = |a: &Aggregate| {
        a.rt.map_or("-".into(), |s| format!("{:.2}/{:.2}/{:.2}", s.min / 1000.0, s.mean / 1000.0, s.max / 1000.0))
    };
    let (u1, u2, m1, m2) = (rt_s(&ul), rt_s(&un), rt_s(&ml), rt_s(&mn));
    let ok = u2 >= 2.0 * u1 && (m2 - m1).abs() <= 0.2 * m1;
    Ok((
        Verdict::of(ok),
        format!(
            "min/mean/max s: unicast low {}, normal {}; multicast low {}, normal {} (criterion: unicast mean at least doubles, multicast mean within 20 %)",
            five(&ul), five(&un), five(&ml), five(&mn)
        ),
    ))
}

fn leisure_lower_bound(s: &Scenario, aggs: &Aggs) -> Outcome {
    // Eq. (1): S·G/R with S = 80 B, R = 1 kB/s, against the 5 s default of CoAP and seed 000.
    let _ = s;
    let leisures = values(aggs, "leisure_ms");
    let mut parts = Vec::new();
    let mut holds = true;
    for g in values(aggs, "group") {
        let bound = 80.0 * g; // ms
        let at_default = pick(aggs, &[("group", n(g)), ("leisure_ms", n(5000.0))]);
        let near = leisures.iter().copied().filter(|l| *l >= bound).fold(f64::INFINITY, f64::min);
        let at_bound = pick(aggs, &[("group", n(g)), ("leisure_ms", n(near))]);
        let (Some(a), Some(b)) = (at_default, at_bound) else { continue };
        holds &= b.member_reliability >= a.member_reliability - 5.0 && rt_s(b) < rt_s(a);
        parts.push(format!(
            "G={g} (bound {:.1} s): leisure {} s → member {:.1} % / group {:.0} %, {}; 5 s → member {:.1} % / group {:.0} %, {}",
            bound / 1000.0,
            near / 1000.0,
            b.member_reliability,
            b.group_reliability,
            s3(rt_s(b)),
            a.member_reliability,
            a.group_reliability,
            s3(rt_s(a))
        ));
    }
    joined(
        holds,
        &parts,
        "hypothesis: at the bound, response time drops and member reliability stays within 5 points of the 5 s default",
        "needs leisure_ms points at 5000 and at or above each group's bound",
    )
}

fn auto_delay_near_best(aggs: &Aggs) -> Outcome {
    let mut parts = Vec::new();
    let mut ok = true;
    for g in values(aggs, "group") {
        let auto = pick(aggs, &[("group", n(g)), ("delay", t("auto"))]).map(rt_s);
        let fixed = delay_curve(aggs, Some(g));
        let (Some(auto), Some((bd, bt))) = (auto, best(&fixed)) else { continue };
        ok &= auto <= bt * 1.15;
        parts.push(format!("G={g}: auto {} vs best fixed {} at {bd} ms", s3(auto), s3(bt)));
    }
    joined(
        ok,
        &parts,
        "hypothesis: auto within 15 % of the best fixed delay",
        "needs delay = \"auto\" and fixed delays",
    )
}

/// For each group: observing against every polling period. No period may be both at least as fresh and
/// at most as costly (frames per hour) as observing; the report names the cheapest period that is at least
/// as fresh, and how many times observing's frames it costs.
fn observe_vs_poll(aggs: &Aggs) -> Outcome {
    let mut parts = Vec::new();
    let mut ok = true;
    for g in values(aggs, "group") {
        let Some(obs) = pick(aggs, &[("group", n(g)), ("follow", t("observe"))]) else { continue };
        let (fo, so) = (obs.frames_per_hour, obs.staleness);
        let mut polls: Vec<(f64, &Aggregate)> = aggs
            .iter()
            .filter(|(p, _)| num(p, "group") == Some(g))
            .filter_map(|(p, a)| Some((num(p, "follow")?, a)))
            .filter(|(_, a)| a.staleness.is_finite() && a.frames_per_hour.is_finite())
            .collect();
        if polls.is_empty() || !so.is_finite() {
            continue;
        }
        polls.sort_by(|a, b| a.0.total_cmp(&b.0));
        ok &= !polls.iter().any(|(_, a)| a.staleness <= so && a.frames_per_hour <= fo);
        let fresh = polls
            .iter()
            .filter(|(_, a)| a.staleness <= so)
            .min_by(|a, b| a.1.frames_per_hour.total_cmp(&b.1.frames_per_hour));
        let cheaper = match fresh {
            Some((period, a)) => format!(
                "as fresh from polling every {period} s ({:.0} frames/h, {:.1}×)",
                a.frames_per_hour,
                a.frames_per_hour / fo
            ),
            None => "no polling period as fresh".into(),
        };
        let list: Vec<String> =
            polls.iter().map(|(p, a)| format!("{p} s {:.0}/h {:.3}", a.frames_per_hour, a.staleness)).collect();
        parts.push(format!("G={g}: observe {fo:.0} frames/h, staleness {so:.3}; poll {}; {cheaper}", list.join(", ")));
    }
    joined(
        ok,
        &parts,
        "hypothesis: no polling period is both as fresh and as cheap as observing",
        "needs follow = \"observe\" and polling periods for a group",
    )
}

/// At every group size and load: `multicast+repair` reaches unicast's member reliability (within half a
/// point) with fewer frames per query than unicast. The text gives, per group at the highest load, the
/// three modes' reliability, frames and response time.
fn repair_best_of_both(aggs: &Aggs) -> Outcome {
    let mut ok = true;
    let mut compared = 0;
    let mut parts = Vec::new();
    let loads = values(aggs, "wifi_mbps");
    for g in values(aggs, "group") {
        for &w in &loads {
            let at = |mode: &str| pick(aggs, &[("mode", t(mode)), ("group", n(g)), ("wifi_mbps", n(w))]);
            let (Some(u), Some(m), Some(r)) = (at("unicast"), at("multicast"), at("multicast+repair")) else {
                continue;
            };
            compared += 1;
            ok &= r.member_reliability >= u.member_reliability - 0.5 && r.frames_per_query < u.frames_per_query;
            if Some(&w) == loads.last() {
                parts.push(format!(
                    "G={g} at {w} Mb/s: members {:.1}/{:.1}/{:.1} %, groups {:.0}/{:.0}/{:.0} %, frames {:.0}/{:.0}/{:.0}, {}/{}/{}",
                    u.member_reliability,
                    m.member_reliability,
                    r.member_reliability,
                    u.group_reliability,
                    m.group_reliability,
                    r.group_reliability,
                    u.frames_per_query,
                    m.frames_per_query,
                    r.frames_per_query,
                    s3(rt_s(u)),
                    s3(rt_s(m)),
                    s3(rt_s(r))
                ));
            }
        }
    }
    if compared == 0 {
        return Err("needs mode = unicast, multicast and multicast+repair at the same group and load".into());
    }
    Ok((
        Verdict::of(ok),
        format!(
            "unicast/multicast/multicast+repair — {} (criterion, at all {compared} group/load pairs: repair's member reliability within 0.5 points of unicast's, fewer frames per query than unicast)",
            parts.join("; ")
        ),
    ))
}
