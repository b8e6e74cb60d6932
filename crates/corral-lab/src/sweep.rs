//! Running a sweep: loading its scenario, which points (all, `--quick`, one `--shard i/n`), on how many
//! threads, the sensitivity variants, and merging shards back. Every point runs in its own simulator from
//! its replicate's seed ([`crate::harness::point_seed`]: common random numbers), so neither the thread
//! count nor the shard split changes a single number; results are put back in point order before anything
//! is written. A run can be stopped between points (`run_until`), keeping what finished.

use crate::data::{RunData, Variant, VariantShare};
use crate::error::{DataError, RunError, ScenarioError};
use crate::harness::point_seed;
use crate::record::PointResult;
use crate::run::run_point;
use crate::scenario::{Family, Point, Scenario};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Parses a scenario file and checks that every finding it names is a known check and that its family's
/// runner reads every `[calibration]` field it sets: what `corral lab` accepts as a scenario.
pub fn load(text: &str) -> Result<Scenario, ScenarioError> {
    let s = Scenario::parse(text)?;
    crate::findings::validate(&s)?;
    crate::family::check_calibration(&s)?;
    Ok(s)
}

/// What to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub seed: u64,
    pub quick: bool,
    /// `(i, n)`: only points whose position in the sweep is `i` modulo `n`.
    pub shard: Option<(usize, usize)>,
    pub jobs: usize,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions { seed: 1, quick: false, shard: None, jobs: 1 }
    }
}

/// A `--shard` that is not `i/n` with `0 ≤ i < n`: what was given and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardError {
    pub given: String,
    pub problem: &'static str,
}

impl fmt::Display for ShardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "--shard {}: {}", self.given, self.problem)
    }
}

impl std::error::Error for ShardError {}

/// Parses `i/n` with `0 ≤ i < n`.
pub fn parse_shard(s: &str) -> Result<(usize, usize), ShardError> {
    let bad = |problem| ShardError { given: s.to_string(), problem };
    let (i, n) = s.split_once('/').ok_or_else(|| bad("expected i/n, e.g. 0/4"))?;
    let (i, n): (usize, usize) =
        (i.trim().parse().map_err(|_| bad("bad i"))?, n.trim().parse().map_err(|_| bad("bad n"))?);
    if n == 0 || i >= n {
        return Err(bad("need 0 ≤ i < n"));
    }
    Ok((i, n))
}

/// Where a shard's index and count came from when `--shard` was not given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardFromEnv {
    pub shard: (usize, usize),
    /// The variables (and the flag) it was read from, for the run's stderr.
    pub from: String,
}

