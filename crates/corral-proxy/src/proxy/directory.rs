//! FIB rules that follow a Resource Directory (issue 32): for each rule whose next hop is `rd:QUERY`, one
//! observation of the directory's resource lookup (`GET /rd-lookup/res?QUERY`, RFC 9176 §6, Observe=0)
//! issued through the proxy's [`Context`], and on each result the rule's next hops replaced by the
//! endpoints (scheme, address and port) of the resources listed, each once, in the directory's order.
//!
//! A lost observation never loses the rule: a failure is retried with backoff ([`RETRY_FIRST`] doubling
//! to [`RETRY_MAX`]) and a result is taken afresh once it is older than its Max-Age plus
//! [`REFRESH_SLACK`], so a directory that restarted (and forgot its observers) is followed anyway; until
//! the first result, and while the directory lists nobody, the rule's requests are answered 5.03. A
//! result with more endpoints than [`ProxyConfig::max_rd_next_hops`](super::ProxyConfig) is cut (WARN once
//! per cut, and a note in the status).
//!
//! What an `rd:` rule trusts: whoever the directory lists. A directory that takes registrations from
//! anyone (corral's default, first come) lets anyone become a next hop, so each endpoint must pass the
//! destination policy as the target of the least trusted client the proxy admits
//! ([`Destinations::check_learnt_hop`](crate::Destinations::check_learnt_hop)); one that does not is not
//! followed (named in the rule's note). Within the policy, a registrant's answers are relayed and cached as
//! any next hop's: to trust them, let only identities register (`corral rd --rd-policy identity`).
//!
//! Owns: the follow table, its observations and timers, and the notes. Must never: grow a rule past its
//! bound, or send to an endpoint the destination policy forbids for a client the proxy admits.

use super::ProxyService;
use crate::fib::NextHop;
use crate::target::Refusal;
use corral_proto::wire::link_format;
use corral_proto::wire::uri::{Host, Scheme, Uri};
use corral_proto::wire::{Code, ContentFormat, OptionNumber, OBSERVE_REGISTER};
use corral_proto::{Context, Duration, Instant, Outcome, Request, RequestId, SendParams};
use serde::Serialize;
use std::collections::HashMap;
use std::net::SocketAddr;

/// The first retry after a failed lookup.
pub const RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest pause between retries.
pub const RETRY_MAX: Duration = Duration::from_secs(60);
/// A result is taken afresh this long after its Max-Age ran out without a notification.
pub const REFRESH_SLACK: Duration = Duration::from_secs(5);

/// The observation of one rule's lookup.
#[derive(Debug)]
struct Follow {
    /// The rule's index in the FIB.
    rule: usize,
    rid: Option<RequestId>,
    /// When to register (again): at start, after a failure (backoff), or when the result went stale.
    wake: Option<Instant>,
    backoff: Duration,
    /// Results applied so far.
    results: u64,
    /// What the status shows: the result was cut, endpoints were skipped, or the lookup fails.
    note: Option<String>,
}

/// The FIB rules that follow the directory.
#[derive(Debug, Default)]
pub(super) struct RdRules {
    follows: Vec<Follow>,
    requests: HashMap<RequestId, usize>,
}

/// How `/proxy` shows a rule that follows the directory.
#[derive(Debug, Serialize)]
pub(super) struct RdRuleStatus {
    #[serde(rename = "match")]
    pattern: String,
    rd: String,
    next: Vec<String>,
    results: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

impl RdRules {
    /// The follows of `fib`'s `rd:` rules, due at once (or noted, without a directory).
    pub(super) fn of(fib: &crate::Fib, directory: bool) -> RdRules {
        let follows = fib
            .rules
            .iter()
            .enumerate()
            .filter(|(_, r)| r.rd.is_some())
            .map(|(rule, _)| Follow {
                rule,
                rid: None,
                wake: directory.then_some(Instant::ZERO),
                backoff: RETRY_FIRST,
                results: 0,
                note: (!directory).then(|| "no directory to follow: give the proxy one (--rd URI)".to_string()),
            })
            .collect();
        RdRules { follows, requests: HashMap::new() }
    }

    pub(super) fn owns(&self, rid: RequestId) -> bool {
        self.requests.contains_key(&rid)
    }

