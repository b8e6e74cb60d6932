//! [`ProxyService`]: the forward proxy as a [`Service`]. Intake (checks, cache, aggregation) lives here;
//! forwarding and the fan-out of responses in `forward`; observations in `observe`; requests for a
//! multicast group in `group`, the cache of their answers in `group_cache`; FIB rules whose next hops follow a Resource Directory in `directory`.

mod directory;
mod forward;
mod group;
mod group_cache;
mod group_waiter;
mod observe;

use crate::cache::{Cache, Lookup};
use crate::destinations::Destinations;
use crate::fib::Fib;
use crate::key::{cache_key, Key};
use crate::stats::Stats;
use crate::target::{requested_uri, Refusal};
use corral_proto::wire::{Code, ContentFormat, OptionNumber, Token};
use corral_proto::{
    canonical, Context, Duration, InboundId, IncomingRequest, Instant, Outcome, Prefix, Request, RequestId,
    ResourceLink, Response, Service,
};
use forward::{Pending, Upstream};
use observe::Observations;
use serde::Serialize;
use std::collections::HashMap;
use std::net::SocketAddr;

/// How a proxy behaves and what bounds its memory.
#[derive(Debug, Clone, PartialEq)]
pub struct ProxyConfig {
    /// How the proxy names itself in a 5.08 Hop Limit Reached diagnostic (RFC 8768 §3).
    pub name: String,
    /// Cache bounds: entries (seed 001 used 40) and bytes (keys, options and payloads).
    pub cache_entries: usize,
    pub cache_bytes: usize,
    /// Distinct requests waiting for an upstream answer.
    pub max_pending: usize,
    /// Clients attached to one pending request.
    pub max_waiters: usize,
    /// Upstream observations held at once.
    pub max_observations: usize,
    /// Send upstream requests as CON (hop-wise retransmission, the seed's setting) or NON.
    pub upstream_confirmable: bool,
    /// Give up on a next hop after this long (default: the endpoint's, MAX_TRANSMIT_WAIT for a CON).
    pub upstream_timeout: Option<Duration>,
    /// The Hop-Limit a request without one is taken to have arrived with (RFC 8768: 16).
    pub hop_limit: u8,
    /// Max-Age of a 5.03 answered when a bound is reached: when to try again.
    pub overload_max_age: u32,
    /// Attach a request to an identical pending one (seed 001's request aggregation). Off, every request
    /// is forwarded on its own: a plain forward proxy (libcoap's, Californium's), for comparison.
    pub aggregate: bool,
    /// Who may use the proxy (empty: anyone). A forward proxy is a relay by design; the CLI admits only
    /// this machine unless told otherwise.
    pub clients: Vec<Prefix>,
    /// Where those clients may make it send ([`crate::destinations`]; the default refuses only broadcast
    /// and multicast).
    pub destinations: Destinations,
    /// Multicast groups a client may reach with one request (draft-ietf-core-groupcomm-proxy); empty: none,
    /// a group target is refused 4.03.
    pub groups: Vec<Prefix>,
    /// The longest a group request collects answers, whatever Multicast-Timeout the client asks for.
    pub max_group_timeout: Duration,
    /// Members' answers relayed per group request (the fan-out budget); later ones are dropped and counted.
    pub max_group_answers: usize,
    /// Group requests collecting answers at once.
    pub max_group_exchanges: usize,
    /// Bounds of the cache of members' answers to group requests (one entry per member and request;
    /// draft-ietf-core-groupcomm-proxy §7): entries and bytes.
    pub group_cache_entries: usize,
    pub group_cache_bytes: usize,
    /// The longest a member's answer stays in that cache, whatever Max-Age it came with (seconds).
    pub group_cache_max_age: u32,
    /// Where the operator says the groups' members are: an answer from there is cached from the first
    /// (`group_cache`, "What the cache trusts"); an answer from elsewhere only once its address answered an
    /// earlier request to the group.
    pub group_members: Vec<Prefix>,
    /// The addresses the driver reaches over DTLS (credentials it holds): a `coaps://` origin elsewhere
    /// is refused (5.05), since the proxy would otherwise send it plain CoAP.
    pub dtls_peers: Vec<std::net::SocketAddr>,
    /// The Resource Directory whose lookups the FIB's `rd:` rules follow (RFC 9176; its `/rd-lookup/res`).
    pub rd: Option<SocketAddr>,
    /// Next hops of one `rd:` rule at most; a larger lookup result is cut (WARN).
    pub max_rd_next_hops: usize,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            name: "corral-proxy".into(),
            cache_entries: 40,
            cache_bytes: 1 << 20,
            max_pending: 1024,
            max_waiters: 64,
            max_observations: 256,
            upstream_confirmable: true,
            upstream_timeout: None,
            hop_limit: 16,
            overload_max_age: 2,
            aggregate: true,
            clients: Vec::new(),
            destinations: Destinations::default(),
            groups: Vec::new(),
            max_group_timeout: Duration::from_secs(60),
            max_group_answers: 64,
            max_group_exchanges: 16,
            group_cache_entries: 256,
            group_cache_bytes: 1 << 20,
            group_cache_max_age: crate::cache::DEFAULT_MAX_AGE,
            group_members: Vec::new(),
            dtls_peers: Vec::new(),
            rd: None,
            max_rd_next_hops: 32,
        }
    }
}

