//! The report as text: `summary.txt` — what ran, the findings grouped by kind, the calibration, the
//! sensitivity table, the headline numbers per point — and its parts, which the CLI and tests print too.

use crate::data::{RunData, Variant};
use crate::findings::{reason, Finding, Kind};
use crate::scenario::{family_metrics, Scenario};
use crate::stats::Summary;
use std::fmt::Write as _;

/// `summary.txt`: what ran, the findings, and the headline numbers per point.
pub fn summary_text(d: &RunData, found: &[Finding]) -> String {
    let s = &d.scenario;
    let aggs = d.pooled();
    let mut out = head_text(d);
    out.push_str(&procedure_rows(s, &super::edited_inputs(d).unwrap_or_default()));
    let _ = writeln!(out);
    out.push_str(&findings_text(found));
    out.push_str(&calibration_text(s));
    out.push_str(&sensitivity_text(found, &d.sensitivity));
    if !found.is_empty() {
        let _ = writeln!(out);
    }
    let metrics = family_metrics(&s.figures);
    if !metrics.is_empty() {
        // A family that measures its own numbers (throughput, NRP, goodput …): those, per point.
        let _ = write!(out, "{:<44}", "point");
        metrics.iter().for_each(|m| {
            let _ = write!(out, " {:>14}", m.name());
        });
        let _ = writeln!(out);
        for (p, a) in &aggs {
            let _ = write!(out, "{:<44}", p.label());
            metrics.iter().for_each(|m| {
                let v = a.metric(*m).0;
                let v = if v.is_finite() { crate::findings::number(v, "") } else { "-".into() };
                let _ = write!(out, " {v:>14}");
            });
            let _ = writeln!(out);
        }
        let blanks = super::blanks(d);
        if !blanks.is_empty() {
            let _ = writeln!(out, "\n{} cell(s) without a value (a replicate's \"-\"):", blanks.len());
            for b in blanks {
                let _ = writeln!(out, "    {b}");
            }
        }
        out.extend(super::churn::text(d));
        return out;
    }
    let _ = writeln!(
        out,
        "{:<44} {:>7} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8}",
        "point", "queries", "rt min", "rt mean", "rt max", "retx/q", "member%", "group%"
    );
    for (p, a) in &aggs {
        let rt = |f: fn(&Summary) -> f64| a.rt.map_or("-".to_string(), |s| format!("{:.3}", f(&s) / 1000.0));
        let _ = writeln!(
            out,
            "{:<44} {:>7} {:>9} {:>9} {:>9} {:>9.2} {:>8.1} {:>8.1}",
            p.label(),
            a.queries,
            rt(|s| s.min),
            rt(|s| s.mean),
            rt(|s| s.max),
            a.retx_per_query,
            a.member_reliability,
            a.group_reliability
        );
    }
    let _ = writeln!(out, "(response times in seconds)");
    out.extend(super::churn::text(d));
    out
}

/// What ran (scenario, reference, mode, seed, points) and the notices every verdict needs.
fn head_text(d: &RunData) -> String {
    let s = &d.scenario;
    let queries: usize = d.pooled().iter().map(|(_, a)| a.queries).sum();
    let mut out = String::new();
    let _ = writeln!(out, "{} — {}", s.name, s.title);
    if !s.reference.is_empty() {
        let _ = writeln!(out, "reproduces: {}", s.reference);
    }
    let mode = if d.quick { "quick" } else { "full" };
    let shard = d.shard.map(|(i, n)| format!(", shard {i}/{n}")).unwrap_or_default();
    let _ = writeln!(
        out,
        "run: {mode}, seed {}{shard}; {} of {} points ({} replicate(s) each), {queries} queries",
        d.seed,
        d.results.len(),
        d.points.len(),
        s.replicates(d.quick)
    );
    out.push_str(&notices_text(d));
    out
}

/// What `corral lab run -q` prints: what ran, the notices, and one line per finding (its verdict and
/// claim). The procedure table, the measures, the calibration, the sensitivity table and the points are
/// in `summary.txt` and the page.
pub fn summary_brief(d: &RunData, found: &[Finding]) -> String {
    let mut out = head_text(d);
    let full = findings_text(found);
    // The count line, then each finding's first line: the measures under it are indented.
    for l in full.lines().filter(|l| !l.starts_with(' ')) {
        let _ = writeln!(out, "{l}");
    }
    out
}

/// What a reader must know before any verdict: a `--quick` run is a preview; an interrupted run or a
/// partial merge covers less than the sweep; an edited scenario differs from the paper's in the inputs
/// listed.
pub fn notices_text(d: &RunData) -> String {
    let mut out = String::new();
    if d.quick {
        let _ = writeln!(out, "{}", super::PREVIEW);
    }
    if let Some(line) = super::incomplete(d) {
        let _ = writeln!(out, "{line}");
    }
    if let Some(diffs) = super::edited_inputs(d) {
        let _ = writeln!(
            out,
            "EDITED: this scenario differs from the built-in {} (the paper's procedure) in {} input(s); its verdicts are about these inputs:",
            d.scenario.name,
            diffs.len()
        );
        for l in diffs {
            let _ = writeln!(out, "    {l}");
        }
    }
    out
}

