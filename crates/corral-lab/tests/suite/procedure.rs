//! A scenario's `[[procedure]]` table — the paper's inputs, where it states them, how the lab sets them —
//! opens its report; a row that gives neither the paper's place nor the source of an assumption is refused.

use corral_lab::data::RunData;
use corral_lab::report::{procedure_text, summary_text};
use corral_lab::scenario::{builtin, Scenario};

const ROWS: &str = r#"
[[procedure]]
input = "loss generator"
paper = "a loss event at the access point every second"
where = "§4, Fig. 12"
lab = "[stream] loss"

[[procedure]]
input = "TCP minimum RTO"
paper = "not stated (go-coap on Linux)"
lab = "200 ms"
assumed = "Linux TCP_RTO_MIN, include/net/tcp.h"
"#;

/// The scenario text with `rows` inserted before its first section (top-level arrays of tables may come
/// anywhere, but a key after `[network]` would belong to it).
fn with_rows(name: &str, rows: &str) -> String {
    let text = builtin(name).expect("built in");
    let at = text.find("\n[").expect("a section");
    format!("{}{rows}{}", &text[..at], &text[at..])
}

#[test]
fn the_report_lists_every_input_with_its_source_and_marks_assumptions() {
    let base = Scenario::parse(builtin("ext-observe").expect("built in")).expect("parses");
    let (n, assumed) = (base.procedure.len(), base.procedure.iter().filter(|r| r.is_assumed()).count());
    let s = Scenario::parse(&with_rows("ext-observe", ROWS)).expect("parses");
    let text = procedure_text(&s);
    assert!(text.contains(&format!("procedure ({} inputs, {} assumed)", n + 2, assumed + 1)), "{text}");
    assert!(text.contains("from:  §4, Fig. 12"), "{text}");
    assert!(text.contains("from:  assumed: Linux TCP_RTO_MIN"), "{text}");
}

#[test]
fn a_procedure_row_without_the_papers_place_or_an_assumption_is_refused() {
    let row = "\n[[procedure]]\ninput = \"payload\"\nlab = \"150 B\"\n";
    let e = Scenario::parse(&with_rows("ext-observe", row)).expect_err("no source");
    assert!(e.to_string().contains("procedure[0] (payload)"), "{e}");
}

/// Issue 43: the table follows an edited scenario. seed003-loss with 30 ms of CPU per datagram printed
/// the built-in's "no CPU cost (processing_delay_ms = 0)" and nothing else; the row now says what this run
/// set, and a row naming no edited input says nothing more.
#[test]
fn a_procedure_row_whose_input_was_edited_says_what_this_run_set() {
    let text = builtin("seed003-loss").expect("built in").replacen(
        "\nprocessing_delay_ms = 0\n",
        "\nprocessing_delay_ms = 30\n",
        1,
    );
    let s = Scenario::parse(&text).expect("parses");
    let d = RunData {
        points: s.points(true),
        scenario: s,
        scenario_text: text,
        seed: 1,
        quick: true,
        results: Vec::new(),
        shard: None,
        sensitivity: Vec::new(),
        interrupted: false,
        shares: Vec::new(),
        variant_points_missing: 0,
    };
    let summary = summary_text(&d, &[]);
    let row = summary.split("  hardware and processing\n").nth(1).expect("the CPU row");
    let row: String = row.lines().take_while(|l| l.starts_with("      ")).collect::<Vec<_>>().join("\n");
    assert!(row.contains("no CPU cost"), "{row}");
    assert!(row.contains("EDITED in this run: calibration.processing_delay_ms: 30 (built-in: 0)"), "{row}");
    assert_eq!(summary.matches("EDITED in this run").count(), 1, "only the row naming it: {summary}");
}
