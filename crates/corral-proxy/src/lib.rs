//! # corral-proxy
//!
//! The multiparty CoAP forward proxy of seed 001 (§III, Table I) as a sans-IO [`corral_proto::Service`]:
//! the same code answers behind `corral proxy`'s real sockets and on every simulated forwarder of the lab.
//!
//! A proxied request (RFC 7252 §5.7: Proxy-Uri, or Proxy-Scheme with Uri-*) goes through these steps:
//!
//! 1. **Checks** — the client may use the proxy ([`ProxyConfig::clients`]) and the destination is one it
//!    may make the proxy send to ([`destinations`]: never this host's own addresses for a client from
//!    another host, unless opened; never a broadcast address; 4.03 naming the rule); Hop-Limit (RFC 8768) is
//!    decremented, and a request that has run out is answered 5.08 with this proxy's name (a relayed 5.08
//!    gets the name prepended, so the client reads the loop); an unsafe option the proxy does not know is
//!    5.02; an unparseable Proxy-Uri 4.02, Proxy-Scheme without Uri-Host 4.00, a scheme it cannot reach
//!    5.05, a host name it cannot resolve 5.02 ([`target`]). A multicast group is no destination of its
//!    own: step 6.
//! 2. **Cache** ([`cache`]) — keyed by [`key::cache_key`]; a fresh hit answers at once with Max-Age reduced
//!    by the time the response spent in the cache and nothing goes upstream; a stale entry with an ETag is
//!    revalidated (a 2.03 refreshes it).
//! 3. **Aggregation** — a request whose key is already pending upstream waits for that answer instead of
//!    being forwarded; the same client and token again is a retransmission and is dropped.
//! 4. **FIB** ([`fib`]) — the most specific rule's next hops each get a copy (unsafe methods and
//!    observations only the first); no rule: straight to the origin. A next hop with *send host* keeps the
//!    Proxy-Uri (it is another proxy), otherwise the request is rewritten to Uri-* options.
//! 5. **Fan-out** — the first 2.xx wins (later ones are dropped and counted); if none succeeds, the last
//!    response (or, when none came, the last failure: 5.04 for a timeout, 5.02 for a reset, a malformed
//!    answer or a broken transfer) goes to every waiting client, each with its own token, message type
//!    and message ID — piggybacked, or separate after an empty ACK if the upstream took long (the
//!    endpoint's piggyback window): the seed's hop-wise retransmission.
//!
//! 6. **Groups** (draft-ietf-core-groupcomm-proxy -07) — a target whose host is a multicast address (or
//!    whose FIB rule's first next hop is one) goes out as one NON multicast request, if the operator allowed
//!    the group ([`ProxyConfig::groups`], else 4.03), the client signalled with Multicast-Timeout (else
//!    4.00 naming the option) and proved its address (else an Echo challenge); each member's answer goes
//!    back with Reply-From naming it, up to [`ProxyConfig::max_group_answers`], until the client's timeout.
//!
//! Every table is bounded ([`ProxyConfig`]); a full one is answered 5.03 with Max-Age. Observations are
//! aggregated too: one upstream observation per resource, its notifications relayed to every observer.
//! The proxy's own resources (mounted wherever the node puts the service, `/proxy` in the CLI) are its
//! status and its FIB as JSON, read-only.
//!
//! Mount the service and make it the node's forward proxy:
//! ```
//! use corral_proto::{Endpoint, EndpointConfig, Node};
//! use corral_proxy::{Fib, ProxyConfig, ProxyService};
//! let mut node = Node::new(Endpoint::new(EndpointConfig::with_seed(1)));
//! let h = node.mount("proxy", ProxyService::new(ProxyConfig::default(), Fib::default()));
//! node.set_forward_proxy(h);
//! ```

pub mod cache;
pub mod destinations;
pub mod fib;
pub mod key;
mod proxy;
pub mod stats;
pub mod target;

pub use destinations::Destinations;
pub use fib::{BadPattern, Fib, FibError, NextHop, PatternFault, Rule};
pub use proxy::{ProxyConfig, ProxyService};
pub use stats::{HopStats, Stats};