/// The findings as text, grouped by kind: verdicts first (the only evidence), then fitted numbers and
/// consequences of the configuration, which are shown but never counted as agreement.
pub fn findings_text(found: &[Finding]) -> String {
    let mut out = String::new();
    let count = |k: Kind| found.iter().filter(|f| f.kind == k).count();
    if found.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "findings: {} AGREES, {} DISAGREES (claims held out from calibration); {} FITTED; {} CONSEQUENCE; {} INCONCLUSIVE",
        count(Kind::Agrees),
        count(Kind::Disagrees),
        count(Kind::Fitted),
        count(Kind::Consequence),
        count(Kind::Inconclusive)
    );
    for group in
        [&[Kind::Agrees, Kind::Disagrees][..], &[Kind::Fitted][..], &[Kind::Consequence][..], &[Kind::Inconclusive][..]]
    {
        for f in found.iter().filter(|f| group.contains(&f.kind)) {
            // A fitted number or a consequence says whether it held: one that fails is worth reading.
            let _ = writeln!(out, "[{}] {}", f.status(), f.title);
            let _ = writeln!(out, "    paper:  {}", f.paper);
            for m in &f.measures {
                let _ = writeln!(out, "    corral: {m}");
            }
            if f.replicates > 1 {
                let _ = writeln!(out, "            every measure held in {} of {} replicates", f.held, f.replicates);
            }
            if !f.note.is_empty() {
                let _ = writeln!(out, "    note:   {}", f.note);
            }
            if matches!(f.kind, Kind::Disagrees | Kind::Fitted) && !f.explain.is_empty() {
                let _ = writeln!(out, "    why:    {}", f.explain);
            }
            for l in reason::lines(f) {
                let _ = writeln!(out, "    reason: {l}");
            }
        }
    }
    out
}

/// The paper's procedure, input by input: what the paper does, where it says so, how the lab sets it (an
/// input the paper does not state is marked assumed, with its source).
pub fn procedure_text(s: &Scenario) -> String {
    procedure_rows(s, &[])
}

/// The procedure table of a run whose scenario differs from the built-in in `edits`: a row that describes
/// an edited input says so under it (its text is the built-in's).
fn procedure_rows(s: &Scenario, edits: &[String]) -> String {
    let mut out = String::new();
    if s.procedure.is_empty() {
        return out;
    }
    let assumed = s.procedure.iter().filter(|r| r.is_assumed()).count();
    let _ = writeln!(out, "\nprocedure ({} inputs, {assumed} assumed):", s.procedure.len());
    for r in &s.procedure {
        let _ = writeln!(out, "  {}", r.input);
        if !r.paper.is_empty() {
            let _ = writeln!(out, "      paper: {}", r.paper);
        }
        let _ = writeln!(out, "      lab:   {}", r.lab);
        let _ = writeln!(out, "      from:  {}", r.provenance());
        for e in super::row_edits(r, edits) {
            let _ = writeln!(out, "      EDITED in this run: {e}");
        }
    }
    out
}

/// The calibration constants the family's runner reads, in one line ("none …" when it reads none).
pub fn calibration_line(s: &Scenario) -> String {
    let c = &s.calibration;
    let reads = s.family().map(crate::family::calibration_read).unwrap_or(&[]);
    let mut parts = Vec::new();
    if reads.contains(&"processing_delay_ms") {
        parts.push(format!("CPU {} ms per received datagram", c.processing_delay_ms));
    }
    if reads.contains(&"rx_queue") {
        parts.push(c.waiting_slots());
    }
    if reads.contains(&"cca_busy_prob") {
        parts.push(format!("Wi-Fi CCA-busy {}", c.cca_busy_prob));
    }
    if reads.contains(&"corruption_prob") {
        parts.push(format!("corruption {} per burst", c.corruption_prob));
    }
    if parts.is_empty() {
        parts.push("none (this family's runner reads no calibration constant)".into());
    }
    parts.join(", ")
}

/// The calibration set: the constants the family's runner reads, the paper numbers they were fitted to,
/// and every source.
pub fn calibration_text(s: &Scenario) -> String {
    let c = &s.calibration;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\ncalibration{}: {}",
        if c.set.is_empty() { String::new() } else { format!(" (set \"{}\")", c.set) },
        calibration_line(s)
    );
    for t in &c.fitted_to {
        let _ = writeln!(out, "    fitted to: {t}");
    }
    for t in &c.sources {
        let _ = writeln!(out, "    source:    {t}");
    }
    out
}

/// The sensitivity table: each deliberately wrong model and the findings whose kind it changes ("its
/// stated reason" marks the findings that name the variant as their `reason`).
pub fn sensitivity_text(found: &[Finding], variants: &[Variant]) -> String {
    let mut out = String::new();
    if variants.is_empty() {
        return out;
    }
    let _ = writeln!(out, "\nsensitivity (findings rerun with deliberately wrong models; → marks a change):");
    for v in variants {
        let status =
            |check: &str| v.findings.iter().find(|g| g.check == check).map_or("INCONCLUSIVE".into(), Finding::status);
        let flips: Vec<String> = found
            .iter()
            .map(|f| {
                let (mine, other) = (f.status(), status(&f.check));
                let tests = if f.reasons.iter().any(|r| r.variant == v.name) { " (its stated reason)" } else { "" };
                if other == mine {
                    format!("{} {mine}{tests}", f.check)
                } else {
                    format!("{} {mine} → {other}{tests}", f.check)
                }
            })
            .collect();
        let changed = found.iter().filter(|f| status(&f.check) != f.status()).count();
        let _ = writeln!(out, "  {} ({}): {changed} of {} change", v.name, v.changes, found.len());
        for l in flips {
            let _ = writeln!(out, "      {l}");
        }
    }
    out
}
