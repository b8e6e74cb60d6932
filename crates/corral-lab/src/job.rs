//! A lab job as `corral lab` starts one, without its flags or its printing: the scenario named by a
//! built-in name or a file, the shard from `--shard` or a scheduler's environment, the report directory a
//! run defaults to, a run's two phases (its points, then its share of the sensitivity variants' points),
//! a merge that refuses a lost shard, and the catalogue of built-ins.
//!
//! # What it owns
//! The decisions the verb makes between parsing its flags and printing; the binary keeps the flags, the
//! progress line, the signal handler and the summary it prints. Never reads the environment or a clock of
//! its own: the caller hands in the variables' reader and the stop flag.

use crate::data::RunData;
use crate::error::{DataError, RunError, ScenarioError};
use crate::scenario::{builtin, Scenario, BUILTINS};
use crate::sweep::{self, RunOptions, ShardError, ShardFromEnv};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// Why a job could not be started or finished. [`JobError::is_usage`] tells a mistake in what was asked
/// (a usage error) from a run or merge that failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum JobError {
    /// Neither a built-in scenario nor a file.
    NoScenario { spec: String },
    /// A file that could not be read.
    Unreadable { spec: String, source: std::io::Error },
    /// A scenario that does not parse or validate.
    Invalid { spec: String, source: ScenarioError },
    /// A `--shard` (or a scheduler's variables) that names no shard.
    Shard(ShardError),
    /// A point or a variant failed to run.
    Run(RunError),
    /// The shards could not be read or joined.
    Data(DataError),
    /// The shards miss base points: a shard lost or not given.
    MissingPoints { covered: usize, total: usize },
    /// The shards miss points of the sensitivity variants.
    MissingVariantPoints { missing: usize },
}

impl JobError {
    /// A mistake in what was asked (the CLI's exit 2), not a failed run.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            JobError::NoScenario { .. } | JobError::Unreadable { .. } | JobError::Invalid { .. } | JobError::Shard(_)
        )
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobError::NoScenario { spec } => {
                let names: Vec<&str> = BUILTINS.iter().map(|b| b.name).collect();
                write!(f, "{spec}: no such built-in scenario or file (built-in: {})", names.join(", "))
            }
            JobError::Unreadable { spec, source } => write!(f, "{spec}: {source}"),
            JobError::Invalid { spec, source } => write!(f, "{spec}: {source}"),
            JobError::Shard(e) => e.fmt(f),
            JobError::Run(e) => e.fmt(f),
            JobError::Data(e) => e.fmt(f),
            JobError::MissingPoints { covered, total } => write!(
                f,
                "the shards cover {covered} of {total} points ({} missing: a shard lost or not given?); nothing written (--partial writes a report marked PARTIAL, without findings)",
                total - covered
            ),
            JobError::MissingVariantPoints { missing } => write!(
                f,
                "the shards miss {missing} point(s) of the sensitivity variants (a shard lost, interrupted, or written by an older corral?); nothing written (--partial writes a report marked PARTIAL, without those variants)"
            ),
        }
    }
}

impl std::error::Error for JobError {}

/// A scenario and its text from a built-in name, or else from a file.
pub fn resolve(spec: &str) -> Result<(Scenario, String), JobError> {
    let text = match builtin(spec) {
        Some(t) => t.to_string(),
        None => {
            let path = Path::new(spec);
            if !path.exists() {
                return Err(JobError::NoScenario { spec: spec.into() });
            }
            std::fs::read_to_string(path).map_err(|source| JobError::Unreadable { spec: spec.into(), source })?
        }
    };
    let s = sweep::load(&text).map_err(|source| JobError::Invalid { spec: spec.into(), source })?;
    Ok((s, text))
}

/// The shard a run covers: `--shard i/n` when given, else a Slurm array task's or a Kubernetes Indexed
/// Job's (`sweep::shard_from_env`, read through `env`, with `count` from `--shard-count`) — returned with
/// where it came from, which a run says even when quiet — else the whole sweep.
pub fn choose_shard(
    given: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
    count: Option<usize>,
) -> Result<Option<ShardFromEnv>, JobError> {
    match given {
        Some(g) => {
            let shard = sweep::parse_shard(g).map_err(JobError::Shard)?;
            Ok(Some(ShardFromEnv { shard, from: "--shard".into() }))
        }
        None => sweep::shard_from_env(env, count).map_err(JobError::Shard),
    }
}

/// The report directory of a run without `--out`: `lab-out/<scenario>[-quick][-shard-i-of-n]`.
pub fn default_out(name: &str, o: &RunOptions) -> PathBuf {
    let mut dir = name.to_string();
    if o.quick {
        dir.push_str("-quick");
    }
    if let Some((i, n)) = o.shard {
        dir.push_str(&format!("-shard-{i}-of-{n}"));
    }
    PathBuf::from("lab-out").join(dir)
}

