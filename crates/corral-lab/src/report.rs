//! Reports: the CSV files of a run (raw rows and aggregates), reading them back (for `corral lab merge`),
//! the aggregates per point, the figures (SVG through [`crate::plot`]), the HTML page, `summary.txt` and
//! `summary.json`.
//!
//! # What it owns
//! Turning rows into files and files into rows, deterministically: numbers are written with fixed
//! precision, rows in point order, nothing depends on the wall clock or on the thread that ran a point —
//! the same command writes byte-identical CSV. It never runs a simulation.

use crate::findings::{self, Finding, Kind};
use crate::plot::{BoxPlot, LineChart, Series};
use crate::results::{aggregate, fixed, Aggregate, Metric};
use crate::run::{LinkRow, NodeRow, PointResult, PointRow, QueryRow};
use crate::scenario::{AxisValue, Figure, Point, Scenario};
use crate::stats::Summary;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// A whole run's data: the scenario, the points that ran and their rows.
#[derive(Debug, Clone)]
pub struct RunData {
    pub scenario: Scenario,
    /// The scenario file as given (written to the report and read back by merge).
    pub scenario_text: String,
    pub seed: u64,
    pub quick: bool,
    /// Points of the full (or quick) sweep, and how many of them this data covers.
    pub points: Vec<Point>,
    pub results: Vec<PointResult>,
    /// `Some((i, n))` for a shard.
    pub shard: Option<(usize, usize)>,
    /// The findings rerun with the scenario's `[[sensitivity]]` variants (deliberately wrong models).
    pub sensitivity: Vec<Variant>,
}

/// One sensitivity variant: what it changed and the findings it produced.
#[derive(Debug, Clone)]
pub struct Variant {
    pub name: String,
    pub changes: String,
    pub findings: Vec<Finding>,
}

impl RunData {
    /// Aggregates per point with the replicates pooled: one row per point of the sweep's axes, over the
    /// queries of every replicate (point-level counters from the first replicate).
    pub fn pooled(&self) -> Vec<(Point, Aggregate)> {
        let mut groups: Vec<(Point, &PointResult, Vec<&QueryRow>)> = Vec::new();
        for r in &self.results {
            let Some(p) = self.points.iter().find(|p| p.index == r.point.point) else { continue };
            let values: Vec<(String, AxisValue)> = p.values.iter().filter(|(a, _)| a != "replicate").cloned().collect();
            match groups.iter_mut().find(|g| g.0.values == values) {
                Some(g) => g.2.extend(r.queries.iter()),
                None => groups.push((Point { index: p.index, values }, r, r.queries.iter().collect())),
            }
        }
        groups
            .into_iter()
            .map(|(p, r, q)| {
                let mut a = aggregate(&r.point, &q);
                a.multiparty = r.multiparty.clone();
                (p, a)
            })
            .collect()
    }

    /// Aggregates in point order, with their points.
    pub fn aggregates(&self) -> Vec<(&Point, Aggregate)> {
        let mut out = Vec::new();
        for r in &self.results {
            let Some(p) = self.points.iter().find(|p| p.index == r.point.point) else { continue };
            let q: Vec<&QueryRow> = r.queries.iter().collect();
            let mut a = aggregate(&r.point, &q);
            a.multiparty = r.multiparty.clone();
            out.push((p, a));
        }
        out
    }

    fn axes(&self) -> Vec<String> {
        self.points.first().map(|p| p.values.iter().map(|(a, _)| a.clone()).collect()).unwrap_or_default()
    }

    fn axis_cells(&self, index: usize) -> String {
        self.points
            .iter()
            .find(|p| p.index == index)
            .map(|p| p.values.iter().map(|(_, v)| format!(",{v}")).collect())
            .unwrap_or_default()
    }
}

// ------------------------------------------------------------------------------------------------
// CSV
// ------------------------------------------------------------------------------------------------

fn header(axes: &[String], first: &str, rest: &str) -> String {
    let mut h = first.to_string();
    for a in axes {
        h.push(',');
        h.push_str(a);
    }
    if !rest.is_empty() {
        h.push(',');
        h.push_str(rest);
    }
    h.push('\n');
    h
}

