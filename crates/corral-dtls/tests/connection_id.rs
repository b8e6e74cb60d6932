//! Connection ID (RFC 9146): a session follows its client to a new address, on real UDP sockets, with no
//! new handshake; a record that does not authenticate, or replays an old one, from another address moves
//! nothing. The handshakes run between two `DtlsLayer`s; interop with another implementation (pion,
//! through go-coap) is in crates/corral/tests/e2e/interop_dtls_cid.rs.

use corral_dtls::{DtlsConfig, DtlsLayer, PskKeys, Role, CID_LEN};
use corral_proto::Instant;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Duration;

fn server_config() -> DtlsConfig {
    let mut keys = PskKeys::new();
    keys.insert("alice", "secretPSK");
    DtlsConfig::new(Role::Server(Arc::new(keys)))
}

fn client_config() -> DtlsConfig {
    DtlsConfig::new(Role::Client { identity: b"alice".to_vec(), key: b"secretPSK".to_vec() })
}

fn bind() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").expect("a UDP socket on loopback");
    s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    s
}

/// What the server read (from whom) and what the client read back, in one exchange.
type Exchanged = (Option<(SocketAddr, Vec<u8>)>, Option<Vec<u8>>);

/// A client layer and a server layer on real sockets; the client's socket can be replaced.
struct Pair {
    client: DtlsLayer,
    server: DtlsLayer,
    client_socket: UdpSocket,
    server_socket: UdpSocket,
    now: Instant,
}

impl Pair {
    fn new(server: DtlsConfig) -> Pair {
        Pair {
            client: DtlsLayer::new(client_config(), [2; 32]),
            server: DtlsLayer::new(server, [1; 32]),
            client_socket: bind(),
            server_socket: bind(),
            now: Instant::from_secs(1),
        }
    }

    fn server_addr(&self) -> SocketAddr {
        self.server_socket.local_addr().unwrap()
    }

    fn client_addr(&self) -> SocketAddr {
        self.client_socket.local_addr().unwrap()
    }

    /// Sends what both layers have, reads what arrives, until a round moves nothing.
    fn pump(&mut self) {
        let mut buf = [0u8; 2048];
        for _ in 0..64 {
            let mut moved = false;
            while let Some(t) = self.client.poll_transmit() {
                self.client_socket.send_to(&t.payload, t.dst).unwrap();
                moved = true;
            }
            while let Some(t) = self.server.poll_transmit() {
                self.server_socket.send_to(&t.payload, t.dst).unwrap();
                moved = true;
            }
            while let Ok((n, from)) = self.server_socket.recv_from(&mut buf) {
                self.server.handle_datagram(self.now, from, None, &buf[..n]);
                moved = true;
            }
            while let Ok((n, from)) = self.client_socket.recv_from(&mut buf) {
                self.client.handle_datagram(self.now, from, None, &buf[..n]);
                moved = true;
            }
            if !moved {
                return;
            }
        }
        panic!("the layers never went quiet");
    }

    /// The client sends `data` and the server answers `answer`; what each received.
    fn exchange(&mut self, data: &[u8], answer: &[u8]) -> Exchanged {
        let server = self.server_addr();
        self.client.send(self.now, server, data);
        self.pump();
        let got = self.server.poll_plaintext();
        if let Some((from, _)) = &got {
            self.server.send(self.now, *from, answer);
            self.pump();
        }
        let back = self.client.poll_plaintext().map(|(_, d)| d);
        (got, back)
    }
}

#[test]
fn a_client_whose_port_changes_keeps_its_session_by_connection_id() {
    let mut p = Pair::new(server_config());
    let first = p.client_addr();
    let (got, back) = p.exchange(b"GET /a", b"2.05 a");
    assert_eq!(got, Some((first, b"GET /a".to_vec())));
    assert_eq!(back.as_deref(), Some(&b"2.05 a"[..]));
    assert_eq!(p.server.connection_id(first).map(<[u8]>::len), Some(CID_LEN), "the server gave the session a CID");
    assert_eq!(p.client.connection_id(p.server_addr()), Some(&[][..]), "the client asked for none");

    // The client's socket is rebound: its records now come from another port.
    p.client_socket = bind();
    let second = p.client_addr();
    assert_ne!(first, second);
    let (got, back) = p.exchange(b"GET /b", b"2.05 b");
    assert_eq!(got, Some((second, b"GET /b".to_vec())), "the server reads the record from the new address");
    assert_eq!(back.as_deref(), Some(&b"2.05 b"[..]), "and answers there");
    let stats = p.server.stats();
    assert_eq!((stats.handshakes_done, stats.cookies_sent), (1, 1), "no new handshake: {stats:?}");
    assert_eq!(stats.moved, 1);
    assert_eq!(p.server.sessions(), 1);
    assert!(p.server.is_connected(second) && !p.server.is_connected(first));
}

#[test]
fn records_to_the_server_carry_its_connection_id_and_records_to_the_client_none() {
    let mut c = DtlsLayer::new(client_config(), [2; 32]);
    let mut s = DtlsLayer::new(server_config(), [1; 32]);
    let (ca, sa): (SocketAddr, SocketAddr) = ("192.0.2.2:40000".parse().unwrap(), "192.0.2.1:5684".parse().unwrap());
    let now = Instant::from_secs(1);
    c.send(now, sa, b"request");
    let (to_server, to_client) = pump_virtual(now, &mut c, ca, &mut s, sa);
    assert!(s.is_connected(ca));
    let cid = s.connection_id(ca).unwrap().to_vec();
    let protected: Vec<&Vec<u8>> = to_server.iter().filter(|d| d[3..5] != [0, 0]).collect();
    assert!(!protected.is_empty());
    for d in protected {
        assert_eq!(d[0], 25, "tls12_cid");
        assert_eq!(&d[11..11 + CID_LEN], &cid[..], "with the server's CID after the sequence number");
    }
    s.send(now, ca, b"response");
    let (_, to_client2) = pump_virtual(now, &mut c, ca, &mut s, sa);
    let app = to_client.iter().chain(&to_client2).find(|d| d[0] == 23).expect("application data to the client");
    assert_eq!(app[3..5], [0, 1], "an RFC 6347 record in epoch 1");
    assert_eq!(c.poll_plaintext(), Some((sa, b"response".to_vec())));
}

