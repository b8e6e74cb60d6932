//! Property tests of the codecs: owned messages survive encode → parse, the zero-copy views agree with the
//! owned form, and no input makes a decoder panic.

use corral_wire::tcp::{frame_len, FrameDecoder, TcpMessage, TcpPacket};
use corral_wire::{Code, Error, Message, MessageId, MessageType, OptionNumber, Options, Packet, Token};
use proptest::collection::vec;
use proptest::prelude::*;

/// Option values: mostly short (as real ones are), sometimes up to 300 bytes to reach the 2-byte length form.
fn option_value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![3 => vec(any::<u8>(), 0..=16), 1 => vec(any::<u8>(), 0..=300)]
}

/// 0-12 options with any numbers: small ones (common, and repeats) and the whole range (extended deltas).
fn options() -> impl Strategy<Value = Options> {
    let number = prop_oneof![0u16..=40, any::<u16>()];
    vec((number, option_value()), 0..=12).prop_map(|opts| {
        let mut o = Options::new();
        for (n, v) in &opts {
            o.push(OptionNumber(*n), v);
        }
        o
    })
}

fn token() -> impl Strategy<Value = Token> {
    vec(any::<u8>(), 0..=8).prop_map(|t| Token::new(&t).unwrap())
}

fn payload() -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..=300)
}

/// Any message that parses: an Empty message (0.00) carries nothing after its header (RFC 7252 §4.1).
fn message() -> impl Strategy<Value = Message> {
    (0u8..4, any::<u8>(), any::<u16>(), token(), options(), payload()).prop_map(
        |(t, code, mid, token, options, payload)| {
            let mut m = Message::new(MessageType::from_bits(t), Code(code), MessageId(mid), token);
            if code != 0 {
                m.options = options;
                m.payload = payload;
            } else {
                m.token = Token::EMPTY;
            }
            m
        },
    )
}

fn tcp_message() -> impl Strategy<Value = TcpMessage> {
    (any::<u8>(), token(), options(), payload()).prop_map(|(code, token, options, payload)| TcpMessage {
        code: Code(code),
        token,
        options,
        payload,
    })
}

/// Arbitrary bytes, and valid encodings with a few bytes changed, cut or inserted: random bytes alone rarely get
/// past the first header check.
fn damaged(valid: impl Strategy<Value = Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let edit = (any::<prop::sample::Index>(), any::<u8>(), 0u8..4);
    (valid, vec(edit, 0..4)).prop_map(|(mut bytes, edits)| {
        for (at, byte, kind) in edits {
            if bytes.is_empty() {
                break;
            }
            let i = at.index(bytes.len());
            match kind {
                0 => bytes[i] = byte,
                1 => bytes.truncate(i),
                2 => bytes.insert(i, byte),
                _ => bytes[i] ^= 1 << (byte % 8),
            }
        }
        bytes
    })
}

fn udp_input() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![vec(any::<u8>(), 0..2000), damaged(message().prop_map(|m| m.encode()))]
}

/// A stream of several frames, some damaged, or plain random bytes.
fn tcp_input() -> impl Strategy<Value = Vec<u8>> {
    let frames = vec(damaged(tcp_message().prop_map(|m| m.encode())), 1..6).prop_map(|fs| fs.concat());
    prop_oneof![vec(any::<u8>(), 0..2000), frames]
}

/// What a `FrameDecoder` must produce from `bytes`, worked out frame by frame with `frame_len`.
fn reference_frames(mut bytes: &[u8], max_message_size: usize) -> Vec<Result<TcpMessage, Error>> {
    let mut out = Vec::new();
    while let Ok(Some(len)) = frame_len(bytes) {
        let header_len = 1 + [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 4][usize::from(bytes[0] >> 4)];
        if len - header_len > max_message_size {
            out.push(Err(Error::FrameTooLarge));
        } else if len <= bytes.len() {
            out.push(TcpMessage::parse(&bytes[..len]));
        }
        if len > bytes.len() {
            break;
        }
        bytes = &bytes[len..];
    }
    out
}

