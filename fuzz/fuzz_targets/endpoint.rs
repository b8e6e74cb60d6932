//! The protocol endpoint's datagram input: a node with a server and a client service is fed a sequence of
//! datagrams (from a few peers, unicast or multicast, with time passing between them). It must never panic,
//! must keep its tables within their limits, and must still answer a valid request afterwards.
#![no_main]

use corral_proto::wire::{Code, ContentFormat, Message, MessageId, MessageType, OptionNumber, Token};
use corral_proto::{Context, Duration, Endpoint, EndpointConfig, IncomingRequest, Instant, Limits, Node, Response, Service};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

struct Echo;
impl Service for Echo {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        let big = req.request.query_value("big").is_some();
        let payload = if big { vec![7u8; 3000] } else { req.request.payload.clone() };
        cx.respond(req.id, Response::content(ContentFormat::OCTET_STREAM, payload).observable());
        if req.request.method == Code::POST {
            cx.changed("/x");
        }
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let limits = Limits { max_peers: 4, dedup_per_peer: 4, max_inbound_exchanges: 8, ..Limits::default() };
    let mut node = Node::new(Endpoint::new(EndpointConfig { limits, ..EndpointConfig::with_seed(1) }));
    node.mount("", Echo);
    let mut now = Instant::ZERO;
    // Each datagram: [flags, len, bytes...]; flags pick the peer, multicast and a time step.
    let mut rest = data;
    while rest.len() >= 2 {
        let (flags, len) = (rest[0], usize::from(rest[1]));
        let take = len.min(rest.len() - 2);
        let datagram = &rest[2..2 + take];
        rest = &rest[2 + take..];
        let from = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, flags & 7)), 5683);
        let dst = (flags & 8 != 0).then_some(IpAddr::V4(Ipv4Addr::new(224, 0, 1, 187)));
        node.handle_datagram(now, from, dst, datagram);
        now += Duration::from_millis(u64::from(flags >> 4) * 500);
        node.handle_timeout(now);
        while node.poll_transmit().is_some() {}
        let t = node.endpoint().table_sizes();
        assert!(t.peers <= 4 && t.inbound_exchanges <= 8 && t.dedup_entries <= 16);
    }
    let mut get = Message::new(MessageType::Con, Code::GET, MessageId(0xbeef), Token::new(&[1]).unwrap());
    get.options.push(OptionNumber::URI_PATH, b"x");
    let from = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 9, 9, 9)), 5683);
    now += Duration::from_secs(1000);
    node.handle_timeout(now);
    while node.poll_transmit().is_some() {}
    node.handle_datagram(now, from, None, &get.encode());
    let reply = node.poll_transmit().expect("a valid request is answered");
    assert!(Message::parse(&reply.payload).is_ok());
});
