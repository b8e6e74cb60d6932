//! The report as a page: `index.html` — the figures with the paper's findings beside them, the seed-001
//! section, the calibration, the sensitivity table, the aggregates, the files.

use crate::data::{RunData, Variant};
use crate::findings::{Finding, Kind};
use crate::scenario::{family_metrics, Scenario};
use crate::stats::Summary;
use std::fmt::Write as _;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn kind_class(k: Kind) -> &'static str {
    match k {
        Kind::Agrees => "agree",
        Kind::Disagrees => "disagree",
        Kind::Fitted => "fitted",
        Kind::Consequence => "consequence",
        Kind::Inconclusive => "open",
    }
}

/// The paper's procedure as a table, first in the report: a reader judges the reproduction against it.
fn procedure_html(s: &Scenario, edits: &[String]) -> String {
    if s.procedure.is_empty() {
        return String::new();
    }
    let mut h = String::from(
        "<h2>Procedure</h2>\n<p>Every input of the paper's experiment: what the paper does, where it says so, and how the lab sets it. <i>Assumed</i> marks an input the paper does not state, with the source of the value.</p>\n<table class=\"proc\"><tr><th>input</th><th>paper</th><th>where</th><th>lab</th></tr>\n",
    );
    for r in &s.procedure {
        let from = if r.is_assumed() { format!("<i>{}</i>", esc(&r.provenance())) } else { esc(&r.provenance()) };
        let edited: String =
            super::row_edits(r, edits).iter().map(|e| format!("<br><b>EDITED in this run:</b> {}", esc(e))).collect();
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{from}</td><td>{}{edited}</td></tr>",
            esc(&r.input),
            esc(&r.paper),
            esc(&r.lab)
        );
    }
    h.push_str("</table>\n");
    h
}

fn calibration_html(s: &Scenario) -> String {
    let c = &s.calibration;
    let mut h = String::from("<h2>Calibration</h2>\n");
    let _ = writeln!(
        h,
        "<p>Set <b>{}</b>: {} ms of CPU per received datagram, {}, Wi-Fi CCA-busy probability {}, corruption {} per burst. Findings on the numbers below are <b>FITTED</b>: they agree by construction and are never counted as agreement.</p>",
        esc(if c.set.is_empty() { "(none)" } else { &c.set }),
        c.processing_delay_ms,
        c.waiting_slots(),
        c.cca_busy_prob,
        c.corruption_prob
    );
    if !c.fitted_to.is_empty() {
        h.push_str("<p>Fitted to:</p><ul>");
        for t in &c.fitted_to {
            let _ = write!(h, "<li>{}</li>", esc(t));
        }
        h.push_str("</ul>\n");
    }
    if !c.sources.is_empty() {
        h.push_str("<p>Where every value comes from:</p><ul>");
        for t in &c.sources {
            let _ = write!(h, "<li>{}</li>", esc(t));
        }
        h.push_str("</ul>\n");
    }
    h
}

