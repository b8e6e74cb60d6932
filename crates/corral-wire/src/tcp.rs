//! RFC 8323 framing: CoAP over TCP and TLS.
//!
//! A reliable transport needs neither the message type nor the message ID, and a byte stream needs a length, so
//! the 4-byte UDP header becomes a variable-length one:
//!
//! ```text
//!  0                   1                   2                   3
//! |  Len  |  TKL  | Extended Length (0, 1, 2 or 4 bytes, as chosen by Len) ...
//! |      Code     | Token (if any, TKL bytes) ...
//! |  Options (if any) ...
//! |1 1 1 1 1 1 1 1|    Payload (if any) ...
//! ```
//! <https://www.rfc-editor.org/rfc/rfc8323#section-3.2>
//!
//! Len counts the options, the payload marker and the payload: not the length header, the code or the token.
//! Len 0-12 is the length itself; 13, 14 and 15 announce a 1-, 2- or 4-byte extended length holding the length
//! minus 13, 269 or 65805 (modelled on the option length encoding of RFC 7252 §3.1).
//!
//! Three ways in, as for UDP:
//! - [`frame_len`] reads just the length header of a stream, to know how many bytes make up the first frame;
//! - [`TcpPacket`] is a zero-copy view of exactly one frame, validated once by [`TcpPacket::new_checked`];
//! - [`TcpMessage`] is the owned form, for building and convenience;
//!
//! and [`FrameDecoder`] cuts a byte stream into frames in a buffer of bounded size.
//!
//! Signalling messages (codes 7.xx) use their own option number space per code: see [`signal`].
//!
//! This module does not act on what it decodes: sending the CSM first, answering Ping with Pong, and aborting
//! the connection on a malformed message (RFC 8323 §5.6) are the connection owner's job.

use crate::option::{scan_options, OptionIter, OptionNumber, Options};
use crate::{Code, Error, Token};
use alloc::vec::Vec;
use core::fmt;

/// Option numbers of signalling messages and the base value of Max-Message-Size.
///
/// Signalling option numbers are scoped to their signalling code: they do not share the number space of
/// request/response options, nor of other signalling codes (RFC 8323 §5.2). So `OptionNumber(2)` is
/// Max-Message-Size in a CSM but Custody in a Ping, and the names [`OptionNumber`] prints for these numbers (from
/// the request/response registry) do not apply.
/// <https://www.rfc-editor.org/rfc/rfc8323#section-5.2>
pub mod signal {
    use crate::OptionNumber;

    /// CSM (7.01), elective uint 0-4 bytes: the largest message the sender can receive.
    /// <https://www.rfc-editor.org/rfc/rfc8323#section-5.3.1>
    pub const MAX_MESSAGE_SIZE: OptionNumber = OptionNumber(2);
    /// CSM (7.01), elective empty: the sender supports block-wise transfer, and BERT if its Max-Message-Size is
    /// above 1152. <https://www.rfc-editor.org/rfc/rfc8323#section-5.3.2>
    pub const BLOCK_WISE_TRANSFER: OptionNumber = OptionNumber(4);
    /// Ping (7.02) and Pong (7.03), elective empty: all requests before the Ping have been processed (in a Pong),
    /// or are asked to be before the Pong is sent (in a Ping). <https://www.rfc-editor.org/rfc/rfc8323#section-5.4.1>
    pub const CUSTODY: OptionNumber = OptionNumber(2);
    /// Release (7.04), elective repeatable string 1-255 bytes: an authority to reconnect to instead.
    /// <https://www.rfc-editor.org/rfc/rfc8323#section-5.5>
    pub const ALTERNATIVE_ADDRESS: OptionNumber = OptionNumber(2);
    /// Release (7.04), elective uint 0-3 bytes: seconds the peer should wait before reconnecting.
    /// <https://www.rfc-editor.org/rfc/rfc8323#section-5.5>
    pub const HOLD_OFF: OptionNumber = OptionNumber(4);
    /// Abort (7.05), elective uint 0-2 bytes: the CSM option number the sender could not process.
    /// <https://www.rfc-editor.org/rfc/rfc8323#section-5.6>
    pub const BAD_CSM_OPTION: OptionNumber = OptionNumber(2);

    /// The Max-Message-Size in force before a peer's CSM says otherwise (RFC 8323 §5.3.1, RFC 7252 §4.6).
    pub const BASE_MAX_MESSAGE_SIZE: usize = 1152;
}

mod field {
    /// The byte holding the Len and TKL nibbles.
    pub const LEN_TKL: usize = 0;
    /// One Len/TKL byte and at most a 4-byte extended length.
    pub const MAX_HEADER_LEN: usize = 5;
    /// Len 13: one extended length byte holding `len - 13`.
    pub const EXT8_BASE: u64 = 13;
    /// Len 14: two extended length bytes holding `len - 269`.
    pub const EXT16_BASE: u64 = 269;
    /// Len 15: four extended length bytes holding `len - 65805`.
    pub const EXT32_BASE: u64 = 65805;
}

