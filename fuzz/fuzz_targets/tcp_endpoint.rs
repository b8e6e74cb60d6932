//! CoAP over TCP: a node's TCP endpoint fed an arbitrary byte stream in arbitrary chunks on two
//! connections. It must never panic, must close (not buffer without bound) on bad input, and a fresh
//! connection must still be served.
#![no_main]

use corral_proto::wire::tcp::TcpMessage;
use corral_proto::wire::{Code, ContentFormat, OptionNumber, Token};
use corral_proto::{ConnId, Context, Endpoint, EndpointConfig, IncomingRequest, Instant, Node, Response, Service, TcpConfig};
use std::net::SocketAddr;

struct Echo;
impl Service for Echo {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        let big = req.request.query_value("big").is_some();
        let payload = if big { vec![7u8; 5000] } else { req.request.payload.clone() };
        cx.respond(req.id, Response::content(ContentFormat::OCTET_STREAM, payload).observable());
        if req.request.method == Code::POST {
            cx.changed("/x");
        }
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut node = Node::new(Endpoint::new(EndpointConfig::with_seed(1)));
    node.set_tcp_config(TcpConfig { max_message_size: 2048, ..TcpConfig::default() });
    node.mount("", Echo);
    let peer = |p: u16| SocketAddr::from(([127, 0, 0, 1], p));
    node.handle_tcp_connected(Instant::ZERO, ConnId(1), peer(1));
    node.handle_tcp_connected(Instant::ZERO, ConnId(2), peer(2));
    let mut rest = data;
    while let Some((&head, tail)) = rest.split_first() {
        let n = usize::from(head & 0x3f).min(tail.len());
        let conn = ConnId(1 + u64::from(head >> 7));
        node.handle_tcp_data(Instant::ZERO, conn, &tail[..n]);
        rest = &tail[n..];
        while node.poll_tcp_transmit().is_some() {}
        while node.poll_tcp_close().is_some() {}
    }
    // A new, well-behaved connection is served.
    node.handle_tcp_connected(Instant::ZERO, ConnId(3), peer(3));
    node.handle_tcp_data(Instant::ZERO, ConnId(3), &TcpMessage::new(Code::CSM, Token::EMPTY).encode());
    let mut get = TcpMessage::new(Code::GET, Token::new(&[1]).unwrap());
    get.options.push(OptionNumber::URI_PATH, b"x");
    while node.poll_tcp_transmit().is_some() {}
    node.handle_tcp_data(Instant::ZERO, ConnId(3), &get.encode());
    let reply = node.poll_tcp_transmit().expect("a valid request is answered");
    assert_eq!(TcpMessage::parse(&reply.bytes).unwrap().code, Code::CONTENT);
});
