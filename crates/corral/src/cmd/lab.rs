//! `corral lab`: list, show, run and merge the experiments of corral-lab (scenario files → simulated
//! network with the real Entity Manager → CSV, HTML with SVG figures, a text summary).
//!
//! Flags, the progress line, Ctrl-C and the printed summary; what a run or a merge decides is
//! `corral_lab::job`'s. Only the progress display reads the wall clock (for the ETA); the results never
//! depend on it, on `--jobs` or on `--shard`.

use crate::cli::exit::Failure;
use corral_lab::job::{self, JobError};
use corral_lab::scenario::builtin;
use corral_lab::sweep::RunOptions;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

pub const AFTER_HELP: &str = "\
Examples:
  corral lab list                           # the built-in scenarios
  corral lab run fig07-delay --quick        # into lab-out/fig07-delay-quick
  corral lab run fig10-interference --jobs 2    # the full run on two threads
  corral lab show table8-office > my.toml   # copy a scenario, edit it, then:
  corral lab run my.toml --out my-report
  corral lab run fig08-group-size --shard 0/2 --out s0   # half the points
  corral lab run fig08-group-size --shard 1/2 --out s1   # (on another machine)
  corral lab merge s0 s1 --out fig08        # one report from both
  sbatch --array=0-3 job.sh      # a Slurm array: each task runs its shard
                                 # (job.sh and Kubernetes: docs/lab.md)

