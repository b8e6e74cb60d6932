//! The two options of a proxy that carries one unicast request to a group (draft-ietf-core-groupcomm-proxy,
//! followed as its revision -07 of March 2026, the editor's copy): Multicast-Timeout in the request, how
//! many seconds the client collects responses; Reply-From in each relayed response, the member that sent
//! it. Earlier revisions called them Multicast-Signaling and Response-Forwarding.
//!
//! The option numbers are still TBD in the draft; corral uses the numbers the draft suggests to IANA:
//! Multicast-Timeout 2 (elective, unsafe, uint of 0-4 bytes) and Reply-From 248 (elective, safe to
//! forward). A Reply-From value is a CBOR sequence of one array, a CRI (draft-ietf-core-href) with only a
//! scheme and an authority: `[scheme-id, [host-ip, port]]`, the scheme id being `-1 - scheme number`
//! (coap -1, coaps -2, coap+tcp -7, coaps+tcp -8) and the host 4 or 16 bytes. The draft's optional second
//! array (a reverse proxy's CRI reference) is not produced, and is refused when read.

use crate::cbor;
use crate::uri::Scheme;
use crate::Error;
use alloc::vec::Vec;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

const BAD: Error = Error::Uri("Reply-From is not a CBOR CRI [scheme-id, [host-ip, port]]");

fn scheme_id(scheme: Scheme) -> i64 {
    match scheme {
        Scheme::Coap => -1,
        Scheme::Coaps => -2,
        Scheme::CoapTcp => -7,
        Scheme::CoapsTcp => -8,
    }
}

/// The Reply-From value naming the member at `addr`, reached over `scheme`.
pub fn encode_reply_from(scheme: Scheme, addr: SocketAddr) -> Vec<u8> {
    let mut out = Vec::with_capacity(24);
    cbor::array(&mut out, 2);
    cbor::int(&mut out, scheme_id(scheme));
    cbor::array(&mut out, 2);
    match addr.ip() {
        IpAddr::V4(v4) => cbor::bstr(&mut out, &v4.octets()),
        IpAddr::V6(v6) => cbor::bstr(&mut out, &v6.octets()),
    }
    cbor::uint(&mut out, u64::from(addr.port()));
    out
}

/// The member a Reply-From value names. A host name, a zone, user information or a second CRI is refused
/// (a forward proxy names its members by address); a missing port is the scheme's default.
pub fn decode_reply_from(value: &[u8]) -> Result<(Scheme, SocketAddr), Error> {
    let mut r = cbor::Reader::new(value);
    if r.array() != Some(2) {
        return Err(BAD);
    }
    let scheme = match r.int().ok_or(BAD)? {
        -1 => Scheme::Coap,
        -2 => Scheme::Coaps,
        -7 => Scheme::CoapTcp,
        -8 => Scheme::CoapsTcp,
        _ => return Err(Error::Uri("Reply-From names a scheme that is not CoAP")),
    };
    let items = r.array().filter(|n| (1..=2).contains(n)).ok_or(BAD)?;
    let ip = match r.bstr().ok_or(BAD)? {
        b if b.len() == 4 => IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3])),
        b if b.len() == 16 => {
            let mut o = [0u8; 16];
            o.copy_from_slice(b);
            IpAddr::V6(Ipv6Addr::from(o))
        }
        _ => return Err(BAD),
    };
    let port =
        if items == 2 { r.uint().and_then(|p| u16::try_from(p).ok()).ok_or(BAD)? } else { scheme.default_port() };
    if !r.is_empty() {
        return Err(BAD);
    }
    Ok((scheme, SocketAddr::new(ip, port)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_round_trips_in_the_drafts_cri_form() {
        let v4: SocketAddr = "192.0.2.7:5683".parse().unwrap();
        let bytes = encode_reply_from(Scheme::Coap, v4);
        // [-1, [h'C0000207', 5683]]
        assert_eq!(bytes, [0x82, 0x20, 0x82, 0x44, 192, 0, 2, 7, 0x19, 0x16, 0x33]);
        assert_eq!(decode_reply_from(&bytes), Ok((Scheme::Coap, v4)));
        let v6: SocketAddr = "[2001:db8::1]:61616".parse().unwrap();
        assert_eq!(decode_reply_from(&encode_reply_from(Scheme::CoapTcp, v6)), Ok((Scheme::CoapTcp, v6)));
        // Without a port: the scheme's default.
        assert_eq!(
            decode_reply_from(&[0x82, 0x20, 0x81, 0x44, 10, 0, 0, 1]),
            Ok((Scheme::Coap, "10.0.0.1:5683".parse().unwrap()))
        );
    }

    #[test]
    fn malformed_values_are_errors_not_panics() {
        let good = encode_reply_from(Scheme::Coap, "192.0.2.7:5683".parse().unwrap());
        for cut in 0..good.len() {
            assert!(decode_reply_from(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut trailing = good.clone();
        trailing.push(0x80);
        assert!(decode_reply_from(&trailing).is_err(), "a second CRI is refused");
        for bad in [
            &[0x82, 0x22, 0x82, 0x44, 1, 2, 3, 4, 0x01][..],         // http
            &[0x82, 0x20, 0x82, 0x43, 1, 2, 3, 0x01],                // a 3-byte address
            &[0x82, 0x20, 0x82, 0x61, 0x61, 0x01],                   // a host name
            &[0x82, 0x20, 0x82, 0x44, 1, 2, 3, 4, 0x1a, 0, 1, 0, 0], // port 65536
            &[0xff],
            &[],
        ] {
            assert!(decode_reply_from(bad).is_err(), "{bad:?}");
        }
    }
}
