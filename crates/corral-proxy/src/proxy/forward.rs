//! Forwarding: the route a request takes (FIB or origin), the copies sent to every next hop, and the
//! answer that fans out to every waiting client when the first success (or the last failure) arrives.

use super::{ProxyService, Waiter};
use crate::fib::NextHop;
use crate::key::Key;
use crate::target::Refusal;
use corral_proto::wire::uri::{Scheme, Uri};
use corral_proto::wire::{Code, OptionNumber};
use corral_proto::{Context, IncomingRequest, Outcome, Request, RequestError, RequestId, Response, SendParams};

/// A request waiting for its upstream answer, with every client attached to it.
pub(super) struct Pending {
    pub(super) seq: u64,
    /// The request as the first client sent it (for a retry without the ETag).
    pub(super) request: Request,
    pub(super) target: Uri,
    pub(super) hops_left: u8,
    pub(super) waiters: Vec<Waiter>,
    /// Upstream copies still without an outcome.
    pub(super) outstanding: usize,
    /// The best failure so far: a response beats a failure to get one; later beats earlier.
    pub(super) last: Option<(Response, bool)>,
    /// The ETag of the stale cache entry this request revalidates.
    pub(super) revalidate: Option<Vec<u8>>,
    /// The cache key the answer is stored under (`None` for unsafe methods). It is the pending table's key
    /// too, except for a request that came back from one of our own next hops (see `intake`).
    pub(super) cache_as: Option<Key>,
    /// The request's own cache key, also for unsafe methods: what a retransmission is recognised by.
    pub(super) ident: Key,
    /// Where the copies went.
    pub(super) hops: Vec<std::net::SocketAddr>,
}

/// What to forward: the resource, the pending-table key, the request's own cache key, the Hop-Limit to send
/// and the validator of a stale entry being revalidated.
pub(super) struct Ask {
    pub(super) target: Uri,
    pub(super) key: Key,
    pub(super) ident: Key,
    pub(super) hops_left: u8,
    pub(super) revalidate: Option<Vec<u8>>,
}

/// One copy sent upstream.
pub(super) struct Upstream {
    pub(super) key: Key,
    pub(super) seq: u64,
    /// Its label in the per-hop counters.
    pub(super) hop: String,
}

/// The request a next hop gets: the proxy options replaced by the form that hop needs (RFC 7252 §5.7.2), the
/// Hop-Limit decremented, the client's own validators and exchange options left behind.
pub(crate) fn upstream_request(req: &Request, target: &Uri, send_host: bool, hops: u8, etag: Option<&[u8]>) -> Request {
    let mut r = Request { method: req.method, options: req.options.clone(), payload: req.payload.clone() };
    for n in [
        OptionNumber::PROXY_URI,
        OptionNumber::PROXY_SCHEME,
        OptionNumber::HOP_LIMIT,
        OptionNumber::ETAG,
        OptionNumber::BLOCK1,
        OptionNumber::BLOCK2,
        OptionNumber::SIZE1,
        OptionNumber::SIZE2,
        OptionNumber::REQUEST_TAG,
        OptionNumber::NO_RESPONSE,
        OptionNumber::MULTICAST_TIMEOUT,
    ] {
        r.options.remove(n);
    }
    if send_host {
        for n in [OptionNumber::URI_HOST, OptionNumber::URI_PORT, OptionNumber::URI_PATH, OptionNumber::URI_QUERY] {
            r.options.remove(n);
        }
        r.options.push_str(OptionNumber::PROXY_URI, &target.to_string());
    } else {
        target.to_options(&mut r.options);
    }
    r.options.set_uint(OptionNumber::HOP_LIMIT, u64::from(hops));
    if let Some(e) = etag {
        r.options.push(OptionNumber::ETAG, e);
    }
    r
}

/// What a client gets from an upstream response: the transfer-specific options gone (the endpoint cut and
/// reassembled the body), and this proxy named in a relayed 5.08 (RFC 8768 §3).
pub(crate) fn downstream_response(mut r: Response, name: &str) -> Response {
    for n in
        [OptionNumber::BLOCK1, OptionNumber::BLOCK2, OptionNumber::SIZE1, OptionNumber::SIZE2, OptionNumber::OBSERVE]
    {
        r.options.remove(n);
    }
    if r.code == Code::HOP_LIMIT_REACHED {
        let text = r.payload_text().into_owned();
        if !text.split(' ').any(|id| id == name) {
            r.payload = if text.is_empty() { name.to_string() } else { format!("{name} {text}") }.into_bytes();
        }
    }
    r
}