/// What a run tells its caller as it goes.
pub trait Watch: Sync {
    /// Points of the current phase done, of how many (each phase counts its own).
    fn progress(&self, done: usize, total: usize);
    /// The base points are done and the sensitivity variants' start: `variants` wrong models.
    fn variants(&self, variants: usize);
}

/// A run: its points, then — unless it was stopped or the scenario has none — its share of the sensitivity
/// variants' points. Stopped by `stop` between points, it returns what finished, marked interrupted.
pub fn run(
    s: &Scenario,
    text: &str,
    o: &RunOptions,
    watch: &dyn Watch,
    stop: &AtomicBool,
) -> Result<RunData, JobError> {
    let mut data = sweep::run_until(s, text, o, &|d, t| watch.progress(d, t), stop).map_err(JobError::Run)?;
    if !s.sensitivity.is_empty() && !data.interrupted {
        watch.variants(s.sensitivity.len());
        sweep::run_sensitivity_until(&mut data, o, &|d, t| watch.progress(d, t), stop).map_err(JobError::Run)?;
    }
    Ok(data)
}

/// The shards of one sweep as one run's data, the variants' findings joined without running anything. A
/// missing base or variant point fails the merge unless `partial` (the report then says PARTIAL).
pub fn merge(dirs: &[&Path], partial: bool) -> Result<RunData, JobError> {
    let mut data = sweep::merge(dirs).map_err(JobError::Data)?;
    let (covered, total) = (data.results.len(), data.points.len());
    if covered < total && !partial {
        return Err(JobError::MissingPoints { covered, total });
    }
    if !data.scenario.sensitivity.is_empty() && covered == total {
        sweep::merge_sensitivity(&mut data, dirs).map_err(JobError::Data)?;
        let missing = data.variant_points_missing;
        if missing > 0 && !partial {
            return Err(JobError::MissingVariantPoints { missing });
        }
    }
    Ok(data)
}

/// A built-in scenario as `corral lab list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub name: &'static str,
    pub reference: String,
    pub title: String,
    /// Points of its full sweep.
    pub points: usize,
}

/// Every built-in scenario, loaded as a run would load it (a built-in that does not load is an error).
pub fn catalogue() -> Result<Vec<Listed>, JobError> {
    BUILTINS
        .iter()
        .map(|b| {
            let s = sweep::load(b.text)
                .map_err(|source| JobError::Invalid { spec: format!("built-in {}", b.name), source })?;
            Ok(Listed {
                name: b.name,
                reference: s.reference.clone(),
                title: s.title.clone(),
                points: s.points(false).len(),
            })
        })
        .collect()
}

/// Threads when `--jobs` is not given: the available cores.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_that_is_neither_built_in_nor_a_file_is_a_usage_error_listing_the_built_ins() {
        let e = resolve("no-such-scenario").expect_err("refused");
        assert!(e.is_usage());
        let text = e.to_string();
        assert!(
            text.starts_with("no-such-scenario: no such built-in") && text.contains("fig10-interference"),
            "{text}"
        );
        assert!(resolve("fig07-delay").is_ok());
    }

    #[test]
    fn the_shard_comes_from_the_flag_before_the_scheduler() {
        let slurm = |k: &str| match k {
            "SLURM_ARRAY_TASK_ID" => Some("1".to_string()),
            "SLURM_ARRAY_TASK_COUNT" => Some("4".to_string()),
            _ => None,
        };
        assert_eq!(choose_shard(Some("0/2"), &slurm, None).expect("given").map(|s| s.shard), Some((0, 2)));
        let picked = choose_shard(None, &slurm, None).expect("from slurm").expect("a shard");
        assert_eq!(picked.shard, (1, 4));
        assert!(picked.from.contains("SLURM_ARRAY_TASK_ID=1"), "{}", picked.from);
        assert!(choose_shard(None, &|_| None, None).expect("none").is_none());
        assert!(choose_shard(Some("2/2"), &|_| None, None).expect_err("out of range").is_usage());
    }

    #[test]
    fn a_run_without_out_names_its_directory_after_the_scenario_quick_and_shard() {
        let o = RunOptions { quick: true, shard: Some((1, 3)), ..RunOptions::default() };
        assert_eq!(default_out("fig08-group-size", &o), PathBuf::from("lab-out/fig08-group-size-quick-shard-1-of-3"));
        assert_eq!(default_out("x", &RunOptions::default()), PathBuf::from("lab-out/x"));
    }

    #[test]
    fn the_catalogue_lists_every_built_in_with_its_points() {
        let all = catalogue().expect("every built-in loads");
        assert_eq!(all.len(), BUILTINS.len());
        assert!(all.iter().all(|l| l.points > 0 && !l.title.is_empty()));
    }
}
