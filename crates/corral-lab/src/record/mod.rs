//! The rows a run produces — one per query, per point, per radio link and per node — and what a point of
//! each experiment family measured beyond them ([`Facts`], one variant per family).
//!
//! # What it owns
//! The row types (with serde, for files and scripts), each family's facts, and how a row's numbers are
//! written ([`num`], [`fixed`]). It never runs, parses or formats anything beyond a number, and imports
//! nothing from the rest of the crate but [`crate::stats`].

mod churn;
mod dtls;
mod multiparty;

pub use churn::ChurnFacts;
pub use dtls::DtlsFacts;
pub use multiparty::{MpStats, Ops};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

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

/// One query of the client: a row of `queries.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueryRow {
    pub point: usize,
    pub rep: usize,
    pub seed: u64,
    /// Virtual time the query was sent, s.
    pub start_s: f64,
    /// Response time, ms; NaN when no response came.
    pub response_ms: f64,
    /// The response code (`2.05`), or `none`.
    pub code: String,
    /// Member values in the response.
    pub replies: usize,
    pub members: usize,
    /// CoAP retransmissions of the gateways' endpoints during the query.
    pub coap_retx: u64,
    /// IEEE 802.15.4 data frames sent by all nodes during the query (MAC retries included).
    pub frames: u64,
    pub mac_retries: u64,
}

impl QueryRow {
    /// Every member's value arrived (a notification of the `follow` axis has no response time).
    pub fn success(&self) -> bool {
        self.replies >= self.members && self.code != "none"
    }
}

/// Per-point facts: a row of `points.csv`. The counters cover the query phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointRow {
    pub point: usize,
    pub seed: u64,
    /// Whether the experiment's set-up succeeded (the EM created the entity, the stream finished); if not,
    /// no query ran.
    pub created: bool,
    /// Time the creation took (validation and, for multicast, joins), ms.
    pub create_ms: f64,
    pub avg_hops: f64,
    pub max_hops: u32,
    pub frames: u64,
    pub mac_retries: u64,
    pub busy_ccas: u64,
    pub coap_retx: u64,
    pub drops_interference: u64,
    pub drops_collision: u64,
    pub drops_mac: u64,
    /// Datagrams a busy CPU could not take (`corral_sim::SimConfig::rx_queue`).
    pub drops_cpu: u64,
    /// Frames on the busiest directed radio link (link stress) and its name.
    pub max_link_frames: u64,
    pub max_link: String,
    /// Frames sent + received by the busiest node and its index.
    pub max_node_frames: u64,
    pub max_node: u32,
    pub events: u64,
    /// Length of the query phase (virtual time), s.
    pub window_s: f64,
    /// What the point's family measured beyond this row.
    pub facts: Facts,
}

impl PointRow {
    /// The row of a point whose family counts for itself (a stream, a baseline, an emulated link, seed
    /// 001's tree): created, one hop, nothing counted yet. Callers set what they measured and take the rest
    /// from here (`PointRow { frames, ..PointRow::new(point, seed, facts) }`).
    pub fn new(point: usize, seed: u64, facts: Facts) -> PointRow {
        PointRow {
            point,
            seed,
            created: true,
            create_ms: 0.0,
            avg_hops: 1.0,
            max_hops: 1,
            frames: 0,
            mac_retries: 0,
            busy_ccas: 0,
            coap_retx: 0,
            drops_interference: 0,
            drops_collision: 0,
            drops_mac: 0,
            drops_cpu: 0,
            max_link_frames: 0,
            max_link: String::new(),
            max_node_frames: 0,
            max_node: 0,
            events: 0,
            window_s: 0.0,
            facts,
        }
    }
}

/// What a point of one experiment family measured beyond the common [`PointRow`]: one variant per family,
/// named like the family's section of the scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Facts {
    /// The Entity Manager's queries (the default family): how stale the client's average was while it
    /// followed the entity (the `follow` axis); `None` when it did not follow, or learnt nothing.
    Entity { staleness: Option<Staleness> },
    /// `[proxy]`: nothing beyond the common row.
    Proxy,
    /// `[stream]` (seed 003).
    Stream(StreamFacts),
    /// `[emulated]` (seed 004).
    Emulated(EmulatedFacts),
    /// `[baseline]` (seed 002).
    Baseline(BaselineFacts),
    /// `[multiparty]` (seed 001): what Figs. 7-9 and Table III need.
    Multiparty(#[serde(with = "shared")] Arc<MpStats>),
    /// `[churn]`: an RD-following entity against a fixed one while devices come and go.
    Churn(ChurnFacts),
    /// `[dtls]`: the cost of a first protected response across a multi-hop chain.
    Dtls(DtlsFacts),
}

impl Facts {
    pub fn staleness(&self) -> Option<Staleness> {
        match self {
            Facts::Entity { staleness } => *staleness,
            _ => None,
        }
    }

    pub fn stream(&self) -> Option<&StreamFacts> {
        match self {
            Facts::Stream(s) => Some(s),
            _ => None,
        }
    }