/// The shard of a job array when no `--shard` is given: a Slurm array task (`SLURM_ARRAY_TASK_ID`,
/// `_MIN`, `_STEP` and `_COUNT`, so `--array=1-4` and `--array=0-6:2` work too) or a Kubernetes Indexed
/// Job's pod (`JOB_COMPLETION_INDEX`; Kubernetes sets no count, so it comes from `count` — the
/// `--shard-count` flag — or a `JOB_COMPLETION_COUNT` the manifest sets to the Job's `completions`).
/// `env` reads a variable (`std::env::var` in the CLI). `None` when neither scheduler's variables are set.
pub fn shard_from_env(
    env: &dyn Fn(&str) -> Option<String>,
    count: Option<usize>,
) -> Result<Option<ShardFromEnv>, ShardError> {
    let num = |var: &str| -> Result<Option<usize>, ShardError> {
        match env(var) {
            None => Ok(None),
            Some(v) => v
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| ShardError { given: format!("from {var}={v}"), problem: "not a whole number" }),
        }
    };
    let check = |i: usize, n: usize, from: String| {
        if n == 0 || i >= n {
            return Err(ShardError { given: format!("{i}/{n} from {from}"), problem: "need 0 ≤ i < n" });
        }
        Ok(Some(ShardFromEnv { shard: (i, n), from }))
    };
    if let Some(id) = num("SLURM_ARRAY_TASK_ID")? {
        let min = num("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
        let step = num("SLURM_ARRAY_TASK_STEP")?.unwrap_or(1).max(1);
        let n = match count {
            Some(n) => n,
            None => num("SLURM_ARRAY_TASK_COUNT")?.ok_or(ShardError {
                given: "from SLURM_ARRAY_TASK_ID".into(),
                problem: "SLURM_ARRAY_TASK_COUNT is not set: give --shard-count",
            })?,
        };
        let i = id.checked_sub(min).ok_or(ShardError {
            given: format!("from SLURM_ARRAY_TASK_ID={id}"),
            problem: "below SLURM_ARRAY_TASK_MIN",
        })? / step;
        return check(i, n, format!("SLURM_ARRAY_TASK_ID={id} (min {min}, step {step}) of {n} tasks"));
    }
    if let Some(i) = num("JOB_COMPLETION_INDEX")? {
        let n = match count {
            Some(n) => n,
            None => num("JOB_COMPLETION_COUNT")?.ok_or(ShardError {
                given: format!("from JOB_COMPLETION_INDEX={i}"),
                problem:
                    "Kubernetes sets no count: give --shard-count (the Job's completions) or set JOB_COMPLETION_COUNT",
            })?,
        };
        return check(i, n, format!("JOB_COMPLETION_INDEX={i} of {n} completions"));
    }
    Ok(None)
}

/// The points a run covers: the sweep (quick or full), then the shard's share of them.
pub fn selected_points(s: &Scenario, o: &RunOptions) -> (Vec<Point>, Vec<Point>) {
    let all = s.points(o.quick);
    let mine = match o.shard {
        Some((i, n)) => all.iter().enumerate().filter(|(k, _)| k % n == i).map(|(_, p)| p.clone()).collect(),
        None => all.clone(),
    };
    (all, mine)
}

/// Runs `points` of a scenario on `jobs` threads; `progress(done, total)` is called after each point.
pub fn run_points(
    s: &Scenario,
    points: &[Point],
    o: &RunOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<PointResult>, RunError> {
    let jobs: Vec<(&Scenario, &Point)> = points.iter().map(|p| (s, p)).collect();
    run_jobs(&jobs, o, progress, &AtomicBool::new(false))?
        .into_iter()
        .map(|r| r.ok_or(RunError::Lost("a point's result")))
        .collect()
}

/// Runs points of one or more scenarios (a run's sensitivity variants together, so that no thread waits
/// for the last point of one variant while the next has points to run) on `o.jobs` threads; the results
/// come back in the order of `jobs`. Once `stop` is set (Ctrl-C) no thread takes a new point, the points
/// running finish, and those never run are `None`; a point that failed after the stop (an emulated point
/// whose programs got the terminal's signal too) counts as not run.
fn run_jobs(
    jobs: &[(&Scenario, &Point)],
    o: &RunOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
    stop: &AtomicBool,
) -> Result<Vec<Option<PointResult>>, RunError> {
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    // A point that fails fails the run: no thread takes a new point after it (an hour-long run whose
    // first point cannot start says so at once). Points are taken in order, so every slot before the
    // failed one is filled and the first error in order is the one returned.
    let failed = AtomicBool::new(false);
    let slots: Mutex<Vec<Option<Result<PointResult, RunError>>>> = Mutex::new(jobs.iter().map(|_| None).collect());
    // Emulated points run real programs in real time: one at a time, or they would share the CPU and
    // each other's throughput.
    let emulated = jobs.iter().any(|(s, _)| s.family() == Ok(Family::Emulated));
    let threads = if emulated { 1 } else { o.jobs.clamp(1, jobs.len().max(1)) };
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                if failed.load(Ordering::Relaxed) || stop.load(Ordering::Relaxed) {
                    break;
                }
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some((s, p)) = jobs.get(k) else { break };
                let r = s
                    .setup(p, o.quick)
                    .map_err(RunError::Scenario)
                    .and_then(|setup| run_point(&setup, p.index, point_seed(o.seed, p)))
                    .map_err(|e| RunError::Point { index: p.index, label: p.label(), source: Box::new(e) });
                if r.is_err() && !stop.load(Ordering::Relaxed) {
                    failed.store(true, Ordering::Relaxed);
                }
                slots.lock().expect("no thread panics holding the lock")[k] = Some(r);
                progress(done.fetch_add(1, Ordering::Relaxed) + 1, jobs.len());
            });
        }
    });
    let stopped = stop.load(Ordering::Relaxed);
    let mut out = Vec::with_capacity(jobs.len());
    for r in slots.into_inner().expect("threads joined") {
        match r {
            Some(Ok(r)) => out.push(Some(r)),
            _ if stopped => out.push(None),
            Some(Err(e)) => return Err(e),
            None => return Err(RunError::Lost("a point's result")),
        }
    }
    Ok(out)
}

