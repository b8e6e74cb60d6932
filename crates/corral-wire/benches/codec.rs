//! Codec speed on a typical request and response, against coap-lite.
//!
//! Request: CON GET, MID 0x1234, 4-byte token, Uri-Path "sensors", Uri-Path "temp", Uri-Query "unit=c".
//! Response: ACK 2.05, same MID and token, Content-Format 0, Max-Age 60, 64-byte payload.
//!
//! Parsing variants touch every field (type, code, MID, token, each option's number and value, payload), so a lazy
//! view is not credited for work it skipped. `cargo bench -p corral-wire` takes about a minute.

use coap_lite::{CoapOption, MessageClass, RequestType, ResponseType};
use corral_wire::{Code, Message, MessageBuilder, MessageId, MessageType, OptionNumber, Packet, Token};
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion};
use std::hint::black_box;
use std::time::Duration;

const MID: u16 = 0x1234;
const TOKEN: [u8; 4] = [0xde, 0xad, 0xbe, 0xef];
const PAYLOAD: [u8; 64] = *b"{\"t\":21.5,\"u\":\"Cel\",\"ts\":1700000000,\"id\":\"sensor-042\",\"ok\":true}";

fn corral_request() -> Message {
    let mut m = Message::new(MessageType::Con, Code::GET, MessageId(MID), Token::new(&TOKEN).unwrap());
    m.options
        .push(OptionNumber::URI_PATH, b"sensors")
        .push(OptionNumber::URI_PATH, b"temp")
        .push(OptionNumber::URI_QUERY, b"unit=c");
    m
}

fn corral_response() -> Message {
    let mut m = Message::new(MessageType::Ack, Code::CONTENT, MessageId(MID), Token::new(&TOKEN).unwrap());
    m.options.push_uint(OptionNumber::CONTENT_FORMAT, 0).push_uint(OptionNumber::MAX_AGE, 60);
    m.payload = PAYLOAD.to_vec();
    m
}

fn build_request(buf: &mut [u8]) -> usize {
    let mut b =
        MessageBuilder::new(buf, MessageType::Con, Code::GET, MessageId(MID), Token::new(&TOKEN).unwrap()).unwrap();
    b.option(OptionNumber::URI_PATH, b"sensors").unwrap();
    b.option(OptionNumber::URI_PATH, b"temp").unwrap();
    b.option(OptionNumber::URI_QUERY, b"unit=c").unwrap();
    b.finish(&[]).unwrap()
}

fn build_response(buf: &mut [u8]) -> usize {
    let mut b =
        MessageBuilder::new(buf, MessageType::Ack, Code::CONTENT, MessageId(MID), Token::new(&TOKEN).unwrap()).unwrap();
    b.uint_option(OptionNumber::CONTENT_FORMAT, 0).unwrap();
    b.uint_option(OptionNumber::MAX_AGE, 60).unwrap();
    b.finish(&PAYLOAD).unwrap()
}

fn lite_request() -> coap_lite::Packet {
    let mut p = coap_lite::Packet::new();
    p.header.set_type(coap_lite::MessageType::Confirmable);
    p.header.code = MessageClass::Request(RequestType::Get);
    p.header.message_id = MID;
    p.set_token(TOKEN.to_vec());
    p.add_option(CoapOption::UriPath, b"sensors".to_vec());
    p.add_option(CoapOption::UriPath, b"temp".to_vec());
    p.add_option(CoapOption::UriQuery, b"unit=c".to_vec());
    p
}

fn lite_response() -> coap_lite::Packet {
    let mut p = coap_lite::Packet::new();
    p.header.set_type(coap_lite::MessageType::Acknowledgement);
    p.header.code = MessageClass::Response(ResponseType::Content);
    p.header.message_id = MID;
    p.set_token(TOKEN.to_vec());
    p.add_option(CoapOption::ContentFormat, Vec::new());
    p.add_option(CoapOption::MaxAge, vec![60]);
    p.payload = PAYLOAD.to_vec();
    p
}

/// Folds every field of a view into a number the optimiser cannot skip.
fn touch_packet(p: &Packet<&[u8]>) -> u64 {
    let mut acc = p.mtype() as u64 + u64::from(p.code().0) + u64::from(p.message_id().0);
    acc += p.token_bytes().iter().map(|b| u64::from(*b)).sum::<u64>();
    for (n, v) in p.options() {
        acc += u64::from(n.0) + v.len() as u64 + u64::from(v.first().copied().unwrap_or(0));
    }
    acc + p.payload().len() as u64 + u64::from(p.payload().first().copied().unwrap_or(0))
}

