//! The ETSI CoAP plugtest test descriptions that an independent plugtest client found failing (issue 17),
//! performed step by step against one `corral serve` over real sockets, checking each verdict point:
//! TD_COAP_BLOCK_05, TD_COAP_CORE_20, the TD_COAP_OBS_07 → 08 → 09 sequence on one server, and
//! TD_COAP_OBS_04 through `/obs-reset`. The same TDs through libcoap's client are in interop.rs.

use crate::common;

use common::*;
use corral_proto::wire::{BlockValue, Code, ContentFormat, Message, MessageId, MessageType, OptionNumber, Token};
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

/// A CON request over a plain socket, and its piggybacked answer.
struct Raw {
    sock: UdpSocket,
    dst: SocketAddr,
    mid: u16,
}

impl Raw {
    fn new(dst: SocketAddr) -> Raw {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        Raw { sock, dst, mid: 0x100 }
    }

    fn send(&mut self, mut m: Message) -> Message {
        self.mid += 1;
        m.mid = MessageId(self.mid);
        self.sock.send_to(&m.encode(), self.dst).unwrap();
        let mut buf = [0u8; 2048];
        loop {
            let (n, _) = self.sock.recv_from(&mut buf).expect("an answer");
            let r = Message::parse(&buf[..n]).unwrap();
            if r.mid == m.mid {
                return r;
            }
        }
    }
}

fn req(code: Code, path: &str) -> Message {
    let mut m = Message::new(MessageType::Con, code, MessageId(0), Token::new(&[0x5a, 0x01]).unwrap());
    for seg in path.split('/') {
        m.options.push(OptionNumber::URI_PATH, seg.as_bytes());
    }
    m
}

/// TD_COAP_BLOCK_05: POST of a large body with Block1 to /large-post. Verdicts: every non-final block is
/// answered 2.31 Continue echoing its Block1 (M=1); the last one 2.04 echoing Block1 with M=0; the body is
/// accepted whole.
#[test]
fn td_coap_block_05_blockwise_post() {
    let s = corral_serve("127.0.0.1", &["-q"]);
    let mut raw = Raw::new(format!("127.0.0.1:{}", s.port).parse().unwrap());
    let body: Vec<u8> = (0..2500u32).map(|i| b'a' + (i % 26) as u8).collect();
    let chunks: Vec<&[u8]> = body.chunks(1024).collect();
    for (num, chunk) in chunks.iter().enumerate() {
        let more = num + 1 < chunks.len();
        let mut m = req(Code::POST, "large-post");
        m.options.set_uint(OptionNumber::CONTENT_FORMAT, 0);
        let (b, l) = BlockValue { num: num as u32, more, szx: 6 }.encode();
        m.options.set(OptionNumber::BLOCK1, &b[..l]);
        m.payload = chunk.to_vec();
        let r = raw.send(m);
        let echo = r.options.block1().expect("Block1 echoed");
        assert_eq!((echo.num, echo.more), (num as u32, more), "block {num}");
        if more {
            assert_eq!(r.code, Code::CONTINUE, "block {num}");
        } else {
            assert_eq!(r.code, Code::CHANGED);
            assert_eq!(r.payload, b"accepted 2500 bytes");
        }
    }
    let got = Coap::new().get(&format!("coap://127.0.0.1:{}/large-post", s.port), None);
    assert_eq!(got.payload, body);
}

/// TD_COAP_CORE_20: GET /multi-format with Accept text/plain, application/xml, application/json and
/// application/cbor. Verdicts: 2.05 with exactly the requested Content-Format and a payload in it.
#[test]
fn td_coap_core_20_multi_format() {
    let s = corral_serve("127.0.0.1", &["-q"]);
    let coap = Coap::new();
    let uri = format!("coap://127.0.0.1:{}/multi-format", s.port);
    for cf in [ContentFormat::TEXT_PLAIN, ContentFormat::XML, ContentFormat::JSON, ContentFormat::CBOR] {
        let r = coap.get(&uri, Some(cf));
        assert_eq!((r.code, r.options.content_format()), (Code::CONTENT, Some(cf)), "{cf}");
        match cf.0 {
            41 => assert!(r.payload_text().starts_with("<multi-format>")),
            50 => assert!(serde_json::from_slice::<serde_json::Value>(&r.payload).is_ok()),
            60 => {
                let v: ciborium::Value = ciborium::from_reader(&r.payload[..]).expect("valid CBOR");
                assert_eq!(v.as_map().unwrap()[0].1.as_text(), Some("CBOR"));
            }
            _ => assert!(!r.payload.is_empty()),
        }
    }
    assert_eq!(coap.get(&uri, Some(ContentFormat::LINK_FORMAT)).code, Code::NOT_ACCEPTABLE);
}

