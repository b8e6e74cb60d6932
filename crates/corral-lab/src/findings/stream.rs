//! Seed 003's claims about CoAP-SC against CoAP over UDP and CoAP over TCP (§4, Figs. 18–24), as the
//! paper words them. The paper prints its results as bar charts without numbers, so each check compares
//! the schemes as it does (fewer, shorter, lower), with the tolerance fixed here. A baseline missing from
//! the run is skipped (a scenario may leave CoAP over TCP out).

use super::{n, need, pick, t, values, Aggs, Check, Inconclusive, Measure, Tolerance};
use crate::results::Aggregate;
use crate::scenario::Scenario;

/// Readings sent again, total blocking time and total transmission delay (ms) of a stream point; NaN for
/// another family's, and TTD NaN when the stream did not finish.
fn nrp(a: &Aggregate) -> f64 {
    a.stream().map_or(f64::NAN, |s| s.nrp as f64)
}

fn tbt_ms(a: &Aggregate) -> f64 {
    a.stream().map_or(f64::NAN, |s| s.tbt_ms)
}

fn ttd_ms(a: &Aggregate) -> f64 {
    a.stream().and_then(|s| s.ttd_ms).unwrap_or(f64::NAN)
}

pub const CHECKS: &[Check] = &[
    Check {
        name: "sc_fewer_retransmissions",
        title: "CoAP-SC retransmits fewer readings than CoAP over UDP at every error rate (Fig. 19)",
        run: sc_fewer_retransmissions,
    },
    Check {
        name: "tcp_fewer_retransmissions_than_udp",
        title: "among the existing schemes, CoAP over TCP retransmits fewer readings than CoAP over UDP (Fig. 19)",
        run: tcp_fewer_retransmissions_than_udp,
    },
    Check {
        name: "udp_slower_than_tcp",
        title: "CoAP over UDP takes longer than CoAP over TCP to deliver 100 readings at error rate 0.1 (Fig. 18)",
        run: udp_slower_than_tcp,
    },
    Check {
        name: "nrp_grows_with_loss",
        title: "retransmissions grow with the error rate for every scheme (Fig. 19)",
        run: nrp_grows_with_loss,
    },
    Check {
        name: "sc_less_blocking_at_high_loss",
        title: "CoAP-SC blocks the sender less than CoAP over UDP at high error rates (Fig. 21)",
        run: sc_less_blocking_at_high_loss,
    },
    Check {
        name: "sc_shorter_ttd",
        title: "CoAP-SC's total transmission delay is below CoAP over UDP's at every error rate (Fig. 23)",
        run: sc_shorter_ttd,
    },
    Check {
        name: "blocking_falls_with_buffer",
        title: "a larger buffer blocks less, for every scheme (Fig. 22)",
        run: blocking_falls_with_buffer,
    },
    Check {
        name: "sc_best_with_small_buffers",
        title: "with a small buffer CoAP-SC blocks least (Fig. 22) and delivers soonest (Fig. 24)",
        run: sc_best_with_small_buffers,
    },
    Check {
        name: "sc_lowest_delay",
        title: "CoAP-SC delivers 100 readings at error rate 0.1 sooner than CoAP over UDP and TCP (Fig. 18)",
        run: sc_lowest_delay,
    },
];

type Out = Result<Vec<Measure>, Inconclusive>;

fn at<'a>(aggs: &'a Aggs<'a>, scheme: &str, axis: &str, x: f64) -> Option<&'a Aggregate> {
    pick(aggs, &[("scheme", t(scheme)), (axis, n(x))])
}

fn label(scheme: &str) -> &'static str {
    match scheme {
        "sc" => "CoAP-SC",
        "udp" => "CoAP over UDP",
        _ => "CoAP over TCP",
    }
}

/// One measure per x and per baseline (`udp`, `tcp`, whichever the run has): `f(scheme) / f(baseline)`.
fn ratios(aggs: &Aggs, axis: &str, xs: &[f64], what: &str, f: fn(&Aggregate) -> f64, tol: Tolerance) -> Vec<Measure> {
    let mut m = Vec::new();
    for base in ["udp", "tcp"] {
        m.extend(ratios_of(aggs, "sc", base, axis, xs, what, f, tol));
    }
    m
}

#[allow(clippy::too_many_arguments)]
fn ratios_of(
    aggs: &Aggs,
    scheme: &str,
    base: &str,
    axis: &str,
    xs: &[f64],
    what: &str,
    f: fn(&Aggregate) -> f64,
    tol: Tolerance,
) -> Vec<Measure> {
    let mut m = Vec::new();
    for &x in xs {
        let (Some(a), Some(b)) = (at(aggs, scheme, axis, x), at(aggs, base, axis, x)) else { continue };
        let (a, b) = (f(a), f(b));
        let ratio = if b == 0.0 && a == 0.0 { 1.0 } else { a / b };
        m.push(Measure::new(format!("{axis}={x}: {what} {} / {}", label(scheme), label(base)), ratio, None, "×", tol));
    }
    m
}

