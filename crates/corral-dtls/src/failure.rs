//! Why a DTLS handshake failed ([`HandshakeFailure`]), told apart from dimpl's errors and the peer's alerts,
//! and the alert a server (or a client that refuses the server's credentials) sends back.

/// Why a handshake failed, in the words a user can act on: the peer's doing (or the network's), never
/// the caller's (see the crate's error grouping, `error.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HandshakeFailure {
    /// The server knows no key for the PSK identity. A corral server tells the client no more than
    /// [`BadKey`](Self::BadKey) (RFC 4279 §2: decrypt_error, so that a client cannot learn which identities
    /// exist) and counts it apart; a client sees this only from a server that says unknown_psk_identity.
    UnknownIdentity,
    /// The keys disagree: the Finished message did not verify (a wrong PSK), or the peer said
    /// decrypt_error / bad_record_mac — which a corral server also says for an unknown identity.
    BadKey,
    /// The peers have no cipher suite in common.
    NoSharedSuite,
    /// The peer's certificate was refused.
    BadCertificate,
    /// The peer's certificate is not signed by a trusted CA (or cannot be checked): why.
    UntrustedCertificate(String),
    /// Raw public keys (RFC 7250): the peer's key is not one of the trusted keys (or not a P-256 key):
    /// why, naming the key by its `ni:` identity.
    UntrustedKey(String),
    /// Raw public keys: the peer refused this side's key (it said bad_certificate).
    RefusedKey,
    /// Raw public keys: the peer does not negotiate them (it offers or chose X.509 only, or said
    /// unsupported_certificate).
    NoRawPublicKey,
    /// No answer within the handshake timeout.
    Timeout,
    /// The peer ended the handshake with another fatal alert (its TLS alert description).
    Alert(u8),
    /// Anything else dimpl reported.
    Other(String),
}

impl std::fmt::Display for HandshakeFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandshakeFailure::UnknownIdentity => write!(f, "unknown PSK identity (check -u and the server's keys)"),
            HandshakeFailure::BadKey => {
                write!(f, "the keys do not match, or the server knows no key for this identity (check -k and -u)")
            }
            HandshakeFailure::NoSharedSuite => write!(f, "no shared cipher suite"),
            HandshakeFailure::BadCertificate => {
                write!(f, "bad certificate (the peer refused ours, or sent one that is not P-256 ECDSA)")
            }
            HandshakeFailure::UntrustedCertificate(why) => write!(f, "{why} (check -C)"),
            HandshakeFailure::UntrustedKey(why) => write!(f, "{why} (check --peer-key)"),
            HandshakeFailure::RefusedKey => {
                write!(f, "the peer does not trust our raw public key (give it the public key of -M/--rpk)")
            }
            HandshakeFailure::NoRawPublicKey => write!(f, "the peer does not use raw public keys (RFC 7250)"),
            HandshakeFailure::Timeout => {
                write!(f, "no answer to the handshake (a server may refuse a key silently: check -k and -u)")
            }
            HandshakeFailure::Alert(d) => write!(f, "the peer sent fatal alert {d}"),
            HandshakeFailure::Other(s) => write!(f, "{s}"),
        }
    }
}

/// TLS alert descriptions (RFC 5246 §7.2, RFC 4279 §2).
mod alert {
    pub const HANDSHAKE_FAILURE: u8 = 40;
    pub const BAD_CERTIFICATE: u8 = 42;
    pub const UNSUPPORTED_CERTIFICATE: u8 = 43;
    pub const DECRYPT_ERROR: u8 = 51;
    pub const BAD_RECORD_MAC: u8 = 20;
    pub const INSUFFICIENT_SECURITY: u8 = 71;
    pub const UNKNOWN_PSK_IDENTITY: u8 = 115;
}