/// Runs a scenario (or one shard of it) and returns its data, ready for [`crate::report::write_report`].
pub fn run(
    s: &Scenario,
    text: &str,
    o: &RunOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<RunData, RunError> {
    run_until(s, text, o, progress, &AtomicBool::new(false))
}

/// [`run`], stopping when `stop` is set (the CLI's Ctrl-C): the data then holds the points that finished
/// and says it was interrupted, so the report written from it says so too.
pub fn run_until(
    s: &Scenario,
    text: &str,
    o: &RunOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
    stop: &AtomicBool,
) -> Result<RunData, RunError> {
    let (all, mine) = selected_points(s, o);
    let jobs: Vec<(&Scenario, &Point)> = mine.iter().map(|p| (s, p)).collect();
    let results: Vec<PointResult> = run_jobs(&jobs, o, progress, stop)?.into_iter().flatten().collect();
    Ok(RunData {
        interrupted: results.len() < mine.len(),
        scenario: s.clone(),
        scenario_text: text.to_string(),
        seed: o.seed,
        quick: o.quick,
        points: all,
        results,
        shard: o.shard,
        sensitivity: Vec::new(),
        shares: Vec::new(),
        variant_points_missing: 0,
    })
}

/// The scenario text with `changes` applied (dotted paths, e.g. `calibration.cca_busy_prob`).
pub fn variant_text(text: &str, changes: &BTreeMap<String, toml::Value>) -> Result<String, ScenarioError> {
    let mut doc: toml::Table = toml::from_str(text).map_err(|e| ScenarioError::Format(e.to_string()))?;
    for (path, value) in changes {
        let mut parts: Vec<&str> = path.split('.').collect();
        let last = parts.pop().ok_or_else(|| ScenarioError::invalid("sensitivity: an empty path"))?;
        let mut table = &mut doc;
        for p in parts {
            table = table
                .entry(p.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()))
                .as_table_mut()
                .ok_or_else(|| ScenarioError::invalid(format!("{path}: {p} is not a table")))?;
        }
        table.insert(last.to_string(), value.clone());
    }
    toml::to_string(&doc).map_err(|e| ScenarioError::Format(e.to_string()))
}

