//! Sans-IO handshakes between two layers wired back to back, on a virtual clock.

use super::*;
use proptest::prelude::*;

const SERVER: &str = "192.0.2.1:5684";
const CLIENT: &str = "192.0.2.2:40000";

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn keys() -> Arc<PskKeys> {
    let mut k = PskKeys::new();
    k.insert("alice", "secretPSK");
    Arc::new(k)
}

fn server() -> DtlsLayer {
    DtlsLayer::new(DtlsConfig::new(Role::Server(keys())), std::time::Instant::now(), [1; 32])
}

fn client(identity: &str, key: &str) -> DtlsLayer {
    let role = Role::Client { identity: identity.into(), key: key.into() };
    DtlsLayer::new(DtlsConfig::new(role), std::time::Instant::now(), [2; 32])
}

/// Moves datagrams between the two layers until neither has any, the clock standing at `now`.
fn pump(now: Instant, c: &mut DtlsLayer, s: &mut DtlsLayer) {
    for _ in 0..64 {
        let mut moved = false;
        while let Some(t) = c.poll_transmit() {
            assert_eq!(t.dst, addr(SERVER));
            s.handle_datagram(now, addr(CLIENT), None, &t.payload);
            moved = true;
        }
        while let Some(t) = s.poll_transmit() {
            assert_eq!(t.dst, addr(CLIENT));
            c.handle_datagram(now, addr(SERVER), None, &t.payload);
            moved = true;
        }
        if !moved {
            return;
        }
    }
    panic!("the layers never went quiet");
}

fn events(l: &mut DtlsLayer) -> Vec<DtlsEvent> {
    std::iter::from_fn(|| l.poll_event()).collect()
}

#[test]
fn a_psk_handshake_carries_plaintext_both_ways_and_names_the_identity() {
    let (mut c, mut s) = (client("alice", "secretPSK"), server());
    let now = Instant::from_secs(1);
    c.send(addr(SERVER), b"request");
    pump(now, &mut c, &mut s);
    assert_eq!(s.stats().cookies_sent, 1, "the first ClientHello is answered with a cookie");
    assert!(c.is_connected(addr(SERVER)) && s.is_connected(addr(CLIENT)));
    assert_eq!(
        s.poll_plaintext(),
        Some((addr(CLIENT), b"request".to_vec())),
        "queued plaintext goes after the handshake"
    );
    assert!(events(&mut s).contains(&DtlsEvent::Connected { peer: addr(CLIENT), identity: Some(b"alice".to_vec()) }));
    s.send(addr(CLIENT), b"response");
    pump(now, &mut c, &mut s);
    assert_eq!(c.poll_plaintext(), Some((addr(SERVER), b"response".to_vec())));
}

#[test]
fn an_unknown_identity_fails_the_clients_handshake_with_that_reason() {
    let (mut c, mut s) = (client("mallory", "secretPSK"), server());
    c.send(addr(SERVER), b"request");
    pump(Instant::from_secs(1), &mut c, &mut s);
    assert_eq!(s.sessions(), 0);
    let failed = DtlsEvent::Failed { peer: addr(SERVER), reason: HandshakeFailure::UnknownIdentity };
    assert!(events(&mut c).contains(&failed), "client events: {:?}", events(&mut c));
}

#[test]
fn a_wrong_key_fails_the_handshake_as_a_key_mismatch() {
    let (mut c, mut s) = (client("alice", "wrongPSK"), server());
    c.send(addr(SERVER), b"request");
    pump(Instant::from_secs(1), &mut c, &mut s);
    assert_eq!(s.sessions(), 0);
    assert_eq!(s.poll_plaintext(), None);
    let failed = DtlsEvent::Failed { peer: addr(SERVER), reason: HandshakeFailure::BadKey };
    assert!(events(&mut c).contains(&failed));
}

#[test]
fn client_hellos_from_a_thousand_spoofed_addresses_leave_no_session() {
    let (mut c, mut s) = (client("alice", "secretPSK"), server());
    c.send(addr(SERVER), b"request");
    let hello = c.poll_transmit().expect("a ClientHello").payload;
    for i in 0..1000u32 {
        let spoofed = SocketAddr::from(([10, (i >> 16) as u8, (i >> 8) as u8, i as u8], 5000));
        s.handle_datagram(Instant::from_secs(1), spoofed, None, &hello);
    }
    assert_eq!(s.sessions(), 0);
    assert_eq!(s.stats().cookies_sent, 1000);
    let answers: Vec<Transmit> = std::iter::from_fn(|| s.poll_transmit()).collect();
    assert!(answers.iter().all(|t| t.payload.len() == 60 && t.payload.len() < hello.len()));
}

#[test]
fn a_cookie_returned_from_another_address_is_not_accepted() {
    let (mut c, mut s) = (client("alice", "secretPSK"), server());
    let now = Instant::from_secs(1);
    c.send(addr(SERVER), b"request");
    let hello = c.poll_transmit().unwrap().payload;
    s.handle_datagram(now, addr(CLIENT), None, &hello);
    let hvr = s.poll_transmit().unwrap().payload;
    c.handle_datagram(now, addr(SERVER), None, &hvr);
    let with_cookie = c.poll_transmit().unwrap().payload;
    s.handle_datagram(now, addr("198.51.100.7:40000"), None, &with_cookie);
    assert_eq!(s.sessions(), 0, "the cookie is bound to the address that asked for it");
    s.handle_datagram(now, addr(CLIENT), None, &with_cookie);
    assert_eq!(s.sessions(), 1);
}

