//! The raw files of a run — `queries.csv`, `points.csv`, `links.csv`, `nodes.csv`, `aggregates.csv` and, for
//! seed 001, `multiparty.json` — and reading them back into rows (for `corral lab merge`).
//!
//! # What it owns
//! One column list per file: each [`Column`] names a column, writes a row's value and reads it back, so
//! the writer and the reader cannot disagree. Numbers are written with fixed precision and rows in point
//! order; nothing depends on the wall clock or on the thread that ran a point — the same command writes
//! byte-identical files. It never runs a simulation.

use crate::data::RunData;
use crate::error::DataError;
use crate::record::{
    fixed, BaselineFacts, ChurnFacts, DtlsFacts, EmulatedFacts, Facts, LinkRow, MpStats, NodeRole, NodeRow,
    PointResult, PointRow, QueryRow, Staleness, StreamFacts,
};
use crate::results::Aggregate;
use crate::scenario::{family_metrics, Family};
use crate::stats::Summary;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// One column of a file: its name, how a row's value is written, and how it is read back into a row
/// (`None`: a value derived from the others, written for readers of the file and not read back).
pub struct Column<R> {
    pub name: &'static str,
    pub write: fn(&R) -> String,
    pub read: Option<Read<R>>,
}

/// Reads a cell into its row.
pub type Read<R> = fn(&mut R, &str) -> Result<(), Unreadable>;

/// A cell that does not read back as its column's value: what it held. One fault, so no enum; the String
/// is the cell's text (not a message), quoted in [`DataError::Malformed`]'s problem with its column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable(pub String);

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot read {:?}", self.0)
    }
}

/// A whole number or a word.
fn parse<T: std::str::FromStr>(v: &str) -> Result<T, Unreadable> {
    v.parse().map_err(|_| Unreadable(v.to_string()))
}

/// A measured value: empty is NaN.
fn float(v: &str) -> Result<f64, Unreadable> {
    if v.is_empty() {
        Ok(f64::NAN)
    } else {
        parse(v)
    }
}

/// A measured value that may be absent: empty is `None`.
fn optional(v: &str) -> Result<Option<f64>, Unreadable> {
    if v.is_empty() {
        Ok(None)
    } else {
        parse(v).map(Some)
    }
}

macro_rules! column {
    // Written only.
    ($name:literal, $write:expr) => {
        Column { name: $name, write: $write, read: None }
    };
    ($name:literal, $write:expr, $read:expr) => {
        Column { name: $name, write: $write, read: Some($read) }
    };
}

/// A field written as it displays and parsed back.
macro_rules! int {
    ($name:literal, $field:ident) => {
        column!($name, |r| r.$field.to_string(), |r, v| {
            r.$field = parse(v)?;
            Ok(())
        })
    };
}

/// A measured field written with fixed decimals, empty for NaN.
macro_rules! real {
    ($name:literal, $field:ident, $decimals:literal) => {
        column!($name, |r| fixed(r.$field, $decimals), |r, v| {
            r.$field = float(v)?;
            Ok(())
        })
    };
}

/// A field of one family's facts, for the rows whose facts are that family's (empty in the others').
macro_rules! fact {
    ($name:literal, $variant:ident, $field:ident, $write:expr, $parse:expr) => {
        column!(
            $name,
            |p| match &p.facts {
                Facts::$variant(f) => ($write)(f.$field),
                _ => String::new(),
            },
            |p, v| {
                if let Facts::$variant(f) = &mut p.facts {
                    f.$field = $parse(v)?;
                }
                Ok(())
            }
        )
    };
}

/// A field of text.
macro_rules! text {
    ($name:literal, $field:ident) => {
        column!($name, |r| r.$field.clone(), |r, v| {
            r.$field = v.to_string();
            Ok(())
        })
    };
}

/// `queries.csv`: one row per query (or notification, reading, transaction, request).
pub const QUERY_COLUMNS: &[Column<QueryRow>] = &[
    int!("point", point),
    int!("rep", rep),
    int!("seed", seed),
    real!("start_s", start_s, 6),
    real!("response_ms", response_ms, 3),
    text!("code", code),
    int!("replies", replies),
    int!("members", members),
    column!("success", |q| u8::from(q.success()).to_string()),
    int!("coap_retx", coap_retx),
    int!("frames", frames),
    int!("mac_retries", mac_retries),
];

