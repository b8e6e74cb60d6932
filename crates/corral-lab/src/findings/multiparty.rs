//! Seed 001's claims about multiparty content retrieval (§IV-B, Figs. 7–9, Table III), checked against
//! the `seed001-multiparty` run. Every paper number below is from the seed's text (the figures' curves are
//! not in it); every tolerance was fixed here before the scenario first ran. A deployment missing from the
//! run is skipped; a check with nothing to measure is INCONCLUSIVE.

use super::{need, pick, t, Aggs, Check, Inconclusive, Measure, Tolerance};
use crate::family::multiparty::SHARED;
use crate::record::{MpStats, Ops};
use crate::scenario::Scenario;

pub const CHECKS: &[Check] = &[
    Check {
        name: "mp_client1_success",
        title: "client 1 (its own path): more than 96 % succeed end to end, up to 100 % hop by hop (Fig. 7)",
        run: client1_success,
    },
    Check {
        name: "mp_unaware_degrade",
        title: "OSCORE and OSCORE Proxy lose success from client 1 to client 9 (Fig. 7)",
        run: unaware_degrade,
    },
    Check {
        name: "mp_aware_steady",
        title: "Deterministic OSCORE Proxy and NDN keep success steady from client 1 to client 9 where the unaware deployments degrade (Fig. 7)",
        run: aware_steady,
    },
    Check {
        name: "mp_proxy_helps_client9",
        title: "OSCORE Proxy improves client 9's success over end-to-end OSCORE, minimally (Fig. 7)",
        run: proxy_helps_client9,
    },
    Check {
        name: "mp_server_rate_unaware",
        title: "server responses: above 10/s for OSCORE, slightly below 9/s for OSCORE Proxy (Fig. 8)",
        run: server_rate_unaware,
    },
    Check {
        name: "mp_server_rate_aware",
        title: "server responses: about 2/s, the optimum, with cross-client caching and aggregation (Fig. 8)",
        run: server_rate_aware,
    },
    Check {
        name: "mp_subsecond_latency",
        title: "client 9's sub-second retrieval times drop from about 100 ms to about 25 ms with prepopulated caches (Fig. 7)",
        run: subsecond_latency,
    },
    Check {
        name: "mp_requests_grow",
        title: "without cross-client aggregation every forwarder adds 1000 requests toward the server (Fig. 9)",
        run: requests_grow,
    },
    Check {
        name: "mp_proxy_more_requests",
        title: "OSCORE Proxy carries slightly more requests per link than end-to-end OSCORE (Fig. 9)",
        run: proxy_more_requests,
    },
    Check {
        name: "mp_aware_link_load",
        title: "multiparty-aware deployments carry about 1000–2000 packets per shared-path hop (Fig. 9)",
        run: aware_link_load,
    },
    Check {
        name: "mp_retx_stairs",
        title: "client 9's retrievals in the seconds range (retransmissions) are faster with aggregation (Fig. 7's stairs)",
        run: retx_stairs,
    },
    Check {
        name: "mp_load_collapse",
        title: "under rising load the unaware deployments lose client 9, the aware ones stay steady (Fig. 7, load sweep)",
        run: load_collapse,
    },
    Check {
        name: "mp_collapse_at_testbed_load",
        title: "the unaware deployments have collapsed toward client 9 at the paper's load, one request a second",
        run: collapse_at_testbed_load,
    },
    Check {
        name: "mp_table3_unaware",
        title: "AEAD operations per successful retrieval, OSCORE and OSCORE Proxy (Table III)",
        run: table3_unaware,
    },
    Check {
        name: "mp_table3_aware",
        title: "AEAD, signature and HMAC operations per successful retrieval, Det. OSCORE Proxy and NDN (Table III)",
        run: table3_aware,
    },
];

type Out = Result<Vec<Measure>, Inconclusive>;

const UNAWARE: [&str; 2] = ["oscore", "oscore-proxy"];
const AWARE: [&str; 2] = ["det-oscore-proxy", "ndn"];

