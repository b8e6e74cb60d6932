//! The seed-001 part of a report: Fig. 7 (content retrieval time CDFs of clients 1, 5 and 9), Fig. 8
//! (server responses per second), Fig. 9 (requests and responses per shared-path link), Table III
//! (cryptographic operations per successful retrieval) and the success rate of every client — every
//! replicate of a deployment pooled (the findings give the replicates' spread).
//!
//! Owns the SVGs (through [`crate::plot`]) and the HTML fragment; never runs anything.

use crate::data::RunData;
use crate::family::multiparty::{CLIENTS, SHARED};
use crate::plot::{LineChart, Series};
use crate::record::MpStats;
use std::fmt::Write as _;
use std::sync::Arc;

/// Each deployment's replicates pooled into one [`MpStats`], in sweep order, with the number pooled:
/// retrieval times and requests sent joined (so a CDF and a success rate cover every replicate),
/// operations, server responses and link counts summed with `requests` scaled by the number pooled (so
/// per-success, per-second and per-1000 figures are means over the replicates). Fig. 8's per-second
/// series is divided by that number when drawn.
fn pooled(d: &RunData) -> Vec<(MpStats, u32)> {
    let mut out: Vec<(MpStats, u32)> = Vec::new();
    for (_, a) in d.aggregates() {
        let Some(m) = a.facts.multiparty().cloned() else { continue };
        match out.iter_mut().find(|(p, _)| p.deployment == m.deployment) {
            None => out.push((Arc::unwrap_or_clone(m), 1)),
            Some((p, k)) => {
                *k += 1;
                p.requests += m.requests;
                for (t, more) in p.times_ms.iter_mut().zip(&m.times_ms) {
                    t.extend_from_slice(more);
                    t.sort_by(f64::total_cmp);
                }
                for (s, more) in p.sent.iter_mut().zip(&m.sent) {
                    *s += more;
                }
                if p.server_per_s.len() < m.server_per_s.len() {
                    p.server_per_s.resize(m.server_per_s.len(), 0);
                }
                for (s, more) in p.server_per_s.iter_mut().zip(&m.server_per_s) {
                    *s += more;
                }
                p.client_ops += m.client_ops;
                p.server_ops += m.server_ops;
                for (l, more) in p.link_requests.iter_mut().zip(&m.link_requests) {
                    *l += more;
                }
                for (l, more) in p.link_responses.iter_mut().zip(&m.link_responses) {
                    *l += more;
                }
            }
        }
    }
    out
}

fn name(d: &str) -> &'static str {
    match d {
        "oscore" => "OSCORE",
        "oscore-proxy" => "OSCORE Proxy",
        "det-oscore-proxy" => "Det. OSCORE Proxy",
        _ => "NDN",
    }
}

/// The CDF of client `c`'s retrieval times as a share of the requests it sent (its maximum is the
/// success rate), as a step line thinned to at most ~400 points.
fn cdf(m: &MpStats, c: usize) -> Vec<(f64, f64)> {
    let times = &m.times_ms[c - 1];
    let sent = f64::from(m.sent[c - 1].max(1));
    let mut pts = vec![(0.0, 0.0)];
    let step = (times.len() / 400).max(1);
    for (i, t) in times.iter().enumerate() {
        if i % step == 0 || i + 1 == times.len() {
            let y = (i + 1) as f64 * 100.0 / sent;
            pts.push((t / 1000.0, pts.last().map_or(0.0, |p| p.1)));
            pts.push((t / 1000.0, y));
        }
    }
    pts
}

