//! `[proxy]` in a scenario: forwarders running corral-proxy, their FIBs, and the consumers asking through
//! them (run by `crate::forwarder`).

use super::{err, ScenarioError, Setup};
use serde::{Deserialize, Serialize};

/// `[proxy]`: the gateway runs corral-proxy (seed 001's forwarder) with a FIB that sends each member's
/// URIs to that member; `consumers` requests for one member's resource leave the host at once, per
/// repetition (member = repetition mod group). The `forwarding` axis picks what the gateway does:
/// `direct` (no proxy: the consumers ask the member themselves), `proxy` (a plain forward proxy, no cache,
/// no aggregation), `aggregate` (request aggregation only), `cache` (aggregation and the cache).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProxySpec {
    #[serde(default = "super::one")]
    pub consumers: usize,
    #[serde(default = "forty")]
    pub cache_entries: usize,
    #[serde(default = "default_forwarding")]
    pub forwarding: String,
    /// Nodes that run the proxy: `gateway` or `member:N` (the N-th member, 0-based). The consumers send
    /// to the first.
    #[serde(default = "gateway_only")]
    pub forwarders: Vec<String>,
    /// FIB rules (`[[proxy.rule]]`), each held by one forwarder (`at`); a next hop is `gateway` or
    /// `member:N`, reached at its CoAP port. A forwarder without a rule for a URI sends it to the origin.
    #[serde(default)]
    pub rule: Vec<ProxyRuleSpec>,
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
    #[serde(default = "yes")]
    pub send_host: bool,
}

fn gateway_only() -> Vec<String> {
    vec!["gateway".into()]
}

fn yes() -> bool {
    true
}

fn forty() -> usize {
    40
}

fn default_forwarding() -> String {
    "cache".into()
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

/// The resolved `[proxy]` of a point.
#[derive(Debug, Clone, PartialEq)]
pub struct ForwardingSetup {
    pub mode: Forwarding,
    pub consumers: usize,
    pub cache_entries: usize,
    pub forwarders: Vec<String>,
    pub rules: Vec<ProxyRuleSpec>,
}

impl ForwardingSetup {
    pub(super) fn validate(&self, s: &Setup) -> Result<(), ScenarioError> {
        if !(1..=256).contains(&self.consumers) {
            return err(format!("proxy.consumers {}: between 1 and 256", self.consumers));
        }
        if self.forwarders.is_empty() {
            return err("proxy.forwarders: at least one (\"gateway\" or \"member:N\")");
        }
        for name in self.forwarders.iter().chain(self.rules.iter().flat_map(|r| r.next.iter().chain([&r.at]))) {
            match name.as_str() {
                "gateway" => {}
                m => match m.strip_prefix("member:").and_then(|n| n.parse::<usize>().ok()) {
                    Some(n) if n < s.group => {}
                    _ => {
                        return err(format!("proxy: {name:?} is not \"gateway\" or \"member:N\" with N < {}", s.group))
                    }
                },
            }
        }
        for r in &self.rules {
            if !self.forwarders.contains(&r.at) {
                return err(format!("proxy.rule at {:?}: not one of proxy.forwarders", r.at));
            }
        }
        if s.nested || s.multicast || s.follow.is_some() {
            return err("[proxy]: a single unicast layout without follow");
        }
        Ok(())
    }
}
