//! Hostile input: arbitrary datagrams never panic the endpoint, and floods leave its state bounded.

use corral_proto::wire::{Code, ContentFormat, Message, MessageId, MessageType, OptionNumber, Token};
use corral_proto::{
    Context, Duration, Endpoint, EndpointConfig, IncomingRequest, Instant, Limits, Node, Response, Service,
};
use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

struct Hello;
impl Service for Hello {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        cx.respond(req.id, Response::content(ContentFormat::TEXT_PLAIN, "hi"));
    }
}

/// A service that never answers: every request it gets stays pending until the endpoint drops it.
struct BlackHole;
impl Service for BlackHole {
    fn handle_request(&mut self, _cx: &mut Context<'_>, _req: IncomingRequest) {}
}

fn peer(i: u32) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + (i >> 16))), (i & 0xffff) as u16)
}

fn get(mid: u16, path: &str) -> Vec<u8> {
    let mut m = Message::new(MessageType::Con, Code::GET, MessageId(mid), Token::new(&[1, 2]).unwrap());
    m.options.push(OptionNumber::URI_PATH, path.as_bytes());
    m.encode()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_datagrams_never_panic(datagrams in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 1..20),
                                       multicast in any::<bool>()) {
        let mut node = Node::new(Endpoint::new(EndpointConfig::with_seed(1)));
        node.mount("", Hello);
        let dst = multicast.then_some(IpAddr::V4(Ipv4Addr::new(224, 0, 1, 187)));
        let mut now = Instant::ZERO;
        for (i, d) in datagrams.iter().enumerate() {
            node.handle_datagram(now, peer(i as u32 % 3), dst, d);
            while node.poll_transmit().is_some() {}
            now += Duration::from_millis(700);
            node.handle_timeout(now);
        }
        // Still serves a valid request afterwards.
        node.handle_datagram(now, peer(99), None, &get(7, "x"));
        let out = node.poll_transmit().expect("a response");
        let m = Message::parse(&out.payload).unwrap();
        prop_assert_eq!(m.code, Code::CONTENT);
    }

    /// Mutations of a valid request (bit flips, truncation) never panic and always get at most a reply.
    #[test]
    fn mutated_requests_never_panic(flips in proptest::collection::vec((0usize..40, any::<u8>()), 0..6), cut in 0usize..40) {
        let mut bytes = get(1, "sensors");
        let mut m = Message::parse(&bytes).unwrap();
        m.payload = b"payload".to_vec();
        m.options.push_uint(OptionNumber::CONTENT_FORMAT, 0);
        bytes = m.encode();
        for (pos, x) in flips {
            if let Some(b) = bytes.get_mut(pos) { *b ^= x; }
        }
        bytes.truncate(cut.max(1).min(bytes.len()));
        let mut node = Node::new(Endpoint::new(EndpointConfig::with_seed(2)));
        node.mount("", Hello);
        node.handle_datagram(Instant::ZERO, peer(1), None, &bytes);
        let mut n = 0;
        while node.poll_transmit().is_some() { n += 1; }
        prop_assert!(n <= 1);
    }
}

/// Requests from 100,000 spoofed source addresses, half of them never answered by the application: the
/// peer table, duplicate-detection state and pending exchanges stay within their limits, and a
/// legitimate client is answered at once.
#[test]
fn spoofed_source_flood_keeps_state_bounded() {
    let limits = Limits { max_peers: 1000, max_inbound_exchanges: 200, ..Limits::default() };
    let cfg = EndpointConfig { limits, ..EndpointConfig::with_seed(3) };
    let mut node = Node::new(Endpoint::new(cfg));
    node.mount("", Hello);
    node.mount("hole", BlackHole);
    let mut now = Instant::ZERO;
    let mut overloaded = 0;
    for i in 0..100_000u32 {
        let path = if i % 2 == 0 { "hole" } else { "x" };
        node.handle_datagram(now, peer(i), None, &get(i as u16, path));
        while let Some(t) = node.poll_transmit() {
            if Message::parse(&t.payload).unwrap().code == Code::SERVICE_UNAVAILABLE {
                overloaded += 1;
            }
        }
        now += Duration::from_micros(10);
        let t = node.endpoint().table_sizes();
        assert!(
            t.peers <= 1000 && t.inbound_exchanges <= 200 && t.tracked_messages == 0 && t.dedup_entries <= 1000 * 16,
            "{t:?}"
        );
    }
    // The black hole fills the inbound table; the oldest requests of unverified peers make room for new
    // ones instead of 5.03 for everybody.
    assert_eq!(overloaded, 0);
    assert!(node.endpoint().stats().displaced > 40_000, "{:?}", node.endpoint().stats());
    // A legitimate client is answered at once, during the flood as after it.
    node.handle_datagram(now, peer(1_000_000), None, &get(1, "x"));
    let m = Message::parse(&node.poll_transmit().unwrap().payload).unwrap();
    assert_eq!(m.code, Code::CONTENT);
    // After EXCHANGE_LIFETIME the never-answered exchanges are dropped and service is normal again.
    now += Duration::from_secs(300);
    node.handle_timeout(now);
    while node.poll_transmit().is_some() {}
    node.handle_datagram(now, peer(1_000_001), None, &get(2, "x"));
    let m = Message::parse(&node.poll_transmit().unwrap().payload).unwrap();
    assert_eq!(m.code, Code::CONTENT);
    assert_eq!(node.endpoint().table_sizes().inbound_exchanges, 0);
}