/// Reruns the findings with each `[[sensitivity]]` variant of the scenario: the same points and mode
/// with one replicate, the variant's parameters changed. The points every variant reruns go to the threads
/// as one list, so a variant's last slow point runs beside the next variant's first instead of alone. A
/// shard runs its share of that list (split as the base points are, continuing their count) and keeps the
/// results in [`RunData::shares`], which `merge` joins ([`merge_sensitivity`]) to finish the variants
/// without running anything: a Slurm array runs the wrong models in parallel too.
pub fn run_sensitivity(
    d: &mut RunData,
    o: &RunOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<(), RunError> {
    run_sensitivity_until(d, o, progress, &AtomicBool::new(false))
}

/// [`run_sensitivity`], stopping when `stop` is set: the variants whose points all ran are kept, the
/// others left out, and the data says it was interrupted.
pub fn run_sensitivity_until(
    d: &mut RunData,
    o: &RunOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
    stop: &AtomicBool,
) -> Result<(), RunError> {
    let variants = prepare_variants(d, o.quick).map_err(|(name, source)| RunError::Sensitivity { name, source })?;
    // (variant, point) in an order every shard computes alike; a shard takes the positions that continue
    // the base points' count modulo n.
    let all: Vec<(usize, &Point)> =
        variants.iter().enumerate().flat_map(|(v, p)| p.rerun.iter().map(move |pt| (v, pt))).collect();
    let base = d.points.len();
    let mine: Vec<(usize, &Point)> = match o.shard {
        Some((i, n)) => all.into_iter().enumerate().filter(|(k, _)| (base + k) % n == i).map(|(_, x)| x).collect(),
        None => all,
    };
    let jobs: Vec<(&Scenario, &Point)> = mine.iter().map(|&(v, p)| (&variants[v].scenario, p)).collect();
    let ran = run_jobs(&jobs, o, progress, stop)?;
    let mut results: Vec<Vec<PointResult>> = vec![Vec::new(); variants.len()];
    let mut lost = vec![false; variants.len()];
    for (&(v, _), r) in mine.iter().zip(ran) {
        match r {
            Some(r) => results[v].push(r),
            None => lost[v] = true,
        }
    }
    d.interrupted |= lost.contains(&true);
    for (v, (prepared, (results, lost))) in variants.into_iter().zip(results.into_iter().zip(lost)).enumerate() {
        if o.shard.is_some() {
            // What ran is kept even when some did not: merge counts the points no shard holds.
            d.shares.push(VariantShare { variant: v, text: prepared.text, scenario: prepared.scenario, results });
        } else if !lost {
            if let Some(variant) = prepared.finish(d, o.seed, o.quick, results) {
                d.sensitivity.push(variant);
            }
        }
    }
    Ok(())
}

/// A sensitivity variant ready to run: its scenario, and the points its changes touch (every other point
/// keeps the base run's result).
struct Prepared {
    name: String,
    set: String,
    scenario: Scenario,
    text: String,
    rerun: Vec<Point>,
}

/// The scenario's variants in order, each with the points it reruns; an error names the variant.
fn prepare_variants(d: &RunData, quick: bool) -> Result<Vec<Prepared>, (String, ScenarioError)> {
    let mut variants = Vec::new();
    for spec in &d.scenario.sensitivity {
        let mut changes = spec.set.clone();
        changes.insert("workload.replicates".into(), toml::Value::Integer(1));
        changes.insert("workload.quick_replicates".into(), toml::Value::Integer(1));
        let text = variant_text(&d.scenario_text, &changes).map_err(|e| (spec.name.clone(), e))?;
        let s = load(&text).map_err(|e| (spec.name.clone(), e))?;
        let rerun = s.points(quick).into_iter().filter(|p| !unchanged(d, &s, p, quick)).collect();
        let set = spec.set.iter().map(|(k, v)| format!("{k} = {v}")).collect::<Vec<_>>().join(", ");
        variants.push(Prepared { name: spec.name.clone(), set, scenario: s, text, rerun });
    }
    Ok(variants)
}

impl Prepared {
    /// The variant's findings from its rerun points and the base run's results for the others; `None` when
    /// a point is in neither.
    fn finish(self, base: &RunData, seed: u64, quick: bool, rerun: Vec<PointResult>) -> Option<Variant> {
        let points = self.scenario.points(quick);
        let mut results = Vec::with_capacity(points.len());
        for p in &points {
            let ran = if self.rerun.iter().any(|r| r.index == p.index) { &rerun } else { &base.results };
            results.push(ran.iter().find(|r| r.point.point == p.index)?.clone());
        }
        let data = RunData {
            scenario: self.scenario,
            scenario_text: self.text,
            seed,
            quick,
            points,
            results,
            shard: None,
            sensitivity: Vec::new(),
            interrupted: false,
            shares: Vec::new(),
            variant_points_missing: 0,
        };
        let findings = crate::findings::evaluate(&data.scenario, &data.aggregates());
        Some(Variant { name: self.name, changes: self.set, findings })
    }
}

/// Whether a variant leaves point `p` as the base run had it: the same point (index and axes, so the same
/// seed) resolving to the same [`Setup`](crate::scenario::Setup). A runner's only inputs are the setup and
/// the seed, so running it again would repeat a simulated point exactly, or take another sample of an
/// emulated one under the same procedure (seed 004's closed-loop variant changes the CoAP rows only: its
/// HTTP rows took half a minute of real time for nothing).
fn unchanged(base: &RunData, variant: &Scenario, p: &Point, quick: bool) -> bool {
    base.points
        .iter()
        .find(|b| b.index == p.index && b.label() == p.label())
        .is_some_and(|bp| matches!((base.scenario.setup(bp, quick), variant.setup(p, quick)), (Ok(a), Ok(b)) if a == b))
}

/// The directory of a shard's report that holds its share of variant `v`'s points.
pub fn share_dir(dir: &Path, v: usize) -> std::path::PathBuf {
    dir.join("sensitivity").join(v.to_string())
}

/// Finishes the sensitivity variants of merged shards (`d` from [`merge`], every base point present) from
/// the shares the shards wrote ([`share_dir`]); nothing runs again. A variant whose rerun points some
/// shard did not hold is left out and counted in [`RunData::variant_points_missing`].
pub fn merge_sensitivity(d: &mut RunData, dirs: &[&Path]) -> Result<(), DataError> {
    let variants = prepare_variants(d, d.quick)
        .map_err(|(_, source)| DataError::Scenario { path: dirs[0].join("scenario.toml"), source })?;
    let (seed, quick) = (d.seed, d.quick);
    for (v, prepared) in variants.into_iter().enumerate() {
        let family = prepared
            .scenario
            .family()
            .map_err(|source| DataError::Scenario { path: dirs[0].join("scenario.toml"), source })?;
        let mut results: Vec<PointResult> = Vec::new();
        for dir in dirs {
            let share = share_dir(dir, v);
            if !share.join("points.csv").exists() {
                continue;
            }
            for r in crate::csv::read_results(&share, family)? {
                join(&mut results, r, "a sensitivity variant's point")?;
            }
        }
        let missing = prepared.rerun.iter().filter(|p| !results.iter().any(|r| r.point.point == p.index)).count();
        d.variant_points_missing += missing;
        if missing == 0 {
            if let Some(variant) = prepared.finish(d, seed, quick, results) {
                d.sensitivity.push(variant);
            }
        }
    }
    Ok(())
}

/// Adds a shard's result for one point to `results`; the same point from two shards must agree.
fn join(results: &mut Vec<PointResult>, r: PointResult, what: &str) -> Result<(), DataError> {
    match results.iter().find(|x| x.point.point == r.point.point) {
        Some(x) if *x != r => Err(DataError::Mismatch(format!("{what} {} differs between shards", r.point.point))),
        Some(_) => Ok(()),
        None => {
            results.push(r);
            Ok(())
        }
    }
}

/// Joins shard directories (written by `run` with `--shard`) into one run's data. The shards must come
/// from the same scenario file, seed and mode; a point present in two shards must agree.
pub fn merge(dirs: &[&Path]) -> Result<RunData, DataError> {
    let mut base: Option<(String, u64, bool)> = None;
    let mut results: Vec<PointResult> = Vec::new();
    for dir in dirs {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read_to_string(&path).map_err(|source| DataError::Io { path, source })
        };
        let text = read("scenario.toml")?;
        let manifest_path = dir.join("run.json");
        let malformed = |problem: String| DataError::Malformed { path: manifest_path.clone(), problem };
        let manifest: serde_json::Value =
            serde_json::from_str(&read("run.json")?).map_err(|e| malformed(e.to_string()))?;
        let seed = manifest["seed"].as_u64().ok_or_else(|| malformed("no seed".into()))?;
        let quick = manifest["quick"].as_bool().ok_or_else(|| malformed("no quick".into()))?;
        match &base {
            None => base = Some((text.clone(), seed, quick)),
            Some((t, s, q)) => {
                if *t != text || *s != seed || *q != quick {
                    return Err(DataError::Mismatch(format!(
                        "{}: a different scenario, seed or mode than the first shard",
                        dir.display()
                    )));
                }
            }
        }
        let scenario = scenario(dir, &text)?;
        let family =
            scenario.family().map_err(|source| DataError::Scenario { path: dir.join("scenario.toml"), source })?;
        for r in crate::csv::read_results(dir, family)? {
            join(&mut results, r, "point")?;
        }
    }
    let (text, seed, quick) = base.ok_or(DataError::NoShards)?;
    let scenario = scenario(dirs[0], &text)?;
    results.sort_by_key(|r| r.point.point);
    let points = scenario.points(quick);
    Ok(RunData {
        scenario,
        scenario_text: text,
        seed,
        quick,
        points,
        results,
        shard: None,
        sensitivity: Vec::new(),
        interrupted: false,
        shares: Vec::new(),
        variant_points_missing: 0,
    })
}

