//! Seed 004's claims (§2, the tables of CoAP and HTTP throughput under `tc netem`), checked on real
//! programs over `corral link` run as the paper ran them (`crate::family::emulated`). Absolute throughput
//! depends on what the capture counted (the paper's CoAP capture holds every datagram four times) and on
//! the programs, so each claim compares a scheme with itself across impairments: the paper's own ratio is
//! shown beside corral's, the tolerance is fixed here, and a claim the paper makes of every row ("keeps
//! decreasing") is checked at every step of its axis ([`super::steps`]).

use super::{need, pick, steps, t, Aggs, Check, Inconclusive, Measure, Tolerance, Trend};
use crate::scenario::Scenario;

pub const CHECKS: &[Check] = &[
    Check {
        name: "coap_not_impacted_by_latency",
        title: "CoAP/UDP throughput is not impacted by latency (every delay row against none and 10 → 100 ms)",
        run: coap_not_impacted_by_latency,
    },
    Check {
        name: "http_falls_with_latency",
        title: "HTTP/TCP throughput falls with latency, at every step (10 → 20 → 50 → 100 ms)",
        run: http_falls_with_latency,
    },
    Check {
        name: "coap_falls_with_loss",
        title: "CoAP/UDP throughput keeps decreasing as the loss grows (1 → 2 → 5 → 10 %)",
        run: coap_falls_with_loss,
    },
    Check {
        name: "http_falls_with_loss",
        title: "HTTP/TCP throughput goes down with loss, at every step (1 → 2 → 5 → 10 %)",
        run: http_falls_with_loss,
    },
    Check {
        name: "http_unimpaired_highest",
        title: "HTTP/TCP throughput without impairments is above every impaired row (each at most 0.9×)",
        run: http_unimpaired_highest,
    },
];

type Out = Result<Vec<Measure>, Inconclusive>;

/// The paper's tables, bytes/s: CoAP, then HTTP (kB/s × 1000). HTTP has two "without impairments" rows,
/// the delay table's (6.171 kB/s) and the loss table's (7.746): a loss row is compared with the latter.
const PAPER: &[(&str, &str, f64)] = &[
    ("coap", "none", 2302.876),
    // The paper's rows at 10 ms of delay and at 2 % loss are one byte count to within 4 bytes (2,176.07 and
    // 2,176.01 B/s): most likely a row copied into the other. Both are cited as printed, with that caveat
    // (docs/seed004.md).
    ("coap", "d10", 2176.067),
    ("coap", "d20", 2223.1575),
    ("coap", "d50", 2239.077),
    ("coap", "d100", 2230.340),
    ("coap", "l1", 2266.276),
    ("coap", "l2", 2176.007),
    ("coap", "l5", 1971.917),
    ("coap", "l10", 1831.335),
    ("http", "none", 6171.0),
    ("http", "none (loss table)", 7746.0),
    ("http", "d10", 4999.0),
    ("http", "d20", 4173.0),
    ("http", "d50", 2971.0),
    ("http", "d100", 1873.0),
    ("http", "l1", 6208.0),
    ("http", "l2", 6105.0),
    ("http", "l5", 3680.0),
    ("http", "l10", 2919.0),
];

fn paper(scheme: &str, imp: &str) -> Option<f64> {
    PAPER.iter().find(|(s, i, _)| *s == scheme && *i == imp).map(|r| r.2)
}

fn throughput(aggs: &Aggs, scheme: &str, imp: &str) -> Option<f64> {
    pick(aggs, &[("protocol", t(scheme)), ("impairment", t(imp))]).map(|a| a.throughput())
}

/// `throughput(scheme, to) / throughput(scheme, from)` against the paper's ratio, within `tol`.
fn ratio(aggs: &Aggs, scheme: &str, from: &str, to: &str, tol: Tolerance) -> Option<Measure> {
    let (a, b) = (throughput(aggs, scheme, from)?, throughput(aggs, scheme, to)?);
    let base = match (scheme, from, to.starts_with('l')) {
        ("http", "none", true) => "none (loss table)",
        _ => from,
    };
    let p = paper(scheme, to).zip(paper(scheme, base)).map(|(b, a)| b / a);
    Some(Measure::new(format!("{scheme}: throughput at {to} / at {from}"), b / a, p, "×", tol))
}

/// The rows of `imps` the run has, as `(the impairment's number, throughput)`.
fn row(aggs: &Aggs, scheme: &str, imps: &[&str]) -> Vec<(f64, f64)> {
    imps.iter().filter_map(|i| Some((i[1..].parse().ok()?, throughput(aggs, scheme, i)?))).collect()
}

const DELAYS: &[&str] = &["d10", "d20", "d50", "d100"];
const LOSSES: &[&str] = &["l1", "l2", "l5", "l10"];

/// "Throughput is almost same for the latency introduced communication": every delay row within 0.8–1.25 ×
/// the unimpaired row (when the run has it), and 100 ms within that of 10 ms.
fn coap_not_impacted_by_latency(_: &Scenario, aggs: &Aggs) -> Out {
    let flat = Tolerance::Between(0.8, 1.25);
    let mut m: Vec<Measure> = DELAYS.iter().filter_map(|d| ratio(aggs, "coap", "none", d, flat)).collect();
    m.extend(ratio(aggs, "coap", "d10", "d100", flat));
    need(m, "needs coap at d10 and d100")
}