/// `queries.csv`: one row per query.
pub fn queries_csv(d: &RunData) -> String {
    let mut s = header(
        &d.axes(),
        "point",
        "rep,seed,start_s,response_ms,code,replies,members,success,coap_retx,frames,mac_retries",
    );
    for r in &d.results {
        let axes = d.axis_cells(r.point.point);
        for q in &r.queries {
            let _ = writeln!(
                s,
                "{}{axes},{},{},{},{},{},{},{},{},{},{},{}",
                q.point,
                q.rep,
                q.seed,
                fixed(q.start_s, 6),
                fixed(q.response_ms, 3),
                q.code,
                q.replies,
                q.members,
                u8::from(q.success()),
                q.coap_retx,
                q.frames,
                q.mac_retries
            );
        }
    }
    s
}

/// `points.csv`: one row per point (network-side facts of the query phase).
pub fn points_csv(d: &RunData) -> String {
    let mut s = header(
        &d.axes(),
        "point",
        "seed,created,create_ms,avg_hops,max_hops,frames,mac_retries,busy_ccas,coap_retx,drops_interference,drops_collision,drops_mac,drops_cpu,max_link_frames,max_link,max_node_frames,max_node,events,window_s,staleness_mean,staleness_max,nrp,tbt_ms,ttd_ms,throughput,goodput,energy_mj,air_bytes,dgram_loss,frags",
    );
    for r in &d.results {
        let p = &r.point;
        let _ = writeln!(
            s,
            "{}{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            p.point,
            d.axis_cells(p.point),
            p.seed,
            u8::from(p.created),
            fixed(p.create_ms, 3),
            fixed(p.avg_hops, 3),
            p.max_hops,
            p.frames,
            p.mac_retries,
            p.busy_ccas,
            p.coap_retx,
            p.drops_interference,
            p.drops_collision,
            p.drops_mac,
            p.drops_cpu,
            p.max_link_frames,
            p.max_link,
            p.max_node_frames,
            p.max_node,
            p.events,
            fixed(p.window_s, 6),
            fixed(p.staleness_mean, 4),
            fixed(p.staleness_max, 4),
            fixed(p.nrp, 0),
            fixed(p.tbt_ms, 3),
            fixed(p.ttd_ms, 3),
            fixed(p.throughput, 3),
            fixed(p.baseline.goodput, 3),
            fixed(p.baseline.energy_mj, 5),
            fixed(p.baseline.air_bytes, 2),
            fixed(p.baseline.dgram_loss, 5),
            fixed(p.baseline.frags, 0)
        );
    }
    s
}

/// `links.csv`: frames per directed radio link (link stress) during the query phase.
pub fn links_csv(d: &RunData) -> String {
    let mut s = String::from("point,from,to,frames,retransmissions,received\n");
    for r in &d.results {
        for l in &r.links {
            let _ = writeln!(s, "{},{},{},{},{},{}", l.point, l.from, l.to, l.frames, l.retransmissions, l.received);
        }
    }
    s
}

/// `nodes.csv`: load per node during the query phase.
pub fn nodes_csv(d: &RunData) -> String {
    let mut s = String::from("point,node,role,hops,frames_sent,frames_received,datagrams_forwarded\n");
    for r in &d.results {
        for n in &r.nodes {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{}",
                n.point, n.node, n.role, n.hops, n.frames_sent, n.frames_received, n.datagrams_forwarded
            );
        }
    }
    s
}

