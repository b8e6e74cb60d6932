//! `[churn]` in a scenario: devices that join and leave a floor while a client queries two entities of
//! them — one that follows the Resource Directory and one whose members were typed in when the experiment
//! began (run by `crate::family::churn`).

use super::point::AxisValue;
use super::{err, ScenarioError};
use serde::{Deserialize, Serialize};

/// `[churn]`: `network.group` devices on a star around the gateway, which runs the Entity Manager and a
/// Resource Directory (corral-rd, as `corral gateway --rd` does). A share of them is there when the
/// experiment begins, the others arrive during the first three quarters of the window; a share of all
/// leaves during it, some cleanly (their registrant removes the registration first) and the others
/// without a word (radio off). The `lifetime_s` axis overrides `lifetime_s`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChurnSpec {
    /// Share of the devices present (and registered) when the entities are created, 0–1.
    pub present: f64,
    /// Share of all devices that leave during the window, 0–1.
    pub departures: f64,
    /// Share of the departures that remove their registration first (DELETE); the rest vanish.
    pub clean: f64,
    /// What a device that leaves without a word does: `off` (its radio goes silent, so it stops
    /// refreshing) or `mute` (its sensors stop answering but its registrant keeps refreshing).
    pub vanish: String,
    /// The registration lifetime every device asks for, s (at least 60, corral-rd's registrant's floor).
    pub lifetime_s: u32,
    /// The client queries both entities every so many seconds.
    pub query_period_s: u64,
    /// The entities' timeout (profile `timeout`), ms: an absent member does not hold a query for CoAP's
    /// 93 s.
    pub timeout_ms: u64,
    /// Seed of the arrival and departure schedule, to which the replicate's number is added: every point
    /// of one replicate sees the same churn (common random numbers across the axes).
    pub schedule_seed: u64,
}

impl Default for ChurnSpec {
    /// Half the devices there at the start, half of all leaving, half of those cleanly; lifetime 300 s;
    /// a query every 30 s with a 5 s entity timeout.
    fn default() -> ChurnSpec {
        ChurnSpec {
            present: 0.5,
            departures: 0.5,
            clean: 0.5,
            vanish: "off".into(),
            lifetime_s: 300,
            query_period_s: 30,
            timeout_ms: 5000,
            schedule_seed: 1,
        }
    }
}

impl ChurnSpec {
    /// The sweep axis of `[churn]`: `lifetime_s`.
    pub const AXES: &'static [&'static str] = &["lifetime_s"];

    pub(super) fn apply_axis(&mut self, axis: &str, v: &AxisValue) -> Result<(), ScenarioError> {
        self.lifetime_s = v.whole(axis)?;
        Ok(())
    }
}

/// What a device that leaves without a word does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vanish {
    /// Its radio goes silent.
    Off,
    /// Its sensors stop answering; its registrant keeps refreshing.
    Mute,
}

/// The resolved `[churn]` of a point.
#[derive(Debug, Clone, PartialEq)]
pub struct ChurnSetup {
    pub present: f64,
    pub departures: f64,
    pub clean: f64,
    pub vanish: Vanish,
    pub lifetime_s: u32,
    pub query_period_s: u64,
    pub timeout_ms: u64,
    /// The schedule's seed: `schedule_seed` + the replicate's number − 1.
    pub schedule_seed: u64,
    /// The member resource (`[entity] resource`).
    pub resource: String,
    /// How long the churn lasts (`workload.duration_s`, or `quick_duration_s`), s.
    pub window_s: u64,
}

impl ChurnSetup {
    pub(super) fn resolve(
        spec: &ChurnSpec,
        resource: &str,
        window_s: u64,
        replicate: u64,
    ) -> Result<ChurnSetup, ScenarioError> {
        let vanish = match spec.vanish.as_str() {
            "off" => Vanish::Off,
            "mute" => Vanish::Mute,
            other => return err(format!("churn.vanish {other:?}: off or mute")),
        };
        Ok(ChurnSetup {
            present: spec.present,
            departures: spec.departures,
            clean: spec.clean,
            vanish,
            lifetime_s: spec.lifetime_s,
            query_period_s: spec.query_period_s,
            timeout_ms: spec.timeout_ms,
            schedule_seed: spec.schedule_seed.wrapping_add(replicate.saturating_sub(1)),
            resource: resource.to_string(),
            window_s,
        })
    }

    /// Checks the shares, the lifetime and the window on a group of `group` devices.
    pub(super) fn validate(&self, group: usize) -> Result<(), ScenarioError> {
        if self.window_s == 0 {
            return err("churn: workload.duration_s (quick_duration_s with --quick) above 0");
        }
        if group > 200 {
            return err(format!("churn: {group} devices; at most 200 around one gateway"));
        }
        Ok(())
    }
}
