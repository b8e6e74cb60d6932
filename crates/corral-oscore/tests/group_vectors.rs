//! Group OSCORE and deterministic requests, byte for byte against aiocoap 0.4.17: `vectors/group_vectors.json`
//! holds messages aiocoap protected with fixed keys (`vectors/make_group_vectors.py` writes it; Ed25519 is
//! deterministic, so each protected message is a test vector). corral must produce the same bytes and
//! verify aiocoap's. Then properties: any member's deterministic request is the same; tampering, replays,
//! unsafe deterministic methods and strangers are refused.
//!
//! The drafts' own appendix vectors (draft-ietf-core-cacheable-oscore) could not be retrieved on this
//! machine (only the drafts' front matter is in the reference store); the parameters above are the
//! draft's (Master Secret 0x01…10, Salt 0x9e7ca92223786340, ID Context 0xdd11, deterministic Sender ID
//! 0xdc, server 0x52) so its vectors can be added beside these when they are at hand.

use corral_oscore::group::{ccs_for, GroupContext, GroupParams, Mode};
use corral_oscore::{Error, Plain};
use corral_wire::{decode_options, encode_options, Code, OptionNumber, Options};
use std::collections::BTreeMap;

fn h(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn vectors() -> serde_json::Value {
    serde_json::from_str(include_str!("vectors/group_vectors.json")).unwrap()
}

fn field(v: &serde_json::Value, k: &str) -> Vec<u8> {
    h(v[k].as_str().unwrap_or_else(|| panic!("{k} missing")))
}

/// A member's context: `who` is "client" or "server".
fn member(v: &serde_json::Value, who: &str) -> GroupContext {
    let other = if who == "client" { "server" } else { "client" };
    let mut members = BTreeMap::new();
    members.insert(field(v, &format!("{other}_id")), field(v, &format!("{other}_cred")));
    let key = field(v, &format!("{who}_key")).try_into().unwrap();
    GroupContext::derive(GroupParams {
        master_salt: field(v, "salt"),
        deterministic_id: Some(field(v, "deterministic_id")),
        ..GroupParams::new(field(v, "secret"), field(v, "group_id"), field(v, &format!("{who}_id")), key, members)
    })
    .unwrap()
}

fn message(m: &serde_json::Value) -> Plain {
    let bytes = field(m, "options");
    let (options, rest) = decode_options(&bytes).unwrap();
    assert!(rest.is_empty());
    Plain { code: Code(m["code"].as_u64().unwrap() as u8), options, payload: field(m, "payload") }
}

fn encoded(o: &Options) -> String {
    let mut out = Vec::new();
    encode_options(o, &mut out).unwrap();
    out.iter().map(|b| format!("{b:02x}")).collect()
}

fn get(path: &str, query: Option<&str>) -> Plain {
    let mut options = Options::new();
    options.push_str(OptionNumber::URI_PATH, path);
    if let Some(q) = query {
        options.push_str(OptionNumber::URI_QUERY, q);
    }
    Plain { code: Code::GET, options, payload: Vec::new() }
}

#[test]
fn credentials_match_aiocoaps() {
    let v = vectors();
    let c = member(&v, "client");
    assert_eq!(c.own_credential(), &field(&v, "client_cred")[..]);
    let pk: [u8; 32] = field(&v, "client_cred")[14..].try_into().unwrap();
    assert_eq!(ccs_for(&pk), field(&v, "client_cred"));
}

#[test]
fn deterministic_request_is_aiocoaps_byte_for_byte() {
    let v = vectors();
    let mut c = member(&v, "client");
    let (outer, binding) = c.protect_deterministic(&get("instruction", Some("t=7"))).unwrap();
    let want = message(&v["det_request"]);
    assert_eq!(outer.code, Code::FETCH);
    assert_eq!(encoded(&outer.options), encoded(&want.options));
    assert_eq!(outer.payload, want.payload);
    assert_eq!(binding.mode, Mode::Deterministic);

    // The server verifies aiocoap's request, answers, and aiocoap's answer verifies at corral's client.
    let mut s = member(&v, "server");
    let (plain, sb) = s.unprotect_request(&want).unwrap();
    assert_eq!(plain.code, Code::GET);
    assert_eq!(plain.options.get(OptionNumber::URI_QUERY), Some(&b"t=7"[..]));
    assert_eq!(sb.request_hash, binding.request_hash);

    let resp_want = message(&v["det_response"]);
    let (resp, number) = c.unprotect_response(&binding, &resp_want).unwrap();
    assert_eq!(resp.code, Code::CONTENT);
    assert_eq!(resp.payload, b"turn left");
    assert_eq!(number, Some(5));
}

#[test]
fn response_to_a_deterministic_request_is_aiocoaps_byte_for_byte() {
    let v = vectors();
    let mut s = member(&v, "server");
    let (_, sb) = s.unprotect_request(&message(&v["det_request"])).unwrap();
    s.set_sender_sequence_number(5);
    let mut options = Options::new();
    options.set_uint(OptionNumber::CONTENT_FORMAT, 0);
    options.set_uint(OptionNumber::MAX_AGE, 30);
    let resp = s
        .protect_response(&sb, &Plain { code: Code::CONTENT, options, payload: b"turn left".to_vec() }, false)
        .unwrap();
    let want = message(&v["det_response"]);
    assert_eq!(resp.code, want.code);
    assert_eq!(resp.options.get(OptionNumber::OSCORE), want.options.get(OptionNumber::OSCORE));
    assert_eq!(resp.payload, want.payload);
    // The one difference: corral copies the inner Max-Age outside (draft-ietf-core-cacheable-oscore
    // §3.4.4), aiocoap 0.4.17 leaves it out (a proxy then assumes 60 s).
    assert_eq!(resp.options.get(OptionNumber::MAX_AGE), Some(&[30][..]));
    assert_eq!(want.options.get(OptionNumber::MAX_AGE), None);
}

#[test]
fn group_and_pairwise_requests_are_aiocoaps_byte_for_byte() {
    let v = vectors();
    let mut c = member(&v, "client");
    c.set_sender_sequence_number(3);
    let (outer, binding) = c.protect_group_request(&get("hello", None)).unwrap();
    let want = message(&v["group_request"]);
    assert_eq!(
        (outer.code, encoded(&outer.options), &outer.payload),
        (want.code, encoded(&want.options), &want.payload)
    );

    let mut s = member(&v, "server");
    let (plain, sb) = s.unprotect_request(&want).unwrap();
    assert_eq!((plain.code, sb.mode), (Code::GET, Mode::Group));
    let resp = s
        .protect_response(
            &sb,
            &Plain { code: Code::CONTENT, options: Options::new(), payload: b"hello group".to_vec() },
            false,
        )
        .unwrap();
    let want_resp = message(&v["group_pairwise_response"]);
    assert_eq!((encoded(&resp.options), &resp.payload), (encoded(&want_resp.options), &want_resp.payload));
    let (r, _) = c.unprotect_response(&binding, &want_resp).unwrap();
    assert_eq!(r.payload, b"hello group");

    c.set_sender_sequence_number(4);
    let put = Plain { code: Code::PUT, options: get("light", None).options, payload: b"on".to_vec() };
    let (outer, _) = c.protect_pairwise_request(&put, &field(&v, "server_id")).unwrap();
    let want = message(&v["pairwise_request"]);
    assert_eq!(
        (outer.code, encoded(&outer.options), &outer.payload),
        (want.code, encoded(&want.options), &want.payload)
    );
    let (plain, sb) = s.unprotect_request(&want).unwrap();
    assert_eq!((plain.code, plain.payload, sb.mode), (Code::PUT, b"on".to_vec(), Mode::Pairwise));
}

#[test]
fn every_member_sends_the_same_deterministic_request() {
    let v = vectors();
    let (a, _) = member(&v, "client").protect_deterministic(&get("instruction", Some("t=9"))).unwrap();
    // The server is a member too: its deterministic request for the same resource is the same bytes.
    let (b, _) = member(&v, "server").protect_deterministic(&get("instruction", Some("t=9"))).unwrap();
    assert_eq!(a, b);
    let (c, _) = member(&v, "client").protect_deterministic(&get("instruction", Some("t=10"))).unwrap();
    assert_ne!(a.payload, c.payload);
}

#[test]
fn refusals() {
    let v = vectors();
    let mut c = member(&v, "client");
    let mut s = member(&v, "server");
    // Unsafe methods are never deterministic, on either side.
    let post = Plain { code: Code::POST, ..get("x", None) };
    assert_eq!(c.protect_deterministic(&post).unwrap_err(), Error::UnsafeDeterministic);
    // A tampered deterministic request, and one whose Request-Hash does not match its plaintext.
    let (mut det, _) = c.protect_deterministic(&get("instruction", Some("t=1"))).unwrap();
    let mut bad = det.clone();
    bad.payload[0] ^= 1;
    assert_eq!(s.unprotect_request(&bad).unwrap_err(), Error::DecryptionFailed);
    let (other, _) = c.protect_deterministic(&get("instruction", Some("t=2"))).unwrap();
    det.options.set(OptionNumber::REQUEST_HASH, other.options.get(OptionNumber::REQUEST_HASH).unwrap());
    assert!(s.unprotect_request(&det).is_err());
    // No replay window for deterministic requests: the same one twice is fine (it is idempotent).
    let (det, _) = c.protect_deterministic(&get("instruction", Some("t=3"))).unwrap();
    assert!(s.unprotect_request(&det).is_ok() && s.unprotect_request(&det).is_ok());
    // A group-mode request is accepted once.
    let (g, _) = c.protect_group_request(&get("hello", None)).unwrap();
    assert!(s.unprotect_request(&g).is_ok());
    assert_eq!(s.unprotect_request(&g).unwrap_err(), Error::Replay);
    // A forged signature (the ciphertext intact, the last byte of the signature changed).
    let (mut g, _) = c.protect_group_request(&get("hello", None)).unwrap();
    let last = g.payload.len() - 1;
    g.payload[last] ^= 0x80;
    assert_eq!(s.unprotect_request(&g).unwrap_err(), Error::DecryptionFailed);
    // A member of another group (another secret) is a stranger.
    let mut stranger_params = member(&v, "client").params().clone();
    stranger_params.master_secret = vec![9; 16];
    let mut stranger = GroupContext::derive(stranger_params).unwrap();
    let (g, _) = stranger.protect_group_request(&get("hello", None)).unwrap();
    assert!(s.unprotect_request(&g).is_err());
    // Counted operations: a deterministic round trip costs the client 2 AEAD and 1 signature check.
    let mut c = member(&v, "client");
    let mut s = member(&v, "server");
    let (det, binding) = c.protect_deterministic(&get("r", None)).unwrap();
    let (_, sb) = s.unprotect_request(&det).unwrap();
    let resp = s.protect_response(&sb, &Plain { code: Code::CONTENT, ..Plain::default() }, false).unwrap();
    c.unprotect_response(&binding, &resp).unwrap();
    assert_eq!((c.ops().aead, c.ops().signatures), (2, 1));
    assert_eq!((s.ops().aead, s.ops().signatures), (2, 1));
}

#[test]
fn garbage_never_panics() {
    let v = vectors();
    let mut s = member(&v, "server");
    let det = message(&v["det_request"]);
    for cut in 0..det.payload.len() {
        let mut m = det.clone();
        m.payload.truncate(cut);
        assert!(s.unprotect_request(&m).is_err());
    }
    for opt in [&[][..], &[0x3f], &[0x29, 0x01], &[0x19, 0, 5, 1], &[0xff; 12]] {
        let mut m = det.clone();
        m.options.set(OptionNumber::OSCORE, opt);
        let _ = s.unprotect_request(&m);
    }
}
