//! The stateless cookie exchange of RFC 6347 §4.2.1, done before a session exists: a ClientHello without
//! a valid cookie is answered with one small HelloVerifyRequest and forgotten, so that a flood of
//! ClientHellos from spoofed addresses costs one datagram each and no memory. The cookie is an HMAC of
//! the client's address and its ClientHello random under a secret the driver hands in, so only the
//! holder of the address can return it.
//!
//! This module only reads the few fields it needs from the first record of a datagram; everything else
//! of the handshake is dimpl's. It never panics on input: every read is bounds-checked.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::net::SocketAddr;

/// A DTLS record header: type, version, epoch, sequence number, length.
pub(crate) const RECORD_HEADER: usize = 13;
/// A DTLS handshake header: type, length, message_seq, fragment offset, fragment length.
const HANDSHAKE_HEADER: usize = 12;
const CONTENT_HANDSHAKE: u8 = 22;
const CONTENT_ALERT: u8 = 21;
const CLIENT_HELLO: u8 = 1;
const HELLO_VERIFY_REQUEST: u8 = 3;
/// RFC 6347 §4.2.1: the HelloVerifyRequest's server_version is DTLS 1.0 whatever is negotiated later.
const DTLS_1_0: [u8; 2] = [0xfe, 0xff];
const DTLS_1_2: [u8; 2] = [0xfe, 0xfd];
pub(crate) const COOKIE_LEN: usize = 32;

/// The fields of an unfragmented ClientHello in a datagram's first record that the cookie exchange needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClientHello<'a> {
    /// The record's sequence number, echoed in the HelloVerifyRequest (RFC 6347 §4.2.1).
    pub record_seq: &'a [u8],
    pub random: &'a [u8],
    pub cookie: &'a [u8],
}

/// The ClientHello at the start of `datagram`, or `None` for anything else (another record type, a later
/// epoch, a fragment, a truncation).
pub(crate) fn client_hello(datagram: &[u8]) -> Option<ClientHello<'_>> {
    let header = datagram.get(..RECORD_HEADER)?;
    if header[0] != CONTENT_HANDSHAKE || header[3..5] != [0, 0] {
        return None;
    }
    let len = usize::from(u16::from_be_bytes([header[11], header[12]]));
    let body = datagram.get(RECORD_HEADER..RECORD_HEADER + len)?;
    let hs = body.get(..HANDSHAKE_HEADER)?;
    if hs[0] != CLIENT_HELLO {
        return None;
    }
    let length = u24(&hs[1..4]);
    let (offset, fragment) = (u24(&hs[6..9]), u24(&hs[9..12]));
    if offset != 0 || fragment != length {
        return None;
    }
    let ch = body.get(HANDSHAKE_HEADER..HANDSHAKE_HEADER + length)?;
    let random = ch.get(2..34)?;
    let sid_len = usize::from(*ch.get(34)?);
    let cookie_at = 35 + sid_len;
    let cookie_len = usize::from(*ch.get(cookie_at)?);
    let cookie = ch.get(cookie_at + 1..cookie_at + 1 + cookie_len)?;
    Some(ClientHello { record_seq: &header[5..11], random, cookie })
}

fn u24(b: &[u8]) -> usize {
    (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2])
}

fn mac(secret: &[u8; 32], peer: SocketAddr, random: &[u8]) -> Hmac<Sha256> {
    // A 32-byte key is always a valid HMAC key.
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("HMAC takes a key of any length");
    match peer {
        SocketAddr::V4(a) => mac.update(&a.ip().to_ipv6_mapped().octets()),
        SocketAddr::V6(a) => mac.update(&a.ip().octets()),
    }
    mac.update(&peer.port().to_be_bytes());
    mac.update(random);
    mac
}

/// The cookie `peer` must return with a ClientHello carrying `random`.
pub(crate) fn cookie(secret: &[u8; 32], peer: SocketAddr, random: &[u8]) -> [u8; COOKIE_LEN] {
    mac(secret, peer, random).finalize().into_bytes().into()
}

/// Whether `hello` carries the cookie this secret gives `peer` (compared in constant time).
pub(crate) fn verify(secret: &[u8; 32], peer: SocketAddr, hello: &ClientHello<'_>) -> bool {
    hello.cookie.len() == COOKIE_LEN && mac(secret, peer, hello.random).verify_slice(hello.cookie).is_ok()
}

