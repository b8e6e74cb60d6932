//! Scenario files: what to build, what to measure and what to sweep, as TOML (see `docs/lab.md` in the
//! crate and the built-in files in `scenarios/`).
//!
//! # What it owns
//! The file format (serde structs with `deny_unknown_fields`, so a typo is an error that names the field),
//! its validation, the built-in scenarios (embedded with `include_str!`), and the expansion of the sweep
//! axes into [`Point`]s — each a complete, resolved [`Setup`] for one run. It never simulates anything.
//!
//! # Sweep order
//! Axes are expanded in the fixed order of [`AXES`] (the last varies fastest), whatever their order in the
//! file, so a point's index — which `--shard` splits on — depends only on the axes and their values.

mod baseline;
mod emulated;
mod multiparty;
mod proxy;
mod stream;
mod sweep;
pub use baseline::BaselineSpec;
pub use emulated::EmulatedSpec;
pub use multiparty::{MultipartySpec, DEPLOYMENTS};
pub use proxy::{Forwarding, ForwardingSetup, ProxyRuleSpec, ProxySpec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
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
    builtin!("calibrate-cpu"),
    builtin!("calibrate-wifi"),
    builtin!("calibrate-office"),
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
    #[serde(default = "one")]
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
    #[serde(default = "one_f")]
    pub wired_delay_ms: f64,
    /// Loss model of every radio link.
    #[serde(default)]
    pub link: LinkSpec,
}

fn one() -> usize {
    1
}
fn one_f() -> f64 {
    1.0
}
fn default_channels() -> Vec<u8> {
    vec![26, 25]
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

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Interference {
    /// IEEE 802.11 channel of the interfering Wi-Fi link (13 overlaps IEEE 802.15.4 channels 25 and 26).
    #[serde(default = "wifi13")]
    pub wifi_channel: u8,
    /// Offered load in Mb/s (the `wifi_mbps` axis overrides it). Starts when the queries start, after the
    /// entity was created.
    #[serde(default)]
    pub mbps: f64,
    /// Optional load schedule, `[[seconds after the first query, Mb/s], …]`, replacing `mbps`.
    #[serde(default)]
    pub schedule: Vec<(f64, f64)>,
}

fn wifi13() -> u8 {
    13
}

impl Default for Interference {
    fn default() -> Self {
        Interference { wifi_channel: 13, mbps: 0.0, schedule: Vec::new() }
    }
}

/// The knobs the lab calibrates against the testbed (see `docs/lab.md`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    /// Which calibrated set these values are (documentation; tests check every file naming a set uses
    /// the same values).
    #[serde(default)]
    pub set: String,
    /// CPU time of a node between a datagram's arrival and its CoAP stack seeing it, ms.
    #[serde(default)]
    pub processing_delay_ms: f64,
    /// Datagrams that may wait while a node's CPU handles one (`-1`: unlimited, handled in parallel).
    #[serde(default = "minus_one")]
    pub rx_queue: i32,
    /// Probability that a CCA overlapping a Wi-Fi burst reports busy.
    #[serde(default = "half")]
    pub cca_busy_prob: f64,
    /// Probability that one Wi-Fi burst overlapping a received frame corrupts it.
    #[serde(default = "tenth")]
    pub corruption_prob: f64,
    /// The paper numbers these values were chosen against (the calibration set), e.g. "Fig. 7: 3 s at no
    /// delay". Findings on these numbers are FITTED, never agreement.
    #[serde(default)]
    pub fitted_to: Vec<String>,
    /// Where each value comes from (a datasheet, Contiki's sources, a fit), for the report.
    #[serde(default)]
    pub sources: Vec<String>,
}

fn minus_one() -> i32 {
    -1
}
fn half() -> f64 {
    0.5
}
fn tenth() -> f64 {
    0.1
}

impl Default for Calibration {
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

/// The entity the client creates through the EM and then queries.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EntitySpec {
    /// `unicast` or `multicast` (the `mode` axis overrides it).
    #[serde(default = "unicast")]
    pub ect: String,
    /// `con` or `non` for unicast entities (multicast is always NON).
    #[serde(default = "con")]
    pub emt: String,
    /// Delay between member requests, ms, or "auto" (Eq. (2)).
    #[serde(default = "zero_delay")]
    pub delay: toml::Value,
    /// Member resource path.
    #[serde(default = "temp")]
    pub resource: String,
    /// Entity timeout (ms), if any.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// `single`: one entity of all members on the first gateway; `nested`: one child entity per gateway
    /// and a parent entity on the first gateway whose members are the children (seed 000 Fig. 13).
    #[serde(default = "single")]
    pub layout: String,
    /// Delay between the parent's requests to its child entities, ms.
    #[serde(default)]
    pub parent_delay_ms: u64,
}

fn unicast() -> String {
    "unicast".into()
}
fn con() -> String {
    "con".into()
}
fn zero_delay() -> toml::Value {
    toml::Value::Integer(0)
}
fn temp() -> String {
    "s/t".into()
}
fn single() -> String {
    "single".into()
}

