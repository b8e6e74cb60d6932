//! The proxy on corral-proto's in-memory network, in virtual time: clients, one or two proxies and origin
//! servers, each a real node; every behaviour of issue 13's list checked on the datagrams that went over
//! the net.

use corral_proto::testing::Net;
use corral_proto::wire::{Code, ContentFormat, Message, MessageType, OptionNumber};
use corral_proto::{
    Context, Duration, Endpoint, EndpointConfig, IncomingRequest, Instant, Node, Outcome, Request, RequestId, Response,
    SendParams, Service, ServiceHandle,
};
use corral_proxy::{Fib, NextHop, ProxyConfig, ProxyService};
use std::net::SocketAddr;

/// Records every outcome of the requests it sends.
/// The recording test client of corral-proto.
type Client = corral_proto::testing::Recorder;

/// An origin server with one resource, `/temp`: versioned, with an ETag per version, observable, changed by
/// PUT. It can answer late, or not at all.
struct Origin {
    version: u32,
    max_age: Option<u32>,
    delay: Duration,
    silent: bool,
    gets: u32,
    valid: u32,
    later: Vec<(Instant, corral_proto::InboundId, Response)>,
}

impl Origin {
    fn new() -> Origin {
        Origin {
            version: 1,
            max_age: None,
            delay: Duration::from_secs(0),
            silent: false,
            gets: 0,
            valid: 0,
            later: vec![],
        }
    }
}

impl Service for Origin {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        if self.silent {
            return;
        }
        let etag = self.version.to_be_bytes();
        let r = match req.request.method {
            Code::GET => {
                if !req.notification {
                    self.gets += 1;
                }
                let mut r = if req.request.options.get_all(OptionNumber::ETAG).any(|e| e == etag) {
                    self.valid += 1;
                    Response::new(Code::VALID)
                } else {
                    Response::content(ContentFormat::TEXT_PLAIN, format!("v{}", self.version))
                };
                r = r.with_option(OptionNumber::ETAG, &etag);
                if let Some(a) = self.max_age {
                    r = r.with_max_age(a);
                }
                r.observable()
            }
            Code::PUT => {
                self.version += 1;
                cx.changed("/temp");
                Response::new(Code::CHANGED)
            }
            _ => Response::error(Code::METHOD_NOT_ALLOWED, "GET or PUT"),
        };
        if self.delay.is_zero() {
            cx.respond(req.id, r);
        } else {
            self.later.push((cx.now() + self.delay, req.id, r));
        }
    }
    fn handle_timeout(&mut self, cx: &mut Context<'_>) {
        let now = cx.now();
        let (due, later) = std::mem::take(&mut self.later).into_iter().partition(|(t, _, _)| *t <= now);
        self.later = later;
        for (_, id, r) in due {
            cx.respond(id, r);
        }
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.later.iter().map(|(t, _, _)| *t).min()
    }
}

fn addr(last: u8) -> SocketAddr {
    SocketAddr::from(([192, 0, 2, last], 5683))
}

struct Lab {
    net: Net,
    clients: Vec<(usize, ServiceHandle)>,
    proxies: Vec<(usize, ServiceHandle)>,
    origins: Vec<(usize, ServiceHandle)>,
}

const PROXY: u8 = 1;
const PROXY_NSTART: u16 = 16;
const ORIGIN: u8 = 10;

impl Lab {
    /// `n_clients` clients at .100+, proxies at .1+ with the given FIBs, `n_origins` origins at .10+.
    fn new(n_clients: usize, proxies: Vec<(ProxyConfig, Fib)>, n_origins: usize) -> Lab {
        let mut net = Net::default();
        let mut seed = 1;
        let mut node = |nstart: u16| {
            seed += 1;
            let mut config = EndpointConfig::with_seed(seed);
            config.params.nstart = nstart;
            Node::new(Endpoint::new(config))
        };
        let mut lab = Lab { net: Net::default(), clients: vec![], proxies: vec![], origins: vec![] };
        for (i, (config, fib)) in proxies.into_iter().enumerate() {
            // A proxy multiplexes many clients onto one next hop: NSTART 1 would serialise them (and
            // deadlock a forwarding loop before its Hop-Limit runs out). The CLI's default is the same.
            let mut n = node(PROXY_NSTART);
            let h = n.mount("proxy", ProxyService::new(config, fib));
            n.set_forward_proxy(h);
            lab.proxies.push((net.add(addr(PROXY + i as u8), n), h));
        }
        for i in 0..n_origins {
            let mut n = node(1);
            let h = n.mount("temp", Origin::new());
            lab.origins.push((net.add(addr(ORIGIN + i as u8), n), h));
        }
        for i in 0..n_clients {
            let mut n = node(1);
            let h = n.mount("", Client::default());
            lab.clients.push((net.add(addr(100 + i as u8), n), h));
        }
        lab.net = net;
        lab
    }

