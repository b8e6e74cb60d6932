//! DTLS on hostile bytes: corral-dtls's layer (and dimpl's record layer and handshake below it) fed any
//! datagrams — from a peer without a session, in the middle of a handshake, and inside an established
//! session, raw or as genuine records mangled — with time passing. No panic; at most one session per
//! address that was heard (the cookie exchange keeps none for a stranger); and a session that existed
//! before the bytes still carries plaintext afterwards unless a genuine record of its peer ended it.
#![no_main]
use corral_dtls::{DtlsConfig, DtlsLayer, PskKeys, Role};
use corral_proto::{Duration, Instant};
use libfuzzer_sys::fuzz_target;
use std::net::SocketAddr;
use std::sync::Arc;

fn server() -> DtlsLayer {
    let mut keys = PskKeys::new();
    keys.insert("alice", "secretPSK");
    let mut config = DtlsConfig::new(Role::Server(Arc::new(keys)));
    config.max_sessions = 4;
    DtlsLayer::new(config, [1; 32])
}

fn client() -> DtlsLayer {
    let role = Role::Client { identity: b"alice".to_vec(), key: b"secretPSK".to_vec() };
    DtlsLayer::new(DtlsConfig::new(role), [2; 32])
}

const S: &str = "192.0.2.1:5684";
const C: &str = "192.0.2.2:40000";

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// Moves datagrams between the two until neither has any (at most 64 rounds).
fn pump(now: Instant, c: &mut DtlsLayer, s: &mut DtlsLayer) {
    for _ in 0..64 {
        let mut moved = false;
        while let Some(t) = c.poll_transmit() {
            s.handle_datagram(now, addr(C), None, &t.payload);
            moved = true;
        }
        while let Some(t) = s.poll_transmit() {
            c.handle_datagram(now, addr(S), None, &t.payload);
            moved = true;
        }
        if !moved {
            return;
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, mut rest)) = data.split_first() else { return };
    let (mut c, mut s) = (client(), server());
    let mut now = Instant::from_secs(1);
    let established = mode % 3 == 2;
    match mode % 3 {
        // A server that has never heard of the peer.
        0 => {}
        // A server in the middle of a handshake: the client's cookie-bearing ClientHello arrived.
        1 => {
            c.send(now, addr(S), b"x");
            let hello = c.poll_transmit().unwrap().payload;
            s.handle_datagram(now, addr(C), None, &hello);
            let hvr = s.poll_transmit().unwrap().payload;
            c.handle_datagram(now, addr(S), None, &hvr);
            let second = c.poll_transmit().unwrap().payload;
            s.handle_datagram(now, addr(C), None, &second);
        }
        // An established session.
        _ => {
            c.send(now, addr(S), b"x");
            pump(now, &mut c, &mut s);
            assert!(s.is_connected(addr(C)));
            while s.poll_plaintext().is_some() {}
        }
    }
    // [op, len, bytes…]*: op's low bits say to whom and how; a genuine record of the client's is mangled by
    // XORing the bytes onto it, or truncated to len.
    while let [op, len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (bytes, next) = tail.split_at(n);
        rest = next;
        let datagram = match op & 3 {
            0 | 1 => bytes.to_vec(),
            2 if established => {
                c.send(now, addr(S), bytes);
                let Some(mut r) = c.poll_transmit().map(|t| t.payload) else { continue };
                for (i, b) in bytes.iter().enumerate() {
                    let at = i % r.len();
                    r[at] ^= b;
                }
                r
            }
            _ => {
                c.send(now, addr(S), b"y");
                let Some(mut r) = c.poll_transmit().map(|t| t.payload) else { continue };
                r.truncate(n);
                r
            }
        };
        // From the peer, or from a stranger (another port: a new address to the server).
        let from = if op & 4 == 0 { addr(C) } else { SocketAddr::from(([192, 0, 2, 3], 40000 + u16::from(op >> 3))) };
        if op & 0x80 == 0 {
            s.handle_datagram(now, from, None, &datagram);
        } else {
            c.handle_datagram(now, addr(S), None, &datagram);
        }
        now = now + Duration::from_millis(u64::from(op & 0x38));
        s.handle_timeout(now);
        c.handle_timeout(now);
        while s.poll_transmit().is_some() {}
        while c.poll_transmit().is_some() {}
        while s.poll_plaintext().is_some() {}
        while c.poll_event().is_some() {}
        assert!(s.sessions() <= 4, "the table's bound");
    }
    if established && s.is_connected(addr(C)) && c.is_connected(addr(S)) {
        c.send(now, addr(S), b"still");
        pump(now, &mut c, &mut s);
        let got: Vec<_> = std::iter::from_fn(|| s.poll_plaintext()).collect();
        assert!(got.iter().any(|(p, d)| *p == addr(C) && d == b"still"), "the session still carries plaintext");
    }
});