    pub(super) fn next_wake(&self) -> Option<Instant> {
        self.follows.iter().filter_map(|f| f.wake).min()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.follows.is_empty()
    }
}

/// The next hops a lookup result names: the endpoint of each link's target (an absolute URI, RFC 9176
/// §6) that `allowed` lets through, each once, in the directory's order, at most `limit`; and a note when
/// some were left out or skipped (a scheme the proxy cannot send, a host that is not an address, a
/// destination `allowed` refuses).
pub fn hops_from_lookup(
    text: &str,
    limit: usize,
    allowed: impl Fn(SocketAddr) -> Result<(), Refusal>,
) -> Result<(Vec<NextHop>, Option<String>), String> {
    let mut out: Vec<NextHop> = Vec::new();
    let mut skipped = Vec::new();
    let mut total = 0usize;
    for link in link_format::parse(text) {
        let link = link.map_err(|e| format!("the lookup result is not link-format: {e}"))?;
        let hop = Uri::parse(link.target().trim()).map_err(|e| e.to_string()).and_then(|uri| {
            let tcp = match uri.scheme {
                Scheme::Coap => false,
                Scheme::CoapTcp => true,
                s => return Err(format!("{s}:// is not followed")),
            };
            let Host::Ip(ip) = uri.host else { return Err("not an IP address".into()) };
            let addr = SocketAddr::new(ip, uri.port);
            allowed(addr).map_err(|r| r.diagnostic)?;
            Ok(NextHop::new(addr, tcp, false))
        });
        match hop {
            Ok(h) if out.iter().any(|o| o.addr == h.addr && o.tcp == h.tcp) => {}
            Ok(h) => {
                total += 1;
                if out.len() < limit {
                    out.push(h);
                }
            }
            Err(why) => skipped.push(format!("{} ({why})", link.target())),
        }
    }
    let mut notes = Vec::new();
    if total > out.len() {
        notes.push(format!("the directory lists {total} endpoints; the first {limit} are next hops"));
    }
    if !skipped.is_empty() {
        notes.push(format!("not followed: {}", skipped.join(", ")));
    }
    Ok((out, (!notes.is_empty()).then(|| notes.join("; "))))
}

impl ProxyService {
    /// Registers the observations that are due (at start, retried, or stale).
    pub(super) fn rd_due(&mut self, cx: &mut Context<'_>) {
        let Some(directory) = self.config.rd else { return };
        let now = cx.now();
        for i in 0..self.rd.follows.len() {
            let f = &mut self.rd.follows[i];
            if f.wake.is_none_or(|w| w > now) {
                continue;
            }
            f.wake = None;
            if let Some(rid) = f.rid.take() {
                self.rd.requests.remove(&rid);
                cx.cancel(rid);
            }
            let Some(query) = self.fib.rules.get(f.rule).and_then(|r| r.rd.clone()) else { continue };
            let mut req = Request::new(Code::GET);
            for s in ["rd-lookup", "res"] {
                req.options.push_str(OptionNumber::URI_PATH, s);
            }
            for q in query.split('&') {
                req.options.push_str(OptionNumber::URI_QUERY, q);
            }
            req.options.set_uint(OptionNumber::OBSERVE, u64::from(OBSERVE_REGISTER));
            req.options.set_uint(OptionNumber::ACCEPT, u64::from(ContentFormat::LINK_FORMAT.0));
            match cx.request(directory, req, SendParams::default()) {
                Ok(rid) => {
                    tracing::debug!(rd = %directory, query = %query, "observing the directory's lookup for a FIB rule");
                    self.rd.follows[i].rid = Some(rid);
                    self.rd.requests.insert(rid, i);
                }
                Err(e) => self.rd_retry(now, i, format!("cannot ask the directory {directory}: {e}")),
            }
        }
    }

    /// Follow `i`'s lookup failed: retried after the backoff, which doubles up to [`RETRY_MAX`].
    fn rd_retry(&mut self, now: Instant, i: usize, why: String) {
        let f = &mut self.rd.follows[i];
        if f.note.as_deref() != Some(why.as_str()) {
            tracing::info!(why = %why, retry_in_s = f.backoff.as_secs(), "directory lookup of a FIB rule failed; retrying");
        }
        f.note = Some(why);
        f.wake = Some(now + f.backoff);
        f.backoff = f.backoff.saturating_mul(2).min(RETRY_MAX);
    }

    /// A response or notification of a rule's observation.
    pub(super) fn on_rd(&mut self, cx: &mut Context<'_>, rid: RequestId, outcome: Outcome) {
        let Some(&i) = self.rd.requests.get(&rid) else { return };
        let now = cx.now();
        let active = cx.endpoint().is_active(rid);
        if !active {
            self.rd.requests.remove(&rid);
            let f = &mut self.rd.follows[i];
            f.rid = f.rid.filter(|r| *r != rid);
        }
        let limit = self.config.max_rd_next_hops.max(1);
        let (destinations, clients) = (&self.config.destinations, &self.config.clients[..]);
        let allowed = |hop: SocketAddr| destinations.check_learnt_hop(clients, hop);
        let result = outcome
            .content_text("the directory")
            .map_err(|e| e.to_string())
            .and_then(|(text, max_age)| hops_from_lookup(text, limit, allowed).map(|r| (r, max_age)));
        match result {
            Ok(((hops, note), max_age)) => {
                let f = &mut self.rd.follows[i];
                if note.is_some() && f.note != note {
                    tracing::warn!(note = note.as_deref().unwrap_or(""), "a FIB rule's directory lookup was cut");
                }
                f.note = note;
                f.backoff = RETRY_FIRST;
                f.results += 1;
                // Taken afresh once stale: a directory that restarted, or one that does not notify.
                f.wake = Some(now + max_age + REFRESH_SLACK);
                if let Some(rule) = self.fib.rules.get_mut(f.rule) {
                    if rule.next != hops {
                        tracing::info!(rule = %rule.pattern, next_hops = hops.len(), was = rule.next.len(), "FIB rule follows the directory");
                        rule.next = hops;
                    }
                }
            }
            Err(why) => {
                if active {
                    cx.cancel(rid);
                    self.rd.requests.remove(&rid);
                    self.rd.follows[i].rid = None;
                }
                self.rd_retry(now, i, why);
            }
        }
    }