    fn one(config: ProxyConfig, n_clients: usize) -> Lab {
        Lab::new(n_clients, vec![(config, Fib::default())], 1)
    }

    /// Client `c` sends `req` to proxy `p`.
    fn send(&mut self, c: usize, p: usize, req: Request) -> RequestId {
        let (node, h) = self.clients[c];
        let dst = self.net.addr(self.proxies[p].0);
        let now = self.net.now;
        self.net
            .node(node)
            .with_service(now, h, |_: &mut Client, cx| cx.request(dst, req, SendParams::default()))
            .unwrap()
            .expect("request starts")
    }

    fn outcome(&mut self, c: usize, id: RequestId) -> Option<Outcome> {
        let (node, h) = self.clients[c];
        let client = self.net.node(node).service::<Client>(h).unwrap();
        client.outcomes.iter().rev().find(|(_, i, _)| *i == id).map(|(_, _, o)| o.clone())
    }

    fn response(&mut self, c: usize, id: RequestId) -> Response {
        match self.outcome(c, id) {
            Some(Outcome::Response { response, .. }) => response,
            other => panic!("client {c}: expected a response, got {other:?}"),
        }
    }

    fn origin(&mut self, o: usize) -> &mut Origin {
        let (node, h) = self.origins[o];
        self.net.node(node).service_mut::<Origin>(h).unwrap()
    }

    fn proxy(&mut self, p: usize) -> &ProxyService {
        let (node, h) = self.proxies[p];
        self.net.node(node).service::<ProxyService>(h).unwrap()
    }

    /// Requests the proxy sent to an origin.
    fn upstream_requests(&self, p: usize, o: usize) -> Vec<Message> {
        let to = addr(ORIGIN + o as u8);
        let from = addr(PROXY + p as u8);
        self.net
            .records
            .iter()
            .filter(|r| r.from == from && r.to == to)
            .filter_map(|r| r.message())
            .filter(|m| m.code.is_request())
            .collect()
    }
}

fn get(uri: &str) -> Request {
    let mut r = Request::new(Code::GET);
    r.options.push_str(OptionNumber::PROXY_URI, uri);
    r
}

const TEMP: &str = "coap://192.0.2.10/temp";

#[test]
fn two_clients_at_once_cause_one_upstream_request_and_two_answers() {
    let mut lab = Lab::one(ProxyConfig::default(), 2);
    lab.origin(0).delay = Duration::from_millis(300);
    let a = lab.send(0, 0, get(TEMP));
    let b = lab.send(1, 0, get(TEMP));
    lab.net.run_for(Duration::from_secs(5));
    assert_eq!(lab.origin(0).gets, 1);
    assert_eq!(lab.upstream_requests(0, 0).len(), 1, "exactly one datagram upstream");
    assert_eq!(lab.response(0, a).payload_text(), "v1");
    assert_eq!(lab.response(1, b).payload_text(), "v1");
    // Each client got its answer with its own token: the proxy's responses carry both clients' tokens.
    let tokens = |lab: &Lab, c: u8| -> Vec<Vec<u8>> {
        lab.net
            .sent_by(addr(c))
            .into_iter()
            .filter(|(_, m)| m.code == Code::GET)
            .map(|(_, m)| m.token.as_bytes().to_vec())
            .collect()
    };
    let answered: Vec<(SocketAddr, Vec<u8>)> = lab
        .net
        .records
        .iter()
        .filter(|r| r.from == addr(PROXY))
        .filter_map(|r| r.message().filter(|m| m.code == Code::CONTENT).map(|m| (r.to, m.token.as_bytes().to_vec())))
        .collect();
    assert!(answered.contains(&(addr(100), tokens(&lab, 100)[0].clone())));
    assert!(answered.contains(&(addr(101), tokens(&lab, 101)[0].clone())));
    let s = lab.proxy(0).stats().clone();
    assert_eq!((s.misses, s.aggregated, s.upstream_requests), (1, 1, 1), "{s:?}");
}

