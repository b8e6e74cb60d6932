//! Group requests through the proxy (draft-ietf-core-groupcomm-proxy) on corral-proto's in-memory network,
//! in virtual time: a client, the proxy and members joined to a group. What the real-socket tests
//! (`crates/corral/tests/e2e/proxy_group.rs`) cannot arrange: a client that never receives the proxy's Echo
//! challenge (a spoofer), more members than the fan-out budget, more group requests than the table holds;
//! the cache of members' answers over their Max-Age (§7 of the draft), a member that falls silent, and
//! members that revalidate the proxy's ETags.

use corral_proto::testing::{Net, Recorder};
use corral_proto::wire::{decode_reply_from, Code, ContentFormat, OptionNumber};
use corral_proto::{
    Context, Duration, Endpoint, EndpointConfig, IncomingRequest, Instant, Node, Outcome, Prefix, Request, Response,
    SendParams, Service, ServiceHandle,
};
use corral_proxy::{Fib, ProxyConfig, ProxyService};
use std::net::{IpAddr, SocketAddr};

const GROUP: [u8; 4] = [239, 255, 77, 40];

/// A member: answers GET /s/t with its own name, with a Max-Age if it has one; with `etag`, its answer
/// carries the ETag `m<n>` and a request that names it gets 2.03 Valid.
struct Member {
    n: u8,
    max_age: Option<u32>,
    etag: bool,
}

impl Service for Member {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        let tag = format!("m{}", self.n).into_bytes();
        let mut r = if self.etag && req.request.options.get_all(OptionNumber::ETAG).any(|t| t == tag) {
            Response::new(Code::VALID)
        } else {
            Response::content(ContentFormat::TEXT_PLAIN, format!("member {}", self.n))
        };
        if self.etag {
            r = r.with_option(OptionNumber::ETAG, &tag);
        }
        if let Some(age) = self.max_age {
            r = r.with_max_age(age);
        }
        cx.respond(req.id, r);
    }
}

fn addr(last: u8) -> SocketAddr {
    SocketAddr::from(([192, 0, 2, last], 5683))
}

struct Lab {
    net: Net,
    client: (usize, ServiceHandle),
    proxy: (usize, ServiceHandle),
}

impl Lab {
    fn new(config: ProxyConfig, members: u8) -> Lab {
        Lab::with(config, members, None, false)
    }

    fn with(config: ProxyConfig, members: u8, max_age: Option<u32>, etag: bool) -> Lab {
        let mut net = Net::default();
        let mut p = Node::new(Endpoint::new(EndpointConfig::with_seed(1)));
        let h = p.mount("proxy", ProxyService::new(config, Fib::default()));
        p.set_forward_proxy(h);
        let proxy = (net.add(addr(1), p), h);
        for m in 0..members {
            let mut n = Node::new(Endpoint::new(EndpointConfig::with_seed(10 + u64::from(m))));
            n.mount("s/t", Member { n: m, max_age, etag });
            let i = net.add(addr(10 + m), n);
            net.join(i, IpAddr::from(GROUP));
        }
        // NSTART 4: a second request to the proxy need not wait for the first's exchange to end.
        let mut cc = EndpointConfig::with_seed(2);
        cc.params.nstart = 4;
        let mut c = Node::new(Endpoint::new(cc));
        let ch = c.mount("", Recorder::default());
        let client = (net.add(addr(100), c), ch);
        Lab { net, client, proxy }
    }

    fn send(&mut self, path: &str, timeout: u64) -> corral_proto::RequestId {
        let mut r = Request::new(Code::GET);
        r.options.push_str(OptionNumber::PROXY_URI, &format!("coap://239.255.77.40/{path}"));
        r.options.push_uint(OptionNumber::MULTICAST_TIMEOUT, timeout);
        let (node, h) = self.client;
        let dst = addr(1);
        // As `corral get --mc-timeout` does: the client collects answers for T' + 1 s.
        let window = Some(Duration::from_secs(timeout + 1));
        let params = SendParams { confirmable: false, multicast_window: window, ..SendParams::default() };
        let now = self.net.now;
        self.net
            .node(node)
            .with_service(now, h, |_: &mut Recorder, cx| cx.request(dst, r, params))
            .unwrap()
            .expect("request starts")
    }

    /// Sends a group request for s/t with Multicast-Timeout `timeout` and runs for `secs`.
    fn ask(&mut self, timeout: u64, secs: u64) -> corral_proto::RequestId {
        let id = self.send("s/t", timeout);
        self.run(secs);
        id
    }