/// TD_COAP_OBS_07 → 08 → 09 run one after another on one server, as a plugtest does: the deletion of
/// OBS_07 must not leave the next tests without /obs.
#[test]
fn td_coap_obs_07_08_09_in_sequence() {
    let s = corral_serve("127.0.0.1", &["-q", "--obs-period", "30"]);
    let coap = Coap::new();
    let uri = format!("coap://127.0.0.1:{}/obs", s.port);
    let next = |o: &mut corral_tokio::Observation| {
        coap.rt.block_on(async { tokio::time::timeout(Duration::from_secs(5), o.next()).await })
    };
    // OBS_07: observe, DELETE → 2.02, the observer gets 4.04 and the observation ends.
    let mut o = coap.rt.block_on(coap.client.get(&uri).observe()).expect("observe");
    assert!(next(&mut o).expect("first").expect("item").is_ok());
    let d = coap.request(Code::DELETE, &uri, None, None);
    assert_eq!(d.code, Code::DELETED);
    match next(&mut o) {
        Ok(Some(Ok(r))) => assert_eq!(r.code, Code::NOT_FOUND),
        Ok(Some(Err(e))) => assert!(e.to_string().contains("4.04"), "{e}"),
        other => panic!("no 4.04 notification: {other:?}"),
    }
    // OBS_08 at once: /obs is there to observe; a PUT of another Content-Format ends it with 4.06.
    let mut o = coap.rt.block_on(coap.client.get(&uri).observe()).expect("observe again");
    let first = next(&mut o).expect("first").expect("item").expect("2.05");
    assert_eq!(first.code, Code::CONTENT);
    let put = coap.rt.block_on(async {
        coap.client.put(&uri).payload(b"<v>1</v>".to_vec()).content_format(ContentFormat::XML).await.expect("PUT")
    });
    assert_eq!(put.code, Code::CHANGED);
    match next(&mut o) {
        Ok(Some(Ok(r))) => assert_eq!(r.code, Code::NOT_ACCEPTABLE),
        Ok(Some(Err(e))) => assert!(e.to_string().contains("4.06"), "{e}"),
        other => panic!("no 4.06 notification: {other:?}"),
    }
    // OBS_09: observe (the XML value now, Accept it), PUT a new value of the same format: notified.
    let mut o = coap.rt.block_on(coap.client.get(&uri).accept(ContentFormat::XML).observe()).expect("observe");
    assert_eq!(next(&mut o).expect("first").expect("item").expect("2.05").payload, b"<v>1</v>");
    let put = coap.rt.block_on(async {
        coap.client.put(&uri).payload(b"<v>2</v>".to_vec()).content_format(ContentFormat::XML).await.expect("PUT")
    });
    assert_eq!(put.code, Code::CHANGED);
    let n = next(&mut o).expect("notification").expect("item").expect("2.05");
    assert_eq!((n.code, n.payload.as_slice()), (Code::CONTENT, &b"<v>2</v>"[..]));
    assert!(n.options.observe().is_some());
}

/// TD_COAP_OBS_04 (server reboot) through /obs-reset: the server forgets its observers without telling
/// them; no notification follows the next change; a client that re-registers is notified again.
#[test]
fn td_coap_obs_04_server_reboot_via_obs_reset() {
    let s = corral_serve("127.0.0.1", &["-q", "--obs-period", "1"]);
    let coap = Coap::new();
    let base = format!("coap://127.0.0.1:{}", s.port);
    let uri = format!("{base}/obs");
    let next = |o: &mut corral_tokio::Observation, secs| {
        coap.rt.block_on(async { tokio::time::timeout(Duration::from_secs(secs), o.next()).await })
    };
    let mut o = coap.rt.block_on(coap.client.get(&uri).observe()).expect("observe");
    assert!(next(&mut o, 3).is_ok());
    assert!(next(&mut o, 3).is_ok(), "a notification within the period");
    let r = coap.request(Code::POST, &format!("{base}/obs-reset"), None, None);
    assert_eq!(r.code, Code::CHANGED);
    assert!(r.payload_text().contains("1 observer"), "{}", r.payload_text());
    assert!(next(&mut o, 3).is_err(), "no notification after the reset");
    let mut o = coap.rt.block_on(coap.client.get(&uri).observe()).expect("re-register");
    assert!(next(&mut o, 3).is_ok());
    assert!(next(&mut o, 3).is_ok(), "notified again after re-registering");
    assert_eq!(coap.get(&format!("{base}/obs-reset"), None).code, Code::METHOD_NOT_ALLOWED);
}
