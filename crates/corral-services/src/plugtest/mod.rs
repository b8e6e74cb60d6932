//! The resources of `corral serve`: the ETSI CoAP plugtest set (TD_COAP_CORE, _LINK, _BLOCK, _OBS) and a
//! few demo resources, as sans-IO services so that the simulator can run them too.
//!
//! Block-wise transfer (RFC 7959) and Observe (RFC 7641) are corral-proto's: `/large*` return or take
//! whole bodies and the endpoint cuts and assembles the blocks; `/obs*` mark their GET responses
//! observable and report changes with `Context::changed_with`, and the endpoint re-runs the GET handler
//! for each observer. The periodic change of `/obs*` is a service timer (`poll_timeout`), not a clock.
//!
//! - `/obs` (TD_COAP_OBS_01..10): changes every period with CON notifications; PUT replaces the value until
//!   the next change (observers that registered for another Content-Format get 4.06 and are dropped,
//!   OBS_08), DELETE ends every observation with 4.04 (OBS_07); the resource reappears once every observer
//!   was told (so the next test finds it; at once when nobody observes it), at the next PUT, or at the next
//!   change.
//! - `/obs-non`: the same with NON notifications.
//! - `/obs-large`: an observable representation larger than a block (the notification carries block 0,
//!   the client fetches the rest, RFC 7959 §3.4).
//! - `/obs-reset` (TD_COAP_OBS_04): POST drops every observer of `/obs*` without a last notification, as
//!   a server reboot does; observers notice when notifications stop and Max-Age runs out, and re-register.
//! - `/large` (TD_COAP_BLOCK_01/02), `/large-update` (PUT via Block1, BLOCK_03), `/large-create` (POST
//!   via Block1 creates `/large-create/N`, BLOCK_04), `/large-post` (POST via Block1, BLOCK_05: 2.04 with
//!   the whole body accepted; GET returns the last one).
//! - `/multi-format` (TD_COAP_CORE_20): text/plain, application/xml, application/json and application/cbor
//!   by Accept.

use corral_proto::wire::{Code, ContentFormat, OptionNumber, Token};
use corral_proto::{Context, Duration, InboundId, IncomingRequest, Instant, ResourceLink, Response, Service};
use std::collections::BTreeMap;
use std::net::SocketAddr;

mod demo;
mod obs;

pub use demo::{Echo, Hello, Stats};
use obs::Observed;

/// How long `/separate` waits before its separate response.
const SEPARATE_DELAY: Duration = Duration::from_millis(500);
/// The period over which `/obs*` values change (TD_COAP_OBS: "changes every 5 s").
pub const OBS_PERIOD: Duration = Duration::from_secs(5);
/// Observers of one resource whose Content-Format is remembered (for OBS_08); beyond it the oldest goes.
const MAX_REMEMBERED_OBSERVERS: usize = 1024;
/// Resources `/large-create` keeps; beyond it the oldest goes.
const MAX_CREATED: usize = 16;
/// Bytes `/large-create` keeps over all its resources; beyond it the oldest go (a demo server must not
/// become anybody's disk: 64 bodies of 16 MiB were 1 GiB of RSS).
const MAX_CREATED_BYTES: usize = 16 << 20;

/// `{"multi-format": "CBOR"}`: a map of one pair, a 12-byte text key and a 4-byte text value.
const MULTI_FORMAT_CBOR: &[u8] = b"\xa1\x6cmulti-format\x64CBOR";

/// A body and its Content-Format (none if the client gave none).
type Body = (Vec<u8>, Option<ContentFormat>);

/// An observer, as the service sees it: its address and token.
type ObserverId = (SocketAddr, Vec<u8>);

fn observer_id(from: SocketAddr, token: Token) -> ObserverId {
    (from, token.as_bytes().to_vec())
}

