//! Group requests (draft-ietf-core-groupcomm-proxy, revision -07; the options in
//! [`corral_proto::wire::reply_from`]): a client's one unicast request whose target is a multicast group
//! goes out as ONE NON multicast request. The endpoint collects the members' answers for the client's
//! Multicast-Timeout, as it does for any multicast request ([`SendParams::multicast_window`]); each answer
//! goes back to every client waiting for it as a response of its own, with Reply-From naming the member:
//! the first over the client's exchange, the later ones as separate NON responses with the same token
//! (§5.4.1).
//!
//! Owns: the group exchanges in flight and their waiting clients. Must never: send to a group the
//! operator did not allow ([`ProxyConfig::groups`]), to a client that did not ask for several answers
//! (no Multicast-Timeout: 4.00 naming the option, §5.2.1), or to one that has not proved its address (an
//! Echo challenge first: a spoofed request must not turn the proxy and the group into a reflector); relay
//! more than [`ProxyConfig::max_group_answers`] answers per request, or hold more than
//! [`ProxyConfig::max_group_exchanges`] group exchanges.
//!
//! The same request from another client while one is collecting is attached to it (aggregation): it gets
//! the answers collected so far at once and the later ones as they come, until its own timeout or the
//! first request's window ends, whichever is first. Members' answers are cached, and a later request
//! gets them as the draft's §7 says: `group_cache`.

use super::group_waiter::GroupWaiter;
use super::{group_cache, ProxyConfig, ProxyService};
use crate::key::Key;
use crate::target::Refusal;
use corral_proto::wire::uri::{Scheme, Uri};
use corral_proto::wire::{decode_uint, encode_reply_from, Code, OptionNumber};
use corral_proto::{canonical, Context, Duration, IncomingRequest, Instant, Outcome, RequestId, Response, SendParams};
use std::collections::HashMap;
use std::net::SocketAddr;

/// One multicast request in flight.
pub(super) struct GroupExchange {
    key: Key,
    /// Where its members' answers are cached (`None` for an unsafe method): `group_cache::prefix`.
    store: Option<Key>,
    /// The group URI, the cache entries' target (an unsafe request to it forgets them).
    uri: String,
    group: SocketAddr,
    window: Duration,
    /// When the window ends.
    ends: Instant,
    waiters: Vec<GroupWaiter>,
    /// The answers relayed so far, with Reply-From: a client that joins later gets them at once.
    answers: Vec<Response>,
    /// The members that answered (within the fan-out budget).
    heard: Vec<SocketAddr>,
    /// The request carried OSCORE: answers protected too are kept whoever sent them (`group_cache`).
    protected: bool,
}

/// The group exchanges, by the multicast request's id and by the request's cache key.
#[derive(Default)]
pub(super) struct Groups {
    by_request: HashMap<RequestId, GroupExchange>,
    by_key: HashMap<Key, RequestId>,
}

impl Groups {
    pub(super) fn owns(&self, id: RequestId) -> bool {
        self.by_request.contains_key(&id)
    }

    pub(super) fn len(&self) -> usize {
        self.by_request.len()
    }

    /// When a client's held cached answers are due.
    pub(super) fn next_flush(&self) -> Option<Instant> {
        let waiters = self.by_request.values().flat_map(|ex| ex.waiters.iter());
        waiters.filter(|w| !w.held.is_empty()).map(|w| w.flush).min()
    }
}

/// What a client without Multicast-Timeout gets: 4.00 with an empty Multicast-Timeout (§5.2.1 step 3).
fn unsignalled(group: SocketAddr) -> Response {
    Response::error(
        Code::BAD_REQUEST,
        format!(
            "{} is a multicast group: send the request with a Multicast-Timeout option (the seconds to collect \
             its members' answers; draft-ietf-core-groupcomm-proxy)",
            group.ip()
        ),
    )
    .with_option(OptionNumber::MULTICAST_TIMEOUT, &[])
}

