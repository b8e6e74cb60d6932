//! Protect + unprotect of a typical request (GET /s/t with Uri-Host) and response (2.05, 8 bytes of text),
//! next to encoding and parsing the same plain messages with corral-wire: what OSCORE adds per exchange.

use corral_oscore::{Params, Plain, SecurityContext};
use corral_wire::{Code, Message, MessageId, MessageType, OptionNumber, Options, Token};
use criterion::{criterion_group, criterion_main, Criterion};
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