fn stats<'a>(aggs: &'a Aggs<'a>, deployment: &str) -> Option<&'a MpStats> {
    pick(aggs, &[("deployment", t(deployment))]).and_then(|a| a.multiparty())
}

fn label(d: &str) -> &'static str {
    match d {
        "oscore" => "OSCORE",
        "oscore-proxy" => "OSCORE Proxy",
        "det-oscore-proxy" => "Det. OSCORE Proxy",
        _ => "NDN",
    }
}

fn client1_success(_: &Scenario, aggs: &Aggs) -> Out {
    let mut m = Vec::new();
    if let Some(s) = stats(aggs, "oscore") {
        m.push(Measure::new("OSCORE client 1 success", s.success(1), Some(96.0), " %", Tolerance::AtLeast(96.0)));
    }
    for d in ["oscore-proxy", "det-oscore-proxy", "ndn"] {
        if let Some(s) = stats(aggs, d) {
            let what = format!("{} client 1 success", label(d));
            m.push(Measure::new(what, s.success(1), Some(100.0), " %", Tolerance::Absolute(2.0)));
        }
    }
    need(m, "needs seed-001 deployments")
}

/// "the multiparty-unaware deployments display reduced success rates of up to ≈40%" at client 9: a loss
/// of at least 10 points from client 1 holds; the paper's figure is not in its text, so no number.
fn unaware_degrade(_: &Scenario, aggs: &Aggs) -> Out {
    let m = UNAWARE
        .iter()
        .filter_map(|d| stats(aggs, d).map(|s| (d, s)))
        .map(|(d, s)| {
            let what = format!("{}: client 1 − client 9 success", label(d));
            Measure::new(what, s.success(1) - s.success(9), None, " points", Tolerance::AtLeast(10.0))
        })
        .collect();
    need(m, "needs oscore or oscore-proxy")
}

/// "steady success rates across all client nodes independently from the induced traffic load", against
/// the unaware deployments that degrade under the same load: each aware deployment loses at most 2 points
/// from client 1 to client 9 while the unaware ones of the run lose at least 10 ([`unaware_degrade`]'s
/// measure) — where nothing degrades, steadiness says nothing about caching.
fn aware_steady(s: &Scenario, aggs: &Aggs) -> Out {
    let mut m: Vec<Measure> = AWARE
        .iter()
        .filter_map(|d| stats(aggs, d).map(|s| (d, s)))
        .map(|(d, s)| {
            let what = format!("{}: client 1 − client 9 success", label(d));
            Measure::new(what, s.success(1) - s.success(9), Some(0.0), " points", Tolerance::AtMost(2.0))
        })
        .collect();
    if !m.is_empty() {
        m.extend(unaware_degrade(s, aggs).unwrap_or_default());
    }
    need(m, "needs det-oscore-proxy or ndn")
}

fn proxy_helps_client9(_: &Scenario, aggs: &Aggs) -> Out {
    let (Some(e2e), Some(proxy)) = (stats(aggs, "oscore"), stats(aggs, "oscore-proxy")) else {
        return Err("needs oscore and oscore-proxy".into());
    };
    let diff = proxy.success(9) - e2e.success(9);
    Ok(vec![Measure::new("client 9: OSCORE Proxy − OSCORE success", diff, None, " points", Tolerance::Above(0.0))])
}

fn server_rate_unaware(_: &Scenario, aggs: &Aggs) -> Out {
    let mut m = Vec::new();
    if let Some(s) = stats(aggs, "oscore") {
        m.push(Measure::new("OSCORE server responses", s.server_rate(), Some(10.0), "/s", Tolerance::AtLeast(10.0)));
    }
    if let Some(s) = stats(aggs, "oscore-proxy") {
        let tol = Tolerance::Between(8.0, 9.0);
        m.push(Measure::new("OSCORE Proxy server responses", s.server_rate(), Some(9.0), "/s", tol));
    }
    need(m, "needs oscore or oscore-proxy")
}

