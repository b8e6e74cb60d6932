//! The CoAP-SC collector on hostile requests: a real stream is created (its sender meets the Echo
//! challenge), then requests built from the input — method, stream id (the real one, another, garbage),
//! the CoAP-SC option value (any length), No-Response, sender address — arrive with time passing. It must
//! never panic, never hold more than its 64 streams, never send a control message to anyone but a stream's
//! own sender, and still answer `GET /stream`.
#![no_main]

use corral_proto::wire::{Code, Message, MessageId, MessageType, OptionNumber, Token};
use corral_proto::{Duration, Endpoint, EndpointConfig, Instant, Node};
use corral_stream::{StreamReceiver, SC_OPTION};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

fn peer(n: u8) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, n)), 5683)
}

fn request(code: Code, mid: u16, path: &[&[u8]]) -> Message {
    let mut m = Message::new(MessageType::Con, code, MessageId(mid), Token::new(&[mid as u8]).unwrap());
    for seg in path {
        m.options.push(OptionNumber::URI_PATH, seg);
    }
    m
}

/// Sends `m` from `from`; the answers to `from` (every other datagram must be a control message to a
/// stream's sender: checked by the caller).
fn exchange(node: &mut Node, now: Instant, from: SocketAddr, m: &Message) -> Vec<Message> {
    node.handle_datagram(now, from, None, &m.encode());
    let mut out = Vec::new();
    while let Some(t) = node.poll_transmit() {
        let msg = Message::parse(&t.payload).expect("the collector sends well-formed messages");
        if t.dst == from {
            out.push(msg);
        } else {
            assert_eq!(t.dst, peer(1), "a control message only to the stream's sender: {msg:?}");
        }
    }
    out
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut node = Node::new(Endpoint::new(EndpointConfig::with_seed(1)));
    let h = node.mount("stream", StreamReceiver::default());
    let mut now = Instant::ZERO;
    // The real stream of peer 1, which proves its address.
    let mut post = request(Code::POST, 1, &[b"stream"]);
    post.payload = b"4".to_vec();
    let challenge = exchange(&mut node, now, peer(1), &post).pop().expect("an answer");
    post.options.set(OptionNumber::ECHO, challenge.options.get(OptionNumber::ECHO).expect("an Echo value"));
    post.mid = MessageId(2);
    let created = exchange(&mut node, now, peer(1), &post).pop().expect("an answer");
    assert_eq!(created.code, Code::CREATED);
    let id = created.options.get_all(OptionNumber::LOCATION_PATH).nth(1).expect("the stream's id").to_vec();
    // Each request: [flags, kind, len, option bytes...]; flags pick the sender and a time step.
    let mut rest = data;
    let mut mid = 100u16;
    while rest.len() >= 3 {
        let (flags, kind, len) = (rest[0], rest[1], usize::from(rest[2]));
        let take = len.min(rest.len() - 3);
        let value = &rest[3..3 + take];
        rest = &rest[3 + take..];
        mid = mid.wrapping_add(1);
        let code = [Code::GET, Code::PUT, Code::POST, Code::DELETE][usize::from(kind & 3)];
        let which: &[u8] = match (kind >> 2) & 3 {
            0 | 1 => &id,
            2 => b"0000000000000001",
            _ => value,
        };
        let mut m = if kind & 0x40 != 0 { request(code, mid, &[b"stream"]) } else { request(code, mid, &[b"stream", which]) };
        if kind & 0x10 != 0 {
            m.options.push(SC_OPTION, value);
        } else {
            m.payload = value.to_vec();
        }
        if kind & 0x20 != 0 {
            m.options.push_uint(OptionNumber::NO_RESPONSE, 26);
        }
        if kind & 0x80 != 0 {
            m.mtype = MessageType::Non;
        }
        let from = peer(1 + (flags & 3));
        now += Duration::from_millis(u64::from(flags >> 2) * 250);
        node.handle_timeout(now);
        while let Some(t) = node.poll_transmit() {
            assert_eq!(t.dst, peer(1), "only the stream's sender hears from the collector unasked");
        }
        exchange(&mut node, now, from, &m);
        let held = node.service::<StreamReceiver>(h).map_or(0, |r| r.streams().count());
        assert!(held <= corral_stream::MAX_STREAMS);
    }
    let get = request(Code::GET, 0xbeef, &[b"stream"]);
    let answers = exchange(&mut node, now, peer(9), &get);
    assert!(answers.iter().any(|a| a.code == Code::CONTENT), "GET /stream is still answered");
});
