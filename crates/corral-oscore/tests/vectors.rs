//! RFC 8613 Appendix C, byte for byte: key derivation (C.1–C.3), protected requests (C.4–C.6) and
//! responses (C.7–C.8); then properties: round trips, tampering, replays, and garbage that never panics.

use corral_oscore::{Error, Params, Plain, SecurityContext};
use corral_wire::{Code, Message, OptionNumber, Options};
use proptest::prelude::*;

fn h(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

const SECRET: &str = "0102030405060708090a0b0c0d0e0f10";
const SALT: &str = "9e7ca92223786340";

fn ctx(sender: &str, recipient: &str, salt: bool, id_context: Option<&str>) -> SecurityContext {
    let mut p = Params::new(&h(SECRET), &h(sender), &h(recipient));
    if salt {
        p.master_salt = h(SALT);
    }
    p.id_context = id_context.map(h);
    SecurityContext::derive(p).unwrap()
}

#[test]
fn c1_to_c3_key_derivation() {
    let cases = [
        // (sender, recipient, salt, id context, sender key, recipient key, common iv)
        (
            "",
            "01",
            true,
            None,
            "f0910ed7295e6ad4b54fc793154302ff",
            "ffb14e093c94c9cac9471648b4f98710",
            "4622d4dd6d944168eefb54987c",
        ),
        (
            "01",
            "",
            true,
            None,
            "ffb14e093c94c9cac9471648b4f98710",
            "f0910ed7295e6ad4b54fc793154302ff",
            "4622d4dd6d944168eefb54987c",
        ),
        (
            "00",
            "01",
            false,
            None,
            "321b26943253c7ffb6003b0b64d74041",
            "e57b5635815177cd679ab4bcec9d7dda",
            "be35ae297d2dace910c52e99f9",
        ),
        (
            "01",
            "00",
            false,
            None,
            "e57b5635815177cd679ab4bcec9d7dda",
            "321b26943253c7ffb6003b0b64d74041",
            "be35ae297d2dace910c52e99f9",
        ),
        (
            "",
            "01",
            true,
            Some("37cbf3210017a2d3"),
            "af2a1300a5e95788b356336eeecd2b92",
            "e39a0c7c77b43f03b4b39ab9a268699f",
            "2ca58fb85ff1b81c0b7181b85e",
        ),
        (
            "01",
            "",
            true,
            Some("37cbf3210017a2d3"),
            "e39a0c7c77b43f03b4b39ab9a268699f",
            "af2a1300a5e95788b356336eeecd2b92",
            "2ca58fb85ff1b81c0b7181b85e",
        ),
    ];
    for (s, r, salt, idc, sk, rk, iv) in cases {
        let c = ctx(s, r, salt, idc);
        assert_eq!(c.sender_key(), h(sk), "sender {s:?}");
        assert_eq!(c.recipient_key(), h(rk), "sender {s:?}");
        assert_eq!(c.common_iv(), h(iv), "sender {s:?}");
    }
}

fn plain_of(m: &Message) -> Plain {
    Plain { code: m.code, options: m.options.clone(), payload: m.payload.clone() }
}

/// The outer message, with the request's header and token as Appendix C does.
fn outer_message(template: &Message, p: &Plain) -> Vec<u8> {
    let mut m = Message::new(template.mtype, p.code, template.mid, template.token);
    m.options = p.options.clone();
    m.payload = p.payload.clone();
    m.encode()
}

#[test]
fn c4_to_c6_protected_requests() {
    let cases = [
        (
            "",
            "01",
            true,
            None,
            false,
            "44015d1f00003974396c6f63616c686f737483747631",
            "44025d1f00003974396c6f63616c686f7374620914ff612f1092f1776f1c1668b3825e",
        ),
        (
            "00",
            "01",
            false,
            None,
            false,
            "440171c30000b932396c6f63616c686f737483747631",
            "440271c30000b932396c6f63616c686f737463091400ff4ed339a5a379b0b8bc731fffb0",
        ),
        (
            "",
            "01",
            true,
            Some("37cbf3210017a2d3"),
            true,
            "44012f8eef9bbf7a396c6f63616c686f737483747631",
            "44022f8eef9bbf7a396c6f63616c686f73746b19140837cbf3210017a2d3ff72cd7273fd331ac45cffbe55c3",
        ),
    ];
    for (s, r, salt, idc, send_ctx, unprotected, protected) in cases {
        let mut client = ctx(s, r, salt, idc);
        client.set_sender_sequence_number(20);
        let m = Message::parse(&h(unprotected)).unwrap();
        let (outer, binding) = client.protect_request(&plain_of(&m), send_ctx).unwrap();
        assert_eq!(outer_message(&m, &outer), h(protected), "request from sender {s:?}");
        assert_eq!(binding.piv, vec![0x14]);
        // And the server side takes it back to the original request.
        let mut server = ctx(r, s, salt, idc);
        let (back, b2) = server.unprotect_request(&plain_of(&Message::parse(&h(protected)).unwrap())).unwrap();
        assert_eq!(back, plain_of(&m));
        assert_eq!(b2, binding);
    }
}

#[test]
fn c7_c8_protected_responses() {
    let mut server = ctx("01", "", true, None);
    let request = Message::parse(&h("44025d1f00003974396c6f63616c686f7374620914ff612f1092f1776f1c1668b3825e")).unwrap();
    let (_, binding) = server.unprotect_request(&plain_of(&request)).unwrap();
    let response = Message::parse(&h("64455d1f00003974ff48656c6c6f20576f726c6421")).unwrap();
    let without = server.protect_response(&binding, &plain_of(&response), false).unwrap();
    assert_eq!(
        outer_message(&response, &without),
        h("64445d1f0000397490ffdbaad1e9a7e7b2a813d3c31524378303cdafae119106")
    );
    server.set_sender_sequence_number(0);
    let with = server.protect_response(&binding, &plain_of(&response), true).unwrap();
    assert_eq!(
        outer_message(&response, &with),
        h("64445d1f00003974920100ff4d4c13669384b67354b2b6175ff4b8658c666a6cf88e")
    );
    // The client verifies both.
    let mut client = ctx("", "01", true, None);
    for outer in [&without, &with] {
        let (back, _) = client.unprotect_response(&binding, outer).unwrap();
        assert_eq!(back, plain_of(&response));
    }
}

fn pair() -> (SecurityContext, SecurityContext) {
    (ctx("", "01", true, None), ctx("01", "", true, None))
}

#[test]
fn replays_and_wrong_keys_are_refused_with_the_rfc_answers() {
    let (mut client, mut server) = pair();
    let req = Plain {
        code: Code::GET,
        options: {
            let mut o = Options::new();
            o.push_str(OptionNumber::URI_PATH, "x");
            o
        },
        payload: vec![],
    };
    let (outer, _) = client.protect_request(&req, false).unwrap();
    server.unprotect_request(&outer).unwrap();
    let e = server.unprotect_request(&outer).unwrap_err();
    assert_eq!(e, Error::Replay);
    assert_eq!(e.response_code(), Some((Code::UNAUTHORIZED, "Replay detected")));
    let mut stranger = ctx("01", "", false, None);
    let (outer2, _) = client.protect_request(&req, false).unwrap();
    let e = stranger.unprotect_request(&outer2).unwrap_err();
    assert_eq!(e.response_code(), Some((Code::BAD_REQUEST, "Decryption failed")));
    let mut other_kid = ctx("01", "07", true, None);
    assert_eq!(other_kid.unprotect_request(&outer2).unwrap_err(), Error::UnknownContext);
    // A server that restarted without its window wants Echo first, then accepts only newer requests.
    let mut restarted = ctx("01", "", true, None);
    restarted.restore(0);
    let (outer3, b3) = client.protect_request(&req, false).unwrap();
    assert_eq!(restarted.unprotect_request(&outer3).unwrap_err(), Error::Unsynchronised);
    restarted.resynchronise(&b3);
    assert_eq!(restarted.unprotect_request(&outer2).unwrap_err(), Error::Replay, "older than the Echo'd one");
    let (outer4, _) = client.protect_request(&req, false).unwrap();
    restarted.unprotect_request(&outer4).unwrap();
}

#[test]
fn the_sequence_number_is_reserved_before_use() {
    let (mut client, _) = pair();
    assert_eq!(client.sequence_to_persist(), Some(corral_oscore::K_SSN));
    for _ in 0..corral_oscore::K_SSN {
        assert_eq!(client.sequence_to_persist(), None);
        client.protect_request(&Plain { code: Code::GET, ..Plain::default() }, false).unwrap();
    }
    // The next reservation reaches twice as far: a busy sender writes less often.
    assert_eq!(client.sequence_to_persist(), Some(3 * corral_oscore::K_SSN));
    // After a crash the context continues from the persisted value: no Partial IV is used twice.
    let mut again = ctx("", "01", true, None);
    again.restore(3 * corral_oscore::K_SSN);
    assert_eq!(again.sender_sequence_number(), 3 * corral_oscore::K_SSN);
}

#[test]
fn observe_and_proxy_uri_are_split_as_the_rfc_says() {
    let (mut client, mut server) = pair();
    let mut o = Options::new();
    o.push_str(OptionNumber::PROXY_URI, "coap://example.com:7000/a/b?q=1");
    o.push_uint(OptionNumber::OBSERVE, 0);
    let req = Plain { code: Code::GET, options: o, payload: vec![] };
    let (outer, binding) = client.protect_request(&req, false).unwrap();
    assert_eq!(outer.code, Code::FETCH, "Observe: outer FETCH");
    assert_eq!(outer.options.get(OptionNumber::PROXY_SCHEME), Some(&b"coap"[..]));
    assert_eq!(outer.options.get(OptionNumber::URI_HOST), Some(&b"example.com"[..]));
    assert!(!outer.options.contains(OptionNumber::URI_PATH), "the path is inner");
    assert_eq!(outer.options.get_uint(OptionNumber::OBSERVE), Some(0));
    let (inner, sb) = server.unprotect_request(&outer).unwrap();
    assert_eq!(inner.options.path(), "/a/b");
    let mut resp = Options::new();
    resp.push_uint(OptionNumber::OBSERVE, 7);
    let notification = Plain { code: Code::CONTENT, options: resp, payload: b"21.5".to_vec() };
    let outer_n = server.protect_response(&sb, &notification, true).unwrap();
    assert_eq!(outer_n.code, Code::CONTENT);
    let (back, number) = client.unprotect_response(&binding, &outer_n).unwrap();
    assert_eq!(back.payload, b"21.5");
    assert!(number.is_some() && back.options.observe().is_some());
}

fn arb_plain(request: bool) -> impl Strategy<Value = Plain> {
    let numbers =
        prop_oneof![Just(4u16), Just(8), Just(11), Just(12), Just(15), Just(17), Just(60), Just(258), Just(2000)];
    (
        proptest::collection::vec((numbers, proptest::collection::vec(any::<u8>(), 0..20)), 0..6),
        proptest::collection::vec(any::<u8>(), 0..200),
    )
        .prop_map(move |(opts, payload)| {
            let mut o = Options::new();
            for (n, v) in opts {
                o.push(OptionNumber(n), &v);
            }
            Plain { code: if request { Code::PUT } else { Code::CONTENT }, options: o, payload }
        })
}

proptest! {
    #[test]
    fn round_trips(req in arb_plain(true), resp in arb_plain(false), own_piv in any::<bool>()) {
        let (mut client, mut server) = pair();
        let (outer, binding) = client.protect_request(&req, false).unwrap();
        let (back, sb) = server.unprotect_request(&outer).unwrap();
        prop_assert_eq!(back, req);
        let outer_r = server.protect_response(&sb, &resp, own_piv).unwrap();
        let (back_r, _) = client.unprotect_response(&binding, &outer_r).unwrap();
        prop_assert_eq!(back_r, resp);
    }

    #[test]
    fn any_single_bit_flip_is_rejected(req in arb_plain(true), bit in 0usize..4096) {
        // What OSCORE protects or binds: the ciphertext and the OSCORE option (kid, Partial IV).
        let (mut client, mut server) = pair();
        let (mut outer, _) = client.protect_request(&req, false).unwrap();
        let mut option = outer.options.get(OptionNumber::OSCORE).unwrap().to_vec();
        let total = (option.len() + outer.payload.len()) * 8;
        let i = bit % total;
        if i < option.len() * 8 {
            option[i / 8] ^= 1 << (i % 8);
            outer.options.set(OptionNumber::OSCORE, &option);
        } else {
            let j = i - option.len() * 8;
            outer.payload[j / 8] ^= 1 << (j % 8);
        }
        prop_assert!(server.unprotect_request(&outer).is_err());
    }

    #[test]
    fn garbage_never_panics(option in proptest::collection::vec(any::<u8>(), 0..40), payload in proptest::collection::vec(any::<u8>(), 0..80)) {
        let (mut client, mut server) = pair();
        let mut o = Options::new();
        o.push(OptionNumber::OSCORE, &option);
        let p = Plain { code: Code::POST, options: o, payload };
        let _ = server.unprotect_request(&p);
        let binding = corral_oscore::RequestBinding { kid: vec![], piv: vec![1], observe: true };
        let _ = client.unprotect_response(&binding, &p);
    }
}
