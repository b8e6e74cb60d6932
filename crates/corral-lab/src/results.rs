//! The results of a run that everything else reads: the aggregates of a point (response times,
//! reliability, frames) computed from its rows, the metrics a figure can plot, and how numbers are written.
//!
//! Its own room so that findings, figures and reports share these types without importing each other
//! (they used to form a circle: scenario ↔ report ↔ findings). It never runs a simulation and never
//! formats a report.

use crate::run::{PointRow, QueryRow};
use crate::stats::Summary;

/// A number as the shortest text that reads back to it (`100`, `28.5`); empty for NaN.
pub fn num(x: f64) -> String {
    if x.is_nan() {
        String::new()
    } else {
        format!("{x}")
    }
}

/// A measured value with fixed decimals (stable across platforms); empty for NaN.
pub fn fixed(x: f64, decimals: usize) -> String {
    if x.is_finite() {
        format!("{x:.decimals$}")
    } else {
        String::new()
    }
}

/// What a figure plots.
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
}

impl Metric {
    pub const ALL: [(&'static str, Metric); 17] = [
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
    ];

    pub fn parse(s: &str) -> Result<Metric, String> {
        Metric::ALL.iter().find(|(n, _)| *n == s).map(|(_, m)| *m).ok_or_else(|| {
            format!("metric {s:?} (known: {})", Metric::ALL.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "))
        })
    }

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
            Metric::AirBytes => "bytes on the air per transaction",
            Metric::Answered => "requests answered (%)",
        }
    }

    /// The value and its error bar for one aggregate.
    pub fn of(self, a: &Aggregate) -> (f64, Option<(f64, f64)>) {
        match self {
            Metric::ResponseTime => {
                let m = a.rt.map_or(f64::NAN, |s| s.mean / 1000.0);
                let ci = a.rt.map(|s| ((s.mean - s.ci95) / 1000.0, (s.mean + s.ci95) / 1000.0));
                (m, ci)
            }
            Metric::ResponseTimePerMember => (a.rt.map_or(f64::NAN, |s| s.mean / a.members.max(1) as f64), None),
            Metric::MemberReliability => (a.member_reliability, None),
            Metric::GroupReliability => (a.group_reliability, None),
            Metric::Retransmissions => (a.retx_per_query, None),
            Metric::Frames => (a.frames_per_query, None),
            Metric::LinkStress => (a.link_stress_per_query, None),
            Metric::FramesPerHour => (a.frames_per_hour, None),
            Metric::Staleness => (a.staleness, None),
            Metric::Nrp => (a.nrp, None),
            Metric::Tbt => (a.tbt_ms / 1000.0, None),
            Metric::Ttd => (a.ttd_ms / 1000.0, None),
            Metric::Throughput => (a.throughput, None),
            Metric::Goodput => (a.baseline.goodput, None),
            Metric::Energy => (a.baseline.energy_mj, None),
            Metric::AirBytes => (a.baseline.air_bytes, None),
            Metric::Answered => (a.member_reliability, None),
        }
    }
}

/// The aggregates of one point.
#[derive(Debug, Clone, PartialEq)]
pub struct Aggregate {
    pub point: usize,
    pub queries: usize,
    pub members: usize,
    /// Response times of answered queries, ms.
    pub rt: Option<Summary>,
    /// Response times of the queries every member answered, ms: then the EM answers at the last reply,
    /// which is what seed 000 reports for multicast ("until the last response was received").
    pub rt_complete: Option<Summary>,
    /// Answered queries answered within 2 s and within 6 s, % (seed 000 Fig. 16 reads retransmissions
    /// off these: CoAP's first retransmission comes after 2-3 s, the second after 6-9 s).
    pub share_under_2s: f64,
    pub share_under_6s: f64,
    pub member_reliability: f64,
    pub group_reliability: f64,
    pub retx_per_query: f64,
    pub frames_per_query: f64,
    pub link_stress_per_query: f64,
    pub node_load_per_query: f64,
    /// All frames of the query phase per hour of it.
    pub frames_per_hour: f64,
    /// The `follow` axis: mean staleness of the client's average (NaN elsewhere).
    pub staleness: f64,
    /// `[stream]` points (NaN elsewhere).
    pub nrp: f64,
    pub tbt_ms: f64,
    pub ttd_ms: f64,
    pub throughput: f64,
    pub baseline: crate::run::BaselineFacts,
    pub avg_hops: f64,
    pub max_hops: u32,
    pub created: bool,
    /// A `[multiparty]` point's figures and counts (seed 001), from its first replicate when pooled.
    pub multiparty: Option<std::sync::Arc<crate::multiparty::MpStats>>,
}

/// Computes a point's aggregates from its rows.
pub fn aggregate(p: &PointRow, queries: &[&QueryRow]) -> Aggregate {
    let n = queries.len();
    let rts: Vec<f64> = queries.iter().map(|q| q.response_ms).filter(|x| x.is_finite()).collect();
    let complete: Vec<f64> =
        queries.iter().filter(|q| q.success()).map(|q| q.response_ms).filter(|x| x.is_finite()).collect();
    let under = |ms: f64| crate::stats::percent(rts.iter().filter(|r| **r < ms).count() as u64, rts.len() as u64);
    let replies: usize = queries.iter().map(|q| q.replies.min(q.members)).sum();
    let asked: usize = queries.iter().map(|q| q.members).sum();
    let per = |x: u64| if n == 0 { f64::NAN } else { x as f64 / n as f64 };
    Aggregate {
        point: p.point,
        queries: n,
        members: queries.first().map_or(0, |q| q.members),
        rt: Summary::of(&rts),
        rt_complete: Summary::of(&complete),
        share_under_2s: under(2000.0),
        share_under_6s: under(6000.0),
        member_reliability: crate::stats::percent(replies as u64, asked as u64),
        group_reliability: crate::stats::percent(queries.iter().filter(|q| q.success()).count() as u64, n as u64),
        retx_per_query: per(queries.iter().map(|q| q.coap_retx).sum()),
        frames_per_query: per(queries.iter().map(|q| q.frames).sum()),
        link_stress_per_query: per(p.max_link_frames),
        node_load_per_query: per(p.max_node_frames),
        frames_per_hour: if p.window_s > 0.0 { p.frames as f64 * 3600.0 / p.window_s } else { f64::NAN },
        staleness: p.staleness_mean,
        nrp: p.nrp,
        tbt_ms: p.tbt_ms,
        ttd_ms: p.ttd_ms,
        throughput: p.throughput,
        baseline: p.baseline,
        avg_hops: p.avg_hops,
        max_hops: p.max_hops,
        created: p.created,
        multiparty: None,
    }
}