#[test]
fn a_replayed_or_forged_record_from_another_address_does_not_move_the_session() {
    let mut c = DtlsLayer::new(client_config(), [2; 32]);
    let mut s = DtlsLayer::new(server_config(), [1; 32]);
    let (ca, sa): (SocketAddr, SocketAddr) = ("192.0.2.2:40000".parse().unwrap(), "192.0.2.1:5684".parse().unwrap());
    let attacker: SocketAddr = "203.0.113.66:4444".parse().unwrap();
    let now = Instant::from_secs(1);
    c.send(now, sa, b"hello");
    pump_virtual(now, &mut c, ca, &mut s, sa);
    assert_eq!(s.poll_plaintext(), Some((ca, b"hello".to_vec())));

    // A record the client sends, seen on the path and delivered first from the client's address.
    c.send(now, sa, b"second");
    let record = c.poll_transmit().expect("a record").payload;
    s.handle_datagram(now, ca, None, &record);
    assert_eq!(s.poll_plaintext(), Some((ca, b"second".to_vec())));

    // Replayed from elsewhere: known CID, authentic bytes, but not newer.
    s.handle_datagram(now, attacker, None, &record);
    // Forged: the same header (and CID) with the ciphertext changed.
    let mut forged = record.clone();
    let last = forged.len() - 1;
    forged[last] ^= 1;
    s.handle_datagram(now, attacker, None, &forged);
    // A fresh record with the CID but a sequence number no one has used, garbage inside.
    let mut guessed = record.clone();
    guessed[10] = guessed[10].wrapping_add(7);
    s.handle_datagram(now, attacker, None, &guessed);

    assert_eq!(s.poll_plaintext(), None, "nothing was accepted from the attacker");
    assert!(s.poll_transmit().is_none(), "nothing was sent to the attacker");
    assert!(s.is_connected(ca) && !s.is_connected(attacker), "the session stays with the client");
    assert_eq!(s.stats().moved, 0);
    assert_eq!(s.stats().dropped, 3);

    // And the session still works from the client's address.
    c.send(now, sa, b"third");
    pump_virtual(now, &mut c, ca, &mut s, sa);
    assert_eq!(s.poll_plaintext(), Some((ca, b"third".to_vec())));
}

#[test]
fn without_connection_ids_a_new_address_reaches_no_session() {
    let mut config = server_config();
    config.connection_id = false;
    let mut p = Pair::new(config);
    let (got, _) = p.exchange(b"GET /a", b"2.05 a");
    assert!(got.is_some());
    assert_eq!(p.server.connection_id(p.client_addr()), None);
    p.client_socket = bind();
    let (got, back) = p.exchange(b"GET /b", b"2.05 b");
    assert_eq!((got, back), (None, None), "the record from the new address is dropped");
    assert_eq!(p.server.stats().moved, 0);
}

/// Moves datagrams between two layers at virtual addresses until neither has any; what went each way.
fn pump_virtual(
    now: Instant,
    c: &mut DtlsLayer,
    ca: SocketAddr,
    s: &mut DtlsLayer,
    sa: SocketAddr,
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let (mut to_server, mut to_client) = (Vec::new(), Vec::new());
    for _ in 0..64 {
        let mut moved = false;
        while let Some(t) = c.poll_transmit() {
            s.handle_datagram(now, ca, None, &t.payload);
            to_server.push(t.payload);
            moved = true;
        }
        while let Some(t) = s.poll_transmit() {
            c.handle_datagram(now, sa, None, &t.payload);
            to_client.push(t.payload);
            moved = true;
        }
        if !moved {
            return (to_server, to_client);
        }
    }
    panic!("the layers never went quiet");
}

proptest::proptest! {
    /// Mangled copies of a genuine CID record, sent from another address, never panic, never reach the
    /// message layer, and never move the session.
    #[test]
    fn mangled_cid_records_from_elsewhere_move_nothing(flip in 0usize..64, byte in 1u8.., cut in 0usize..64) {
        let mut c = DtlsLayer::new(client_config(), [2; 32]);
        let mut s = DtlsLayer::new(server_config(), [1; 32]);
        let (ca, sa): (SocketAddr, SocketAddr) = ("192.0.2.2:40000".parse().unwrap(), "192.0.2.1:5684".parse().unwrap());
        let now = Instant::from_secs(1);
        c.send(now, sa, b"hello");
        pump_virtual(now, &mut c, ca, &mut s, sa);
        proptest::prop_assert!(s.poll_plaintext().is_some());
        c.send(now, sa, b"second");
        let mut record = c.poll_transmit().unwrap().payload;
        let i = (11 + CID_LEN + flip) % record.len();
        record[i] ^= byte;
        record.truncate(record.len() - cut.min(record.len() - 1));
        s.handle_datagram(now, "203.0.113.66:4444".parse().unwrap(), None, &record);
        proptest::prop_assert_eq!(s.poll_plaintext(), None);
        proptest::prop_assert!(s.is_connected(ca));
        proptest::prop_assert_eq!(s.stats().moved, 0);
    }
}
