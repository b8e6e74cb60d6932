//! # corral-lab
//!
//! Experiments on the simulated network: scenario files, parameter sweeps, metrics and reports (CSV, an
//! HTML page with SVG plots, a text summary) that reproduce and extend the seed papers' evaluations.

pub mod plot;
pub mod stats;
