//! # corral-lab
//!
//! Experiments on the simulated network: scenario files, parameter sweeps, metrics and reports (CSV, an
//! HTML page with SVG plots, a text summary) that reproduce and extend the seed papers' evaluations. The
//! results come from corral's real services — the Entity Manager and virtual devices of corral-group,
//! corral-proxy, corral-oscore, corral-stream — running on corral-sim, never from a model of them.
//!
//! The modules read top to bottom: each uses only those above it in this table (`stats`, `plot` and
//! `error` are leaves every module may use).
//!
//! | module | what it is |
//! | --- | --- |
//! | [`record`] | the rows a point produces and each family's facts ([`record::Facts`]) |
//! | [`scenario`] | the TOML scenario format, the built-in scenarios, sweep points, a point's [`scenario::Setup`] with one [`scenario::Experiment`] variant per family |
//! | [`harness`] | what the families run on: seeds, the testbed networks, the lab's client and its driver, counter snapshots, query rows |
//! | [`family`] | one module per experiment family: how a point of it runs and what it measures |
//! | [`run`] | one point end to end: the dispatch from its experiment to its family |
//! | [`results`] | a point's aggregates and the value of each figure metric |
//! | [`findings`] | the papers' findings checked against the aggregates, one module per family |
//! | [`data`] | a whole run's data: scenario, points, results, sensitivity variants |
//! | [`csv`] | the raw files of a run, written and read back through one column list each |
//! | [`report`] | the report directory: figures, HTML, `summary.txt`, `summary.json` |
//! | [`sweep`] | loading a scenario, points on threads, shards, sensitivity variants, merging shards |
//! | [`job`] | what `corral lab` decides between its flags and its printing: the scenario by name or file, the shard, a run's phases, a checked merge |
//! | [`error`] | the lab's errors, by whose fault |
//! | [`stats`], [`plot`] | summaries (Tukey five-point) and SVG charts |
//!
//! A new experiment family is a section of the scenario file (`scenario/<family>.rs` and a variant of
//! [`scenario::Experiment`]), a module `family/<family>.rs`, and its checks in `findings/<family>.rs`; see
//! `docs/lab.md` ("Where things go").
//!
//! Everything is seeded; nothing in the simulation path reads a clock (the CLI's progress display does,
//! for the ETA only, and the emulated family runs in real time). See `docs/lab.md` for the scenario format
//! and the calibration.
#![forbid(unsafe_code)]

pub mod csv;
pub mod data;
pub mod error;
pub mod family;
pub mod findings;
pub mod harness;
pub mod job;
pub mod plot;
pub mod record;
pub mod report;
pub mod results;
pub mod run;
pub mod scenario;
pub mod stats;
pub mod sweep;