/// The plugtest resources; mount at the root (`""`): it answers the paths it knows and 4.04 otherwise.
pub struct Plugtest {
    test: Vec<u8>,
    test_cf: Option<ContentFormat>,
    validate: (Vec<u8>, u64),
    create1: Option<Vec<u8>>,
    large_update: Body,
    large_post: Body,
    large_created: BTreeMap<u32, Body>,
    next_created: u32,
    separate: Vec<(Instant, InboundId, bool)>,
    obs_period: Duration,
    /// When `/obs*` change next; `None` until the first request (before it nobody can be observing).
    next_change: Option<Instant>,
    /// How many times `/obs*` have changed.
    changes: u64,
    obs: Observed,
    obs_non: Observed,
}

impl Default for Plugtest {
    fn default() -> Self {
        Plugtest::new(OBS_PERIOD)
    }
}

fn text(code: Code, body: impl Into<Vec<u8>>) -> Response {
    Response::new(code).with_content_format(ContentFormat::TEXT_PLAIN).with_payload(body)
}

fn not_allowed(method: Code) -> Response {
    Response::error(Code::METHOD_NOT_ALLOWED, format!("{method} is not allowed on this resource"))
}

/// GET of a stored body: 4.06 if the request's Accept names another format.
fn stored((body, cf): &Body, r: &corral_proto::Request) -> Response {
    match (r.options.accept(), cf) {
        (Some(a), Some(cf)) if a != *cf => Response::error(Code::NOT_ACCEPTABLE, format!("only {cf} is available")),
        _ => {
            let resp = Response::new(Code::CONTENT).with_payload(body.clone());
            match cf {
                Some(cf) => resp.with_content_format(*cf),
                None => resp,
            }
        }
    }
}

impl Plugtest {
    /// The resources, with `/obs*` changing every `obs_period` (at least 10 ms).
    pub fn new(obs_period: Duration) -> Plugtest {
        Plugtest {
            test: b"Hello from the /test resource".to_vec(),
            test_cf: Some(ContentFormat::TEXT_PLAIN),
            validate: (b"validate v1".to_vec(), 1),
            create1: None,
            large_update: (Plugtest::large_body(), Some(ContentFormat::TEXT_PLAIN)),
            large_post: (Vec::new(), None),
            large_created: BTreeMap::new(),
            next_created: 1,
            separate: Vec::new(),
            obs_period: obs_period.max(Duration::from_millis(10)),
            next_change: None,
            changes: 0,
            obs: Observed::default(),
            obs_non: Observed::default(),
        }
    }

    /// The `/large` representation: 1,600 bytes of numbered lines (more than one 1024-byte block).
    pub fn large_body() -> Vec<u8> {
        let mut s = String::new();
        let mut i = 0;
        while s.len() < 1600 {
            i += 1;
            s.push_str(&format!("{i:03} |-------- the /large resource of the corral plugtest server --------|\n"));
        }
        s.truncate(1600);
        s.into_bytes()
    }

    /// Max-Age of the `/obs*` representations: valid until the next change (RFC 7641 §4.2).
    fn obs_max_age(&self) -> u32 {
        u32::try_from(self.obs_period.as_micros().div_ceil(1_000_000)).unwrap_or(u32::MAX).max(1)
    }

    /// `/large-create`: the resources created so far, as link-format.
    fn created_links(&self) -> String {
        let links: Vec<String> = self
            .large_created
            .iter()
            .map(|(n, (body, cf))| {
                let ct = cf.map(|c| format!(";ct={}", c.0)).unwrap_or_default();
                format!("</large-create/{n}>{ct};sz={}", body.len())
            })
            .collect();
        links.join(",")
    }

    fn etag(&self) -> [u8; 8] {
        self.validate.1.to_be_bytes()
    }

