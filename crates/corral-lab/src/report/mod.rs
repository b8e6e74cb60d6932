//! Reports: a run's directory — the raw files (`crate::csv`), one SVG per figure, `index.html`,
//! `summary.txt`, `summary.json`, `scenario.toml` and `run.json` — written deterministically: the same
//! command writes byte-identical files.
//!
//! | file | owns |
//! | --- | --- |
//! | `mod.rs` | writing the directory, `summary.json` |
//! | [`text`] | `summary.txt` and its parts: findings, calibration, sensitivity |
//! | [`html`] | `index.html` |
//! | [`figures`] | the scenario's `[[figure]]`s as SVG |
//! | [`multiparty`] | seed 001's figures and tables |
//! | [`churn`] | the `[churn]` family's table |
//!
//! It never runs a simulation.

pub mod churn;
pub mod figures;
pub mod html;
pub mod multiparty;
pub mod text;

use crate::csv;
use crate::data::RunData;
use crate::error::DataError;
use crate::findings::{self, Finding, Kind};
use crate::results::Aggregate;
use crate::scenario::{family_metrics, AxisValue, Point};
use figures::figure_svg;
use std::path::Path;
pub use text::{
    calibration_text, findings_text, notices_text, procedure_text, sensitivity_text, summary_brief, summary_text,
};

/// What a `--quick` report says before its findings: its verdicts are a preview.
pub const PREVIEW: &str = "PREVIEW: a --quick run (the quick sweep, few repetitions and replicates): its verdicts are a preview and may differ from the full run's; run without --quick for the reproduction.";

/// The inputs in which a scenario differs from the built-in scenario of its name — `path: given (built-in:
/// value)` — or `None` when it has no built-in namesake or is the built-in (a report from an edited
/// scenario says what was edited before any verdict).
pub fn edited_inputs(d: &RunData) -> Option<Vec<String>> {
    let builtin = crate::scenario::builtin(&d.scenario.name)?;
    let (Ok(given), Ok(paper)) = (d.scenario_text.parse::<toml::Table>(), builtin.parse::<toml::Table>()) else {
        return None;
    };
    let mut diffs = Vec::new();
    differences("", &toml::Value::Table(given), &toml::Value::Table(paper), &mut diffs);
    (!diffs.is_empty()).then_some(diffs)
}

/// The edited inputs (of [`edited_inputs`]) a procedure row describes: those whose key its `lab` text
/// names as a word (`processing_delay_ms = 0` names `calibration.processing_delay_ms`). The row was written
/// for the built-in, so the report shows these beside it.
pub fn row_edits<'a>(row: &crate::scenario::ProcedureRow, edits: &'a [String]) -> Vec<&'a str> {
    let named = |key: &str| {
        let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        row.lab
            .match_indices(key)
            .any(|(i, _)| !word(row.lab[..i].chars().next_back()) && !word(row.lab[i + key.len()..].chars().next()))
    };
    edits
        .iter()
        .filter(|e| {
            let path = e.split(": ").next().unwrap_or_default();
            let key = path.rsplit('.').next().unwrap_or(path);
            !key.is_empty() && !key.contains('[') && named(key)
        })
        .map(String::as_str)
        .collect()
}