/// The optimum follows from the configuration (two subtrees, one request per second each): a consequence.
fn server_rate_aware(_: &Scenario, aggs: &Aggs) -> Out {
    let m = AWARE
        .iter()
        .filter_map(|d| stats(aggs, d).map(|s| (d, s)))
        .map(|(d, s)| {
            let what = format!("{} server responses", label(d));
            Measure::new(what, s.server_rate(), Some(2.0), "/s", Tolerance::Relative(0.15))
        })
        .collect();
    need(m, "needs det-oscore-proxy or ndn")
}

/// Median of client 9's retrieval times below 1 s: the paper's sentence is one of "three aspects [that]
/// become visible when we observe the completion time distributions for client 9". (The first version of
/// this check pooled clients 1, 5 and 9, a misreading; docs/lab.md gives both.)
fn subsecond_latency(_: &Scenario, aggs: &Aggs) -> Out {
    let mut m = Vec::new();
    let median = |d: &str| stats(aggs, d).map(|s| s.subsecond_median(&[9]));
    for d in UNAWARE {
        if let Some(x) = median(d) {
            let what = format!("{}: client 9's median sub-second retrieval time", label(d));
            m.push(Measure::new(what, x, Some(100.0), " ms", Tolerance::Relative(0.5)));
        }
    }
    for d in AWARE {
        if let Some(x) = median(d) {
            let what = format!("{}: client 9's median sub-second retrieval time", label(d));
            m.push(Measure::new(what, x, Some(25.0), " ms", Tolerance::Relative(0.5)));
            if let Some(base) = median("oscore") {
                let what = format!("{} / OSCORE: client 9's median sub-second retrieval time", label(d));
                m.push(Measure::new(what, x / base, Some(0.25), "×", Tolerance::AtMost(0.5)));
            }
        }
    }
    need(m, "needs seed-001 deployments")
}

/// Link f_i → f_{i+1} carries i + 1 clients' requests: (i + 1) · 1000 without loss. Arithmetic of the tree
/// (a consequence); retransmissions only add.
fn requests_grow(_: &Scenario, aggs: &Aggs) -> Out {
    let mut m = Vec::new();
    for d in UNAWARE {
        let Some(s) = stats(aggs, d) else { continue };
        for (i, x) in s.per_thousand(&s.link_requests).into_iter().enumerate() {
            let to = if i + 1 == SHARED { "server".to_string() } else { format!("f{}", i + 2) };
            let what = format!("{}: requests f{} → {to} per 1000 per client", label(d), i + 1);
            m.push(Measure::new(what, x, Some((i + 2) as f64 * 1000.0), "", Tolerance::Relative(0.15)));
        }
    }
    need(m, "needs oscore or oscore-proxy")
}

fn proxy_more_requests(_: &Scenario, aggs: &Aggs) -> Out {
    let (Some(e2e), Some(proxy)) = (stats(aggs, "oscore"), stats(aggs, "oscore-proxy")) else {
        return Err("needs oscore and oscore-proxy".into());
    };
    let (a, b) = (proxy.link_requests.iter().sum::<u64>(), e2e.link_requests.iter().sum::<u64>());
    let ratio = if b == 0 { f64::NAN } else { a as f64 / b as f64 };
    Ok(vec![Measure::new(
        "requests on f1..f7 → server, OSCORE Proxy / OSCORE",
        ratio,
        None,
        "×",
        Tolerance::Above(1.0),
    )])
}

/// "approximately 1000–2000 packets" per hop and direction: ±20 % around that range.
fn aware_link_load(_: &Scenario, aggs: &Aggs) -> Out {
    let mut m = Vec::new();
    for d in AWARE {
        let Some(s) = stats(aggs, d) else { continue };
        let req = s.per_thousand(&s.link_requests);
        let resp = s.per_thousand(&s.link_responses);
        let tol = Tolerance::Between(800.0, 2400.0);
        let most = |v: &[f64]| v.iter().copied().fold(f64::NAN, f64::max);
        let least = |v: &[f64]| v.iter().copied().fold(f64::NAN, f64::min);
        m.push(Measure::new(format!("{}: most requests on a shared hop", label(d)), most(&req), None, "", tol));
        m.push(Measure::new(format!("{}: fewest requests on a shared hop", label(d)), least(&req), None, "", tol));
        m.push(Measure::new(format!("{}: most responses on a shared hop", label(d)), most(&resp), None, "", tol));
        m.push(Measure::new(format!("{}: fewest responses on a shared hop", label(d)), least(&resp), None, "", tol));
    }
    need(m, "needs det-oscore-proxy or ndn")
}