/// `points.csv`: one row per point — the common counters, then every family's facts (empty where the
/// point's family does not measure them).
pub const POINT_COLUMNS: &[Column<PointRow>] = &[
    int!("point", point),
    int!("seed", seed),
    column!("created", |p| u8::from(p.created).to_string(), |p, v| {
        p.created = parse::<u8>(v)? == 1;
        Ok(())
    }),
    real!("create_ms", create_ms, 3),
    real!("avg_hops", avg_hops, 3),
    int!("max_hops", max_hops),
    int!("frames", frames),
    int!("mac_retries", mac_retries),
    int!("busy_ccas", busy_ccas),
    int!("coap_retx", coap_retx),
    int!("drops_interference", drops_interference),
    int!("drops_collision", drops_collision),
    int!("drops_mac", drops_mac),
    int!("drops_cpu", drops_cpu),
    int!("max_link_frames", max_link_frames),
    text!("max_link", max_link),
    int!("max_node_frames", max_node_frames),
    int!("max_node", max_node),
    int!("events", events),
    real!("window_s", window_s, 6),
    // [entity] following: read back as a measurement only when the mean is there.
    column!("staleness_mean", |p| p.facts.staleness().map_or(String::new(), |s| fixed(s.mean, 4)), |p, v| {
        if let (Facts::Entity { staleness }, Some(mean)) = (&mut p.facts, optional(v)?) {
            *staleness = Some(Staleness { mean, max: staleness.map_or(f64::NAN, |s| s.max) });
        }
        Ok(())
    }),
    column!("staleness_max", |p| p.facts.staleness().map_or(String::new(), |s| fixed(s.max, 4)), |p, v| {
        if let Facts::Entity { staleness: Some(s) } = &mut p.facts {
            s.max = float(v)?;
        }
        Ok(())
    }),
    // [stream]
    fact!("nrp", Stream, nrp, |x: u64| fixed(x as f64, 0), parse),
    fact!("tbt_ms", Stream, tbt_ms, |x: f64| fixed(x, 3), float),
    fact!("ttd_ms", Stream, ttd_ms, |x: Option<f64>| x.map_or(String::new(), |t| fixed(t, 3)), optional),
    // [emulated]
    fact!("throughput", Emulated, throughput, |x: f64| fixed(x, 3), float),
    // [baseline]
    fact!("goodput", Baseline, goodput, |x: f64| fixed(x, 3), float),
    fact!("energy_mj", Baseline, energy_mj, |x: f64| fixed(x, 5), float),
    fact!("air_bytes", Baseline, air_bytes, |x: f64| fixed(x, 2), float),
    fact!("dgram_loss", Baseline, dgram_loss, |x: f64| fixed(x, 5), float),
    fact!("frags", Baseline, frags, |x: f64| fixed(x, 0), float),
    // [churn]
    fact!("churn_lifetime_s", Churn, lifetime_s, |x: f64| fixed(x, 0), float),
    fact!("churn_queries", Churn, queries, |x: u64| x.to_string(), parse),
    fact!("follow_full", Churn, follow_full, |x: u64| x.to_string(), parse),
    fact!("follow_partial", Churn, follow_partial, |x: u64| x.to_string(), parse),
    fact!("fixed_full", Churn, fixed_full, |x: u64| x.to_string(), parse),
    fact!("fixed_partial", Churn, fixed_partial, |x: u64| x.to_string(), parse),
    fact!("follow_stale_s", Churn, follow_stale_s, |x: f64| fixed(x, 0), float),
    fact!("follow_missing_s", Churn, follow_missing_s, |x: f64| fixed(x, 0), float),
    fact!("fixed_stale_s", Churn, fixed_stale_s, |x: f64| fixed(x, 0), float),
    fact!("fixed_missing_s", Churn, fixed_missing_s, |x: f64| fixed(x, 0), float),
    fact!("join_mean_s", Churn, join_mean_s, |x: f64| fixed(x, 3), float),
    fact!("join_max_s", Churn, join_max_s, |x: f64| fixed(x, 3), float),
    fact!("clean_leave_max_s", Churn, clean_leave_max_s, |x: f64| fixed(x, 3), float),
    fact!("vanish_leave_max_s", Churn, vanish_leave_max_s, |x: f64| fixed(x, 3), float),
    fact!("vanish_unremoved", Churn, vanish_unremoved, |x: u64| x.to_string(), parse),
    fact!("rd_frames", Churn, rd_frames, |x: u64| x.to_string(), parse),
    fact!("rd_bytes", Churn, rd_bytes, |x: u64| x.to_string(), parse),
    fact!("query_frames", Churn, query_frames, |x: u64| x.to_string(), parse),
    fact!("query_bytes", Churn, query_bytes, |x: u64| x.to_string(), parse),
    fact!("rd_notifications", Churn, notifications, |x: u64| x.to_string(), parse),
    // [dtls]
    fact!("dtls_hops", Dtls, hops, |x: f64| fixed(x, 0), float),
    fact!("first_ms", Dtls, first_ms, |x: f64| fixed(x, 3), float),
    fact!("first_frames", Dtls, frames, |x: u64| x.to_string(), parse),
    fact!("first_air_bytes", Dtls, air_bytes, |x: u64| x.to_string(), parse),
    fact!("first_datagrams", Dtls, datagrams, |x: u64| x.to_string(), parse),
    fact!("largest_datagram", Dtls, largest, |x: u64| x.to_string(), parse),
    fact!("largest_frames", Dtls, largest_frames, |x: u64| x.to_string(), parse),
    fact!("flights_retx", Dtls, flights_retx, |x: u64| x.to_string(), parse),
    fact!("handshakes", Dtls, handshakes, |x: u64| x.to_string(), parse),
];