fn differences(path: &str, given: &toml::Value, paper: &toml::Value, out: &mut Vec<String>) {
    let at = |k: &str| if path.is_empty() { k.to_string() } else { format!("{path}.{k}") };
    match (given, paper) {
        (toml::Value::Table(g), toml::Value::Table(p)) => {
            let keys: std::collections::BTreeSet<&String> = g.keys().chain(p.keys()).collect();
            for k in keys {
                match (g.get(k), p.get(k)) {
                    (Some(a), Some(b)) => differences(&at(k), a, b, out),
                    (Some(a), None) => out.push(format!("{}: {} (built-in: not set)", at(k), short_value(a))),
                    (None, Some(b)) => out.push(format!("{}: not set (built-in: {})", at(k), short_value(b))),
                    (None, None) => {}
                }
            }
        }
        // A list of tables (`[[finding]]`, `[[sensitivity]]`) of the same length: element by element, each
        // named by its check (else its index), so an edited finding's `reason` shows as
        // `finding[auto_delay_near_best].reason`.
        (toml::Value::Array(g), toml::Value::Array(p)) if g.len() == p.len() && g.iter().all(toml::Value::is_table) => {
            for (i, (a, b)) in g.iter().zip(p).enumerate() {
                let id = b.get("check").and_then(toml::Value::as_str).map_or(i.to_string(), str::to_string);
                differences(&format!("{path}[{id}]"), a, b, out);
            }
        }
        (a, b) if a != b => out.push(format!("{path}: {} (built-in: {})", short_value(a), short_value(b))),
        _ => {}
    }
}

/// A TOML value in one line, cut at 80 characters.
fn short_value(v: &toml::Value) -> String {
    let s = v.to_string().replace('\n', " ");
    if s.chars().count() > 80 {
        format!("{}…", s.chars().take(80).collect::<String>())
    } else {
        s
    }
}

/// What a report covers less than its run, in one line: INTERRUPTED (a signal stopped the run: the points
/// or the sensitivity variants that finished) or PARTIAL (merged shards that miss points). `None` for a
/// whole run, and for one shard (its run line says which).
pub fn incomplete(d: &RunData) -> Option<String> {
    let all = d.points.len();
    let mine = d.shard.map_or(all, |(i, n)| (0..all).filter(|k| k % n == i).count());
    let done = d.results.len();
    if d.interrupted && done < mine {
        Some(format!(
            "INTERRUPTED: the run was stopped by a signal after {done} of its {mine} points; no findings (they need every point)"
        ))
    } else if d.interrupted {
        Some(format!(
            "INTERRUPTED: the run was stopped by a signal in its sensitivity phase: {} of {} variant(s) ran, the others are missing from the sensitivity table",
            d.sensitivity.len(),
            d.scenario.sensitivity.len()
        ))
    } else if d.shard.is_none() && done < all {
        Some(format!("PARTIAL: the merged shards cover {done} of {all} points; no findings (they need every point)"))
    } else if d.variant_points_missing > 0 {
        Some(format!(
            "PARTIAL: the merged shards miss {} point(s) of the sensitivity variants: {} of {} variant(s) in the sensitivity table",
            d.variant_points_missing,
            d.sensitivity.len(),
            d.scenario.sensitivity.len()
        ))
    } else {
        None
    }
}

/// Every cell of the point tables without a value, named with why: a plotted metric that is not a number
/// at a point (and replicate) — a stream that never finished (a TCP connection that never came up
/// acknowledges nothing), a point that measured nothing. Counted in the report, never a silent "-".
pub fn blanks(d: &RunData) -> Vec<String> {
    let metrics = family_metrics(&d.scenario.figures);
    let mut out = Vec::new();
    for (p, a) in d.aggregates() {
        for m in &metrics {
            if a.metric(*m).0.is_finite() {
                continue;
            }
            let why = match &a.facts {
                crate::record::Facts::Stream(f) if f.ttd_ms.is_none() => format!(
                    "the stream never finished: {} % of its {} readings acknowledged{}",
                    crate::findings::number(a.member_reliability, ""),
                    a.queries,
                    if a.member_reliability == 0.0 { " (the transfer never started)" } else { "" }
                ),
                _ => "nothing was measured".to_string(),
            };
            out.push(format!("{} at {}: {why}", m.name(), p.label()));
        }
    }
    out
}