/// The answer clients get when a next hop gives no response.
pub(crate) fn failure_response(error: RequestError, hop: &str) -> Response {
    match error {
        RequestError::Timeout => Response::error(Code::GATEWAY_TIMEOUT, format!("no answer from {hop} in time")),
        RequestError::Reset => Response::error(Code::BAD_GATEWAY, format!("{hop} reset the request")),
        RequestError::Malformed => {
            Response::error(Code::BAD_GATEWAY, format!("{hop} answered with a malformed message"))
        }
        RequestError::BadTransfer(why) => {
            Response::error(Code::BAD_GATEWAY, format!("block-wise transfer from {hop}: {why}"))
        }
        RequestError::Unreachable => {
            Response::error(Code::BAD_GATEWAY, format!("{hop} is unreachable (ICMP: nothing listens there)"))
        }
        RequestError::ConnectionClosed => {
            Response::error(Code::BAD_GATEWAY, format!("no connection to {hop} (refused, or closed before the answer)"))
        }
        RequestError::Dtls(why) => {
            Response::error(Code::BAD_GATEWAY, format!("DTLS handshake with {hop} failed: {why}"))
        }
        e => Response::error(Code::BAD_GATEWAY, format!("{hop} did not answer: {e}")),
    }
}

impl ProxyService {
    /// The next hops for `target`: the most specific FIB rule's, or the origin itself. Unsafe methods and
    /// observations go to the first hop only (a copy to each would repeat the effect or the notifications).
    pub(super) fn route(&self, target: &Uri, all: bool) -> Result<Vec<NextHop>, Refusal> {
        match self.fib.lookup(target) {
            Some(rule) if rule.next.is_empty() => Err(Refusal::new(
                Code::SERVICE_UNAVAILABLE,
                format!(
                    "no next hop for {}: the directory lists no endpoint for rd:{} (yet)",
                    rule.pattern,
                    rule.rd.as_deref().unwrap_or("")
                ),
            )),
            Some(rule) => Ok(rule.next.iter().take(if all { usize::MAX } else { 1 }).cloned().collect()),
            None => {
                let addr = self.fib.hosts.address(target)?;
                let tcp = target.scheme == Scheme::CoapTcp;
                if target.scheme == Scheme::Coaps && !self.config.dtls_peers.contains(&addr) {
                    return Err(Refusal::new(
                        Code::PROXYING_NOT_SUPPORTED,
                        format!("coaps://{addr}: the proxy has no DTLS credentials for it (its --peer-psk-file)"),
                    ));
                }
                Ok(vec![NextHop { uri: "origin".into(), addr, tcp, send_host: false }])
            }
        }
    }

    pub(super) fn params(&self) -> SendParams {
        SendParams {
            confirmable: self.config.upstream_confirmable,
            timeout: self.config.upstream_timeout,
            ..SendParams::default()
        }
    }

    /// Sends one copy of `request` to a next hop; `None` if the endpoint cannot take another request.
    pub(super) fn send(&mut self, cx: &mut Context<'_>, hop: &NextHop, request: Request) -> Option<RequestId> {
        let params = self.params();
        let started =
            if hop.tcp { cx.request_tcp(hop.addr, request, params) } else { cx.request(hop.addr, request, params) };
        let stats = self.stats.per_hop.entry(hop.uri.clone()).or_default();
        match started {
            Ok(id) => {
                stats.requests += 1;
                self.stats.upstream_requests += 1;
                Some(id)
            }
            Err(e) => {
                stats.failures += 1;
                tracing::warn!(hop = %hop.uri, error = %e, "cannot send upstream");
                None
            }
        }
    }

    /// A request that neither the cache nor a pending request answers: a copy to each next hop.
    pub(super) fn forward(&mut self, cx: &mut Context<'_>, req: IncomingRequest, ask: Ask) {
        let Ask { target, key, ident, hops_left, revalidate } = ask;
        let safe = req.request.method.is_cacheable_method();
        let route = match self.route(&target, safe) {
            Ok(r) => r,
            Err(r) => return self.refuse(cx, req.id, r),
        };
        self.seq += 1;
        let seq = self.seq;
        let mut outstanding = 0;
        let hops = route.iter().map(|h| h.addr).collect();
        for hop in &route {
            let up = upstream_request(&req.request, &target, hop.send_host, hops_left, revalidate.as_deref());
            if let Some(id) = self.send(cx, hop, up) {
                self.upstream.insert(id, Upstream { key: key.clone(), seq, hop: hop.uri.clone() });
                outstanding += 1;
            }
        }
        if outstanding == 0 {
            return self.overloaded(cx, req.id, "no upstream exchange available");
        }
        self.by_client.insert((req.from, req.token), ident.clone());
        let pending = Pending {
            seq,
            request: req.request.clone(),
            target,
            hops_left,
            waiters: vec![Waiter::of(&req)],
            outstanding,
            last: None,
            revalidate,
            cache_as: safe.then(|| ident.clone()),
            ident,
            hops,
        };
        self.pending.insert(key, pending);
    }