fn positive(aggs: &Aggs, axis: &str) -> Vec<f64> {
    values(aggs, axis).into_iter().filter(|x| *x > 0.0).collect()
}

fn sc_fewer_retransmissions(_: &Scenario, aggs: &Aggs) -> Out {
    let m = ratios(aggs, "loss", &positive(aggs, "loss"), "NRP", nrp, Tolerance::AtMost(0.9));
    need(m, "needs sc and udp points at error rates above 0")
}

fn tcp_fewer_retransmissions_than_udp(_: &Scenario, aggs: &Aggs) -> Out {
    let m = ratios_of(aggs, "tcp", "udp", "loss", &positive(aggs, "loss"), "NRP", nrp, Tolerance::AtMost(0.9));
    need(m, "needs tcp and udp points at error rates above 0")
}

/// Fig. 18 is "the average delays required for transmission of 100 messages … over 10 trials": the time
/// to deliver all 100, i.e. TTD, averaged over the replicates.
fn udp_slower_than_tcp(_: &Scenario, aggs: &Aggs) -> Out {
    let m = ratios_of(aggs, "udp", "tcp", "loss", &[0.1], "TTD of 100 readings", ttd_ms, Tolerance::AtLeast(1.0));
    need(m, "needs udp and tcp at error rate 0.1")
}

fn nrp_grows_with_loss(_: &Scenario, aggs: &Aggs) -> Out {
    let xs = positive(aggs, "loss");
    let (Some(&lo), Some(&hi)) = (xs.first(), xs.last()) else { return Err("needs two error rates above 0".into()) };
    let mut m = Vec::new();
    for scheme in ["sc", "udp", "tcp"] {
        let (Some(a), Some(b)) = (at(aggs, scheme, "loss", lo), at(aggs, scheme, "loss", hi)) else { continue };
        m.push(Measure::new(
            format!("{scheme}: NRP at {hi} − NRP at {lo}"),
            nrp(b) - nrp(a),
            None,
            " readings",
            Tolerance::AtLeast(1.0),
        ));
    }
    need(m, "needs sc and udp at two error rates")
}

fn sc_less_blocking_at_high_loss(_: &Scenario, aggs: &Aggs) -> Out {
    let xs: Vec<f64> = values(aggs, "loss").into_iter().filter(|x| *x >= 0.2).collect();
    let m = ratios(aggs, "loss", &xs, "TBT", tbt_ms, Tolerance::AtMost(0.9));
    need(m, "needs error rates of 0.2 and above")
}

fn sc_shorter_ttd(_: &Scenario, aggs: &Aggs) -> Out {
    let m = ratios(aggs, "loss", &positive(aggs, "loss"), "TTD", ttd_ms, Tolerance::AtMost(1.0));
    need(m, "needs sc and udp points at error rates above 0")
}

fn blocking_falls_with_buffer(_: &Scenario, aggs: &Aggs) -> Out {
    let xs = values(aggs, "buffer");
    let (Some(&lo), Some(&hi)) = (xs.first(), xs.last()) else { return Err("needs two buffer sizes".into()) };
    let mut m = Vec::new();
    for scheme in ["sc", "udp", "tcp"] {
        let (Some(a), Some(b)) = (at(aggs, scheme, "buffer", lo), at(aggs, scheme, "buffer", hi)) else { continue };
        m.push(Measure::new(
            format!("{scheme}: TBT at buffer {hi} / at buffer {lo}"),
            if tbt_ms(a) == 0.0 { f64::NAN } else { tbt_ms(b) / tbt_ms(a) },
            None,
            "×",
            Tolerance::AtMost(0.5),
        ));
    }
    need(m, "needs sc and udp at two buffer sizes")
}

fn sc_best_with_small_buffers(_: &Scenario, aggs: &Aggs) -> Out {
    let xs: Vec<f64> = values(aggs, "buffer").into_iter().filter(|b| *b <= 3.0).collect();
    let mut m = ratios(aggs, "buffer", &xs, "TBT", tbt_ms, Tolerance::AtMost(0.9));
    m.extend(ratios(aggs, "buffer", &xs, "TTD", ttd_ms, Tolerance::AtMost(1.0)));
    need(m, "needs sc and udp at buffer sizes up to 3")
}

