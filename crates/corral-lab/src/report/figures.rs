//! The figures of a report: each `[[figure]]` of the scenario as SVG (through [`crate::plot`]) — line charts
//! of a metric against an axis, with the replicates' spread as whiskers and the paper's numbers beside
//! corral's, or Tukey box plots of the figure's metric: of the response times (pooled over the replicates)
//! or, for any other metric, of its value in each replicate — one box per value of `x` and series.

use crate::plot::{BoxPlot, LineChart, Series};
use crate::results::Aggregate;
use crate::scenario::{AxisValue, Figure, Metric, Point};
use std::collections::BTreeMap;

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
                "solution" | "scheme" | "protocol" => paper_name(a, &v.to_string()),
                "mode" | "layout" | "usage" | "impairment" => v.to_string(),
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

/// The papers' names for what they compare, in legends: seed 002's solutions (TinyCoAP, CoapBlip and the
/// HTTP baselines), seed 003's schemes, seed 004's protocols — not the axis values (`coap`, `http-tcp`).
fn paper_name(axis: &str, v: &str) -> String {
    let name = match (axis, v) {
        ("solution", "coap") => "TinyCoAP",
        ("solution", "coapblip") => "CoapBlip",
        ("solution", "http-tcp") => "HTTP/TCP",
        ("solution", "http-persistent") => "HTTP persistent",
        ("solution", "http-udp") => "HTTP/UDP",
        ("solution", "coap-aa") => "TinyCoAP, A/A twin",
        ("scheme", "sc") => "CoAP-SC",
        ("scheme", "udp") => "CoAP over UDP",
        ("scheme", "tcp") => "CoAP over TCP",
        ("protocol", "coap") => "CoAP/UDP",
        ("protocol", "http") => "HTTP/TCP",
        _ => v,
    };
    name.to_string()
}

/// Renders one figure of the scenario as SVG.
pub fn figure_svg(f: &Figure, aggs: &[(&Point, Aggregate)]) -> String {
    let metric = Metric::parse(&f.metric).unwrap_or(Metric::ResponseTime);
    let selected: Vec<&(&Point, Aggregate)> = aggs.iter().filter(|(p, _)| matches(p, &f.filter)).collect();
    if f.kind == "box" {
        return box_svg(f, metric, &selected);
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
        cell.1.push(a.metric(metric));
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

/// Whether a figure's boxes are of the response times (pooled over the replicates' queries) rather than of
/// one value per replicate: what the report hands [`figure_svg`].
pub fn boxes_response_times(f: &Figure) -> bool {
    f.kind == "box" && Metric::parse(&f.metric).unwrap_or(Metric::ResponseTime) == Metric::ResponseTime
}

/// A box plot of the figure's metric: one box per value of `x` (when the figure has one) and series; for
/// response times the box of each point's queries, for any other metric the box of its values over the
/// replicates (a single replicate draws a line at its value).
fn box_svg(f: &Figure, metric: Metric, selected: &[&(&Point, Aggregate)]) -> String {
    let y_label = if metric == Metric::ResponseTime { "response time (s)" } else { metric.label() };
    let mut plot = BoxPlot::new(&f.title, y_label);
    // Per box: its label, the metric's values, or a point's response-time box and mean.
    type Box = (String, Vec<f64>, Option<([f64; 5], f64)>);
    let mut boxes: Vec<Box> = Vec::new();
    for (p, a) in selected {
        let x = if f.x.is_empty() { None } else { p.get(&f.x).map(ToString::to_string) };
        let key = [x.unwrap_or_default(), series_key(p, &f.series)]
            .into_iter()
            .filter(|k| !k.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        let idx = match boxes.iter().position(|b| b.0 == key) {
            Some(i) => i,
            None => {
                boxes.push((key, Vec::new(), None));
                boxes.len() - 1
            }
        };
        if metric == Metric::ResponseTime {
            if let (Some(rt), None) = (a.rt, &boxes[idx].2) {
                boxes[idx].2 = Some((rt.tukey().map(|v| v / 1000.0), rt.mean / 1000.0));
            }
        } else {
            boxes[idx].1.push(a.metric(metric).0);
        }
    }
    for (key, values, rt) in boxes {
        let five = rt.or_else(|| crate::stats::Summary::of(&values).map(|s| (s.tukey(), s.mean)));
        if let Some((five, mean)) = five {
            plot = plot.entry(if key.is_empty() { "all".into() } else { key.replace(", ", " ") }, five, mean);
        }
    }
    plot.to_svg()
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
        "payload" => "payload (response body, B)".into(),
        "rate" => "request rate (requests/s)".into(),
        "snr_db" => "SNR (dB)".into(),
        "buffer" => "buffer (readings)".into(),
        "loss" => "error rate (loss events per draw)".into(),
        "hops" => "hops (802.15.4)".into(),
        "consumers" => "consumers".into(),
        "lifetime_s" => "registration lifetime (s)".into(),
        "cca_busy_prob" => "CCA-busy probability".into(),
        "impairment" => "impairment (dN: N ms delay, lN: N % loss)".into(),
        other => other.replace('_', " "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::testing::Synth;
    use crate::scenario::{builtin, Scenario};

    /// Issue 43: figures a paper would print — the papers' names in the legend (not `coap`, `http-tcp`),
    /// a unit on the x axis, and a y axis from the data's range when the data sit far from zero.
    #[test]
    fn figures_use_the_papers_names_units_and_the_datas_range() {
        let s = Scenario::parse(builtin("seed002-latency").expect("built in")).expect("parses");
        let fig = s.figures.iter().find(|f| f.id == "fig06").expect("fig06");
        let mut synth = Synth::new();
        for (i, solution) in ["coap", "coapblip", "http-tcp"].into_iter().enumerate() {
            for (k, payload) in [10.0, 300.0].into_iter().enumerate() {
                let axes = [("solution", AxisValue::Text(solution.into())), ("payload", AxisValue::Num(payload))];
                synth.add(&axes, 0.93 + 0.01 * (i + k) as f64, 100.0, 100.0);
            }
        }
        let aggs: Vec<(&Point, Aggregate)> = synth.points.iter().zip(synth.aggs.iter().cloned()).collect();
        let svg = figure_svg(fig, &aggs);
        for name in ["TinyCoAP", "CoapBlip", "HTTP/TCP", "payload (response body, B)"] {
            assert!(svg.contains(name), "{name}: {svg}");
        }
        assert!(!svg.contains(">coap<") && !svg.contains(">http-tcp<"), "{svg}");
        // Response times of 0.93-0.96 s: the y axis starts at them, not at 0 (its lowest tick is 0.93).
        assert!(svg.contains(">0.93<") && !svg.contains(">0.0<"), "{svg}");
    }
}