    fn handle(&mut self, cx: &mut Context<'_>, req: &IncomingRequest) -> Option<Response> {
        if self.next_change.is_none() {
            self.next_change = Some(cx.now() + self.obs_period);
        }
        let r = &req.request;
        let path: Vec<String> = r.path_segments().map(|s| s.into_owned()).collect();
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        let m = r.method;
        let response = match path.as_slice() {
            [] => match m {
                Code::GET => text(
                    Code::CONTENT,
                    "corral CoAP server: ETSI plugtest resources and demos. GET /.well-known/core lists them.",
                ),
                _ => not_allowed(m),
            },
            ["test"] => match m {
                Code::GET => {
                    let mut resp = Response::new(Code::CONTENT).with_payload(self.test.clone());
                    if let Some(cf) = self.test_cf {
                        resp = resp.with_content_format(cf);
                    }
                    resp
                }
                Code::POST => {
                    let mut resp = text(Code::CREATED, "created");
                    for seg in ["location1", "location2", "location3"] {
                        resp.options.push_str(OptionNumber::LOCATION_PATH, seg);
                    }
                    resp
                }
                Code::PUT => {
                    self.test = r.payload.clone();
                    self.test_cf = r.options.content_format();
                    Response::new(Code::CHANGED)
                }
                Code::DELETE => Response::new(Code::DELETED),
                _ => not_allowed(m),
            },
            ["separate"] => match m {
                Code::GET => {
                    // Acknowledge now, answer later: the response cannot be piggybacked (TD_COAP_CORE_09).
                    cx.accept(req.id);
                    self.separate.push((cx.now() + SEPARATE_DELAY, req.id, req.confirmable));
                    return None;
                }
                _ => not_allowed(m),
            },
            ["seg1", "seg2", "seg3"] => match m {
                Code::GET => text(Code::CONTENT, "the resource at /seg1/seg2/seg3"),
                _ => not_allowed(m),
            },
            ["query"] => match m {
                Code::GET => text(Code::CONTENT, format!("query: {}", r.options.query())),
                _ => not_allowed(m),
            },
            ["location-query"] => match m {
                Code::POST => {
                    let mut resp = text(Code::CREATED, "created");
                    resp.options.push_str(OptionNumber::LOCATION_QUERY, "first=1");
                    resp.options.push_str(OptionNumber::LOCATION_QUERY, "second=2");
                    resp
                }
                _ => not_allowed(m),
            },
            ["validate"] => self.validate(r),
            ["create1"] => match m {
                Code::PUT => {
                    let exists = self.create1.is_some();
                    if exists && r.options.contains(OptionNumber::IF_NONE_MATCH) {
                        Response::error(Code::PRECONDITION_FAILED, "/create1 already exists")
                    } else {
                        self.create1 = Some(r.payload.clone());
                        Response::new(if exists { Code::CHANGED } else { Code::CREATED })
                    }
                }
                Code::GET => match &self.create1 {
                    Some(body) => text(Code::CONTENT, body.clone()),
                    None => Response::error(Code::NOT_FOUND, "/create1 does not exist yet: PUT it"),
                },
                Code::DELETE => {
                    self.create1 = None;
                    Response::new(Code::DELETED)
                }
                _ => not_allowed(m),
            },
            ["multi-format"] => match (m, r.options.accept()) {
                (Code::GET, None | Some(ContentFormat::TEXT_PLAIN)) => text(Code::CONTENT, "multi-format: plain text"),
                (Code::GET, Some(ContentFormat::XML)) => {
                    Response::content(ContentFormat::XML, "<multi-format><text>multi-format: XML</text></multi-format>")
                }
                (Code::GET, Some(ContentFormat::JSON)) => {
                    Response::content(ContentFormat::JSON, "{\"multi-format\":\"JSON\"}")
                }
                // The same map in CBOR (RFC 8949): {"multi-format": "CBOR"}.
                (Code::GET, Some(ContentFormat::CBOR)) => Response::content(ContentFormat::CBOR, MULTI_FORMAT_CBOR),
                (Code::GET, Some(cf)) => Response::error(
                    Code::NOT_ACCEPTABLE,
                    format!("cannot produce {cf}; offered: text/plain (0), xml (41), json (50), cbor (60)"),
                ),
                _ => not_allowed(m),
            },
            ["link1" | "link2" | "link3"] => match m {
                Code::GET => text(Code::CONTENT, format!("the resource /{}", path[0])),
                _ => not_allowed(m),
            },
            ["path"] => match m {
                Code::GET => Response::content(ContentFormat::LINK_FORMAT, "</path/sub1>,</path/sub2>,</path/sub3>"),
                _ => not_allowed(m),
            },
            ["path", sub @ ("sub1" | "sub2" | "sub3")] => match m {
                Code::GET => text(Code::CONTENT, format!("the resource /path/{sub}")),
                _ => not_allowed(m),
            },
            ["large"] => match m {
                Code::GET => text(Code::CONTENT, Plugtest::large_body()),
                _ => not_allowed(m),
            },
            ["large-update"] => match m {
                Code::GET => stored(&self.large_update, r),
                Code::PUT => {
                    self.large_update = (r.payload.clone(), r.options.content_format());
                    Response::new(Code::CHANGED)
                }
                _ => not_allowed(m),
            },
            ["large-post"] => match m {
                Code::GET => stored(&self.large_post, r),
                Code::POST => {
                    // The endpoint assembled the Block1 blocks (2.31 Continue each); the last block's answer
                    // echoes Block1 with M=0 (RFC 7959 §2.3).
                    self.large_post = (r.payload.clone(), r.options.content_format());
                    text(Code::CHANGED, format!("accepted {} bytes", r.payload.len()))
                }
                _ => not_allowed(m),
            },
            ["obs-reset"] => match m {
                Code::POST => {
                    let n = self.reset_observers(cx);
                    text(Code::CHANGED, format!("observe state dropped: {n} observer(s) forgotten"))
                }
                _ => not_allowed(m),
            },
            ["large-create"] => match m {
                Code::GET => Response::content(ContentFormat::LINK_FORMAT, self.created_links()),
                Code::POST => {
                    let n = self.next_created;
                    self.next_created = self.next_created.wrapping_add(1).max(1);
                    // Bounded: a client POSTing forever replaces old entries instead of growing memory.
                    let held = |m: &BTreeMap<u32, Body>| m.values().map(|(b, _)| b.len()).sum::<usize>();
                    while !self.large_created.is_empty()
                        && (self.large_created.len() >= MAX_CREATED
                            || held(&self.large_created) + r.payload.len() > MAX_CREATED_BYTES)
                    {
                        self.large_created.pop_first();
                    }
                    self.large_created.insert(n, (r.payload.clone(), r.options.content_format()));
                    let mut resp = Response::new(Code::CREATED);
                    resp.options.push_str(OptionNumber::LOCATION_PATH, "large-create");
                    resp.options.push_str(OptionNumber::LOCATION_PATH, &n.to_string());
                    resp
                }
                _ => not_allowed(m),
            },
            ["large-create", n] => {
                let n = n.parse::<u32>().ok().filter(|n| self.large_created.contains_key(n));
                match (m, n) {
                    (Code::GET, Some(n)) => stored(&self.large_created[&n], r),
                    (Code::DELETE, Some(n)) => {
                        self.large_created.remove(&n);
                        Response::new(Code::DELETED)
                    }
                    (Code::GET | Code::DELETE, None) => Response::error(Code::NOT_FOUND, "no such created resource"),
                    _ => not_allowed(m),
                }
            }
            [name @ ("obs" | "obs-non")] => {
                let non = *name == "obs-non";
                match m {
                    Code::GET => self.get_observed(non, req),
                    _ => self.change_observed(cx, non, req),
                }
            }
            ["obs-large"] => match m {
                Code::GET => {
                    let mut body = format!("change {}\n", self.changes).into_bytes();
                    body.extend_from_slice(&Plugtest::large_body());
                    text(Code::CONTENT, body).with_max_age(self.obs_max_age()).observable()
                }
                _ => not_allowed(m),
            },
            _ => Response::error(Code::NOT_FOUND, format!("no resource at {}", r.options.path())),
        };
        Some(response)
    }

