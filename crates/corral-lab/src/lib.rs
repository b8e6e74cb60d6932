//! # corral-lab
//!
//! Experiments on the simulated network: scenario files, parameter sweeps, metrics and reports (CSV, an
//! HTML page with SVG plots, a text summary) that reproduce and extend the seed papers' evaluations. The
//! results come from the real Entity Manager and virtual devices of corral-group running on corral-sim —
//! never from a model of them.
//!
//! | module | owns |
//! | --- | --- |
//! | [`scenario`] | the TOML scenario format, the built-in scenarios, sweep points |
//! | [`run`] | one point end to end: network, EM, devices, the client's queries, counters |
//! | [`client`] | the client service on the wired host that measures response times |
//! | `baseline` | seed 002's points: CoAP against corral-sim's HTTP baselines over one 802.15.4 hop, energy and bytes from the frame records |
//! | [`sweep`] | points on threads, shards, merging shards |
//! | [`results`] | the aggregates of a point, the metrics a figure plots, number formatting |
//! | [`report`] | CSV (raw and aggregates), figures, HTML, `summary.txt`, `summary.json` |
//! | [`findings`] | the paper's findings checked against the data |
//! | [`stats`], [`plot`] | summaries (Tukey five-point) and SVG charts |
//!
//! Everything is seeded; nothing in the simulation path reads a clock (the CLI's progress display does,
//! for the ETA only). See `docs/lab.md` for the scenario format and the calibration.
#![forbid(unsafe_code)]

mod baseline;
pub mod client;
mod emulated;
pub mod findings;
mod forwarder;
pub mod multiparty;
pub mod plot;
pub mod report;
pub mod results;
pub mod run;
pub mod scenario;
pub mod stats;
mod streaming;
pub mod sweep;
