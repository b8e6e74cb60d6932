//! Group requests through the proxy (draft-ietf-core-groupcomm-proxy) on corral-proto's in-memory network,
//! in virtual time: a client, the proxy and members joined to a group. What the real-socket tests
//! (`crates/corral/tests/e2e/proxy_group.rs`) cannot arrange: a client that never receives the proxy's Echo
//! challenge (a spoofer), more members than the fan-out budget, more group requests than the table holds.

use corral_proto::testing::{Net, Recorder};
use corral_proto::wire::{decode_reply_from, Code, ContentFormat, OptionNumber};
use corral_proto::{
    Context, Duration, Endpoint, EndpointConfig, IncomingRequest, Instant, Node, Outcome, Prefix, Request, Response,
    SendParams, Service, ServiceHandle,
};
use corral_proxy::{Fib, ProxyConfig, ProxyService};
use std::net::{IpAddr, SocketAddr};

const GROUP: [u8; 4] = [239, 255, 77, 40];

/// A member: answers GET /s/t with its own name.
struct Member(u8);

impl Service for Member {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        cx.respond(req.id, Response::content(ContentFormat::TEXT_PLAIN, format!("member {}", self.0)));
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
        let mut net = Net::default();
        let mut p = Node::new(Endpoint::new(EndpointConfig::with_seed(1)));
        let h = p.mount("proxy", ProxyService::new(config, Fib::default()));
        p.set_forward_proxy(h);
        let proxy = (net.add(addr(1), p), h);
        for m in 0..members {
            let mut n = Node::new(Endpoint::new(EndpointConfig::with_seed(10 + u64::from(m))));
            n.mount("s/t", Member(m));
            let i = net.add(addr(10 + m), n);
            net.join(i, IpAddr::from(GROUP));
        }
        let mut c = Node::new(Endpoint::new(EndpointConfig::with_seed(2)));
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
        let now = self.net.now;
        self.net
            .node(node)
            .with_service(now, h, |_: &mut Recorder, cx| cx.request(dst, r, SendParams::default()))
            .unwrap()
            .expect("request starts")
    }

    fn answers(&mut self) -> Vec<(Code, Option<SocketAddr>)> {
        let (node, h) = self.client;
        let rec = self.net.node(node).service::<Recorder>(h).unwrap();
        rec.outcomes
            .iter()
            .filter_map(|(_, _, o)| match o {
                Outcome::Response { response, .. } => Some((
                    response.code,
                    response.options.get(OptionNumber::REPLY_FROM).map(|v| decode_reply_from(v).unwrap().1),
                )),
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

fn allowing() -> ProxyConfig {
    ProxyConfig { groups: vec![Prefix::host(IpAddr::from(GROUP))], ..ProxyConfig::default() }
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