/// The most bytes the length header (Len/TKL byte and extended length) of a frame can take.
pub const MAX_HEADER_LEN: usize = field::MAX_HEADER_LEN;

/// The decoded length header of a frame.
#[derive(Debug, Clone, Copy)]
struct Header {
    /// Bytes of the Len/TKL byte and the extended length.
    header_len: usize,
    /// The TKL nibble, not yet validated (9-15 are reserved).
    tkl: u8,
    /// Len: bytes of options, payload marker and payload. Up to 2^32 + 65804, so not necessarily a `usize`.
    body_len: u64,
}

impl Header {
    /// `None` while `prefix` is shorter than the length header.
    fn parse(prefix: &[u8]) -> Option<Header> {
        let first = *prefix.first()?;
        let (ext, base) = match first >> 4 {
            13 => (1, field::EXT8_BASE),
            14 => (2, field::EXT16_BASE),
            15 => (4, field::EXT32_BASE),
            len => (0, u64::from(len)),
        };
        let ext_bytes = prefix.get(1..1 + ext)?;
        let ext_value = ext_bytes.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
        Some(Header { header_len: 1 + ext, tkl: first & 0x0f, body_len: base + ext_value })
    }

    /// What the maximum message size limits: code, token, options, marker and payload. The length header is left
    /// out, as the UDP header is in RFC 7252 §4.6's count; a decoder buffers at most [`MAX_HEADER_LEN`] more.
    fn message_size(&self) -> u64 {
        1 + u64::from(self.tkl) + self.body_len
    }

    /// The whole frame, or `None` if it does not fit a `usize` (only on targets narrower than 64 bits).
    fn frame_len(&self) -> Option<usize> {
        usize::try_from(self.header_len as u64 + self.message_size()).ok()
    }
}

/// The Len nibble and extended length bytes for a body of `body_len` bytes; `None` above 2^32 + 65804.
fn encode_len(body_len: usize) -> Option<(u8, [u8; 4], usize)> {
    let v = body_len as u64;
    Some(if v < field::EXT8_BASE {
        (v as u8, [0; 4], 0)
    } else if v < field::EXT16_BASE {
        (13, [(v - field::EXT8_BASE) as u8, 0, 0, 0], 1)
    } else if v < field::EXT32_BASE {
        let e = ((v - field::EXT16_BASE) as u16).to_be_bytes();
        (14, [e[0], e[1], 0, 0], 2)
    } else {
        (15, u32::try_from(v - field::EXT32_BASE).ok()?.to_be_bytes(), 4)
    })
}

/// The total length of the first frame of a stream that starts with `prefix`, or `Ok(None)` while `prefix` is too
/// short to tell (at most [`MAX_HEADER_LEN`] bytes are needed).
///
/// Only the length header is read: the token length and everything after it are validated by
/// [`TcpPacket::new_checked`], once the whole frame is there. Never allocates.
///
/// # Errors
/// [`Error::FrameTooLarge`] if the length does not fit a `usize` (possible only on 32- and 16-bit targets).
pub fn frame_len(prefix: &[u8]) -> Result<Option<usize>, Error> {
    match Header::parse(prefix) {
        None => Ok(None),
        Some(h) => h.frame_len().map(Some).ok_or(Error::FrameTooLarge),
    }
}

