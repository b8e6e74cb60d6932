//! Seed 004's claims (§2, the tables of CoAP and HTTP throughput under `tc netem`), checked on real
//! programs over `corral link`. Absolute throughput depends on how fast the client loops (the paper's
//! client is not given), so each claim compares a scheme with itself across impairments; the paper's own
//! ratio is shown beside corral's, and the tolerance is fixed here.

use super::{need, pick, t, Aggs, Check, Inconclusive, Measure, Tolerance};
use crate::scenario::Scenario;

pub const CHECKS: &[Check] = &[
    Check {
        name: "coap_not_impacted_by_latency",
        title: "CoAP/UDP throughput is not impacted by latency (10 → 100 ms)",
        run: coap_not_impacted_by_latency,
    },
    Check {
        name: "http_falls_with_latency",
        title: "HTTP/TCP throughput falls with latency (10 → 100 ms)",
        run: http_falls_with_latency,
    },
    Check {
        name: "coap_falls_with_loss",
        title: "CoAP/UDP throughput falls with loss (1 → 10 %)",
        run: coap_falls_with_loss,
    },
    Check {
        name: "http_falls_with_loss",
        title: "HTTP/TCP throughput falls with loss (1 → 10 %)",
        run: http_falls_with_loss,
    },
];

type Out = Result<Vec<Measure>, Inconclusive>;

/// `throughput(scheme, to) / throughput(scheme, from)` against the paper's ratio, within `tol`.
fn ratio(aggs: &Aggs, scheme: &str, from: &str, to: &str, paper: f64, tol: Tolerance) -> Vec<Measure> {
    let (Some(a), Some(b)) = (
        pick(aggs, &[("scheme", t(scheme)), ("impairment", t(from))]),
        pick(aggs, &[("scheme", t(scheme)), ("impairment", t(to))]),
    ) else {
        return Vec::new();
    };
    vec![Measure::new(
        format!("{scheme}: throughput at {to} / at {from}"),
        b.throughput() / a.throughput(),
        Some(paper),
        "×",
        tol,
    )]
}

// The paper's tables: CoAP 2176.067 B/s at 10 ms, 2230.340 at 100 ms; 2266.276 at 1 % loss, 1831.335 at
// 10 %. HTTP 4.999 kB/s at 10 ms, 1.873 at 100 ms; 6.208 at 1 %, 2.919 at 10 %.
fn coap_not_impacted_by_latency(_: &Scenario, aggs: &Aggs) -> Out {
    need(
        ratio(aggs, "coap", "d10", "d100", 2230.340 / 2176.067, Tolerance::Between(0.8, 1.25)),
        "needs coap at d10 and d100",
    )
}

fn http_falls_with_latency(_: &Scenario, aggs: &Aggs) -> Out {
    need(ratio(aggs, "http", "d10", "d100", 1.873 / 4.999, Tolerance::AtMost(0.7)), "needs http at d10 and d100")
}

fn coap_falls_with_loss(_: &Scenario, aggs: &Aggs) -> Out {
    need(ratio(aggs, "coap", "l1", "l10", 1831.335 / 2266.276, Tolerance::AtMost(0.95)), "needs coap at l1 and l10")
}

fn http_falls_with_loss(_: &Scenario, aggs: &Aggs) -> Out {
    need(ratio(aggs, "http", "l1", "l10", 2.919 / 6.208, Tolerance::AtMost(0.95)), "needs http at l1 and l10")
}

#[cfg(test)]
mod tests {
    use super::super::testing::Synth;
    use super::*;
    use crate::record::{EmulatedFacts, Facts};

    fn data(rows: &[(&str, &str, f64)]) -> Synth {
        let mut s = Synth::new();
        for &(scheme, imp, tp) in rows {
            s.add(&[("scheme", t(scheme)), ("impairment", t(imp))], 0.1, 100.0, 100.0).facts =
                Facts::Emulated(EmulatedFacts { throughput: tp });
        }
        s
    }

    #[test]
    fn each_check_can_hold_and_can_fail() {
        let paper_like = data(&[
            ("coap", "d10", 2176.0),
            ("coap", "d100", 2230.0),
            ("coap", "l1", 2266.0),
            ("coap", "l10", 1831.0),
            ("http", "d10", 4999.0),
            ("http", "d100", 1873.0),
            ("http", "l1", 6208.0),
            ("http", "l10", 2919.0),
        ]);
        for c in
            ["coap_not_impacted_by_latency", "http_falls_with_latency", "coap_falls_with_loss", "http_falls_with_loss"]
        {
            assert_eq!(paper_like.holds(c), Ok(true), "{c}");
        }
        let flat_http_falling_coap = data(&[
            ("coap", "d10", 2000.0),
            ("coap", "d100", 500.0),
            ("coap", "l1", 2000.0),
            ("coap", "l10", 2000.0),
            ("http", "d10", 5000.0),
            ("http", "d100", 5000.0),
            ("http", "l1", 5000.0),
            ("http", "l10", 5000.0),
        ]);
        for c in
            ["coap_not_impacted_by_latency", "http_falls_with_latency", "coap_falls_with_loss", "http_falls_with_loss"]
        {
            assert_eq!(flat_http_falling_coap.holds(c), Ok(false), "{c}");
        }
    }
}
