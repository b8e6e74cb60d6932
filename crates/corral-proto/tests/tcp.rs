//! CoAP over TCP (RFC 8323) between a client `TcpEndpoint` and a server `Node`, over an in-memory byte
//! stream that delivers in arbitrary chunks.

use corral_proto::wire::tcp::{signal, TcpMessage};
use corral_proto::wire::{Code, ContentFormat, OptionNumber, Token};
use corral_proto::{
    ConnId, Context, Duration, Endpoint, EndpointConfig, Event, IncomingRequest, Instant, Node, Request, RequestError,
    RequestId, Response, Rng, SendParams, Service, TcpConfig, TcpEndpoint,
};
use std::net::SocketAddr;

#[derive(Default)]
struct Server {
    value: u32,
}

impl Service for Server {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        let resp = match req.request.options.path().as_str() {
            "/hello" => Response::content(ContentFormat::TEXT_PLAIN, "world"),
            "/obs" => Response::content(ContentFormat::TEXT_PLAIN, self.value.to_string()).observable(),
            "/large" => Response::content(ContentFormat::OCTET_STREAM, vec![0x5a; 5000]),
            "/echo" => Response::new(Code::CHANGED).with_payload(req.request.payload.clone()),
            _ => Response::error(Code::NOT_FOUND, "no"),
        };
        cx.respond(req.id, resp);
    }
}

const CONN: ConnId = ConnId(1);

fn client_addr() -> SocketAddr {
    "127.0.0.1:40000".parse().unwrap()
}
fn server_addr() -> SocketAddr {
    "127.0.0.1:5683".parse().unwrap()
}

struct Link {
    now: Instant,
    client: TcpEndpoint,
    server: Node,
    rng: Rng,
    events: Vec<Event>,
    server_closed: bool,
    svc: corral_proto::ServiceHandle,
}

impl Link {
    fn new(client_mms: usize) -> Link {
        let mut server = Node::new(Endpoint::new(EndpointConfig::with_seed(2)));
        let svc = server.mount("", Server::default());
        let mut client = TcpEndpoint::new(TcpConfig { seed: 1, max_message_size: client_mms, ..TcpConfig::default() });
        let now = Instant::ZERO;
        client.handle_connected(now, CONN, server_addr());
        server.handle_tcp_connected(now, CONN, client_addr());
        Link { now, client, server, rng: Rng::new(9), events: Vec::new(), server_closed: false, svc }
    }

    /// Moves bytes both ways, in random chunks, until both sides are quiet.
    fn pump(&mut self) {
        loop {
            let mut moved = false;
            while let Some(t) = self.client.poll_transmit() {
                moved = true;
                for chunk in chunks(&t.bytes, &mut self.rng) {
                    self.server.handle_tcp_data(self.now, CONN, chunk);
                }
            }
            while let Some(t) = self.server.poll_tcp_transmit() {
                moved = true;
                for chunk in chunks(&t.bytes, &mut self.rng) {
                    self.client.handle_data(self.now, CONN, chunk);
                }
            }
            while self.server.poll_tcp_close().is_some() {
                self.server_closed = true;
            }
            while let Some(e) = self.client.poll_event() {
                self.events.push(e);
            }
            if !moved {
                return;
            }
        }
    }

    fn request(&mut self, req: Request) -> RequestId {
        let id = self.client.request(self.now, CONN, req, SendParams::default()).unwrap();
        self.pump();
        id
    }

    fn responses(&self) -> Vec<Response> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Response { response, .. } => Some(response.clone()),
                _ => None,
            })
            .collect()
    }
}

fn chunks<'a>(bytes: &'a [u8], rng: &mut Rng) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let n = (rng.below(7) as usize + 1).min(rest.len());
        out.push(&rest[..n]);
        rest = &rest[n..];
    }
    out
}

#[test]
fn csm_exchange_and_request() {
    let mut l = Link::new(1152);
    l.pump();
    assert!(l.client.is_established(CONN));
    assert_eq!(l.client.peer_max_message_size(CONN), Some(TcpConfig::default().max_message_size));
    assert!(l.server.tcp().is_established(CONN));
    l.request(Request::get("hello"));
    let r = l.responses();
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].payload, b"world");
    l.request(Request::get("nope"));
    assert_eq!(l.responses()[1].code, Code::NOT_FOUND);
}

#[test]
fn ping_pong() {
    let mut l = Link::new(1152);
    let id = l.client.ping(l.now, CONN).unwrap();
    l.pump();
    assert!(matches!(l.events.as_slice(), [Event::Pong { id: p, .. }] if *p == id));
}

/// RFC 8323 §7.2: Observe over TCP; notifications in order; explicit deregistration.
#[test]
fn observe_over_tcp() {
    let mut l = Link::new(1152);
    let id = l.request(Request::get("obs").with_option(OptionNumber::OBSERVE, &[]));
    assert_eq!(l.server.tcp().observer_count("/obs"), 1);
    for i in 1..=3 {
        let (now, svc) = (l.now, l.svc);
        l.server.with_service(now, svc, |s: &mut Server, cx| {
            s.value = i;
            cx.changed("/obs");
        });
        l.pump();
    }
    let values: Vec<String> = l.responses().iter().map(|r| r.payload_text().into_owned()).collect();
    assert_eq!(values, ["0", "1", "2", "3"]);
    l.client.deregister(l.now, id);
    l.pump();
    assert_eq!(l.server.tcp().observer_count("/obs"), 0);
    assert!(!l.client.is_active(id));
}

