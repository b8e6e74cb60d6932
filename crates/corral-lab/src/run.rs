//! One sweep point, end to end: the point's [`Setup`] handed to its experiment family, which builds the
//! network (simulated, or emulated in real time), runs the experiment and measures it.
//!
//! # What it owns
//! The one dispatch from an [`Experiment`] to its family's `run`. A point's rows are a pure function of
//! (setup, point, seed) for every simulated family — which is what makes shards and threads safe.

use crate::error::RunError;
use crate::family;
use crate::harness::PointRun;
use crate::record::PointResult;
use crate::scenario::{Experiment, Setup};

/// Runs one point with `seed`.
pub fn run_point(s: &Setup, index: usize, seed: u64) -> Result<PointResult, RunError> {
    run_point_traced(s, index, seed, false).map(|r| r.result)
}

/// [`run_point`] that keeps the simulator of a simulated point, with its records stored if `record` (same
/// numbers either way; the baseline and multiparty families always keep them).
pub fn run_point_traced(s: &Setup, index: usize, seed: u64, record: bool) -> Result<PointRun, RunError> {
    let c = &s.common;
    match &s.experiment {
        Experiment::Entity(e) => family::entity::run(c, e, index, seed, record),
        Experiment::Proxy(p) => family::proxy::run(c, p, index, seed, record),
        Experiment::Stream(st) => family::stream::run(c, st, index, seed, record),
        Experiment::Emulated(em) => family::emulated::run(em, index, seed),
        Experiment::Baseline(b) => family::baseline::run(c, b, index, seed),
        Experiment::Multiparty(m) => family::multiparty::run(c, m, index, seed),
        Experiment::Churn(ch) => family::churn::run(c, ch, index, seed),
        Experiment::Dtls(d) => family::dtls::run(c, d, index, seed),
    }
}
