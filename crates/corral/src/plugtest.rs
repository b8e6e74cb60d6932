//! The resources of `corral serve`: the ETSI CoAP plugtest set (TD_COAP_CORE, _LINK, _BLOCK, _OBS) and a
//! few demo resources, as sans-IO services so that the simulator can run them too.
//!
//! Block-wise (RFC 7959) and Observe (RFC 7641) belong to corral-proto and arrive with that work; until
//! then `/large*` and `/obs*` serve their current representation in one plain response. Each of them gets
//! its representation from one method ([`Plugtest::large_body`], [`Plugtest::obs_value`]), so turning
//! them into block-wise and observable resources only changes how the response is sent.

use corral_proto::wire::{Code, ContentFormat, OptionNumber};
use corral_proto::{Context, Duration, InboundId, IncomingRequest, Instant, ResourceLink, Response, Service};
use std::collections::BTreeMap;

/// How long `/separate` waits before its separate response.
const SEPARATE_DELAY: Duration = Duration::from_millis(500);
/// The period over which `/obs*` values change (TD_COAP_OBS: "changes every 5 s").
const OBS_PERIOD_SECS: u64 = 5;

/// The plugtest resources; mount at the root (`""`): it answers the paths it knows and 4.04 otherwise.
pub struct Plugtest {
    test: Vec<u8>,
    test_cf: Option<ContentFormat>,
    validate: (Vec<u8>, u64),
    create1: Option<Vec<u8>>,
    large_update: Vec<u8>,
    large_created: BTreeMap<u32, Vec<u8>>,
    next_created: u32,
    separate: Vec<(Instant, InboundId, bool)>,
}

impl Default for Plugtest {
    fn default() -> Self {
        Plugtest {
            test: b"Hello from the /test resource".to_vec(),
            test_cf: Some(ContentFormat::TEXT_PLAIN),
            validate: (b"validate v1".to_vec(), 1),
            create1: None,
            large_update: Plugtest::large_body(),
            large_created: BTreeMap::new(),
            next_created: 1,
            separate: Vec::new(),
        }
    }
}

fn text(code: Code, body: impl Into<Vec<u8>>) -> Response {
    Response::new(code).with_content_format(ContentFormat::TEXT_PLAIN).with_payload(body)
}

fn not_allowed(method: Code) -> Response {
    Response::error(Code::METHOD_NOT_ALLOWED, format!("{method} is not allowed on this resource"))
}

impl Plugtest {
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

    /// The current value of the `/obs*` resources: it changes every [`OBS_PERIOD_SECS`].
    pub fn obs_value(now: Instant) -> u64 {
        now.as_secs() / OBS_PERIOD_SECS
    }

    fn etag(&self) -> [u8; 8] {
        self.validate.1.to_be_bytes()
    }

