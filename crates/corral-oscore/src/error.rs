//! What can go wrong, and what a server answers for it (RFC 8613 §8.2, unprotected, with Max-Age 0).

use corral_wire::Code;
use std::fmt;

/// An OSCORE failure. None of them is ever a panic; each a peer can cause maps to the response of §8.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The message carries no OSCORE option.
    NotOscore,
    /// The OSCORE option cannot be decoded or lacks a field the message needs (4.02 Bad Option).
    BadOption(&'static str),
    /// No Security Context for the kid (and kid context) of the request (4.01 "Security context not found").
    UnknownContext,
    /// The request's Partial IV was seen before or is older than the replay window (4.01 "Replay detected").
    Replay,
    /// The replay window was lost in a restart: freshness must be proven with Echo first (RFC 8613
    /// Appendix B.1.2; 4.01 with an Echo option).
    Unsynchronised,
    /// Authentication failed: wrong key, tampered message, or a response to another request (4.00
    /// "Decryption failed").
    DecryptionFailed,
    /// The Sender Sequence Number reached 2^40 - 1: a new Security Context is needed.
    SequenceExhausted,
    /// The message to protect already carries an OSCORE option (RFC 8613 §4.1.3.7: no nesting).
    Nested,
    /// A deterministic request with an unsafe method (draft-ietf-core-cacheable-oscore §3.4.3: 4.01).
    UnsafeDeterministic,
    /// A Security Context cannot be built from these parameters (the text says why).
    Config(String),
    /// The message to protect is longer (`len` bytes of code, inner options and payload) than one
    /// protected message holds (`max`, [`crate::Aead::max_plaintext`]): it must go in inner blocks
    /// (RFC 8613 §4.1.3.4.1).
    TooLarge { len: usize, max: usize },
    /// A cryptographic primitive refused its input: a bug, reported rather than panicking.
    Internal(&'static str),
}

impl Error {
    /// The unprotected error response a server sends for this failure (RFC 8613 §8.2), if any.
    pub fn response_code(&self) -> Option<(Code, &'static str)> {
        match self {
            Error::BadOption(_) => Some((Code::BAD_OPTION, "Bad OSCORE option")),
            Error::UnknownContext => Some((Code::UNAUTHORIZED, "Security context not found")),
            Error::Replay => Some((Code::UNAUTHORIZED, "Replay detected")),
            Error::Unsynchronised => {
                Some((Code::UNAUTHORIZED, "Replay protection lost in a restart: repeat with Echo"))
            }
            Error::DecryptionFailed => Some((Code::BAD_REQUEST, "Decryption failed")),
            Error::UnsafeDeterministic => Some((Code::UNAUTHORIZED, "Deterministic requests must be GET or FETCH")),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotOscore => f.write_str("not an OSCORE message (no OSCORE option)"),
            Error::BadOption(why) => write!(f, "bad OSCORE option: {why}"),
            Error::UnknownContext => f.write_str("security context not found"),
            Error::Replay => f.write_str("replay detected"),
            Error::Unsynchronised => f.write_str("replay window lost in a restart; freshness not yet proven"),
            Error::DecryptionFailed => f.write_str("decryption failed (wrong key, tampered message, or not ours)"),
            Error::SequenceExhausted => f.write_str("sender sequence number exhausted; rekey"),
            Error::Nested => f.write_str("the message is already OSCORE-protected"),
            Error::UnsafeDeterministic => f.write_str("a deterministic request must be GET or FETCH"),
            Error::Config(why) => write!(f, "{why}"),
            Error::TooLarge { len, max } => {
                write!(f, "a {len}-byte message is too large to protect in one piece (at most {max}: use blocks)")
            }
            Error::Internal(what) => write!(f, "internal error in {what}"),
        }
    }
}

impl std::error::Error for Error {}
