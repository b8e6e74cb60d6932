//! Scenario files: what to build, what to measure and what to sweep, as TOML (see `docs/lab.md` in the
//! crate and the built-in files in `scenarios/`), and a scenario resolved for one sweep point ([`Setup`]).
//!
//! # What it owns
//! The file format (serde structs with `deny_unknown_fields`, so a typo is an error that names the field),
//! its validation, the built-in scenarios (embedded with `include_str!`), and the expansion of the sweep
//! axes into [`Point`]s — each resolved into the [`Setup`] of one run: the network every family shares and
//! the [`Experiment`] of the scenario's family. It never simulates anything.
//!
//! | file | owns |
//! | --- | --- |
//! | `mod.rs` | the file and the sections every family shares: `[network]`, `[interference]`, `[calibration]`, `[transmission]`, `[workload]`, `[usage.*]`, `[[finding]]` (its [`Role`] and the `reason` variants, which must be the scenario's), `[[sensitivity]]` |
//! | `figure.rs` | `[[figure]]` and the [`Metric`]s a figure plots |
//! | `point.rs` | the sweep axes ([`AXES`]), their values, a [`Point`] |
//! | `entity.rs`, `proxy.rs`, `stream.rs`, `emulated.rs`, `baseline.rs`, `multiparty.rs`, `churn.rs`, `dtls.rs` | each family's section |
//! | `setup.rs` | [`Setup`]: one point resolved, [`Common`] and the axes every family shares ([`COMMON_AXES`]), [`Experiment`] with one variant per family |
//! | `section.rs` | a point's family section: each family applies its own axes (`AXES` beside its section) and resolves into its [`Experiment`] |
//! | `ranges.rs` | the range of every numeric input, in one table ([`ranges::FIELDS`]), checked when a scenario parses |
//! | `sweep.rs` | validation, the expansion into points, resolving a point |
//!
//! # Sweep order
//! Axes are expanded in the fixed order of [`AXES`] (the last varies fastest), whatever their order in the
//! file, so a point's index — which `--shard` splits on — depends only on the axes and their values.

mod baseline;
mod churn;
mod dtls;
mod emulated;
mod entity;
mod figure;
mod multiparty;
mod point;
mod procedure;
mod proxy;
pub mod ranges;
mod section;
mod setup;
mod stream;
mod sweep;

pub use crate::error::ScenarioError;
pub use baseline::{BaselineSpec, AA_TWIN, SOLUTIONS};
pub use churn::{ChurnSetup, ChurnSpec, Vanish};
pub use dtls::{DtlsSetup, DtlsSpec, Security};
pub use emulated::EmulatedSpec;
pub use entity::{EntityPoint, EntitySetup, EntitySpec, Follow, Queries};
pub use figure::{family_metrics, Figure, Metric};
pub use multiparty::{MultipartySpec, DEPLOYMENTS};
pub use point::{AxisValue, Point, AXES};
pub use procedure::ProcedureRow;
pub use proxy::{Forwarding, ProxyRuleSpec, ProxySpec};
use serde::{Deserialize, Serialize};
pub use setup::{Common, Cpu, Experiment, Family, Floor, NetworkSetup, ProxySetup, Setup, Wifi, COMMON_AXES};
use std::collections::BTreeMap;
pub use stream::StreamSpec;

/// A built-in scenario: its name and file text.
pub struct Builtin {
    pub name: &'static str,
    pub text: &'static str,
}

macro_rules! builtin {
    ($name:literal) => {
        Builtin { name: $name, text: include_str!(concat!("../../scenarios/", $name, ".toml")) }
    };
}

/// The scenarios that ship with corral, in the order `corral lab list` shows them.
pub const BUILTINS: &[Builtin] = &[
    builtin!("fig07-delay"),
    builtin!("fig08-group-size"),
    builtin!("fig10-interference"),
    builtin!("fig13-two-gateways"),
    builtin!("fig14-ack-timeout"),
    builtin!("table8-office"),
    builtin!("ext-leisure"),
    builtin!("ext-auto-delay"),
    builtin!("ext-observe"),
    builtin!("ext-proxy"),
    builtin!("seed003-delay"),
    builtin!("seed003-loss"),
    builtin!("seed003-buffer"),
    builtin!("seed004-throughput"),
    builtin!("seed002-latency"),
    builtin!("seed002-workload"),
    builtin!("seed002-goodput"),
    builtin!("ext-repair"),
    builtin!("seed001-multiparty"),
    builtin!("seed001-load"),
    builtin!("calibrate-cpu"),
    builtin!("calibrate-wifi"),
    builtin!("calibrate-office"),
    builtin!("ext-rd-churn"),
    builtin!("ext-dtls"),
];