/// `links.csv`: frames per directed radio link (link stress) during the query phase.
pub const LINK_COLUMNS: &[Column<LinkRow>] = &[
    int!("point", point),
    int!("from", from),
    int!("to", to),
    int!("frames", frames),
    int!("retransmissions", retransmissions),
    int!("received", received),
];

/// `nodes.csv`: load per node during the query phase.
pub const NODE_COLUMNS: &[Column<NodeRow>] = &[
    int!("point", point),
    int!("node", node),
    column!("role", |n| n.role.to_string(), |n, v| {
        n.role = NodeRole::parse(v).ok_or_else(|| Unreadable(v.to_string()))?;
        Ok(())
    }),
    int!("hops", hops),
    int!("frames_sent", frames_sent),
    int!("frames_received", frames_received),
    int!("datagrams_forwarded", datagrams_forwarded),
];

fn rt(a: &Aggregate, f: fn(&Summary) -> f64) -> f64 {
    a.rt.as_ref().map_or(f64::NAN, f)
}

/// `aggregates.csv`: one row per point (written for readers, never read back: merge recomputes it).
pub const AGGREGATE_COLUMNS: &[Column<Aggregate>] = &[
    column!("point", |a| a.point.to_string()),
    column!("queries", |a| a.queries.to_string()),
    column!("members", |a| a.members.to_string()),
    column!("member_reliability", |a| fixed(a.member_reliability, 3)),
    column!("group_reliability", |a| fixed(a.group_reliability, 3)),
    column!("rt_min_ms", |a| fixed(rt(a, |s| s.min), 3)),
    column!("rt_p25_ms", |a| fixed(rt(a, |s| s.p25), 3)),
    column!("rt_median_ms", |a| fixed(rt(a, |s| s.median), 3)),
    column!("rt_mean_ms", |a| fixed(rt(a, |s| s.mean), 3)),
    column!("rt_p75_ms", |a| fixed(rt(a, |s| s.p75), 3)),
    column!("rt_p95_ms", |a| fixed(rt(a, |s| s.p95), 3)),
    column!("rt_p99_ms", |a| fixed(rt(a, |s| s.p99), 3)),
    column!("rt_max_ms", |a| fixed(rt(a, |s| s.max), 3)),
    column!("rt_ci95_ms", |a| fixed(rt(a, |s| s.ci95), 3)),
    column!("rt_per_member_ms", |a| fixed(rt(a, |s| s.mean) / a.members.max(1) as f64, 3)),
    column!("retx_per_query", |a| fixed(a.retx_per_query, 3)),
    column!("frames_per_query", |a| fixed(a.frames_per_query, 3)),
    column!("link_stress_per_query", |a| fixed(a.link_stress_per_query, 3)),
    column!("node_load_per_query", |a| fixed(a.node_load_per_query, 3)),
    column!("frames_per_hour", |a| fixed(a.frames_per_hour, 3)),
    column!("staleness", |a| fixed(a.staleness(), 4)),
    column!("avg_hops", |a| fixed(a.avg_hops, 3)),
    column!("max_hops", |a| a.max_hops.to_string()),
];

