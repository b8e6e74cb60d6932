//! `corral-dst [SEEDS]`: runs seeds 1..=SEEDS of the simulation test (or `CORRAL_DST_SEED` alone) and
//! ends with one line, `dst: N seeds, V virtual s in W s (R× real time), F failures`; exits 1 when F > 0.
//! `--defects` lists the injectable defects, one a line; `CORRAL_DST_DEFECT=<name>` switches one on.
//! `--hours H` runs each seed for H virtual hours (default 1). What runs it: `scripts/dst.sh`.

use corral_dst::{fault, minimise, replay_command, run_seed, Defect, Options};
use corral_proto::Duration;
use std::process::ExitCode;
use std::time::Instant;

const USAGE: &str = "usage: corral-dst [SEEDS] [--hours H] [--first S] [--faults LIST] [--minimise] [-q]
       corral-dst --defects

Runs the gateway's simulation test: seeds FIRST..FIRST+SEEDS-1 (default 1..200), each H virtual hours
(default 1) of a 20-member gateway under faults, then the quiescence checks. A failing seed prints its
violations and the one command that replays it.

  --defects        list the defects CORRAL_DST_DEFECT=<name> switches on, one a line
  --faults LIST    only these kinds of fault (comma-separated; default all: crash,reboot,partition,loss,
                   jumble,store-slow,spoof,garbage,store-down)
  --minimise       shorten each failing seed's schedule (fewer kinds of fault, a shorter run) and print
                   the shortest replay that still fails
  CORRAL_DST_SEED  run only this seed
  CORRAL_DST_STRICT=1  fail on the known defects too (see the crate docs)
  CORRAL_DST_LOG=1 tell the seed's story on stderr (faults, requests and their answers)
  -q               print only failures and the closing line";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut seeds, mut hours, mut first, mut quiet) = (200u64, 1.0f64, 1u64, false);
    let (mut faults, mut minimising) = (fault::ALL, false);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--defects" => {
                for d in Defect::ALL {
                    println!("{d}");
                }
                return ExitCode::SUCCESS;
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            "-q" => quiet = true,
            "--minimise" => minimising = true,
            "--faults" => match it.next().map(|l| fault::parse(l)) {
                Some(Ok(mask)) => faults = mask,
                Some(Err(name)) => return usage(&format!("--faults: {name} is no kind of fault")),
                None => return usage("--faults takes a comma-separated list of kinds of fault"),
            },
            "--hours" => match it.next().and_then(|h| h.parse().ok()).filter(|h: &f64| *h > 0.0 && *h <= 10_000.0) {
                Some(h) => hours = h,
                None => return usage("--hours takes a number of hours in (0, 10000]"),
            },
            "--first" => match it.next().and_then(|s| s.parse().ok()) {
                Some(s) => first = s,
                None => return usage("--first takes a seed number"),
            },
            n => match n.parse() {
                Ok(n) if n > 0 => seeds = n,
                _ => return usage(&format!("SEEDS must be a positive number, not {n}")),
            },
        }
    }
    let defect = match std::env::var("CORRAL_DST_DEFECT") {
        Ok(name) if !name.is_empty() => match Defect::parse(&name) {
            Some(d) => Some(d),
            None => return usage(&format!("CORRAL_DST_DEFECT={name} names no defect (see --defects)")),
        },
        _ => None,
    };
    let list: Vec<u64> = match std::env::var("CORRAL_DST_SEED").ok().and_then(|s| s.trim().parse().ok()) {
        Some(s) => vec![s],
        None => (first..first + seeds).collect(),
    };
    let strict = std::env::var_os("CORRAL_DST_STRICT").is_some_and(|v| !v.is_empty() && v != "0");
    let duration = Duration::from_micros((hours * 3.6e9) as u64);
    let opts = Options { duration, defect, strict, faults, ..Options::default() };
    let started = Instant::now();
    let (mut virtual_s, mut failures, mut known) = (0.0, 0usize, 0usize);
    for &seed in &list {
        let r = run_seed(seed, opts);
        virtual_s += r.virtual_s;
        if !r.known.is_empty() {
            known += 1;
            for k in &r.known {
                println!("seed {seed}: {k}");
            }
        }
        if r.failures.is_empty() {
            if !quiet {
                println!(
                    "seed {seed}: ok ({} requests, {} crashes, {} reboots, {} writes acknowledged, {} lost, \
                     trace {:016x})",
                    r.requests, r.crashes, r.reboots, r.acknowledged, r.lost, r.trace_hash
                );
            }
            continue;
        }
        failures += 1;
        println!("seed {seed}: FAILED");
        for f in &r.failures {
            println!("  {f}");
        }
        println!("  replay: {}", replay_command(seed, &opts));
        if minimising {
            if let Some((o, r)) = minimise(seed, opts) {
                println!("  shortest failing run ({} violations): {}", r.failures.len(), replay_command(seed, &o));
            }
        }
    }
    let wall = started.elapsed().as_secs_f64();
    if known > 0 {
        println!("dst: {known} seeds met known defects (CORRAL_DST_STRICT=1 fails them)");
    }
    println!(
        "dst: {} seeds, {:.0} virtual s in {:.1} s ({:.0}× real time), {} failures",
        list.len(),
        virtual_s,
        wall,
        virtual_s / wall.max(1e-9),
        failures
    );
    if failures > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn usage(why: &str) -> ExitCode {
    eprintln!("corral-dst: {why}\n{USAGE}");
    ExitCode::from(2)
}