impl ProxyService {
    /// The group a target names, if it names one: a FIB rule whose first next hop is a multicast address,
    /// or a multicast host (an address, or a name of the FIB's `[hosts]`).
    pub(super) fn group_of(&self, target: &Uri) -> Option<SocketAddr> {
        match self.fib.lookup(target) {
            Some(rule) => rule.next.first().map(|h| h.addr).filter(|a| a.ip().is_multicast()),
            None => {
                let ip = canonical(self.fib.hosts.resolve(&target.host)?);
                ip.is_multicast().then(|| SocketAddr::new(ip, target.port))
            }
        }
    }

    /// A request for a group: the checks, aggregation onto one collecting, or one multicast request.
    pub(super) fn group_request(
        &mut self,
        cx: &mut Context<'_>,
        req: IncomingRequest,
        target: Uri,
        group: SocketAddr,
        hops_left: u8,
    ) {
        let ip = canonical(group.ip());
        if !self.config.groups.iter().any(|p| p.contains(ip)) {
            let r = Refusal::new(
                Code::FORBIDDEN,
                format!("{ip} is a multicast group this proxy does not forward to (--allow-group opens one)"),
            );
            return self.refuse(cx, req.id, r);
        }
        let Some(raw) = req.request.options.get(OptionNumber::MULTICAST_TIMEOUT) else {
            self.stats.refused += 1;
            tracing::debug!(%group, "group request without Multicast-Timeout refused");
            return cx.respond(req.id, unsignalled(group));
        };
        let Some(secs) = decode_uint(raw).filter(|_| raw.len() <= 4) else {
            let r = Refusal::new(Code::BAD_OPTION, "Multicast-Timeout must be an unsigned integer of 0 to 4 bytes");
            return self.refuse(cx, req.id, r);
        };
        if !req.id.can_respond_again() {
            let r = Refusal::new(Code::NOT_IMPLEMENTED, "a group request goes to this proxy over coap:// (UDP)");
            return self.refuse(cx, req.id, r);
        }
        if !req.verified {
            // The answers of a whole group must not go to an address nobody proved is the client's.
            self.stats.group_challenges += 1;
            return cx.challenge(req.id);
        }
        let window = Duration::from_secs(secs).min(self.config.max_group_timeout);
        let until = cx.now() + window;
        let mut waiter = GroupWaiter::new(&req, until);
        if window == Duration::ZERO {
            // §5.2.1 step 6: a client that wants no answer; the group still gets the request.
            cx.accept(req.id);
            cx.discard(req.id);
        }
        let key = crate::key::cache_key(&req.request, &target);
        let uri = target.to_string();
        let store = req.request.method.is_cacheable_method().then(|| group_cache::prefix(&key, group));
        if store.is_none() {
            // RFC 7252 §5.6.2: what the members answered before may have changed.
            self.group_cache.invalidate(&uri);
        }
        if let Some(ex) = self.groups.by_key.get(&key).and_then(|id| self.groups.by_request.get_mut(id)) {
            if ex.waiters.len() >= self.config.max_waiters {
                return self.overloaded(cx, req.id, "too many clients waiting for this group");
            }
            self.stats.aggregated += 1;
            waiter.until = waiter.until.min(ex.ends);
            if waiter.until > cx.now() {
                for a in &ex.answers {
                    waiter.relay(cx, a);
                }
                if let Some(prefix) = &ex.store {
                    let (cache, stats, heard) = (&mut self.group_cache, &mut self.stats, &ex.heard[..]);
                    group_cache::Entries { cache, stats, prefix, heard }.serve(cx, &mut waiter);
                }
            }
            ex.waiters.push(waiter);
            return;
        }
        if self.groups.len() >= self.config.max_group_exchanges {
            return self.overloaded(cx, req.id, "too many group requests collecting answers");
        }
        let mut up = super::forward::upstream_request(&req.request, &target, false, hops_left, None);
        up.options.remove(OptionNumber::HOP_LIMIT);
        if let Some(store) = &store {
            for tag in group_cache::etags(&self.group_cache, store) {
                up.options.push(OptionNumber::ETAG, &tag);
            }
        }
        let params = SendParams { confirmable: false, multicast_window: Some(window), ..SendParams::default() };
        let id = match cx.request(group, up, params) {
            Ok(id) => id,
            Err(e) => {
                tracing::warn!(%group, error = %e, "cannot send a group request");
                return self.overloaded(cx, req.id, "no upstream exchange available");
            }
        };
        self.stats.misses += 1;
        self.stats.group_requests += 1;
        self.stats.upstream_requests += 1;
        tracing::debug!(%group, ?window, "group request sent");
        if let (Some(prefix), true) = (&store, window > Duration::ZERO) {
            let (cache, stats) = (&mut self.group_cache, &mut self.stats);
            group_cache::Entries { cache, stats, prefix, heard: &[] }.serve(cx, &mut waiter);
        }
        self.groups.by_key.insert(key.clone(), id);
        let ends = cx.now() + window;
        let (answers, heard) = (Vec::new(), Vec::new());
        let protected = req.request.options.contains(OptionNumber::OSCORE);
        let waiters = vec![waiter];
        let ex = GroupExchange { key, store, uri, group, window, ends, waiters, answers, heard, protected };
        self.groups.by_request.insert(id, ex);
    }