/// A validated, zero-copy view of exactly one RFC 8323 frame.
///
/// [`TcpPacket::new_checked`] validates the whole frame once; after that no accessor fails, so long as the buffer
/// is not modified. Nothing is allocated.
#[derive(Clone, Copy)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
    /// Offset of the code byte (the length of the length header).
    code_at: u8,
    /// Offset just past the options (the payload marker or the end).
    options_end: usize,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Validates the length header against the buffer, the token length, the option encoding and the payload
    /// marker. The buffer must hold exactly one frame: use [`frame_len`] or [`FrameDecoder`] to cut a stream.
    ///
    /// An Empty message (0.00) is not required to be bare, unlike over UDP: RFC 8323 §3.4 makes every Empty
    /// message a keep-alive that the recipient ignores, whatever it carries.
    ///
    /// # Errors
    /// [`Error::Truncated`] if the buffer ends before the declared length (or the header, code or token),
    /// [`Error::TrailingData`] if it goes on after it, [`Error::BadTokenLength`] for TKL 9-15 (a message format
    /// error, RFC 8323 §3.2), and the option errors of RFC 7252 §3.1 within the declared length.
    pub fn new_checked(buffer: T) -> Result<TcpPacket<T>, Error> {
        let b = buffer.as_ref();
        let header = Header::parse(b).ok_or(Error::Truncated)?;
        if header.tkl > 8 {
            return Err(Error::BadTokenLength(header.tkl));
        }
        let frame_len = header.frame_len().ok_or(Error::Truncated)?;
        if b.len() < frame_len {
            return Err(Error::Truncated);
        }
        if b.len() > frame_len {
            return Err(Error::TrailingData);
        }
        let token_end = header.header_len + 1 + usize::from(header.tkl);
        let options_end = token_end + scan_options(&b[token_end..])?;
        if options_end < b.len() && options_end + 1 == b.len() {
            return Err(Error::EmptyPayloadAfterMarker);
        }
        Ok(TcpPacket { buffer, code_at: header.header_len as u8, options_end })
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The whole frame, length header included.
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Bytes of the Len/TKL byte and the extended length (1, 2, 3 or 5).
    pub fn header_len(&self) -> usize {
        usize::from(self.code_at)
    }

    /// The size that a Max-Message-Size limits: the frame without its length header.
    pub fn message_size(&self) -> usize {
        self.as_bytes().len() - self.header_len()
    }

    pub fn code(&self) -> Code {
        Code(self.as_bytes()[self.header_len()])
    }

    fn token_range(&self) -> core::ops::Range<usize> {
        let start = self.header_len() + 1;
        start..start + usize::from(self.as_bytes()[field::LEN_TKL] & 0x0f)
    }

    pub fn token_bytes(&self) -> &[u8] {
        &self.as_bytes()[self.token_range()]
    }

    pub fn token(&self) -> Token {
        // TKL <= 8 was validated.
        Token::new(self.token_bytes()).unwrap_or(Token::EMPTY)
    }

    /// The options in wire order. For a signalling message (code 7.xx) the numbers are those of [`signal`].
    pub fn options(&self) -> OptionIter<'_> {
        OptionIter::new(&self.as_bytes()[self.token_range().end..self.options_end])
    }

    /// The first value of `number`.
    pub fn option(&self, number: OptionNumber) -> Option<&[u8]> {
        self.options().first(number)
    }

    pub fn payload(&self) -> &[u8] {
        crate::option::payload_after(self.as_bytes(), self.options_end)
    }

    /// An Empty message (0.00): a keep-alive to ignore (RFC 8323 §3.4).
    pub fn is_empty(&self) -> bool {
        self.code().is_empty()
    }

    pub fn to_owned(&self) -> TcpMessage {
        TcpMessage {
            code: self.code(),
            token: self.token(),
            options: self.options().collect(),
            payload: self.payload().to_vec(),
        }
    }
}

impl<T: AsRef<[u8]>> fmt::Debug for TcpPacket<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpPacket")
            .field("code", &self.code())
            .field("token", &self.token())
            .field("options", &self.options().collect::<Options>())
            .field("payload_len", &self.payload().len())
            .finish()
    }
}

/// An owned RFC 8323 message: code, token, options, payload. No type and no message ID: the transport is
/// reliable and ordered (RFC 8323 §3.1).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TcpMessage {
    pub code: Code,
    pub token: Token,
    pub options: Options,
    pub payload: Vec<u8>,
}

impl TcpMessage {
    pub fn new(code: Code, token: Token) -> TcpMessage {
        TcpMessage { code, token, options: Options::new(), payload: Vec::new() }
    }

    /// Parses exactly one frame (see [`TcpPacket::new_checked`]).
    pub fn parse(bytes: &[u8]) -> Result<TcpMessage, Error> {
        Ok(TcpPacket::new_checked(bytes)?.to_owned())
    }

    /// Len: bytes of options, marker and payload.
    fn body_len(&self) -> usize {
        self.options.encoded_len() + if self.payload.is_empty() { 0 } else { 1 + self.payload.len() }
    }

    /// The encoded frame's length, length header included.
    pub fn encoded_len(&self) -> usize {
        let body = self.body_len();
        let ext = encode_len(body).map_or(4, |(_, _, ext)| ext);
        1 + ext + 1 + self.token.len() + body
    }

    /// Encodes the frame into `out`; returns its length.
    ///
    /// # Errors
    /// [`Error::BufferTooSmall`] if `out` is shorter than [`encoded_len`](Self::encoded_len),
    /// [`Error::OptionTooLong`] for an option value over 65804 bytes, [`Error::FrameTooLarge`] if the options and
    /// payload exceed the 2^32 + 65804 bytes the length field can express.
    pub fn encode_into(&self, out: &mut [u8]) -> Result<usize, Error> {
        let body = self.body_len();
        let (nibble, ext, ext_len) = encode_len(body).ok_or(Error::FrameTooLarge)?;
        let token_end = 1 + ext_len + 1 + self.token.len();
        if out.len() < token_end + body {
            return Err(Error::BufferTooSmall);
        }
        out[field::LEN_TKL] = (nibble << 4) | self.token.len() as u8;
        out[1..1 + ext_len].copy_from_slice(&ext[..ext_len]);
        out[1 + ext_len] = self.code.0;
        out[2 + ext_len..token_end].copy_from_slice(self.token.as_bytes());
        let mut pos = self.options.write(out, token_end)?;
        if !self.payload.is_empty() {
            out[pos] = 0xff;
            out[pos + 1..pos + 1 + self.payload.len()].copy_from_slice(&self.payload);
            pos += 1 + self.payload.len();
        }
        Ok(pos)
    }