/// The text of a built-in scenario.
pub fn builtin(name: &str) -> Option<&'static str> {
    BUILTINS.iter().find(|b| b.name == name).map(|b| b.text)
}

/// A scenario file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name (used for output directories).
    pub name: String,
    pub title: String,
    /// What it reproduces, e.g. "seed 000 Fig. 7".
    #[serde(default)]
    pub reference: String,
    #[serde(default)]
    pub description: String,
    /// The paper's procedure, input by input (`[[procedure]]`): see [`ProcedureRow`]. The report opens with
    /// it.
    #[serde(default)]
    pub procedure: Vec<ProcedureRow>,
    pub network: Network,
    #[serde(default)]
    pub interference: Interference,
    #[serde(default)]
    pub calibration: Calibration,
    pub entity: EntitySpec,
    #[serde(default)]
    pub transmission: Transmission,
    pub workload: Workload,
    /// Axis name → values. See [`AXES`].
    #[serde(default)]
    pub sweep: BTreeMap<String, Vec<toml::Value>>,
    /// Named background-usage profiles (the `usage` axis), e.g. the office floor's "low" and "normal".
    #[serde(default)]
    pub usage: BTreeMap<String, Usage>,
    #[serde(default, rename = "figure")]
    pub figures: Vec<Figure>,
    #[serde(default, rename = "finding")]
    pub findings: Vec<FindingSpec>,
    /// Deliberately wrong models to rerun the findings with (`[[sensitivity]]`): which verdicts flip.
    #[serde(default)]
    pub sensitivity: Vec<SensitivitySpec>,
    /// The experiment family: the Entity Manager's queries (`[entity]`) unless one of the sections below
    /// is given, which makes the scenario that family's (at most one).
    ///
    /// A forward proxy (corral-proxy) at the gateway instead of the Entity Manager: consumers on the host
    /// ask the members' resources through it. See [`ProxySpec`].
    #[serde(default)]
    pub proxy: Option<ProxySpec>,
    /// Seed 003's streaming experiment instead of an entity: see [`StreamSpec`].
    #[serde(default)]
    pub stream: Option<StreamSpec>,
    /// Seed 004's experiment with real programs over `corral link`: see [`EmulatedSpec`].
    #[serde(default)]
    pub emulated: Option<EmulatedSpec>,
    /// Seed 002's CoAP against HTTP baselines: see [`BaselineSpec`].
    #[serde(default)]
    pub baseline: Option<BaselineSpec>,
    /// Seed 001's multiparty experiment (Fig. 6 tree, Table II deployments): see [`MultipartySpec`].
    #[serde(default)]
    pub multiparty: Option<MultipartySpec>,
    /// Devices joining and leaving a floor, an RD-following entity against a fixed one: see [`ChurnSpec`].
    #[serde(default)]
    pub churn: Option<ChurnSpec>,
    /// A request across a multi-hop 802.15.4 chain secured by DTLS (a handshake first), OSCORE or nothing:
    /// see [`DtlsSpec`].
    #[serde(default)]
    pub dtls: Option<DtlsSpec>,
}

/// A variant of the scenario with some parameters set to wrong values, to show which verdicts depend on
/// them (a verdict that never flips cannot tell a good model from a bad one).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SensitivitySpec {
    pub name: String,
    /// Dotted paths into the scenario and their values, e.g. `"calibration.cca_busy_prob" = 0.0`.
    pub set: BTreeMap<String, toml::Value>,
}

/// Topology builders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TopologyKind {
    /// Gateway and members in one collision domain.
    Star,
    /// Seed 000 Table 7 hop layers for groups of 5, 10, 20, 29, 40 (other sizes: a star).
    Table7,
    /// Hop layers given by `layers` (a multi-hop tree).
    Layered,
    /// Members placed at random (seeded by `topology_seed`) on a `width × height` floor, radio `radius`.
    Floor,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    pub topology: TopologyKind,
    /// Group members (devices). The `group` axis overrides it.
    pub group: usize,
    /// For `layered`: devices per hop layer (their sum is the group).
    #[serde(default)]
    pub layers: Vec<usize>,
    /// Gateways, each with its own radio network on its own channel (`channels`), wired to each other and
    /// to the client. Members are split evenly; `layout = "single"` puts them all on the first.
    #[serde(default = "default_gateways")]
    pub gateways: usize,
    /// IEEE 802.15.4 channel of each gateway's network.
    #[serde(default = "default_channels")]
    pub channels: Vec<u8>,
    /// For `floor`: size in metres, radio range and placement seed (fixed, independent of `--seed`).
    #[serde(default)]
    pub width: f64,
    #[serde(default)]
    pub height: f64,
    #[serde(default)]
    pub radius: f64,
    #[serde(default)]
    pub topology_seed: u64,
    /// One-way delay of the Ethernet links (client–gateway, gateway–gateway), ms.
    #[serde(default = "default_wired_delay_ms")]
    pub wired_delay_ms: f64,
    /// Loss model of every radio link.
    #[serde(default)]
    pub link: LinkSpec,
}

