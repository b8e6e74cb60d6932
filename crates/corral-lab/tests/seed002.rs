//! Seed 002's scenarios in quick form, as the suite runs them: each writes its report (CSV, SVG figures,
//! summary) and every finding gets a verdict (none INCONCLUSIVE: the quick sweeps keep the points each
//! check needs). The verdicts themselves are printed, not pinned: a model change may move them, and
//! `docs/lab.md` records the full runs'.

use corral_lab::findings::Kind;
use corral_lab::scenario::{builtin, Scenario};
use corral_lab::sweep::{self, RunOptions};

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
            assert_ne!(f.kind, Kind::Inconclusive, "{name}: {} ({})", f.check, f.note);
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