/// A flood of malformed CONs is answered with RST and never creates state.
#[test]
fn malformed_flood_creates_no_state() {
    let mut node = Node::new(Endpoint::new(EndpointConfig::with_seed(4)));
    node.mount("", Hello);
    for i in 0..10_000u32 {
        // CON header with a reserved option delta.
        let bytes = [0x40, 0x01, (i >> 8) as u8, i as u8, 0xf1, 0x00];
        node.handle_datagram(Instant::ZERO, peer(i), None, &bytes);
        let rst = Message::parse(&node.poll_transmit().unwrap().payload).unwrap();
        assert_eq!(rst.mtype, MessageType::Rst);
    }
    assert_eq!(node.endpoint().table_sizes(), corral_proto::TableSizes::default());
    assert_eq!(node.endpoint().stats().malformed_in, 10_000);
}

/// Sustained load on a server that answers at once: its deadline queues hold about one piggyback window
/// of requests, not EXCHANGE_LIFETIME's worth, so memory does not grow with the request rate.
#[test]
fn answered_requests_leave_no_long_lived_state() {
    let mut node = Node::new(Endpoint::new(EndpointConfig::with_seed(5)));
    node.mount("", Hello);
    let mut now = Instant::ZERO;
    let mut max_timers = 0;
    // 300,000 CON requests at 50,000/s from 1,000 peers: 6 s of traffic.
    for i in 0..300_000u32 {
        node.handle_datagram(now, peer(i % 1000), None, &get((i / 1000) as u16, "x"));
        while node.poll_transmit().is_some() {}
        now += Duration::from_micros(20);
        if i % 1000 == 0 {
            node.handle_timeout(now);
        }
        max_timers = max_timers.max(node.endpoint().table_sizes().timers);
    }
    // One second of piggyback window at 50,000/s is 50,000 entries; EXCHANGE_LIFETIME would be 12 million.
    assert!(max_timers <= 55_000, "deadline queues grew to {max_timers}");
    assert_eq!(node.endpoint().table_sizes().inbound_exchanges, 0);
}

/// Answers with a separate CON response (an empty ACK first), which a spoofed source never acknowledges:
/// every such peer is pinned by a message being retransmitted to it for ~45 s.
struct Separate;
impl Service for Separate {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        cx.accept(req.id);
        cx.respond(req.id, Response::content(ContentFormat::TEXT_PLAIN, "late"));
    }
}

/// A flood from spoofed source ports to a resource with separate responses pins every peer slot with
/// unacknowledged CONs. Unverified peers give way: a new client is served at once, while the flood is on
/// and after it; a verified peer's state (one that acknowledged us) is never dropped.
#[test]
fn a_flood_of_separate_responses_does_not_lock_out_new_clients() {
    let limits = Limits { max_peers: 200, ..Limits::default() };
    let mut node = Node::new(Endpoint::new(EndpointConfig { limits, ..EndpointConfig::with_seed(6) }));
    node.mount("sep", Separate);
    let mut now = Instant::ZERO;
    // A verified peer: it acknowledges its separate response.
    let friend = peer(5_000_000);
    node.handle_datagram(now, friend, None, &get(1, "sep"));
    let mut con_mid = None;
    while let Some(t) = node.poll_transmit() {
        let m = Message::parse(&t.payload).unwrap();
        if m.mtype == MessageType::Con {
            con_mid = Some(m.mid);
        }
    }
    let ack = Message::empty(MessageType::Ack, con_mid.expect("a separate CON response")).encode();
    node.handle_datagram(now, friend, None, &ack);
    // Make the friend hold something: another separate response it has not acknowledged yet.
    node.handle_datagram(now, friend, None, &get(2, "sep"));
    while node.poll_transmit().is_some() {}
    for i in 0..5_000u32 {
        node.handle_datagram(now, peer(i), None, &get(i as u16, "sep"));
        while let Some(t) = node.poll_transmit() {
            let m = Message::parse(&t.payload).unwrap();
            assert_ne!(m.code, Code::SERVICE_UNAVAILABLE, "request {i} refused");
        }
        now += Duration::from_micros(100);
        assert!(node.endpoint().table_sizes().peers <= 200);
    }
    assert!(node.endpoint().stats().peers_purged > 4_000, "{:?}", node.endpoint().stats());
    // The friend kept its pending response: it is retransmitted to it.
    now += Duration::from_secs(4);
    node.handle_timeout(now);
    let resent: Vec<_> = std::iter::from_fn(|| node.poll_transmit()).filter(|t| t.dst == friend).collect();
    assert_eq!(resent.len(), 1, "the verified peer's separate response is still retransmitted");
    // A new client right after the flood: served.
    let newcomer = peer(6_000_000);
    node.handle_datagram(now, newcomer, None, &get(9, "sep"));
    let out: Vec<_> = std::iter::from_fn(|| node.poll_transmit()).filter(|t| t.dst == newcomer).collect();
    let codes: Vec<Code> = out.iter().map(|t| Message::parse(&t.payload).unwrap().code).collect();
    assert!(codes.contains(&Code::CONTENT), "{codes:?}");
}

