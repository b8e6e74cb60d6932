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
        name: "udp_most_retransmissions_every_buffer",
        title: "CoAP over UDP retransmits more readings than CoAP over TCP and CoAP-SC at every buffer size (Fig. 20)",
        run: udp_most_retransmissions_every_buffer,
    },
    Check {
        name: "sc_fewer_retransmissions_than_tcp_large_buffers",
        title: "CoAP-SC retransmits fewer readings than CoAP over TCP for the larger buffers (Fig. 20)",
        run: sc_fewer_retransmissions_than_tcp_large_buffers,
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
        title: "with a small buffer CoAP-SC blocks least (Fig. 22)",
        run: sc_best_with_small_buffers,
    },
    Check {
        name: "sc_shorter_ttd_every_buffer",
        title: "CoAP-SC's total transmission delay is below CoAP over UDP's and TCP's at every buffer size (Fig. 24)",
        run: sc_shorter_ttd_every_buffer,
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

/// "Lower" is strict: the paper's TTDs differ in its figures; an exact tie (both streams acknowledged
/// their last reading at the same instant) is not lower. TTD is compared as a difference in ms, which must
/// be at most −1 ms.
fn ttd_lower(aggs: &Aggs, axis: &str, xs: &[f64], what: &str) -> Vec<Measure> {
    let mut m = Vec::new();
    for base in ["udp", "tcp"] {
        for &x in xs {
            let (Some(a), Some(b)) = (at(aggs, "sc", axis, x), at(aggs, base, axis, x)) else { continue };
            m.push(Measure::new(
                format!("{axis}={x}: {what} CoAP-SC − {}", label(base)),
                ttd_ms(a) - ttd_ms(b),
                None,
                " ms",
                Tolerance::AtMost(-1.0),
            ));
        }
    }
    m
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
    let mut m = Vec::new();
    if let (Some(u), Some(c)) = (at(aggs, "udp", "loss", 0.1), at(aggs, "tcp", "loss", 0.1)) {
        // "Larger" is strict, as `ttd_lower`'s "lower".
        m.push(Measure::new(
            "loss=0.1: TTD of 100 readings CoAP over UDP − CoAP over TCP",
            ttd_ms(u) - ttd_ms(c),
            None,
            " ms",
            Tolerance::AtLeast(1.0),
        ));
    }
    need(m, "needs udp and tcp at error rate 0.1")
}

/// Checked at every step of the error rate, not only between the end points: each scheme's NRP must grow
/// from one error rate to the next (by at least 0.1 readings on the replicates' mean).
fn nrp_grows_with_loss(_: &Scenario, aggs: &Aggs) -> Out {
    let xs = values(aggs, "loss");
    if xs.len() < 2 {
        return Err("needs two error rates".into());
    }
    let mut m = Vec::new();
    for scheme in ["sc", "udp", "tcp"] {
        for w in xs.windows(2) {
            let (Some(a), Some(b)) = (at(aggs, scheme, "loss", w[0]), at(aggs, scheme, "loss", w[1])) else { continue };
            m.push(Measure::new(
                format!("{scheme}: NRP at {} − NRP at {}", w[1], w[0]),
                nrp(b) - nrp(a),
                None,
                " readings",
                Tolerance::AtLeast(0.1),
            ));
        }
    }
    need(m, "needs sc and udp at two error rates")
}

fn udp_most_retransmissions_every_buffer(_: &Scenario, aggs: &Aggs) -> Out {
    let xs = values(aggs, "buffer");
    let mut m = Vec::new();
    for scheme in ["sc", "tcp"] {
        m.extend(ratios_of(aggs, scheme, "udp", "buffer", &xs, "NRP", nrp, Tolerance::AtMost(0.9)));
    }
    need(m, "needs udp and another scheme at some buffer size")
}

/// "For larger buffer sizes": the upper half of the buffer axis (6-10 of the paper's 1-10).
fn sc_fewer_retransmissions_than_tcp_large_buffers(_: &Scenario, aggs: &Aggs) -> Out {
    let xs = values(aggs, "buffer");
    let large: Vec<f64> = xs.iter().copied().skip(xs.len() / 2).collect();
    let m = ratios_of(aggs, "sc", "tcp", "buffer", &large, "NRP", nrp, Tolerance::AtMost(0.9));
    need(m, "needs sc and tcp at the larger buffer sizes")
}

fn sc_less_blocking_at_high_loss(_: &Scenario, aggs: &Aggs) -> Out {
    let xs: Vec<f64> = values(aggs, "loss").into_iter().filter(|x| *x >= 0.2).collect();
    let m = ratios(aggs, "loss", &xs, "TBT", tbt_ms, Tolerance::AtMost(0.9));
    need(m, "needs error rates of 0.2 and above")
}

fn sc_shorter_ttd(_: &Scenario, aggs: &Aggs) -> Out {
    let m = ttd_lower(aggs, "loss", &positive(aggs, "loss"), "TTD");
    need(m, "needs sc and udp points at error rates above 0")
}

/// "As the buffer size gets larger, TBTs tend to decrease for all candidate schemes", checked as the docs
/// say trends are: at every step of the buffer axis TBT falls (strictly) while there is blocking left, and
/// stays at zero once there is none; and from the smallest buffer to the largest it falls to half or less.
/// A step can only go the claim's way when the buffer outlasts what blocks it: CoAP-SC's sender blocks
/// through an outage its buffer cannot cover (the AP's outage of `outage_ms`, readings `interval_ms`
/// apart), so its TBT drops to zero at the first buffer whose readings span an outage, and any later
/// step with blocking (two outages close together) fails the claim.
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
        let row: Vec<(f64, f64)> =
            xs.iter().filter_map(|&x| Some((x, tbt_ms(at(aggs, scheme, "buffer", x)?) / 1000.0))).collect();
        for w in row.windows(2) {
            let ((b0, t0), (b1, t1)) = (w[0], w[1]);
            let tol = if t0 == 0.0 { Tolerance::AtMost(0.0) } else { Tolerance::Below(0.0) };
            // The name must not hold the values: measures are matched across replicates by name.
            m.push(Measure::new(format!("{scheme}: TBT at buffer {b1} − at {b0}"), t1 - t0, None, " s", tol));
        }
    }
    need(m, "needs sc and udp at two buffer sizes")
}

