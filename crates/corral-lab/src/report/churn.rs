//! The `[churn]` part of a report (issue 32): per lifetime, the means over the replicates of what each
//! entity answered and how far its members were from the devices present, how fast the following entity
//! took in and let go of devices, and the directory's radio cost against the queries'.
//!
//! Owns the table's rows and their text and HTML forms; never runs anything.

use crate::data::RunData;
use crate::findings::number;
use crate::record::ChurnFacts;
use std::fmt::Write as _;

/// How a column's value is taken from one replicate's facts.
type Value = fn(&ChurnFacts) -> f64;

/// The table's columns: a header and its value (the mean of the replicates').
const COLUMNS: &[(&str, Value)] = &[
    ("full answers, following (%)", |f| 100.0 * f.follow_full as f64 / f.queries as f64),
    ("full answers, fixed (%)", |f| 100.0 * f.fixed_full as f64 / f.queries as f64),
    ("member-s off, following", |f| f.follow_stale_s + f.follow_missing_s),
    ("member-s off, fixed", |f| f.fixed_stale_s + f.fixed_missing_s),
    ("arrival → member, max (s)", |f| f.join_max_s),
    ("DELETE → removed, max (s)", |f| f.clean_leave_max_s),
    ("silent → removed, max (s)", |f| f.vanish_leave_max_s),
    ("directory frames", |f| f.rd_frames as f64),
    ("directory bytes", |f| f.rd_bytes as f64),
    ("query frames", |f| f.query_frames as f64),
    ("query bytes", |f| f.query_bytes as f64),
    ("notifications (loopback)", |f| f.notifications as f64),
];

/// One row per lifetime, in sweep order: the lifetime and each column's mean over the replicates.
fn rows(d: &RunData) -> Vec<(f64, Vec<f64>)> {
    let mut groups: Vec<(f64, Vec<ChurnFacts>)> = Vec::new();
    for (_, a) in d.aggregates() {
        let Some(f) = a.churn() else { continue };
        match groups.iter_mut().find(|(lt, _)| *lt == f.lifetime_s) {
            Some((_, v)) => v.push(*f),
            None => groups.push((f.lifetime_s, vec![*f])),
        }
    }
    groups
        .into_iter()
        .map(|(lt, fs)| {
            let means = COLUMNS.iter().map(|(_, get)| fs.iter().map(get).sum::<f64>() / fs.len() as f64).collect();
            (lt, means)
        })
        .collect()
}

/// The table as text for `summary.txt`; `None` when the run has no `[churn]` point.
pub fn text(d: &RunData) -> Option<String> {
    let rows = rows(d);
    if rows.is_empty() {
        return None;
    }
    let mut out = String::from("\nchurn, mean over the replicates, per lifetime (s):\n");
    let _ = writeln!(
        out,
        "{:<30}{}",
        "",
        rows.iter().map(|(lt, _)| format!("{:>12}", number(*lt, " s"))).collect::<String>()
    );
    for (k, (name, _)) in COLUMNS.iter().enumerate() {
        let _ = writeln!(
            out,
            "{name:<30}{}",
            rows.iter().map(|(_, v)| format!("{:>12}", number(v[k], ""))).collect::<String>()
        );
    }
    Some(out)
}

/// The same table for `index.html`.
pub fn html(d: &RunData) -> Option<String> {
    let rows = rows(d);
    if rows.is_empty() {
        return None;
    }
    let mut h = String::from("<h2>Churn: mean over the replicates, per lifetime</h2>\n<table><tr><th></th>");
    for (lt, _) in &rows {
        let _ = write!(h, "<th>{}</th>", number(*lt, " s"));
    }
    h.push_str("</tr>\n");
    for (k, (name, _)) in COLUMNS.iter().enumerate() {
        let _ = write!(h, "<tr><td>{}</td>", name.replace('&', "&amp;"));
        for (_, v) in &rows {
            let _ = write!(h, "<td>{}</td>", number(v[k], ""));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
    Some(h)
}