/// `aggregates.csv`: one row per point.
pub fn aggregates_csv(d: &RunData) -> String {
    let mut s = header(
        &d.axes(),
        "point",
        "queries,members,member_reliability,group_reliability,rt_min_ms,rt_p25_ms,rt_median_ms,rt_mean_ms,rt_p75_ms,rt_p95_ms,rt_p99_ms,rt_max_ms,rt_ci95_ms,rt_per_member_ms,retx_per_query,frames_per_query,link_stress_per_query,node_load_per_query,frames_per_hour,staleness,avg_hops,max_hops",
    );
    for (p, a) in d.aggregates() {
        let rt = a.rt.unwrap_or(Summary {
            n: 0,
            mean: f64::NAN,
            min: f64::NAN,
            max: f64::NAN,
            p25: f64::NAN,
            median: f64::NAN,
            p75: f64::NAN,
            p95: f64::NAN,
            p99: f64::NAN,
            stddev: f64::NAN,
            ci95: f64::NAN,
        });
        let _ = writeln!(
            s,
            "{}{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            p.index,
            d.axis_cells(p.index),
            a.queries,
            a.members,
            fixed(a.member_reliability, 3),
            fixed(a.group_reliability, 3),
            fixed(rt.min, 3),
            fixed(rt.p25, 3),
            fixed(rt.median, 3),
            fixed(rt.mean, 3),
            fixed(rt.p75, 3),
            fixed(rt.p95, 3),
            fixed(rt.p99, 3),
            fixed(rt.max, 3),
            fixed(rt.ci95, 3),
            fixed(rt.mean / a.members.max(1) as f64, 3),
            fixed(a.retx_per_query, 3),
            fixed(a.frames_per_query, 3),
            fixed(a.link_stress_per_query, 3),
            fixed(a.node_load_per_query, 3),
            fixed(a.frames_per_hour, 3),
            fixed(a.staleness, 4),
            fixed(a.avg_hops, 3),
            a.max_hops
        );
    }
    s
}

/// A parsed CSV file: header and rows as maps.
fn parse_csv(text: &str) -> Vec<BTreeMap<String, String>> {
    let mut lines = text.lines();
    let Some(head) = lines.next() else { return Vec::new() };
    let cols: Vec<&str> = head.split(',').collect();
    lines
        .filter(|l| !l.is_empty())
        .map(|l| cols.iter().zip(l.split(',')).map(|(c, v)| (c.to_string(), v.to_string())).collect())
        .collect()
}

fn field<T: std::str::FromStr>(row: &BTreeMap<String, String>, name: &str) -> Result<T, String> {
    let v = row.get(name).ok_or_else(|| format!("missing column {name}"))?;
    v.parse().map_err(|_| format!("column {name}: cannot read {v:?}"))
}

fn float(row: &BTreeMap<String, String>, name: &str) -> Result<f64, String> {
    let v = row.get(name).ok_or_else(|| format!("missing column {name}"))?;
    if v.is_empty() {
        return Ok(f64::NAN);
    }
    v.parse().map_err(|_| format!("column {name}: cannot read {v:?}"))
}

const ROLES: [&str; 3] = ["gateway", "device", "client"];

