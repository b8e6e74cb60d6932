//! Issue 29's rules for every report, as a user meets them through `corral lab`: a `--quick` report says
//! its verdicts are a preview; a report from an edited scenario lists what differs from the built-in; a
//! `[calibration]` field the family's runner does not read is refused, naming it; a Slurm array task or a
//! Kubernetes Indexed Job picks its shard from the environment; a merge that misses a shard fails unless
//! asked for a partial report; `-q` prints the verdicts only; Ctrl-C leaves a report marked interrupted, in
//! either phase; seed 004 runs the paper's procedure, and each of its AGREES turns DISAGREES when its cause
//! is removed (needs root: corral link).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn corral_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_corral"));
    c.args(args);
    for var in ["SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN", "JOB_COMPLETION_INDEX"] {
        c.env_remove(var);
    }
    c.envs(env.iter().copied());
    c.output().expect("run corral")
}

fn corral(args: &[&str]) -> Output {
    corral_env(args, &[])
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "exit {:?}\nstderr: {}", o.status.code(), String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("corral-lab-procedures-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A small simulated scenario whose quick run takes a second.
const SMALL: &str = "seed003-delay";

#[test]
fn a_quick_report_says_its_verdicts_are_a_preview() {
    let dir = scratch("preview");
    let out = dir.join("r");
    let text = ok(&corral(&["lab", "run", SMALL, "--quick", "--out", out.to_str().unwrap(), "-q"]));
    assert!(text.contains("PREVIEW") && text.contains("--quick"), "{text}");
    assert!(read(&out.join("index.html")).contains("PREVIEW"));
    let json: serde_json::Value = serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    assert_eq!(json["preview"], true);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_edited_scenario_lists_the_inputs_that_differ_from_the_builtin() {
    let dir = scratch("edited");
    let original = ok(&corral(&["lab", "show", SMALL]));
    let edited = original.replacen("[workload]\n", "[workload]\npause_ms = 7\n", 1);
    assert_ne!(edited, original, "the scenario has a [workload] section");
    let file = dir.join("mine.toml");
    std::fs::write(&file, &edited).unwrap();
    let out = dir.join("r");
    let text = ok(&corral(&["lab", "run", file.to_str().unwrap(), "--quick", "--out", out.to_str().unwrap(), "-q"]));
    assert!(text.contains("EDITED") && text.contains("workload.pause_ms: 7 (built-in: not set)"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    assert_eq!(json["edited"].as_array().map(Vec::len), Some(1), "{}", json["edited"]);
    // The built-in itself is not edited.
    let plain = ok(&corral(&["lab", "run", SMALL, "--quick", "--out", dir.join("p").to_str().unwrap(), "-q"]));
    assert!(!plain.contains("EDITED"), "{plain}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_calibration_field_the_runner_does_not_read_is_refused_naming_it() {
    // Seed 004's runner (real programs over corral link) reads no calibration constant; the refusal comes
    // before anything runs, so this needs no root.
    let dir = scratch("calibration");
    let original = ok(&corral(&["lab", "show", "seed004-throughput"]));
    let file = dir.join("cpu.toml");
    let edited = original.replacen("set = \"none\"\n", "set = \"none\"\nprocessing_delay_ms = 30\n", 1);
    assert_ne!(edited, original);
    std::fs::write(&file, edited).unwrap();
    let o = corral(&["lab", "run", file.to_str().unwrap(), "--quick", "--out", dir.join("r").to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "a usage error: {err}");
    assert!(err.contains("calibration.processing_delay_ms = 30") && err.contains("[emulated]"), "{err}");
    assert!(!dir.join("r").exists(), "nothing ran");
    // A sensitivity variant that varies it is refused the same way.
    let variant = original + "\n[[sensitivity]]\nname = \"slow\"\nset = { \"calibration.rx_queue\" = 2 }\n";
    std::fs::write(&file, variant).unwrap();
    let o = corral(&["lab", "run", file.to_str().unwrap(), "--quick", "--out", dir.join("r").to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("calibration.rx_queue"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_slurm_array_task_picks_its_shard_and_says_so() {
    let dir = scratch("slurm");
    let out = dir.join("s1");
    let o = corral_env(
        &["lab", "run", SMALL, "--quick", "--out", out.to_str().unwrap(), "-q"],
        &[("SLURM_ARRAY_TASK_ID", "1"), ("SLURM_ARRAY_TASK_COUNT", "2")],
    );
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("shard 1/2: from SLURM_ARRAY_TASK_ID=1"), "{err}");
    let run: serde_json::Value = serde_json::from_str(&read(&out.join("run.json"))).unwrap();
    assert_eq!(run["shard"], serde_json::json!([1, 2]));
    // An explicit --shard wins over the environment.
    let o = corral_env(
        &["lab", "run", SMALL, "--quick", "--shard", "0/2", "--out", dir.join("s0").to_str().unwrap(), "-q"],
        &[("SLURM_ARRAY_TASK_ID", "1"), ("SLURM_ARRAY_TASK_COUNT", "2")],
    );
    ok(&o);
    let run: serde_json::Value = serde_json::from_str(&read(&dir.join("s0").join("run.json"))).unwrap();
    assert_eq!(run["shard"], serde_json::json!([0, 2]));
    // The two merge into the whole run.
    let merged = ok(&corral(&[
        "lab",
        "merge",
        dir.join("s0").to_str().unwrap(),
        out.to_str().unwrap(),
        "--out",
        dir.join("m").to_str().unwrap(),
        "-q",
    ]));
    assert!(merged.contains("findings:"), "{merged}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_kubernetes_index_needs_the_job_s_completions() {
    let dir = scratch("k8s");
    let o = corral_env(
        &["lab", "run", SMALL, "--quick", "--out", dir.join("r").to_str().unwrap(), "-q"],
        &[("JOB_COMPLETION_INDEX", "1")],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--shard-count"), "{}", String::from_utf8_lossy(&o.stderr));
    let o = corral_env(
        &["lab", "run", SMALL, "--quick", "--shard-count", "3", "--out", dir.join("r").to_str().unwrap(), "-q"],
        &[("JOB_COMPLETION_INDEX", "1")],
    );
    ok(&o);
    assert!(String::from_utf8_lossy(&o.stderr).contains("shard 1/3: from JOB_COMPLETION_INDEX=1"));
    let _ = std::fs::remove_dir_all(dir);
}

/// Issue 43: a lost shard must not pass silently through `sbatch --dependency=afterok`: the merge of an
/// incomplete set exits non-zero and writes nothing; `--partial` writes a report that says PARTIAL.
#[test]
fn a_merge_that_misses_a_shard_fails_unless_partial() {
    let dir = scratch("lost-shard");
    let s0 = dir.join("s0");
    ok(&corral(&["lab", "run", SMALL, "--quick", "--shard", "0/2", "--out", s0.to_str().unwrap(), "-q"]));
    let m = dir.join("m");
    let o = corral(&["lab", "merge", s0.to_str().unwrap(), "--out", m.to_str().unwrap(), "-q"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("missing") && err.contains("--partial"), "{err}");
    assert!(!m.exists(), "nothing written");
    let text = ok(&corral(&["lab", "merge", s0.to_str().unwrap(), "--out", m.to_str().unwrap(), "--partial", "-q"]));
    assert!(text.contains("PARTIAL: the merged shards cover"), "{text}");
    assert!(read(&m.join("index.html")).contains("PARTIAL"));
    let _ = std::fs::remove_dir_all(dir);
}

/// Issue 43: the sensitivity variants shard like the base points. `merge` reran every variant serially on
/// one machine (19.9 s against 4–5 s per fig10 shard); now each shard runs its share of the variants'
/// points (`sensitivity/<k>/` beside its own), the merge runs nothing and gives the unsharded run's
/// sensitivity table byte for byte, and a shard's lost share fails the merge unless `--partial`.
#[test]
fn sensitivity_variants_shard_and_merge_without_rerunning() {
    let dir = scratch("sharded-variants");
    let run = |name: &str, extra: &[&str]| {
        let out = dir.join(name);
        let mut args = vec!["lab", "run", SMALL, "--quick", "--out", out.to_str().unwrap(), "-q"];
        args.extend_from_slice(extra);
        ok(&corral(&args));
        out
    };
    let whole = run("whole", &[]);
    let (s0, s1) = (run("s0", &["--shard", "0/2"]), run("s1", &["--shard", "1/2"]));
    // Each shard holds part of the variants' points, and together they hold them all.
    let rows = |d: &Path| -> usize {
        (0..3)
            .map(|v| d.join(format!("sensitivity/{v}/points.csv")))
            .filter(|f| f.exists())
            .map(|f| read(&f).lines().count() - 1)
            .sum()
    };
    let (r0, r1) = (rows(&s0), rows(&s1));
    assert!(r0 > 0 && r1 > 0, "each shard runs variant points: {r0} and {r1}");
    let m = dir.join("m");
    let merge = |extra: &[&str]| {
        let mut args =
            vec!["lab", "merge", s0.to_str().unwrap(), s1.to_str().unwrap(), "--out", m.to_str().unwrap(), "-q"];
        args.extend_from_slice(extra);
        corral(&args)
    };
    ok(&merge(&[]));
    let table =
        |d: &Path| read(&d.join("summary.txt")).split("sensitivity").skip(1).collect::<Vec<_>>().join("sensitivity");
    assert!(!table(&whole).is_empty(), "the whole run has a sensitivity table");
    assert_eq!(table(&whole), table(&m), "merged shards give the whole run's sensitivity table");
    assert_eq!(read(&whole.join("summary.txt")), read(&m.join("summary.txt")));
    // A shard whose variant share is lost: the merge fails, or says PARTIAL.
    std::fs::remove_dir_all(s1.join("sensitivity")).unwrap();
    let _ = std::fs::remove_dir_all(&m);
    let o = merge(&[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("sensitivity variants") && err.contains("--partial"), "{err}");
    assert!(!m.exists(), "nothing written");
    let text = ok(&merge(&["--partial"]));
    assert!(text.contains("PARTIAL: the merged shards miss"), "{text}");
    let _ = std::fs::remove_dir_all(dir);
}

/// Issue 46: `-q` printed the whole summary (procedure table, measures, points). It prints what ran, the
/// notices and one line per finding; the full summary is summary.txt.
#[test]
fn quiet_prints_what_ran_and_the_verdicts_only() {
    let dir = scratch("quiet");
    let out = dir.join("r");
    let quiet = ok(&corral(&["lab", "run", SMALL, "--quick", "--out", out.to_str().unwrap(), "-q"]));
    let full = read(&out.join("summary.txt"));
    assert!(full.contains("procedure (") && full.contains("    corral: "), "{full}");
    assert!(quiet.contains(SMALL) && quiet.contains("findings: ") && quiet.contains("PREVIEW"), "{quiet}");
    assert!(!quiet.contains("procedure (") && !quiet.contains("    corral: "), "{quiet}");
    assert!(quiet.lines().count() < full.lines().count() / 4, "{quiet}");
    let _ = std::fs::remove_dir_all(dir);
}

/// Runs `args`, sends SIGINT once a stderr line contains `after`, and returns the exit code, stdout and
/// stderr. No timing: the signal follows what the run said it was doing.
fn interrupt(args: &[&str], after: &str) -> (Option<i32>, String, String) {
    use std::io::{BufRead, Read};
    let mut child = Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run corral");
    let mut err = String::new();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    for l in lines.by_ref() {
        let l = l.expect("stderr");
        err.push_str(&l);
        err.push('\n');
        if l.contains(after) {
            let pid = child.id().to_string();
            assert!(Command::new("kill").args(["-INT", &pid]).status().expect("kill").success());
            break;
        }
    }
    for l in lines {
        err.push_str(&l.expect("stderr"));
        err.push('\n');
    }
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).expect("stdout");
    let status = child.wait().expect("wait");
    (status.code(), out, err)
}

/// Issue 46: Ctrl-C threw a lab run away. Interrupted among its points, the run writes the points that
/// finished in a report marked INTERRUPTED (no findings: they need every point) and exits 130; interrupted
/// in its sensitivity phase, the report has every finding and the variants that finished, and says so.
#[test]
fn an_interrupted_run_leaves_a_report_marked_interrupted_in_either_phase() {
    let dir = scratch("interrupted");
    let out = dir.join("points");
    let args = ["lab", "run", "seed003-buffer", "--jobs", "1", "--out", out.to_str().unwrap()];
    let (code, stdout, err) = interrupt(&args, "[seed003-buffer] ");
    assert_eq!(code, Some(130), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    let json: serde_json::Value = serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    assert_eq!(json["interrupted"], true);
    assert!(json["points"].as_u64().unwrap() < json["points_total"].as_u64().unwrap(), "{}", json["points"]);
    assert!(stdout.contains("INTERRUPTED: the run was stopped by a signal after"), "{stdout}");
    assert!(read(&out.join("index.html")).contains("INTERRUPTED"));

    let out = dir.join("sensitivity");
    // The quick run: its sensitivity phase (45 points on one thread) outlasts the signal by many points.
    let args = ["lab", "run", "seed003-buffer", "--quick", "--jobs", "1", "--out", out.to_str().unwrap()];
    let (code, stdout, err) = interrupt(&args, "[seed003-buffer sensitivity] ");
    assert_eq!(code, Some(130), "{err}");
    let json: serde_json::Value = serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    assert_eq!(json["interrupted"], true);
    assert_eq!(json["points"], json["points_total"]);
    assert!(!json["findings"].as_array().unwrap().is_empty(), "the base run's findings");
    assert!(stdout.contains("in its sensitivity phase"), "{stdout}");
    let _ = std::fs::remove_dir_all(dir);
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false)
}

/// Seed 004's quick run: the open-loop CoAP sender's throughput does not follow the delay, and each AGREES
/// turns DISAGREES in the sensitivity variant that removes its cause — a client that waits for each answer
/// (CoAP and latency), a link without impairments (every "falls with" claim). The figure plots
/// throughput.
#[test]
fn seed004_agreements_turn_to_disagreements_when_their_cause_is_removed() {
    if !is_root() {
        println!("skipped: seed 004 runs real programs over corral link, which needs root");
        return;
    }
    let dir = scratch("seed004");
    let out = dir.join("r");
    let o = corral(&["lab", "run", "seed004-throughput", "--quick", "--json", "--out", out.to_str().unwrap(), "-q"]);
    let json: serde_json::Value = serde_json::from_str(&ok(&o)).expect("JSON");
    let kind = |check: &str| {
        json["findings"].as_array().unwrap().iter().find(|f| f["check"] == check).map(|f| f["kind"].clone()).unwrap()
    };
    let variant = |name: &str, check: &str| {
        let v =
            json["sensitivity"].as_array().unwrap().iter().find(|v| v["variant"].as_str().unwrap().starts_with(name));
        let f = v.unwrap()["findings"].as_array().unwrap().iter().find(|f| f["check"] == check).cloned();
        f.map(|f| f["kind"].clone()).unwrap()
    };
    println!("{}", serde_json::to_string_pretty(&json["findings"]).unwrap());
    assert_eq!(kind("coap_not_impacted_by_latency"), "AGREES", "an open-loop sender is not paced by the delay");
    assert_eq!(variant("closed-loop CoAP client", "coap_not_impacted_by_latency"), "DISAGREES");
    for check in ["http_falls_with_latency", "http_falls_with_loss", "http_unimpaired_highest"] {
        assert_eq!(kind(check), "AGREES", "{check}");
        assert_eq!(variant("no impairments", check), "DISAGREES", "{check} without its cause");
    }
    // CoAP's loss claim: its cause removed, it cannot hold (its AGREES at 4 s of traffic is a preview).
    assert_eq!(variant("no impairments", "coap_falls_with_loss"), "DISAGREES");
    // The report lab.rs checks for every other built-in scenario.
    for f in ["aggregates.csv", "points.csv", "summary.txt", "index.html"] {
        assert!(!read(&out.join(f)).is_empty(), "{f}");
    }
    let svg = read(&out.join("throughput.svg"));
    // The papers' names for the protocols (issue 43), each protocol also in a panel of its own.
    assert!(svg.contains("throughput") && svg.contains("d100 CoAP/UDP") && svg.contains("l10 HTTP/TCP"), "{svg}");
    assert!(read(&out.join("throughput-coap.svg")).contains("d100"));
    let _ = std::fs::remove_dir_all(dir);
}