#[test]
fn a_cache_hit_sends_nothing_upstream_and_ages_max_age() {
    let mut lab = Lab::one(ProxyConfig::default(), 1);
    lab.origin(0).max_age = Some(30);
    let a = lab.send(0, 0, get(TEMP));
    lab.net.run_for(Duration::from_secs(10));
    assert_eq!(lab.response(0, a).options.max_age(), Some(30));
    let before = lab.net.records.len();
    let b = lab.send(0, 0, get("coap://192.0.2.10:5683/temp")); // another spelling of the same URI
    lab.net.run_for(Duration::from_secs(1));
    let r = lab.response(0, b);
    assert_eq!(r.payload_text(), "v1");
    let age = r.options.max_age().unwrap();
    assert!((19..=20).contains(&age), "Max-Age less the ~10 s in the cache: {age}");
    assert_eq!(lab.net.records.len() - before, 2, "request and answer, nothing upstream");
    assert_eq!(lab.origin(0).gets, 1);
    assert_eq!(lab.proxy(0).stats().hits, 1);
}

#[test]
fn an_expired_entry_is_revalidated_with_its_etag() {
    let mut lab = Lab::one(ProxyConfig::default(), 1);
    lab.origin(0).max_age = Some(5);
    let a = lab.send(0, 0, get(TEMP));
    lab.net.run_for(Duration::from_secs(6));
    assert_eq!(lab.response(0, a).payload_text(), "v1");
    let b = lab.send(0, 0, get(TEMP));
    lab.net.run_for(Duration::from_secs(2));
    let ups = lab.upstream_requests(0, 0);
    assert_eq!(ups.len(), 2);
    assert_eq!(ups[1].options.get(OptionNumber::ETAG), Some(&1u32.to_be_bytes()[..]), "revalidation carries the ETag");
    assert_eq!(lab.origin(0).valid, 1, "the origin answered 2.03");
    let r = lab.response(0, b);
    assert_eq!((r.code, r.payload_text().as_ref(), r.options.max_age()), (Code::CONTENT, "v1", Some(5)));
    let s = lab.proxy(0).stats().clone();
    assert_eq!((s.revalidations, s.refreshed), (1, 1));
    // Refreshed: the next request is a hit again.
    lab.send(0, 0, get(TEMP));
    lab.net.run_for(Duration::from_secs(1));
    assert_eq!(lab.upstream_requests(0, 0).len(), 2);
    // A client that holds the current ETag gets 2.03 from the cache.
    let c = lab.send(0, 0, get(TEMP).with_option(OptionNumber::ETAG, &1u32.to_be_bytes()));
    lab.net.run_for(Duration::from_secs(1));
    assert_eq!(lab.response(0, c).code, Code::VALID);
}

fn two_hop_fib() -> Fib {
    let mut fib = Fib::default();
    let hops = vec![NextHop::new(addr(ORIGIN), false, false), NextHop::new(addr(ORIGIN + 1), false, false)];
    fib.push("/temp", hops).unwrap();
    fib
}

#[test]
fn two_next_hops_first_answer_wins_the_second_is_dropped() {
    let mut lab = Lab::new(1, vec![(ProxyConfig::default(), two_hop_fib())], 2);
    lab.origin(0).delay = Duration::from_millis(800);
    lab.origin(1).version = 7;
    let a = lab.send(0, 0, get("coap://sensor.example/temp"));
    lab.net.run_for(Duration::from_secs(5));
    assert_eq!(lab.upstream_requests(0, 0).len(), 1);
    assert_eq!(lab.upstream_requests(0, 1).len(), 1);
    let host = lab.upstream_requests(0, 1)[0].options.get(OptionNumber::URI_HOST).map(<[u8]>::to_vec);
    assert_eq!(host.as_deref(), Some(&b"sensor.example"[..]), "send_host=false: rewritten to Uri-* options");
    assert_eq!(lab.response(0, a).payload_text(), "v7", "the faster hop's answer");
    let s = lab.proxy(0).stats().clone();
    assert_eq!(s.duplicates_dropped, 1, "{s:?}");
    assert_eq!(s.per_hop["coap://192.0.2.11:5683"].wins, 1);
    assert_eq!(s.per_hop["coap://192.0.2.10:5683"].duplicates, 1);
}