    /// Encodes the frame into a new vector.
    ///
    /// # Panics
    /// If the message cannot be encoded: an option value over 65804 bytes, or more than 4 GiB of options and
    /// payload. Use [`encode_into`](Self::encode_into) to get an error instead.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = alloc::vec![0u8; self.encoded_len()];
        let n = self.encode_into(&mut v).expect("buffer sized by encoded_len");
        v.truncate(n);
        v
    }
}

impl fmt::Debug for TcpMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpMessage")
            .field("code", &self.code)
            .field("token", &self.token)
            .field("options", &self.options)
            .field("payload", &alloc::string::String::from_utf8_lossy(&self.payload))
            .finish()
    }
}

/// Cuts a byte stream into frames, in a buffer that never holds more than `max_message_size + MAX_HEADER_LEN`
/// bytes, so a server can bound the memory of each connection.
///
/// Bytes go in with [`feed`](Self::feed) in chunks of any size (one byte at a time works), frames come out of
/// [`next_frame`](Self::next_frame) as [`TcpPacket`]s that borrow the decoder's buffer: a frame is copied once,
/// from the caller's read buffer into the decoder, and never again unless the caller asks for an owned
/// [`TcpMessage`] ([`next_message`](Self::next_message)). Borrowing rather than returning a range keeps the
/// frame's validation and its bytes together; the borrow ends before the next call, when the buffer may move.
///
/// `feed` takes only what fits and says how much it took, so a chunk holding many frames is not an error: feed,
/// drain the frames, feed the rest. The buffer cannot fill up without a frame to drain or an error to report.
///
/// ```
/// # use corral_wire::tcp::*;
/// # use corral_wire::Error;
/// # fn handle(_: TcpPacket<&[u8]>) {}
/// let mut decoder = FrameDecoder::new(signal::BASE_MAX_MESSAGE_SIZE);
/// let mut chunk: &[u8] = &[0x01, 0xe2, 0x42, 0x01, 0xe3, 0x42]; // as read from the socket: Ping, Pong
/// while !chunk.is_empty() {
///     let taken = decoder.feed(chunk);
///     chunk = &chunk[taken..];
///     while let Some(frame) = decoder.next_frame()? {
///         handle(frame);
///     }
/// }
/// # Ok::<(), Error>(())
/// ```
///
/// Errors leave the decoder usable and in step with the stream: a malformed frame is consumed, and an oversized
/// frame is discarded as its bytes arrive. RFC 8323 §5.6 has the recipient of a malformed message abort the
/// connection, and the decoder does not decide that for its owner.
#[derive(Debug, Clone)]
pub struct FrameDecoder {
    /// Bytes received and not yet returned: `buf[start..]`. Never longer than `limit()`.
    buf: Vec<u8>,
    /// Offset of the first byte of the next frame; bytes before it belong to frames already returned.
    start: usize,
    max_message_size: usize,
    /// Bytes of an oversized frame that have not arrived yet and are to be dropped when they do.
    skip: u64,
}

impl Default for FrameDecoder {
    /// A decoder for the base Max-Message-Size of 1152.
    fn default() -> Self {
        FrameDecoder::new(signal::BASE_MAX_MESSAGE_SIZE)
    }
}

impl FrameDecoder {
    /// A decoder that accepts messages (code, token, options, payload) of up to `max_message_size` bytes: the
    /// value this endpoint advertises in its CSM's Max-Message-Size. Allocates nothing until bytes are fed.
    pub fn new(max_message_size: usize) -> FrameDecoder {
        FrameDecoder { buf: Vec::new(), start: 0, max_message_size, skip: 0 }
    }

    pub fn max_message_size(&self) -> usize {
        self.max_message_size
    }

    /// Changes the limit, e.g. after sending a CSM with a new Max-Message-Size. It applies to frames whose length
    /// header has not been read yet; bytes already buffered stay.
    pub fn set_max_message_size(&mut self, max_message_size: usize) {
        self.max_message_size = max_message_size;
    }

    /// The most bytes the decoder buffers: one largest frame.
    pub fn limit(&self) -> usize {
        self.max_message_size.saturating_add(MAX_HEADER_LEN)
    }

    /// Bytes fed and not yet returned as (or dropped with) a frame.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Whether the stream is between frames: nothing buffered and nothing left to discard. A connection closed
    /// when this is false ended in the middle of a frame.
    pub fn is_idle(&self) -> bool {
        self.buffered() == 0 && self.skip == 0
    }

