//! The one error type of corral-wire.
//!
//! Every variant is the fault of the bytes (malformed input) or of the caller (a buffer too small, options
//! out of order). Decoding never panics: each malformed input maps to exactly one variant here.

use core::fmt;

/// Why bytes could not be decoded, or a message could not be encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// The input ends before the header, token, an option or a declared length is complete.
    Truncated,
    /// The version field is not 1 (RFC 7252 §3: such messages are silently ignored).
    BadVersion(u8),
    /// Token length 9 to 15 is reserved (RFC 7252 §3: a message format error).
    BadTokenLength(u8),
    /// Option delta nibble 15 without the full 0xFF payload marker (RFC 7252 §3.1).
    ReservedOptionDelta,
    /// Option length nibble 15 (RFC 7252 §3.1).
    ReservedOptionLength,
    /// An option number above 65535 after adding the deltas.
    OptionNumberOverflow,
    /// A payload marker followed by a zero-length payload (RFC 7252 §3).
    EmptyPayloadAfterMarker,
    /// An Empty message (code 0.00) with a token, options or payload (RFC 7252 §4.1).
    NonEmptyEmptyMessage,
    /// The output buffer is too small for the encoded message (caller error).
    BufferTooSmall,
    /// Options were given to a builder out of ascending order (caller error).
    OptionOutOfOrder,
    /// An option value is longer than 65804 bytes, the most the encoding can express (caller error).
    OptionTooLong,
    /// A value does not fit the field it is meant for (caller error or malformed input).
    ValueOutOfRange,
    /// RFC 8323: a frame is larger than the configured maximum message size.
    FrameTooLarge,
    /// RFC 8323: the buffer holds bytes after the end of the frame its length field declares.
    TrailingData,
    /// A URI that is not a valid CoAP URI; the text says what is wrong.
    Uri(&'static str),
    /// Link-format text that does not parse; the text says what is wrong.
    LinkFormat(&'static str),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated => f.write_str("message truncated"),
            Error::BadVersion(v) => write!(f, "unsupported CoAP version {v}"),
            Error::BadTokenLength(l) => write!(f, "reserved token length {l}"),
            Error::ReservedOptionDelta => f.write_str("reserved option delta 15"),
            Error::ReservedOptionLength => f.write_str("reserved option length 15"),
            Error::OptionNumberOverflow => f.write_str("option number exceeds 65535"),
            Error::EmptyPayloadAfterMarker => f.write_str("payload marker followed by empty payload"),
            Error::NonEmptyEmptyMessage => f.write_str("empty message (0.00) carries bytes after the message ID"),
            Error::BufferTooSmall => f.write_str("output buffer too small"),
            Error::OptionOutOfOrder => f.write_str("options must be added in ascending order"),
            Error::OptionTooLong => f.write_str("option value too long"),
            Error::ValueOutOfRange => f.write_str("value out of range"),
            Error::FrameTooLarge => f.write_str("frame exceeds the maximum message size"),
            Error::TrailingData => f.write_str("bytes after the end of the frame"),
            Error::Uri(why) => write!(f, "invalid URI: {why}"),
            Error::LinkFormat(why) => write!(f, "invalid link-format: {why}"),
        }
    }
}

impl core::error::Error for Error {}