/// CoAP transmission parameters of the EM and the devices (RFC 7252 §4.8).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Transmission {
    #[serde(default = "two_s")]
    pub ack_timeout_ms: u64,
    #[serde(default = "one_half")]
    pub ack_random_factor: f64,
    #[serde(default = "four")]
    pub max_retransmit: u8,
    /// DEFAULT_LEISURE of the devices and the EM's multicast window (seed 000 Table 6: 5 s).
    #[serde(default = "five_s")]
    pub leisure_ms: u64,
}

fn two_s() -> u64 {
    2000
}
fn one_half() -> f64 {
    1.5
}
fn four() -> u8 {
    4
}
fn five_s() -> u64 {
    5000
}

impl Default for Transmission {
    fn default() -> Self {
        Transmission { ack_timeout_ms: 2000, ack_random_factor: 1.5, max_retransmit: 4, leisure_ms: 5000 }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Queries per sweep point (full run).
    pub repetitions: usize,
    /// Queries per sweep point with `--quick`.
    #[serde(default = "three")]
    pub quick_repetitions: usize,
    /// Pause after each response before the next query, ms.
    #[serde(default = "one_s")]
    pub pause_ms: u64,
    /// A query without a response after this long is recorded as failed, s.
    #[serde(default = "limit")]
    pub query_limit_s: u64,
    /// With `--quick`, only these values of an axis are run (e.g. `wifi_mbps = [0, 28.5]`).
    #[serde(default)]
    pub quick_sweep: BTreeMap<String, Vec<toml::Value>>,
    /// Points of the `follow` axis follow the entity's average for this long (virtual time), s.
    #[serde(default = "hour")]
    pub duration_s: u64,
    /// The same with `--quick`.
    #[serde(default = "five_minutes")]
    pub quick_duration_s: u64,
    /// Independent replicates of every point (seeds; on a random floor, floors): verdicts are computed
    /// on their spread.
    #[serde(default = "five")]
    pub replicates: usize,
    /// The same with `--quick`.
    #[serde(default = "one")]
    pub quick_replicates: usize,
}

fn five() -> usize {
    5
}

fn hour() -> u64 {
    3600
}
fn five_minutes() -> u64 {
    300
}

fn three() -> usize {
    3
}
fn one_s() -> u64 {
    1000
}
fn limit() -> u64 {
    400
}

/// A background-usage profile for the `usage` axis.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    #[serde(default)]
    pub wifi_mbps: Option<f64>,
    /// Overrides of the calibration's Wi-Fi probabilities for this environment.
    #[serde(default)]
    pub cca_busy_prob: Option<f64>,
    #[serde(default)]
    pub corruption_prob: Option<f64>,
    #[serde(default)]
    pub link: Option<LinkSpec>,
}

/// A figure of the report.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Figure {
    pub id: String,
    pub title: String,
    /// `line` (x = an axis) or `box` (Tukey boxes of the response time, one per series).
    #[serde(default = "line")]
    pub kind: String,
    /// The x axis (line charts).
    #[serde(default)]
    pub x: String,
    /// Axes whose values make the series (several: their combinations).
    #[serde(default)]
    pub series: Vec<String>,
    /// Only points whose axes have these values, e.g. `{ mode = "unicast" }`.
    #[serde(default)]
    pub filter: BTreeMap<String, toml::Value>,
    /// See [`crate::results::Metric`].
    #[serde(default = "rt")]
    pub metric: String,
    /// The paper's numbers to draw beside ours: `[[x, y], …]` per label.
    #[serde(default)]
    pub paper: BTreeMap<String, Vec<(f64, f64)>>,
    /// A shaded x range and its label (e.g. Eq. (2)'s 82-100 ms).
    #[serde(default)]
    pub band: Option<(f64, f64, String)>,
    #[serde(default)]
    pub y_range: Option<(f64, f64)>,
    /// A logarithmic y axis, for values spanning orders of magnitude (e.g. frames per hour).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub log_y: bool,
    #[serde(default)]
    pub caption: String,
}

fn line() -> String {
    "line".into()
}
fn rt() -> String {
    "response_time".into()
}

/// A finding to check: `check` names a computation in [`crate::findings`].
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
    /// from the configuration): see [`crate::findings`].
    #[serde(default)]
    pub role: crate::findings::Role,
}

/// The sweep axes, in expansion order (the last varies fastest).
pub const AXES: &[&str] = &[
    "layout",
    "mode",
    "usage",
    "group",
    "ack_timeout_ms",
    "leisure_ms",
    "processing_delay_ms",
    "rx_queue",
    "cca_busy_prob",
    "corruption_prob",
    "wifi_mbps",
    "delay",
    "follow",
    "forwarding",
    "consumers",
    "scheme",
    "buffer",
    "loss",
    "impairment",
    "payload",
    "rate",
    "snr_db",
    "deployment",
    "replicate",
];

/// One value of an axis.
#[derive(Debug, Clone, PartialEq)]
pub enum AxisValue {
    Num(f64),
    Text(String),
}