/// A file of `columns`, one line per row; a file with `axes` has them after its first column (the
/// point), with each row's values given by `values`.
fn table<'a, R: 'a>(
    columns: &[Column<R>],
    axes: &[String],
    rows: impl IntoIterator<Item = &'a R>,
    values: impl Fn(&R) -> String,
) -> String {
    let mut s = String::new();
    for (i, c) in columns.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(c.name);
        if i == 0 {
            for a in axes {
                s.push(',');
                s.push_str(a);
            }
        }
    }
    s.push('\n');
    for r in rows {
        for (i, c) in columns.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str(&(c.write)(r));
            if i == 0 {
                s.push_str(&values(r));
            }
        }
        s.push('\n');
    }
    s
}

/// The axis cells of point `index`: `,v1,v2…`.
fn axis_cells(d: &RunData, index: usize) -> String {
    d.axis_values(index).into_iter().map(|v| format!(",{v}")).collect()
}

/// `queries.csv`.
pub fn queries_csv(d: &RunData) -> String {
    table(QUERY_COLUMNS, &d.axes(), d.results.iter().flat_map(|r| &r.queries), |q| axis_cells(d, q.point))
}

/// `points.csv`.
pub fn points_csv(d: &RunData) -> String {
    table(POINT_COLUMNS, &d.axes(), d.results.iter().map(|r| &r.point), |p| axis_cells(d, p.point))
}

/// `links.csv`.
pub fn links_csv(d: &RunData) -> String {
    table(LINK_COLUMNS, &[], d.results.iter().flat_map(|r| &r.links), |_| String::new())
}

/// `nodes.csv`.
pub fn nodes_csv(d: &RunData) -> String {
    table(NODE_COLUMNS, &[], d.results.iter().flat_map(|r| &r.nodes), |_| String::new())
}

/// `aggregates.csv`: one row per point, its replicates apart.
/// After the per-query columns, one per family metric the scenario's figures plot ([`family_metrics`]:
/// `throughput`, `nrp`, `goodput`, …), named as the scenario names it.
pub fn aggregates_csv(d: &RunData) -> String {
    let aggs: Vec<Aggregate> = d.aggregates().into_iter().map(|(_, a)| a).collect();
    let metrics = family_metrics(&d.scenario.figures);
    let base = table(AGGREGATE_COLUMNS, &d.axes(), &aggs, |a| axis_cells(d, a.point));
    let mut out = String::with_capacity(base.len());
    let mut lines = base.lines();
    if let Some(head) = lines.next() {
        out.push_str(head);
        metrics.iter().for_each(|m| out.push_str(&format!(",{}", m.name())));
        out.push('\n');
    }
    for (line, a) in lines.zip(&aggs) {
        out.push_str(line);
        metrics.iter().for_each(|m| out.push_str(&format!(",{}", fixed(a.metric(*m).0, 4))));
        out.push('\n');
    }
    out
}

/// The file that keeps every seed-001 point's [`MpStats`], so that `corral lab merge` has them too.
pub const MULTIPARTY_FILE: &str = "multiparty.json";