/// Writes the whole report directory; returns the findings.
pub fn write_report(dir: &Path, d: &RunData) -> Result<Vec<Finding>, DataError> {
    std::fs::create_dir_all(dir).map_err(|source| DataError::Io { path: dir.to_path_buf(), source })?;
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|source| DataError::Io { path, source })
    };
    write_results(dir, d)?;
    write("aggregates.csv", &csv::aggregates_csv(d))?;
    for share in &d.shares {
        let points = share.scenario.points(d.quick);
        let share_data = RunData {
            scenario: share.scenario.clone(),
            scenario_text: share.text.clone(),
            points,
            results: share.results.clone(),
            seed: d.seed,
            quick: d.quick,
            shard: d.shard,
            sensitivity: Vec::new(),
            interrupted: d.interrupted,
            shares: Vec::new(),
            variant_points_missing: 0,
        };
        write_results(&crate::sweep::share_dir(dir, share.variant), &share_data)?;
    }
    let complete = d.results.len() == d.points.len();
    let aggs = d.aggregates();
    let mut found = if complete { findings::evaluate(&d.scenario, &aggs) } else { Vec::new() };
    findings::reason::link(&mut found, &d.sensitivity);
    let pooled = d.pooled();
    let pooled: Vec<(&Point, Aggregate)> = pooled.iter().map(|(p, a)| (p, a.clone())).collect();
    let mut figures = Vec::new();
    for f in &d.scenario.figures {
        // Box plots of response times pool the replicates' queries; other box plots and line charts show
        // the replicates' spread.
        let svg = figure_svg(f, if figures::boxes_response_times(f) { &pooled } else { &aggs });
        write(&format!("{}.svg", f.id), &svg)?;
        figures.push((f.id.clone(), svg));
    }
    if let Some((svgs, _)) = multiparty::section(d) {
        for (id, svg) in svgs {
            write(&format!("{id}.svg"), &svg)?;
        }
    }
    write("summary.txt", &summary_text(d, &found))?;
    let json = serde_json::to_string_pretty(&summary_json(d, &found)).unwrap_or_default();
    write("summary.json", &(json + "\n"))?;
    write("index.html", &html::html(d, &found, &figures))?;
    let manifest = serde_json::json!({
        "scenario": d.scenario.name,
        "seed": d.seed,
        "quick": d.quick,
        "shard": d.shard.map(|(i, n)| [i, n]),
        "points_total": d.points.len(),
        "points": d.results.iter().map(|r| r.point.point).collect::<Vec<_>>(),
    });
    write("run.json", &(serde_json::to_string_pretty(&manifest).unwrap_or_default() + "\n"))?;
    Ok(found)
}

/// The files `merge` reads back ([`csv::read_results`]): the scenario, the points', queries', links' and
/// nodes' rows, and seed 001's statistics.
fn write_results(dir: &Path, d: &RunData) -> Result<(), DataError> {
    std::fs::create_dir_all(dir).map_err(|source| DataError::Io { path: dir.to_path_buf(), source })?;
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|source| DataError::Io { path, source })
    };
    write("scenario.toml", &d.scenario_text)?;
    write("queries.csv", &csv::queries_csv(d))?;
    write("points.csv", &csv::points_csv(d))?;
    write("links.csv", &csv::links_csv(d))?;
    write("nodes.csv", &csv::nodes_csv(d))?;
    if let Some(json) = csv::multiparty_json(&d.results) {
        write(csv::MULTIPARTY_FILE, &json)?;
    }
    Ok(())
}