/// `(id, svg)` of every seed-001 figure, and the HTML section showing them with the tables.
pub fn section(d: &RunData) -> Option<(Vec<(String, String)>, String)> {
    let pooled = pooled(d);
    if pooled.is_empty() {
        return None;
    }
    let stats: Vec<&MpStats> = pooled.iter().map(|(m, _)| m).collect();
    let replicates = pooled.iter().map(|(_, k)| *k).max().unwrap_or(1);
    let mut svgs = Vec::new();
    for c in [1, 5, 9] {
        let mut chart = LineChart::new(
            format!("Fig. 7: content retrieval times of client {c}"),
            "content retrieval time (s)",
            "requests completed (% of sent)",
        )
        .y_range(0.0, 100.0);
        for m in &stats {
            chart = chart.series(Series::new(name(&m.deployment), cdf(m, c)));
        }
        svgs.push((format!("fig7-client{c}"), chart.to_svg()));
    }
    let mut chart = LineChart::new("Fig. 8: responses sent by the server", "time (s)", "responses per second");
    for (m, k) in &pooled {
        let pts = m.server_per_s.iter().enumerate().map(|(s, n)| (s as f64, f64::from(*n) / f64::from(*k))).collect();
        chart = chart.series(Series::new(name(&m.deployment), pts));
    }
    svgs.push(("fig8-server-rate".into(), chart.to_svg()));
    let mut chart = LineChart::new(
        "Fig. 9: requests (up) and responses (down) along the shared path",
        "link f_i → f_i+1 (7: f7 → server)",
        "packets per 1000 requests per client",
    );
    for m in &stats {
        let pts = |v: &[u64]| m.per_thousand(v).into_iter().enumerate().map(|(i, x)| ((i + 1) as f64, x)).collect();
        chart = chart.series(Series::new(format!("{} requests", name(&m.deployment)), pts(&m.link_requests)));
        chart = chart.series(Series::new(format!("{} responses", name(&m.deployment)), pts(&m.link_responses)));
    }
    svgs.push(("fig9-link-stress".into(), chart.to_svg()));

    let mut h = format!(
        "<h2>Seed 001: multiparty content retrieval ({replicates} replicate(s) of each deployment pooled)</h2>\n"
    );
    for (id, svg) in &svgs {
        let _ = writeln!(h, r#"<div class="fig" id="{id}">{}</div>"#, svg.trim_end());
    }
    h.push_str("<p>Fig. 7: each curve ends at the client's success rate. Fig. 9: packets each link's receiver got, once per datagram (MAC retransmissions and empty ACKs not counted), scaled to 1000 requests per client.</p>\n");
    h.push_str("<h3>Success rate per client (%)</h3>\n<table><tr><th>deployment</th>");
    for c in 1..=CLIENTS {
        let _ = write!(h, "<th>client {c}</th>");
    }
    h.push_str("</tr>\n");
    for m in &stats {
        let _ = write!(h, "<tr><td style=\"text-align:left\">{}</td>", name(&m.deployment));
        for c in 1..=usize::from(CLIENTS) {
            let _ = write!(h, "<td>{:.1}</td>", m.success(c));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
    h.push_str("<h3>Table III: operations per successful retrieval (corral / paper)</h3>\n<table><tr><th>deployment</th><th>AEAD client</th><th>AEAD server</th><th>signatures client</th><th>signatures server</th><th>HMAC client</th><th>HMAC server</th><th>server responses/s</th></tr>\n");
    for m in &stats {
        let paper: [&str; 6] = match m.deployment.as_str() {
            "oscore" => ["2.93", "4.63", "–", "–", "–", "–"],
            "oscore-proxy" => ["2.66", "3.21", "–", "–", "–", "–"],
            "det-oscore-proxy" => ["2.08", "0.49", "1.00", "0.24", "3.24", "0.73"],
            _ => ["1.00", "0.23", "–", "–", "1.00", "0.23"],
        };
        let (ac, as_) = m.per_success(|o| o.aead);
        let (sc, ss) = m.per_success(|o| o.signatures);
        let (hc, hs) = m.per_success(|o| o.hmac);
        let _ = write!(h, "<tr><td style=\"text-align:left\">{}</td>", name(&m.deployment));
        for (x, p) in [ac, as_, sc, ss, hc, hs].iter().zip(paper) {
            let _ = write!(h, "<td>{x:.2} / {p}</td>");
        }
        let _ = writeln!(h, "<td>{:.2}</td></tr>", m.server_rate());
    }
    h.push_str("</table>\n<h3>Requests and responses per shared-path link (per 1000 requests per client)</h3>\n<table><tr><th>deployment</th>");
    for i in 1..=SHARED {
        let to = if i == SHARED { "S".to_string() } else { format!("f{}", i + 1) };
        let _ = write!(h, "<th>f{i}→{to}</th>");
    }
    h.push_str("</tr>\n");
    for m in &stats {
        for (what, v) in [("requests", &m.link_requests), ("responses", &m.link_responses)] {
            let _ = write!(h, "<tr><td style=\"text-align:left\">{} {what}</td>", name(&m.deployment));
            for x in m.per_thousand(v) {
                let _ = write!(h, "<td>{x:.0}</td>");
            }
            h.push_str("</tr>\n");
        }
    }
    h.push_str("</table>\n");
    Some((svgs, h))
}