    fn answers(&mut self) -> Vec<(Code, Option<SocketAddr>)> {
        let replies = self.replies();
        replies.into_iter().map(|(_, _, member, r)| (r.code, member)).collect()
    }

    /// Every response the client received: when, to which request, from which member (Reply-From).
    fn replies(&mut self) -> Vec<(Instant, corral_proto::RequestId, Option<SocketAddr>, Response)> {
        let (node, h) = self.client;
        let rec = self.net.node(node).service::<Recorder>(h).unwrap();
        rec.outcomes
            .iter()
            .filter_map(|(at, id, o)| match o {
                Outcome::Response { response, .. } => {
                    let member =
                        response.options.get(OptionNumber::REPLY_FROM).map(|v| decode_reply_from(v).unwrap().1);
                    Some((*at, *id, member, response.clone()))
                }
                _ => None,
            })
            .collect()
    }

    /// Datagrams sent to the group (the network records one delivery per member: told apart by MID).
    fn to_group(&self) -> usize {
        let group = SocketAddr::from((GROUP, 5683));
        let mids: std::collections::BTreeSet<_> =
            self.net.records.iter().filter(|r| r.to == group).filter_map(|r| r.message()).map(|m| m.mid).collect();
        mids.len()
    }

    fn stats(&mut self) -> corral_proxy::Stats {
        let (node, h) = self.proxy;
        self.net.node(node).service::<ProxyService>(h).unwrap().stats().clone()
    }

    fn run(&mut self, secs: u64) {
        let until: Instant = self.net.now + Duration::from_secs(secs);
        self.net.run_until(until);
    }
}

/// The group allowed, its members' network named (their answers are cached from the first).
fn allowing() -> ProxyConfig {
    ProxyConfig {
        groups: vec![Prefix::host(IpAddr::from(GROUP))],
        group_members: vec!["192.0.2.0/24".parse().unwrap()],
        ..ProxyConfig::default()
    }
}

/// A forger on the link: it hears the group request (its token is in clear) and answers "phantom" from an
/// address of its own with the longest Max-Age there is.
struct Forger;

impl Service for Forger {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        cx.respond(req.id, Response::content(ContentFormat::TEXT_PLAIN, "phantom").with_max_age(u32::MAX));
    }
}

impl Lab {
    /// A forger at `at` that hears the group.
    fn add_forger(&mut self, at: SocketAddr) {
        let mut n = Node::new(Endpoint::new(EndpointConfig::with_seed(66)));
        n.mount("s/t", Forger);
        let i = self.net.add(at, n);
        self.net.join(i, IpAddr::from(GROUP));
    }

    fn group_cache_entries(&mut self) -> usize {
        let (node, h) = self.proxy;
        self.net.node(node).service::<ProxyService>(h).unwrap().group_cache_occupancy().0
    }
}

#[test]
fn every_member_answers_once_with_reply_from_naming_it() {
    let mut lab = Lab::new(allowing(), 3);
    lab.send("s/t", 8);
    lab.run(12);
    let mut members: Vec<SocketAddr> = lab.answers().into_iter().filter_map(|(_, m)| m).collect();
    members.sort();
    assert_eq!(members, vec![addr(10), addr(11), addr(12)], "{:?}", lab.answers());
    assert_eq!(lab.to_group(), 1, "one multicast datagram");
}

#[test]
fn a_client_that_never_sees_the_echo_challenge_sends_nothing_to_the_group() {
    let mut lab = Lab::new(allowing(), 3);
    let client = addr(100);
    // A spoofer: whatever the proxy sends back to the address it used never reaches it.
    lab.net.set_drop(move |r| r.to == client);
    lab.send("s/t", 8);
    lab.run(12);
    assert_eq!(lab.to_group(), 0, "the group was not asked");
    assert!(lab.stats().group_challenges >= 1, "{:?}", lab.stats());
}

#[test]
fn the_fan_out_budget_bounds_the_answers_relayed() {
    let mut lab = Lab::new(ProxyConfig { max_group_answers: 2, ..allowing() }, 5);
    lab.send("s/t", 8);
    lab.run(12);
    let relayed: Vec<_> = lab.answers().into_iter().filter(|(_, m)| m.is_some()).collect();
    assert_eq!(relayed.len(), 2, "{relayed:?}");
    let s = lab.stats();
    assert_eq!((s.group_answers, s.group_answers_dropped), (2, 3), "{s:?}");
}

