//! The point tables of a report carry the family's own numbers: a scenario whose figures plot energy,
//! throughput or NRP shows them per point in `aggregates.csv`, `summary.json`, `summary.txt` and the page —
//! not only response-time columns that family never fills (seed 004's table was all dashes).

use corral_lab::scenario::{builtin, Scenario};
use corral_lab::sweep::{self, RunOptions};

#[test]
fn the_point_tables_carry_the_metrics_the_figures_plot() {
    let name = "seed002-latency";
    let text = builtin(name).expect("a builtin");
    let s = Scenario::parse(text).expect("parses");
    let opts = RunOptions { seed: 1, quick: true, shard: None, jobs: 2 };
    println!("{name}, seed {}, quick", opts.seed);
    let data = sweep::run(&s, text, &opts, &|_, _| {}).expect("runs");
    let dir = std::env::temp_dir().join(format!("corral-tables-{}", std::process::id()));
    corral_lab::report::write_report(&dir, &data).expect("report");
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).expect(f);

    let csv = read("aggregates.csv");
    let head: Vec<&str> = csv.lines().next().expect("a header").split(',').collect();
    let col = head.iter().position(|c| *c == "energy").expect("an energy column");
    // An empty cell is a point that measured nothing (CoapBlip asked for 1200 B answers none).
    let cells: Vec<&str> = csv.lines().skip(1).map(|l| l.split(',').nth(col).unwrap()).collect();
    let energies: Vec<f64> = cells.iter().filter(|c| !c.is_empty()).map(|c| c.parse().unwrap()).collect();
    assert!(energies.len() + 1 >= cells.len() && energies.iter().all(|e| *e > 0.0), "energy per point: {cells:?}");

    let json: serde_json::Value = serde_json::from_str(&read("summary.json")).expect("json");
    let first = &json["aggregates"][0]["metrics"];
    assert!(first["energy"].as_f64().is_some_and(|e| e > 0.0), "summary.json's first point: {first}");

    let summary = read("summary.txt");
    let table = summary.lines().skip_while(|l| !l.starts_with("point ")).collect::<Vec<_>>();
    assert!(table.first().is_some_and(|h| h.contains("energy") && h.contains("air_bytes")), "{summary}");
    assert!(read("index.html").contains("server radio energy per transaction (mJ)</th>"), "the page's table");
    let _ = std::fs::remove_dir_all(&dir);
}