    /// The outcome of a copy sent upstream.
    pub(super) fn on_upstream(&mut self, cx: &mut Context<'_>, id: RequestId, outcome: Outcome) {
        let Some(up) = self.upstream.remove(&id) else { return };
        let hop = self.stats.per_hop.entry(up.hop.clone()).or_default();
        let current = self.pending.get(&up.key).is_some_and(|p| p.seq == up.seq);
        let (response, is_response) = match outcome {
            Outcome::Response { response, .. } => {
                hop.responses += 1;
                if !current {
                    hop.duplicates += 1;
                    self.stats.duplicates_dropped += 1;
                    tracing::debug!(hop = %up.hop, "late response of a multi-destination request dropped");
                    return;
                }
                (response, true)
            }
            Outcome::Failed(error) => {
                hop.failures += 1;
                if !current {
                    return;
                }
                (failure_response(error, &up.hop), false)
            }
            Outcome::MulticastDone | Outcome::Pong { .. } => return,
        };
        let Some(p) = self.pending.get_mut(&up.key) else { return };
        p.outstanding -= 1;
        if response.code.is_success() {
            hop.wins += 1;
            return self.finish(cx, up.key, response);
        }
        if p.last.as_ref().is_none_or(|(_, had_response)| is_response || !had_response) {
            p.last = Some((response, is_response));
        }
        if p.outstanding == 0 {
            let (last, _) = p.last.take().expect("set above");
            self.finish(cx, up.key, last);
        }
    }

    /// The answer for a pending request: into the cache, out to every waiter.
    fn finish(&mut self, cx: &mut Context<'_>, key: Key, response: Response) {
        let Some(p) = self.pending.remove(&key) else { return };
        for w in &p.waiters {
            self.by_client.remove(&(w.from, w.token));
        }
        let mut response = downstream_response(response, &self.config.name);
        let target = p.target.to_string();
        match response.code {
            Code::GATEWAY_TIMEOUT => self.stats.gateway_timeouts += 1,
            Code::BAD_GATEWAY => self.stats.bad_gateways += 1,
            _ => {}
        }
        if let (Some(ck), Some(_), Code::VALID) = (&p.cache_as, &p.revalidate, response.code) {
            match self.cache.refresh(ck, &response, cx.now()) {
                Some(full) => {
                    self.stats.refreshed += 1;
                    response = full;
                }
                None => return self.retry_without_validator(cx, key, p),
            }
        } else if let Some(ck) = &p.cache_as {
            self.cache.insert(ck.clone(), &target, &response, cx.now());
        } else if response.code.is_success() {
            self.cache.invalidate(&target);
        }
        for w in &p.waiters {
            cx.respond(w.id, w.answer(&response));
        }
    }

    /// The entry a 2.03 was to refresh has been evicted meanwhile: ask again for the representation.
    fn retry_without_validator(&mut self, cx: &mut Context<'_>, key: Key, mut p: Pending) {
        let Ok(route) = self.route(&p.target, true) else { return };
        self.seq += 1;
        p.seq = self.seq;
        p.revalidate = None;
        p.outstanding = 0;
        for hop in &route {
            let up = upstream_request(&p.request, &p.target, hop.send_host, p.hops_left, None);
            if let Some(id) = self.send(cx, hop, up) {
                self.upstream.insert(id, Upstream { key: key.clone(), seq: p.seq, hop: hop.uri.clone() });
                p.outstanding += 1;
            }
        }
        if p.outstanding == 0 {
            for w in &p.waiters {
                cx.respond(w.id, Response::error(Code::SERVICE_UNAVAILABLE, "proxy busy").with_max_age(2));
            }
            return;
        }
        for w in &p.waiters {
            self.by_client.insert((w.from, w.token), p.ident.clone());
        }
        self.pending.insert(key, p);
    }
}