/// `summary.json`, for scripts.
pub fn summary_json(d: &RunData, found: &[Finding]) -> serde_json::Value {
    let metrics = family_metrics(&d.scenario.figures);
    let aggs: Vec<serde_json::Value> = d
        .aggregates()
        .iter()
        .map(|(p, a)| {
            let axes: serde_json::Map<String, serde_json::Value> = p
                .values
                .iter()
                .map(|(k, v)| {
                    let v = match v {
                        AxisValue::Num(n) => serde_json::json!(n),
                        AxisValue::Text(t) => serde_json::json!(t),
                    };
                    (k.clone(), v)
                })
                .collect();
            serde_json::json!({
                "point": p.index,
                "axes": axes,
                "queries": a.queries,
                "member_reliability": finite(a.member_reliability),
                "group_reliability": finite(a.group_reliability),
                "response_time_ms": a.rt.map(|s| serde_json::json!({
                    "min": finite(s.min), "p25": finite(s.p25), "median": finite(s.median), "mean": finite(s.mean),
                    "p75": finite(s.p75), "p95": finite(s.p95), "p99": finite(s.p99), "max": finite(s.max),
                    "ci95": finite(s.ci95),
                })),
                "retransmissions_per_query": finite(a.retx_per_query),
                "frames_per_query": finite(a.frames_per_query),
                "link_stress_per_query": finite(a.link_stress_per_query),
                "metrics": metrics.iter().map(|m| (m.name().to_string(), finite(a.metric(*m).0))).collect::<serde_json::Map<_, _>>(),
            })
        })
        .collect();
    serde_json::json!({
        "scenario": d.scenario.name,
        "title": d.scenario.title,
        "seed": d.seed,
        "quick": d.quick,
        "preview": d.quick,
        "interrupted": d.interrupted,
        "incomplete": incomplete(d),
        "blanks": blanks(d),
        "edited": edited_inputs(d),
        "shard": d.shard.map(|(i, n)| format!("{i}/{n}")),
        "points_total": d.points.len(),
        "points": d.results.len(),
        "findings": found.iter().map(finding_json).collect::<Vec<_>>(),
        "calibration": {
            "set": d.scenario.calibration.set,
            "fitted_to": d.scenario.calibration.fitted_to,
            "sources": d.scenario.calibration.sources,
        },
        "sensitivity": d.sensitivity.iter().map(|v| serde_json::json!({
            "variant": v.name,
            "changes": v.changes,
            "findings": v.findings.iter().map(|f| serde_json::json!({"check": f.check, "kind": f.kind.word(), "status": f.status()})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "aggregates": aggs,
    })
}

/// A number for `summary.json`: six significant digits, the most any measure of the lab carries (never
/// `0.30000000000000004`), and `null` when it is not finite.
fn finite(x: f64) -> serde_json::Value {
    if x.is_finite() {
        serde_json::json!(format!("{x:.5e}").parse::<f64>().unwrap_or(x))
    } else {
        serde_json::Value::Null
    }
}

/// One measure of a finding; its A/A noise only where the run measured one (a comparison of solutions).
fn measure_json(m: &findings::Spread) -> serde_json::Value {
    let mut v = serde_json::json!({
        "what": m.what,
        "corral": finite(m.mean),
        "corral_min": finite(m.min),
        "corral_max": finite(m.max),
        "paper": m.paper.map(finite),
        "unit": m.unit,
        "distance": m.distance(),
        "held": m.held,
        "of": m.of,
    });
    if let (Some(n), Some(o)) = (m.noise, v.as_object_mut()) {
        let kind = if n.ratio { "factor" } else { "difference" };
        let noise =
            serde_json::json!({ "kind": kind, "mean": finite(n.mean), "min": finite(n.min), "max": finite(n.max) });
        o.insert("aa_noise".into(), noise);
    }
    v
}

fn finding_json(f: &Finding) -> serde_json::Value {
    serde_json::json!({
        "check": f.check,
        "title": f.title,
        "kind": f.kind.word(),
        "status": f.status(),
        "role": format!("{:?}", f.role).to_lowercase(),
        "paper": f.paper,
        "corral": f.corral(),
        "replicates": f.replicates,
        "held": f.held,
        "measures": f.measures.iter().map(measure_json).collect::<Vec<_>>(),
        "explain": if matches!(f.kind, Kind::Disagrees | Kind::Fitted) { f.explain.as_str() } else { "" },
        "reasons": f.reasons.iter().map(|r| serde_json::json!({
            "variant": r.variant,
            "kind": r.there.as_ref().map(|t| t.kind.word()),
            "status": r.there.as_ref().map(|t| t.status.clone()),
            "measure": r.there.as_ref().map(|t| t.measure.clone()),
            "says": r.sentence(f.kind),
        })).collect::<Vec<_>>(),
        "reason": findings::reason::lines(f),
    })
}
