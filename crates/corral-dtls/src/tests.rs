//! Sans-IO handshakes between two layers wired back to back, on a virtual clock.

use super::*;
use proptest::prelude::*;

mod rpk;

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
    DtlsLayer::new(DtlsConfig::new(Role::Server(keys())), [1; 32])
}

fn client(identity: &str, key: &str) -> DtlsLayer {
    let role = Role::Client { identity: identity.into(), key: key.into() };
    DtlsLayer::new(DtlsConfig::new(role), [2; 32])
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
    c.send(now, addr(SERVER), b"request");
    pump(now, &mut c, &mut s);
    assert_eq!(s.stats().cookies_sent, 1, "the first ClientHello is answered with a cookie");
    assert!(c.is_connected(addr(SERVER)) && s.is_connected(addr(CLIENT)));
    assert_eq!(
        s.poll_plaintext(),
        Some((addr(CLIENT), b"request".to_vec())),
        "queued plaintext goes after the handshake"
    );
    assert!(events(&mut s).contains(&DtlsEvent::Connected { peer: addr(CLIENT), identity: Some(b"alice".to_vec()) }));
    s.send(now, addr(CLIENT), b"response");
    pump(now, &mut c, &mut s);
    assert_eq!(c.poll_plaintext(), Some((addr(SERVER), b"response".to_vec())));
}

/// Runs a client with `identity` and `key` against [`server`] to the end: everything the server sent, the
/// client's events and the server's.
fn refused(identity: &str, key: &str) -> (Vec<Vec<u8>>, Vec<DtlsEvent>, Vec<DtlsEvent>) {
    let (mut c, mut s) = (client(identity, key), server());
    let now = Instant::from_secs(1);
    c.send(Instant::ZERO, addr(SERVER), b"request");
    let mut sent = Vec::new();
    for _ in 0..64 {
        let mut moved = false;
        while let Some(t) = c.poll_transmit() {
            s.handle_datagram(now, addr(CLIENT), None, &t.payload);
            moved = true;
        }
        while let Some(t) = s.poll_transmit() {
            c.handle_datagram(now, addr(SERVER), None, &t.payload);
            sent.push(t.payload);
            moved = true;
        }
        if !moved {
            break;
        }
    }
    assert_eq!(s.sessions(), 0);
    (sent, events(&mut c), events(&mut s))
}

#[test]
fn an_unknown_identity_is_answered_like_a_wrong_key_so_identities_cannot_be_probed() {
    let (unknown, unknown_client, unknown_server) = refused("mallory", "secretPSK");
    let (wrong, wrong_client, _) = refused("alice", "wrongPSK");
    // RFC 4279 §2: decrypt_error (fatal, 51) for both; the flights differ only in their random bytes.
    let alert = [0x15, 0xfe, 0xfd];
    let last = |sent: &[Vec<u8>]| sent.last().cloned().unwrap_or_default();
    assert_eq!(last(&unknown)[..3], alert, "the server's last datagram is a plaintext alert");
    assert_eq!(last(&unknown)[13..], [2, 51], "fatal decrypt_error, not unknown_psk_identity (115)");
    assert_eq!(last(&unknown), last(&wrong));
    let lens = |sent: &[Vec<u8>]| sent.iter().map(Vec::len).collect::<Vec<_>>();
    assert_eq!(lens(&unknown), lens(&wrong), "the same flights, of the same sizes");
    let failed = DtlsEvent::Failed { peer: addr(SERVER), reason: HandshakeFailure::BadKey };
    assert!(unknown_client.contains(&failed), "client events: {unknown_client:?}");
    assert!(wrong_client.contains(&failed), "client events: {wrong_client:?}");
    // The server's operator still learns which it was.
    let failed = DtlsEvent::Failed { peer: addr(CLIENT), reason: HandshakeFailure::UnknownIdentity };
    assert!(unknown_server.contains(&failed), "server events: {unknown_server:?}");
}

#[test]
fn a_wrong_key_fails_the_handshake_as_a_key_mismatch() {
    let (mut c, mut s) = (client("alice", "wrongPSK"), server());
    c.send(Instant::ZERO, addr(SERVER), b"request");
    pump(Instant::from_secs(1), &mut c, &mut s);
    assert_eq!(s.sessions(), 0);
    assert_eq!(s.poll_plaintext(), None);
    let failed = DtlsEvent::Failed { peer: addr(SERVER), reason: HandshakeFailure::BadKey };
    assert!(events(&mut c).contains(&failed));
}