/// The scenario of a report directory.
fn scenario(dir: &Path, text: &str) -> Result<Scenario, DataError> {
    load(text).map_err(|source| DataError::Scenario { path: dir.join("scenario.toml"), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn slurm_array_variables_pick_the_shard() {
        let e = env(&[("SLURM_ARRAY_TASK_ID", "3"), ("SLURM_ARRAY_TASK_COUNT", "4")]);
        let got = shard_from_env(&e, None).unwrap().unwrap();
        assert_eq!(got.shard, (3, 4));
        assert!(got.from.contains("SLURM_ARRAY_TASK_ID=3"), "{}", got.from);
        // --array=1-4: ids 1..4 are shards 0..3; --array=0-6:2: ids 0, 2, 4, 6.
        let one_based =
            env(&[("SLURM_ARRAY_TASK_ID", "1"), ("SLURM_ARRAY_TASK_MIN", "1"), ("SLURM_ARRAY_TASK_COUNT", "4")]);
        assert_eq!(shard_from_env(&one_based, None).unwrap().unwrap().shard, (0, 4));
        let stepped =
            env(&[("SLURM_ARRAY_TASK_ID", "4"), ("SLURM_ARRAY_TASK_STEP", "2"), ("SLURM_ARRAY_TASK_COUNT", "4")]);
        assert_eq!(shard_from_env(&stepped, None).unwrap().unwrap().shard, (2, 4));
    }

    #[test]
    fn a_kubernetes_index_needs_a_count() {
        let e = env(&[("JOB_COMPLETION_INDEX", "2")]);
        let err = shard_from_env(&e, None).unwrap_err().to_string();
        assert!(err.contains("--shard-count"), "{err}");
        assert_eq!(shard_from_env(&e, Some(5)).unwrap().unwrap().shard, (2, 5));
        let set = env(&[("JOB_COMPLETION_INDEX", "2"), ("JOB_COMPLETION_COUNT", "3")]);
        assert_eq!(shard_from_env(&set, None).unwrap().unwrap().shard, (2, 3));
    }

    #[test]
    fn no_scheduler_no_shard_and_nonsense_is_refused() {
        assert_eq!(shard_from_env(&env(&[]), None).unwrap(), None);
        let bad = env(&[("SLURM_ARRAY_TASK_ID", "x"), ("SLURM_ARRAY_TASK_COUNT", "4")]);
        assert!(shard_from_env(&bad, None).unwrap_err().to_string().contains("SLURM_ARRAY_TASK_ID=x"));
        let past = env(&[("JOB_COMPLETION_INDEX", "4"), ("JOB_COMPLETION_COUNT", "4")]);
        assert!(shard_from_env(&past, None).is_err());
    }
}
