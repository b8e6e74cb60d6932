//! Caching of group answers (draft-ietf-core-groupcomm-proxy -07, §7 "Caching", §7.1 "Freshness Model",
//! §7.2.2 "Proxy-Servers Revalidation with Group Requests"): one entry per member and group request, in a
//! [`Cache`] of its own beside the unicast one
//! ([`ProxyConfig::group_cache_entries`](super::ProxyConfig::group_cache_entries) and
//! [`ProxyConfig::group_cache_bytes`](super::ProxyConfig::group_cache_bytes), least recently used first
//! out). The key is the request's [`cache_key`](crate::key::cache_key) (the one the unicast cache uses),
//! the group's address and the member's address; the stored response carries its Reply-From (§5.4 step 1:
//! added before caching), so a cached answer names its member as a relayed one does.
//!
//! What a later group request for the same key gets, following §7.1:
//! - The request still goes to the group (one multicast datagram): a proxy may answer from its cache alone
//!   only if it knows every current member of the group, and this one does not (it learns nothing from a
//!   group manager or the directory); answers from members it has not cached reach the client too.
//! - A cached answer whose residual lifetime L (its Max-Age now) is shorter than the client's
//!   Multicast-Timeout T' goes to the client at once; one with L ≥ T' waits for the end of the client's
//!   window and goes then only if that member has not answered this request (the member's own answer, as
//!   it comes, refreshes the entry). "Approaching the timeout" is chosen as a quarter of the window, at
//!   most 500 ms, before it ends.
//! - The multicast request carries the ETags of the group's cached answers (at most [`MAX_ETAGS`]; §7.2.2,
//!   groupcomm-bis §3.2.2): a member that answers 2.03 Valid with one of them refreshes its entry, and the
//!   client gets the cached representation with the new Max-Age, not the 2.03 (the client did not send
//!   that ETag; one it did send is honoured as for unicast answers).
//!
//! # What the cache trusts (issue 41 item 9)
//! Anyone on the link hears a group request (its token is in clear) and may answer it with a unicast 2.05
//! from an address of its own: the proxy cannot tell a member from a forger by the answer. Every answer is
//! relayed to the clients waiting (the client of a group request hears whoever answers, as it would
//! without the proxy), but one is **kept** only if it comes from
//! - an address the operator names as the groups' members ([`ProxyConfig::group_members`]), or, only when
//!   the operator names none, an address heard answering an *earlier* request to the same group
//!   ([`KnownMembers`]: a forger who answers once, or only while it is there, leaves nothing behind for
//!   later clients; once members are named, being heard earns nothing — a forger outside the named
//!   networks that answers every request is never kept), or
//! - Group OSCORE: the request was protected and so is the answer, which every client verifies end to end
//!   (a forged one fails there, cached or not).
//!
//! What is kept stays at most [`ProxyConfig::group_cache_max_age`] (60 s unless the operator says
//! otherwise), whatever Max-Age the answer carried: a member's answer stands in for a member that is silent
//! now, not for one that left an hour ago. Not protected against: a forger that answers every request
//! (it becomes known after its first), or one that spoofs a known member's address — only Group OSCORE
//! tells members apart. The known members are bounded ([`MAX_KNOWN_GROUPS`] groups of
//! [`MAX_KNOWN_MEMBERS`], the least recently heard first out).
//!
//! Not done: Group-ETag (§7.3; it needs the complete set of members, see above), and hits of group
//! entries by unicast requests to a member or the other way round (§7 allows both; the two caches are
//! separate). An unsafe request to the group forgets its entries (RFC 7252 §5.6.2).

use super::group_waiter::GroupWaiter;
use super::ProxyConfig;
use crate::cache::{Cache, Lookup, DEFAULT_MAX_AGE};
use crate::key::Key;
use crate::stats::Stats;
use corral_proto::wire::{decode_reply_from, Code, OptionNumber};
use corral_proto::{Context, Duration, Instant, Response};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;

/// ETags of cached answers one multicast request carries at most (§7.2.2).
pub const MAX_ETAGS: usize = 8;
/// Groups whose members the proxy remembers at most.
pub const MAX_KNOWN_GROUPS: usize = 64;
/// Members remembered per group at most.
pub const MAX_KNOWN_MEMBERS: usize = 256;

/// The addresses heard answering each group in requests that have ended, least recently heard first.
#[derive(Debug, Default)]
pub(super) struct KnownMembers {
    groups: HashMap<SocketAddr, (u64, VecDeque<SocketAddr>)>,
    tick: u64,
}

impl KnownMembers {
    pub(super) fn contains(&self, group: SocketAddr, member: SocketAddr) -> bool {
        self.groups.get(&group).is_some_and(|(_, m)| m.contains(&member))
    }