#[test]
fn client_hellos_from_a_thousand_spoofed_addresses_leave_no_session() {
    let (mut c, mut s) = (client("alice", "secretPSK"), server());
    c.send(Instant::ZERO, addr(SERVER), b"request");
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
    c.send(now, addr(SERVER), b"request");
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
    let mut s = DtlsLayer::new(config, [1; 32]);
    let mut clients = Vec::new();
    for port in [40001u16, 40002, 40003] {
        let peer = SocketAddr::from(([192, 0, 2, 9], port));
        let mut c = client("alice", "secretPSK");
        c.send(Instant::ZERO, addr(SERVER), b"x");
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
    c.send(now, addr(SERVER), b"request");
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
    c.send(Instant::ZERO, addr(SERVER), b"request");
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
        c.send(Instant::ZERO, addr(SERVER), b"x");
        c.handle_datagram(Instant::from_secs(1), addr(SERVER), None, &data);
    }

    #[test]
    fn a_mangled_flight_never_panics(flip in 0usize..400, byte in any::<u8>(), cut in 0usize..400) {
        let (mut c, mut s) = (client("alice", "secretPSK"), server());
        let now = Instant::from_secs(1);
        c.send(now, addr(SERVER), b"x");
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

/// A client and a server with an established session, the clock at one second.
fn established() -> (DtlsLayer, DtlsLayer, Instant) {
    let (mut c, mut s) = (client("alice", "secretPSK"), server());
    let now = Instant::from_secs(1);
    c.send(now, addr(SERVER), b"hello");
    pump(now, &mut c, &mut s);
    assert!(s.is_connected(addr(CLIENT)));
    while s.poll_plaintext().is_some() {}
    (c, s, now)
}

/// The record the client sends for `plaintext` on the established session.
fn record(c: &mut DtlsLayer, plaintext: &[u8]) -> Vec<u8> {
    c.send(Instant::from_secs(1), addr(SERVER), plaintext);
    let r = c.poll_transmit().expect("a record").payload;
    assert!(c.poll_transmit().is_none());
    r
}

#[test]
fn tampered_replayed_truncated_and_unknown_epoch_records_are_dropped_and_counted_by_reason() {
    let (mut c, mut s, now) = established();
    let before = s.stats().records;
    let genuine = record(&mut c, b"one");
    let mut tampered = genuine.clone();
    *tampered.last_mut().unwrap() ^= 1;
    s.handle_datagram(now, addr(CLIENT), None, &tampered);
    s.handle_datagram(now, addr(CLIENT), None, &genuine);
    assert_eq!(s.poll_plaintext(), Some((addr(CLIENT), b"one".to_vec())), "the genuine record after a forgery");
    s.handle_datagram(now, addr(CLIENT), None, &genuine);
    let mut epoch_two = record(&mut c, b"two");
    epoch_two[3..5].copy_from_slice(&[0, 2]);
    s.handle_datagram(now, addr(CLIENT), None, &epoch_two);
    let three = record(&mut c, b"three");
    s.handle_datagram(now, addr(CLIENT), None, &three[..three.len() - 3]);
    s.handle_datagram(now, addr(CLIENT), None, &[23, 0xfe, 0xfd, 0, 1]);
    assert_eq!(s.poll_plaintext(), None, "nothing of the bad records reaches the message layer");
    let r = s.stats().records;
    assert_eq!(r.bad_mac - before.bad_mac, 1, "{r:?}");
    assert_eq!(r.replay - before.replay, 1, "{r:?}");
    assert_eq!(r.unknown_epoch - before.unknown_epoch, 1, "{r:?}");
    assert_eq!(r.garbage - before.garbage, 2, "{r:?}");
    assert!(s.is_connected(addr(CLIENT)), "no unauthenticated record ends the session");
    s.handle_datagram(now, addr(CLIENT), None, &three);
    assert_eq!(s.poll_plaintext(), Some((addr(CLIENT), b"three".to_vec())));
}

#[test]
fn the_records_a_session_dropped_stay_counted_after_it_ends() {
    let (mut c, mut s, now) = established();
    let genuine = record(&mut c, b"one");
    s.handle_datagram(now, addr(CLIENT), None, &genuine);
    s.handle_datagram(now, addr(CLIENT), None, &genuine);
    let replays = s.stats().records.replay;
    assert!(replays >= 1);
    s.close_all(now);
    assert_eq!(s.sessions(), 0);
    assert_eq!(s.stats().records.replay, replays);
}

#[test]
fn a_record_of_a_closed_session_is_dropped_as_from_no_session() {
    let (mut c, mut s, now) = established();
    let late = record(&mut c, b"late");
    s.close_all(now);
    let before = s.stats().no_session;
    s.handle_datagram(now, addr(CLIENT), None, &late);
    assert_eq!(s.stats().no_session, before + 1);
    assert_eq!((s.sessions(), s.poll_plaintext()), (0, None));
}

#[test]
fn a_client_hello_inside_an_established_session_neither_renegotiates_nor_ends_it() {
    let (mut c, mut s, now) = established();
    let mut other = client("alice", "secretPSK");
    other.send(now, addr(SERVER), b"x");
    let hello = other.poll_transmit().unwrap().payload;
    s.handle_datagram(now, addr(CLIENT), None, &hello);
    while let Some(t) = s.poll_transmit() {
        assert!(t.payload.len() <= hello.len(), "no flight answers a ClientHello in a session");
    }
    assert_eq!(s.sessions(), 1);
    assert!(s.is_connected(addr(CLIENT)), "a spoofable plaintext ClientHello does not end the session");
    let r = record(&mut c, b"still");
    s.handle_datagram(now, addr(CLIENT), None, &r);
    assert_eq!(s.poll_plaintext(), Some((addr(CLIENT), b"still".to_vec())));
}

/// A handshake record in epoch 0 carrying a fragment of a `length`-byte message of type `msg_type`.
fn handshake_fragment(msg_type: u8, seq: u16, length: u32, offset: u32, fragment: &[u8], record_seq: u64) -> Vec<u8> {
    let mut hs = vec![msg_type];
    hs.extend_from_slice(&length.to_be_bytes()[1..]);
    hs.extend_from_slice(&seq.to_be_bytes());
    hs.extend_from_slice(&offset.to_be_bytes()[1..]);
    hs.extend_from_slice(&(fragment.len() as u32).to_be_bytes()[1..]);
    hs.extend_from_slice(fragment);
    let mut rec = vec![22, 0xfe, 0xfd, 0, 0];
    rec.extend_from_slice(&record_seq.to_be_bytes()[2..]);
    rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    rec.extend_from_slice(&hs);
    rec
}

#[test]
fn an_oversized_certificate_chain_in_fragments_is_bounded_and_ends_in_the_handshake_timeout() {
    let mut s = server();
    let mut c = client("alice", "secretPSK");
    let now = Instant::from_secs(1);
    c.send(now, addr(SERVER), b"x");
    let hello = c.poll_transmit().unwrap().payload;
    s.handle_datagram(now, addr(CLIENT), None, &hello);
    let hvr = s.poll_transmit().unwrap().payload;
    c.handle_datagram(now, addr(SERVER), None, &hvr);
    s.handle_datagram(now, addr(CLIENT), None, &c.poll_transmit().unwrap().payload);
    assert_eq!(s.sessions(), 1, "a handshake under way");
    while s.poll_transmit().is_some() {}
    // A Certificate message (type 11) of 16 MiB − 1, the largest a handshake header can announce, in
    // 1,000-byte fragments: 2,000 of them, far past any chain a constrained server should take.
    let chunk = [0x30u8; 1000];
    let total = 0xff_ffff;
    for i in 0..2000u32 {
        let frag = handshake_fragment(11, 2, total, i * 1000, &chunk, 100 + u64::from(i));
        s.handle_datagram(now, addr(CLIENT), None, &frag);
        while s.poll_transmit().is_some() {}
    }
    assert!(s.sessions() <= 1);
    assert!(!s.is_connected(addr(CLIENT)));
    let end = now + Duration::from_secs(31);
    let mut t = now;
    while s.sessions() > 0 && t < end {
        t = s.poll_timeout().map_or(end, |d| d.min(end)).max(t + Duration::from_millis(1));
        s.handle_timeout(t);
        while s.poll_transmit().is_some() {}
    }
    assert_eq!(s.sessions(), 0, "the handshake ended");
    assert_eq!(s.stats().handshakes_failed, 1);
}

#[test]
fn failed_handshakes_are_counted_by_reason() {
    let (mut c, mut s) = (client("mallory", "secretPSK"), server());
    c.send(Instant::ZERO, addr(SERVER), b"request");
    pump(Instant::from_secs(1), &mut c, &mut s);
    let (mut c2, mut s2) = (client("alice", "wrongkey"), server());
    c2.send(Instant::ZERO, addr(SERVER), b"request");
    pump(Instant::from_secs(1), &mut c2, &mut s2);
    let mut total = s.stats();
    total.add(&s2.stats());
    assert_eq!(total.handshakes_failed, 2);
    assert_eq!((total.failures.unknown_identity, total.failures.bad_key), (1, 1), "{total:?}");
    let by: u64 = total.failures_by_reason().iter().map(|(_, n)| n).sum();
    assert_eq!(by, total.handshakes_failed);
    // The client was told decrypt_error, as for a wrong key (RFC 4279 §2).
    assert_eq!(c.stats().failures.bad_key, 1, "the client counts its own failure too");
}