fn sensitivity_html(found: &[Finding], variants: &[Variant]) -> String {
    if variants.is_empty() || found.is_empty() {
        return String::new();
    }
    let mut h = String::from("<h2>Sensitivity</h2>\n<p>The findings rerun (one replicate each) with deliberately wrong models. A finding whose kind never changes cannot tell these models from the calibrated one.</p>\n<table><tr><th>finding</th><th>this run</th>");
    for v in variants {
        let _ = write!(h, "<th>{}<br><small>{}</small></th>", esc(&v.name), esc(&v.changes));
    }
    h.push_str("</tr>\n");
    for f in found {
        let _ = write!(h, "<tr><td style=\"text-align:left\">{}</td><td>{}</td>", esc(&f.check), f.status());
        for v in variants {
            let k = v.findings.iter().find(|g| g.check == f.check).map_or("INCONCLUSIVE".into(), Finding::status);
            let style = if k != f.status() { " style=\"background:#fde0c5\"" } else { "" };
            let tests = if f.reasons.iter().any(|r| r.variant == v.name) { " (its stated reason)" } else { "" };
            let _ = write!(h, "<td{style}>{k}{tests}</td>");
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
    h
}

fn finding_html(f: &Finding) -> String {
    let mut s = format!(
        r#"<div class="finding {}"><b>{}</b> — {}<br><span class="k">paper:</span> {}"#,
        kind_class(f.kind),
        f.status(),
        esc(&f.title),
        esc(&f.paper)
    );
    for m in &f.measures {
        let _ = write!(s, r#"<br><span class="k">corral:</span> {}"#, esc(&m.to_string()));
    }
    if f.replicates > 1 {
        let _ =
            write!(s, r#"<br><span class="k">replicates:</span> every measure held in {} of {}"#, f.held, f.replicates);
    }
    if !f.note.is_empty() {
        let _ = write!(s, r#"<br><span class="k">note:</span> {}"#, esc(&f.note));
    }
    if matches!(f.kind, Kind::Disagrees | Kind::Fitted) && !f.explain.is_empty() {
        let _ = write!(s, r#"<br><span class="k">why:</span> {}"#, esc(&f.explain));
    }
    for l in crate::findings::reason::lines(f) {
        let _ = write!(s, r#"<br><span class="k">reason:</span> {}"#, esc(&l));
    }
    s.push_str("</div>\n");
    s
}

/// The HTML page: figures with their findings beside them, the aggregates table, the files.
pub fn html(d: &RunData, found: &[Finding], figures: &[(String, String)]) -> String {
    let s = &d.scenario;
    let mut h = String::new();
    let _ = write!(
        h,
        r#"<!DOCTYPE html><html><head><meta charset="utf-8"><title>{}</title><style>
body{{font-family:Helvetica,Arial,sans-serif;max-width:1200px;margin:2em auto;color:#222;line-height:1.4}}
.fig{{display:flex;gap:1.5em;align-items:flex-start;margin:1.5em 0;flex-wrap:wrap}}
.fig svg{{max-width:760px;height:auto;border:1px solid #ddd}}
.side{{flex:1;min-width:280px}}
.finding{{padding:.6em .8em;margin:.5em 0;border-left:5px solid #999;background:#f6f6f6;font-size:14px}}
.agree{{border-color:#009E73}} .disagree{{border-color:#D55E00}} .open{{border-color:#E69F00}}
.fitted{{border-color:#56B4E9;background:#f3f8fb}} .consequence{{border-color:#999;background:#fafafa}}
.k{{color:#666}} table{{border-collapse:collapse;font-size:12px}} td,th{{border:1px solid #ddd;padding:2px 6px;text-align:right}}
th{{background:#f0f0f0}} .proc td{{text-align:left;vertical-align:top}} code{{background:#f3f3f3;padding:1px 4px}}
</style></head><body>
<h1>{}</h1>
"#,
        esc(&s.title),
        esc(&s.title)
    );
    if !s.reference.is_empty() {
        let _ = writeln!(h, "<p><b>Reproduces:</b> {}</p>", esc(&s.reference));
    }
    if !s.description.is_empty() {
        let _ = writeln!(h, "<p>{}</p>", esc(&s.description));
    }
    if d.quick {
        let _ = writeln!(h, "<p class=\"finding open\"><b>{}</b></p>", esc(super::PREVIEW));
    }
    if let Some(line) = super::incomplete(d) {
        let _ = writeln!(h, "<p class=\"finding open\"><b>{}</b></p>", esc(&line));
    }
    if let Some(diffs) = super::edited_inputs(d) {
        let _ = writeln!(
            h,
            "<div class=\"finding open\"><b>EDITED:</b> this scenario differs from the built-in <code>{}</code> (the paper's procedure) in {} input(s); its verdicts are about these inputs:<ul>",
            esc(&s.name),
            diffs.len()
        );
        for l in diffs {
            let _ = writeln!(h, "<li><code>{}</code></li>", esc(&l));
        }
        h.push_str("</ul></div>\n");
    }
    let mode = if d.quick { "quick (<code>--quick</code>: few repetitions)" } else { "full" };
    let shard = d.shard.map(|(i, n)| format!(", shard {i}/{n}")).unwrap_or_default();
    let _ = writeln!(
        h,
        "<p>Scenario <code>{}</code>, {mode}, seed {}{shard}: {} of {} sweep points. Reproduce with <code>corral lab run {}{} --seed {}</code>. Calibration{}: {}.</p>",
        esc(&s.name),
        d.seed,
        d.results.len(),
        d.points.len(),
        esc(&s.name),
        if d.quick { " --quick" } else { "" },
        d.seed,
        if s.calibration.set.is_empty() { String::new() } else { format!(" (set “{}”)", esc(&s.calibration.set)) },
        esc(&super::text::calibration_line(s))
    );
    h.push_str(&procedure_html(s, &super::edited_inputs(d).unwrap_or_default()));
    for (fig, (id, svg)) in s.figures.iter().zip(figures) {
        let _ = writeln!(h, r#"<div class="fig" id="{}">{}<div class="side">"#, esc(id), svg.trim_end());
        if !fig.caption.is_empty() {
            let _ = writeln!(h, "<p>{}</p>", esc(&fig.caption));
        }
        for f in found.iter().filter(|f| f.figure == fig.id) {
            h.push_str(&finding_html(f));
        }
        h.push_str("</div></div>\n");
    }
    if let Some((_, section)) = super::multiparty::section(d) {
        h.push_str(&section);
    }
    h.extend(super::churn::html(d));
    let loose: Vec<&Finding> = found.iter().filter(|f| !s.figures.iter().any(|g| g.id == f.figure)).collect();
    if !loose.is_empty() {
        h.push_str("<h2>Findings</h2>\n");
        for f in loose {
            h.push_str(&finding_html(f));
        }
    }
    h.push_str(&calibration_html(s));
    h.push_str(&sensitivity_html(found, &d.sensitivity));
    let metrics = family_metrics(&s.figures);
    if !metrics.is_empty() {
        // The family's own numbers per point (throughput, NRP, goodput …), before the per-query table.
        h.push_str("<h2>Per point</h2>\n<p>Means over the replicates.</p>\n<table><tr><th>point</th>");
        metrics.iter().for_each(|m| {
            let _ = write!(h, "<th>{}</th>", esc(m.label()));
        });
        h.push_str("</tr>\n");
        for (p, a) in d.aggregates() {
            let _ = write!(h, "<tr><td style=\"text-align:left\">{}</td>", esc(&p.label()));
            metrics.iter().for_each(|m| {
                let v = a.metric(*m).0;
                let v = if v.is_finite() { crate::findings::number(v, "") } else { "-".into() };
                let _ = write!(h, "<td>{v}</td>");
            });
            h.push_str("</tr>\n");
        }
        h.push_str("</table>\n");
        let blanks = super::blanks(d);
        if !blanks.is_empty() {
            let _ = write!(h, "<p><b>{} cell(s) without a value</b> (\"-\"):</p><ul>", blanks.len());
            blanks.iter().for_each(|b| {
                let _ = write!(h, "<li>{}</li>", esc(b));
            });
            h.push_str("</ul>\n");
        }
    }
    h.push_str("<h2>Aggregates</h2>\n<p>Replicates pooled (every query of every replicate).</p>\n<table><tr><th>point</th><th>queries</th><th>member %</th><th>group %</th><th>rt min (s)</th><th>p25</th><th>median</th><th>mean</th><th>p75</th><th>max</th><th>retx/query</th><th>frames/query</th><th>busiest link/query</th><th>hops avg/max</th></tr>\n");
    for (p, a) in d.pooled() {
        let rt = |f: fn(&Summary) -> f64| a.rt.map_or("-".to_string(), |s| format!("{:.3}", f(&s) / 1000.0));
        let _ = writeln!(
            h,
            "<tr><td style=\"text-align:left\">{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.0}</td><td>{:.1}</td><td>{:.1}/{}</td></tr>",
            esc(&p.label()),
            a.queries,
            a.member_reliability,
            a.group_reliability,
            rt(|s| s.min),
            rt(|s| s.p25),
            rt(|s| s.median),
            rt(|s| s.mean),
            rt(|s| s.p75),
            rt(|s| s.max),
            a.retx_per_query,
            a.frames_per_query,
            a.link_stress_per_query,
            a.avg_hops,
            a.max_hops
        );
    }
    h.push_str("</table>\n<p>Files: <a href=\"queries.csv\">queries.csv</a> (one row per query), <a href=\"aggregates.csv\">aggregates.csv</a>, <a href=\"points.csv\">points.csv</a>, <a href=\"links.csv\">links.csv</a> (frames per link), <a href=\"nodes.csv\">nodes.csv</a> (load per node), <a href=\"summary.txt\">summary.txt</a>, <a href=\"summary.json\">summary.json</a>, <a href=\"scenario.toml\">scenario.toml</a>.</p>\n</body></html>\n");
    h
}
