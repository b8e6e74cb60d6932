//! RFC 7252 messages: a zero-copy view validated once, a builder that writes into a caller's buffer, and an
//! owned message for convenience.
//!
//! ```text
//!  0                   1                   2                   3
//! |Ver| T |  TKL  |      Code     |          Message ID           |
//! |   Token (if any, TKL bytes) ...
//! |   Options (if any) ...
//! |1 1 1 1 1 1 1 1|    Payload (if any) ...
//! ```
//! <https://www.rfc-editor.org/rfc/rfc7252#section-3>

use crate::option::{scan_options, write_option, OptionIter, OptionNumber, Options};
use crate::{Code, Error};
use alloc::vec::Vec;
use core::fmt;

/// The message type (RFC 7252 §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageType {
    Con = 0,
    Non = 1,
    Ack = 2,
    Rst = 3,
}

impl MessageType {
    pub const fn from_bits(b: u8) -> MessageType {
        match b & 3 {
            0 => MessageType::Con,
            1 => MessageType::Non,
            2 => MessageType::Ack,
            _ => MessageType::Rst,
        }
    }

    pub const fn short(self) -> &'static str {
        match self {
            MessageType::Con => "CON",
            MessageType::Non => "NON",
            MessageType::Ack => "ACK",
            MessageType::Rst => "RST",
        }
    }
}

/// A 16-bit message ID (RFC 7252 §4.4).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MessageId(pub u16);

impl fmt::Debug for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MID({:#06x})", self.0)
    }
}

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#06x}", self.0)
    }
}

/// A token of 0 to 8 bytes (RFC 7252 §5.3.1), stored inline.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Token {
    len: u8,
    bytes: [u8; 8],
}

impl Token {
    pub const EMPTY: Token = Token { len: 0, bytes: [0; 8] };
    pub const MAX_LEN: usize = 8;

    /// `None` if longer than 8 bytes.
    #[inline]
    pub fn new(bytes: &[u8]) -> Option<Token> {
        if bytes.len() > 8 {
            return None;
        }
        let mut t = Token { len: bytes.len() as u8, bytes: [0; 8] };
        // Byte by byte: at most eight, and a slice copy of a variable length would call memcpy.
        for (d, b) in t.bytes.iter_mut().zip(bytes) {
            *d = *b;
        }
        Some(t)
    }

    /// Parses hex (`"a1b2"`, optional `0x`), as coap-client's `-T` takes it.
    pub fn from_hex(s: &str) -> Option<Token> {
        let s = s.strip_prefix("0x").unwrap_or(s);
        if s.len() % 2 != 0 || s.len() > 16 {
            return None;
        }
        let mut t = Token { len: (s.len() / 2) as u8, bytes: [0; 8] };
        for i in 0..s.len() / 2 {
            t.bytes[i] = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(t)
    }

    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    #[inline]
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_bytes().iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Token({self})")
    }
}

mod field {
    pub const HEADER_LEN: usize = 4;
    pub const VER_T_TKL: usize = 0;
    pub const CODE: usize = 1;
    pub const MID: core::ops::Range<usize> = 2..4;
}