#[test]
fn all_hops_failing_gives_the_last_error() {
    let cfg = ProxyConfig { upstream_timeout: Some(Duration::from_secs(3)), ..ProxyConfig::default() };
    let mut lab = Lab::new(1, vec![(cfg, two_hop_fib())], 2);
    lab.origin(0).silent = true;
    lab.origin(1).silent = true;
    let a = lab.send(0, 0, get("coap://192.0.2.10/temp"));
    lab.net.run_for(Duration::from_secs(10));
    let r = lab.response(0, a);
    assert_eq!(r.code, Code::GATEWAY_TIMEOUT, "{}", r.payload_text());
    assert!(r.payload_text().contains("no answer from"), "{}", r.payload_text());
}

#[test]
fn hop_limit_stops_a_two_proxy_loop_with_5_08() {
    let loop_to = |other: u8| {
        let mut fib = Fib::default();
        fib.push("/**", vec![NextHop::new(addr(other), false, true)]).unwrap();
        fib
    };
    let cfg = |name: &str| ProxyConfig { name: name.into(), ..ProxyConfig::default() };
    let mut lab = Lab::new(1, vec![(cfg("p1"), loop_to(PROXY + 1)), (cfg("p2"), loop_to(PROXY))], 0);
    let a = lab.send(0, 0, get(TEMP));
    lab.net.run_for(Duration::from_secs(60));
    let r = lab.response(0, a);
    assert_eq!(r.code, Code::HOP_LIMIT_REACHED);
    let path = r.payload_text().into_owned();
    assert!(path.starts_with("p1") && path.contains("p2"), "the 5.08 names the proxies it passed: {path}");
    let forwarded = lab.net.records.iter().filter(|r| r.message().is_some_and(|m| m.code == Code::GET)).count();
    assert_eq!(forwarded, 16, "client's request + 15 forwards, then it dies (16 hops)");
    assert_eq!(lab.proxy(0).stats().hop_limit_reached + lab.proxy(1).stats().hop_limit_reached, 1);
}

#[test]
fn a_full_pending_table_answers_5_03_with_max_age() {
    let cfg = ProxyConfig { max_pending: 1, ..ProxyConfig::default() };
    let mut lab = Lab::one(cfg, 2);
    lab.origin(0).delay = Duration::from_secs(1);
    let a = lab.send(0, 0, get(TEMP));
    let b = lab.send(1, 0, get("coap://192.0.2.10/temp?other"));
    lab.net.run_for(Duration::from_secs(5));
    let r = lab.response(1, b);
    assert_eq!(r.code, Code::SERVICE_UNAVAILABLE);
    assert_eq!(r.options.max_age(), Some(2));
    assert_eq!(lab.response(0, a).code, Code::CONTENT, "the pending one still completes");
    assert_eq!(lab.proxy(0).stats().overloaded, 1);
}

#[test]
fn a_retransmission_with_the_same_token_is_not_forwarded_again() {
    let mut lab = Lab::one(ProxyConfig::default(), 1);
    lab.origin(0).delay = Duration::from_secs(3);
    // Two NON datagrams from one client with one token and different MIDs: an application-level retry.
    let mut m = Message::new(
        MessageType::Non,
        Code::GET,
        corral_proto::wire::MessageId(1),
        corral_proto::wire::Token::new(&[9, 9]).unwrap(),
    );
    m.options.push_str(OptionNumber::PROXY_URI, TEMP);
    let (p, now) = (lab.proxies[0].0, lab.net.now);
    lab.net.node(p).handle_datagram(now, addr(100), None, &m.encode());
    m.mid = corral_proto::wire::MessageId(2);
    lab.net.node(p).handle_datagram(now, addr(100), None, &m.encode());
    lab.net.run_for(Duration::from_secs(10));
    assert_eq!(lab.origin(0).gets, 1);
    let s = lab.proxy(0).stats().clone();
    assert_eq!((s.retransmissions, s.aggregated), (1, 0), "{s:?}");
    let answers = lab.net.records.iter().filter(|r| r.from == addr(PROXY) && r.to == addr(100)).count();
    assert_eq!(answers, 1, "one answer for the one request");
}

#[test]
fn unsafe_requests_are_never_aggregated_and_invalidate_the_cache() {
    let mut lab = Lab::one(ProxyConfig::default(), 2);
    let a = lab.send(0, 0, get(TEMP));
    lab.net.run_for(Duration::from_secs(1));
    assert_eq!(lab.response(0, a).payload_text(), "v1");
    let put = |lab: &mut Lab, c| {
        let mut r = Request::new(Code::PUT).with_payload(b"x".to_vec());
        r.options.push_str(OptionNumber::PROXY_URI, TEMP);
        lab.send(c, 0, r)
    };
    let p1 = put(&mut lab, 0);
    let p2 = put(&mut lab, 1);
    lab.net.run_for(Duration::from_secs(2));
    assert_eq!(lab.response(0, p1).code, Code::CHANGED);
    assert_eq!(lab.response(1, p2).code, Code::CHANGED);
    assert_eq!(lab.origin(0).version, 3, "both PUTs reached the origin");
    let b = lab.send(0, 0, get(TEMP));
    lab.net.run_for(Duration::from_secs(1));
    assert_eq!(lab.response(0, b).payload_text(), "v3", "the cached v1 was invalidated");
}