fn sc_lowest_delay(_: &Scenario, aggs: &Aggs) -> Out {
    let m = ratios(aggs, "loss", &[0.1], "TTD of 100 readings", ttd_ms, Tolerance::AtMost(1.0));
    need(m, "needs sc and a baseline at error rate 0.1")
}

#[cfg(test)]
mod tests {
    use super::super::testing::Synth;
    use super::*;
    use crate::record::{Facts, StreamFacts};

    /// sc and udp at `loss` (or `buffer`) values with the given NRP, TBT (ms), TTD (ms) and mean delay (s).
    fn data(axis: &str, rows: &[(&str, f64, f64, f64, f64, f64)]) -> Synth {
        let mut s = Synth::new();
        for &(scheme, x, nrp, tbt, ttd, rt) in rows {
            let a = s.add(&[("scheme", t(scheme)), (axis, n(x))], rt, 100.0, 100.0);
            a.facts = Facts::Stream(StreamFacts { nrp: nrp as u64, tbt_ms: tbt, ttd_ms: Some(ttd) });
        }
        s
    }

    #[test]
    fn each_check_holds_on_good_data_and_fails_on_bad() {
        let good = data(
            "loss",
            &[
                ("sc", 0.0, 0.0, 0.0, 300.0, 0.02),
                ("udp", 0.0, 0.0, 0.0, 300.0, 0.02),
                ("sc", 0.1, 50.0, 100.0, 301.0, 0.5),
                ("udp", 0.1, 100.0, 400.0, 305.0, 1.0),
                ("sc", 0.3, 300.0, 1000.0, 310.0, 1.0),
                ("udp", 0.3, 600.0, 9000.0, 400.0, 3.0),
            ],
        );
        for c in [
            "sc_fewer_retransmissions",
            "nrp_grows_with_loss",
            "sc_less_blocking_at_high_loss",
            "sc_shorter_ttd",
            "sc_lowest_delay",
        ] {
            assert_eq!(good.holds(c), Ok(true), "{c}");
        }
        // The same with the schemes swapped: every comparison must fail.
        let bad = data(
            "loss",
            &[
                ("udp", 0.0, 0.0, 0.0, 300.0, 0.02),
                ("sc", 0.0, 0.0, 0.0, 300.0, 0.02),
                ("udp", 0.1, 50.0, 100.0, 301.0, 0.5),
                ("sc", 0.1, 100.0, 400.0, 305.0, 1.0),
                ("udp", 0.3, 300.0, 1000.0, 310.0, 1.0),
                ("sc", 0.3, 600.0, 9000.0, 400.0, 3.0),
            ],
        );
        for c in ["sc_fewer_retransmissions", "sc_less_blocking_at_high_loss", "sc_shorter_ttd", "sc_lowest_delay"] {
            assert_eq!(bad.holds(c), Ok(false), "{c}");
        }
        let flat = data(
            "loss",
            &[
                ("sc", 0.1, 50.0, 0.0, 0.0, 0.0),
                ("udp", 0.1, 50.0, 0.0, 0.0, 0.0),
                ("sc", 0.3, 50.0, 0.0, 0.0, 0.0),
                ("udp", 0.3, 50.0, 0.0, 0.0, 0.0),
            ],
        );
        assert_eq!(flat.holds("nrp_grows_with_loss"), Ok(false));
    }

    #[test]
    fn buffer_checks_can_fail() {
        let good = data(
            "buffer",
            &[
                ("sc", 1.0, 10.0, 1000.0, 300.0, 0.5),
                ("udp", 1.0, 20.0, 3000.0, 330.0, 0.9),
                ("sc", 3.0, 10.0, 300.0, 300.0, 0.5),
                ("udp", 3.0, 20.0, 900.0, 310.0, 0.9),
                ("sc", 10.0, 10.0, 10.0, 300.0, 0.5),
                ("udp", 10.0, 20.0, 20.0, 300.0, 0.9),
            ],
        );
        assert_eq!(good.holds("blocking_falls_with_buffer"), Ok(true));
        assert_eq!(good.holds("sc_best_with_small_buffers"), Ok(true));
        let bad = data(
            "buffer",
            &[
                ("sc", 1.0, 10.0, 1000.0, 300.0, 0.5),
                ("udp", 1.0, 20.0, 900.0, 290.0, 0.9),
                ("sc", 10.0, 10.0, 900.0, 300.0, 0.5),
                ("udp", 10.0, 20.0, 800.0, 300.0, 0.9),
            ],
        );
        assert_eq!(bad.holds("blocking_falls_with_buffer"), Ok(false));
        assert_eq!(bad.holds("sc_best_with_small_buffers"), Ok(false));
    }
}
