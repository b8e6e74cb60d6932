//! The results of a point that everything else reads: its aggregates (response times, reliability, frames)
//! computed from its rows, and the value of each figure metric.
//!
//! # What it owns
//! [`Aggregate`] and [`aggregate`]. It never runs a simulation and never formats a report.

use crate::record::{BaselineFacts, Facts, MpStats, PointRow, QueryRow, StreamFacts};
use crate::scenario::Metric;
use crate::stats::Summary;

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
    pub avg_hops: f64,
    pub max_hops: u32,
    pub created: bool,
    /// What the point's family measured beyond its rows (with replicates pooled: the first replicate's).
    pub facts: Facts,
}

impl Aggregate {
    /// The mean staleness of the client's average (the `follow` axis); NaN when not measured.
    pub fn staleness(&self) -> f64 {
        self.facts.staleness().map_or(f64::NAN, |s| s.mean)
    }

    /// A `[stream]` point's facts.
    pub fn stream(&self) -> Option<&StreamFacts> {
        self.facts.stream()
    }

    /// An `[emulated]` point's bytes per second through the link; NaN for other families.
    pub fn throughput(&self) -> f64 {
        self.facts.emulated().map_or(f64::NAN, |e| e.throughput)
    }

    /// A `[baseline]` point's facts; every value NaN for other families.
    pub fn baseline(&self) -> BaselineFacts {
        self.facts.baseline().copied().unwrap_or_default()
    }

    /// A `[churn]` point's facts.
    pub fn churn(&self) -> Option<&crate::record::ChurnFacts> {
        self.facts.churn()
    }

    /// A `[dtls]` point's facts.
    pub fn dtls(&self) -> Option<&crate::record::DtlsFacts> {
        self.facts.dtls()
    }

    /// A `[multiparty]` point's stats.
    pub fn multiparty(&self) -> Option<&MpStats> {
        self.facts.multiparty().map(|m| m.as_ref())
    }

    /// The value of a figure metric and its error bar, if it has one; NaN when the point does not measure
    /// it.
    pub fn metric(&self, m: Metric) -> (f64, Option<(f64, f64)>) {
        let stream = |f: fn(&StreamFacts) -> f64| self.stream().map_or(f64::NAN, f);
        let churn = |f: fn(&crate::record::ChurnFacts) -> f64| self.churn().map_or(f64::NAN, f);
        let dtls = |f: fn(&crate::record::DtlsFacts) -> f64| self.dtls().map_or(f64::NAN, f);
        match m {
            Metric::ResponseTime => {
                let mean = self.rt.map_or(f64::NAN, |s| s.mean / 1000.0);
                let ci = self.rt.map(|s| ((s.mean - s.ci95) / 1000.0, (s.mean + s.ci95) / 1000.0));
                (mean, ci)
            }
            Metric::ResponseTimePerMember => (self.rt.map_or(f64::NAN, |s| s.mean / self.members.max(1) as f64), None),
            Metric::MemberReliability => (self.member_reliability, None),
            Metric::GroupReliability => (self.group_reliability, None),
            Metric::Retransmissions => (self.retx_per_query, None),
            Metric::Frames => (self.frames_per_query, None),
            Metric::LinkStress => (self.link_stress_per_query, None),
            Metric::FramesPerHour => (self.frames_per_hour, None),
            Metric::Staleness => (self.staleness(), None),
            Metric::Nrp => (stream(|s| s.nrp as f64), None),
            Metric::Tbt => (stream(|s| s.tbt_ms / 1000.0), None),
            Metric::Ttd => (stream(|s| s.ttd_ms.map_or(f64::NAN, |t| t / 1000.0)), None),
            Metric::Throughput => (self.throughput(), None),
            Metric::Goodput => (self.baseline().goodput, None),
            Metric::Energy => (self.baseline().energy_mj, None),
            Metric::AirBytes => (self.baseline().air_bytes, None),
            Metric::Answered => (self.member_reliability, None),
            Metric::OffFollowing => (churn(|c| c.follow_stale_s + c.follow_missing_s), None),
            Metric::OffFixed => (churn(|c| c.fixed_stale_s + c.fixed_missing_s), None),
            Metric::DirectoryFrames => (churn(|c| c.rd_frames as f64), None),
            Metric::FirstAirBytes => (dtls(|d| d.air_bytes as f64), None),
            Metric::FlightsRetransmitted => (dtls(|d| d.flights_retx as f64), None),
        }
    }
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
        avg_hops: p.avg_hops,
        max_hops: p.max_hops,
        created: p.created,
        facts: p.facts.clone(),
    }
}