impl AxisValue {
    fn from_toml(axis: &str, v: &toml::Value) -> Result<AxisValue, String> {
        match v {
            toml::Value::Integer(i) => Ok(AxisValue::Num(*i as f64)),
            toml::Value::Float(f) if f.is_finite() => Ok(AxisValue::Num(*f)),
            toml::Value::String(s) if !s.is_empty() && !s.contains([',', '"', '\n']) => Ok(AxisValue::Text(s.clone())),
            other => Err(format!("sweep.{axis}: {other} is not a number or a plain word")),
        }
    }

    pub fn num(&self) -> Option<f64> {
        match self {
            AxisValue::Num(n) => Some(*n),
            AxisValue::Text(_) => None,
        }
    }

    /// Parses a value as written by `Display` (CSV round trip).
    pub fn parse(s: &str) -> AxisValue {
        match s.parse::<f64>() {
            Ok(n) if n.is_finite() => AxisValue::Num(n),
            _ => AxisValue::Text(s.to_string()),
        }
    }
}

impl fmt::Display for AxisValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AxisValue::Num(n) => write!(f, "{}", crate::results::num(*n)),
            AxisValue::Text(s) => f.write_str(s),
        }
    }
}

/// One sweep point: its index in the full sweep and its axis values (in [`AXES`] order).
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub index: usize,
    pub values: Vec<(String, AxisValue)>,
}

impl Point {
    pub fn get(&self, axis: &str) -> Option<&AxisValue> {
        self.values.iter().find(|(a, _)| a == axis).map(|(_, v)| v)
    }

    /// `delay=50 group=5`.
    pub fn label(&self) -> String {
        if self.values.is_empty() {
            return "(single point)".into();
        }
        self.values.iter().map(|(a, v)| format!("{a}={v}")).collect::<Vec<_>>().join(" ")
    }
}

/// A scenario resolved for one point: every parameter the runner needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Setup {
    pub topology: TopologyKind,
    pub group: usize,
    pub layers: Vec<usize>,
    pub gateways: usize,
    pub channels: Vec<u8>,
    pub floor: (f64, f64, f64, u64),
    pub wired_delay_ms: f64,
    pub link: LinkSpec,
    pub wifi_channel: u8,
    /// `(seconds after the first query, Mb/s)`.
    pub wifi_schedule: Vec<(f64, f64)>,
    pub processing_delay_ms: f64,
    pub rx_queue: Option<u16>,
    pub cca_busy_prob: f64,
    pub corruption_prob: f64,
    pub multicast: bool,
    /// `mode = "multicast+repair"`: a multicast entity with `repair=unicast` (beyond the paper).
    pub repair: bool,
    pub confirmable: bool,
    /// `None`: auto (Eq. (2)).
    pub delay_ms: Option<u64>,
    pub resource: String,
    pub timeout_ms: Option<u64>,
    pub nested: bool,
    pub parent_delay_ms: u64,
    pub ack_timeout_ms: u64,
    pub ack_random_factor: f64,
    pub max_retransmit: u8,
    pub leisure_ms: u64,
    pub repetitions: usize,
    pub pause_ms: u64,
    pub query_limit_s: u64,
    /// The `follow` axis: the client follows the entity's average for `window_s` instead of querying it
    /// `repetitions` times.
    pub follow: Option<Follow>,
    pub window_s: u64,
    /// `[proxy]`: the gateway forwards (what it does, consumers per query, cache entries) instead of
    /// running the Entity Manager.
    pub forwarding: Option<ForwardingSetup>,
    /// `[stream]`: seed 003's streaming run of this point.
    pub stream: Option<StreamSpec>,
    /// `[emulated]`: seed 004's real-time run of this point (its duration already chosen for `--quick`).
    pub emulated: Option<EmulatedSpec>,
    /// `[baseline]`: seed 002's run of this point (its count already chosen for `--quick`).
    pub baseline: Option<BaselineSpec>,
    /// `[multiparty]`: seed 001's run of this point (its request count already chosen for `--quick`).
    pub multiparty: Option<MultipartySpec>,
}

/// How a client follows an entity's average (the `follow` axis): `"observe"`, or a number — poll every so
/// many seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Follow {
    /// `GET /em/group?eo=avg` every `period_ms` (the next one at once if a query took longer).
    Poll { period_ms: u64 },
    /// One Observe registration; the EM observes the members (whose sensors become observable).
    Observe,
}

/// A scenario error: which field and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError(pub String);

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScenarioError {}

fn err<T>(msg: impl Into<String>) -> Result<T, ScenarioError> {
    Err(ScenarioError(msg.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(s.setup(&p[11], false).unwrap().group, 5);
    }

    #[test]
    fn mistakes_are_named() {
        let e = Scenario::parse(
            "name='x'\ntitle='x'\n[network]\ntopology='star'\ngroup=3\ngruop=4\n[entity]\n[workload]\nrepetitions=1\n",
        )
        .unwrap_err();
        assert!(e.0.contains("gruop"), "{e}");
        let e = Scenario::parse("name='x'\ntitle='x'\n[network]\ntopology='star'\ngroup=3\n[entity]\n[workload]\nrepetitions=1\n[sweep]\nspeed=[1]\n")
            .unwrap_err();
        assert!(e.0.contains("unknown axis"), "{e}");
    }
}
