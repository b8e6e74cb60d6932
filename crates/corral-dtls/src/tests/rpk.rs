//! Raw public keys (RFC 7250): handshakes between two layers, and the key files.

use super::*;
use crate::rpk::verify;

// P-256 keys made with `openssl ecparam -name prime256v1 -genkey -noout` (test data only).
const SERVER_KEY: &str = "-----BEGIN EC PRIVATE KEY-----
MHcCAQEEIBiH9lSbKVTK+H2p1nSCfxerMqZnlexpp7W1MylfMOqHoAoGCCqGSM49
AwEHoUQDQgAE6sx8CfaJYGnb3+QjVtA5xRLiVsuLp906+s3bkzZTPltX4/k0JqCy
Alfkm9OIga3G+ldhSCSK59Qm1mFDFNpvyA==
-----END EC PRIVATE KEY-----
";
// SERVER_KEY's public key, from `openssl ec -pubout`.
const SERVER_PUBLIC: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE6sx8CfaJYGnb3+QjVtA5xRLiVsuL
p906+s3bkzZTPltX4/k0JqCyAlfkm9OIga3G+ldhSCSK59Qm1mFDFNpvyA==
-----END PUBLIC KEY-----
";
const CLIENT_KEY: &str = "-----BEGIN EC PRIVATE KEY-----
MHcCAQEEINJ8sDyL+Nbcd3IfD1DcmKYZiDvrwiJ8eWQ8/J5V9VdMoAoGCCqGSM49
AwEHoUQDQgAES7Lb9qHs7G6gt7GwUPdBMxBoQoVPRe1/r+w1YP4B2aY9AsOeAjZw
hkU04yoKGMsmLu/WeYUQZA3oo/MeAJmkpg==
-----END EC PRIVATE KEY-----
";
const MALLORY_KEY: &str = "-----BEGIN EC PRIVATE KEY-----
MHcCAQEEIHzAqjtzgJAMhHdDD1w8GF7RpK+QD4TZIKXdpaZZFb3hoAoGCCqGSM49
AwEHoUQDQgAENvplf1YmQqnoAprBszRWT9bGFJdscdjmfqc7EFzXYGDPV6LZ/SdD
t3hIk8xzShahn09S6xhmk0psokfrU+0WsA==
-----END EC PRIVATE KEY-----
";

fn identity(key: &str) -> String {
    Rpk::from_pem(key, PeerKeys::Any).unwrap().identity()
}

fn trusting(key: &str) -> PeerKeys {
    PeerKeys::Trusted(vec![Rpk::from_pem(key, PeerKeys::Any).unwrap().public_key])
}

fn layer(role: Role, key: &str, peers: PeerKeys, secret: u8) -> DtlsLayer {
    let mut config = DtlsConfig::new(role);
    config.rpk = Some(Arc::new(Rpk::from_pem(key, peers).unwrap()));
    DtlsLayer::new(config, [secret; 32])
}

fn rpk_server(peers: PeerKeys) -> DtlsLayer {
    layer(Role::Server(Arc::new(PskKeys::new())), SERVER_KEY, peers, 1)
}

fn rpk_client(key: &str, peers: PeerKeys) -> DtlsLayer {
    layer(Role::Client { identity: Vec::new(), key: Vec::new() }, key, peers, 2)
}

/// The reason of the first failed handshake among `events`.
fn failure(events: &[DtlsEvent]) -> Option<HandshakeFailure> {
    events.iter().find_map(|e| match e {
        DtlsEvent::Failed { reason, .. } => Some(reason.clone()),
        _ => None,
    })
}

#[test]
fn a_raw_public_key_handshake_names_each_peer_by_the_ni_uri_of_its_key() {
    let (mut c, mut s) = (rpk_client(CLIENT_KEY, trusting(SERVER_KEY)), rpk_server(trusting(CLIENT_KEY)));
    let now = Instant::from_secs(1);
    c.send(now, addr(SERVER), b"request");
    pump(now, &mut c, &mut s);
    assert!(c.is_connected(addr(SERVER)) && s.is_connected(addr(CLIENT)));
    assert_eq!(s.poll_plaintext(), Some((addr(CLIENT), b"request".to_vec())));
    let client_id = Some(identity(CLIENT_KEY).into_bytes());
    assert!(events(&mut s).contains(&DtlsEvent::Connected { peer: addr(CLIENT), identity: client_id }));
    let server_id = Some(identity(SERVER_KEY).into_bytes());
    assert!(events(&mut c).contains(&DtlsEvent::Connected { peer: addr(SERVER), identity: server_id }));
    s.send(now, addr(CLIENT), b"response");
    pump(now, &mut c, &mut s);
    assert_eq!(c.poll_plaintext(), Some((addr(SERVER), b"response".to_vec())));
}

#[test]
fn a_client_whose_key_the_server_does_not_trust_is_refused_and_told() {
    let (mut c, mut s) = (rpk_client(MALLORY_KEY, trusting(SERVER_KEY)), rpk_server(trusting(CLIENT_KEY)));
    c.send(Instant::ZERO, addr(SERVER), b"request");
    pump(Instant::from_secs(1), &mut c, &mut s);
    assert_eq!(s.sessions(), 0);
    assert_eq!(s.poll_plaintext(), None);
    let why = format!("the peer's raw public key {} is not a trusted key", identity(MALLORY_KEY));
    assert_eq!(failure(&events(&mut s)), Some(HandshakeFailure::UntrustedKey(why)));
    assert_eq!(failure(&events(&mut c)), Some(HandshakeFailure::RefusedKey));
    assert_eq!(s.stats().failures.bad_certificate, 1);
}

