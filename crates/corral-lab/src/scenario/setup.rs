//! A scenario resolved for one sweep point: [`Setup`] — the simulated world every family may use
//! ([`Common`]) and the point's [`Experiment`], one variant per family with only that family's parameters.

use super::entity::{EntityPoint, EntitySetup, Queries};
use super::point::{AxisValue, Point};
use super::proxy::{Forwarding, ProxyRuleSpec};
use super::{err, ScenarioError};
use super::{
    BaselineSpec, ChurnSpec, DtlsSpec, EmulatedSpec, LinkSpec, MultipartySpec, ProxySpec, Scenario, StreamSpec,
    TopologyKind, Transmission,
};

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

/// The sweep axes every family may have: they set [`Common`] (a family whose runner ignores a field refuses
/// its axis through `crate::family::check_calibration`, or reads nothing of it).
pub const COMMON_AXES: &[&str] = &[
    "usage",
    "group",
    "ack_timeout_ms",
    "leisure_ms",
    "processing_delay_ms",
    "rx_queue",
    "cca_busy_prob",
    "corruption_prob",
    "wifi_mbps",
];

impl Common {
    /// The shared sections of the scenario for point `p` (before its axes apply).
    pub(super) fn of(s: &Scenario, p: &Point) -> Common {
        let n = &s.network;
        // Each replicate of a floor scenario is another random floor of the same size and density.
        let replicate = p.get("replicate").and_then(AxisValue::num).map_or(0, |r| r as u64 - 1);
        Common {
            network: NetworkSetup {
                topology: n.topology,
                group: n.group,
                layers: n.layers.clone(),
                gateways: n.gateways,
                channels: n.channels.clone(),
                floor: Floor { width: n.width, height: n.height, radius: n.radius, seed: n.topology_seed + replicate },
                wired_delay_ms: n.wired_delay_ms,
                link: n.link,
            },
            wifi: Wifi {
                channel: s.interference.wifi_channel,
                schedule: if s.interference.schedule.is_empty() {
                    vec![(0.0, s.interference.mbps)]
                } else {
                    s.interference.schedule.clone()
                },
                cca_busy_prob: s.calibration.cca_busy_prob,
                corruption_prob: s.calibration.corruption_prob,
            },
            cpu: Cpu {
                processing_delay_ms: s.calibration.processing_delay_ms,
                rx_queue: u16::try_from(s.calibration.rx_queue).ok(),
            },
            transmission: s.transmission.clone(),
        }
    }

    /// Applies a [`COMMON_AXES`] axis; `false` for another (a family's).
    pub(super) fn apply_axis(&mut self, s: &Scenario, axis: &str, v: &AxisValue) -> Result<bool, ScenarioError> {
        match axis {
            "usage" => {
                let name = v.to_string();
                let Some(u) = s.usage.get(&name) else { return err(format!("sweep.usage: no [usage.{name}] profile")) };
                if let Some(m) = u.wifi_mbps {
                    self.wifi.schedule = vec![(0.0, m)];
                }
                self.network.link = u.link.unwrap_or(self.network.link);
                self.wifi.cca_busy_prob = u.cca_busy_prob.unwrap_or(self.wifi.cca_busy_prob);
                self.wifi.corruption_prob = u.corruption_prob.unwrap_or(self.wifi.corruption_prob);
            }
            "group" => self.network.group = v.whole(axis)?,
            "ack_timeout_ms" => self.transmission.ack_timeout_ms = v.whole(axis)?,
            "leisure_ms" => self.transmission.leisure_ms = v.whole(axis)?,
            "processing_delay_ms" => self.cpu.processing_delay_ms = v.number(axis)?,
            // −1 (or any count a u16 cannot hold): no limit.
            "rx_queue" => self.cpu.rx_queue = u16::try_from(v.number(axis)? as i64).ok(),
            "cca_busy_prob" => self.wifi.cca_busy_prob = v.number(axis)?,
            "corruption_prob" => self.wifi.corruption_prob = v.number(axis)?,
            "wifi_mbps" => self.wifi.schedule = vec![(0.0, v.number(axis)?)],
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// What the ranges of single fields cannot check: fields that must agree with each other.
    pub(super) fn validate(&self) -> Result<(), ScenarioError> {
        let net = &self.network;
        if net.gateways > net.channels.len() {
            return err("network.gateways: between 1 and the number of network.channels");
        }
        if net.topology == TopologyKind::Layered && net.layers.iter().sum::<usize>() != net.group {
            let sum = net.layers.iter().sum::<usize>();
            return err(format!("network.layers sum to {sum}, but the group has {}", net.group));
        }
        if net.topology == TopologyKind::Floor
            && !(net.floor.width > 0.0 && net.floor.height > 0.0 && net.floor.radius > 0.0)
        {
            return err("network: a floor topology needs width, height and radius");
        }
        Ok(())
    }
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
    /// The sweep axes the family owns (beside [`COMMON_AXES`]): its section's fields a sweep may set.
    pub fn axes(self) -> &'static [&'static str] {
        match self {
            Family::Entity => EntityPoint::AXES,
            Family::Proxy => ProxySpec::AXES,
            Family::Stream => StreamSpec::AXES,
            Family::Emulated => EmulatedSpec::AXES,
            Family::Baseline => BaselineSpec::AXES,
            Family::Multiparty => MultipartySpec::AXES,
            Family::Churn => ChurnSpec::AXES,
            Family::Dtls => DtlsSpec::AXES,
        }
    }

    /// Every family, in the order of their sections in [`Scenario`].
    pub const ALL: [Family; 8] = [
        Family::Entity,
        Family::Proxy,
        Family::Stream,
        Family::Emulated,
        Family::Baseline,
        Family::Multiparty,
        Family::Churn,
        Family::Dtls,
    ];

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::AXES;

    /// Each axis name means one thing: it is owned by the shared sections or by exactly one family, and
    /// every axis a family owns is in the expansion order.
    #[test]
    fn every_axis_has_one_owner() {
        for axis in AXES.iter().filter(|a| **a != "replicate") {
            let owners = Family::ALL.iter().filter(|f| f.axes().contains(axis)).count()
                + usize::from(COMMON_AXES.contains(axis));
            assert_eq!(owners, 1, "sweep.{axis} has {owners} owners");
        }
        for f in Family::ALL {
            for a in f.axes() {
                assert!(AXES.contains(a), "[{}]'s axis {a} is not in AXES", f.section());
            }
        }
    }
}