    /// Buffers as much of `bytes` as fits; returns how many bytes were taken. Call
    /// [`next_frame`](Self::next_frame) until `Ok(None)` before feeding what was not taken.
    #[must_use = "bytes beyond the returned count were not taken"]
    pub fn feed(&mut self, bytes: &[u8]) -> usize {
        let skipped = usize::try_from(self.skip).unwrap_or(usize::MAX).min(bytes.len());
        self.skip -= skipped as u64;
        let bytes = &bytes[skipped..];
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        let limit = self.limit();
        let take = bytes.len().min(limit.saturating_sub(self.buf.len()));
        let need = self.buf.len() + take;
        if need > self.buf.capacity() {
            // Grow geometrically, but never past one largest frame.
            let want = self.buf.capacity().saturating_mul(2).max(need).min(limit);
            self.buf.reserve_exact(want - self.buf.len());
        }
        self.buf.extend_from_slice(&bytes[..take]);
        skipped + take
    }

    /// The next complete frame, `Ok(None)` if more bytes are needed.
    ///
    /// # Errors
    /// [`Error::FrameTooLarge`] for a frame over the maximum message size; its bytes are dropped, those buffered
    /// now and those still to come. Any error of [`TcpPacket::new_checked`] for a malformed frame, which is
    /// consumed. Either way the following call goes on with the next frame.
    pub fn next_frame(&mut self) -> Result<Option<TcpPacket<&[u8]>>, Error> {
        let Some(range) = self.next_range()? else {
            return Ok(None);
        };
        TcpPacket::new_checked(&self.buf[range]).map(Some)
    }

    /// [`next_frame`](Self::next_frame), copied into an owned message.
    pub fn next_message(&mut self) -> Result<Option<TcpMessage>, Error> {
        Ok(self.next_frame()?.map(|p| p.to_owned()))
    }

    /// Frees the buffer's memory if nothing is buffered, e.g. when a connection goes idle after a large message.
    pub fn shrink(&mut self) {
        if self.buffered() == 0 {
            self.buf = Vec::new();
            self.start = 0;
        }
    }