#[test]
fn group_requests_collecting_at_once_are_bounded() {
    let mut lab = Lab::new(ProxyConfig { max_group_exchanges: 1, ..allowing() }, 2);
    lab.send("s/t", 8);
    lab.run(1);
    lab.send("s/h", 8);
    lab.run(12);
    assert_eq!(lab.to_group(), 1, "the second group request was not sent");
    assert!(lab.answers().iter().any(|(c, m)| *c == Code::SERVICE_UNAVAILABLE && m.is_none()), "{:?}", lab.answers());
}

/// The answers to request `id`: (when, member, Max-Age, payload).
fn answers_to(lab: &mut Lab, id: corral_proto::RequestId) -> Vec<(Instant, SocketAddr, Option<u32>, String)> {
    let replies = lab.replies().into_iter().filter(|(_, i, _, _)| *i == id);
    replies.filter_map(|(at, _, m, r)| Some((at, m?, r.options.max_age(), r.payload_text().into_owned()))).collect()
}

/// The members whose answers request `id` got, in the order they came.
fn members_answering(lab: &mut Lab, id: corral_proto::RequestId) -> Vec<SocketAddr> {
    answers_to(lab, id).iter().map(|a| a.1).collect()
}

#[test]
fn a_member_silent_the_second_time_is_answered_from_the_cache_before_the_window_ends() {
    let mut lab = Lab::new(allowing(), 3);
    lab.ask(8, 10);
    let silent = addr(12);
    lab.net.set_drop(move |r| r.from == silent);
    let sent = lab.net.now;
    let second = lab.ask(8, 10);
    let got = answers_to(&mut lab, second);
    let mut members = members_answering(&mut lab, second);
    members.sort();
    assert_eq!(members, vec![addr(10), addr(11), addr(12)], "every member's answer: {got:?}");
    assert_eq!(lab.to_group(), 2, "the proxy does not know the group's members: the request goes out again");
    let cached = got.iter().find(|a| a.1 == silent).unwrap();
    assert!(cached.0 >= sent + Duration::from_secs(7), "held until the window nears its end: {got:?}");
    assert!(cached.2.is_some_and(|age| age < 60), "with the Max-Age it has left: {cached:?}");
    assert_eq!(cached.3, "member 2");
    assert_eq!(lab.stats().group_cache_hits, 1, "{:?}", lab.stats());
}

#[test]
fn a_cached_answer_that_expires_within_the_window_goes_at_once() {
    let mut lab = Lab::with(allowing(), 3, Some(10), false);
    lab.ask(6, 7);
    let sent = lab.net.now;
    let second = lab.ask(8, 10);
    let got = answers_to(&mut lab, second);
    let early: Vec<_> = got.iter().filter(|a| a.2.is_some_and(|age| age < 10)).collect();
    assert_eq!(early.len(), 3, "each member's cached answer, with less than its Max-Age left: {got:?}");
    assert!(early.iter().all(|a| a.0 < sent + Duration::from_secs(1)), "at once: {got:?}");
    assert_eq!(got.len(), 6, "and each member's own answer as it comes: {got:?}");
    assert_eq!(lab.stats().group_cache_hits, 3, "{:?}", lab.stats());
}

#[test]
fn a_silent_member_is_answered_from_the_cache_until_its_max_age_ends() {
    let mut lab = Lab::with(allowing(), 3, Some(30), false);
    lab.ask(6, 7);
    let silent = addr(12);
    lab.net.set_drop(move |r| r.from == silent);
    let within = lab.ask(6, 8);
    let members = members_answering(&mut lab, within);
    assert!(members.contains(&silent), "within its Max-Age: {members:?}");
    lab.run(30);
    let after = lab.ask(6, 8);
    let members = members_answering(&mut lab, after);
    assert!(!members.contains(&silent), "after it: {members:?}");
    assert_eq!(members.len(), 2, "{members:?}");
    assert_eq!(lab.stats().group_cache_hits, 1, "{:?}", lab.stats());
}