/// `multiparty.json`: `[{"point": i, "stats": …}, …]` in point order, or `None` without seed-001 points.
pub fn multiparty_json(results: &[PointResult]) -> Option<String> {
    let rows: Vec<serde_json::Value> = results
        .iter()
        .filter_map(|r| {
            let m = r.point.facts.multiparty()?;
            Some(serde_json::json!({"point": r.point.point, "stats": m.as_ref()}))
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    serde_json::to_string(&rows).ok().map(|s| s + "\n")
}

/// A file's rows, each as its column → value map.
fn parse_csv(text: &str) -> Vec<BTreeMap<&str, &str>> {
    let mut lines = text.lines();
    let Some(head) = lines.next() else { return Vec::new() };
    let cols: Vec<&str> = head.split(',').collect();
    lines.filter(|l| !l.is_empty()).map(|l| cols.iter().copied().zip(l.split(',')).collect()).collect()
}

/// Reads every row of `file` in `dir` into a row made by `blank` and filled by `columns`. `blank`'s error
/// is the problem text of [`DataError::Malformed`], which is only ever shown to a person.
fn read_rows<R>(
    dir: &Path,
    file: &str,
    columns: &[Column<R>],
    mut blank: impl FnMut(&BTreeMap<&str, &str>) -> Result<R, String>,
) -> Result<Vec<R>, DataError> {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path).map_err(|source| DataError::Io { path: path.clone(), source })?;
    let malformed = |problem: String| DataError::Malformed { path: path.clone(), problem };
    let mut out = Vec::new();
    for fields in parse_csv(&text) {
        let mut row = blank(&fields).map_err(malformed)?;
        for c in columns {
            let Some(read) = c.read else { continue };
            let v = fields.get(c.name).ok_or_else(|| malformed(format!("missing column {}", c.name)))?;
            read(&mut row, v).map_err(|e| malformed(format!("column {}: {e}", c.name)))?;
        }
        out.push(row);
    }
    Ok(out)
}

/// Reads a report directory's raw files back into point results (for merge); `family` is the scenario's,
/// which says what `points.csv`'s facts columns hold.
pub fn read_results(dir: &Path, family: Family) -> Result<Vec<PointResult>, DataError> {
    let mut stats = if family == Family::Multiparty { read_multiparty(dir)? } else { BTreeMap::new() };
    let mut by_point: BTreeMap<usize, PointResult> = BTreeMap::new();
    let points = read_rows(dir, "points.csv", POINT_COLUMNS, |fields| {
        let point = fields.get("point").map_or(Ok(0), |v| parse(v)).map_err(|e| format!("column point: {e}"))?;
        let facts = match family {
            Family::Entity => Facts::Entity { staleness: None },
            Family::Proxy => Facts::Proxy,
            Family::Stream => Facts::Stream(StreamFacts { nrp: 0, tbt_ms: f64::NAN, ttd_ms: None }),
            Family::Emulated => Facts::Emulated(EmulatedFacts { throughput: f64::NAN }),
            Family::Baseline => Facts::Baseline(BaselineFacts::default()),
            Family::Churn => Facts::Churn(ChurnFacts::empty()),
            Family::Dtls => Facts::Dtls(DtlsFacts::empty()),
            Family::Multiparty => Facts::Multiparty(
                stats.remove(&point).ok_or_else(|| format!("point {point} has no stats in {MULTIPARTY_FILE}"))?,
            ),
        };
        Ok(PointRow::new(point, 0, facts))
    })?;
    for point in points {
        let r = PointResult { queries: Vec::new(), point, links: Vec::new(), nodes: Vec::new() };
        by_point.insert(r.point.point, r);
    }
    let missing = |file: &str, p: usize| DataError::Malformed {
        path: dir.join(file),
        problem: format!("row for point {p} not in points.csv"),
    };
    let blank_query = |_: &BTreeMap<&str, &str>| {
        Ok(QueryRow {
            point: 0,
            rep: 0,
            seed: 0,
            start_s: f64::NAN,
            response_ms: f64::NAN,
            code: String::new(),
            replies: 0,
            members: 0,
            coap_retx: 0,
            frames: 0,
            mac_retries: 0,
        })
    };
    for q in read_rows(dir, "queries.csv", QUERY_COLUMNS, blank_query)? {
        by_point.get_mut(&q.point).ok_or_else(|| missing("queries.csv", q.point))?.queries.push(q);
    }
    let blank_link =
        |_: &BTreeMap<&str, &str>| Ok(LinkRow { point: 0, from: 0, to: 0, frames: 0, retransmissions: 0, received: 0 });
    for l in read_rows(dir, "links.csv", LINK_COLUMNS, blank_link)? {
        by_point.get_mut(&l.point).ok_or_else(|| missing("links.csv", l.point))?.links.push(l);
    }
    let blank_node = |_: &BTreeMap<&str, &str>| {
        Ok(NodeRow {
            point: 0,
            node: 0,
            role: NodeRole::Device,
            hops: 0,
            frames_sent: 0,
            frames_received: 0,
            datagrams_forwarded: 0,
        })
    };
    for n in read_rows(dir, "nodes.csv", NODE_COLUMNS, blank_node)? {
        by_point.get_mut(&n.point).ok_or_else(|| missing("nodes.csv", n.point))?.nodes.push(n);
    }
    Ok(by_point.into_values().collect())
}

/// The stats of a report directory's `multiparty.json` by point (none if it has no such file).
fn read_multiparty(dir: &Path) -> Result<BTreeMap<usize, Arc<MpStats>>, DataError> {
    let path = dir.join(MULTIPARTY_FILE);
    let Ok(text) = std::fs::read_to_string(&path) else { return Ok(BTreeMap::new()) };
    #[derive(serde::Deserialize)]
    struct Row {
        point: usize,
        stats: MpStats,
    }
    let rows: Vec<Row> =
        serde_json::from_str(&text).map_err(|e| DataError::Malformed { path: path.clone(), problem: e.to_string() })?;
    Ok(rows.into_iter().map(|r| (r.point, Arc::new(r.stats))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The writer and the reader of `points.csv` agree for every family's facts.
    #[test]
    fn every_familys_point_row_reads_back_as_written() {
        let facts = [
            (Family::Entity, Facts::Entity { staleness: Some(Staleness { mean: 0.0123, max: 0.5 }) }),
            (Family::Entity, Facts::Entity { staleness: None }),
            (Family::Proxy, Facts::Proxy),
            (Family::Stream, Facts::Stream(StreamFacts { nrp: 62, tbt_ms: 1500.25, ttd_ms: Some(300000.5) })),
            (Family::Stream, Facts::Stream(StreamFacts { nrp: 0, tbt_ms: 0.0, ttd_ms: None })),
            (Family::Emulated, Facts::Emulated(EmulatedFacts { throughput: 2176.067 })),
            (
                Family::Churn,
                Facts::Churn(ChurnFacts {
                    lifetime_s: 60.0,
                    queries: 12,
                    follow_full: 11,
                    fixed_partial: 9,
                    follow_stale_s: 130.0,
                    join_max_s: 2.5,
                    vanish_unremoved: 1,
                    rd_frames: 400,
                    rd_bytes: 36000,
                    notifications: 7,
                    ..ChurnFacts::empty()
                }),
            ),
            (
                Family::Dtls,
                Facts::Dtls(DtlsFacts {
                    hops: 3.0,
                    first_ms: 182.25,
                    frames: 36,
                    air_bytes: 3474,
                    datagrams: 8,
                    largest: 138,
                    largest_frames: 2,
                    flights_retx: 1,
                    handshakes: 1,
                }),
            ),
            (Family::Dtls, Facts::Dtls(DtlsFacts { hops: 1.0, ..DtlsFacts::empty() })),
            (
                Family::Baseline,
                Facts::Baseline(BaselineFacts {
                    goodput: 812.5,
                    energy_mj: 0.12345,
                    air_bytes: 130.25,
                    dgram_loss: f64::NAN,
                    frags: 1.0,
                }),
            ),
        ];
        for (i, (family, facts)) in facts.into_iter().enumerate() {
            let row = PointRow { frames: 7, max_link: "0->1".into(), ..PointRow::new(i, 42, facts) };
            let dir = std::env::temp_dir().join(format!("corral-lab-csv-{}-{i}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let header = |cols: &[Column<PointRow>]| cols.iter().map(|c| c.name).collect::<Vec<_>>().join(",");
            let line = POINT_COLUMNS.iter().map(|c| (c.write)(&row)).collect::<Vec<_>>().join(",");
            std::fs::write(dir.join("points.csv"), format!("{}\n{line}\n", header(POINT_COLUMNS))).unwrap();
            for f in ["queries.csv", "links.csv", "nodes.csv"] {
                std::fs::write(dir.join(f), "point\n").unwrap();
            }
            let back = read_results(&dir, family).unwrap();
            let _ = std::fs::remove_dir_all(&dir);
            // NaN never equals itself: compare the written text.
            let again = POINT_COLUMNS.iter().map(|c| (c.write)(&back[0].point)).collect::<Vec<_>>().join(",");
            assert_eq!(again, line, "{family:?}");
            assert_eq!(std::mem::discriminant(&back[0].point.facts), std::mem::discriminant(&row.facts));
        }
    }
}