#[test]
fn bad_proxy_options_get_the_rfc_codes() {
    let mut lab = Lab::one(ProxyConfig::default(), 1);
    let cases: Vec<(Request, Code)> = vec![
        (get("coap://192.0.2.10/a b"), Code::BAD_OPTION),
        (get("https://example.com/"), Code::PROXYING_NOT_SUPPORTED),
        (get("coaps://192.0.2.10/temp"), Code::PROXYING_NOT_SUPPORTED),
        (get("coap://224.0.1.187/temp"), Code::FORBIDDEN), // a group no ProxyConfig::groups allows
        (get("coap://unknown.example/temp"), Code::BAD_GATEWAY),
        (get(TEMP).with_option(OptionNumber::HOP_LIMIT, &[0]), Code::BAD_REQUEST),
        (get(TEMP).with_option(OptionNumber::HOP_LIMIT, &[1]), Code::HOP_LIMIT_REACHED),
        (get(TEMP).with_option(OptionNumber(66), b"x"), Code::BAD_GATEWAY), // elective, unsafe, unknown
        (
            {
                let mut r = Request::new(Code::GET).with_path("temp");
                r.options.push_str(OptionNumber::PROXY_SCHEME, "coap");
                r
            },
            Code::BAD_REQUEST,
        ),
    ];
    let ids: Vec<(RequestId, Code)> = cases.into_iter().map(|(r, c)| (lab.send(0, 0, r), c)).collect();
    lab.net.run_for(Duration::from_secs(5));
    for (id, want) in ids {
        let r = lab.response(0, id);
        assert_eq!(r.code, want, "{}", r.payload_text());
        assert!(!r.payload.is_empty(), "every refusal says why");
    }
    assert_eq!(lab.origin(0).gets, 0);
    // With Proxy-Scheme and Uri-Host the request goes through.
    let mut r = Request::new(Code::GET).with_path("temp");
    r.options.push_str(OptionNumber::PROXY_SCHEME, "coap");
    r.options.push_str(OptionNumber::URI_HOST, "192.0.2.10");
    let id = lab.send(0, 0, r);
    lab.net.run_for(Duration::from_secs(2));
    assert_eq!(lab.response(0, id).payload_text(), "v1");
}

#[test]
fn clients_outside_the_allow_list_are_refused() {
    let cfg = ProxyConfig { clients: vec!["10.0.0.0/8".parse().unwrap()], ..ProxyConfig::default() };
    let mut lab = Lab::one(cfg, 1);
    let a = lab.send(0, 0, get(TEMP));
    lab.net.run_for(Duration::from_secs(2));
    assert_eq!(lab.response(0, a).code, Code::FORBIDDEN);
    assert_eq!(lab.origin(0).gets, 0);
}

#[test]
fn observers_share_one_upstream_observation() {
    let mut lab = Lab::one(ProxyConfig::default(), 2);
    let obs = |lab: &mut Lab, c| lab.send(c, 0, get(TEMP).with_option(OptionNumber::OBSERVE, &[]));
    let a = obs(&mut lab, 0);
    let b = obs(&mut lab, 1);
    lab.net.run_for(Duration::from_secs(2));
    assert_eq!(lab.origin(0).gets, 1, "one registration upstream");
    for (c, id) in [(0, a), (1, b)] {
        let r = lab.response(c, id);
        assert_eq!(r.payload_text(), "v1");
        assert!(r.options.observe().is_some(), "client {c} is observing");
    }
    // The resource changes at the origin: both observers hear of it through the proxy.
    let (o, h) = lab.origins[0];
    let now = lab.net.now;
    lab.net.node(o).with_service(now, h, |s: &mut Origin, cx| {
        s.version = 2;
        cx.changed("/temp");
    });
    lab.net.run_for(Duration::from_secs(2));
    assert_eq!(lab.response(0, a).payload_text(), "v2");
    assert_eq!(lab.response(1, b).payload_text(), "v2");
    let s = lab.proxy(0).stats().clone();
    assert_eq!((s.observations, s.notifications), (1, 1), "{s:?}");
}