A report directory holds queries.csv (one row per query), aggregates.csv, points.csv, links.csv \
(frames per link), nodes.csv (load per node), one SVG per figure, index.html (figures with the \
paper's findings and whether corral agrees), summary.txt and summary.json. The same command and \
--seed give byte-identical CSV files.

-q prints what ran and one line per finding (summary.txt has the rest). Ctrl-C stops a run: the points \
(or sensitivity variants) that finished are written as a report marked INTERRUPTED, and the exit \
status is 130; a second Ctrl-C ends at once. `merge` exits 1 when the shards miss points, unless \
--partial (a report marked PARTIAL, without findings).";

#[derive(clap::Args, Debug)]
pub struct LabArgs {
    #[command(subcommand)]
    command: LabCommand,
}

#[derive(clap::Subcommand, Debug)]
enum LabCommand {
    /// List the built-in scenarios.
    List {
        /// One JSON array of {name, reference, title, points} instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Print a built-in scenario's file (copy it to edit your own).
    Show {
        /// A built-in scenario name (see `corral lab list`).
        name: String,
    },
    /// Run a scenario (a built-in name or a TOML file) and write its report.
    Run(RunArgs),
    /// Join the report directories of `run --shard` into one report.
    Merge {
        /// Shard directories.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Output directory (default: lab-out/<scenario>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print summary.json instead of the text summary.
        #[arg(long)]
        json: bool,
        /// Write a report even when the shards miss points (marked PARTIAL, without findings); without
        /// it a lost shard fails the merge, so a pipeline's next step does not run.
        #[arg(long)]
        partial: bool,
    },
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// A built-in scenario name or a scenario file (.toml).
    scenario: String,
    /// Few repetitions (and the scenario's quick subset of sweep values): for CI and a first look.
    #[arg(long)]
    quick: bool,
    /// Report directory (default: lab-out/<scenario>[-quick][-shard-i-of-n]).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Seed of every random choice in the run.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Run only every n-th sweep point starting at i (`i/n`), for splitting a sweep over machines. Without
    /// it, a Slurm array task (SLURM_ARRAY_TASK_ID and _COUNT) or a Kubernetes Indexed Job's pod
    /// (JOB_COMPLETION_INDEX, with --shard-count) picks its shard; stderr says which.
    #[arg(long)]
    shard: Option<String>,
    /// The number of shards when a scheduler gives only the index (a Kubernetes Indexed Job's
    /// completions); overrides SLURM_ARRAY_TASK_COUNT and JOB_COMPLETION_COUNT.
    #[arg(long, value_name = "N")]
    shard_count: Option<usize>,
    /// Threads (default: the available cores). Results do not depend on it.
    #[arg(long)]
    jobs: Option<usize>,
    /// Print summary.json instead of the text summary.
    #[arg(long)]
    json: bool,
}

/// A job's error as the CLI's failure: a mistake in what was asked is a usage error.
fn failure(e: JobError) -> Failure {
    if e.is_usage() {
        Failure::usage(e.to_string())
    } else {
        Failure::other(e.to_string())
    }
}

/// The progress of one phase of a run (its points, then its sensitivity variants' points: each phase
/// counts its own, so a total never changes mid-line), on stderr.
struct Progress {
    name: String,
    start: Instant,
    tty: bool,
    quiet: bool,
    last_tenth: std::sync::atomic::AtomicUsize,
}

impl Progress {
    fn new(name: String, quiet: bool) -> Progress {
        let tty = std::io::stderr().is_terminal();
        Progress { name, start: Instant::now(), tty, quiet, last_tenth: Default::default() }
    }

    fn report(&self, done: usize, total: usize) {
        if self.quiet {
            return;
        }
        let elapsed = self.start.elapsed().as_secs_f64();
        let line = if done >= total {
            format!("[{}] {done}/{total} points in {elapsed:.1} s", self.name)
        } else {
            // An estimate from the points done (never "ETA 0 s" while points are left).
            let eta = elapsed / done.max(1) as f64 * (total - done) as f64;
            format!("[{}] {done}/{total} points, {elapsed:.1} s elapsed, ETA {:.0} s", self.name, eta.max(1.0))
        };
        if self.tty {
            let width = 30;
            let filled = width * done / total.max(1);
            say!("\r[{}{}] {line}   \x1b[K", "#".repeat(filled), ".".repeat(width - filled));
            if done == total {
                say!("");
            }
        } else {
            // Without a terminal: a line at every tenth, so logs stay short.
            let tenth = done * 10 / total.max(1);
            if self.last_tenth.fetch_max(tenth + 1, std::sync::atomic::Ordering::Relaxed) <= tenth || done == total {
                say!("{line}");
            }
        }
    }
}

/// A run's progress, phase by phase: the base points, then the sensitivity variants' (announced with
/// how many wrong models, and whether this shard runs only its share).
struct Phases {
    name: String,
    quiet: bool,
    shard: bool,
    current: std::sync::Mutex<Progress>,
}

impl job::Watch for Phases {
    fn progress(&self, done: usize, total: usize) {
        self.current.lock().unwrap_or_else(std::sync::PoisonError::into_inner).report(done, total);
    }

    fn variants(&self, variants: usize) {
        if !self.quiet && !self.shard {
            say!("sensitivity: rerunning the findings with {variants} wrong model(s)");
        } else if !self.quiet {
            say!("sensitivity: this shard's share of the points of {variants} wrong model(s)");
        }
        *self.current.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Progress::new(format!("{} sensitivity", self.name), self.quiet);
    }
}

pub fn run(args: LabArgs, quiet: bool) -> Result<(), Failure> {
    match args.command {
        LabCommand::List { json } => list(json),
        LabCommand::Show { name } => show(&name),
        LabCommand::Run(a) => run_scenario(a, quiet),
        LabCommand::Merge { dirs, out, json, partial } => merge(&dirs, out, json, partial, quiet),
    }
}

/// `lab list`: the built-in scenarios.
fn list(json: bool) -> Result<(), Failure> {
    let rows = job::catalogue().map_err(|e| Failure::other(e.to_string()))?;
    if json {
        let all: Vec<serde_json::Value> = rows
            .iter()
            .map(
                |l| serde_json::json!({"name": l.name, "reference": l.reference, "title": l.title, "points": l.points}),
            )
            .collect();
        out!("{}", serde_json::Value::Array(all));
        return Ok(());
    }
    let w = rows.iter().map(|l| l.name.len()).max().unwrap_or(4);
    out!("{:<w$}  {:>6}  title — reproduces", "name", "points");
    for l in rows {
        out!("{:<w$}  {:>6}  {} — {}", l.name, l.points, l.title, l.reference);
    }
    Ok(())
}

/// `lab show NAME`: a built-in scenario's file.
fn show(name: &str) -> Result<(), Failure> {
    match builtin(name) {
        Some(t) => {
            out!("{}", t.trim_end());
            Ok(())
        }
        None => Err(Failure::usage(format!("{name}: no such built-in scenario (see corral lab list)"))),
    }
}

/// `lab run`: one scenario (or one shard of its sweep), its report and findings.
fn run_scenario(a: RunArgs, quiet: bool) -> Result<(), Failure> {
    let (s, text) = job::resolve(&a.scenario).map_err(failure)?;
    let env = |k: &str| std::env::var(k).ok();
    let picked = job::choose_shard(a.shard.as_deref(), &env, a.shard_count).map_err(failure)?;
    if let (None, Some(p)) = (&a.shard, &picked) {
        // Said even with -q: a run that covers part of a sweep must never look like the whole.
        say!("shard {}/{}: from {}", p.shard.0, p.shard.1, p.from);
    }
    let shard = picked.map(|p| p.shard);
    let jobs = a.jobs.unwrap_or_else(job::default_jobs).max(1);
    let opts = RunOptions { seed: a.seed, quick: a.quick, shard, jobs };
    let out = a.out.unwrap_or_else(|| job::default_out(&s.name, &opts));
    let start = Instant::now();
    let stop = stop_on_signal();
    let phases = Phases {
        name: s.name.clone(),
        quiet,
        shard: shard.is_some(),
        current: std::sync::Mutex::new(Progress::new(s.name.clone(), quiet)),
    };
    let data = job::run(&s, &text, &opts, &phases, &stop).map_err(failure)?;
    let found = corral_lab::report::write_report(&out, &data).map_err(|e| Failure::other(e.to_string()))?;
    print_summary(&data, &found, a.json, quiet);
    let index = out.join("index.html");
    if data.interrupted {
        return Err(Failure::passing_through(
            130,
            format!("interrupted: the report {} holds what finished", index.display()),
        ));
    }
    if !quiet {
        say!("report: {} ({:.1} s)", index.display(), start.elapsed().as_secs_f64());
    }
    Ok(())
}

/// `lab merge`: the shards of one sweep as one report.
fn merge(dirs: &[PathBuf], out: Option<PathBuf>, json: bool, partial: bool, quiet: bool) -> Result<(), Failure> {
    let refs: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
    let data = job::merge(&refs, partial).map_err(|e| Failure::other(e.to_string()))?;
    let out = out.unwrap_or_else(|| PathBuf::from("lab-out").join(&data.scenario.name));
    let found = corral_lab::report::write_report(&out, &data).map_err(|e| Failure::other(e.to_string()))?;
    print_summary(&data, &found, json, quiet);
    if !quiet {
        say!("report: {}", out.join("index.html").display());
    }
    Ok(())
}

/// The summary on stdout: summary.json with `--json`; with `-q` what ran and one line per finding;
/// otherwise summary.txt.
fn print_summary(data: &corral_lab::data::RunData, found: &[corral_lab::findings::Finding], json: bool, quiet: bool) {
    use corral_lab::report::{summary_brief, summary_json, summary_text};
    if json {
        out!("{}", serde_json::to_string_pretty(&summary_json(data, found)).unwrap_or_default());
    } else if quiet {
        out!("{}", summary_brief(data, found).trim_end());
    } else {
        out!("{}", summary_text(data, found).trim_end());
    }
}

/// A flag set by the first Ctrl-C (or SIGTERM): the run stops taking points and writes what finished. A
/// second signal ends the process at once (status 130), for a point that would take long to finish.
fn stop_on_signal() -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let watcher = move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
        rt.block_on(async {
            crate::cli::wait_for_signal().await;
            flag.store(true, Ordering::Relaxed);
            say!("interrupted: finishing the points running, then writing what finished (Ctrl-C again ends at once)");
            crate::cli::wait_for_signal().await;
            std::process::exit(130);
        });
    };
    // Without the watcher (no thread), Ctrl-C ends the run as it always did.
    let _ = std::thread::Builder::new().name("lab-signal".into()).spawn(watcher);
    stop
}
