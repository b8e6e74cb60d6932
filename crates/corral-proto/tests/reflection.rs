//! Issue 26 item 4: the reflection bound of [`corral_proto::AmplificationLimit`], driven through a real
//! endpoint. A spoofer who sends confirmable GETs for a large resource "from" one victim IP address, each
//! from a new source port, makes the endpoint send that address no more than
//! `factor × received + burst + refill × T` bytes over `T` seconds — whatever the ports — and a
//! client without Echo support, one new port per run, still gets its first large answers.

use corral_proto::wire::{Code, Message, MessageId, MessageType, Token};
use corral_proto::{AmplificationLimit, Endpoint, EndpointConfig, Event, Instant, Response};
use std::net::{IpAddr, SocketAddr};

const LARGE: usize = 1000;

/// Sends one CON GET from `from` and answers every request with `LARGE` bytes; returns (bytes in, bytes
/// out to `victim`, whether a 2.05 went out).
fn get(ep: &mut Endpoint, now: Instant, from: SocketAddr, mid: u16, victim: IpAddr) -> (usize, usize, bool) {
    let mut m = Message::new(MessageType::Con, Code::GET, MessageId(mid), Token::new(&mid.to_be_bytes()).unwrap());
    m.options.set_path("/large");
    let bytes = m.encode();
    ep.handle_datagram(now, from, None, &bytes);
    while let Some(e) = ep.poll_event() {
        if let Event::Request(r) = e {
            ep.respond(now, r.id, Response::new(Code::CONTENT).with_payload(vec![b'x'; LARGE])).unwrap();
        }
    }
    let (mut out, mut content) = (0, false);
    while let Some(t) = ep.poll_transmit() {
        if t.dst.ip() == victim {
            out += t.payload.len();
            content |= Message::parse(&t.payload).is_ok_and(|r| r.code == Code::CONTENT);
        }
    }
    (bytes.len(), out, content)
}

#[test]
fn spoofed_requests_from_many_ports_stay_within_the_bound_to_one_address() {
    let limit = AmplificationLimit::default();
    for seed in [1u64, 2, 3] {
        let mut ep = Endpoint::new(EndpointConfig::with_seed(seed));
        let victim: IpAddr = "192.0.2.9".parse().unwrap();
        let (mut sent, mut received) = (0usize, 0usize);
        let span_ms = 10_000u64;
        // 200 requests a second, each from a new port (the attacker never answers: no ACK, no Echo).
        for i in 0..(span_ms / 5) {
            let now = Instant::from_millis(i * 5);
            let port = 10_000 + (i % 50_000) as u16;
            let (i_n, o_n, _) = get(&mut ep, now, SocketAddr::new(victim, port), i as u16, victim);
            sent += i_n;
            received += o_n;
            ep.handle_timeout(now);
            while let Some(t) = ep.poll_transmit() {
                if t.dst.ip() == victim {
                    received += t.payload.len();
                }
            }
        }
        let bound = limit.factor * sent + limit.burst + limit.refill * (span_ms / 1000) as usize;
        println!("seed {seed}: spoofer sent {sent} B, victim got {received} B, bound {bound} B");
        assert!(received <= bound, "seed {seed}: {received} B to the victim > bound {bound} B");
        // Without the per-address bucket (a fixed credit per port) the flood would get a large answer
        // per port: 2,000 × 1 KB. The bound is far below it.
        assert!(received < 2000 * LARGE / 10, "seed {seed}: {received} B");
    }
}

#[test]
fn a_client_without_echo_support_gets_its_first_large_answers_from_each_new_port() {
    let mut ep = Endpoint::new(EndpointConfig::with_seed(9));
    let client: IpAddr = "192.0.2.20".parse().unwrap();
    // One run a second, each from a new port, as aiocoap, libcoap or the ETSI checker would.
    for run in 0..20u16 {
        let now = Instant::from_secs(u64::from(run));
        let (_, _, content) = get(&mut ep, now, SocketAddr::new(client, 40_000 + run), run, client);
        assert!(content, "run {run}: the first answer was not 2.05");
    }
}

/// An unsafe request's handler acts once: its answer beyond the bound is not replaced with an Echo
/// challenge (the client would repeat the request, and the handler act again — the gateway created an
/// entity twice, "updated" the second time); it waits for the client's retransmission, which earns credit,
/// and goes out then.
#[test]
fn an_unsafe_request_beyond_the_bound_is_answered_late_not_challenged() {
    let amplification = Some(AmplificationLimit { burst: 600, refill: 600, ..AmplificationLimit::default() });
    let mut ep = Endpoint::new(EndpointConfig { amplification, ..EndpointConfig::with_seed(5) });
    let client: SocketAddr = "192.0.2.30:41000".parse().unwrap();
    let mut m = Message::new(MessageType::Con, Code::POST, MessageId(7), Token::new(&[7]).unwrap());
    m.options.set_path("/create");
    let request = m.encode();
    let (mut handled, mut answers) = (0, Vec::new());
    for (i, at) in [0u64, 2_500, 7_500].into_iter().enumerate() {
        let now = Instant::from_millis(at);
        ep.handle_datagram(now, client, None, &request); // the first, then the client's retransmissions
        while let Some(e) = ep.poll_event() {
            if let Event::Request(r) = e {
                handled += 1;
                ep.respond(now, r.id, Response::new(Code::CREATED).with_payload(vec![b'x'; 700])).unwrap();
            }
        }
        while let Some(t) = ep.poll_transmit() {
            let r = Message::parse(&t.payload).unwrap();
            answers.push((i, r.code));
        }
    }
    assert_eq!(handled, 1, "the handler acted once");
    assert!(answers.iter().all(|(_, c)| *c == Code::CREATED), "never a challenge: {answers:?}");
    assert!(!answers.is_empty() && answers[0].0 > 0, "withheld at first, sent for a retransmission: {answers:?}");
}