/// One peer cannot take the whole inbound table: beyond its share it gets 5.03, others are served.
#[test]
fn one_peer_gets_at_most_its_share_of_pending_requests() {
    let limits = Limits { max_inbound_per_peer: 8, ..Limits::default() };
    let mut node = Node::new(Endpoint::new(EndpointConfig { limits, ..EndpointConfig::with_seed(7) }));
    node.mount("hole", BlackHole);
    node.mount("", Hello);
    let hog = peer(1);
    let mut refused = 0;
    for i in 0..20u16 {
        node.handle_datagram(Instant::ZERO, hog, None, &get(i, "hole"));
        while let Some(t) = node.poll_transmit() {
            let m = Message::parse(&t.payload).unwrap();
            if m.code == Code::SERVICE_UNAVAILABLE {
                assert!(String::from_utf8_lossy(&m.payload).contains("your requests"));
                refused += 1;
            }
        }
    }
    assert_eq!(refused, 12);
    assert_eq!(node.endpoint().table_sizes().inbound_exchanges, 8);
    node.handle_datagram(Instant::ZERO, peer(2), None, &get(1, "x"));
    assert_eq!(Message::parse(&node.poll_transmit().unwrap().payload).unwrap().code, Code::CONTENT);
}

/// Takes uploads whole (the endpoint assembles Block1) and answers with their length.
struct Upload;
impl Service for Upload {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        let n = req.request.payload.len();
        cx.respond(req.id, Response::new(Code::CHANGED).with_payload(n.to_string()));
    }
}

fn block1(mid: u16, num: u32, more: bool, payload: &[u8]) -> Vec<u8> {
    let mut m = Message::new(MessageType::Con, Code::PUT, MessageId(mid), Token::new(&[7]).unwrap());
    m.options.push(OptionNumber::URI_PATH, b"up");
    // SZX 2: 64-byte blocks.
    let v = (num << 4) | (u32::from(more) << 3) | 2;
    m.options.set_uint(OptionNumber::BLOCK1, u64::from(v));
    m.payload = payload.to_vec();
    m.encode()
}

/// Abandoned first blocks (64 of them, the table's size, and more) never block a new upload: sources that
/// never proved their address hold at most half the table, beyond it they are asked for an Echo round trip
/// (which a spoofer cannot make); a client that makes it gets its upload through.
#[test]
fn abandoned_uploads_do_not_block_new_ones() {
    let mut node = Node::new(Endpoint::new(EndpointConfig::with_seed(8)));
    node.mount("up", Upload);
    let now = Instant::ZERO;
    for i in 0..200u32 {
        node.handle_datagram(now, peer(i), None, &block1(1, 0, true, &[0u8; 64]));
        let m = Message::parse(&node.poll_transmit().unwrap().payload).unwrap();
        let expected = if i < 32 { Code::CONTINUE } else { Code::UNAUTHORIZED };
        assert_eq!(m.code, expected, "upload {i}");
    }
    assert!(node.endpoint().table_sizes().uploads <= 32);
    let me = peer(1000);
    node.handle_datagram(now, me, None, &block1(1, 0, true, &[1u8; 64]));
    let challenge = Message::parse(&node.poll_transmit().unwrap().payload).unwrap();
    assert_eq!(challenge.code, Code::UNAUTHORIZED);
    let mut again = Message::parse(&block1(2, 0, true, &[1u8; 64])).unwrap();
    again.options.set(OptionNumber::ECHO, challenge.options.get(OptionNumber::ECHO).unwrap());
    let codes: Vec<Code> = [again.encode(), block1(3, 1, false, &[2u8; 10])]
        .iter()
        .map(|b| {
            node.handle_datagram(now, me, None, b);
            Message::parse(&node.poll_transmit().unwrap().payload).unwrap().code
        })
        .collect();
    assert_eq!(codes, vec![Code::CONTINUE, Code::CHANGED]);
    // One peer starting uploads of many resources keeps at most its share.
    for k in 0..10u16 {
        let mut m = Message::parse(&block1(10 + k, 0, true, &[3u8; 64])).unwrap();
        m.options.push(OptionNumber::URI_QUERY, format!("k={k}").as_bytes());
        node.handle_datagram(now, peer(2000), None, &m.encode());
        while node.poll_transmit().is_some() {}
    }
    assert!(node.endpoint().table_sizes().uploads <= 64);
}