/// A client waiting for the answer to a request: everything needed to answer it with its own token.
#[derive(Debug, Clone)]
struct Waiter {
    id: InboundId,
    from: SocketAddr,
    token: Token,
    /// ETags the client already has (RFC 7252 §5.10.6.2): a matching 2.05 becomes a 2.03 for it.
    etags: Vec<Vec<u8>>,
}

impl Waiter {
    fn of(req: &IncomingRequest) -> Waiter {
        Waiter {
            id: req.id,
            from: req.from,
            token: req.token,
            etags: req.request.options.get_all(OptionNumber::ETAG).map(<[u8]>::to_vec).collect(),
        }
    }

    /// The response this client gets: a 2.05 whose ETag it already holds becomes a 2.03 Valid.
    fn answer(&self, response: &Response) -> Response {
        if response.code == Code::CONTENT {
            if let Some(etag) = response.options.get(OptionNumber::ETAG).filter(|e| self.etags.iter().any(|m| m == e)) {
                let mut valid = Response::new(Code::VALID).with_option(OptionNumber::ETAG, etag);
                if let Some(age) = response.options.max_age() {
                    valid = valid.with_max_age(age);
                }
                return valid;
            }
        }
        response.clone()
    }
}

/// The multiparty forward proxy. See the crate docs.
pub struct ProxyService {
    config: ProxyConfig,
    fib: Fib,
    cache: Cache,
    /// Members' answers to group requests.
    group_cache: Cache,
    /// The members heard answering each group: whose answers that cache may keep.
    known_members: group_cache::KnownMembers,
    stats: Stats,
    pending: HashMap<Key, Pending, foldhash::fast::FixedState>,
    upstream: HashMap<RequestId, Upstream, foldhash::fast::FixedState>,
    /// (client, token) of every waiter: a second request with both is a retransmission.
    by_client: HashMap<(SocketAddr, Token), Key, foldhash::fast::FixedState>,
    observations: Observations,
    groups: group::Groups,
    /// The FIB rules that follow the directory.
    rd: directory::RdRules,
    /// Distinguishes successive pending requests for one key, and unsafe requests from each other.
    seq: u64,
}

fn table<K, V>() -> HashMap<K, V, foldhash::fast::FixedState> {
    HashMap::with_hasher(foldhash::fast::FixedState::with_seed(0))
}