/// A validated, zero-copy view of an encoded message.
///
/// [`Packet::new_checked`] validates the whole message once; after that no accessor fails, so long as the
/// buffer is not modified. Nothing is allocated.
#[derive(Clone, Copy)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
    /// Offset just past the options (the payload marker or the end).
    options_end: usize,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Validates the header, token, option encoding and payload marker.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Error> {
        let b = buffer.as_ref();
        if b.len() < field::HEADER_LEN {
            return Err(Error::Truncated);
        }
        let version = b[field::VER_T_TKL] >> 6;
        if version != 1 {
            return Err(Error::BadVersion(version));
        }
        let tkl = b[field::VER_T_TKL] & 0x0f;
        if tkl > 8 {
            return Err(Error::BadTokenLength(tkl));
        }
        let token_end = field::HEADER_LEN + usize::from(tkl);
        if b.len() < token_end {
            return Err(Error::Truncated);
        }
        if b[field::CODE] == 0 && b.len() > field::HEADER_LEN {
            return Err(Error::NonEmptyEmptyMessage);
        }
        let options_end = token_end + scan_options(&b[token_end..])?;
        if options_end < b.len() && options_end + 1 == b.len() {
            return Err(Error::EmptyPayloadAfterMarker);
        }
        Ok(Packet { buffer, options_end })
    }

    /// Reads just the header of bytes that may be malformed beyond it: enough to answer a CON that failed
    /// validation with RST (RFC 7252 §4.2). `None` if fewer than 4 bytes or not version 1.
    pub fn peek_header(bytes: &[u8]) -> Option<(MessageType, Code, MessageId)> {
        let h = bytes.get(..field::HEADER_LEN)?;
        if h[0] >> 6 != 1 {
            return None;
        }
        Some((MessageType::from_bits(h[0] >> 4), Code(h[1]), MessageId(u16::from_be_bytes([h[2], h[3]]))))
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    pub fn mtype(&self) -> MessageType {
        MessageType::from_bits(self.as_bytes()[field::VER_T_TKL] >> 4)
    }

    pub fn code(&self) -> Code {
        Code(self.as_bytes()[field::CODE])
    }

    pub fn message_id(&self) -> MessageId {
        let b = &self.as_bytes()[field::MID];
        MessageId(u16::from_be_bytes([b[0], b[1]]))
    }

    fn token_end(&self) -> usize {
        field::HEADER_LEN + usize::from(self.as_bytes()[field::VER_T_TKL] & 0x0f)
    }

    pub fn token_bytes(&self) -> &[u8] {
        &self.as_bytes()[field::HEADER_LEN..self.token_end()]
    }

    pub fn token(&self) -> Token {
        // TKL <= 8 was validated.
        Token::new(self.token_bytes()).unwrap_or(Token::EMPTY)
    }

    pub fn options(&self) -> OptionIter<'_> {
        OptionIter::new(&self.as_bytes()[self.token_end()..self.options_end])
    }

    /// The first value of `number`.
    pub fn option(&self, number: OptionNumber) -> Option<&[u8]> {
        self.options().first(number)
    }

    pub fn payload(&self) -> &[u8] {
        crate::option::payload_after(self.as_bytes(), self.options_end)
    }

    /// An empty message: code 0.00 (validation guarantees nothing follows the header).
    pub fn is_empty(&self) -> bool {
        self.code().is_empty()
    }

    pub fn to_owned(&self) -> Message {
        Message {
            mtype: self.mtype(),
            code: self.code(),
            mid: self.message_id(),
            token: self.token(),
            options: self.options().collect(),
            payload: self.payload().to_vec(),
        }
    }
}

impl<T: AsRef<[u8]>> fmt::Debug for Packet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Packet")
            .field("type", &self.mtype())
            .field("code", &self.code())
            .field("mid", &self.message_id())
            .field("token", &self.token())
            .field("options", &self.options().collect::<Options>())
            .field("payload_len", &self.payload().len())
            .finish()
    }
}

/// Writes a message into a caller's buffer without allocating. Options must be added in ascending order.
/// Bytes of the buffer beyond the returned length may be overwritten too (scratch).
///
/// ```
/// # use corral_wire::*;
/// let mut buf = [0u8; 64];
/// let mut b = MessageBuilder::new(&mut buf, MessageType::Con, Code::GET, MessageId(1), Token::new(&[1, 2]).unwrap()).unwrap();
/// b.option(OptionNumber::URI_PATH, b"temp").unwrap();
/// let len = b.finish(&[]).unwrap();
/// assert_eq!(Packet::new_checked(&buf[..len]).unwrap().options().count(), 1);
/// ```
pub struct MessageBuilder<'a> {
    buf: &'a mut [u8],
    pos: usize,
    last_option: u16,
}