#[test]
fn a_full_session_table_evicts_the_least_recently_active_session() {
    let mut config = DtlsConfig::new(Role::Server(keys()));
    config.max_sessions = 2;
    let mut s = DtlsLayer::new(config, std::time::Instant::now(), [1; 32]);
    let mut clients = Vec::new();
    for port in [40001u16, 40002, 40003] {
        let peer = SocketAddr::from(([192, 0, 2, 9], port));
        let mut c = client("alice", "secretPSK");
        c.send(addr(SERVER), b"x");
        for _ in 0..16 {
            let mut moved = false;
            while let Some(t) = c.poll_transmit() {
                s.handle_datagram(Instant::from_secs(u64::from(port)), peer, None, &t.payload);
                moved = true;
            }
            while let Some(t) = s.poll_transmit() {
                if t.dst == peer {
                    c.handle_datagram(Instant::from_secs(u64::from(port)), addr(SERVER), None, &t.payload);
                    moved = true;
                }
            }
            if !moved {
                break;
            }
        }
        assert!(s.is_connected(peer));
        clients.push(peer);
    }
    assert_eq!(s.sessions(), 2);
    assert_eq!(s.stats().evicted, 1);
    assert!(!s.is_connected(clients[0]), "the oldest went");
    assert!(s.is_connected(clients[1]) && s.is_connected(clients[2]));
}

#[test]
fn an_idle_session_is_closed_with_close_notify() {
    let (mut c, mut s) = (client("alice", "secretPSK"), server());
    let now = Instant::from_secs(1);
    c.send(addr(SERVER), b"request");
    pump(now, &mut c, &mut s);
    assert_eq!(s.sessions(), 1);
    let later = now + Duration::from_secs(301);
    assert!(s.poll_timeout().is_some_and(|t| t <= later));
    s.handle_timeout(later);
    assert_eq!(s.sessions(), 0);
    assert_eq!(s.stats().idle_closed, 1);
    pump(later, &mut c, &mut s);
    assert_eq!(c.sessions(), 0, "the client saw close_notify");
    assert!(events(&mut c).contains(&DtlsEvent::Closed { peer: addr(SERVER) }));
}

#[test]
fn a_handshake_without_answers_retransmits_and_then_fails_with_a_timeout() {
    let mut c = client("alice", "secretPSK");
    c.send(addr(SERVER), b"request");
    let mut sent = 0;
    for _ in 0..1000 {
        if c.sessions() == 0 {
            break;
        }
        while c.poll_transmit().is_some() {
            sent += 1;
        }
        let now = c.poll_timeout().expect("a timer while handshaking");
        assert!(now < Instant::from_secs(120), "still handshaking at {now:?}");
        c.handle_timeout(now);
    }
    assert_eq!(c.sessions(), 0, "the handshake ended");
    assert!(sent > 1, "flights are retransmitted ({sent})");
    let failed = DtlsEvent::Failed { peer: addr(SERVER), reason: HandshakeFailure::Timeout };
    assert!(events(&mut c).contains(&failed));
}

proptest! {
    #[test]
    fn garbage_never_panics_and_opens_no_session(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut s = server();
        s.handle_datagram(Instant::from_secs(1), addr(CLIENT), None, &data);
        prop_assert_eq!(s.sessions(), 0);
        let mut c = client("alice", "secretPSK");
        c.send(addr(SERVER), b"x");
        c.handle_datagram(Instant::from_secs(1), addr(SERVER), None, &data);
    }

    #[test]
    fn a_mangled_flight_never_panics(flip in 0usize..400, byte in any::<u8>(), cut in 0usize..400) {
        let (mut c, mut s) = (client("alice", "secretPSK"), server());
        let now = Instant::from_secs(1);
        c.send(addr(SERVER), b"x");
        let hello = c.poll_transmit().unwrap().payload;
        s.handle_datagram(now, addr(CLIENT), None, &hello);
        let hvr = s.poll_transmit().unwrap().payload;
        c.handle_datagram(now, addr(SERVER), None, &hvr);
        let mut second = c.poll_transmit().unwrap().payload;
        s.handle_datagram(now, addr(CLIENT), None, &second.clone());
        if !second.is_empty() {
            let i = flip % second.len();
            second[i] ^= byte;
            second.truncate(cut.max(1));
        }
        let mut fresh = server();
        fresh.handle_datagram(now, addr(CLIENT), None, &second);
        while let Some(t) = s.poll_transmit() {
            let mut p = t.payload;
            if !p.is_empty() {
                let i = flip % p.len();
                p[i] ^= byte;
                p.truncate(cut.max(1));
            }
            c.handle_datagram(now, addr(SERVER), None, &p);
        }
    }
}
