//! A scenario resolved for one sweep point: [`Setup`] — the simulated world every family may use
//! ([`Common`]) and the point's [`Experiment`], one variant per family with only that family's parameters.

use super::entity::Follow;
use super::proxy::{Forwarding, ProxyRuleSpec};
use super::{BaselineSpec, EmulatedSpec, LinkSpec, MultipartySpec, StreamSpec, TopologyKind, Transmission};

/// A scenario resolved for one point: every parameter the runner needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Setup {
    pub common: Common,
    pub experiment: Experiment,
}

/// What every family's simulated world is made of, from the sections all scenario files share (with the
/// point's axes applied). A family reads what it models and ignores the rest: the emulated and baseline
/// families none of it, the stream family the transmission parameters, the multiparty family the link model
/// and the CPU.
#[derive(Debug, Clone, PartialEq)]
pub struct Common {
    pub network: NetworkSetup,
    pub wifi: Wifi,
    pub cpu: Cpu,
    pub transmission: Transmission,
}

/// `[network]`: the radio networks, their gateways and the wired links.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkSetup {
    pub topology: TopologyKind,
    pub group: usize,
    pub layers: Vec<usize>,
    pub gateways: usize,
    pub channels: Vec<u8>,
    pub floor: Floor,
    pub wired_delay_ms: f64,
    pub link: LinkSpec,
}

/// A random floor: its size and radio range in metres, and the seed of the placement (each replicate of a
/// floor scenario is another floor).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Floor {
    pub width: f64,
    pub height: f64,
    pub radius: f64,
    pub seed: u64,
}

/// The interfering Wi-Fi link: its channel, its load over time and how it disturbs the radio.
#[derive(Debug, Clone, PartialEq)]
pub struct Wifi {
    pub channel: u8,
    /// `(seconds after the first query, Mb/s)`.
    pub schedule: Vec<(f64, f64)>,
    pub cca_busy_prob: f64,
    pub corruption_prob: f64,
}

/// Every node's CPU: time per received datagram and the datagrams that may wait for it (`None`: no limit).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cpu {
    pub processing_delay_ms: f64,
    pub rx_queue: Option<u16>,
}

/// The experiment of a point: one variant per family, named like the family's section of the scenario
/// file, holding only what that family reads.
#[derive(Debug, Clone, PartialEq)]
pub enum Experiment {
    /// The client creates an entity on the Entity Manager and queries (or follows) it (seed 000).
    Entity(EntitySetup),
    /// `[proxy]`: consumers ask the members' resources through forwarders running corral-proxy.
    Proxy(ProxySetup),
    /// `[stream]`: seed 003's streaming run.
    Stream(StreamSpec),
    /// `[emulated]`: seed 004's real-time run (its duration already chosen for `--quick`).
    Emulated(EmulatedSpec),
    /// `[baseline]`: seed 002's run (its count already chosen for `--quick`).
    Baseline(BaselineSpec),
    /// `[multiparty]`: seed 001's run (its request count already chosen for `--quick`).
    Multiparty(MultipartySpec),
    /// `[churn]`: devices join and leave while the client queries an RD-following and a fixed entity.
    Churn(super::churn::ChurnSetup),
    /// `[dtls]`: one request across a chain of hops, secured by DTLS, OSCORE or nothing.
    Dtls(super::dtls::DtlsSetup),
}

impl Experiment {
    pub fn family(&self) -> Family {
        match self {
            Experiment::Entity(_) => Family::Entity,
            Experiment::Proxy(_) => Family::Proxy,
            Experiment::Stream(_) => Family::Stream,
            Experiment::Emulated(_) => Family::Emulated,
            Experiment::Baseline(_) => Family::Baseline,
            Experiment::Multiparty(_) => Family::Multiparty,
            Experiment::Churn(_) => Family::Churn,
            Experiment::Dtls(_) => Family::Dtls,
        }
    }
}

/// Which experiment family a scenario runs: [`Experiment`] without its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Entity,
    Proxy,
    Stream,
    Emulated,
    Baseline,
    Multiparty,
    Churn,
    Dtls,
}

impl Family {
    /// The family's section in a scenario file.
    pub fn section(self) -> &'static str {
        match self {
            Family::Entity => "entity",
            Family::Proxy => "proxy",
            Family::Stream => "stream",
            Family::Emulated => "emulated",
            Family::Baseline => "baseline",
            Family::Multiparty => "multiparty",
            Family::Churn => "churn",
            Family::Dtls => "dtls",
        }
    }
}

/// The query phase of the families that query: `repetitions` queries, each after the previous one's
/// response and a pause, each given up after a limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Queries {
    pub repetitions: usize,
    pub pause_ms: u64,
    pub query_limit_s: u64,
}

/// The entity of a point and how the client uses it.
#[derive(Debug, Clone, PartialEq)]
pub struct EntitySetup {
    pub queries: Queries,
    pub multicast: bool,
    /// `mode = "multicast+repair"`: a multicast entity with `repair=unicast` (beyond the paper).
    pub repair: bool,
    pub confirmable: bool,
    /// `None`: auto (Eq. (2)).
    pub delay_ms: Option<u64>,
    pub resource: String,
    pub timeout_ms: Option<u64>,
    /// One child entity per gateway and a parent on the first (else one entity on the first gateway).
    pub nested: bool,
    pub parent_delay_ms: u64,
    /// The `follow` axis: the client follows the entity's average for `window_s` instead of querying it
    /// `repetitions` times.
    pub follow: Option<Follow>,
    pub window_s: u64,
    /// The members' notification step (`entity.notify_step`) of a point that observes; `None` otherwise
    /// and when unset (corral-group's step).
    pub notify_step: Option<f64>,
}

/// The resolved `[proxy]` of a point: the forwarders, their FIB rules, and the consumers' queries of the
/// members' `resource`.
#[derive(Debug, Clone, PartialEq)]
pub struct ProxySetup {
    pub queries: Queries,
    pub resource: String,
    pub mode: Forwarding,
    pub consumers: usize,
    pub cache_entries: usize,
    pub forwarders: Vec<String>,
    pub rules: Vec<ProxyRuleSpec>,
}

impl ProxySetup {
    /// Checks the forwarders' and rules' node names against a group of `group` members.
    pub(super) fn validate(&self, group: usize) -> Result<(), super::ScenarioError> {
        if !(1..=256).contains(&self.consumers) {
            return super::err(format!("proxy.consumers {}: between 1 and 256", self.consumers));
        }
        if self.forwarders.is_empty() {
            return super::err("proxy.forwarders: at least one (\"gateway\" or \"member:N\")");
        }
        for name in self.forwarders.iter().chain(self.rules.iter().flat_map(|r| r.next.iter().chain([&r.at]))) {
            match name.as_str() {
                "gateway" => {}
                m => match m.strip_prefix("member:").and_then(|n| n.parse::<usize>().ok()) {
                    Some(n) if n < group => {}
                    _ => {
                        return super::err(format!(
                            "proxy: {name:?} is not \"gateway\" or \"member:N\" with N < {group}"
                        ))
                    }
                },
            }
        }
        for r in &self.rules {
            if !self.forwarders.contains(&r.at) {
                return super::err(format!("proxy.rule at {:?}: not one of proxy.forwarders", r.at));
            }
        }
        Ok(())
    }
}