/// One gateway.
fn default_gateways() -> usize {
    1
}

/// Channel 26 for the first gateway, 25 for the second.
fn default_channels() -> Vec<u8> {
    vec![26, 25]
}

/// 1 ms each way on the Ethernet links.
fn default_wired_delay_ms() -> f64 {
    1.0
}

/// A radio link loss model.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize, Default)]
#[serde(tag = "model", rename_all = "kebab-case", deny_unknown_fields)]
pub enum LinkSpec {
    #[default]
    Perfect,
    /// Independent loss of each frame with probability `p`.
    Bernoulli { p: f64 },
    /// Gilbert–Elliott bursts: mean loss, mean burst length (frames) and the loss inside a burst.
    Gilbert { mean_loss: f64, burst: f64, loss_bad: f64 },
    /// SNR-driven loss (seed 002), per-bit SNR in dB.
    Snr { snr_db: f64 },
}

/// The Wi-Fi link that interferes with the radio network.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Interference {
    /// IEEE 802.11 channel of the interfering Wi-Fi link (13 overlaps IEEE 802.15.4 channels 25 and 26).
    pub wifi_channel: u8,
    /// Offered load in Mb/s (the `wifi_mbps` axis overrides it). Starts when the queries start, after the
    /// entity was created.
    pub mbps: f64,
    /// Optional load schedule, `[[seconds after the first query, Mb/s], …]`, replacing `mbps`.
    pub schedule: Vec<(f64, f64)>,
}

impl Default for Interference {
    /// Channel 13 (over IEEE 802.15.4 channels 25 and 26), silent.
    fn default() -> Self {
        Interference { wifi_channel: 13, mbps: 0.0, schedule: Vec::new() }
    }
}

/// The knobs the lab calibrates against the testbed (see `docs/lab.md`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Calibration {
    /// Which calibrated set these values are (documentation; tests check every file naming a set uses
    /// the same values).
    pub set: String,
    /// CPU time of a node between a datagram's arrival and its CoAP stack seeing it, ms.
    pub processing_delay_ms: f64,
    /// Datagrams that may wait while a node's CPU handles one (`-1`: unlimited, handled in parallel).
    pub rx_queue: i32,
    /// Probability that a CCA overlapping a Wi-Fi burst reports busy.
    pub cca_busy_prob: f64,
    /// Probability that one Wi-Fi burst overlapping a received frame corrupts it.
    pub corruption_prob: f64,
    /// The paper numbers these values were chosen against (the calibration set), e.g. "Fig. 7: 3 s at no
    /// delay". Findings on these numbers are FITTED, never agreement.
    pub fitted_to: Vec<String>,
    /// Where each value comes from (a datasheet, Contiki's sources, a fit), for the report.
    pub sources: Vec<String>,
}

impl Default for Calibration {
    /// Uncalibrated: motes answer instantly (no CPU time, no queue), and the Wi-Fi probabilities are
    /// guesses (half the CCAs busy, a tenth of the bursts corrupting).
    fn default() -> Self {
        Calibration {
            set: String::new(),
            processing_delay_ms: 0.0,
            rx_queue: -1,
            cca_busy_prob: 0.5,
            corruption_prob: 0.1,
            fitted_to: Vec::new(),
            sources: Vec::new(),
        }
    }
}

impl Calibration {
    /// `rx_queue` in words: "unlimited waiting slots" for −1 (never "-1 waiting slot(s)").
    pub fn waiting_slots(&self) -> String {
        match self.rx_queue {
            q if q < 0 => "unlimited waiting slots".into(),
            1 => "1 waiting slot".into(),
            q => format!("{q} waiting slots"),
        }
    }
}