impl ProxyService {
    pub fn new(config: ProxyConfig, fib: Fib) -> ProxyService {
        ProxyService {
            rd: directory::RdRules::of(&fib, config.rd.is_some()),
            cache: Cache::new(config.cache_entries, config.cache_bytes),
            group_cache: Cache::new(config.group_cache_entries, config.group_cache_bytes),
            known_members: group_cache::KnownMembers::default(),
            config,
            fib,
            stats: Stats::default(),
            pending: table(),
            upstream: table(),
            by_client: table(),
            observations: Observations::default(),
            groups: group::Groups::default(),
            seq: 0,
        }
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    pub fn fib(&self) -> &Fib {
        &self.fib
    }

    pub fn config(&self) -> &ProxyConfig {
        &self.config
    }

    /// Bytes the cache holds (the responses' payloads and options).
    pub fn cache_bytes(&self) -> usize {
        self.cache.bytes()
    }

    /// Entries and bytes of the cache of members' answers to group requests.
    pub fn group_cache_occupancy(&self) -> (usize, usize) {
        (self.group_cache.len(), self.group_cache.bytes())
    }

    /// Entries in the cache, requests pending upstream, observations held.
    pub fn occupancy(&self) -> (usize, usize, usize) {
        (self.cache.len(), self.pending.len(), self.observations.len())
    }

    fn refuse(&mut self, cx: &mut Context<'_>, id: InboundId, refusal: Refusal) {
        self.stats.refused += 1;
        tracing::debug!(code = %refusal.code, why = %refusal.diagnostic, "proxied request refused");
        cx.respond(id, refusal.response());
    }

    fn overloaded(&mut self, cx: &mut Context<'_>, id: InboundId, why: &str) {
        self.stats.overloaded += 1;
        tracing::warn!(why, "proxy bound reached; answering 5.03");
        let r = Response::error(Code::SERVICE_UNAVAILABLE, format!("proxy busy: {why}; try again later"))
            .with_max_age(self.config.overload_max_age);
        cx.respond(id, r);
    }

    /// The Hop-Limit to send upstream, or the answer that ends the request here (RFC 8768 §3).
    fn hop_limit(&mut self, request: &Request) -> Result<u8, Refusal> {
        let received = match request.options.get(OptionNumber::HOP_LIMIT) {
            None => self.config.hop_limit,
            Some(v) => match corral_proto::wire::decode_uint(v).and_then(|h| u8::try_from(h).ok()) {
                Some(0) | None => return Err(Refusal::new(Code::BAD_REQUEST, "Hop-Limit must be 1 to 255")),
                Some(h) => h,
            },
        };
        if received <= 1 {
            self.stats.hop_limit_reached += 1;
            return Err(Refusal::new(Code::HOP_LIMIT_REACHED, self.config.name.clone()));
        }
        Ok(received - 1)
    }

    /// A proxied request, before any upstream traffic: the checks, the cache, aggregation.
    fn intake(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        self.stats.requests += 1;
        if !self.config.clients.is_empty() && !self.config.clients.iter().any(|p| p.contains(canonical(req.from.ip())))
        {
            let r = Refusal::new(Code::FORBIDDEN, format!("{} may not use this proxy", req.from.ip()));
            return self.refuse(cx, req.id, r);
        }
        if req.multicast {
            // A proxy is asked one at a time; nothing is answered to a multicast request (RFC 7252 §8.2).
            return self.refuse(cx, req.id, Refusal::new(Code::PROXYING_NOT_SUPPORTED, "not over multicast"));
        }
        let hops = match self.hop_limit(&req.request) {
            Ok(h) => h,
            Err(r) => return self.refuse(cx, req.id, r),
        };
        // RFC 7252 §5.7.1: an unsafe option the proxy does not understand cannot be forwarded.
        if let Some((n, _)) = req.request.options.iter().find(|(n, _)| n.is_unsafe() && !forwardable(*n)) {
            let r = Refusal::new(Code::BAD_GATEWAY, format!("cannot forward unsafe option {}", n.0));
            return self.refuse(cx, req.id, r);
        }
        let target = match requested_uri(&req.request) {
            Ok(t) => t,
            Err(r) => return self.refuse(cx, req.id, r),
        };
        if let Some(group) = self.group_of(&target) {
            return self.group_request(cx, req, target, group, hops);
        }
        // Before the cache and aggregation too: a client must not get through them what it may not fetch.
        if let Err(r) = self.may_send(&target, req.from) {
            return self.refuse(cx, req.id, r);
        }
        let safe = req.request.method.is_cacheable_method();
        let ident = cache_key(&req.request, &target);
        let key = if safe {
            ident.clone()
        } else {
            // Never aggregated: each unsafe request has effects of its own.
            self.seq += 1;
            Key(self.seq.to_be_bytes().to_vec())
        };
        if let Some(k) = self.by_client.get(&(req.from, req.token)) {
            if *k == ident {
                self.stats.retransmissions += 1;
                tracing::debug!(from = %req.from, "retransmission of a pending proxied request");
                return cx.discard(req.id);
            }
        }
        if safe && req.request.options.observe() == Some(corral_proto::wire::OBSERVE_REGISTER) {
            return self.observe(cx, req, target, key, hops);
        }
        let mut revalidate = None;
        if safe {
            match self.cache.lookup(&key, cx.now()) {
                Lookup::Fresh(r) => {
                    self.stats.hits += 1;
                    return cx.respond(req.id, Waiter::of(&req).answer(&r));
                }
                Lookup::Stale { etag } => revalidate = Some(etag),
                Lookup::Miss => {}
            }
        }
        let mut pending_key = key.clone();
        if !self.config.aggregate || self.pending.get(&key).is_some_and(|p| p.hops.contains(&req.from)) {
            // Aggregation is off, or this is our own request for the resource back from one of its next
            // hops: a forwarding loop.
            // Aggregating it would make the two proxies wait for each other until they time out; forwarded
            // on its own, its Hop-Limit runs out and the loop ends in a 5.08 that names every proxy on it.
            self.seq += 1;
            pending_key.0.extend_from_slice(&self.seq.to_be_bytes());
        }
        if let Some(p) = self.pending.get_mut(&pending_key) {
            if p.waiters.len() >= self.config.max_waiters {
                return self.overloaded(cx, req.id, "too many clients waiting for this resource");
            }
            self.stats.aggregated += 1;
            self.by_client.insert((req.from, req.token), ident);
            p.waiters.push(Waiter::of(&req));
            return;
        }
        if self.pending.len() >= self.config.max_pending {
            return self.overloaded(cx, req.id, "too many requests pending upstream");
        }
        self.stats.misses += 1;
        if revalidate.is_some() {
            self.stats.revalidations += 1;
        }
        self.forward(cx, req, forward::Ask { target, key: pending_key, ident, hops_left: hops, revalidate });
    }

    /// The destination policy for a request from `from`: one that no FIB rule takes goes to the address
    /// in its URI, which the client chose (a rule's next hops are the operator's).
    fn may_send(&self, target: &corral_proto::wire::uri::Uri, from: SocketAddr) -> Result<(), Refusal> {
        if self.fib.lookup(target).is_some() {
            return Ok(());
        }
        let addr = self.fib.hosts.address(target)?;
        self.config.destinations.check(from.ip(), addr)
    }

    /// The proxy's own resources: the status and the FIB, read-only.
    fn serve_local(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        self.stats.local += 1;
        let sub = cx.subpath(&req.request);
        let body = match sub.as_slice() {
            [] => serde_json::to_vec_pretty(&Status {
                name: &self.config.name,
                stats: &self.stats,
                cache: CacheStatus {
                    entries: self.cache.len(),
                    bytes: self.cache.bytes(),
                    max_entries: self.config.cache_entries,
                    max_bytes: self.config.cache_bytes,
                },
                group_cache: CacheStatus {
                    entries: self.group_cache.len(),
                    bytes: self.group_cache.bytes(),
                    max_entries: self.config.group_cache_entries,
                    max_bytes: self.config.group_cache_bytes,
                },
                pending: self.pending.len(),
                observations: self.observations.len(),
                groups: self.groups.len(),
                directory: self.rd_status(),
            }),
            [c] if c == "cache" => return self.serve_cache(cx, req),
            [f] if f == "fib" => serde_json::to_vec_pretty(&FibStatus {
                hosts: self.fib.hosts.0.iter().map(|(k, v)| (k.clone(), v.to_string())).collect(),
                rules: &self.fib.rules,
                destinations: DestinationStatus::of(&self.config.destinations),
            }),
            _ => {
                let path = req.request.options.path();
                return cx.respond(req.id, Response::error(Code::NOT_FOUND, format!("no resource at {path}")));
            }
        };
        let r = if req.request.method != Code::GET {
            Response::error(Code::METHOD_NOT_ALLOWED, "the proxy's resources are read-only; use GET")
        } else {
            match body {
                Ok(b) => Response::content(ContentFormat::JSON, b).with_max_age(0),
                Err(e) => Response::error(Code::INTERNAL_SERVER_ERROR, e.to_string()),
            }
        };
        cx.respond(req.id, r);
    }

    /// `/proxy/cache`: what the cache holds (GET: the [`CACHE_LISTED`] most recently used entries) and a
    /// purge (DELETE). This machine only: the listing names what other clients asked for, and a purge
    /// from anywhere would let anyone send every request upstream again.
    fn serve_cache(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        let r = if !req.from.ip().to_canonical().is_loopback() {
            Response::error(Code::FORBIDDEN, "the cache is listed and purged from this machine only")
        } else if req.request.method == Code::GET {
            let listing = CacheListing {
                entries: self.cache.len(),
                bytes: self.cache.bytes(),
                listed: self.cache.listing(cx.now(), CACHE_LISTED),
            };
            match serde_json::to_vec_pretty(&listing) {
                Ok(b) => Response::content(ContentFormat::JSON, b).with_max_age(0),
                Err(e) => Response::error(Code::INTERNAL_SERVER_ERROR, e.to_string()),
            }
        } else if req.request.method == Code::DELETE {
            let n = self.cache.clear() + self.group_cache.clear();
            tracing::info!(entries = n, "the cache was purged");
            Response::new(Code::DELETED)
        } else {
            Response::error(Code::METHOD_NOT_ALLOWED, "GET lists the cache, DELETE purges it")
        };
        cx.respond(req.id, r);
    }
}

/// Entries `GET /proxy/cache` lists at most (the most recently used).
pub const CACHE_LISTED: usize = 256;

#[derive(Serialize)]
struct CacheListing {
    entries: usize,
    bytes: usize,
    listed: Vec<crate::cache::Listed>,
}

/// Unsafe options the proxy may pass on: every option corral knows (OSCORE, Echo and Request-Tag among
/// them, whose meaning for proxies RFC 8613 and RFC 9175 define). An unknown one it cannot.
fn forwardable(n: OptionNumber) -> bool {
    n.def().is_some()
}

#[derive(Serialize)]
struct CacheStatus {
    entries: usize,
    bytes: usize,
    max_entries: usize,
    max_bytes: usize,
}

#[derive(Serialize)]
struct Status<'a> {
    name: &'a str,
    stats: &'a Stats,
    cache: CacheStatus,
    /// Members' answers to group requests.
    group_cache: CacheStatus,
    pending: usize,
    observations: usize,
    /// Group requests collecting answers.
    groups: usize,
    /// The FIB rules whose next hops follow the directory, with their current next hops.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    directory: Vec<directory::RdRuleStatus>,
}