/// Reads a report directory's raw CSV files back into point results (for merge).
pub fn read_results(dir: &Path) -> Result<Vec<PointResult>, String> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).map_err(|e| format!("{}: {e}", dir.join(f).display()));
    let mut by_point: BTreeMap<usize, PointResult> = BTreeMap::new();
    for row in parse_csv(&read("points.csv")?) {
        let point = PointRow {
            point: field(&row, "point")?,
            seed: field(&row, "seed")?,
            created: field::<u8>(&row, "created")? == 1,
            create_ms: float(&row, "create_ms")?,
            avg_hops: float(&row, "avg_hops")?,
            max_hops: field(&row, "max_hops")?,
            frames: field(&row, "frames")?,
            mac_retries: field(&row, "mac_retries")?,
            busy_ccas: field(&row, "busy_ccas")?,
            coap_retx: field(&row, "coap_retx")?,
            drops_interference: field(&row, "drops_interference")?,
            drops_collision: field(&row, "drops_collision")?,
            drops_mac: field(&row, "drops_mac")?,
            drops_cpu: field(&row, "drops_cpu")?,
            max_link_frames: field(&row, "max_link_frames")?,
            max_link: field(&row, "max_link")?,
            max_node_frames: field(&row, "max_node_frames")?,
            max_node: field(&row, "max_node")?,
            events: field(&row, "events")?,
            window_s: float(&row, "window_s")?,
            staleness_mean: float(&row, "staleness_mean")?,
            staleness_max: float(&row, "staleness_max")?,
            // Absent in results written before streaming points existed.
            nrp: float(&row, "nrp").unwrap_or(f64::NAN),
            tbt_ms: float(&row, "tbt_ms").unwrap_or(f64::NAN),
            ttd_ms: float(&row, "ttd_ms").unwrap_or(f64::NAN),
            throughput: float(&row, "throughput").unwrap_or(f64::NAN),
            baseline: crate::run::BaselineFacts {
                goodput: float(&row, "goodput").unwrap_or(f64::NAN),
                energy_mj: float(&row, "energy_mj").unwrap_or(f64::NAN),
                air_bytes: float(&row, "air_bytes").unwrap_or(f64::NAN),
                dgram_loss: float(&row, "dgram_loss").unwrap_or(f64::NAN),
                frags: float(&row, "frags").unwrap_or(f64::NAN),
            },
        };
        by_point.insert(
            point.point,
            PointResult { queries: Vec::new(), point, links: Vec::new(), nodes: Vec::new(), multiparty: None },
        );
    }
    fn get(m: &mut BTreeMap<usize, PointResult>, p: usize) -> Result<&mut PointResult, String> {
        m.get_mut(&p).ok_or_else(|| format!("row for point {p} not in points.csv"))
    }
    for row in parse_csv(&read("queries.csv")?) {
        let q = QueryRow {
            point: field(&row, "point")?,
            rep: field(&row, "rep")?,
            seed: field(&row, "seed")?,
            start_s: float(&row, "start_s")?,
            response_ms: float(&row, "response_ms")?,
            code: field(&row, "code")?,
            replies: field(&row, "replies")?,
            members: field(&row, "members")?,
            coap_retx: field(&row, "coap_retx")?,
            frames: field(&row, "frames")?,
            mac_retries: field(&row, "mac_retries")?,
        };
        get(&mut by_point, q.point)?.queries.push(q);
    }
    for row in parse_csv(&read("links.csv")?) {
        let l = LinkRow {
            point: field(&row, "point")?,
            from: field(&row, "from")?,
            to: field(&row, "to")?,
            frames: field(&row, "frames")?,
            retransmissions: field(&row, "retransmissions")?,
            received: field(&row, "received")?,
        };
        get(&mut by_point, l.point)?.links.push(l);
    }
    for row in parse_csv(&read("nodes.csv")?) {
        let role: String = field(&row, "role")?;
        let n = NodeRow {
            point: field(&row, "point")?,
            node: field(&row, "node")?,
            role: ROLES.iter().find(|r| **r == role).copied().ok_or_else(|| format!("unknown role {role}"))?,
            hops: field(&row, "hops")?,
            frames_sent: field(&row, "frames_sent")?,
            frames_received: field(&row, "frames_received")?,
            datagrams_forwarded: field(&row, "datagrams_forwarded")?,
        };
        get(&mut by_point, n.point)?.nodes.push(n);
    }
    crate::multiparty::read_stats(dir, &mut by_point)?;
    Ok(by_point.into_values().collect())
}

// ------------------------------------------------------------------------------------------------
// Figures
// ------------------------------------------------------------------------------------------------

fn matches(p: &Point, filter: &BTreeMap<String, toml::Value>) -> bool {
    filter.iter().all(|(axis, want)| {
        let want = match want {
            toml::Value::Integer(i) => AxisValue::Num(*i as f64),
            toml::Value::Float(f) => AxisValue::Num(*f),
            toml::Value::String(s) => AxisValue::Text(s.clone()),
            _ => return false,
        };
        p.get(axis) == Some(&want)
    })
}