/// CoAP transmission parameters of the EM and the devices (RFC 7252 §4.8).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Transmission {
    pub ack_timeout_ms: u64,
    pub ack_random_factor: f64,
    pub max_retransmit: u8,
    /// DEFAULT_LEISURE of the devices and the EM's multicast window (seed 000 Table 6: 5 s).
    pub leisure_ms: u64,
}

impl Default for Transmission {
    /// RFC 7252's defaults (ACK_TIMEOUT 2 s, ACK_RANDOM_FACTOR 1.5, MAX_RETRANSMIT 4) and seed 000's 5 s
    /// leisure.
    fn default() -> Self {
        Transmission { ack_timeout_ms: 2000, ack_random_factor: 1.5, max_retransmit: 4, leisure_ms: 5000 }
    }
}

/// How much each point asks: queries, pauses, replicates.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Queries per sweep point (full run).
    pub repetitions: usize,
    /// Queries per sweep point with `--quick`.
    #[serde(default = "default_quick_repetitions")]
    pub quick_repetitions: usize,
    /// Pause after each response before the next query, ms.
    #[serde(default = "default_pause_ms")]
    pub pause_ms: u64,
    /// A query without a response after this long is recorded as failed, s.
    #[serde(default = "default_query_limit_s")]
    pub query_limit_s: u64,
    /// With `--quick`, only these values of an axis are run (e.g. `wifi_mbps = [0, 28.5]`).
    #[serde(default)]
    pub quick_sweep: BTreeMap<String, Vec<toml::Value>>,
    /// Points of the `follow` axis follow the entity's average for this long (virtual time), s.
    #[serde(default = "default_duration_s")]
    pub duration_s: u64,
    /// The same with `--quick`.
    #[serde(default = "default_quick_duration_s")]
    pub quick_duration_s: u64,
    /// Independent replicates of every point (seeds; on a random floor, floors): verdicts are computed
    /// on their spread.
    #[serde(default = "default_replicates")]
    pub replicates: usize,
    /// The same with `--quick`.
    #[serde(default = "default_quick_replicates")]
    pub quick_replicates: usize,
}

/// Three queries per point with `--quick`.
fn default_quick_repetitions() -> usize {
    3
}

/// One second between a response and the next query.
fn default_pause_ms() -> u64 {
    1000
}

/// A query unanswered after 400 s has failed.
fn default_query_limit_s() -> u64 {
    400
}

/// Following an entity lasts an hour of virtual time…
fn default_duration_s() -> u64 {
    3600
}

/// … and five minutes with `--quick`.
fn default_quick_duration_s() -> u64 {
    300
}

/// Five replicates per point: a claim agrees when it holds in four.
fn default_replicates() -> usize {
    5
}

/// One replicate with `--quick`.
fn default_quick_replicates() -> usize {
    1
}

/// A background-usage profile for the `usage` axis.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Usage {
    pub wifi_mbps: Option<f64>,
    /// Overrides of the calibration's Wi-Fi probabilities for this environment.
    pub cca_busy_prob: Option<f64>,
    pub corruption_prob: Option<f64>,
    pub link: Option<LinkSpec>,
}

/// A finding to check: `check` names a computation in `crate::findings`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FindingSpec {
    pub check: String,
    /// The figure it sits next to.
    #[serde(default)]
    pub figure: String,
    /// The paper's finding, in words.
    pub paper: String,
    /// Why corral may differ, shown when it does.
    #[serde(default)]
    pub explain: String,
    /// `claim` (default), `fitted` (a constant was chosen against this number) or `consequence` (follows
    /// from the configuration).
    #[serde(default)]
    pub role: Role,
    /// The `[[sensitivity]]` variant(s) that test the reason `explain` gives for the verdict — for a
    /// DISAGREES the stated cause of the disagreement, for an AGREES the variant that removes its cause:
    /// one name (`reason = "…"`) or a list when two reasons are stated. Each must be a variant's `name`
    /// (validation refuses another); the report says what the finding is in each.
    #[serde(default, deserialize_with = "one_or_many", skip_serializing_if = "Vec::is_empty")]
    pub reason: Vec<String>,
}

/// A string or a list of strings, as a list.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

/// How a scenario uses a finding, which decides the word its verdict gets (`crate::findings`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The paper's number against corral's, held out from every calibration: AGREES or DISAGREES.
    #[default]
    Claim,
    /// A constant was chosen against this very number: FITTED, agreement by construction.
    Fitted,
    /// Follows from the configuration's arithmetic (pacing, caps): CONSEQUENCE, not evidence.
    Consequence,
}

