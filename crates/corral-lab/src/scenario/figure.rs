//! `[[figure]]` in a scenario: a figure of the report — what it plots ([`Metric`]) against which axis, which
//! points, and the paper's numbers to draw beside corral's.

use crate::error::ScenarioError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A figure of the report.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Figure {
    pub id: String,
    pub title: String,
    /// `line` (x = an axis) or `box` (Tukey boxes of the response time, one per series).
    #[serde(default = "default_kind")]
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
    /// What it plots: a [`Metric`]'s name.
    #[serde(default = "default_metric")]
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

fn default_kind() -> String {
    "line".into()
}

fn default_metric() -> String {
    Metric::ResponseTime.name().into()
}

/// What a figure plots (`metric = "…"`); the value of each for a point is `crate::results`' to compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Mean client response time, s (error bars: 95 % CI).
    ResponseTime,
    /// Mean response time divided by the group size, ms (seed 000 Fig. 9).
    ResponseTimePerMember,
    /// Member values received / members asked, % (Fig. 10).
    MemberReliability,
    /// Queries answered by every member, % (Fig. 11).
    GroupReliability,
    /// CoAP retransmissions of the EM per query.
    Retransmissions,
    /// IEEE 802.15.4 frames per query.
    Frames,
    /// Frames on the busiest link per query (link stress).
    LinkStress,
    /// IEEE 802.15.4 frames per hour of the query phase (the `follow` axis: the cost of following).
    FramesPerHour,
    /// Mean |client's average − true average| over the window (the `follow` axis).
    Staleness,
    /// `[stream]` (seed 003): readings sent again (NRP), total blocking time (TBT, s), total
    /// transmission delay (TTD, s).
    Nrp,
    Tbt,
    Ttd,
    /// `[emulated]` (seed 004): bytes per second through the link.
    Throughput,
    /// `[baseline]` (seed 002): response bytes per second, server radio energy per transaction (mJ),
    /// bytes on the air per transaction, answered requests (%).
    Goodput,
    Energy,
    AirBytes,
    Answered,
    /// `[churn]`: member-seconds each entity was off the devices present (stale + missing), and the
    /// directory's radio frames.
    OffFollowing,
    OffFixed,
    DirectoryFrames,
    /// `[dtls]`: bytes on the air to the first protected response, and handshake flights sent again.
    FirstAirBytes,
    FlightsRetransmitted,
}

impl Metric {
    pub const ALL: [(&'static str, Metric); 22] = [
        ("response_time", Metric::ResponseTime),
        ("response_time_per_member", Metric::ResponseTimePerMember),
        ("member_reliability", Metric::MemberReliability),
        ("group_reliability", Metric::GroupReliability),
        ("retransmissions", Metric::Retransmissions),
        ("frames", Metric::Frames),
        ("link_stress", Metric::LinkStress),
        ("frames_per_hour", Metric::FramesPerHour),
        ("staleness", Metric::Staleness),
        ("nrp", Metric::Nrp),
        ("tbt", Metric::Tbt),
        ("ttd", Metric::Ttd),
        ("throughput", Metric::Throughput),
        ("goodput", Metric::Goodput),
        ("energy", Metric::Energy),
        ("air_bytes", Metric::AirBytes),
        ("answered", Metric::Answered),
        ("off_following", Metric::OffFollowing),
        ("off_fixed", Metric::OffFixed),
        ("directory_frames", Metric::DirectoryFrames),
        ("first_air_bytes", Metric::FirstAirBytes),
        ("flights_retransmitted", Metric::FlightsRetransmitted),
    ];

    pub fn parse(s: &str) -> Result<Metric, ScenarioError> {
        Metric::ALL.iter().find(|(n, _)| *n == s).map(|(_, m)| *m).ok_or_else(|| {
            ScenarioError::invalid(format!(
                "metric {s:?} (known: {})",
                Metric::ALL.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            ))
        })
    }

    /// Whether the metric is one of the per-query columns every report's point table has (response times,
    /// reliability, retransmissions, frames); the others are one family's own numbers (throughput, NRP,
    /// goodput, …), which the tables add as columns when a figure plots them.
    pub fn per_query(self) -> bool {
        matches!(
            self,
            Metric::ResponseTime
                | Metric::ResponseTimePerMember
                | Metric::MemberReliability
                | Metric::GroupReliability
                | Metric::Retransmissions
                | Metric::Frames
                | Metric::LinkStress
                | Metric::FramesPerHour
                | Metric::Staleness
        )
    }

    /// The name a scenario writes.
    pub fn name(self) -> &'static str {
        Metric::ALL.iter().find(|(_, m)| *m == self).map_or("", |(n, _)| n)
    }

    /// The y axis label.
    pub fn label(self) -> &'static str {
        match self {
            Metric::ResponseTime => "response time (s)",
            Metric::ResponseTimePerMember => "response time per member (ms)",
            Metric::MemberReliability => "member reliability (%)",
            Metric::GroupReliability => "group reliability (%)",
            Metric::Retransmissions => "CoAP retransmissions per query",
            Metric::Frames => "IEEE 802.15.4 frames per query",
            Metric::LinkStress => "frames on the busiest link per query",
            Metric::FramesPerHour => "IEEE 802.15.4 frames per hour",
            Metric::Staleness => "mean staleness (resource unit, e.g. °C)",
            Metric::Nrp => "retransmitted readings (NRP)",
            Metric::Tbt => "total blocking time, TBT (s)",
            Metric::Ttd => "total transmission delay, TTD (s)",
            Metric::Throughput => "throughput (bytes/s through the link)",
            Metric::Goodput => "goodput (response body bytes/s)",
            Metric::Energy => "server radio energy per transaction (mJ)",
            Metric::AirBytes => "bytes on the air per transaction (B)",
            Metric::Answered => "requests answered (%)",
            Metric::OffFollowing => "member-seconds off the devices present (following entity)",
            Metric::OffFixed => "member-seconds off the devices present (fixed entity)",
            Metric::DirectoryFrames => "directory frames (registrations, refreshes, removals)",
            Metric::FirstAirBytes => "bytes on the air to the first protected response",
            Metric::FlightsRetransmitted => "handshake flights sent again",
        }
    }
}

/// The family metrics `figures` plot, each once, in figure order: the columns the point tables
/// (`aggregates.csv`, `summary.json`, `summary.txt`, the report page) add to the per-query ones, so that a
/// scenario whose numbers are throughput or NRP shows them beside each point, not only in its figures.
pub fn family_metrics(figures: &[Figure]) -> Vec<Metric> {
    let mut out: Vec<Metric> = Vec::new();
    // A figure's metric was checked when the scenario parsed; one that does not parse adds no column.
    for m in figures.iter().filter_map(|f| Metric::parse(&f.metric).ok()).filter(|m| !m.per_query()) {
        if !out.contains(&m) {
            out.push(m);
        }
    }
    out
}