impl<'a> MessageBuilder<'a> {
    #[inline]
    pub fn new(
        buf: &'a mut [u8],
        mtype: MessageType,
        code: Code,
        mid: MessageId,
        token: Token,
    ) -> Result<MessageBuilder<'a>, Error> {
        let need = field::HEADER_LEN + token.len();
        if buf.len() < need {
            return Err(Error::BufferTooSmall);
        }
        let [m0, m1] = mid.0.to_be_bytes();
        buf[..field::HEADER_LEN].copy_from_slice(&[0x40 | ((mtype as u8) << 4) | token.len() as u8, code.0, m0, m1]);
        match buf.get_mut(field::HEADER_LEN..field::HEADER_LEN + Token::MAX_LEN) {
            // All eight bytes of the inline token at once (a fixed-size copy, no memcpy call); the bytes
            // beyond its length are overwritten by what follows or lie beyond the message's end.
            Some(dst) => dst.copy_from_slice(&token.bytes),
            None => buf[field::HEADER_LEN..need].copy_from_slice(token.as_bytes()),
        }
        Ok(MessageBuilder { buf, pos: need, last_option: 0 })
    }

    #[inline]
    pub fn option(&mut self, number: OptionNumber, value: &[u8]) -> Result<&mut Self, Error> {
        if number.0 < self.last_option {
            return Err(Error::OptionOutOfOrder);
        }
        self.pos = write_option(self.buf, self.pos, number.0 - self.last_option, value)?;
        self.last_option = number.0;
        Ok(self)
    }

    #[inline]
    pub fn uint_option(&mut self, number: OptionNumber, v: u64) -> Result<&mut Self, Error> {
        // The shortest big-endian form (RFC 7252 §3.2), sliced from the value's own bytes.
        let be = v.to_be_bytes();
        self.option(number, &be[v.leading_zeros() as usize / 8..])
    }

    /// Appends every option of a sorted list.
    pub fn options(&mut self, options: &Options) -> Result<&mut Self, Error> {
        for (n, v) in options.iter() {
            self.option(n, v)?;
        }
        Ok(self)
    }

    /// Writes the payload (with its marker when non-empty); returns the message length.
    #[inline]
    pub fn finish(self, payload: &[u8]) -> Result<usize, Error> {
        if payload.is_empty() {
            return Ok(self.pos);
        }
        let end = self.pos + 1 + payload.len();
        if self.buf.len() < end {
            return Err(Error::BufferTooSmall);
        }
        self.buf[self.pos] = 0xff;
        self.buf[self.pos + 1..end].copy_from_slice(payload);
        Ok(end)
    }
}

/// An owned message: the wire fields and nothing else.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Message {
    pub mtype: MessageType,
    pub code: Code,
    pub mid: MessageId,
    pub token: Token,
    pub options: Options,
    pub payload: Vec<u8>,
}

impl Message {
    pub fn new(mtype: MessageType, code: Code, mid: MessageId, token: Token) -> Message {
        Message { mtype, code, mid, token, options: Options::new(), payload: Vec::new() }
    }

    /// An Empty ACK or RST (or a ping, with `Con`) for `mid`.
    pub fn empty(mtype: MessageType, mid: MessageId) -> Message {
        Message::new(mtype, Code::EMPTY, mid, Token::EMPTY)
    }

    pub fn parse(bytes: &[u8]) -> Result<Message, Error> {
        Ok(Packet::new_checked(bytes)?.to_owned())
    }

    pub fn encoded_len(&self) -> usize {
        field::HEADER_LEN
            + self.token.len()
            + self.options.encoded_len()
            + if self.payload.is_empty() { 0 } else { 1 + self.payload.len() }
    }

    /// Encodes into `out`; returns the length.
    #[inline]
    pub fn encode_into(&self, out: &mut [u8]) -> Result<usize, Error> {
        let mut b = MessageBuilder::new(out, self.mtype, self.code, self.mid, self.token)?;
        b.pos = self.options.write(b.buf, b.pos)?;
        b.finish(&self.payload)
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = alloc::vec![0u8; self.encoded_len()];
        // The buffer is exactly encoded_len() long, and Options only holds encodable values.
        let n = self.encode_into(&mut v).expect("buffer sized by encoded_len");
        v.truncate(n);
        v
    }
}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Message")
            .field("type", &self.mtype)
            .field("code", &self.code)
            .field("mid", &self.mid)
            .field("token", &self.token)
            .field("options", &self.options)
            .field("payload", &alloc::string::String::from_utf8_lossy(&self.payload))
            .finish()
    }
}