/// Client 9's retrievals that took a second or more (a request or response was lost and retransmitted
/// somewhere): their median, ms; `None` with fewer than 10.
fn slow_median(s: &MpStats) -> Option<f64> {
    let slow: Vec<f64> = s.times_ms.get(8)?.iter().copied().filter(|t| *t >= 1000.0).collect();
    (slow.len() >= 10).then(|| slow[slow.len() / 2])
}

/// Fig. 7's "steep stair cases": "the latency for request retransmissions in the seconds range equally
/// reduces for NDN and the deterministic OSCORE Proxy variant … returning responses fan out to all
/// interested clients prematurely well before local retransmission timeouts". Client 9's median retrieval
/// time among those of a second or more, each aware deployment against end-to-end OSCORE: at most 0.8×.
/// INCONCLUSIVE where a deployment has fewer than ten such retrievals (no stairs to compare).
fn retx_stairs(_: &Scenario, aggs: &Aggs) -> Out {
    let base = stats(aggs, "oscore").ok_or("needs oscore")?;
    let b = slow_median(base).ok_or("OSCORE's client 9 has fewer than 10 retrievals of 1 s or more")?;
    let mut m = Vec::new();
    for d in AWARE {
        let Some(s) = stats(aggs, d) else { continue };
        let x = slow_median(s).ok_or_else(|| format!("{}'s client 9 has fewer than 10 slow retrievals", label(d)))?;
        let what = format!("{} / OSCORE: client 9's median retrieval time of 1 s or more", label(d));
        m.push(Measure::new(what, x / b, None, "×", Tolerance::AtMost(0.8)));
    }
    need(m, "needs det-oscore-proxy or ndn")
}

/// The `interval_ms` values of a load sweep, ascending (the highest load first).
fn intervals(aggs: &Aggs) -> Vec<f64> {
    super::values(aggs, "interval_ms")
}

fn stats_at<'a>(aggs: &'a Aggs<'a>, d: &str, interval: f64) -> Option<&'a MpStats> {
    pick(aggs, &[("deployment", t(d)), ("interval_ms", super::n(interval))]).and_then(|a| a.multiparty())
}

/// "steady success rates across all client nodes independently from the induced traffic load" (aware)
/// against "progressively degrade … due to the increased traffic load on the shared path" (unaware), on a
/// sweep of the request interval: at the highest load each unaware deployment loses at least 10 points
/// from client 1 to client 9 (the load is what the claim is about, so it must bite), and at every load
/// each aware deployment loses at most 2.
fn load_collapse(_: &Scenario, aggs: &Aggs) -> Out {
    let iv = intervals(aggs);
    let (Some(&high), true) = (iv.first(), iv.len() >= 2) else {
        return Err("needs a sweep of interval_ms".into());
    };
    let mut m = Vec::new();
    for d in UNAWARE {
        if let Some(s) = stats_at(aggs, d, high) {
            let what = format!("{} at {high} ms: client 1 − client 9 success", label(d));
            m.push(Measure::new(what, s.success(1) - s.success(9), None, " points", Tolerance::AtLeast(10.0)));
        }
    }
    for d in AWARE {
        for &i in &iv {
            if let Some(s) = stats_at(aggs, d, i) {
                let what = format!("{} at {i} ms: client 1 − client 9 success", label(d));
                m.push(Measure::new(what, s.success(1) - s.success(9), Some(0.0), " points", Tolerance::AtMost(2.0)));
            }
        }
    }
    need(m, "needs seed-001 deployments on an interval_ms sweep")
}

