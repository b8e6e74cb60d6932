//! Nothing a client or a member sends makes the EM panic, and it always answers.

use crate::common;

use common::*;
use corral_proto::wire::{Code, ContentFormat, MessageType, OptionNumber};
use corral_proto::{Context, IncomingRequest, Request, Response, Rng, Service};
use serde_json::json;

/// Answers a number while the entity is validated, then anything at all.
struct Garbage {
    rng: Rng,
    calls: u32,
}

impl Service for Garbage {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        self.calls += 1;
        if self.calls <= 2 {
            return cx.respond(req.id, Response::content(ContentFormat::TEXT_PLAIN, "1"));
        }
        let r = &mut self.rng;
        let code = [Code::CONTENT, Code::CHANGED, Code::NOT_FOUND, Code::INTERNAL_SERVER_ERROR, Code(0x7f)]
            [r.below(5) as usize];
        let mut resp = Response::new(code);
        if r.chance(0.8) {
            resp = resp.with_content_format(ContentFormat([0u16, 40, 50, 60, 110, 112, 9999][r.below(7) as usize]));
        }
        resp.payload = random_payload(r);
        cx.respond(req.id, resp);
    }
}

fn random_payload(r: &mut Rng) -> Vec<u8> {
    let pieces: [&[u8]; 14] = [
        b"{",
        b"}",
        b"[",
        b"]",
        b"\"er\"",
        b":",
        b",",
        b"1e999",
        b"-0",
        b"\"n\":\"a b\"",
        b"\xff\xfe",
        b"<",
        b">",
        b"{\"v\":",
    ];
    let mut out = Vec::new();
    let n = r.below(12);
    for _ in 0..n {
        if r.chance(0.3) {
            out.push(r.next_u32() as u8);
        } else {
            out.extend_from_slice(pieces[r.below(pieces.len() as u64) as usize]);
        }
    }
    if r.chance(0.2) {
        // Valid CBOR and SenML shapes with odd values.
        out = corral_group::senml::encode_cbor(&[corral_group::senml::Record::num("x", f64::NAN)]);
    }
    out
}

#[test]
fn garbage_from_clients_and_members_never_panics_and_is_always_answered() {
    let mut lab = lab(2);
    for (i, d) in lab.devices.clone().into_iter().enumerate() {
        lab.net.node(d).mount("g", Garbage { rng: Rng::new(77 + i as u64), calls: 0 });
    }
    let er = lab.uris(0..2, "g");
    assert_eq!(lab.create("g", json!({ "er": er, "eo": "avg", "timeout": 2000 })).code, Code::CREATED);
    assert_eq!(lab.create("n", json!({ "er": ["/em/g"] })).code, Code::CREATED);
    let mut r = Rng::new(5);
    let paths = ["em", "em/g", "em/n", "em/g/profile", "em/x", "em/g/profile/x", "em/../g", "em/n/profile"];
    let queries =
        ["eo=avg", "eo=", "enr=99999999999", "delay=auto", "timeout=1", "ect=x", "emt=con", "x", "=", "eo=med"];
    for _ in 0..1000 {
        let method = [Code::GET, Code::PUT, Code::POST, Code::DELETE, Code::FETCH][r.below(5) as usize];
        let mut req = Request::new(method).with_path(paths[r.below(paths.len() as u64) as usize]);
        for _ in 0..r.below(3) {
            req = req.with_query(queries[r.below(queries.len() as u64) as usize]);
        }
        if r.chance(0.5) {
            req = req.with_content_format(ContentFormat([0u16, 40, 50, 60, 110, 65535][r.below(6) as usize]));
        }
        if r.chance(0.3) {
            req = req.with_accept(ContentFormat([0u16, 40, 50, 60, 110, 112, 7][r.below(7) as usize]));
        }
        if r.chance(0.1) {
            req = req.with_option(OptionNumber::HOP_LIMIT, &[r.below(3) as u8]);
        }
        req.payload = random_payload(&mut r);
        // Keep the two entities: deleting them would end the member-side fuzzing early.
        if method == Code::DELETE || (method == Code::PUT && req.options.path().ends_with("profile")) {
            continue;
        }
        let resp = lab.request(req);
        assert!(resp.code.is_response(), "{resp:?}");
    }
    lab.settle();
    assert_eq!(lab.em().jobs_in_progress(), 0);
}

#[test]
fn emt_non_sends_non_member_requests() {
    let mut lab = lab(3);
    let er = lab.uris(0..3, "s/t");
    assert_eq!(lab.create("room", json!({ "er": er, "emt": "non" })).code, Code::CREATED);
    let r = lab.get("em/room", &["eo=avg"], None);
    assert_eq!(r.code, Code::CONTENT);
    let last = lab.requests_to(0).last().unwrap().1.mtype;
    assert_eq!(last, MessageType::Non);
    let r = lab.get("em/room", &["eo=avg", "emt=con"], None);
    assert_eq!(r.code, Code::CONTENT);
    assert_eq!(lab.requests_to(0).last().unwrap().1.mtype, MessageType::Con);
}