/// A short legend label: `unicast, G=10`, `ACK_TIMEOUT=500` (the legend column is narrow).
fn series_key(p: &Point, series: &[String]) -> String {
    series
        .iter()
        .filter_map(|a| {
            let v = p.get(a)?;
            Some(match a.as_str() {
                "mode" | "layout" | "usage" => v.to_string(),
                "group" => format!("G={v}"),
                "wifi_mbps" => format!("{v} Mb/s"),
                "ack_timeout_ms" => format!("ACK_TIMEOUT {v} ms"),
                "leisure_ms" => format!("leisure {v} ms"),
                "processing_delay_ms" => format!("CPU {v} ms"),
                "cca_busy_prob" => format!("CCA {v}"),
                "corruption_prob" => format!("corrupt {v}"),
                "rx_queue" => format!("queue {v}"),
                "follow" if v.num().is_some() => format!("poll every {v} s"),
                "follow" => v.to_string(),
                other => format!("{other}={v}"),
            })
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Renders one figure of the scenario as SVG.
pub fn figure_svg(f: &Figure, aggs: &[(&Point, Aggregate)]) -> String {
    let metric = Metric::parse(&f.metric).unwrap_or(Metric::ResponseTime);
    let selected: Vec<&(&Point, Aggregate)> = aggs.iter().filter(|(p, _)| matches(p, &f.filter)).collect();
    if f.kind == "box" {
        let mut plot = BoxPlot::new(&f.title, "response time (s)");
        let mut keys: Vec<String> = Vec::new();
        for (p, a) in &selected {
            let key = series_key(p, &f.series);
            if keys.contains(&key) {
                continue;
            }
            keys.push(key.clone());
            if let Some(rt) = a.rt {
                let five = rt.tukey().map(|v| v / 1000.0);
                plot = plot.entry(
                    if key.is_empty() { "all".into() } else { key.replace(", ", " ") },
                    five,
                    rt.mean / 1000.0,
                );
            }
        }
        return plot.to_svg();
    }
    let mut chart = LineChart::new(&f.title, axis_label(&f.x), metric.label());
    // Per series and x: the replicates' values. One replicate: its value and its own error bar (95 % CI);
    // several: their mean, and whiskers from the lowest to the highest replicate (the spread of seeds).
    type Cell = (f64, Vec<(f64, Option<(f64, f64)>)>);
    let mut groups: Vec<(String, Vec<Cell>)> = Vec::new();
    for (p, a) in &selected {
        let Some(x) = p.get(&f.x).and_then(AxisValue::num) else { continue };
        let key = series_key(p, &f.series);
        let idx = match groups.iter().position(|g| g.0 == key) {
            Some(i) => i,
            None => {
                groups.push((key, Vec::new()));
                groups.len() - 1
            }
        };
        let cells = &mut groups[idx].1;
        let cell = match cells.iter().position(|c| c.0 == x) {
            Some(i) => &mut cells[i],
            None => {
                cells.push((x, Vec::new()));
                cells.last_mut().expect("just pushed")
            }
        };
        cell.1.push(metric.of(a));
    }
    for (key, cells) in groups {
        let label = if key.is_empty() { "corral (sim)".to_string() } else { key };
        let mut pts = Vec::new();
        let mut errs = Vec::new();
        for (x, vals) in cells {
            let ys: Vec<f64> = vals.iter().map(|v| v.0).filter(|y| y.is_finite()).collect();
            let y = if ys.is_empty() { f64::NAN } else { ys.iter().sum::<f64>() / ys.len() as f64 };
            let err = if vals.len() > 1 {
                ys.iter()
                    .copied()
                    .fold(None, |acc: Option<(f64, f64)>, v| Some(acc.map_or((v, v), |(a, b)| (a.min(v), b.max(v)))))
            } else {
                vals.first().and_then(|v| v.1)
            };
            pts.push((x, y));
            errs.push(err.unwrap_or((f64::NAN, f64::NAN)));
        }
        let has_err = errs.iter().any(|e| e.0.is_finite());
        let mut s = Series::new(label, pts);
        if has_err {
            s = s.with_errors(errs);
        }
        chart = chart.series(s);
    }
    for (label, pts) in &f.paper {
        chart = chart.series(Series::new(format!("paper: {label}"), pts.clone()));
    }
    if let Some((a, b, label)) = &f.band {
        chart = chart.band(*a, *b, label.clone());
    }
    if let Some((lo, hi)) = f.y_range {
        chart = chart.y_range(lo, hi);
    }
    chart.log_y = f.log_y;
    chart.to_svg()
}

fn axis_label(axis: &str) -> String {
    match axis {
        "delay" => "delay between requests (ms)".into(),
        "wifi_mbps" => "Wi-Fi interference (Mb/s)".into(),
        "group" => "group size (members)".into(),
        "ack_timeout_ms" => "ACK_TIMEOUT (ms)".into(),
        "leisure_ms" => "leisure (ms)".into(),
        "replicate" => "replicate (seed; on a floor: the floor)".into(),
        "processing_delay_ms" => "processing delay (ms)".into(),
        other => other.replace('_', " "),
    }
}

// ------------------------------------------------------------------------------------------------
// Summary, JSON, HTML
// ------------------------------------------------------------------------------------------------

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// `summary.txt`: what ran, the findings, and the headline numbers per point.
pub fn summary_text(d: &RunData, found: &[Finding]) -> String {
    let s = &d.scenario;
    let aggs = d.pooled();
    let queries: usize = aggs.iter().map(|(_, a)| a.queries).sum();
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
    let _ = writeln!(out);
    out.push_str(&findings_text(found));
    out.push_str(&calibration_text(s));
    out.push_str(&sensitivity_text(found, &d.sensitivity));
    if !found.is_empty() {
        let _ = writeln!(out);
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
    out
}

/// `summary.json`, for scripts.
pub fn summary_json(d: &RunData, found: &[Finding]) -> serde_json::Value {
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
                    "min": s.min, "p25": s.p25, "median": s.median, "mean": s.mean, "p75": s.p75,
                    "p95": s.p95, "p99": s.p99, "max": s.max, "ci95": s.ci95,
                })),
                "retransmissions_per_query": finite(a.retx_per_query),
                "frames_per_query": finite(a.frames_per_query),
                "link_stress_per_query": finite(a.link_stress_per_query),
            })
        })
        .collect();
    serde_json::json!({
        "scenario": d.scenario.name,
        "title": d.scenario.title,
        "seed": d.seed,
        "quick": d.quick,
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

fn finite(x: f64) -> serde_json::Value {
    if x.is_finite() {
        serde_json::json!(x)
    } else {
        serde_json::Value::Null
    }
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
        "measures": f.measures.iter().map(|m| serde_json::json!({
            "what": m.what,
            "corral": finite(m.mean),
            "corral_min": finite(m.min),
            "corral_max": finite(m.max),
            "paper": m.paper,
            "unit": m.unit,
            "distance": m.distance(),
            "held": m.held,
            "of": m.of,
        })).collect::<Vec<_>>(),
        "explain": if matches!(f.kind, Kind::Disagrees | Kind::Fitted) { f.explain.as_str() } else { "" },
    })
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
        }
    }
    out
}