/// Where the paper's testbed sits on the load sweep: the longest request interval at which an unaware
/// deployment's client 9 has lost at least 10 points against client 1 (0 when none has). The paper saw
/// the collapse at one request a second, so the claim holds when corral collapses at 1000 ms already.
fn collapse_at_testbed_load(_: &Scenario, aggs: &Aggs) -> Out {
    let iv = intervals(aggs);
    if iv.len() < 2 {
        return Err("needs a sweep of interval_ms".into());
    }
    let mut m = Vec::new();
    for d in UNAWARE {
        let collapsed = iv
            .iter()
            .copied()
            .filter(|&i| stats_at(aggs, d, i).is_some_and(|s| s.success(1) - s.success(9) >= 10.0))
            .fold(0.0, f64::max);
        let what = format!("{}: longest interval with client 9 ≥ 10 points below client 1", label(d));
        m.push(Measure::new(what, collapsed, Some(1000.0), " ms", Tolerance::AtLeast(1000.0)));
    }
    need(m, "needs oscore or oscore-proxy")
}

/// One Table III cell: operations per successful retrieval at the client or the server, ±20 %.
fn cell(m: &mut Vec<Measure>, d: &str, s: &MpStats, what: &str, f: fn(&Ops) -> u64, paper: (f64, f64)) {
    let (c, sv) = s.per_success(f);
    m.push(Measure::new(
        format!("{}: {what} per retrieval, client", label(d)),
        c,
        Some(paper.0),
        "",
        Tolerance::Relative(0.2),
    ));
    m.push(Measure::new(
        format!("{}: {what} per retrieval, server", label(d)),
        sv,
        Some(paper.1),
        "",
        Tolerance::Relative(0.2),
    ));
}

fn table3_unaware(_: &Scenario, aggs: &Aggs) -> Out {
    let mut m = Vec::new();
    for (d, paper) in [("oscore", (2.93, 4.63)), ("oscore-proxy", (2.66, 3.21))] {
        if let Some(s) = stats(aggs, d) {
            cell(&mut m, d, s, "AEAD", |o| o.aead, paper);
        }
    }
    need(m, "needs oscore or oscore-proxy")
}

fn table3_aware(_: &Scenario, aggs: &Aggs) -> Out {
    let mut m = Vec::new();
    if let Some(s) = stats(aggs, "det-oscore-proxy") {
        cell(&mut m, "det-oscore-proxy", s, "AEAD", |o| o.aead, (2.08, 0.49));
        cell(&mut m, "det-oscore-proxy", s, "signatures", |o| o.signatures, (1.00, 0.24));
        cell(&mut m, "det-oscore-proxy", s, "HMAC", |o| o.hmac, (3.24, 0.73));
    }
    if let Some(s) = stats(aggs, "ndn") {
        cell(&mut m, "ndn", s, "AEAD", |o| o.aead, (1.00, 0.23));
        cell(&mut m, "ndn", s, "HMAC", |o| o.hmac, (1.00, 0.23));
    }
    need(m, "needs det-oscore-proxy or ndn")
}

#[cfg(test)]
mod tests {
    use super::super::testing::Synth;
    use super::*;
    use crate::record::Facts;
    use std::sync::Arc;

    /// A deployment's stats: success per client (1..9) in %, server rate per s, sub-second times (ms),
    /// ops per successful retrieval (client, server) as (aead, signatures, hmac), requests and responses
    /// per shared link (per 1000).
    struct Fake {
        success: [f64; 9],
        rate: f64,
        fast_ms: f64,
        client: (f64, f64, f64),
        server: (f64, f64, f64),
        requests: [u64; 7],
        responses: [u64; 7],
    }