    pub fn emulated(&self) -> Option<&EmulatedFacts> {
        match self {
            Facts::Emulated(e) => Some(e),
            _ => None,
        }
    }

    pub fn baseline(&self) -> Option<&BaselineFacts> {
        match self {
            Facts::Baseline(b) => Some(b),
            _ => None,
        }
    }

    pub fn multiparty(&self) -> Option<&Arc<MpStats>> {
        match self {
            Facts::Multiparty(m) => Some(m),
            _ => None,
        }
    }

    pub fn churn(&self) -> Option<&ChurnFacts> {
        match self {
            Facts::Churn(c) => Some(c),
            _ => None,
        }
    }

    pub fn dtls(&self) -> Option<&DtlsFacts> {
        match self {
            Facts::Dtls(d) => Some(d),
            _ => None,
        }
    }
}

/// `Arc<MpStats>` through serde as the stats themselves.
mod shared {
    use super::MpStats;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::sync::Arc;

    pub fn serialize<S: Serializer>(m: &Arc<MpStats>, s: S) -> Result<S::Ok, S::Error> {
        m.as_ref().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<MpStats>, D::Error> {
        MpStats::deserialize(d).map(Arc::new)
    }
}

/// |the client's latest average − the members' true average|, sampled every second of the window: mean and
/// maximum, in the resource's unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Staleness {
    pub mean: f64,
    pub max: f64,
}

/// What a `[stream]` point (seed 003) measures: readings sent again, total blocking time and total
/// transmission delay.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StreamFacts {
    /// Readings sent again (NRP); over TCP, the segments the sensor's TCP stack sent again.
    pub nrp: u64,
    /// Total blocking time, ms.
    pub tbt_ms: f64,
    /// Total transmission delay, ms; `None` when the stream did not finish.
    pub ttd_ms: Option<f64>,
}

/// What an `[emulated]` point (seed 004) measures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EmulatedFacts {
    /// Bytes through the link per second, both ways.
    pub throughput: f64,
}

/// What a `[baseline]` point (seed 002: CoAP against HTTP) measures beyond response times. A value is NaN
/// when there was nothing to measure it on (no answered transaction, no response datagram).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BaselineFacts {
    /// Response body bytes received per second of the run.
    pub goodput: f64,
    /// Radio energy of the server mote per answered transaction, mJ (TX and RX airtime × CC2420 currents).
    pub energy_mj: f64,
    /// Bytes on the air per answered transaction, both ways: every data frame (MAC retries included) and
    /// MAC ACK, PHY headers included.
    pub air_bytes: f64,
    /// Share of the server's datagrams that never arrived (application-layer loss, Table 4's `C_f`).
    pub dgram_loss: f64,
    /// IEEE 802.15.4 frames of one response datagram (its 6LoWPAN fragments).
    pub frags: f64,
}

impl Default for BaselineFacts {
    /// Nothing measured.
    fn default() -> BaselineFacts {
        BaselineFacts {
            goodput: f64::NAN,
            energy_mj: f64::NAN,
            air_bytes: f64::NAN,
            dgram_loss: f64::NAN,
            frags: f64::NAN,
        }
    }
}

/// Frames on one directed link during the query phase: a row of `links.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkRow {
    pub point: usize,
    pub from: u32,
    pub to: u32,
    pub frames: u64,
    pub retransmissions: u64,
    pub received: u64,
}

/// Load of one node during the query phase: a row of `nodes.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRow {
    pub point: usize,
    pub node: u32,
    pub role: NodeRole,
    pub hops: u32,
    pub frames_sent: u64,
    pub frames_received: u64,
    pub datagrams_forwarded: u64,
}

/// What a node is in its experiment, as `nodes.csv` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeRole {
    /// A gateway (an Entity Manager, a forwarder, seed 001's server).
    Gateway,
    /// A group member, or a forwarder of seed 001's tree.
    Device,
    /// The host that asks (the lab's client, seed 001's clients, an HTTP or CoAP client).
    Client,
    /// A server of seed 002's or 004's experiment.
    Server,
    /// Seed 003's streaming sensor.
    Sensor,
    /// Seed 003's collector.
    Collector,
}

impl NodeRole {
    pub const ALL: [NodeRole; 6] = [
        NodeRole::Gateway,
        NodeRole::Device,
        NodeRole::Client,
        NodeRole::Server,
        NodeRole::Sensor,
        NodeRole::Collector,
    ];

    pub fn name(self) -> &'static str {
        match self {
            NodeRole::Gateway => "gateway",
            NodeRole::Device => "device",
            NodeRole::Client => "client",
            NodeRole::Server => "server",
            NodeRole::Sensor => "sensor",
            NodeRole::Collector => "collector",
        }
    }

    /// The role a name stands for.
    pub fn parse(name: &str) -> Option<NodeRole> {
        NodeRole::ALL.into_iter().find(|r| r.name() == name)
    }
}

impl fmt::Display for NodeRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Everything one point produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    pub queries: Vec<QueryRow>,
    pub point: PointRow,
    pub links: Vec<LinkRow>,
    pub nodes: Vec<NodeRow>,
}