/// Writes the CoAP cache key of a request into `out`: the method, every option that is not NoCacheKey
/// (number, length, value), and for FETCH the payload (RFC 7252 §5.6, RFC 8132 §2.3.1).
///
/// Two requests have the same key iff these bytes are equal; callers hash them as they need.
pub fn write_cache_key<'a>(
    method: Code,
    options: impl IntoIterator<Item = (OptionNumber, &'a [u8])>,
    payload: &[u8],
    out: &mut Vec<u8>,
) {
    out.push(method.0);
    for (n, v) in options {
        if n.is_no_cache_key() {
            continue;
        }
        out.extend_from_slice(&n.0.to_be_bytes());
        out.extend_from_slice(&(v.len() as u32).to_be_bytes());
        out.extend_from_slice(v);
    }
    if method == Code::FETCH {
        out.push(0xff);
        out.extend_from_slice(payload);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    // RFC 7252 Appendix A, Figure 16 style: GET /temperature, CON, MID 0x7d34, no token.
    const GET_TEMPERATURE: &[u8] =
        &[0x40, 0x01, 0x7d, 0x34, 0xbb, b't', b'e', b'm', b'p', b'e', b'r', b'a', b't', b'u', b'r', b'e'];
    // The piggybacked 2.05 "22.3 C" answer with token 0x71 (Figure 17 variant).
    const ACK_CONTENT: &[u8] = &[0x61, 0x45, 0x7d, 0x34, 0x71, 0xff, b'2', b'2', b'.', b'3', b' ', b'C'];

    #[test]
    fn deconstruct_request() {
        let p = Packet::new_checked(GET_TEMPERATURE).unwrap();
        assert_eq!(p.mtype(), MessageType::Con);
        assert_eq!(p.code(), Code::GET);
        assert_eq!(p.message_id(), MessageId(0x7d34));
        assert!(p.token().is_empty());
        let opts: Vec<_> = p.options().collect();
        assert_eq!(opts, vec![(OptionNumber::URI_PATH, &b"temperature"[..])]);
        assert_eq!(p.payload(), b"");
    }

    #[test]
    fn deconstruct_response() {
        let p = Packet::new_checked(ACK_CONTENT).unwrap();
        assert_eq!(p.mtype(), MessageType::Ack);
        assert_eq!(p.code(), Code::CONTENT);
        assert_eq!(p.token().as_bytes(), &[0x71]);
        assert_eq!(p.payload(), b"22.3 C");
    }

    #[test]
    fn construct_matches_fixture() {
        let mut m = Message::new(MessageType::Con, Code::GET, MessageId(0x7d34), Token::EMPTY);
        m.options.push(OptionNumber::URI_PATH, b"temperature");
        assert_eq!(m.encode(), GET_TEMPERATURE);
        let mut r = Message::new(MessageType::Ack, Code::CONTENT, MessageId(0x7d34), Token::new(&[0x71]).unwrap());
        r.payload = b"22.3 C".to_vec();
        assert_eq!(r.encode(), ACK_CONTENT);
    }

    #[test]
    fn format_errors() {
        assert_eq!(Packet::new_checked(&[0x40, 0x01, 0x00][..]).unwrap_err(), Error::Truncated);
        assert_eq!(Packet::new_checked(&[0x80, 0x01, 0, 0][..]).unwrap_err(), Error::BadVersion(2));
        assert_eq!(Packet::new_checked(&[0x49, 0x01, 0, 0][..]).unwrap_err(), Error::BadTokenLength(9));
        assert_eq!(Packet::new_checked(&[0x42, 0x01, 0, 0, 1][..]).unwrap_err(), Error::Truncated);
        assert_eq!(Packet::new_checked(&[0x40, 0x01, 0, 0, 0xff][..]).unwrap_err(), Error::EmptyPayloadAfterMarker);
        assert_eq!(Packet::new_checked(&[0x40, 0x01, 0, 0, 0xf0][..]).unwrap_err(), Error::ReservedOptionDelta);
        assert_eq!(Packet::new_checked(&[0x40, 0x01, 0, 0, 0x1f][..]).unwrap_err(), Error::ReservedOptionLength);
        assert_eq!(Packet::new_checked(&[0x40, 0x00, 0, 0, 0x11][..]).unwrap_err(), Error::NonEmptyEmptyMessage);
        assert_eq!(Packet::new_checked(&[0x40, 0x01, 0, 0, 0xd1][..]).unwrap_err(), Error::Truncated);
        // delta 14 + 0xffff + 269 overflows 65535
        assert_eq!(
            Packet::new_checked(&[0x40, 0x01, 0, 0, 0xe0, 0xff, 0xff][..]).unwrap_err(),
            Error::OptionNumberOverflow
        );
    }

    #[test]
    fn extended_option_encodings() {
        let mut m = Message::new(MessageType::Non, Code::POST, MessageId(7), Token::new(&[1, 2, 3, 4]).unwrap());
        m.options.push(OptionNumber::URI_PATH, &[b'a'; 13]); // length ext 1 byte
        m.options.push(OptionNumber::PROXY_URI, &[b'b'; 300]); // delta ext 1, length ext 2
        m.options.push(OptionNumber::NO_RESPONSE, &[26]); // delta ext 1 (258-35=223)
        m.options.push(OptionNumber(2000), &[]); // delta ext 2
        m.payload = vec![0xff, 0, 1];
        let bytes = m.encode();
        assert_eq!(bytes.len(), m.encoded_len());
        assert_eq!(Message::parse(&bytes).unwrap(), m);
    }

    #[test]
    fn builder_rejects_misuse() {
        let mut buf = [0u8; 8];
        let mut b = MessageBuilder::new(&mut buf, MessageType::Con, Code::GET, MessageId(1), Token::EMPTY).unwrap();
        b.option(OptionNumber::URI_PATH, b"a").unwrap();
        assert_eq!(b.option(OptionNumber::URI_HOST, b"h").err(), Some(Error::OptionOutOfOrder));
        assert_eq!(b.finish(b"too long payload").err(), Some(Error::BufferTooSmall));
        let mut tiny = [0u8; 3];
        assert!(MessageBuilder::new(&mut tiny, MessageType::Con, Code::GET, MessageId(1), Token::EMPTY).is_err());
    }

    #[test]
    fn peek_header_of_malformed() {
        let bad = [0x40, 0x01, 0x12, 0x34, 0xf0];
        assert!(Packet::new_checked(&bad[..]).is_err());
        assert_eq!(Packet::<&[u8]>::peek_header(&bad), Some((MessageType::Con, Code::GET, MessageId(0x1234))));
    }

    #[test]
    fn token_hex() {
        assert_eq!(Token::from_hex("0xa1b2").unwrap().as_bytes(), &[0xa1, 0xb2]);
        assert!(Token::from_hex("abc").is_none());
        assert!(Token::from_hex("112233445566778899").is_none());
        assert_eq!(alloc::format!("{}", Token::new(&[0xde, 0xad]).unwrap()), "dead");
    }

    #[test]
    fn cache_key_ignores_nocachekey() {
        let mut a = Options::new();
        a.push(OptionNumber::URI_PATH, b"t").push_uint(OptionNumber::SIZE1, 5);
        let mut b = Options::new();
        b.push(OptionNumber::URI_PATH, b"t");
        let (mut ka, mut kb) = (Vec::new(), Vec::new());
        write_cache_key(Code::GET, a.iter(), &[], &mut ka);
        write_cache_key(Code::GET, b.iter(), &[], &mut kb);
        assert_eq!(ka, kb);
        let mut kc = Vec::new();
        write_cache_key(Code::FETCH, b.iter(), b"x", &mut kc);
        assert_ne!(ka, kc);
    }
}