    fn mp(d: &str, f: &Fake) -> MpStats {
        let n = 1000u32;
        let times_ms: Vec<Vec<f64>> =
            f.success.iter().map(|s| vec![f.fast_ms; (s * f64::from(n) / 100.0).round() as usize]).collect();
        let ok: f64 = times_ms.iter().map(|t| t.len() as f64).sum();
        let ops = |x: (f64, f64, f64)| Ops {
            aead: (x.0 * ok).round() as u64,
            signatures: (x.1 * ok).round() as u64,
            hmac: (x.2 * ok).round() as u64,
        };
        MpStats {
            deployment: d.into(),
            requests: n,
            interval_s: 1.0,
            times_ms,
            sent: vec![n; 9],
            server_per_s: vec![f.rate.round() as u32; n as usize],
            client_ops: ops(f.client),
            server_ops: ops(f.server),
            link_requests: f.requests.to_vec(),
            link_responses: f.responses.to_vec(),
            server_copies: 0,
        }
    }

    fn synth(rows: &[(&str, Fake)]) -> Synth {
        let mut s = Synth::new();
        for (d, f) in rows {
            s.add(&[("deployment", t(d))], 0.1, 100.0, 100.0).facts = Facts::Multiparty(Arc::new(mp(d, f)));
        }
        s
    }

    const GROWING: [u64; 7] = [2000, 3000, 4000, 5000, 6000, 7000, 8000];
    const FLAT: [u64; 7] = [1000, 1100, 1200, 1100, 1000, 1000, 1000];

    /// Data shaped as the paper describes it.
    fn paper_like() -> Synth {
        synth(&[
            (
                "oscore",
                Fake {
                    success: [97.0, 95.0, 90.0, 85.0, 80.0, 75.0, 70.0, 65.0, 60.0],
                    rate: 11.0,
                    fast_ms: 100.0,
                    client: (2.93, 0.0, 0.0),
                    server: (4.63, 0.0, 0.0),
                    requests: GROWING,
                    responses: GROWING,
                },
            ),
            (
                "oscore-proxy",
                Fake {
                    success: [100.0, 96.0, 92.0, 88.0, 84.0, 80.0, 75.0, 70.0, 65.0],
                    rate: 8.4,
                    fast_ms: 110.0,
                    client: (2.66, 0.0, 0.0),
                    server: (3.21, 0.0, 0.0),
                    requests: [2100, 3100, 4100, 5100, 6100, 7100, 8100],
                    responses: GROWING,
                },
            ),
            (
                "det-oscore-proxy",
                Fake {
                    success: [99.0; 9],
                    rate: 2.0,
                    fast_ms: 25.0,
                    client: (2.08, 1.0, 3.24),
                    server: (0.49, 0.24, 0.73),
                    requests: FLAT,
                    responses: FLAT,
                },
            ),
            (
                "ndn",
                Fake {
                    success: [99.5; 9],
                    rate: 2.0,
                    fast_ms: 24.0,
                    client: (1.0, 0.0, 1.0),
                    server: (0.23, 0.0, 0.23),
                    requests: FLAT,
                    responses: FLAT,
                },
            ),
        ])
    }

    /// The opposite of every claim: no degradation, no caching benefit, loss-free crypto, flat links.
    fn contrary() -> Synth {
        let flat = |rate: f64, fast: f64, ops: f64| Fake {
            success: [90.0, 90.0, 90.0, 90.0, 90.0, 90.0, 90.0, 90.0, 99.0],
            rate,
            fast_ms: fast,
            client: (ops, 0.0, ops),
            server: (ops, 0.0, ops),
            requests: [5000; 7],
            responses: [5000; 7],
        };
        synth(&[
            ("oscore", flat(9.0, 300.0, 2.0)),
            ("oscore-proxy", Fake { success: [90.0; 9], requests: [4000; 7], ..flat(7.0, 300.0, 2.0) }),
            (
                "det-oscore-proxy",
                Fake { success: [99.0, 90.0, 90.0, 90.0, 90.0, 90.0, 90.0, 90.0, 80.0], ..flat(9.0, 300.0, 2.0) },
            ),
            ("ndn", Fake { success: [99.0, 90.0, 90.0, 90.0, 90.0, 90.0, 90.0, 90.0, 80.0], ..flat(9.0, 300.0, 2.0) }),
        ])
    }