/// A closed-loop client without Echo support (go-coap) that keeps asking for an answer larger than three
/// times its request — `GET /` with an 8-byte token, 12 bytes — spends its address's first-answer bucket
/// and is then challenged: every request is answered at once, with the answer or with 4.01 + Echo, and the
/// challenge itself fits three times the request. (It was withheld: its diagnostic payload made it 39
/// bytes against a credit of 36, and the client waited for its retransmission, about 6 requests a second.)
#[test]
fn every_request_beyond_the_bucket_is_answered_at_once_by_a_challenge_that_fits_the_bound() {
    let mut ep = Endpoint::new(EndpointConfig::with_seed(11));
    let client: SocketAddr = "192.0.2.30:40000".parse().unwrap();
    let (mut challenged, mut silent) = (0, 0);
    for i in 0..200u16 {
        let now = Instant::from_millis(u64::from(i));
        let token = Token::new(&[i as u8, 1, 2, 3, 4, 5, 6, 7]).unwrap();
        let m = Message::new(MessageType::Con, Code::GET, MessageId(i), token);
        let request = m.encode();
        assert_eq!(request.len(), 12);
        ep.handle_datagram(now, client, None, &request);
        while let Some(e) = ep.poll_event() {
            if let Event::Request(r) = e {
                ep.respond(now, r.id, Response::new(Code::CONTENT).with_payload(vec![b'x'; 90])).unwrap();
            }
        }
        let answers: Vec<Vec<u8>> = std::iter::from_fn(|| ep.poll_transmit()).map(|t| t.payload).collect();
        match answers.as_slice() {
            [] => silent += 1,
            [a] => {
                let m = Message::parse(a).unwrap();
                if m.code == Code::UNAUTHORIZED {
                    assert!(m.options.contains(corral_proto::wire::OptionNumber::ECHO));
                    assert!(a.len() <= 3 * request.len(), "a challenge of {} bytes", a.len());
                    challenged += 1;
                }
            }
            more => panic!("{} answers to one request", more.len()),
        }
    }
    println!("200 requests: {challenged} challenged, {silent} unanswered");
    assert_eq!(silent, 0, "requests left unanswered");
    assert!(challenged > 100, "the bucket holds about 20 answers of 102 bytes, not {}", 200 - challenged);
}

/// Issue 41 item 1: a carpet — spoofed CON GETs for a large resource cycling over 4,096 source addresses
/// of one /20 (each with a full first-answer bucket of its own), 200 a second for 10 s — makes the
/// endpoint send all of them together no more than `factor × received + shared_burst + shared_refill × T`:
/// spreading the flood over addresses buys nothing. (Without the shared bucket each address's bucket
/// paid for a 1 KB answer: 2,000 of them.)
#[test]
fn spoofed_requests_spread_over_a_network_stay_within_the_shared_bound() {
    let limit = AmplificationLimit::default();
    let mut ep = Endpoint::new(EndpointConfig::with_seed(21));
    let (mut sent, mut received, mut answered) = (0usize, 0usize, 0usize);
    let span_ms = 10_000u64;
    for i in 0..(span_ms / 5) {
        let now = Instant::from_millis(i * 5);
        let victim = IpAddr::from([10, 80, (i / 256 % 16) as u8, i as u8]); // 10.80.0.0/20
        let (i_n, o_n, content) = get(&mut ep, now, SocketAddr::new(victim, 5683), i as u16, victim);
        sent += i_n;
        received += o_n;
        answered += usize::from(content);
        ep.handle_timeout(now);
        received += std::iter::from_fn(|| ep.poll_transmit()).map(|t| t.payload.len()).sum::<usize>();
    }
    let bound = limit.factor * sent + limit.shared_burst + limit.shared_refill * (span_ms / 1000) as usize;
    println!("2,000 requests over a /20: spoofer sent {sent} B, victims got {received} B ({:.2}x), {answered} 2.05s; bound {bound} B", received as f64 / sent as f64);
    assert!(received <= bound, "{received} B to the victims > bound {bound} B");
    assert!(answered <= (limit.shared_burst + limit.shared_refill * 10) / LARGE + 1, "{answered} large answers");
}

/// Issue 46 item 1: a source that cannot be spoofed — loopback, or a network the operator declares
/// (`verified_nets`, a LAN behind BCP 38 filtering) — counts as verified from its first datagram: a client
/// without Echo support there gets every large answer however often it asks, while one elsewhere is held
/// to the bound.
#[test]
fn loopback_and_verified_networks_are_not_bounded() {
    let verified_nets = vec!["192.0.2.0/24".parse().unwrap()];
    let mut ep = Endpoint::new(EndpointConfig { verified_nets, ..EndpointConfig::with_seed(23) });
    for (client, verified) in
        [("127.0.0.1", true), ("::1", true), ("::ffff:127.0.0.5", true), ("192.0.2.77", true), ("198.51.100.7", false)]
    {
        let ip: IpAddr = client.parse().unwrap();
        let mut large = 0;
        for run in 0..40u16 {
            let (_, _, content) = get(&mut ep, Instant::ZERO, SocketAddr::new(ip, 40_000 + run), run, ip);
            large += usize::from(content);
        }
        println!("{client}: {large} of 40 large answers at once");
        if verified {
            assert_eq!(large, 40, "{client}: a verified source is not bounded");
        } else {
            assert!(large < 10, "{client}: an unverified source is bounded ({large} large answers)");
        }
    }
}
