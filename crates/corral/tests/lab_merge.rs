//! `corral lab merge` for every simulated family: the shards of a stream (seed 003), a baseline (seed 002)
//! and a multiparty (seed 001) run join into the report of the whole run — every node role of `nodes.csv`
//! (sensor, collector, server, …) and every family's facts in `points.csv` read back.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn corral(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_corral")).args(args).output().expect("run corral")
}

fn ok(o: &Output) {
    assert!(o.status.success(), "exit {:?}\nstderr: {}", o.status.code(), String::from_utf8_lossy(&o.stderr));
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn stream_baseline_and_multiparty_shards_merge_into_the_whole_run() {
    for scenario in ["seed003-loss", "seed002-latency", "seed001-multiparty"] {
        let root: PathBuf = std::env::temp_dir().join(format!("corral-lab-merge-{}-{scenario}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let run = |dir: &str, extra: &[&str]| {
            let out = root.join(dir);
            let mut args = vec!["lab", "run", scenario, "--quick", "-q", "--seed", "3", "--out", out.to_str().unwrap()];
            args.extend_from_slice(extra);
            ok(&corral(&args));
            out
        };
        let whole = run("whole", &[]);
        let s0 = run("s0", &["--shard", "0/2"]);
        let s1 = run("s1", &["--shard", "1/2"]);
        let merged = root.join("merged");
        ok(&corral(&[
            "lab",
            "merge",
            s0.to_str().unwrap(),
            s1.to_str().unwrap(),
            "--out",
            merged.to_str().unwrap(),
            "-q",
        ]));
        for f in ["queries.csv", "aggregates.csv", "points.csv", "links.csv", "nodes.csv", "summary.txt"] {
            assert_eq!(
                read(&whole.join(f)),
                read(&merged.join(f)),
                "{scenario}: {f}: merged shards differ from the whole run"
            );
        }
        let _ = std::fs::remove_dir_all(root);
    }
}
