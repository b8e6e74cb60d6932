//! Protect + unprotect of a typical request (GET /s/t with Uri-Host) and response (2.05, 8 bytes of text),
//! next to encoding and parsing the same plain messages with corral-wire: what OSCORE adds per exchange.
//! Then Group OSCORE's deterministic exchange (seed 001): a deterministic request and its signed answer.

use corral_oscore::group::{ccs_for, public_key_of_seed, GroupContext, GroupParams};
use corral_oscore::{Params, Plain, SecurityContext};
use corral_wire::{Code, Message, MessageId, MessageType, OptionNumber, Options, Token};
use criterion::{criterion_group, criterion_main, Criterion};
use std::collections::BTreeMap;
use std::hint::black_box;

fn contexts() -> (SecurityContext, SecurityContext) {
    let secret = b"0123456789abcdef0123456789abcdef";
    let c = SecurityContext::derive(Params::new(secret, &[1], &[2])).unwrap();
    let s = SecurityContext::derive(Params::new(secret, &[2], &[1])).unwrap();
    (c, s)
}

fn request() -> Plain {
    let mut o = Options::new();
    o.push_str(OptionNumber::URI_HOST, "sensor.example");
    o.push_str(OptionNumber::URI_PATH, "s");
    o.push_str(OptionNumber::URI_PATH, "t");
    Plain { code: Code::GET, options: o, payload: vec![] }
}

fn response() -> Plain {
    let mut o = Options::new();
    o.push_uint(OptionNumber::CONTENT_FORMAT, 0);
    Plain { code: Code::CONTENT, options: o, payload: b"21.5 C\n\n".to_vec() }
}

/// Two members of one group (client 01, server 00) with a Deterministic Client.
fn group() -> (GroupContext, GroupContext) {
    let keys = [[7u8; 32], [9u8; 32]];
    let member = |own: usize| {
        let other = 1 - own;
        let mut members = BTreeMap::new();
        members.insert(vec![other as u8], ccs_for(&public_key_of_seed(&keys[other])));
        GroupContext::derive(GroupParams {
            deterministic_id: Some(vec![0xdc]),
            ..GroupParams::new(b"0123456789abcdef".to_vec(), vec![0xdd, 0x11], vec![own as u8], keys[own], members)
        })
        .unwrap()
    };
    (member(1), member(0))
}

fn bench(c: &mut Criterion) {
    let (mut client, mut server) = contexts();
    let (req, resp) = (request(), response());
    c.bench_function("oscore/exchange (protect+unprotect request and response)", |b| {
        b.iter(|| {
            let (outer, binding) = client.protect_request(black_box(&req), false).unwrap();
            let (_, sb) = server.unprotect_request(&outer).unwrap();
            let outer_r = server.protect_response(&sb, black_box(&resp), false).unwrap();
            black_box(client.unprotect_response(&binding, &outer_r).unwrap());
        })
    });
    let (mut client, _) = contexts();
    c.bench_function("oscore/protect request", |b| {
        b.iter(|| black_box(client.protect_request(black_box(&req), false).unwrap()))
    });
    let (mut gc, mut gs) = group();
    c.bench_function("group/deterministic exchange (request, signed response, both verified)", |b| {
        b.iter(|| {
            let (outer, binding) = gc.protect_deterministic(black_box(&req)).unwrap();
            let (_, sb) = gs.unprotect_request(&outer).unwrap();
            let outer_r = gs.protect_response(&sb, black_box(&resp), false).unwrap();
            black_box(gc.unprotect_response(&binding, &outer_r).unwrap());
        })
    });
    let (_, mut gs2) = group();
    let (outer, binding) = gc.protect_deterministic(&req).unwrap();
    let (_, sb) = gs2.unprotect_request(&outer).unwrap();
    let outer_r = gs2.protect_response(&sb, &resp, false).unwrap();
    c.bench_function("group/verify a cached signed response (each further client)", |b| {
        b.iter(|| black_box(gc.unprotect_response(&binding, black_box(&outer_r)).unwrap()))
    });
    // Baseline in the same run: encode and parse the plain request and response.
    let plain = |p: &Plain| {
        let mut m = Message::new(MessageType::Con, p.code, MessageId(7), Token::new(&[1, 2]).unwrap());
        m.options = p.options.clone();
        m.payload = p.payload.clone();
        m
    };
    let (mreq, mresp) = (plain(&req), plain(&resp));
    c.bench_function("plain/encode+parse request and response (baseline)", |b| {
        b.iter(|| {
            black_box(Message::parse(&black_box(&mreq).encode()).unwrap());
            black_box(Message::parse(&black_box(&mresp).encode()).unwrap());
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