proptest! {
    #[test]
    fn message_roundtrip(m in message()) {
        let bytes = m.encode();
        prop_assert_eq!(bytes.len(), m.encoded_len());
        prop_assert_eq!(&Message::parse(&bytes).unwrap(), &m);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        prop_assert_eq!(p.mtype(), m.mtype);
        prop_assert_eq!(p.code(), m.code);
        prop_assert_eq!(p.message_id(), m.mid);
        prop_assert_eq!(p.token(), m.token);
        prop_assert!(p.options().eq(m.options.iter()));
        prop_assert_eq!(p.payload(), &m.payload[..]);
        let mut buf = vec![0u8; bytes.len()];
        prop_assert_eq!(m.encode_into(&mut buf), Ok(bytes.len()));
        prop_assert_eq!(buf, bytes);
    }

    #[test]
    fn tcp_message_roundtrip(m in tcp_message()) {
        let bytes = m.encode();
        prop_assert_eq!(bytes.len(), m.encoded_len());
        prop_assert_eq!(frame_len(&bytes), Ok(Some(bytes.len())));
        prop_assert_eq!(&TcpMessage::parse(&bytes).unwrap(), &m);
        let p = TcpPacket::new_checked(&bytes[..]).unwrap();
        prop_assert_eq!(p.code(), m.code);
        prop_assert_eq!(p.token(), m.token);
        prop_assert!(p.options().eq(m.options.iter()));
        prop_assert_eq!(p.payload(), &m.payload[..]);
        prop_assert_eq!(m.encode_into(&mut vec![0u8; bytes.len() - 1]), Err(Error::BufferTooSmall));
    }

    #[test]
    fn udp_decoding_never_panics(bytes in udp_input()) {
        let parsed = Message::parse(&bytes);
        match Packet::new_checked(&bytes[..]) {
            Ok(p) => {
                let _: usize = p.options().map(|(n, v)| usize::from(n.0) + v.len()).sum();
                let _ = p.payload().len();
                let owned = p.to_owned();
                prop_assert_eq!(parsed.as_ref(), Ok(&owned));
                // Not necessarily the same bytes (non-minimal extended lengths), but the same message.
                let again = owned.encode();
                prop_assert_eq!(Message::parse(&again), Ok(owned));
            }
            Err(e) => prop_assert_eq!(parsed, Err(e)),
        }
        let _ = Packet::<&[u8]>::peek_header(&bytes);
    }

    #[test]
    fn tcp_decoding_never_panics(bytes in tcp_input()) {
        let _ = frame_len(&bytes);
        if let Ok(p) = TcpPacket::new_checked(&bytes[..]) {
            let _ = p.options().count();
            let owned = p.to_owned();
            prop_assert_eq!(TcpMessage::parse(&owned.encode()), Ok(owned));
        }
    }

    #[test]
    fn frame_decoder_matches_frame_len(
        bytes in tcp_input(),
        chunks in vec(1usize..80, 1..20),
        max in prop_oneof![Just(1152usize), 0usize..400],
    ) {
        let mut decoder = FrameDecoder::new(max);
        let mut got = Vec::new();
        let mut rest = &bytes[..];
        for size in chunks.iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let (mut chunk, tail) = rest.split_at((*size).min(rest.len()));
            rest = tail;
            while !chunk.is_empty() {
                let taken = decoder.feed(chunk);
                chunk = &chunk[taken..];
                prop_assert!(decoder.buffered() <= decoder.limit());
                loop {
                    match decoder.next_message() {
                        Ok(Some(m)) => got.push(Ok(m)),
                        Ok(None) => break,
                        Err(e) => got.push(Err(e)),
                    }
                }
            }
        }
        prop_assert_eq!(got, reference_frames(&bytes, max));
    }
}
