//! Issue 27 item 1: an ICMP error for a datagram the endpoint sent (`Endpoint::handle_unreachable`) ends
//! what that datagram carried at once — a request fails with `RequestError::Unreachable`, an observer
//! whose notification bounced is forgotten — and nothing else: a spoofed error that quotes the right
//! message ID but a wrong token, or names another peer, changes nothing.

use corral_proto::wire::{Code, Message, MessageType, OptionNumber, Token};
use corral_proto::{Endpoint, EndpointConfig, Event, Instant, Request, RequestError, Response, SendParams, Transmit};
use std::net::SocketAddr;

fn server_addr() -> SocketAddr {
    "192.0.2.1:5683".parse().unwrap()
}

fn drain(ep: &mut Endpoint) -> Vec<Transmit> {
    std::iter::from_fn(|| ep.poll_transmit()).collect()
}

fn events(ep: &mut Endpoint) -> Vec<Event> {
    std::iter::from_fn(|| ep.poll_event()).collect()
}

/// A client with one CON GET outstanding to the server; the datagram it sent.
fn client_with_request() -> (Endpoint, corral_proto::RequestId, Vec<u8>) {
    let mut c = Endpoint::new(EndpointConfig::with_seed(11));
    let id = c.request(Instant::ZERO, server_addr(), Request::get("/x"), SendParams::default()).unwrap();
    let sent = drain(&mut c);
    assert_eq!(sent.len(), 1);
    (c, id, sent[0].payload.clone())
}

#[test]
fn an_icmp_error_quoting_the_request_fails_it_at_once() {
    let (mut c, id, datagram) = client_with_request();
    c.handle_unreachable(Instant::from_millis(1), server_addr(), Some(&datagram));
    let ev = events(&mut c);
    assert!(matches!(ev.as_slice(), [Event::Failed { id: i, error: RequestError::Unreachable }] if *i == id), "{ev:?}");
    assert!(!c.is_active(id));
    // No retransmission follows.
    c.handle_timeout(Instant::from_secs(100));
    assert!(drain(&mut c).is_empty());
}

#[test]
fn a_spoofed_icmp_error_with_a_wrong_token_is_ignored() {
    let (mut c, id, datagram) = client_with_request();
    let mut forged = datagram.clone();
    let tkl = usize::from(forged[0] & 0x0f);
    forged[4 + tkl - 1] ^= 0x01; // right peer and message ID, one bit of the token wrong
    c.handle_unreachable(Instant::from_millis(1), server_addr(), Some(&forged));
    // The same datagram's error, but claimed for another peer.
    c.handle_unreachable(Instant::from_millis(1), "192.0.2.2:5683".parse().unwrap(), Some(&datagram));
    // A quote too short to carry the token.
    c.handle_unreachable(Instant::from_millis(1), server_addr(), Some(&datagram[..4]));
    assert!(events(&mut c).is_empty());
    assert!(c.is_active(id));
    // The request goes on: retransmitted, and answered.
    c.handle_timeout(Instant::from_secs(4));
    let retry = drain(&mut c);
    assert_eq!(retry.len(), 1, "retransmitted");
    let req = Message::parse(&retry[0].payload).unwrap();
    let mut ack = Message::new(MessageType::Ack, Code::CONTENT, req.mid, req.token);
    ack.payload = b"ok".to_vec();
    c.handle_datagram(Instant::from_secs(4), server_addr(), None, &ack.encode());
    assert!(matches!(events(&mut c).as_slice(), [Event::Response { id: i, .. }] if *i == id));
}

#[test]
fn an_error_for_one_peer_leaves_requests_to_others_alone() {
    let mut c = Endpoint::new(EndpointConfig::with_seed(12));
    let other: SocketAddr = "192.0.2.9:5683".parse().unwrap();
    let a = c.request(Instant::ZERO, server_addr(), Request::get("/x"), SendParams::default()).unwrap();
    let b = c.request(Instant::ZERO, other, Request::get("/x"), SendParams::default()).unwrap();
    let sent = drain(&mut c);
    let to_a = sent.iter().find(|t| t.dst == server_addr()).unwrap().payload.clone();
    c.handle_unreachable(Instant::ZERO, server_addr(), Some(&to_a));
    assert!(!c.is_active(a));
    assert!(c.is_active(b), "the request to the other peer goes on");
}

#[test]
fn a_bounced_notification_removes_the_observer() {
    let mut s = Endpoint::new(EndpointConfig::with_seed(13));
    let observer: SocketAddr = "192.0.2.50:40000".parse().unwrap();
    let mut reg =
        Message::new(MessageType::Con, Code::GET, corral_proto::wire::MessageId(7), Token::new(&[0x42; 4]).unwrap());
    reg.options.set_path("/obs");
    reg.options.set_uint(OptionNumber::OBSERVE, 0);
    s.handle_datagram(Instant::ZERO, observer, None, &reg.encode());
    let Some(Event::Request(r)) = s.poll_event() else { panic!("a request") };
    s.respond(Instant::ZERO, r.id, Response::new(Code::CONTENT).with_payload("1").observable()).unwrap();
    drain(&mut s);
    assert_eq!(s.observer_count("/obs"), 1);
    let now = Instant::from_secs(1);
    for n in s.notify(now, "/obs", Some(false)) {
        s.respond(now, n.id, Response::new(Code::CONTENT).with_payload("2").observable()).unwrap();
    }
    let notification = drain(&mut s);
    assert_eq!(notification.len(), 1);
    s.handle_unreachable(now, observer, Some(&notification[0].payload));
    assert_eq!(s.observer_count("/obs"), 0, "the observer whose notification bounced is gone");
}
