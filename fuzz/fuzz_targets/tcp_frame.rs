//! RFC 8323 streams: a `FrameDecoder` fed the input in two pieces, split where the input's first byte says, must
//! yield exactly the frames that `frame_len` + `TcpMessage::parse` find, keep its buffer bounded, and every frame
//! it yields must re-encode to the same message.
//!
//! Input: `[split, max, stream...]`. `max` picks the decoder's maximum message size (0 = the 1152 base value,
//! else max * 8) so that oversized frames get exercised as well.
#![no_main]

use corral_wire::tcp::{frame_len, FrameDecoder, TcpMessage, TcpPacket};
use corral_wire::Error;
use libfuzzer_sys::fuzz_target;

/// The frames of `stream`, one `frame_len` at a time: what the decoder must produce.
fn reference(mut stream: &[u8], max: usize) -> Vec<Result<TcpMessage, Error>> {
    let mut out = Vec::new();
    while let Ok(Some(len)) = frame_len(stream) {
        let header_len = match stream[0] >> 4 {
            13 => 2,
            14 => 3,
            15 => 5,
            _ => 1,
        };
        if len - header_len > max {
            out.push(Err(Error::FrameTooLarge));
        } else if len <= stream.len() {
            out.push(TcpMessage::parse(&stream[..len]));
        }
        if len > stream.len() {
            break;
        }
        stream = &stream[len..];
    }
    out
}

fn drain(decoder: &mut FrameDecoder, out: &mut Vec<Result<TcpMessage, Error>>) {
    loop {
        match decoder.next_frame() {
            Ok(Some(frame)) => {
                let _ = frame.options().count();
                let owned = frame.to_owned();
                let bytes = owned.encode();
                assert_eq!(bytes.len(), owned.encoded_len());
                assert_eq!(TcpMessage::parse(&bytes).as_ref(), Ok(&owned));
                assert_eq!(TcpPacket::new_checked(&bytes[..]).map(|p| p.to_owned()).as_ref(), Ok(&owned));
                out.push(Ok(owned));
            }
            Ok(None) => return,
            Err(e) => out.push(Err(e)),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let [split, max, stream @ ..] = data else {
        return;
    };
    let max = if *max == 0 { 1152 } else { usize::from(*max) * 8 };
    let split = usize::from(*split).min(stream.len());
    let mut decoder = FrameDecoder::new(max);
    let mut got = Vec::new();
    for mut piece in [&stream[..split], &stream[split..]] {
        while !piece.is_empty() {
            let taken = decoder.feed(piece);
            piece = &piece[taken..];
            assert!(decoder.buffered() <= decoder.limit());
            drain(&mut decoder, &mut got);
        }
    }
    assert_eq!(got, reference(stream, max));
});