    /// A request to `group` has ended: the members `heard` answering it are known from now on.
    pub(super) fn learn(&mut self, group: SocketAddr, heard: &[SocketAddr]) {
        if heard.is_empty() {
            return;
        }
        if !self.groups.contains_key(&group) && self.groups.len() >= MAX_KNOWN_GROUPS {
            let stalest = self.groups.iter().min_by_key(|(_, (used, _))| *used).map(|(g, _)| *g);
            if let Some(g) = stalest {
                self.groups.remove(&g);
            }
        }
        self.tick += 1;
        let (used, members) = self.groups.entry(group).or_default();
        *used = self.tick;
        for m in heard {
            members.retain(|k| k != m);
            if members.len() >= MAX_KNOWN_MEMBERS {
                members.pop_front();
            }
            members.push_back(*m);
        }
    }
}

/// Whether the answer of `member` to a request to `group` may be kept (the module docs: "What the cache
/// trusts"); `protected`: the request carried OSCORE.
pub(super) fn trusted(
    config: &ProxyConfig,
    known: &KnownMembers,
    (group, member): (SocketAddr, SocketAddr),
    protected: bool,
    answer: &Response,
) -> bool {
    let named = if config.group_members.is_empty() {
        known.contains(group, member)
    } else {
        config.group_members.iter().any(|p| p.contains(member.ip()))
    };
    named || (protected && answer.options.contains(OptionNumber::OSCORE))
}

/// `answer` (with Reply-From) as the cache keeps it: its Max-Age at most `cap`.
fn capped(answer: &Response, cap: u32) -> Response {
    let mut r = answer.clone();
    let age = answer.options.max_age().unwrap_or(DEFAULT_MAX_AGE).min(cap);
    r.options.set_uint(OptionNumber::MAX_AGE, u64::from(age));
    r
}

/// A member's answer into its entry under `store` (if `trusted`), as §7 says: a 2.03 for an ETag the
/// proxy sent (§7.2.2) refreshes the entry and the clients get the representation, anything else replaces
/// it. Returns what the clients get.
pub(super) fn keep(
    (cache, stats): (&mut Cache, &mut Stats),
    (store, uri): (&Key, &str),
    (from, trusted): (SocketAddr, bool),
    answer: Response,
    (cap, now): (u32, Instant),
) -> Response {
    if !trusted {
        stats.group_answers_untrusted += 1;
        tracing::debug!(%from, "a group answer from an address not known as a member: relayed, not cached");
        return answer;
    }
    let k = member_key(store, from);
    let tag = answer.options.get(OptionNumber::ETAG);
    if answer.code == Code::VALID && tag.is_some() && cache.etag(&k) == tag {
        if let Some(r) = cache.refresh(&k, &capped(&answer, cap), now) {
            stats.group_revalidated += 1;
            return r;
        }
    } else {
        cache.insert(k, uri, &capped(&answer, cap), now);
    }
    answer
}

/// The longest a held cached answer waits before the end of a client's window.
const FLUSH_AHEAD: Duration = Duration::from_millis(500);

fn push_addr(out: &mut Vec<u8>, a: SocketAddr) {
    let ip = match corral_proto::canonical(a.ip()) {
        std::net::IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        std::net::IpAddr::V6(v6) => v6,
    };
    out.extend_from_slice(&ip.octets());
    out.extend_from_slice(&a.port().to_be_bytes());
}

/// The prefix every member's entry of one group request shares: the request's key (length first, so no
/// key is a prefix of another's) and the group.
pub(super) fn prefix(key: &Key, group: SocketAddr) -> Key {
    let mut out = Vec::with_capacity(key.0.len() + 22);
    out.extend_from_slice(&(key.0.len() as u32).to_be_bytes());
    out.extend_from_slice(&key.0);
    push_addr(&mut out, group);
    Key(out)
}

/// One member's entry under a group request's prefix.
pub(super) fn member_key(prefix: &Key, member: SocketAddr) -> Key {
    let mut out = prefix.0.clone();
    push_addr(&mut out, member);
    Key(out)
}

/// The member a stored answer names in its Reply-From.
fn member_of(r: &Response) -> Option<SocketAddr> {
    decode_reply_from(r.options.get(OptionNumber::REPLY_FROM)?).ok().map(|(_, a)| a)
}

/// The ETags of the group's cached answers, fresh or stale, for the multicast request (§7.2.2).
pub(super) fn etags(cache: &Cache, prefix: &Key) -> Vec<Vec<u8>> {
    let mut tags: Vec<Vec<u8>> = Vec::new();
    for k in cache.keys_with_prefix(&prefix.0) {
        if let Some(t) = cache.etag(&k).filter(|t| !tags.iter().any(|s| s == t)) {
            tags.push(t.to_vec());
        }
        if tags.len() >= MAX_ETAGS {
            break;
        }
    }
    tags
}

/// One group request's entries as its clients see them: the cache, the counters, the request's prefix
/// and the members that answered it so far.
pub(super) struct Entries<'a> {
    pub(super) cache: &'a mut Cache,
    pub(super) stats: &'a mut Stats,
    pub(super) prefix: &'a Key,
    pub(super) heard: &'a [SocketAddr],
}