    /// Checks that need more than one point per deployment (a load sweep) or slow retrievals: their own
    /// tests below.
    const OWN_DATA: [&str; 3] = ["mp_retx_stairs", "mp_load_collapse", "mp_collapse_at_testbed_load"];

    #[test]
    fn every_check_agrees_with_data_shaped_as_the_paper_says() {
        let s = paper_like();
        for c in CHECKS.iter().filter(|c| !OWN_DATA.contains(&c.name)) {
            assert_eq!(s.holds(c.name), Ok(true), "{}", c.name);
        }
    }

    #[test]
    fn every_check_disagrees_with_contrary_data() {
        let s = contrary();
        for c in CHECKS.iter().filter(|c| !OWN_DATA.contains(&c.name)) {
            assert_eq!(s.holds(c.name), Ok(false), "{}", c.name);
        }
    }

    /// A deployment with these success rates and nothing else of note (30 ms retrievals, one AEAD each).
    fn plain(success: [f64; 9]) -> Fake {
        let (client, server) = ((1.0, 0.0, 0.0), (1.0, 0.0, 0.0));
        Fake { success, rate: 2.0, fast_ms: 30.0, client, server, requests: FLAT, responses: FLAT }
    }

    /// Fig. 7's stairs: the aware deployments' client 9 retrievals of a second or more against OSCORE's.
    #[test]
    fn stairs_hold_when_aggregation_shortens_retransmitted_retrievals() {
        let build = |aware_slow_ms: f64| {
            let mut s = Synth::new();
            for (d, slow) in [("oscore", 2100.0), ("det-oscore-proxy", aware_slow_ms), ("ndn", aware_slow_ms)] {
                let mut m = mp(d, &plain([99.0; 9]));
                m.times_ms[8].extend(std::iter::repeat_n(slow, 20));
                s.add(&[("deployment", t(d))], 0.1, 100.0, 100.0).facts = Facts::Multiparty(Arc::new(m));
            }
            s
        };
        assert_eq!(build(1200.0).holds("mp_retx_stairs"), Ok(true), "fanned out before the 2 s timeout");
        assert_eq!(build(2100.0).holds("mp_retx_stairs"), Ok(false), "on the same stair as OSCORE");
        assert!(synth(&[]).holds("mp_retx_stairs").is_err());
    }

    /// The load sweep: client 9's success per (interval, deployment).
    fn load(unaware9: [f64; 2], aware9: f64) -> Synth {
        let mut s = Synth::new();
        for (i, interval) in [250.0, 1000.0].into_iter().enumerate() {
            for d in ["oscore", "oscore-proxy", "det-oscore-proxy", "ndn"] {
                let c9 = if UNAWARE.contains(&d) { unaware9[i] } else { aware9 };
                let mut success = [99.0; 9];
                success[8] = c9;
                s.add(&[("interval_ms", super::super::n(interval)), ("deployment", t(d))], 0.1, 100.0, 100.0).facts =
                    Facts::Multiparty(Arc::new(mp(d, &plain(success))));
            }
        }
        s
    }

    #[test]
    fn load_checks_can_hold_and_fail() {
        assert_eq!(load([60.0, 98.0], 99.0).holds("mp_load_collapse"), Ok(true));
        assert_eq!(load([95.0, 98.0], 99.0).holds("mp_load_collapse"), Ok(false), "the load never bites");
        assert_eq!(load([60.0, 98.0], 90.0).holds("mp_load_collapse"), Ok(false), "aware deployments degrade too");
        assert_eq!(load([60.0, 60.0], 99.0).holds("mp_collapse_at_testbed_load"), Ok(true), "collapsed at 1 s");
        assert_eq!(load([60.0, 98.0], 99.0).holds("mp_collapse_at_testbed_load"), Ok(false), "only at 250 ms");
        assert!(paper_like().holds("mp_load_collapse").is_err(), "no sweep: inconclusive");
    }

    #[test]
    fn checks_without_their_deployments_are_inconclusive() {
        let s = synth(&[]);
        for c in CHECKS {
            assert!(s.holds(c.name).is_err(), "{}", c.name);
        }
    }
}
