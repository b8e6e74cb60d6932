//! The cache key of a proxied request (RFC 7252 §5.6, §5.7.1): the method, the normalised target URI, and
//! every other option number and value that is not NoCacheKey, plus the payload for FETCH (RFC 8132).
//!
//! Stronger than the RIOT proxy of seed 001, which hashed option values only (protocol-notes.md §4): two
//! requests that differ in an option's number but not its value do not collide here, and the key is the
//! bytes themselves, not a truncated hash.
//!
//! Left out beyond NoCacheKey: the options that spell the target (Proxy-Uri, Proxy-Scheme, Uri-*; the
//! normalised URI stands for them, so `coap://h:5683/a` and `coap://h/a` are one resource), Hop-Limit (it
//! depends on the path a request took, not on what it asks), Block1/Block2/Size1/Size2 (the endpoint
//! reassembles bodies: the proxy deals in whole representations), Observe (registrations are aggregated
//! by [`crate::ProxyService`] separately), ETag (validated per client against the response, RFC 7252
//! §5.6.2 lets a proxy use its own validators), and the per-exchange Request-Tag, No-Response and Multicast-Timeout (how long one client collects a
//! group's answers, draft-ietf-core-groupcomm-proxy).

use corral_proto::wire::uri::Uri;
use corral_proto::wire::{write_cache_key, OptionNumber};
use corral_proto::Request;

/// A cache key: the bytes two requests must share to be answered by one response.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key(pub Vec<u8>);

const OUTSIDE_KEY: [OptionNumber; 15] = [
    OptionNumber::PROXY_URI,
    OptionNumber::PROXY_SCHEME,
    OptionNumber::URI_HOST,
    OptionNumber::URI_PORT,
    OptionNumber::URI_PATH,
    OptionNumber::URI_QUERY,
    OptionNumber::HOP_LIMIT,
    OptionNumber::BLOCK1,
    OptionNumber::BLOCK2,
    OptionNumber::SIZE1,
    OptionNumber::SIZE2,
    OptionNumber::OBSERVE,
    OptionNumber::ETAG,
    OptionNumber::REQUEST_TAG,
    OptionNumber::MULTICAST_TIMEOUT,
];

/// The key of `request` for the resource `target`.
pub fn cache_key(request: &Request, target: &Uri) -> Key {
    let mut out = Vec::with_capacity(64);
    let uri = target.to_string();
    out.extend_from_slice(&(uri.len() as u32).to_be_bytes());
    out.extend_from_slice(uri.as_bytes());
    let options = request.options.iter().filter(|(n, _)| !OUTSIDE_KEY.contains(n) && *n != OptionNumber::NO_RESPONSE);
    write_cache_key(request.method, options, &request.payload, &mut out);
    Key(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_proto::wire::{Code, ContentFormat};

    fn key(r: &Request, uri: &str) -> Key {
        cache_key(r, &Uri::parse(uri).unwrap())
    }

    #[test]
    fn what_is_and_is_not_in_the_key() {
        let get = Request::new(Code::GET);
        let base = key(&get, "coap://h/a");
        assert_eq!(base, key(&get, "coap://h:5683/a"), "the URI is normalised");
        assert_ne!(base, key(&get, "coap://h/b"));
        assert_ne!(base, key(&get, "coap://h/a?x"));
        assert_ne!(base, key(&Request::new(Code::FETCH), "coap://h/a"), "the method is in the key");
        let accept = get.clone().with_accept(ContentFormat::JSON);
        assert_ne!(base, key(&accept, "coap://h/a"), "Accept is in the key");
        // The same value under another option number is another key (RIOT hashed values only).
        let cf = get.clone().with_content_format(ContentFormat::JSON);
        assert_ne!(key(&accept, "coap://h/a"), key(&cf, "coap://h/a"));
        let mut hop = get.clone();
        hop.options.push_uint(OptionNumber::HOP_LIMIT, 3);
        hop.options.push(OptionNumber::ETAG, b"e1");
        hop.options.push_uint(OptionNumber::SIZE2, 0);
        assert_eq!(base, key(&hop, "coap://h/a"), "Hop-Limit, ETag and Size2 are not");
        let f1 = Request::new(Code::FETCH).with_payload(b"q1".to_vec());
        let f2 = Request::new(Code::FETCH).with_payload(b"q2".to_vec());
        assert_ne!(key(&f1, "coap://h/a"), key(&f2, "coap://h/a"), "FETCH's payload is in the key");
    }
}