fn sc_best_with_small_buffers(_: &Scenario, aggs: &Aggs) -> Out {
    let xs: Vec<f64> = values(aggs, "buffer").into_iter().filter(|b| *b <= 3.0).collect();
    let m = ratios(aggs, "buffer", &xs, "TBT", tbt_ms, Tolerance::AtMost(0.9));
    need(m, "needs sc and udp at buffer sizes up to 3")
}

fn sc_shorter_ttd_every_buffer(_: &Scenario, aggs: &Aggs) -> Out {
    let m = ttd_lower(aggs, "buffer", &values(aggs, "buffer"), "TTD");
    need(m, "needs sc and a baseline at some buffer size")
}

fn sc_lowest_delay(_: &Scenario, aggs: &Aggs) -> Out {
    let m = ttd_lower(aggs, "loss", &[0.1], "TTD of 100 readings");
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
    fn equal_ttds_are_not_lower() {
        let tie = data("loss", &[("sc", 0.1, 5.0, 0.0, 300.0, 0.5), ("udp", 0.1, 9.0, 0.0, 300.0, 0.5)]);
        assert_eq!(tie.holds("sc_shorter_ttd"), Ok(false));
        assert_eq!(tie.holds("sc_lowest_delay"), Ok(false));
        let lower = data("loss", &[("sc", 0.1, 5.0, 0.0, 299.0, 0.5), ("udp", 0.1, 9.0, 0.0, 300.0, 0.5)]);
        assert_eq!(lower.holds("sc_shorter_ttd"), Ok(true));
    }

    #[test]
    fn nrp_that_falls_between_the_end_points_does_not_grow_with_loss() {
        // The CoAP over TCP: 62 → 213 → 107 grows from end to end but not at every step.
        let s = data(
            "loss",
            &[
                ("tcp", 0.1, 62.0, 0.0, 300.0, 0.5),
                ("tcp", 0.2, 213.0, 0.0, 300.0, 0.5),
                ("tcp", 0.3, 107.0, 0.0, 300.0, 0.5),
            ],
        );
        assert_eq!(s.holds("nrp_grows_with_loss"), Ok(false));
    }

    #[test]
    fn every_buffer_size_is_checked_for_figs_20_and_24() {
        let rows = |sc_ttd_at_10: f64, sc_nrp_at_10: f64| {
            data(
                "buffer",
                &[
                    ("sc", 1.0, 10.0, 1000.0, 300.0, 0.5),
                    ("tcp", 1.0, 15.0, 1000.0, 305.0, 0.5),
                    ("udp", 1.0, 20.0, 3000.0, 330.0, 0.9),
                    ("sc", 10.0, sc_nrp_at_10, 10.0, sc_ttd_at_10, 0.5),
                    ("tcp", 10.0, 15.0, 10.0, 305.0, 0.5),
                    ("udp", 10.0, 20.0, 20.0, 300.0, 0.9),
                ],
            )
        };
        let good = rows(299.0, 10.0);
        for c in [
            "udp_most_retransmissions_every_buffer",
            "sc_fewer_retransmissions_than_tcp_large_buffers",
            "sc_shorter_ttd_every_buffer",
        ] {
            assert_eq!(good.holds(c), Ok(true), "{c}");
        }
        // CoAP-SC behind at the largest buffer only: Fig. 24's and Fig. 20's claims fail there.
        let bad = rows(301.0, 30.0);
        for c in [
            "udp_most_retransmissions_every_buffer",
            "sc_fewer_retransmissions_than_tcp_large_buffers",
            "sc_shorter_ttd_every_buffer",
        ] {
            assert_eq!(bad.holds(c), Ok(false), "{c}");
        }
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
