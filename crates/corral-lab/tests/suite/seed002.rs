//! Seed 002's scenarios in quick form, as the suite runs them: each writes its report (CSV, SVG figures,
//! summary) and every finding gets a verdict (none INCONCLUSIVE for want of points: the quick sweeps keep
//! the points each check needs; the TinyCoAP-against-CoapBlip claims the text gives no figure for are
//! INCONCLUSIVE and say why). The verdicts themselves are printed, not pinned: a model change may move them, and
//! `docs/lab.md` records the full runs'.

use crate::edited;

use corral_lab::data::RunData;
use corral_lab::findings::{Kind, Tolerance};
use corral_lab::scenario::{builtin, Metric, Scenario};
use corral_lab::sweep::{self, RunOptions};
use edited::edited;

/// The TinyCoAP-against-CoapBlip claims the lab cannot derive from the text (see `findings::baseline`).
const UNDERIVABLE: [&str; 4] = [
    "tinycoap_faster_than_coapblip",
    "coapblip_energy_above_persistent",
    "coapblip_goodput_lower_but_close",
    "coapblip_worst_server_rate",
];

#[test]
fn seed_002_scenarios_run_quick_and_every_finding_has_a_verdict() {
    for name in ["seed002-latency", "seed002-workload", "seed002-goodput"] {
        let text = builtin(name).expect("a builtin");
        let s = Scenario::parse(text).expect("parses");
        let opts = RunOptions { seed: 1, quick: true, shard: None, jobs: 1 };
        let data = sweep::run(&s, text, &opts, &|_, _| {}).expect("runs");
        let dir = std::env::temp_dir().join(format!("corral-seed002-{}-{name}", std::process::id()));
        let found = corral_lab::report::write_report(&dir, &data).expect("writes the report");
        for f in &s.figures {
            let svg = std::fs::read_to_string(dir.join(format!("{}.svg", f.id))).expect("a figure");
            assert!(svg.contains("<svg") && svg.contains("<path"), "{name}: {} has a plotted line", f.id);
        }
        println!("{name}:\n{}", corral_lab::report::findings_text(&found));
        assert_eq!(found.len(), s.findings.len());
        for f in &found {
            // Table 4 is the goodput run's input under the paper's procedure: only the frame model's
            // variant compares with it.
            if f.check.starts_with("table4_") {
                continue;
            }
            // TinyCoAP against CoapBlip where the paper's cause is a processing time it gives no figure for
            // (or, in the workload, one this run does not set): INCONCLUSIVE, saying so.
            if UNDERIVABLE.contains(&f.check.as_str()) {
                assert_eq!(f.kind, Kind::Inconclusive, "{name}: {}", f.check);
                assert!(f.note.contains("cannot be derived"), "{name}: {}: {}", f.check, f.note);
                continue;
            }
            assert_ne!(f.kind, Kind::Inconclusive, "{name}: {} ({})", f.check, f.note);
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}

fn run_quick(text: &str) -> (Scenario, RunData) {
    let s = Scenario::parse(text).expect("parses");
    let opts = RunOptions { seed: 1, quick: true, shard: None, jobs: 2 };
    let data = sweep::run(&s, text, &opts, &|_, _| {}).expect("runs");
    (s, data)
}

/// Mean response time (ms) of every point, in point order.
fn response_times(data: &RunData) -> Vec<f64> {
    data.aggregates().iter().map(|(_, a)| a.rt.as_ref().map_or(f64::NAN, |r| r.mean)).collect()
}

#[test]
fn calibration_cpu_time_changes_the_baseline_results() {
    let sweep = ("quick_sweep = { payload = [10, 50, 300, 1200] }", "quick_sweep = { payload = [50] }");
    let (_, none) = run_quick(&edited("seed002-latency", &[sweep]));
    let (_, cpu) = run_quick(&edited(
        "seed002-latency",
        &[sweep, ("\nprocessing_delay_ms = 0\n", "\nprocessing_delay_ms = 30\n")],
    ));
    let (a, b) = (response_times(&none), response_times(&cpu));
    println!("latency ms without CPU {a:?}, with 30 ms per datagram {b:?}");
    // Each transaction's datagrams are each delayed 30 ms at their receiver: at least 60 ms more.
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert!(y - x >= 59.9, "{x} ms without CPU, {y} ms with");
    }
}

#[test]
fn the_goodput_run_discards_whole_messages_at_the_server_by_default() {
    let s = Scenario::parse(builtin("seed002-goodput").expect("a builtin")).expect("parses");
    let b = s.baseline.as_ref().expect("[baseline]");
    assert_eq!((b.loss_model.as_str(), b.discard_at.as_str(), b.tcp.as_str()), ("message", "server", "paper"));
    // Every input of the paper's procedure has a row, with the paper's place or the source of the
    // assumption.
    for input in ["loss procedure", "error rates", "CoAP timers", "TCP timers", "payload", "server implementation"] {
        assert!(s.procedure.iter().any(|r| r.input == input), "no procedure row for {input}");
    }
}

/// §6: "CoapBlip is able to reach 650 bytes as maximum payload size [...] TinyCoAP [...] 1,200 bytes". A
/// larger body is refused (5.00, counted unanswered), never sent truncated.
#[test]
fn coapblip_serves_bodies_up_to_650_bytes_and_tinycoap_up_to_1200() {
    let (_, data) = run_quick(&edited(
        "seed002-latency",
        &[
            ("quick_sweep = { payload = [10, 50, 300, 1200] }", "quick_sweep = { payload = [650, 700, 1200] }"),
            (
                "solution = [\"coap\", \"coapblip\", \"http-tcp\", \"http-persistent\", \"http-udp\", \"coap-aa\"]",
                "solution = [\"coap\", \"coapblip\"]",
            ),
        ],
    ));
    let mut seen = Vec::new();
    for (p, a) in data.aggregates() {
        let label = p.label();
        println!("{label}: {} % answered", a.member_reliability);
        let over = label.contains("coapblip") && !label.contains("payload=650");
        assert_eq!(a.member_reliability, if over { 0.0 } else { 100.0 }, "{label}");
        seen.push(label);
    }
    assert_eq!(seen.len(), 6, "{seen:?}");
}

/// Issue 43, common random numbers: the paper compared its solutions under one random sequence, and so
/// does the lab — every point of a replicate draws from the same seed. Two identical server profiles
/// (CoapBlip given TinyCoAP's buffer path and payload limit) give the same goodput in every cell; on
/// independent draws they differed 0.69-1.96× cell by cell, so a "highest in 34 of 36 cells" was noise.
#[test]
fn identical_server_profiles_give_identical_goodput_in_every_cell() {
    let text = edited(
        "seed002-goodput",
        &[
            (
                "tcp_max_rto_ms = 16000\n",
                "tcp_max_rto_ms = 16000\ncoapblip_max_payload = 1200\ncoapblip_buffer = \"copied\"\n",
            ),
            (
                "solution = [\"coap\", \"coapblip\", \"http-tcp\", \"http-persistent\", \"coap-aa\"]",
                "solution = [\"coap\", \"coapblip\"]",
            ),
        ],
    );
    let (_, data) = run_quick(&text);
    let cells = |solution: &str| -> Vec<(String, f64)> {
        data.aggregates()
            .iter()
            .filter(|(p, _)| p.get("solution").map(ToString::to_string).as_deref() == Some(solution))
            .map(|(p, a)| (p.label().replace(solution, "_"), a.metric(Metric::Goodput).0))
            .collect()
    };
    let (tiny, blip) = (cells("coap"), cells("coapblip"));
    println!("TinyCoAP {tiny:?}\nCoapBlip with TinyCoAP's profile {blip:?}");
    assert!(tiny.len() >= 8 && tiny.iter().any(|(_, g)| *g > 0.0), "{tiny:?}");
    assert_eq!(tiny, blip, "the same profile on the same draws");
}

/// The claims of seed 002 that compare two solutions cell by cell.
const COMPARISONS: [&str; 9] = [
    "coap_faster_than_http_tcp",
    "persistent_faster_than_tcp",
    "http_udp_lower_bound",
    "coap_less_energy",
    "coap_fewer_bytes",
    "http_udp_best_server_rate",
    "coap_best_goodput",
    "persistent_better_at_high_snr",
    "tcp_better_at_low_snr",
];

/// Issue 43, item 5: two identical profiles on one sequence of draws agree exactly (above), so they bound
/// no noise; the twin on a second sequence does (`coap-aa`). Every comparison of solutions in seed 002's
/// findings is reported beside the A/A noise at its cell, and a comparison that holds exceeds it. On main
/// the comparisons were bare: "CoAP highest in 34 of 36 cells" could not be told from the draws.
#[test]
fn every_comparison_of_solutions_is_reported_beside_the_a_a_noise() {
    let mut moved = 0;
    for name in ["seed002-latency", "seed002-workload", "seed002-goodput"] {
        let (s, data) = run_quick(builtin(name).expect("a builtin"));
        let found = corral_lab::findings::evaluate(&s, &data.aggregates());
        let mut compared = 0;
        for f in found.iter().filter(|f| COMPARISONS.contains(&f.check.as_str())) {
            for m in &f.measures {
                let line = m.to_string();
                println!("{name}: {}: {line}", f.check);
                assert!(
                    line.contains("A/A noise") && line.contains("beyond the A/A noise"),
                    "{name}: {}: {line}",
                    f.check
                );
                let noise = m.noise.expect("the noise beside the comparison");
                compared += 1;
                moved += usize::from(noise.mean > if noise.ratio { 1.0 } else { 0.0 });
                // A comparison that held exceeded its noise: a ratio beyond the factor, a difference beyond ±.
                let tie = if noise.ratio { 1.0 } else { 0.0 };
                let strict = matches!(m.tolerance, Tolerance::Above(x) | Tolerance::Below(x) if x == tie);
                if strict && m.held == m.of {
                    let beyond =
                        if noise.ratio { m.mean.max(1.0 / m.mean) > noise.mean } else { (m.mean).abs() > noise.mean };
                    assert!(beyond, "{name}: {}: held inside its noise: {line}", f.check);
                }
            }
        }
        assert!(compared > 0, "{name}: no comparison of solutions measured");
        // TinyCoAP against CoapBlip cannot be derived; the measured ratios it shows carry the noise too.
        for f in found
            .iter()
            .filter(|f| f.check == "tinycoap_faster_than_coapblip" || f.check == "coapblip_goodput_lower_but_close")
        {
            assert!(f.note.contains("A/A noise"), "{name}: {}: {}", f.check, f.note);
        }
    }
    // The twin is not a copy: on a second sequence of draws it differs from TinyCoAP somewhere.
    assert!(moved > 0, "the A/A noise is zero everywhere: the twin drew the same sequence");
}
