//! What the proxy counts, served as JSON at its status resource and described as metrics
//! ([`Stats::describe`]).

use corral_proto::{Metric, MetricSink};
use serde::Serialize;
use std::collections::BTreeMap;

/// Counters of one next hop (or `origin` for requests no FIB rule covers).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HopStats {
    /// Requests sent to it.
    pub requests: u64,
    /// Responses received (of any code).
    pub responses: u64,
    /// Requests that ended without a response (timeout, reset, closed connection, malformed answer).
    pub failures: u64,
    /// Its response was the one forwarded to the clients.
    pub wins: u64,
    /// Its response came after another hop's had been forwarded, and was dropped.
    pub duplicates: u64,
}

/// The proxy's counters. Every proxied request is exactly one of: a cache hit, a miss forwarded upstream,
/// an aggregation onto a pending request, a retransmission, or refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Proxied requests received (retransmissions included).
    pub requests: u64,
    /// Requests to the proxy's own resources.
    pub local: u64,
    /// Answered from the cache, with no upstream traffic.
    pub hits: u64,
    /// Forwarded upstream (including revalidations).
    pub misses: u64,
    /// Stale entries revalidated with their ETag.
    pub revalidations: u64,
    /// A 2.03 Valid refreshed a stale entry.
    pub refreshed: u64,
    /// Attached to a pending request with the same cache key instead of being forwarded.
    pub aggregated: u64,
    /// The same client and token again while the request is pending: recognised and not forwarded.
    pub retransmissions: u64,
    /// Requests sent upstream (one per next hop).
    pub upstream_requests: u64,
    /// Later responses of a multi-destination request, dropped.
    pub duplicates_dropped: u64,
    /// Answered with an error before forwarding (bad proxy options, unknown host, forbidden client, …).
    pub refused: u64,
    /// Answered 5.03 because a bound was reached (pending requests, waiters, observations, exchanges).
    pub overloaded: u64,
    /// Answered 5.08: the Hop-Limit ran out.
    pub hop_limit_reached: u64,
    /// Answered 5.04 / 5.02 because every next hop failed.
    pub gateway_timeouts: u64,
    pub bad_gateways: u64,
    /// Upstream observations started, and notifications relayed from them.
    pub observations: u64,
    pub notifications: u64,
    /// Multicast requests sent for clients' group requests (one per group request not aggregated).
    pub group_requests: u64,
    /// Members' answers relayed (each once, to every client waiting for it).
    pub group_answers: u64,
    /// Members' answers beyond the fan-out budget, dropped.
    pub group_answers_dropped: u64,
    /// Group requests from clients that had not proved their address, answered with an Echo challenge.
    pub group_challenges: u64,
    /// Members' cached answers relayed for a group request (draft-ietf-core-groupcomm-proxy §7.1).
    pub group_cache_hits: u64,
    /// Members' answers relayed but not cached: from an address not known as a member of the group.
    pub group_answers_untrusted: u64,
    /// Cached members' answers a member's 2.03 Valid refreshed (the proxy's ETags, §7.2.2).
    pub group_revalidated: u64,
    pub per_hop: BTreeMap<String, HopStats>,
}

impl Stats {
    /// The proxy's counters as metrics (`docs/metrics.md`, "The proxy"), the next hops' labelled
    /// `next_hop`.
    pub fn describe(&self, out: &mut MetricSink<'_>) {
        let c = Metric::counter;
        out(c("proxy_requests", "proxied requests received", self.requests));
        out(c("proxy_cache_hits", "requests answered from the cache", self.hits));
        out(c("proxy_cache_misses", "requests forwarded upstream", self.misses));
        out(c("proxy_aggregated", "requests attached to an identical pending one", self.aggregated));
        out(c("proxy_refused", "requests refused before forwarding", self.refused));
        out(c("proxy_overloaded", "requests refused with 5.03 at a bound", self.overloaded));
        let upstream = |v| c("proxy_upstream_requests", "requests sent to each next hop", v);
        out(upstream(0).announced());
        for (hop, h) in &self.per_hop {
            out(upstream(h.requests).labelled(&[("next_hop", hop.as_str())]));
        }
    }
}