impl HandshakeFailure {
    /// The failure in a few words without the advice of its `Display`: what an exchange that waited
    /// for the handshake fails with (`corral_proto::RequestError::Dtls`).
    pub fn summary(&self) -> &'static str {
        match self {
            HandshakeFailure::UnknownIdentity => "unknown PSK identity",
            HandshakeFailure::BadKey => "the keys do not match, or the identity is unknown",
            HandshakeFailure::NoSharedSuite => "no shared cipher suite",
            HandshakeFailure::BadCertificate => "bad certificate",
            HandshakeFailure::UntrustedCertificate(_) => "the certificate is not signed by a trusted CA",
            HandshakeFailure::UntrustedKey(_) => "the raw public key is not trusted",
            HandshakeFailure::RefusedKey => "the peer does not trust our raw public key",
            HandshakeFailure::NoRawPublicKey => "the peer does not use raw public keys",
            HandshakeFailure::Timeout => "no answer to the handshake",
            HandshakeFailure::Alert(_) | HandshakeFailure::Other(_) => "the peer ended it with a fatal alert",
        }
    }

    /// What dimpl's error `e` means; `rpk`: this side authenticates with a raw public key.
    pub(crate) fn from_error(e: &dimpl::Error, rpk: bool) -> HandshakeFailure {
        use dimpl::{CertificateError, Error, PskError, SecurityError};
        match e {
            Error::CertificateError(CertificateError::RawPublicKeyNotNegotiated) => HandshakeFailure::NoRawPublicKey,
            Error::PskError(PskError::ResolverReturnedNoKey) => HandshakeFailure::UnknownIdentity,
            Error::SecurityError(SecurityError::NoMutuallyAcceptableCipherSuite) => HandshakeFailure::NoSharedSuite,
            Error::SecurityError(
                SecurityError::ServerFinishedVerificationFailed | SecurityError::ClientFinishedVerificationFailed,
            ) => HandshakeFailure::BadKey,
            Error::SecurityError(SecurityError::FatalAlert { description }) => match *description {
                alert::UNKNOWN_PSK_IDENTITY => HandshakeFailure::UnknownIdentity,
                alert::DECRYPT_ERROR | alert::BAD_RECORD_MAC => HandshakeFailure::BadKey,
                alert::HANDSHAKE_FAILURE | alert::INSUFFICIENT_SECURITY => HandshakeFailure::NoSharedSuite,
                alert::BAD_CERTIFICATE if rpk => HandshakeFailure::RefusedKey,
                alert::BAD_CERTIFICATE => HandshakeFailure::BadCertificate,
                alert::UNSUPPORTED_CERTIFICATE if rpk => HandshakeFailure::NoRawPublicKey,
                d => HandshakeFailure::Alert(d),
            },
            Error::CertificateError(_) => HandshakeFailure::BadCertificate,
            Error::Timeout(_) => HandshakeFailure::Timeout,
            e => HandshakeFailure::Other(e.to_string()),
        }
    }

    /// The alert a server sends a peer whose handshake failed this way.
    pub(crate) fn alert(&self) -> u8 {
        match self {
            HandshakeFailure::UntrustedKey(_) | HandshakeFailure::RefusedKey => alert::BAD_CERTIFICATE,
            HandshakeFailure::NoRawPublicKey => alert::UNSUPPORTED_CERTIFICATE,
            // RFC 4279 §2: "the server MAY respond with a 'decrypt_error' alert … to avoid revealing
            // whether an identity is known"; with unknown_psk_identity a client could list the
            // identities one guess at a time. dimpl ran the rest of the handshake with a random key, so
            // the alert comes at the same point, after the same work, as a wrong key's.
            HandshakeFailure::UnknownIdentity | HandshakeFailure::BadKey => alert::DECRYPT_ERROR,
            HandshakeFailure::BadCertificate | HandshakeFailure::UntrustedCertificate(_) => alert::BAD_CERTIFICATE,
            _ => alert::HANDSHAKE_FAILURE,
        }
    }
}
