//! The practical cost of securing CoAP across a multi-hop IEEE 802.15.4 network (issue 30's lab item), on
//! the `[dtls]` family (`crate::family::dtls`). Seed 000 cites Hartke's "Practical Issues with DTLS in
//! Constrained Environments" only for "CoAP supports optional security by using DTLS" (its reference
//! 13): the seed gives no number, so nothing here can AGREE with it. Every check is a measurement with a
//! tolerance fixed here before any run, reported as CONSEQUENCE (the scenario gives them that role; the
//! frame counts are also arithmetic of the flights' sizes, [`super::ARITHMETIC`]):
//!
//! - `dtls_handshake_costs_frames`: at every hop count and loss level, a DTLS point's frames to the first
//!   protected response exceed plain CoAP's (strictly).
//! - `dtls_cert_costs_more_than_psk`: a certificate handshake's frames exceed a PSK handshake's (strictly).
//! - `dtls_loss_slows_first_response`: for every DTLS mode and hop count, the first protected response
//!   comes later on the lossy links (`usage = "lossy"`) than on the clean ones (`usage = "clean"`).
//! - `oscore_costs_no_handshake`: on clean links OSCORE's frames are at most 1.25 × plain CoAP's (its
//!   option and tag, no round trip of its own).

use super::{need, num, Aggs, Check, Inconclusive, Measure, Tolerance};
use crate::record::DtlsFacts;
use crate::scenario::{Point, Scenario};

pub const CHECKS: &[Check] = &[
    Check {
        name: "dtls_handshake_costs_frames",
        title: "A DTLS handshake makes the first protected response cost more frames than plain CoAP's, at every hop count and loss level",
        run: handshake_costs_frames,
    },
    Check {
        name: "dtls_cert_costs_more_than_psk",
        title: "A certificate handshake costs more frames than a PSK handshake, at every hop count and loss level",
        run: cert_costs_more_than_psk,
    },
    Check {
        name: "dtls_loss_slows_first_response",
        title: "Lossy links delay the first DTLS-protected response, for every mode and hop count",
        run: loss_slows_first_response,
    },
    Check {
        name: "oscore_costs_no_handshake",
        title: "OSCORE's first protected response costs at most 1.25 × plain CoAP's frames on clean links",
        run: oscore_costs_no_handshake,
    },
];

type Out = Result<Vec<Measure>, Inconclusive>;

/// A `[dtls]` point: (security, hops, usage) and its facts. `usage` is `""` without the axis.
struct Row<'a> {
    security: String,
    hops: f64,
    usage: String,
    facts: &'a DtlsFacts,
}

fn rows<'a>(aggs: &'a Aggs) -> Vec<Row<'a>> {
    let text = |p: &Point, axis: &str| p.get(axis).map(|v| v.to_string()).unwrap_or_default();
    aggs.iter()
        .filter_map(|(p, a)| {
            let facts = a.dtls()?;
            Some(Row {
                security: text(p, "security"),
                hops: num(p, "hops").unwrap_or(facts.hops),
                usage: text(p, "usage"),
                facts,
            })
        })
        .collect()
}