    /// `/validate`: ETag handling (TD_COAP_CORE_21..23): GET with the current ETag → 2.03; PUT changes the
    /// representation and its ETag, honouring If-Match.
    fn validate(&mut self, r: &corral_proto::Request) -> Response {
        let etag = self.etag();
        match r.method {
            Code::GET => {
                if r.options.get_all(OptionNumber::ETAG).any(|t| t == etag) {
                    Response::new(Code::VALID).with_option(OptionNumber::ETAG, &etag)
                } else {
                    text(Code::CONTENT, self.validate.0.clone()).with_option(OptionNumber::ETAG, &etag)
                }
            }
            Code::PUT => {
                let if_match: Vec<&[u8]> = r.options.get_all(OptionNumber::IF_MATCH).collect();
                let ok = if_match.is_empty() || if_match.iter().any(|t| t.is_empty() || *t == etag);
                if !ok {
                    return Response::error(Code::PRECONDITION_FAILED, "If-Match does not match the current ETag");
                }
                self.validate.1 += 1;
                self.validate.0 = if r.payload.is_empty() {
                    format!("validate v{}", self.validate.1).into_bytes()
                } else {
                    r.payload.clone()
                };
                Response::new(Code::CHANGED).with_option(OptionNumber::ETAG, &self.etag())
            }
            m => not_allowed(m),
        }
    }
}