/// The HelloVerifyRequest answering `hello` from `peer`: 60 bytes, whatever the ClientHello's size, so
/// the exchange amplifies nothing.
pub(crate) fn hello_verify_request(secret: &[u8; 32], peer: SocketAddr, hello: &ClientHello<'_>) -> Vec<u8> {
    let cookie = cookie(secret, peer, hello.random);
    let body_len = 2 + 1 + COOKIE_LEN;
    let record_len = HANDSHAKE_HEADER + body_len;
    let mut out = Vec::with_capacity(RECORD_HEADER + record_len);
    out.push(CONTENT_HANDSHAKE);
    out.extend_from_slice(&DTLS_1_0);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(hello.record_seq);
    out.extend_from_slice(&(record_len as u16).to_be_bytes());
    out.push(HELLO_VERIFY_REQUEST);
    out.extend_from_slice(&(body_len as u32).to_be_bytes()[1..]);
    out.extend_from_slice(&[0, 0]); // message_seq: the server's first message
    out.extend_from_slice(&[0, 0, 0]);
    out.extend_from_slice(&(body_len as u32).to_be_bytes()[1..]);
    out.extend_from_slice(&DTLS_1_0);
    out.push(COOKIE_LEN as u8);
    out.extend_from_slice(&cookie);
    out
}

/// A fatal alert in epoch 0 (RFC 5246 §7.2), sent by a server whose handshake with a peer failed so that
/// the peer says why at once instead of waiting for a timeout. Epoch 0: the peer has not yet received the
/// server's ChangeCipherSpec when a PSK or suite check fails. The record sequence number is far above any
/// the handshake used, so the peer's replay window accepts it.
pub(crate) fn fatal_alert(description: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(RECORD_HEADER + 2);
    out.push(CONTENT_ALERT);
    out.extend_from_slice(&DTLS_1_2);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&[0, 0, 0xff, 0xff, 0xff, 0x00]);
    out.extend_from_slice(&2u16.to_be_bytes());
    out.extend_from_slice(&[2, description]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ClientHello as a DTLS 1.2 client sends it: record, handshake header, version, random, empty
    /// session id, `cookie`, one suite, null compression.
    fn hello(cookie: &[u8]) -> Vec<u8> {
        let mut ch = vec![0xfe, 0xfd];
        ch.extend_from_slice(&[7u8; 32]);
        ch.push(0);
        ch.push(cookie.len() as u8);
        ch.extend_from_slice(cookie);
        ch.extend_from_slice(&[0, 2, 0xc0, 0xa8, 1, 0]);
        let mut hs = vec![CLIENT_HELLO];
        hs.extend_from_slice(&(ch.len() as u32).to_be_bytes()[1..]);
        hs.extend_from_slice(&[0, 0, 0, 0, 0]);
        hs.extend_from_slice(&(ch.len() as u32).to_be_bytes()[1..]);
        hs.extend_from_slice(&ch);
        let mut rec = vec![CONTENT_HANDSHAKE, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 5];
        rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
        rec.extend_from_slice(&hs);
        rec
    }

    const PEER: &str = "192.0.2.1:40000";

    #[test]
    fn a_client_hello_without_a_cookie_is_answered_with_a_cookie_only_its_address_can_return() {
        let secret = [9u8; 32];
        let peer: SocketAddr = PEER.parse().unwrap();
        let first = hello(&[]);
        let h = client_hello(&first).expect("parses");
        assert!(!verify(&secret, peer, &h));
        let hvr = hello_verify_request(&secret, peer, &h);
        assert_eq!(&hvr[5..11], &[0, 0, 0, 0, 0, 5], "echoes the record sequence number");
        let c = &hvr[hvr.len() - COOKIE_LEN..];
        let second = hello(c);
        let h2 = client_hello(&second).unwrap();
        assert!(verify(&secret, peer, &h2));
        assert!(!verify(&secret, "192.0.2.2:40000".parse().unwrap(), &h2), "another address");
        assert!(!verify(&[8u8; 32], peer, &h2), "another secret");
    }

    #[test]
    fn every_truncation_of_a_client_hello_is_refused_without_panicking() {
        let full = hello(&[1u8; 32]);
        for n in 0..full.len() {
            assert_eq!(client_hello(&full[..n]), None, "{n} bytes");
        }
        assert!(client_hello(&full).is_some());
    }

    #[test]
    fn the_hello_verify_request_is_smaller_than_the_client_hello_it_answers() {
        let secret = [1u8; 32];
        let peer: SocketAddr = PEER.parse().unwrap();
        let first = hello(&[]);
        let hvr = hello_verify_request(&secret, peer, &client_hello(&first).unwrap());
        assert_eq!(hvr.len(), 60);
        assert!(hvr.len() < first.len(), "{} against {}", hvr.len(), first.len());
    }
}