#[test]
fn members_revalidate_the_proxys_etags_and_the_client_gets_the_representation() {
    let mut lab = Lab::with(allowing(), 3, Some(5), true);
    lab.ask(6, 12);
    let second = lab.ask(6, 8);
    let group = SocketAddr::from((GROUP, 5683));
    let requests: Vec<_> = lab.net.records.iter().filter(|r| r.to == group).filter_map(|r| r.message()).collect();
    let last = requests.last().unwrap();
    let mut tags: Vec<&[u8]> = last.options.get_all(OptionNumber::ETAG).collect();
    tags.sort();
    assert_eq!(tags, [&b"m0"[..], b"m1", b"m2"], "the second multicast request carries the cached ETags");
    let got = answers_to(&mut lab, second);
    let mut bodies: Vec<&str> = got.iter().map(|a| a.3.as_str()).collect();
    bodies.sort();
    assert_eq!(bodies, ["member 0", "member 1", "member 2"], "2.03s turned into the cached 2.05s: {got:?}");
    assert!(got.iter().all(|a| a.2 == Some(5)), "with the refreshed Max-Age: {got:?}");
    assert_eq!(lab.stats().group_revalidated, 3, "{:?}", lab.stats());
}

#[test]
fn the_group_cache_is_bounded_by_entries_and_bytes() {
    let mut lab = Lab::new(ProxyConfig { group_cache_entries: 2, ..allowing() }, 5);
    lab.ask(8, 12);
    assert_eq!(lab.answers().iter().filter(|a| a.1.is_some()).count(), 5, "all relayed");
    let (node, h) = lab.proxy;
    let (entries, _) = lab.net.node(node).service::<ProxyService>(h).unwrap().group_cache_occupancy();
    assert_eq!(entries, 2);
    let mut lab = Lab::new(ProxyConfig { group_cache_bytes: 300, ..allowing() }, 5);
    lab.ask(8, 12);
    let (node, h) = lab.proxy;
    let (entries, bytes) = lab.net.node(node).service::<ProxyService>(h).unwrap().group_cache_occupancy();
    assert!(bytes <= 300 && (1..5).contains(&entries), "{entries} entries, {bytes} bytes");
}

/// Issue 41 item 9: a host on the link answers the group request once, from a non-member address, with
/// Max-Age 4294967295. The client of that request hears it (a group's client hears whoever answers); the
/// forger leaves, and the next client does not get its answer from the cache.
#[test]
fn a_forgers_answer_is_relayed_but_not_cached_and_later_clients_do_not_hear_it() {
    let mut lab = Lab::new(allowing(), 2);
    let forger = SocketAddr::from(([198, 51, 100, 66], 5683));
    lab.add_forger(forger);
    let first = lab.ask(8, 10);
    assert!(members_answering(&mut lab, first).contains(&forger), "relayed to the client that asked");
    assert_eq!(lab.group_cache_entries(), 2, "the members' answers are kept, the forger's is not");
    lab.net.set_drop(move |r| r.from == forger);
    let second = lab.ask(8, 10);
    let got = answers_to(&mut lab, second);
    assert!(got.iter().all(|a| a.1 != forger && a.3 != "phantom"), "the forger is gone: {got:?}");
    assert_eq!(got.len(), 2, "{got:?}");
    let stats = lab.stats();
    assert_eq!((stats.group_answers_untrusted, stats.group_cache_hits), (1, 0), "{stats:?}");
}

/// Without members named, an address is trusted once it answered an earlier request to the group: the
/// first request's answers are relayed only, the second's are kept — with Max-Age at most
/// `group_cache_max_age` (60 s), however long they asked for.
#[test]
fn members_heard_before_are_kept_and_for_no_longer_than_the_cap() {
    let config = ProxyConfig { group_members: Vec::new(), ..allowing() };
    let mut lab = Lab::with(config, 3, Some(u32::MAX), false);
    lab.ask(8, 10);
    assert_eq!(lab.group_cache_entries(), 0, "nobody was heard before the first request");
    lab.ask(8, 10);
    assert_eq!(lab.group_cache_entries(), 3, "each member was heard before the second");
    let silent = addr(12);
    lab.net.set_drop(move |r| r.from == silent);
    let third = lab.ask(8, 10);
    let got = answers_to(&mut lab, third);
    let cached = got.iter().find(|a| a.1 == silent).expect("the silent member's answer from the cache");
    assert!(cached.2.is_some_and(|age| age <= 60), "Max-Age capped: {cached:?}");
    lab.run(60);
    let fourth = lab.ask(8, 10);
    assert!(!members_answering(&mut lab, fourth).contains(&silent), "gone after the cap, not 136 years");
    assert_eq!(lab.stats().group_answers_untrusted, 3, "{:?}", lab.stats());
}