/// The facts of `security` at the same hops and usage as `r`.
fn beside<'a>(rows: &'a [Row<'a>], r: &Row, security: &str) -> Option<&'a DtlsFacts> {
    rows.iter().find(|o| o.security == security && o.hops == r.hops && o.usage == r.usage).map(|o| o.facts)
}

fn at(r: &Row) -> String {
    if r.usage.is_empty() {
        format!("{} hops", r.hops)
    } else {
        format!("{} hops, {}", r.hops, r.usage)
    }
}

/// `rows` of `security` against `base` at the same place: frames(security) / frames(base).
fn frame_ratios(aggs: &Aggs, of: &[&str], base: &str, tol: Tolerance, usage: Option<&str>) -> Vec<Measure> {
    let rows = rows(aggs);
    rows.iter()
        .filter(|r| of.contains(&r.security.as_str()) && usage.is_none_or(|u| r.usage == u))
        .filter_map(|r| {
            let b = beside(&rows, r, base)?;
            Some(Measure::new(
                format!("{}: frames to the first response, {} / {base}", at(r), r.security),
                r.facts.frames as f64 / b.frames as f64,
                None,
                "×",
                tol,
            ))
        })
        .collect()
}

fn handshake_costs_frames(_: &Scenario, aggs: &Aggs) -> Out {
    let m = frame_ratios(aggs, &["dtls-psk", "dtls-rpk", "dtls-cert"], "none", Tolerance::Above(1.0), None);
    need(m, "needs DTLS and none points at the same hops and loss")
}

fn cert_costs_more_than_psk(_: &Scenario, aggs: &Aggs) -> Out {
    let m = frame_ratios(aggs, &["dtls-cert"], "dtls-psk", Tolerance::Above(1.0), None);
    need(m, "needs dtls-cert and dtls-psk points at the same hops and loss")
}

fn oscore_costs_no_handshake(_: &Scenario, aggs: &Aggs) -> Out {
    let m = frame_ratios(aggs, &["oscore"], "none", Tolerance::AtMost(1.25), Some("clean"));
    need(m, "needs oscore and none points on clean links (usage = \"clean\")")
}

/// For each DTLS mode and hop count: first response on lossy links − on clean links, ms.
fn loss_slows_first_response(_: &Scenario, aggs: &Aggs) -> Out {
    let rows = rows(aggs);
    let m = rows
        .iter()
        .filter(|r| r.security.starts_with("dtls") && r.usage == "clean")
        .filter_map(|clean| {
            let lossy =
                rows.iter().find(|o| o.security == clean.security && o.hops == clean.hops && o.usage == "lossy")?;
            Some(Measure::new(
                format!("{} hops, {}: first response lossy − clean", clean.hops, clean.security),
                lossy.facts.first_ms - clean.facts.first_ms,
                None,
                " ms",
                Tolerance::Above(0.0),
            ))
        })
        .collect();
    need(m, "needs DTLS points with usage = \"clean\" and \"lossy\"")
}

#[cfg(test)]
mod tests {
    use super::super::testing::Synth;
    use super::super::{n, t, ARITHMETIC};
    use crate::record::{DtlsFacts, Facts};

    fn add(s: &mut Synth, security: &str, hops: f64, usage: &str, frames: u64, first_ms: f64) {
        let f = DtlsFacts { hops, first_ms, frames, ..DtlsFacts::empty() };
        s.add(&[("usage", t(usage)), ("security", t(security)), ("hops", n(hops))], 1.0, 100.0, 100.0).facts =
            Facts::Dtls(f);
    }

    fn sweep(psk: u64, cert: u64, oscore: u64, lossy_ms: f64) -> Synth {
        let mut s = Synth::new();
        for (usage, ms) in [("clean", 500.0), ("lossy", lossy_ms)] {
            add(&mut s, "none", 3.0, usage, 12, ms / 4.0);
            add(&mut s, "oscore", 3.0, usage, oscore, ms / 4.0);
            add(&mut s, "dtls-psk", 3.0, usage, psk, ms);
            add(&mut s, "dtls-cert", 3.0, usage, cert, ms * 2.0);
        }
        s
    }

    #[test]
    fn a_handshake_must_cost_more_frames_than_plain_coap_strictly() {
        assert_eq!(sweep(60, 200, 12, 900.0).holds("dtls_handshake_costs_frames"), Ok(true));
        assert_eq!(sweep(12, 200, 12, 900.0).holds("dtls_handshake_costs_frames"), Ok(false), "a tie");
        assert!(Synth::new().holds("dtls_handshake_costs_frames").is_err(), "no points: inconclusive");
    }

    #[test]
    fn certificates_must_cost_more_than_psk() {
        assert_eq!(sweep(60, 200, 12, 900.0).holds("dtls_cert_costs_more_than_psk"), Ok(true));
        assert_eq!(sweep(60, 60, 12, 900.0).holds("dtls_cert_costs_more_than_psk"), Ok(false));
    }

    #[test]
    fn loss_must_delay_the_first_response_of_every_mode() {
        assert_eq!(sweep(60, 200, 12, 900.0).holds("dtls_loss_slows_first_response"), Ok(true));
        assert_eq!(sweep(60, 200, 12, 500.0).holds("dtls_loss_slows_first_response"), Ok(false), "a tie");
        let mut s = Synth::new();
        add(&mut s, "dtls-psk", 3.0, "clean", 60, 500.0);
        assert!(s.holds("dtls_loss_slows_first_response").is_err(), "no lossy point: inconclusive");
    }

    #[test]
    fn oscore_must_stay_within_a_quarter_of_plain_frames_on_clean_links() {
        assert_eq!(sweep(60, 200, 14, 900.0).holds("oscore_costs_no_handshake"), Ok(true));
        assert_eq!(sweep(60, 200, 16, 900.0).holds("oscore_costs_no_handshake"), Ok(false), "16 / 12 > 1.25");
        for c in ["dtls_handshake_costs_frames", "dtls_cert_costs_more_than_psk"] {
            assert!(ARITHMETIC.iter().any(|(a, _)| *a == c), "{c}");
        }
    }
}