fn err<T>(msg: impl Into<String>) -> Result<T, ScenarioError> {
    Err(ScenarioError::invalid(msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 46: the calibration line said "-1 waiting slot(s)" for an unlimited queue.
    #[test]
    fn waiting_slots_are_said_in_words() {
        let c = |rx_queue| Calibration { rx_queue, ..Calibration::default() }.waiting_slots();
        assert_eq!(
            (c(-1).as_str(), c(1).as_str(), c(3).as_str()),
            ("unlimited waiting slots", "1 waiting slot", "3 waiting slots")
        );
    }

    #[test]
    fn every_builtin_parses_and_resolves() {
        for b in BUILTINS {
            let s = Scenario::parse(b.text).unwrap_or_else(|e| panic!("{}: {e}", b.name));
            assert_eq!(s.name, b.name);
            assert!(!s.points(true).is_empty());
        }
    }

    /// One calibrated set, not constants per figure: every file naming a set uses the same values.
    #[test]
    fn a_calibration_set_has_one_value_everywhere() {
        let mut sets: BTreeMap<String, (String, f64, i32, f64, f64)> = BTreeMap::new();
        for b in BUILTINS {
            let c = Scenario::parse(b.text).unwrap().calibration;
            if c.set.is_empty() {
                continue;
            }
            let v = (b.name.to_string(), c.processing_delay_ms, c.rx_queue, c.cca_busy_prob, c.corruption_prob);
            let first = sets.entry(c.set.clone()).or_insert_with(|| v.clone());
            assert_eq!((first.1, first.2, first.3, first.4), (v.1, v.2, v.3, v.4), "{} vs {}", first.0, v.0);
        }
        assert!(sets.contains_key("testbed") && sets.contains_key("office"));
        let seed000 =
            ["fig07-delay", "fig08-group-size", "fig10-interference", "fig13-two-gateways", "fig14-ack-timeout"];
        for name in seed000 {
            assert_eq!(Scenario::parse(builtin(name).unwrap()).unwrap().calibration.set, "testbed", "{name}");
        }
    }

    #[test]
    fn sweep_expands_in_axis_order_and_quick_filters() {
        let s = Scenario::parse(
            r#"
name = "t"
title = "t"
[network]
topology = "star"
group = 3
[entity]
[workload]
repetitions = 2
replicates = 2
quick_sweep = { delay = [0] }
[sweep]
delay = [0, 50]
group = [3, 4, 5]
"#,
        )
        .unwrap();
        // The replicates are the last (fastest) axis; --quick has one replicate.
        let p = s.points(false);
        assert_eq!(p.len(), 12);
        assert_eq!(p[1].label(), "group=3 delay=0 replicate=2");
        assert_eq!(p[2].label(), "group=3 delay=50 replicate=1");
        assert_eq!(p[4].label(), "group=4 delay=0 replicate=1");
        let q = s.points(true);
        assert_eq!(q.iter().map(|p| p.index).collect::<Vec<_>>(), vec![0, 2, 4]);
        assert_eq!(q[1].label(), "group=4 delay=0");
        assert_eq!(s.setup(&p[11], false).unwrap().common.network.group, 5);
    }

    /// A quick sweep that names no value of the sweep dropped every point: "0 of 0 points", exit 0. (One
    /// that names some keeps those: an edited sweep may have dropped the others.)
    #[test]
    fn a_quick_sweep_without_a_value_of_the_sweep_is_refused() {
        let text = "name='t'\ntitle='t'\n[network]\ntopology='star'\ngroup=3\n[entity]\n[workload]\nrepetitions = 1\nquick_sweep = { delay = [25] }\n[sweep]\ndelay = [0, 50]\n";
        let e = Scenario::parse(text).expect_err("25 is no value of the sweep");
        assert!(e.to_string().contains("workload.quick_sweep.delay = [25]: none is a value of sweep.delay"), "{e}");
        let s = Scenario::parse(&text.replace("delay = [25]", "delay = [25, 50]")).expect("50 is one");
        assert_eq!(s.points(true).len(), 1);
    }

    #[test]
    fn mistakes_are_named() {
        let e = Scenario::parse(
            "name='x'\ntitle='x'\n[network]\ntopology='star'\ngroup=3\ngruop=4\n[entity]\n[workload]\nrepetitions=1\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("gruop"), "{e}");
        let e = Scenario::parse("name='x'\ntitle='x'\n[network]\ntopology='star'\ngroup=3\n[entity]\n[workload]\nrepetitions=1\n[sweep]\nspeed=[1]\n")
            .unwrap_err();
        assert!(e.to_string().contains("unknown axis"), "{e}");
    }
}