/// The calibration set: its constants, the paper numbers they were fitted to, and every source.
pub fn calibration_text(s: &Scenario) -> String {
    let c = &s.calibration;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\ncalibration{}: CPU {} ms per received datagram, {} waiting slot(s), Wi-Fi CCA-busy {}, corruption {} per burst",
        if c.set.is_empty() { String::new() } else { format!(" (set \"{}\")", c.set) },
        c.processing_delay_ms,
        c.rx_queue,
        c.cca_busy_prob,
        c.corruption_prob
    );
    for t in &c.fitted_to {
        let _ = writeln!(out, "    fitted to: {t}");
    }
    for t in &c.sources {
        let _ = writeln!(out, "    source:    {t}");
    }
    out
}

/// The sensitivity table: each deliberately wrong model and the findings whose kind it changes.
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
                if other == mine {
                    format!("{} {mine}", f.check)
                } else {
                    format!("{} {mine} → {other}", f.check)
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

fn calibration_html(s: &Scenario) -> String {
    let c = &s.calibration;
    let mut h = String::from("<h2>Calibration</h2>\n");
    let _ = writeln!(
        h,
        "<p>Set <b>{}</b>: {} ms of CPU per received datagram, {} waiting slot(s), Wi-Fi CCA-busy probability {}, corruption {} per burst. Findings on the numbers below are <b>FITTED</b>: they agree by construction and are never counted as agreement.</p>",
        esc(if c.set.is_empty() { "(none)" } else { &c.set }),
        c.processing_delay_ms,
        c.rx_queue,
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
            let _ = write!(h, "<td{style}>{k}</td>");
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
th{{background:#f0f0f0}} code{{background:#f3f3f3;padding:1px 4px}}
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
    let mode = if d.quick { "quick (<code>--quick</code>: few repetitions)" } else { "full" };
    let shard = d.shard.map(|(i, n)| format!(", shard {i}/{n}")).unwrap_or_default();
    let _ = writeln!(
        h,
        "<p>Scenario <code>{}</code>, {mode}, seed {}{shard}: {} of {} sweep points. Reproduce with <code>corral lab run {}{} --seed {}</code>. Calibration: processing delay {} ms, rx queue {}, Wi-Fi CCA-busy probability {}, corruption probability {} per burst{}.</p>",
        esc(&s.name),
        d.seed,
        d.results.len(),
        d.points.len(),
        esc(&s.name),
        if d.quick { " --quick" } else { "" },
        d.seed,
        s.calibration.processing_delay_ms,
        s.calibration.rx_queue,
        s.calibration.cca_busy_prob,
        s.calibration.corruption_prob,
        if s.calibration.set.is_empty() { String::new() } else { format!(" (set “{}”)", esc(&s.calibration.set)) }
    );
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
    if let Some((_, section)) = crate::multiparty::figures::section(d) {
        h.push_str(&section);
    }
    let loose: Vec<&Finding> = found.iter().filter(|f| !s.figures.iter().any(|g| g.id == f.figure)).collect();
    if !loose.is_empty() {
        h.push_str("<h2>Findings</h2>\n");
        for f in loose {
            h.push_str(&finding_html(f));
        }
    }
    h.push_str(&calibration_html(s));
    h.push_str(&sensitivity_html(found, &d.sensitivity));
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

/// Writes the whole report directory; returns the findings.
pub fn write_report(dir: &Path, d: &RunData) -> Result<Vec<Finding>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let write = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text).map_err(|e| format!("{}: {e}", dir.join(name).display()))
    };
    write("scenario.toml", &d.scenario_text)?;
    write("queries.csv", &queries_csv(d))?;
    write("points.csv", &points_csv(d))?;
    write("links.csv", &links_csv(d))?;
    write("nodes.csv", &nodes_csv(d))?;
    write("aggregates.csv", &aggregates_csv(d))?;
    if let Some(json) = crate::multiparty::stats_json(&d.results) {
        write(crate::multiparty::STATS_FILE, &json)?;
    }
    let complete = d.results.len() == d.points.len();
    let aggs = d.aggregates();
    let found = if complete { findings::evaluate(&d.scenario, &aggs) } else { Vec::new() };
    let pooled = d.pooled();
    let pooled: Vec<(&Point, Aggregate)> = pooled.iter().map(|(p, a)| (p, a.clone())).collect();
    let mut figures = Vec::new();
    for f in &d.scenario.figures {
        // Box plots pool the replicates' queries; line charts show the replicates' spread.
        let svg = figure_svg(f, if f.kind == "box" { &pooled } else { &aggs });
        write(&format!("{}.svg", f.id), &svg)?;
        figures.push((f.id.clone(), svg));
    }
    if let Some((svgs, _)) = crate::multiparty::figures::section(d) {
        for (id, svg) in svgs {
            write(&format!("{id}.svg"), &svg)?;
        }
    }
    write("summary.txt", &summary_text(d, &found))?;
    let json = serde_json::to_string_pretty(&summary_json(d, &found)).unwrap_or_default();
    write("summary.json", &(json + "\n"))?;
    write("index.html", &html(d, &found, &figures))?;
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