    fn handle(&mut self, cx: &mut Context<'_>, req: &IncomingRequest) -> Option<Response> {
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
                (Code::GET, Some(cf)) => {
                    Response::error(Code::NOT_ACCEPTABLE, format!("cannot produce {cf}; try text/plain or xml"))
                }
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
                Code::GET => text(Code::CONTENT, self.large_update.clone()),
                Code::PUT => {
                    self.large_update = r.payload.clone();
                    Response::new(Code::CHANGED)
                }
                _ => not_allowed(m),
            },
            ["large-create"] => match m {
                Code::POST => {
                    let n = self.next_created;
                    self.next_created = self.next_created.wrapping_add(1);
                    // Bounded: a client POSTing forever replaces old entries instead of growing memory.
                    if self.large_created.len() >= 64 {
                        self.large_created.pop_first();
                    }
                    self.large_created.insert(n, r.payload.clone());
                    let mut resp = Response::new(Code::CREATED);
                    resp.options.push_str(OptionNumber::LOCATION_PATH, "large-create");
                    resp.options.push_str(OptionNumber::LOCATION_PATH, &n.to_string());
                    resp
                }
                _ => not_allowed(m),
            },
            ["large-create", n] => match (m, n.parse::<u32>().ok().and_then(|n| self.large_created.get(&n))) {
                (Code::GET, Some(body)) => text(Code::CONTENT, body.clone()),
                (Code::GET, None) => Response::error(Code::NOT_FOUND, "no such created resource"),
                _ => not_allowed(m),
            },
            ["obs" | "obs-non"] => match m {
                Code::GET => {
                    text(Code::CONTENT, Plugtest::obs_value(cx.now()).to_string()).with_max_age(OBS_PERIOD_SECS as u32)
                }
                _ => not_allowed(m),
            },
            ["obs-large"] => match m {
                Code::GET => {
                    let mut body = format!("value {}\n", Plugtest::obs_value(cx.now())).into_bytes();
                    body.extend_from_slice(&Plugtest::large_body());
                    text(Code::CONTENT, body).with_max_age(OBS_PERIOD_SECS as u32)
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
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.separate.iter().map(|(at, _, _)| *at).min()
    }

    fn links(&self) -> Vec<ResourceLink> {
        // Kept short (no titles): without block-wise transfer, /.well-known/core must fit one datagram that
        // libcoap accepts (1152 bytes).
        let l = ResourceLink::new;
        vec![
            l("test").attr("rt", "test").attr("ct", "0"),
            l("separate").attr("ct", "0"),
            l("seg1/seg2/seg3").attr("ct", "0"),
            l("query").attr("ct", "0"),
            l("location-query"),
            l("validate").attr("ct", "0"),
            l("create1"),
            l("multi-format").attr("ct", "0 41"),
            l("link1").attr("rt", "Type1 Type2").attr("if", "If1"),
            l("link2").attr("rt", "Type2 Type3").attr("if", "If2"),
            l("link3").attr("rt", "Type1 Type3").attr("if", "foo"),
            l("path").attr("ct", "40"),
            l("path/sub1"),
            l("path/sub2"),
            l("path/sub3"),
            l("large").attr("rt", "block").attr("sz", "1600").attr("ct", "0"),
            l("large-update").attr("rt", "block").attr("sz", "1600").attr("ct", "0"),
            l("large-create").attr("rt", "block"),
            l("obs").attr("rt", "observe").attr("ct", "0").flag("obs"),
            l("obs-non").attr("rt", "observe").attr("ct", "0").flag("obs"),
            l("obs-large").attr("rt", "observe").attr("ct", "0").flag("obs"),
        ]
    }
}

/// `/hello`: a greeting.
pub struct Hello;

impl Service for Hello {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        let response = match (req.request.method, cx.subpath(&req.request).is_empty()) {
            (Code::GET, true) => text(Code::CONTENT, "Hello from corral!"),
            (_, false) => Response::error(Code::NOT_FOUND, "no such resource"),
            (m, true) => not_allowed(m),
        };
        cx.respond(req.id, response);
    }

    fn links(&self) -> Vec<ResourceLink> {
        vec![ResourceLink::new("").attr("rt", "demo.hello").attr("ct", "0").attr("title", "Greeting")]
    }
}

/// `/echo`: answers any method with the request's payload and content format.
pub struct Echo;

impl Service for Echo {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        let r = &req.request;
        let mut response = Response::new(Code::CONTENT).with_payload(r.payload.clone());
        if let Some(cf) = r.options.content_format() {
            response = response.with_content_format(cf);
        }
        cx.respond(req.id, response);
    }

    fn links(&self) -> Vec<ResourceLink> {
        vec![ResourceLink::new("").attr("rt", "demo.echo").attr("title", "Echo")]
    }
}

/// `/stats`: the endpoint's counters and table sizes as JSON (how a flood shows its effect).
pub struct Stats;

impl Service for Stats {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        if req.request.method != Code::GET {
            cx.respond(req.id, not_allowed(req.request.method));
            return;
        }
        let s = cx.endpoint().stats();
        let t = cx.endpoint().table_sizes();
        let (peers, client_exchanges, inbound, sent, dedup) =
            (t.peers, t.client_exchanges, t.inbound_exchanges, t.tracked_messages, t.dedup_entries);
        let body = format!(
            "{{\"uptime_s\":{},\"datagrams_in\":{},\"malformed_in\":{},\"duplicates_in\":{},\"requests_in\":{},\
             \"transmits\":{},\"retransmissions\":{},\"overload_rejections\":{},\"peers_evicted\":{},\
             \"tables\":{{\"peers\":{peers},\"client_exchanges\":{client_exchanges},\"inbound_exchanges\":{inbound},\
             \"sent\":{sent},\"dedup\":{dedup}}}}}",
            cx.now().as_secs(),
            s.datagrams_in,
            s.malformed_in,
            s.duplicates_in,
            s.requests_in,
            s.transmits,
            s.retransmissions,
            s.overload_rejections,
            s.peers_evicted,
        );
        cx.respond(req.id, Response::content(ContentFormat::JSON, body).with_max_age(0));
    }

    fn links(&self) -> Vec<ResourceLink> {
        vec![ResourceLink::new("").attr("rt", "demo.stats").attr("ct", "50").attr("title", "Counters")]
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
        assert_eq!(r[5].code, Code::NOT_ACCEPTABLE);
        assert_eq!(r[6].payload_text(), "the separate response of /separate");
        assert_eq!(r[7].code, Code::NOT_FOUND);
    }
}