impl Service for Plugtest {
    fn observer_gone(&mut self, _cx: &mut Context<'_>, path: &str, peer: SocketAddr, token: Token) {
        self.forget_observer(path, peer, token);
    }

    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        if let Some(response) = self.handle(cx, &req) {
            cx.respond(req.id, response);
        }
    }

    fn handle_timeout(&mut self, cx: &mut Context<'_>) {
        let now = cx.now();
        let (due, later): (Vec<_>, Vec<_>) = self.separate.drain(..).partition(|(at, _, _)| *at <= now);
        self.separate = later;
        for (_, id, _) in due {
            cx.respond(id, text(Code::CONTENT, "the separate response of /separate"));
        }
        if let Some(at) = self.next_change.filter(|at| *at <= now) {
            // The next change keeps the rhythm, but never lands in the past after a long pause.
            let next = at + self.obs_period;
            self.next_change = Some(if next <= now { now + self.obs_period } else { next });
            self.change(cx);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.separate.iter().map(|(at, _, _)| *at).chain(self.next_change).min()
    }

    fn links(&self) -> Vec<ResourceLink> {
        // Kept short (no titles): block-wise transfer would carry a longer document, but discovery in one
        // 1024-byte block suits every client, constrained ones included.
        let l = ResourceLink::new;
        vec![
            l("test").attr("rt", "test").attr("ct", "0"),
            l("separate").attr("ct", "0"),
            l("seg1/seg2/seg3").attr("ct", "0"),
            l("query").attr("ct", "0"),
            l("location-query"),
            l("validate").attr("ct", "0"),
            l("create1"),
            l("multi-format").attr("ct", "0 41 50 60"),
            l("link1").attr("rt", "Type1 Type2").attr("if", "If1"),
            l("link2").attr("rt", "Type2 Type3").attr("if", "If2"),
            l("link3").attr("rt", "Type1 Type3").attr("if", "foo"),
            l("path").attr("ct", "40"),
            l("path/sub1"),
            l("path/sub2"),
            l("path/sub3"),
            l("large").attr("rt", "block").attr("sz", "1600").attr("ct", "0"),
            l("large-update").attr("rt", "block").attr("sz", self.large_update.0.len().to_string()),
            l("large-create").attr("rt", "block").attr("ct", "40"),
            l("large-post").attr("rt", "block"),
            l("obs-reset"),
            l("obs").attr("rt", "observe").attr("ct", "0").flag("obs"),
            l("obs-non").attr("rt", "observe").attr("ct", "0").flag("obs"),
            l("obs-large").attr("rt", "observe").attr("ct", "0").flag("obs"),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_proto::testing::Net;
    use corral_proto::{Endpoint, EndpointConfig, Node, Request, SendParams};
    use std::net::SocketAddr;

    /// Runs the plugtest server and a client node on the in-memory network.
    fn exchange(requests: Vec<Request>) -> Vec<Response> {
        let mut net = Net::default();
        let server_addr: SocketAddr = "[2001:db8::1]:5683".parse().unwrap();
        let client_addr: SocketAddr = "[2001:db8::2]:5683".parse().unwrap();
        let mut server = Node::new(Endpoint::new(EndpointConfig::with_seed(1)));
        server.mount("", Plugtest::default());
        net.add(server_addr, server);
        let c = net.add(client_addr, Node::new(Endpoint::new(EndpointConfig::with_seed(2))));
        let mut out = Vec::new();
        for req in requests {
            let now = net.now;
            let id = net.node(c).endpoint_mut().request(now, server_addr, req, SendParams::default()).unwrap();
            let limit = net.now + Duration::from_secs(60);
            let mut got = None;
            while got.is_none() && net.step(limit) {
                while let Some(e) = net.node(c).poll_event() {
                    if let corral_proto::Event::Response { id: rid, response, .. } = e {
                        assert_eq!(rid, id);
                        got = Some(response);
                    }
                }
            }
            out.push(got.expect("a response"));
        }
        out
    }

    /// The plugtest server with `/obs*` changing every second, and a client, on the in-memory network.
    struct Obs {
        net: Net,
        c: usize,
        server: SocketAddr,
        seen: Vec<(corral_proto::RequestId, Response)>,
    }

    impl Obs {
        fn new() -> Obs {
            let mut net = Net::default();
            let server: SocketAddr = "[2001:db8::1]:5683".parse().unwrap();
            let mut node = Node::new(Endpoint::new(EndpointConfig::with_seed(3)));
            node.mount("", Plugtest::new(Duration::from_secs(1)));
            net.add(server, node);
            let c =
                net.add("[2001:db8::2]:5683".parse().unwrap(), Node::new(Endpoint::new(EndpointConfig::with_seed(4))));
            Obs { net, c, server, seen: Vec::new() }
        }

        fn request(&mut self, req: Request) -> corral_proto::RequestId {
            let now = self.net.now;
            self.net.node(self.c).endpoint_mut().request(now, self.server, req, SendParams::default()).unwrap()
        }

        /// Runs `ms` milliseconds; returns every response (notifications included) for `id`, keeping the
        /// others for later calls.
        fn responses(&mut self, id: corral_proto::RequestId, ms: u64) -> Vec<Response> {
            let limit = self.net.now + Duration::from_millis(ms);
            while self.net.step(limit) {
                while let Some(e) = self.net.node(self.c).poll_event() {
                    if let corral_proto::Event::Response { id: rid, response, .. } = e {
                        self.seen.push((rid, response));
                    }
                }
            }
            let (mine, rest) = std::mem::take(&mut self.seen).into_iter().partition(|(rid, _)| *rid == id);
            self.seen = rest;
            mine.into_iter().map(|(_, r)| r).collect()
        }

        fn observers(&mut self) -> usize {
            let s = self.net.node(0).endpoint().table_sizes();
            s.observers
        }
    }

    fn observe(path: &str) -> Request {
        Request::get(path).with_option(OptionNumber::OBSERVE, &[])
    }

    #[test]
    fn obs_notifies_every_period_with_con_and_obs_non_with_non() {
        let mut o = Obs::new();
        let id = o.request(observe("obs"));
        let r = o.responses(id, 5000);
        assert!(r.len() >= 5, "registration and one notification per second: {r:?}");
        let values: Vec<u64> = r.iter().map(|r| r.payload_text().parse().unwrap()).collect();
        assert!(values.windows(2).all(|w| w[1] == w[0] + 1), "{values:?}");
        assert!(r
            .iter()
            .all(|r| r.options.observe().is_some() && r.options.get_uint(OptionNumber::MAX_AGE) == Some(1)));
        let server = o.server;
        let types = |o: &Obs, from| {
            o.net
                .sent_by(from)
                .iter()
                .filter(|(_, m)| m.code == Code::CONTENT)
                .map(|(_, m)| m.mtype)
                .collect::<Vec<_>>()
        };
        assert!(types(&o, server).iter().skip(1).all(|t| *t == corral_proto::wire::MessageType::Con));
        let mut o = Obs::new();
        let id = o.request(observe("obs-non"));
        assert!(o.responses(id, 3000).len() >= 3);
        let t = types(&o, server);
        assert!(t.iter().skip(1).all(|t| *t == corral_proto::wire::MessageType::Non), "{t:?}");
    }

    #[test]
    fn obs_delete_ends_observations_with_4_04_and_put_of_another_format_with_4_06() {
        let mut o = Obs::new();
        let put = |cf: ContentFormat, body: &str| {
            Request::new(Code::PUT).with_path("obs").with_content_format(cf).with_payload(body.to_string())
        };
        let id = o.request(observe("obs"));
        assert_eq!(o.responses(id, 100).len(), 1);
        assert_eq!(o.observers(), 1);
        // TD_COAP_OBS_09: an update in the same format is notified.
        let p = o.request(put(ContentFormat::TEXT_PLAIN, "hi"));
        let seen = o.responses(id, 100);
        assert!(seen.iter().any(|r| r.code == Code::CONTENT && r.payload == b"hi"), "{seen:?}");
        assert_eq!(o.responses(p, 0)[0].code, Code::CHANGED);
        // TD_COAP_OBS_08: another format ends the observation with 4.06.
        let p = o.request(put(ContentFormat::JSON, "{}"));
        let seen = o.responses(id, 100);
        assert!(
            matches!(&seen[..], [r] if r.code == Code::NOT_ACCEPTABLE && r.options.observe().is_none()),
            "{seen:?}"
        );
        assert_eq!(o.responses(p, 0)[0].code, Code::CHANGED);
        assert_eq!(o.observers(), 0);
        // TD_COAP_OBS_07: DELETE ends every observation with 4.04.
        let id = o.request(observe("obs"));
        assert_eq!(o.responses(id, 100)[0].options.content_format(), Some(ContentFormat::JSON));
        assert_eq!(o.observers(), 1);
        let d = o.request(Request::new(Code::DELETE).with_path("obs"));
        let seen = o.responses(id, 100);
        assert!(matches!(&seen[..], [r] if r.code == Code::NOT_FOUND), "{seen:?}");
        assert_eq!(o.responses(d, 0)[0].code, Code::DELETED);
        assert_eq!(o.observers(), 0);
        // Its only observer was told: the resource is back at once, ready for the next test (OBS_08).
        let id = o.request(observe("obs"));
        assert_eq!(o.responses(id, 100)[0].code, Code::CONTENT);
        assert_eq!(o.observers(), 1);
        // TD_COAP_OBS_04 through /obs-reset: the observer is forgotten without a word; no notification
        // reaches it at the next change.
        let reset = o.request(Request::new(Code::POST).with_path("obs-reset"));
        assert_eq!(o.responses(reset, 100)[0].code, Code::CHANGED);
        o.responses(id, 0); // what arrived before the reset
        assert_eq!(o.observers(), 0);
        assert!(o.responses(id, 1500).is_empty(), "no notification after the reset");
        // Deleted with nobody observing: nobody to tell, so back at once (issue 46: an observer that
        // deregistered left nothing to wait for; before, /obs stayed away until the next change).
        let d = o.request(Request::new(Code::DELETE).with_path("obs"));
        assert_eq!(o.responses(d, 100)[0].code, Code::DELETED);
        let g = o.request(Request::get("obs"));
        assert_eq!(o.responses(g, 100)[0].code, Code::CONTENT);
    }

    #[test]
    fn obs_large_notifications_arrive_whole() {
        let mut o = Obs::new();
        let id = o.request(observe("obs-large"));
        let r = o.responses(id, 3000);
        assert!(r.len() >= 3, "{r:?}");
        for n in &r {
            assert!(
                n.payload.len() > 1024
                    && n.payload_text().ends_with(&String::from_utf8(Plugtest::large_body()).unwrap())
            );
        }
    }

    #[test]
    fn large_update_and_large_create_take_block_wise_bodies() {
        let body: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let r = exchange(vec![
            Request::new(Code::PUT)
                .with_path("large-update")
                .with_content_format(ContentFormat::OCTET_STREAM)
                .with_payload(body.clone()),
            Request::get("large-update"),
            Request::get("large-update").with_accept(ContentFormat::TEXT_PLAIN),
            Request::new(Code::POST)
                .with_path("large-create")
                .with_content_format(ContentFormat::OCTET_STREAM)
                .with_payload(body.clone()),
            Request::get("large-create/1"),
            Request::get("large-create"),
            Request::new(Code::DELETE).with_path("large-create/1"),
            Request::get("large-create/1"),
            Request::get("large"),
        ]);
        assert_eq!(r[0].code, Code::CHANGED);
        assert_eq!(r[1].payload, body);
        assert_eq!(r[1].options.content_format(), Some(ContentFormat::OCTET_STREAM));
        assert_eq!(r[2].code, Code::NOT_ACCEPTABLE);
        assert_eq!(r[3].code, Code::CREATED);
        let loc: Vec<&[u8]> = r[3].options.get_all(OptionNumber::LOCATION_PATH).collect();
        assert_eq!(loc, [&b"large-create"[..], b"1"]);
        assert_eq!(r[4].payload, body);
        assert_eq!(r[5].payload_text(), "</large-create/1>;ct=42;sz=5000");
        assert_eq!(r[6].code, Code::DELETED);
        assert_eq!(r[7].code, Code::NOT_FOUND);
        assert_eq!(r[8].payload, Plugtest::large_body());
    }

    #[test]
    fn validate_etag_cycle() {
        let r = exchange(vec![Request::get("validate")]);
        let etag = r[0].options.get(OptionNumber::ETAG).unwrap().to_vec();
        let r = exchange(vec![
            Request::get("validate"),
            Request::get("validate").with_option(OptionNumber::ETAG, &etag),
            Request::new(Code::PUT).with_path("validate").with_payload("v2"),
            Request::get("validate").with_option(OptionNumber::ETAG, &etag),
        ]);
        assert_eq!(r[1].code, Code::VALID);
        assert_eq!(r[2].code, Code::CHANGED);
        assert_eq!(r[3].code, Code::CONTENT);
        assert_eq!(r[3].payload, b"v2");
        assert_ne!(r[3].options.get(OptionNumber::ETAG), Some(&etag[..]));
    }

    #[test]
    fn create1_if_none_match_and_location_options() {
        let put = || {
            Request::new(Code::PUT).with_path("create1").with_option(OptionNumber::IF_NONE_MATCH, b"").with_payload("x")
        };
        let r = exchange(vec![
            put(),
            put(),
            Request::new(Code::POST).with_path("location-query"),
            Request::new(Code::POST).with_path("test"),
            Request::get("multi-format").with_accept(ContentFormat::XML),
            Request::get("multi-format").with_accept(ContentFormat::CBOR),
            Request::get("separate"),
            Request::get("nope"),
        ]);
        assert_eq!(r[0].code, Code::CREATED);
        assert_eq!(r[1].code, Code::PRECONDITION_FAILED);
        let lq: Vec<&[u8]> = r[2].options.get_all(OptionNumber::LOCATION_QUERY).collect();
        assert_eq!(lq, [&b"first=1"[..], b"second=2"]);
        assert_eq!(r[3].options.get_all(OptionNumber::LOCATION_PATH).count(), 3);
        assert_eq!(r[4].options.content_format(), Some(ContentFormat::XML));
        assert_eq!((r[5].code, r[5].options.content_format()), (Code::CONTENT, Some(ContentFormat::CBOR)));
        assert_eq!(r[5].payload, MULTI_FORMAT_CBOR);
        assert_eq!(r[6].payload_text(), "the separate response of /separate");
        assert_eq!(r[7].code, Code::NOT_FOUND);
    }
}