/// A peer that announces a small Max-Message-Size gets a large body block-wise; uploads larger than the
/// server's limit go block-wise too.
#[test]
fn block_wise_within_max_message_size() {
    let mut l = Link::new(1152);
    l.request(Request::get("large"));
    let r = l.responses();
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].payload, vec![0x5a; 5000]);
    // The server announced a larger size: the same body goes whole the other way.
    l.request(Request::new(Code::PUT).with_path("echo").with_payload(vec![1u8; 5000]));
    assert_eq!(l.responses()[1].payload, vec![1u8; 5000]);
}

/// RFC 8323 §5.3: the first message must be a CSM; otherwise the connection is aborted.
#[test]
fn missing_csm_aborts() {
    let mut server = Node::new(Endpoint::new(EndpointConfig::with_seed(2)));
    server.mount("", Server::default());
    server.handle_tcp_connected(Instant::ZERO, CONN, client_addr());
    let mut get = TcpMessage::new(Code::GET, Token::new(&[1]).unwrap());
    get.options.push(OptionNumber::URI_PATH, b"hello");
    server.handle_tcp_data(Instant::ZERO, CONN, &get.encode());
    let mut sent = Vec::new();
    while let Some(t) = server.poll_tcp_transmit() {
        sent.push(TcpMessage::parse(&t.bytes).unwrap());
    }
    assert_eq!(sent[0].code, Code::CSM);
    assert_eq!(sent.last().unwrap().code, Code::ABORT);
    assert_eq!(server.poll_tcp_close(), Some(CONN));
}

/// An unknown critical CSM option aborts with Bad-CSM-Option naming it.
#[test]
fn unknown_critical_csm_option_aborts() {
    let mut server = Node::new(Endpoint::new(EndpointConfig::with_seed(2)));
    server.handle_tcp_connected(Instant::ZERO, CONN, client_addr());
    let mut csm = TcpMessage::new(Code::CSM, Token::EMPTY);
    csm.options.push(OptionNumber(9), b"");
    server.handle_tcp_data(Instant::ZERO, CONN, &csm.encode());
    let abort =
        std::iter::from_fn(|| server.poll_tcp_transmit()).map(|t| TcpMessage::parse(&t.bytes).unwrap()).last().unwrap();
    assert_eq!(abort.code, Code::ABORT);
    assert_eq!(abort.options.get_uint(signal::BAD_CSM_OPTION), Some(9));
}

/// A frame over the announced Max-Message-Size aborts the connection instead of being buffered.
#[test]
fn oversized_frame_aborts() {
    let mut server = Node::new(Endpoint::new(EndpointConfig::with_seed(2)));
    server.set_tcp_config(TcpConfig { max_message_size: 1152, ..TcpConfig::default() });
    server.handle_tcp_connected(Instant::ZERO, CONN, client_addr());
    server.handle_tcp_data(Instant::ZERO, CONN, &TcpMessage::new(Code::CSM, Token::EMPTY).encode());
    let mut big = TcpMessage::new(Code::PUT, Token::new(&[1]).unwrap());
    big.payload = vec![0; 100_000];
    server.handle_tcp_data(Instant::ZERO, CONN, &big.encode()[..2000]);
    let last =
        std::iter::from_fn(|| server.poll_tcp_transmit()).map(|t| TcpMessage::parse(&t.bytes).unwrap()).last().unwrap();
    assert_eq!(last.code, Code::ABORT);
}

/// A closed connection fails the requests waiting on it.
#[test]
fn closed_connection_fails_requests() {
    let mut l = Link::new(1152);
    l.pump();
    let id = l.client.request(l.now, CONN, Request::get("hello"), SendParams::default()).unwrap();
    l.client.handle_closed(l.now, CONN);
    let ev: Vec<Event> = std::iter::from_fn(|| l.client.poll_event()).collect();
    assert!(matches!(ev.as_slice(), [Event::Failed { id: f, error: RequestError::ConnectionClosed }] if *f == id));
}

#[test]
fn request_times_out_without_response() {
    let mut c = TcpEndpoint::new(TcpConfig { seed: 3, ..TcpConfig::default() });
    c.handle_connected(Instant::ZERO, CONN, server_addr());
    let id = c
        .request(
            Instant::ZERO,
            CONN,
            Request::get("x"),
            SendParams { timeout: Some(Duration::from_secs(5)), ..SendParams::default() },
        )
        .unwrap();
    assert_eq!(c.poll_timeout(), Some(Instant::from_secs(5)));
    c.handle_timeout(Instant::from_secs(5));
    let ev: Vec<Event> = std::iter::from_fn(|| c.poll_event()).collect();
    assert!(matches!(ev.as_slice(), [Event::Failed { id: f, error: RequestError::Timeout }] if *f == id));
}