#[test]
fn the_status_and_fib_resources_are_served_locally() {
    let mut lab = Lab::new(1, vec![(ProxyConfig::default(), two_hop_fib())], 1);
    let a = lab.send(0, 0, Request::get("proxy"));
    let b = lab.send(0, 0, Request::get("proxy/fib"));
    let c = lab.send(0, 0, Request::get(".well-known/core"));
    lab.net.run_for(Duration::from_secs(2));
    let status: serde_json::Value = serde_json::from_slice(&lab.response(0, a).payload).unwrap();
    assert_eq!(status["cache"]["max_entries"], 40);
    let fib: serde_json::Value = serde_json::from_slice(&lab.response(0, b).payload).unwrap();
    assert_eq!(fib["rules"][0]["match"], "/temp");
    assert_eq!(fib["rules"][0]["next"][1]["send_host"], false);
    let links = lab.response(0, c).payload_text().into_owned();
    assert!(links.contains("</proxy>;") && links.contains("corral.proxy"), "{links}");
}

/// The cache listing names what other clients asked for, and a purge would send every request upstream
/// again: both are for the proxy's own machine, and a client elsewhere gets 4.03 and changes nothing.
#[test]
fn the_cache_is_listed_and_purged_from_this_machine_only() {
    let mut lab = Lab::one(ProxyConfig::default(), 1);
    let a = lab.send(0, 0, get(TEMP));
    lab.net.run_for(Duration::from_secs(2));
    assert_eq!(lab.response(0, a).payload_text(), "v1");
    let list = lab.send(0, 0, Request::get("proxy/cache"));
    let purge = lab.send(0, 0, Request::new(Code::DELETE).with_path("proxy/cache"));
    lab.net.run_for(Duration::from_secs(2));
    assert_eq!(lab.response(0, list).code, Code::FORBIDDEN);
    assert_eq!(lab.response(0, purge).code, Code::FORBIDDEN);
    let status = lab.send(0, 0, Request::get("proxy"));
    lab.net.run_for(Duration::from_secs(2));
    let status: serde_json::Value = serde_json::from_slice(&lab.response(0, status).payload).unwrap();
    assert_eq!(status["cache"]["entries"], 1, "the entry is still cached");
}

#[test]
fn without_aggregation_each_client_is_forwarded() {
    let cfg = ProxyConfig { aggregate: false, cache_entries: 0, ..ProxyConfig::default() };
    let mut lab = Lab::one(cfg, 2);
    lab.origin(0).delay = Duration::from_millis(300);
    let a = lab.send(0, 0, get(TEMP));
    let b = lab.send(1, 0, get(TEMP));
    lab.net.run_for(Duration::from_secs(5));
    assert_eq!(lab.origin(0).gets, 2, "a plain forward proxy: one upstream request per client");
    assert_eq!(lab.response(0, a).payload_text(), "v1");
    assert_eq!(lab.response(1, b).payload_text(), "v1");
    assert_eq!(lab.proxy(0).stats().aggregated, 0);
}

/// Issue 26 item 9: when the endpoint drops a downstream observer (here it deregisters; a rejected or
/// unacknowledged notification or a bounced one is the same), the proxy hears of it at once
/// (`Service::observer_gone`) and, with no observer left, ends its upstream observation then — not at the
/// origin's next notification, which may be hours away.
#[test]
fn the_upstream_observation_ends_when_the_last_observer_is_gone() {
    let mut lab = Lab::one(ProxyConfig::default(), 1);
    let a = lab.send(0, 0, get(TEMP).with_option(OptionNumber::OBSERVE, &[]));
    lab.net.run_for(Duration::from_secs(2));
    assert!(lab.response(0, a).options.observe().is_some(), "observing");
    let (o, _) = lab.origins[0];
    assert_eq!(lab.net.node(o).endpoint().observer_count("/temp"), 1, "the proxy observes the origin");
    let (c, h) = lab.clients[0];
    let now = lab.net.now;
    lab.net.node(c).with_service(now, h, |_: &mut Client, cx| cx.deregister(a));
    // Nothing changes at the origin: no notification comes to end the upstream observation.
    lab.net.run_for(Duration::from_secs(5));
    assert_eq!(lab.proxy(0).occupancy().2, 0, "the proxy forgot the observation");
    assert_eq!(lab.net.node(o).endpoint().observer_count("/temp"), 0, "the origin was told");
}