    /// A member's answer (relayed to every client still waiting), or the end of the window.
    pub(super) fn on_group(&mut self, cx: &mut Context<'_>, id: RequestId, outcome: Outcome) {
        let config: &ProxyConfig = &self.config;
        let Some(ex) = self.groups.by_request.get_mut(&id) else { return };
        match outcome {
            Outcome::Response { from, response } => {
                if ex.answers.len() >= config.max_group_answers {
                    self.stats.group_answers_dropped += 1;
                    tracing::debug!(group = %ex.group, %from, "group answer beyond the budget dropped");
                    return;
                }
                let mut answer = super::forward::downstream_response(response, &config.name);
                answer.options.set(OptionNumber::REPLY_FROM, &encode_reply_from(Scheme::Coap, from));
                self.stats.group_answers += 1;
                let now = cx.now();
                if !ex.heard.contains(&from) {
                    ex.heard.push(from);
                }
                if let Some(store) = &ex.store {
                    // §7: each answer goes into its member's entry as it comes, if the cache trusts it.
                    let trusted =
                        group_cache::trusted(config, &self.known_members, (ex.group, from), ex.protected, &answer);
                    let (cache, stats) = (&mut self.group_cache, &mut self.stats);
                    let at = (config.group_cache_max_age, now);
                    answer = group_cache::keep((cache, stats), (store, &ex.uri), (from, trusted), answer, at);
                }
                for w in ex.waiters.iter_mut().filter(|w| w.until > now) {
                    w.relay(cx, &answer);
                }
                ex.answers.push(answer);
            }
            Outcome::MulticastDone | Outcome::Failed(_) | Outcome::Pong { .. } => {
                let Some(mut ex) = self.groups.by_request.remove(&id) else { return };
                self.groups.by_key.remove(&ex.key);
                // Known from now on: an answer to a later request is not its first (`group_cache`).
                self.known_members.learn(ex.group, &ex.heard);
                // Held cached answers not yet due (a window shorter than the flush margin) go now.
                self.flush_group(cx, &mut ex, true);
                let silent = Response::error(
                    Code::GATEWAY_TIMEOUT,
                    format!("no member of {} answered within {} s", ex.group, ex.window.as_secs()),
                );
                for w in ex.waiters.iter().filter(|w| !w.answered() && ex.window > Duration::ZERO) {
                    cx.respond(w.id(), silent.clone());
                }
            }
        }
    }
}

impl ProxyService {
    /// The clients whose held cached answers are due get them (`group_cache`).
    pub(super) fn group_due(&mut self, cx: &mut Context<'_>) {
        let ids: Vec<RequestId> = self.groups.by_request.keys().copied().collect();
        for id in ids {
            if let Some(mut ex) = self.groups.by_request.remove(&id) {
                self.flush_group(cx, &mut ex, false);
                self.groups.by_request.insert(id, ex);
            }
        }
    }

    fn flush_group(&mut self, cx: &mut Context<'_>, ex: &mut GroupExchange, all: bool) {
        let Some(prefix) = &ex.store else { return };
        let now = cx.now();
        let (cache, stats) = (&mut self.group_cache, &mut self.stats);
        let mut entries = group_cache::Entries { cache, stats, prefix, heard: &ex.heard };
        for w in ex.waiters.iter_mut().filter(|w| !w.held.is_empty() && (all || w.flush <= now)) {
            entries.flush(cx, w);
        }
    }
}