#[derive(Serialize)]
struct FibStatus<'a> {
    hosts: std::collections::BTreeMap<String, String>,
    rules: &'a [crate::fib::Rule],
    destinations: DestinationStatus,
}

/// The destination rules as clients may read them (not this host's addresses).
#[derive(Serialize)]
struct DestinationStatus {
    networks: Vec<String>,
    ports: Vec<u16>,
    this_host: bool,
}

impl DestinationStatus {
    fn of(d: &Destinations) -> DestinationStatus {
        DestinationStatus {
            networks: d.networks.iter().map(Prefix::to_string).collect(),
            ports: d.ports.clone(),
            this_host: d.this_host_open,
        }
    }
}

impl Service for ProxyService {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        if !req.request.is_proxied() {
            return self.serve_local(cx, req);
        }
        if req.notification {
            return self.render_notification(cx, req);
        }
        self.intake(cx, req);
    }

    fn handle_response(&mut self, cx: &mut Context<'_>, id: RequestId, outcome: Outcome) {
        if self.observations.owns(id) {
            return self.on_observation(cx, id, outcome);
        }
        if self.groups.owns(id) {
            return self.on_group(cx, id, outcome);
        }
        if self.rd.owns(id) {
            return self.on_rd(cx, id, outcome);
        }
        self.on_upstream(cx, id, outcome);
    }

    fn observer_gone(&mut self, cx: &mut Context<'_>, path: &str, _peer: SocketAddr, _token: Token) {
        self.observer_left(cx, path);
    }

    fn handle_timeout(&mut self, cx: &mut Context<'_>) {
        self.observations.expire(cx.now());
        self.group_due(cx);
        if !self.rd.is_empty() {
            self.rd_due(cx);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let due = [self.observations.next_expiry(), self.rd.next_wake(), self.groups.next_flush()];
        due.into_iter().flatten().min()
    }

    fn links(&self) -> Vec<ResourceLink> {
        vec![
            ResourceLink::new("").attr("rt", "corral.proxy").attr("ct", "50").attr("title", "forward proxy status"),
            ResourceLink::new("fib").attr("rt", "corral.proxy.fib").attr("ct", "50"),
            ResourceLink::new("cache").attr("rt", "corral.proxy.cache").attr("ct", "50"),
        ]
    }
}