    /// Finds the next whole frame and marks it consumed; `Ok(None)` if it is not all there.
    fn next_range(&mut self) -> Result<Option<core::ops::Range<usize>>, Error> {
        let pending = &self.buf[self.start..];
        if pending.is_empty() {
            // Everything returned: start over at the front, without moving bytes.
            self.buf.clear();
            self.start = 0;
            return Ok(None);
        }
        let Some(header) = Header::parse(pending) else {
            return Ok(None);
        };
        let too_large = header.message_size() > self.max_message_size as u64;
        let frame_len = match header.frame_len() {
            Some(len) if !too_large => len,
            _ => {
                let available = pending.len();
                let total = header.header_len as u64 + header.message_size();
                self.start += available.min(usize::try_from(total).unwrap_or(usize::MAX));
                self.skip = total.saturating_sub(available as u64);
                return Err(Error::FrameTooLarge);
            }
        };
        if pending.len() < frame_len {
            return Ok(None);
        }
        let range = self.start..self.start + frame_len;
        self.start = range.end;
        Ok(Some(range))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    /// RFC 8323 §3.2, Figure 5: 2.03 with token 0x7f, no options or payload.
    const VALID_7F: &[u8] = &[0x01, 0x43, 0x7f];
    /// RFC 8323 §5.7, Figures 8 and 9: Ping and Pong with token 0x42.
    const PING_42: &[u8] = &[0x01, 0xe2, 0x42];
    const PONG_42: &[u8] = &[0x01, 0xe3, 0x42];
    /// CSM, no token: Max-Message-Size 1152 (0x0480), Block-Wise-Transfer. Len 4 = 3 + 1 option bytes.
    const CSM: &[u8] = &[0x40, 0xe1, 0x22, 0x04, 0x80, 0x20];
    /// GET /temperature with token 0x71 (RFC 8323 Figure 3's request): Len 12 = 1 + 11.
    const GET_TEMPERATURE: &[u8] =
        &[0xc1, 0x01, 0x71, 0xbb, b't', b'e', b'm', b'p', b'e', b'r', b'a', b't', b'u', b'r', b'e'];

    #[test]
    fn rfc_examples() {
        let p = TcpPacket::new_checked(VALID_7F).unwrap();
        assert_eq!(p.code(), Code::VALID);
        assert_eq!(p.token_bytes(), &[0x7f]);
        assert_eq!(p.options().count(), 0);
        assert_eq!(p.payload(), b"");
        assert_eq!(p.header_len(), 1);
        assert_eq!(p.message_size(), 2);
        let ping = TcpMessage::parse(PING_42).unwrap();
        assert_eq!(ping, TcpMessage::new(Code::PING, Token::new(&[0x42]).unwrap()));
        assert_eq!(TcpMessage::new(Code::PONG, ping.token).encode(), PONG_42);
        assert_eq!(TcpMessage::new(Code::VALID, Token::new(&[0x7f]).unwrap()).encode(), VALID_7F);
    }

    #[test]
    fn request_fixture() {
        let p = TcpPacket::new_checked(GET_TEMPERATURE).unwrap();
        assert_eq!(p.code(), Code::GET);
        assert_eq!(p.token().as_bytes(), &[0x71]);
        assert_eq!(p.option(OptionNumber::URI_PATH), Some(&b"temperature"[..]));
        let mut m = TcpMessage::new(Code::GET, Token::new(&[0x71]).unwrap());
        m.options.push(OptionNumber::URI_PATH, b"temperature");
        assert_eq!(m.encode(), GET_TEMPERATURE);
        assert_eq!(p.to_owned(), m);
    }

    #[test]
    fn csm_with_max_message_size() {
        let p = TcpPacket::new_checked(CSM).unwrap();
        assert_eq!(p.code(), Code::CSM);
        assert!(p.token().is_empty());
        assert_eq!(p.option(signal::MAX_MESSAGE_SIZE).and_then(crate::decode_uint), Some(1152));
        assert_eq!(p.option(signal::BLOCK_WISE_TRANSFER), Some(&[][..]));
        let mut m = TcpMessage::new(Code::CSM, Token::EMPTY);
        m.options.push_uint(signal::MAX_MESSAGE_SIZE, signal::BASE_MAX_MESSAGE_SIZE as u64);
        m.options.push(signal::BLOCK_WISE_TRANSFER, &[]);
        assert_eq!(m.encode(), CSM);
        assert_eq!(m.encoded_len(), CSM.len());
    }

    /// A message whose options and payload take exactly `body` bytes: a payload of `body - 1` bytes after the
    /// marker (no options), or nothing at all for 0.
    fn with_body(body: usize) -> TcpMessage {
        let mut m = TcpMessage::new(Code::CONTENT, Token::new(&[0xab, 0xcd]).unwrap());
        m.payload = (0..body.saturating_sub(1)).map(|i| i as u8).collect();
        m
    }

    #[test]
    fn length_forms_at_boundaries() {
        // (Len of options + marker + payload, expected length header bytes)
        let cases: [(usize, &[u8]); 12] = [
            (0, &[0x02]),
            (2, &[0x22]),
            (12, &[0xc2]),
            (13, &[0xd2, 0x00]),
            (14, &[0xd2, 0x01]),
            (268, &[0xd2, 0xff]),
            (269, &[0xe2, 0x00, 0x00]),
            (270, &[0xe2, 0x00, 0x01]),
            (65804, &[0xe2, 0xff, 0xff]),
            (65805, &[0xf2, 0x00, 0x00, 0x00, 0x00]),
            (65806, &[0xf2, 0x00, 0x00, 0x00, 0x01]),
            (65805 + 0x1_0203, &[0xf2, 0x00, 0x01, 0x02, 0x03]),
        ];
        for (body, header) in cases {
            let m = with_body(body);
            let bytes = m.encode();
            assert_eq!(&bytes[..header.len()], header, "header for body {body}");
            assert_eq!(bytes[header.len()], Code::CONTENT.0);
            assert_eq!(bytes.len(), header.len() + 1 + 2 + body, "frame for body {body}");
            assert_eq!(m.encoded_len(), bytes.len());
            if body > 0 {
                assert_eq!(bytes[header.len() + 3], 0xff);
            }
            assert_eq!(frame_len(&bytes), Ok(Some(bytes.len())));
            assert_eq!(frame_len(&bytes[..header.len()]), Ok(Some(bytes.len())));
            assert_eq!(frame_len(&bytes[..header.len() - 1]), Ok(None));
            let p = TcpPacket::new_checked(&bytes[..]).unwrap();
            assert_eq!(p.header_len(), header.len());
            assert_eq!(p.payload(), &m.payload[..]);
            assert_eq!(p.to_owned(), m);
        }
    }

    #[test]
    fn options_count_in_len() {
        // Len 12 made of options only (no marker): Uri-Path "a" (1 + 1 bytes) + a 9-byte Uri-Query (1 + 9).
        let mut m = TcpMessage::new(Code::GET, Token::EMPTY);
        m.options.push(OptionNumber::URI_PATH, b"a").push(OptionNumber::URI_QUERY, b"123456789");
        let bytes = m.encode();
        assert_eq!(bytes[0], 0xc0);
        assert_eq!(TcpMessage::parse(&bytes).unwrap(), m);
        // One more byte of value tips it into the 1-byte extended form.
        m.options.set(OptionNumber::URI_QUERY, b"1234567890");
        let bytes = m.encode();
        assert_eq!(&bytes[..2], &[0xd0, 0x00]);
        assert_eq!(TcpMessage::parse(&bytes).unwrap(), m);
    }

    #[test]
    fn frame_len_needs_only_the_header() {
        assert_eq!(frame_len(&[]), Ok(None));
        assert_eq!(frame_len(&[0x01]), Ok(Some(3)));
        assert_eq!(frame_len(&[0xd0]), Ok(None));
        assert_eq!(frame_len(&[0xd0, 0x00]), Ok(Some(2 + 1 + 13)));
        assert_eq!(frame_len(&[0xe8, 0x00]), Ok(None));
        assert_eq!(frame_len(&[0xe8, 0x00, 0x01]), Ok(Some(3 + 1 + 8 + 270)));
        assert_eq!(frame_len(&[0xf0, 0xff, 0xff, 0xff]), Ok(None));
        // The largest expressible frame: 5 + 1 + 15 + 2^32 - 1 + 65805.
        let largest = frame_len(&[0xff, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(
            largest,
            usize::try_from(5u64 + 1 + 15 + 0xffff_ffff + 65805).map(Some).map_err(|_| Error::FrameTooLarge)
        );
        // The token length is not frame_len's business: TKL 15 still has a length.
        assert_eq!(frame_len(&[0x0f]), Ok(Some(1 + 1 + 15)));
    }

    #[test]
    fn format_errors() {
        assert_eq!(TcpPacket::new_checked(&[][..]).unwrap_err(), Error::Truncated);
        assert_eq!(TcpPacket::new_checked(&[0x00][..]).unwrap_err(), Error::Truncated);
        assert_eq!(TcpPacket::new_checked(&[0xd0, 0x00][..]).unwrap_err(), Error::Truncated);
        assert_eq!(
            TcpPacket::new_checked(&[0x09, 0x01, 0, 0, 0, 0, 0, 0, 0, 0][..]).unwrap_err(),
            Error::BadTokenLength(9)
        );
        assert_eq!(TcpPacket::new_checked(&[0x0f, 0x01][..]).unwrap_err(), Error::BadTokenLength(15));
        assert_eq!(TcpPacket::new_checked(&[0x02, 0x01, 0x01][..]).unwrap_err(), Error::Truncated);
        assert_eq!(TcpPacket::new_checked(&[0x10, 0x01][..]).unwrap_err(), Error::Truncated);
        assert_eq!(TcpPacket::new_checked(&[0x01, 0x43, 0x7f, 0x00][..]).unwrap_err(), Error::TrailingData);
        assert_eq!(TcpPacket::new_checked(&[0x10, 0x01, 0xff][..]).unwrap_err(), Error::EmptyPayloadAfterMarker);
        assert_eq!(TcpPacket::new_checked(&[0x10, 0x01, 0xf0][..]).unwrap_err(), Error::ReservedOptionDelta);
        assert_eq!(TcpPacket::new_checked(&[0x10, 0x01, 0x1f][..]).unwrap_err(), Error::ReservedOptionLength);
        // Len 2 ends inside an option whose value claims 3 bytes: the option may not run past Len.
        assert_eq!(TcpPacket::new_checked(&[0x20, 0x01, 0xb3, b'a'][..]).unwrap_err(), Error::Truncated);
        assert_eq!(
            TcpPacket::new_checked(&[0x30, 0x01, 0xe0, 0xff, 0xff][..]).unwrap_err(),
            Error::OptionNumberOverflow
        );
        // Unlike over UDP, an Empty message may carry bytes; it is ignored anyway.
        assert!(TcpPacket::new_checked(&[0x11, 0x00, 0x99, 0x60][..]).unwrap().is_empty());
    }

    #[test]
    fn encode_into_small_buffer() {
        let mut buf = [0u8; 5];
        assert_eq!(TcpMessage::parse(CSM).unwrap().encode_into(&mut buf), Err(Error::BufferTooSmall));
        let mut buf = [0u8; 6];
        assert_eq!(TcpMessage::parse(CSM).unwrap().encode_into(&mut buf), Ok(6));
        assert_eq!(buf, CSM);
    }

    fn stream() -> Vec<u8> {
        let mut s = Vec::new();
        for f in [CSM, PING_42, GET_TEMPERATURE, VALID_7F] {
            s.extend_from_slice(f);
        }
        s.extend_from_slice(&with_body(300).encode());
        s
    }

    fn expected() -> Vec<TcpMessage> {
        let mut v: Vec<TcpMessage> =
            [CSM, PING_42, GET_TEMPERATURE, VALID_7F].iter().map(|f| TcpMessage::parse(f).unwrap()).collect();
        v.push(with_body(300));
        v
    }

    /// Feeds `bytes` in chunks of `chunk` bytes, draining frames as they complete.
    fn decode_all(decoder: &mut FrameDecoder, bytes: &[u8], chunk: usize) -> Vec<Result<TcpMessage, Error>> {
        let mut out = Vec::new();
        for mut piece in bytes.chunks(chunk) {
            while !piece.is_empty() {
                let n = decoder.feed(piece);
                piece = &piece[n..];
                assert!(decoder.buffered() <= decoder.limit());
                loop {
                    match decoder.next_message() {
                        Ok(Some(m)) => out.push(Ok(m)),
                        Ok(None) => break,
                        Err(e) => out.push(Err(e)),
                    }
                }
            }
        }
        out
    }

    #[test]
    fn decoder_one_byte_at_a_time() {
        let mut d = FrameDecoder::new(1152);
        let bytes = stream();
        let mut frame_ends = Vec::new();
        for m in expected() {
            frame_ends.push(frame_ends.last().copied().unwrap_or(0) + m.encoded_len());
        }
        let mut got = Vec::new();
        for (i, b) in bytes.iter().enumerate() {
            assert_eq!(d.feed(&[*b]), 1);
            while let Some(m) = d.next_message().unwrap() {
                got.push(m);
            }
            // A frame comes out with its last byte, not before.
            assert_eq!(got.len(), frame_ends.iter().filter(|end| **end <= i + 1).count());
        }
        assert_eq!(got, expected());
        assert!(d.is_idle());
    }

    #[test]
    fn decoder_whole_stream_in_one_chunk() {
        let mut d = FrameDecoder::new(1152);
        let bytes = stream();
        let got: Vec<_> = decode_all(&mut d, &bytes, bytes.len()).into_iter().map(Result::unwrap).collect();
        assert_eq!(got, expected());
        // Every chunking gives the same frames.
        for chunk in [2, 3, 7, 64, 313] {
            let got: Vec<_> =
                decode_all(&mut FrameDecoder::new(1152), &bytes, chunk).into_iter().map(Result::unwrap).collect();
            assert_eq!(got, expected(), "chunk {chunk}");
        }
    }

    #[test]
    fn decoder_buffer_stays_bounded() {
        // A limit so small that the 306-byte frame at the end must wait until the frames before it are drained.
        let mut d = FrameDecoder::new(320);
        assert_eq!(d.limit(), 325);
        let bytes = stream();
        assert!(bytes.len() > d.limit());
        assert_eq!(d.feed(&bytes), 325);
        assert_eq!(d.feed(&bytes[325..]), 0, "full: nothing more until frames are drained");
        assert!(d.buf.capacity() <= d.limit());
        let mut d = FrameDecoder::new(320);
        let got: Vec<_> = decode_all(&mut d, &bytes, bytes.len()).into_iter().map(Result::unwrap).collect();
        assert_eq!(got, expected());
        assert!(d.buf.capacity() <= d.limit());
    }

    #[test]
    fn decoder_rejects_and_skips_oversized_frames() {
        let big = with_body(2000).encode();
        let mut bytes = Vec::new();
        bytes.extend_from_slice(PING_42);
        bytes.extend_from_slice(&big);
        bytes.extend_from_slice(PONG_42);
        for chunk in [1, 5, 100, bytes.len()] {
            let mut d = FrameDecoder::new(1152);
            let got = decode_all(&mut d, &bytes, chunk);
            let ping = TcpMessage::parse(PING_42).unwrap();
            let pong = TcpMessage::parse(PONG_42).unwrap();
            assert_eq!(got, vec![Ok(ping), Err(Error::FrameTooLarge), Ok(pong)], "chunk {chunk}");
            assert!(d.is_idle());
            assert!(d.buf.capacity() <= d.limit());
        }
        // The limit is on the message without the length header: code + token + body.
        let exact = with_body(100).encode(); // 1 + 2 + 100 = 103
        assert_eq!(decode_all(&mut FrameDecoder::new(103), &exact, 1), vec![Ok(with_body(100))]);
        assert_eq!(decode_all(&mut FrameDecoder::new(102), &exact, 1), vec![Err(Error::FrameTooLarge)]);
        // Known from the header alone, before the body is buffered.
        let mut d = FrameDecoder::new(102);
        assert_eq!(d.feed(&exact[..2]), 2);
        assert_eq!(d.next_frame().unwrap_err(), Error::FrameTooLarge);
        assert_eq!(d.buffered(), 0);
        assert!(!d.is_idle());
    }

    #[test]
    fn decoder_consumes_malformed_frames() {
        let mut bytes = vec![0x09, 0x01, 1, 2, 3, 4, 5, 6, 7, 8, 9]; // TKL 9
        bytes.extend_from_slice(&[0x10, 0x01, 0xff]); // marker without payload
        bytes.extend_from_slice(PING_42);
        for chunk in [1, bytes.len()] {
            let got = decode_all(&mut FrameDecoder::default(), &bytes, chunk);
            assert_eq!(
                got,
                vec![
                    Err(Error::BadTokenLength(9)),
                    Err(Error::EmptyPayloadAfterMarker),
                    Ok(TcpMessage::parse(PING_42).unwrap())
                ]
            );
        }
    }

    #[test]
    fn decoder_borrowed_frames_and_shrink() {
        let mut d = FrameDecoder::default();
        assert_eq!(d.feed(CSM), CSM.len());
        assert_eq!(d.feed(&PING_42[..1]), 1);
        let csm = d.next_frame().unwrap().unwrap();
        assert_eq!(csm.as_bytes(), CSM);
        assert!(d.next_frame().unwrap().is_none());
        assert!(!d.is_idle());
        d.shrink(); // something is buffered: keeps it
        assert_eq!(d.feed(&PING_42[1..]), 2);
        assert_eq!(d.next_frame().unwrap().unwrap().code(), Code::PING);
        assert!(d.next_frame().unwrap().is_none());
        d.shrink();
        assert_eq!(d.buf.capacity(), 0);
        assert!(d.is_idle());
    }
}