#[test]
fn a_server_whose_key_the_client_does_not_trust_is_refused() {
    let (mut c, mut s) = (rpk_client(CLIENT_KEY, trusting(MALLORY_KEY)), rpk_server(trusting(CLIENT_KEY)));
    c.send(Instant::ZERO, addr(SERVER), b"request");
    pump(Instant::from_secs(1), &mut c, &mut s);
    assert!(!c.is_connected(addr(SERVER)));
    let why = format!("the peer's raw public key {} is not a trusted key", identity(SERVER_KEY));
    assert_eq!(failure(&events(&mut c)), Some(HandshakeFailure::UntrustedKey(why)));
    assert_eq!(s.poll_plaintext(), None);
}

#[test]
fn any_key_is_accepted_only_when_configured_and_then_named() {
    let (mut c, mut s) = (rpk_client(MALLORY_KEY, trusting(SERVER_KEY)), rpk_server(PeerKeys::Any));
    c.send(Instant::ZERO, addr(SERVER), b"request");
    pump(Instant::from_secs(1), &mut c, &mut s);
    let mallory = Some(identity(MALLORY_KEY).into_bytes());
    assert!(events(&mut s).contains(&DtlsEvent::Connected { peer: addr(CLIENT), identity: mallory }));
}

#[test]
fn a_raw_public_key_client_and_a_psk_server_share_no_suite() {
    let (mut c, mut s) = (rpk_client(CLIENT_KEY, trusting(SERVER_KEY)), server());
    c.send(Instant::ZERO, addr(SERVER), b"request");
    pump(Instant::from_secs(1), &mut c, &mut s);
    assert_eq!(failure(&events(&mut c)), Some(HandshakeFailure::NoSharedSuite));
}

#[test]
fn a_private_key_gives_the_public_key_openssl_derives_and_an_ni_identity() {
    let rpk = Rpk::from_pem(SERVER_KEY, PeerKeys::Any).unwrap();
    assert!(rpk.identity().starts_with("ni:///sha-256;"));
    assert_eq!(rpk.identity().len(), "ni:///sha-256;".len() + 43, "SHA-256 in base64url without padding");
    let trusted = PeerKeys::from_pem(SERVER_PUBLIC).unwrap();
    assert_eq!(trusted, PeerKeys::Trusted(vec![rpk.public_key.clone()]));
    assert_eq!(verify(&trusted, &rpk.public_key), Ok(rpk.identity()));
    assert!(verify(&trusting(CLIENT_KEY), &rpk.public_key).unwrap_err().contains("not a trusted key"));
    assert!(verify(&trusted, b"garbage").unwrap_err().contains("not a P-256 key"));
}

#[test]
fn key_files_that_are_not_p256_pem_say_why() {
    assert!(Rpk::from_pem("hello", PeerKeys::Any).unwrap_err().to_string().contains("not PEM"));
    assert!(Rpk::from_pem(SERVER_PUBLIC, PeerKeys::Any).unwrap_err().to_string().contains("no PEM EC PRIVATE KEY"));
    assert!(PeerKeys::from_pem(SERVER_KEY).unwrap_err().to_string().contains("not EC PRIVATE KEY"));
    let short = "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n";
    assert!(PeerKeys::from_pem(short).unwrap_err().to_string().contains("not a P-256 key"));
}

/// A server with PSK keys beside its raw public key (`corral serve --dtls --psk-file --rpk`).
fn mixed_server() -> DtlsLayer {
    layer(Role::Server(keys()), SERVER_KEY, trusting(CLIENT_KEY), 1)
}

#[test]
fn a_psk_client_is_served_by_a_server_that_also_has_a_raw_public_key() {
    let (mut c, mut s) = (client("alice", "secretPSK"), mixed_server());
    let now = Instant::from_secs(1);
    c.send(Instant::ZERO, addr(SERVER), b"request");
    pump(now, &mut c, &mut s);
    assert_eq!(failure(&events(&mut c)), None, "the PSK handshake fails");
    assert!(c.is_connected(addr(SERVER)) && s.is_connected(addr(CLIENT)));
    assert_eq!(s.poll_plaintext(), Some((addr(CLIENT), b"request".to_vec())));
    assert!(events(&mut s).contains(&DtlsEvent::Connected { peer: addr(CLIENT), identity: Some(b"alice".to_vec()) }));
}

#[test]
fn a_server_with_psk_keys_beside_its_raw_public_key_still_takes_raw_public_keys() {
    let (mut c, mut s) = (rpk_client(CLIENT_KEY, trusting(SERVER_KEY)), mixed_server());
    c.send(Instant::ZERO, addr(SERVER), b"request");
    pump(Instant::from_secs(1), &mut c, &mut s);
    let client_id = Some(identity(CLIENT_KEY).into_bytes());
    assert!(events(&mut s).contains(&DtlsEvent::Connected { peer: addr(CLIENT), identity: client_id }));
    // A PSK client with a wrong key is still refused.
    let (mut c, mut s) = (client("alice", "wrongPSK"), mixed_server());
    c.send(Instant::ZERO, addr(SERVER), b"request");
    pump(Instant::from_secs(1), &mut c, &mut s);
    assert_eq!(failure(&events(&mut c)), Some(HandshakeFailure::BadKey));
    assert_eq!(s.sessions(), 0);
}