fn touch_message(m: &Message) -> u64 {
    let mut acc = m.mtype as u64 + u64::from(m.code.0) + u64::from(m.mid.0);
    acc += m.token.as_bytes().iter().map(|b| u64::from(*b)).sum::<u64>();
    for (n, v) in m.options.iter() {
        acc += u64::from(n.0) + v.len() as u64 + u64::from(v.first().copied().unwrap_or(0));
    }
    acc + m.payload.len() as u64 + u64::from(m.payload.first().copied().unwrap_or(0))
}

fn touch_lite(p: &coap_lite::Packet) -> u64 {
    let mut acc = p.header.get_type() as u64 + u64::from(u8::from(p.header.code)) + u64::from(p.header.message_id);
    acc += p.get_token().iter().map(|b| u64::from(*b)).sum::<u64>();
    for (n, values) in p.options() {
        for v in values {
            acc += u64::from(*n) + v.len() as u64 + u64::from(v.first().copied().unwrap_or(0));
        }
    }
    acc + p.payload.len() as u64 + u64::from(p.payload.first().copied().unwrap_or(0))
}

fn configure<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group(name);
    g.sample_size(50).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    g
}

fn parse(c: &mut Criterion, name: &str, bytes: &[u8]) {
    let mut g = configure(c, name);
    g.bench_function("corral_packet_view", |b| {
        b.iter(|| touch_packet(&Packet::new_checked(black_box(bytes)).unwrap()))
    });
    g.bench_function("corral_message_parse", |b| b.iter(|| touch_message(&Message::parse(black_box(bytes)).unwrap())));
    g.bench_function("coap_lite_from_bytes", |b| {
        b.iter(|| touch_lite(&coap_lite::Packet::from_bytes(black_box(bytes)).unwrap()))
    });
    g.finish();
}

/// Generic rather than `fn` pointers, so that each variant is inlined into its loop as a caller's code would be.
fn emit(
    c: &mut Criterion,
    name: &str,
    builder: impl Fn(&mut [u8]) -> usize,
    message: impl Fn() -> Message,
    lite: impl Fn() -> coap_lite::Packet,
) {
    let mut g = configure(c, name);
    g.bench_function("corral_builder_stack", |b| {
        b.iter(|| {
            let mut buf = [0u8; 128];
            let n = builder(black_box(&mut buf));
            black_box(buf);
            n
        })
    });
    let prebuilt = message();
    g.bench_function("corral_message_encode", |b| b.iter(|| black_box(&prebuilt).encode()));
    g.bench_function("corral_message_encode_into_stack", |b| {
        b.iter(|| {
            let mut buf = [0u8; 128];
            let n = black_box(&prebuilt).encode_into(&mut buf).unwrap();
            black_box(buf);
            n
        })
    });
    g.bench_function("corral_message_build_and_encode", |b| b.iter(|| black_box(message()).encode()));
    let prebuilt_lite = lite();
    g.bench_function("coap_lite_to_bytes", |b| b.iter(|| black_box(&prebuilt_lite).to_bytes().unwrap()));
    g.bench_function("coap_lite_build_and_to_bytes", |b| b.iter(|| black_box(lite()).to_bytes().unwrap()));
    g.finish();
}

fn codec(c: &mut Criterion) {
    let request = corral_request().encode();
    let response = corral_response().encode();
    // Every variant handles the same message: the encodings agree byte for byte, and each side reads the other's.
    let mut buf = [0u8; 128];
    let n = build_request(&mut buf);
    assert_eq!(&buf[..n], &request[..]);
    let n = build_response(&mut buf);
    assert_eq!(&buf[..n], &response[..]);
    assert_eq!(lite_request().to_bytes().unwrap(), request);
    assert_eq!(lite_response().to_bytes().unwrap(), response);
    assert_eq!(touch_lite(&coap_lite::Packet::from_bytes(&request).unwrap()), touch_message(&corral_request()));
    assert_eq!(touch_lite(&coap_lite::Packet::from_bytes(&response).unwrap()), touch_message(&corral_response()));
    assert_eq!(touch_packet(&Packet::new_checked(&request[..]).unwrap()), touch_message(&corral_request()));

    parse(c, "parse_request", &request);
    emit(c, "emit_request", build_request, corral_request, lite_request);
    parse(c, "parse_response", &response);
    emit(c, "emit_response", build_response, corral_response, lite_response);
}

criterion_group!(benches, codec);
criterion_main!(benches);