/// "Directly impacted by latency": 100 ms at most 0.7 × 10 ms, and lower at every step between.
fn http_falls_with_latency(_: &Scenario, aggs: &Aggs) -> Out {
    let mut m: Vec<Measure> = ratio(aggs, "http", "d10", "d100", Tolerance::AtMost(0.7)).into_iter().collect();
    m.extend(steps("http: throughput (B/s) at delay (ms)", &row(aggs, "http", DELAYS), Trend::Falls, " B/s"));
    need(m, "needs http at d10 and d100")
}

/// "Throughput keeps decreasing as the %loss level is increasing": 10 % at most 0.95 × 1 %, and lower at
/// every step between.
fn coap_falls_with_loss(_: &Scenario, aggs: &Aggs) -> Out {
    let mut m: Vec<Measure> = ratio(aggs, "coap", "l1", "l10", Tolerance::AtMost(0.95)).into_iter().collect();
    m.extend(steps("coap: throughput (B/s) at loss (%)", &row(aggs, "coap", LOSSES), Trend::Falls, " B/s"));
    need(m, "needs coap at l1 and l10")
}

/// HTTP's: 10 % at most 0.8 × 1 % (the paper: 0.47×), and lower at every step between. Wider than CoAP's
/// 0.95 because HTTP's throughput moves more between two runs of one condition: a connection per GET makes
/// it CPU-bound on a busy machine, and with the impairments removed a clean "l10" fell below 0.95 × a clean
/// "l1" in a quick run beside four compiling builds (the claim agreed without its cause).
fn http_falls_with_loss(_: &Scenario, aggs: &Aggs) -> Out {
    let mut m: Vec<Measure> = ratio(aggs, "http", "l1", "l10", Tolerance::AtMost(0.8)).into_iter().collect();
    m.extend(steps("http: throughput (B/s) at loss (%)", &row(aggs, "http", LOSSES), Trend::Falls, " B/s"));
    need(m, "needs http at l1 and l10")
}

/// Every impaired row at most 0.9 × the unimpaired one. "Above" means by more than run-to-run noise: with
/// the impairments removed, eight rows of one condition are each strictly below a ninth one time in nine by
/// chance alone, so a bare `Below(1.0)` would agree without its cause, and HTTP's rows move by several per
/// cent between runs of one condition on a busy machine (see `http_falls_with_loss`). The paper's own rows
/// sit at 0.81× or less.
fn http_unimpaired_highest(_: &Scenario, aggs: &Aggs) -> Out {
    let m: Vec<Measure> =
        DELAYS.iter().chain(LOSSES).filter_map(|i| ratio(aggs, "http", "none", i, Tolerance::AtMost(0.9))).collect();
    need(m, "needs http without impairments and with one")
}

#[cfg(test)]
mod tests {
    use super::super::testing::Synth;
    use super::*;
    use crate::record::{EmulatedFacts, Facts};

    fn data(rows: &[(&str, &str, f64)]) -> Synth {
        let mut s = Synth::new();
        for &(scheme, imp, tp) in rows {
            s.add(&[("protocol", t(scheme)), ("impairment", t(imp))], 0.1, 100.0, 100.0).facts =
                Facts::Emulated(EmulatedFacts { throughput: tp });
        }
        s
    }

    const ALL: [&str; 5] = [
        "coap_not_impacted_by_latency",
        "http_falls_with_latency",
        "coap_falls_with_loss",
        "http_falls_with_loss",
        "http_unimpaired_highest",
    ];

    #[test]
    fn the_papers_own_tables_meet_every_claim() {
        // One unimpaired HTTP row per run: the higher of the paper's two (its loss table's).
        let rows: Vec<(&str, &str, f64)> = PAPER
            .iter()
            .filter(|r| !(r.0 == "http" && r.1 == "none"))
            .map(|&(s, i, v)| (s, if i.starts_with("none") { "none" } else { i }, v))
            .collect();
        let paper_like = data(&rows);
        for c in ALL {
            assert_eq!(paper_like.holds(c), Ok(true), "{c}");
        }
    }

    #[test]
    fn each_check_can_fail() {
        let flat_http_falling_coap = data(&[
            ("coap", "none", 2000.0),
            ("coap", "d10", 2000.0),
            ("coap", "d100", 500.0),
            ("coap", "l1", 2000.0),
            ("coap", "l10", 2000.0),
            ("http", "none", 5000.0),
            ("http", "d10", 5000.0),
            ("http", "d100", 5000.0),
            ("http", "l1", 5000.0),
            ("http", "l10", 5000.0),
        ]);
        for c in ALL {
            assert_eq!(flat_http_falling_coap.holds(c), Ok(false), "{c}");
        }
    }

    #[test]
    fn a_loss_step_against_the_trend_fails_the_claim_though_the_ends_agree() {
        // 1 % → 10 % falls to 0.8 ×, but 2 % → 5 % rises: "keeps decreasing" does not hold.
        let d =
            data(&[("coap", "l1", 2000.0), ("coap", "l2", 1800.0), ("coap", "l5", 1900.0), ("coap", "l10", 1600.0)]);
        assert_eq!(d.holds("coap_falls_with_loss"), Ok(false));
    }
}
