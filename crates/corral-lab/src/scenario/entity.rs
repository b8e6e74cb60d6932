//! `[entity]` in a scenario: the entity the client creates through the Entity Manager and then queries
//! (the default family, seed 000), and how the `follow` axis makes it follow the entity instead.

use super::point::AxisValue;
use super::{err, Scenario, ScenarioError};
use serde::{Deserialize, Serialize};

/// The entity the client creates through the EM and then queries.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct EntitySpec {
    /// `unicast` or `multicast` (the `mode` axis overrides it).
    pub ect: String,
    /// `con` or `non` for unicast entities (multicast is always NON).
    pub emt: String,
    /// Delay between member requests, ms, or "auto" (Eq. (2)).
    pub delay: toml::Value,
    /// Member resource path.
    pub resource: String,
    /// Entity timeout (ms), if any.
    pub timeout_ms: Option<u64>,
    /// `single`: one entity of all members on the first gateway; `nested`: one child entity per gateway
    /// and a parent entity on the first gateway whose members are the children (seed 000 Fig. 13).
    pub layout: String,
    /// Delay between the parent's requests to its child entities, ms.
    pub parent_delay_ms: u64,
    /// How far a member's reading must move before its observable sensor notifies, in the unit of
    /// `resource` (°C for `s/t`); unset: corral-group's step (0.2 °C, 1 %RH, 10 lx). Only points of the
    /// `follow` axis that observe use it, so a scenario that sets it must observe.
    pub notify_step: Option<f64>,
}

impl Default for EntitySpec {
    /// A unicast CON entity of every member's temperature, no delay between member requests, on one gateway.
    fn default() -> EntitySpec {
        EntitySpec {
            ect: "unicast".into(),
            emt: "con".into(),
            delay: toml::Value::Integer(0),
            resource: "s/t".into(),
            timeout_ms: None,
            layout: "single".into(),
            parent_delay_ms: 0,
            notify_step: None,
        }
    }
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

/// `[entity]` for one point: the section with the entity family's axes applied, and how the client follows
/// the entity (the `follow` axis).
#[derive(Debug, Clone)]
pub struct EntityPoint {
    pub spec: EntitySpec,
    pub follow: Option<Follow>,
}

impl EntityPoint {
    /// The sweep axes of the entity family: `layout` and `mode` (`ect`) set the entity's shape, `delay` its
    /// profile's delay, `follow` how the client uses it.
    pub const AXES: &'static [&'static str] = &["layout", "mode", "delay", "follow"];

    pub(super) fn apply_axis(&mut self, axis: &str, v: &AxisValue) -> Result<(), ScenarioError> {
        match axis {
            "layout" => self.spec.layout = v.to_string(),
            "mode" => self.spec.ect = v.to_string(),
            "delay" => {
                self.spec.delay = match v {
                    AxisValue::Num(_) => toml::Value::Integer(v.whole::<i64>(axis)?),
                    AxisValue::Text(t) => toml::Value::String(t.clone()),
                }
            }
            _ => {
                self.follow = Some(match v {
                    AxisValue::Text(t) if t == "observe" => Follow::Observe,
                    AxisValue::Num(x) if *x > 0.0 => Follow::Poll { period_ms: (x * 1000.0).round() as u64 },
                    other => return err(format!("sweep.follow: {other} is not \"observe\" or a period in s > 0")),
                })
            }
        }
        Ok(())
    }

    /// The point's entity: its shape, profile and how the client uses it, checked against the network.
    pub(super) fn resolve(
        self,
        s: &Scenario,
        gateways: usize,
        queries: Queries,
        window_s: u64,
    ) -> Result<EntitySetup, ScenarioError> {
        let e = &self.spec;
        let (multicast, repair) = match e.ect.as_str() {
            "unicast" => (false, false),
            "multicast" => (true, false),
            "multicast+repair" => (true, true),
            other => return err(format!("entity.ect / mode: {other:?} is not unicast, multicast or multicast+repair")),
        };
        let confirmable = match e.emt.as_str() {
            "con" => true,
            "non" => false,
            other => return err(format!("entity.emt: {other:?} is not con or non")),
        } && !multicast;
        let delay_ms = match &e.delay {
            toml::Value::Integer(d) if *d >= 0 => Some(*d as u64),
            toml::Value::String(a) if a == "auto" => None,
            other => return err(format!("entity.delay / delay: {other} is not a number of ms or \"auto\"")),
        };
        let nested = match e.layout.as_str() {
            "single" => false,
            "nested" => true,
            other => return err(format!("entity.layout / layout: {other:?} is not single or nested")),
        };
        if nested && (gateways < 2 || multicast) {
            return err("layout = nested needs network.gateways ≥ 2 and unicast child entities");
        }
        if self.follow.is_some() && (multicast || nested || window_s == 0) {
            return err("follow: a unicast single entity and workload.duration_s > 0");
        }
        let notify_step = match e.notify_step {
            Some(_) if corral_group::device::Quantity::at(&e.resource).is_none() => {
                return err(format!(
                    "entity.notify_step: entity.resource {:?} is no sensor (s/t, s/h, s/l)",
                    e.resource
                ));
            }
            Some(_) if !s.observes() => {
                return err("entity.notify_step: only observing members notify; add \"observe\" to sweep.follow");
            }
            step => step.filter(|_| self.follow == Some(Follow::Observe)),
        };
        Ok(EntitySetup {
            queries,
            multicast,
            repair,
            confirmable,
            delay_ms,
            resource: e.resource.clone(),
            timeout_ms: e.timeout_ms,
            nested,
            parent_delay_ms: e.parent_delay_ms,
            follow: self.follow,
            window_s,
            notify_step,
        })
    }

    /// Whether the entity is the one other families assume of `[entity]`: one unicast entity on the first
    /// gateway (the proxy and churn families read only its resource).
    pub(super) fn is_single_unicast(spec: &EntitySpec) -> bool {
        spec.ect == "unicast" && spec.layout == "single"
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