    /// The rules that follow the directory, for `/proxy`.
    pub(super) fn rd_status(&self) -> Vec<RdRuleStatus> {
        self.rd
            .follows
            .iter()
            .filter_map(|f| {
                let rule = self.fib.rules.get(f.rule)?;
                Some(RdRuleStatus {
                    pattern: rule.pattern.clone(),
                    rd: rule.rd.clone().unwrap_or_default(),
                    next: rule.next.iter().map(|h| h.uri.clone()).collect(),
                    results: f.results,
                    note: f.note.clone(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::hops_from_lookup;
    use crate::Destinations;

    fn anywhere(_: std::net::SocketAddr) -> Result<(), crate::target::Refusal> {
        Ok(())
    }

    #[test]
    fn a_lookup_result_names_each_endpoint_once_in_the_directorys_order() {
        let text = "<coap://127.0.0.2:5683/s/t>;rt=temperature;anchor=\"coap://127.0.0.2:5683\",\
                    <coap://127.0.0.3:5700/s/t>;rt=temperature,<coap://127.0.0.2:5683/s/h>;rt=temperature,\
                    <coap+tcp://127.0.0.4/t>";
        let (hops, note) = hops_from_lookup(text, 10, anywhere).unwrap();
        let uris: Vec<&str> = hops.iter().map(|h| h.uri.as_str()).collect();
        assert_eq!(uris, ["coap://127.0.0.2:5683", "coap://127.0.0.3:5700", "coap+tcp://127.0.0.4:5683"]);
        assert!(hops.iter().all(|h| !h.send_host), "devices are origins: a plain request");
        assert!(hops[2].tcp);
        assert_eq!(note, None);
        assert_eq!(hops_from_lookup("", 10, anywhere).unwrap().0, Vec::new(), "nobody registered: no next hop");
    }

    #[test]
    fn a_lookup_result_past_the_bound_is_cut_and_unusable_endpoints_are_named() {
        let mut text: Vec<String> = (1..=5).map(|i| format!("<coap://10.0.0.{i}/t>")).collect();
        text.push("<coaps://10.0.0.9/t>".into());
        text.push("<coap://name.example/t>".into());
        let (hops, note) = hops_from_lookup(&text.join(","), 3, anywhere).unwrap();
        assert_eq!(hops.len(), 3);
        let note = note.expect("a cut result says so");
        assert!(note.contains("lists 5 endpoints") && note.contains("first 3"), "{note}");
        assert!(note.contains("coaps://10.0.0.9/t") && note.contains("name.example"), "{note}");
        assert!(hops_from_lookup("<coap://10.0.0.1/t", 3, anywhere).is_err());
    }

    #[test]
    fn a_registrant_cannot_make_a_next_hop_of_this_host_or_a_refused_port() {
        let policy = Destinations {
            ports: vec![5683],
            this_host: vec!["127.0.0.0/8".parse().unwrap()],
            ..Destinations::default()
        };
        let open: Vec<corral_proto::Prefix> = vec!["0.0.0.0/0".parse().unwrap()];
        let text = "<coap://10.0.0.2/s/t>;rt=temperature,<coap://127.0.0.9:5683/s/t>;rt=temperature,\
                    <coap://10.0.0.9:22/s/t>;rt=temperature";
        let (hops, note) = hops_from_lookup(text, 10, |h| policy.check_learnt_hop(&open, h)).unwrap();
        let uris: Vec<&str> = hops.iter().map(|h| h.uri.as_str()).collect();
        assert_eq!(uris, ["coap://10.0.0.2:5683"]);
        let note = note.expect("the refused endpoints are named");
        assert!(note.contains("127.0.0.9:5683/s/t (127.0.0.9 is this proxy's own host"), "{note}");
        assert!(note.contains("10.0.0.9:22/s/t (port 22"), "{note}");
    }
}
