//! `[entity]` in a scenario: the entity the client creates through the Entity Manager and then queries
//! (the default family, seed 000), and how the `follow` axis makes it follow the entity instead.

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