impl Entries<'_> {
    /// A client joins the request: the cached answers of the members not heard from yet go to it at once
    /// when they expire within its window, the others are held for its window's end (§7.1).
    pub(super) fn serve(&mut self, cx: &mut Context<'_>, w: &mut GroupWaiter) {
        let now = cx.now();
        let window = w.until.saturating_since(now);
        for k in self.cache.keys_with_prefix(&self.prefix.0) {
            let Lookup::Fresh(r) = self.cache.lookup(&k, now) else { continue };
            let Some(member) = member_of(&r).filter(|m| !self.heard.contains(m)) else { continue };
            if u64::from(r.options.max_age().unwrap_or(0)) < window.as_secs() {
                self.stats.group_cache_hits += 1;
                w.relay(cx, &r);
            } else {
                w.held.push(member);
            }
        }
        w.flush = w.until - FLUSH_AHEAD.min(window.mul_f64(0.25));
    }

    /// A client's window nears its end: the held cached answers of members that have not answered go to
    /// it.
    pub(super) fn flush(&mut self, cx: &mut Context<'_>, w: &mut GroupWaiter) {
        for member in std::mem::take(&mut w.held).into_iter().filter(|m| !self.heard.contains(m)) {
            if let Lookup::Fresh(r) = self.cache.lookup(&member_key(self.prefix, member), cx.now()) {
                self.stats.group_cache_hits += 1;
                w.relay(cx, &r);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_proto::wire::ContentFormat;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    /// Each of the three reasons to keep an answer, and an answer with none of them.
    #[test]
    fn an_answer_is_trusted_from_a_named_network_a_member_heard_before_or_under_group_oscore_only() {
        let group = sa("239.255.7.7:5683");
        let config = ProxyConfig { group_members: vec!["10.1.0.0/16".parse().unwrap()], ..ProxyConfig::default() };
        let mut known = KnownMembers::default();
        known.learn(group, &[sa("10.9.0.2:5683")]);
        let plain = Response::content(ContentFormat::TEXT_PLAIN, "20.5");
        let mut protected = plain.clone();
        protected.options.set(OptionNumber::OSCORE, &[0x09, 0x01]);
        let trust = |member: &str, request_protected: bool, answer: &Response| {
            trusted(&config, &known, (group, sa(member)), request_protected, answer)
        };
        assert!(trust("10.1.3.4:5683", false, &plain), "a network the operator names");
        // Issue 41's caveat: with members named, an address outside them earns nothing by being heard (a
        // forger that answers every request); without names, being heard earlier is what the cache has.
        assert!(!trust("10.9.0.2:5683", false, &plain), "heard before, but outside the named members");
        let open = ProxyConfig::default();
        assert!(
            trusted(&open, &known, (group, sa("10.9.0.2:5683")), false, &plain),
            "no members named: heard answering an earlier request to the group"
        );
        assert!(!trusted(&open, &known, (group, sa("10.9.0.3:5683")), false, &plain), "never heard, none named");
        assert!(trust("192.0.2.66:5683", true, &protected), "Group OSCORE both ways");
        assert!(!trust("192.0.2.66:5683", false, &plain), "a stranger in the clear");
        assert!(!trust("192.0.2.66:5683", true, &plain), "a plain answer to a protected request");
        assert!(!trust("192.0.2.66:5683", false, &protected), "an OSCORE option on an answer to a plain request");
        let other = sa("239.255.7.8:5683");
        assert!(!trusted(&config, &known, (other, sa("10.9.0.2:5683")), false, &plain), "a member of another group");
    }

    #[test]
    fn known_members_are_bounded_per_group_and_in_groups_the_least_recently_heard_first_out() {
        let mut known = KnownMembers::default();
        let group = |i: usize| SocketAddr::from(([239, 255, 0, i as u8], 5683));
        let member = |i: usize| SocketAddr::from(([10, 0, (i >> 8) as u8, i as u8], 5683));
        let all: Vec<SocketAddr> = (0..MAX_KNOWN_MEMBERS + 10).map(member).collect();
        known.learn(group(0), &all);
        assert!(!known.contains(group(0), member(9)), "the first heard went first");
        assert!(known.contains(group(0), member(10)) && known.contains(group(0), member(MAX_KNOWN_MEMBERS + 9)));
        for g in 1..=MAX_KNOWN_GROUPS {
            known.learn(group(g), &[member(1)]);
        }
        assert!(!known.contains(group(0), member(10)), "the group heard least recently went");
        assert!(known.contains(group(1), member(1)) && known.contains(group(MAX_KNOWN_GROUPS), member(1)));
        known.learn(group(MAX_KNOWN_GROUPS + 1), &[]);
        assert!(known.contains(group(1), member(1)), "a request nobody answered teaches nothing and evicts nothing");
    }
}
