//! `[proxy]` in a scenario: forwarders running corral-proxy, their FIBs, and the consumers asking through
//! them (run by `crate::family::proxy`).

use super::point::AxisValue;
use super::{err, ScenarioError};
use serde::{Deserialize, Serialize};

/// `[proxy]`: the gateway runs corral-proxy (seed 001's forwarder) with a FIB that sends each member's
/// URIs to that member; `consumers` requests for one member's resource leave the host at once, per
/// repetition (member = repetition mod group). The `forwarding` axis picks what the gateway does:
/// `direct` (no proxy: the consumers ask the member themselves), `proxy` (a plain forward proxy, no cache,
/// no aggregation), `aggregate` (request aggregation only), `cache` (aggregation and the cache).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProxySpec {
    pub consumers: usize,
    pub cache_entries: usize,
    pub forwarding: String,
    /// Nodes that run the proxy: `gateway` or `member:N` (the N-th member, 0-based). The consumers send
    /// to the first.
    pub forwarders: Vec<String>,
    /// FIB rules (`[[proxy.rule]]`), each held by one forwarder (`at`); a next hop is `gateway` or
    /// `member:N`, reached at its CoAP port. A forwarder without a rule for a URI sends it to the origin.
    pub rule: Vec<ProxyRuleSpec>,
}

impl Default for ProxySpec {
    /// One consumer, through a caching proxy (40 entries, seed 001's) on the gateway, no FIB rules.
    fn default() -> ProxySpec {
        ProxySpec {
            consumers: 1,
            cache_entries: 40,
            forwarding: "cache".into(),
            forwarders: vec!["gateway".into()],
            rule: Vec::new(),
        }
    }
}

impl ProxySpec {
    /// The sweep axes of `[proxy]`: `forwarding` and `consumers`.
    pub const AXES: &'static [&'static str] = &["forwarding", "consumers"];

    pub(super) fn apply_axis(&mut self, axis: &str, v: &AxisValue) -> Result<(), ScenarioError> {
        match axis {
            "forwarding" => self.forwarding = v.to_string(),
            _ => self.consumers = v.whole(axis)?,
        }
        Ok(())
    }
}

/// One FIB rule of a simulated forwarder.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyRuleSpec {
    pub at: String,
    #[serde(rename = "match")]
    pub pattern: String,
    pub next: Vec<String>,
    /// Keep the Proxy-Uri (the next hop is another forwarder; the default) or rewrite for the origin.
    #[serde(default = "keep_proxy_uri")]
    pub send_host: bool,
}

/// A next hop is another forwarder unless the rule says otherwise.
fn keep_proxy_uri() -> bool {
    true
}

/// What the gateway's proxy does (the `forwarding` axis, see [`ProxySpec`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forwarding {
    Direct,
    Proxy,
    Aggregate,
    Cache,
}

impl Forwarding {
    pub(super) fn parse(s: &str) -> Result<Forwarding, ScenarioError> {
        Ok(match s {
            "direct" => Forwarding::Direct,
            "proxy" => Forwarding::Proxy,
            "aggregate" => Forwarding::Aggregate,
            "cache" => Forwarding::Cache,
            other => return err(format!("forwarding {other:?}: direct, proxy, aggregate or cache")),
        })
    }
}
