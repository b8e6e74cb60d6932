//! The client's error: why a request produced no response, whatever part of the client found it (the
//! driver, the URI, OSCORE, a block-wise transfer).
//!
//! Owns: the [`Error`] type and its words. Used by [`crate::app::client`] and [`crate::oscore`], which need
//! nothing else of each other's for it.

use crate::driver::RequestFailure;
use crate::net::uri::UriError;
use corral_proto::{RequestError, StartError};
use std::fmt;
use std::net::SocketAddr;

/// Why a request produced no response. A response with an error code (4.xx, 5.xx) is *not* an error here:
/// it is a [`Response`]; check `response.code`.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The URI is not a valid `coap://` URI (the caller's fault).
    InvalidUri(UriError),
    /// The host name did not resolve to an address this client's socket can reach.
    Resolve { host: String, reason: String },
    /// No response in time: the CON was never acknowledged, or the response did not come, or the request's
    /// own timeout passed.
    Timeout,
    /// The server rejected the request with RST.
    Reset,
    /// The endpoint refused to start the request (too many requests in flight, token in use).
    Start(StartError),
    /// The client's socket cannot send to this address family (an IPv4 socket and an IPv6 server).
    Unreachable(SocketAddr),
    /// The client's driver has stopped.
    Closed,
    /// A block-wise transfer broke off (RFC 7959); the text says why. No partial body is returned.
    Transfer(&'static str),
    /// CoAP over TCP: the connection closed before the response arrived.
    ConnectionClosed,
    /// CoAP over TCP: no connection could be made to the server.
    Connect { addr: SocketAddr, reason: String },
    /// The server acknowledged the request with a message that does not parse.
    Malformed,
    /// The network reported the server unreachable (ICMP port or host unreachable): nothing listens
    /// at that address and port.
    Refused(SocketAddr),
    /// This host has no route to the server's network or host: the request could not be sent at all.
    NoRoute(SocketAddr),
    /// OSCORE: the response does not verify, the server refused the protected request, or the context
    /// cannot be used.
    Oscore(OscoreError),
    /// coaps://: the DTLS handshake with the server failed; the reason says why (unknown identity, keys
    /// that do not match, no shared cipher suite, no answer).
    Dtls { addr: SocketAddr, reason: corral_dtls::HandshakeFailure },
    /// coaps+tcp://: the TLS handshake with the server failed, or the server closed the connection with a
    /// TLS alert; the reason says why (unknown CA, name mismatch, no client certificate).
    Tls { addr: SocketAddr, reason: String },
    /// The request ended without a response for a reason this version names no variant for (corral-proto's
    /// [`RequestError`] can grow).
    Failed(RequestError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidUri(e) => write!(f, "invalid URI: {e}"),
            Error::Resolve { host, reason } => write!(f, "cannot resolve `{host}`: {reason}"),
            Error::Timeout => f.write_str("request timed out"),
            Error::Reset => f.write_str("request reset by the server (RST)"),
            Error::Start(e) => write!(f, "request not started: {e}"),
            Error::Unreachable(a) => write!(f, "{a} is not reachable from this socket's address family"),
            Error::Closed => f.write_str("the client has stopped"),
            Error::Transfer(why) => write!(f, "block-wise transfer failed: {why}"),
            Error::ConnectionClosed => f.write_str("the connection closed before the response arrived"),
            Error::Malformed => f.write_str("the server answered with a malformed message"),
            Error::Refused(a) => write!(f, "{a} refused the request (port unreachable)"),
            Error::NoRoute(a) => write!(f, "{a} is unreachable: this host has no route to it (network unreachable)"),
            Error::Oscore(why) => write!(f, "OSCORE: {why}"),
            Error::Connect { addr, reason } => write!(f, "cannot connect to {addr} over TCP: {reason}"),
            Error::Dtls { addr, reason } => write!(f, "DTLS handshake with {addr} failed: {reason}"),
            Error::Tls { addr, reason } => write!(f, "TLS handshake with {addr} failed: {reason}"),
            Error::Failed(e) => write!(f, "request failed: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Oscore(e) => Some(e),
            _ => None,
        }
    }
}

/// Why an OSCORE-protected request (RFC 8613, Group OSCORE) got no usable response, by whose fault.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OscoreError {
    /// corral-oscore would not protect the request (the context's fault: e.g. its sequence numbers are
    /// used up) or the response does not verify (the server's, or an attacker's).
    Protection(corral_oscore::Error),
    /// The server answered without OSCORE: its refusal of the protected request (code and diagnostic).
    Unprotected { code: corral_proto::wire::Code, diagnostic: String },
    /// One response to a multicast request, from `from`, does not verify.
    Unverified { from: SocketAddr, error: Box<OscoreError> },
    /// The server asked for an Echo value again after the request carried one (RFC 9175).
    EchoAgain,
    /// A multicast request can be protected only in Group OSCORE's group mode; this context is for one
    /// server (the caller's misuse).
    NotForMulticast,
    /// The binding of a request does not belong to this kind of context (the caller's misuse).
    WrongBinding,
    /// A thread panicked while holding the security context.
    Poisoned,
}

impl fmt::Display for OscoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OscoreError::Protection(e) => e.fmt(f),
            OscoreError::Unprotected { code, diagnostic } => {
                write!(f, "the server answered without OSCORE: {code:#} {diagnostic}")
            }
            OscoreError::Unverified { from, error } => {
                write!(f, "the response from {from} does not verify: OSCORE: {error}")
            }
            OscoreError::EchoAgain => f.write_str("the server keeps asking for Echo"),
            OscoreError::NotForMulticast => f.write_str(
                "a multicast request is protected in Group OSCORE's group mode; this context is for one server \
                 (pairwise, or deterministic requests)",
            ),
            OscoreError::WrongBinding => f.write_str("a binding of another kind of context"),
            OscoreError::Poisoned => f.write_str("the security context is poisoned"),
        }
    }
}

impl std::error::Error for OscoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OscoreError::Protection(e) => Some(e),
            OscoreError::Unverified { error, .. } => Some(&**error),
            _ => None,
        }
    }
}

impl From<OscoreError> for Error {
    fn from(e: OscoreError) -> Error {
        Error::Oscore(e)
    }
}

impl From<corral_oscore::Error> for Error {
    fn from(e: corral_oscore::Error) -> Error {
        Error::Oscore(OscoreError::Protection(e))
    }
}

impl From<RequestFailure> for Error {
    fn from(f: RequestFailure) -> Error {
        match f {
            RequestFailure::Failed(RequestError::Timeout) => Error::Timeout,
            RequestFailure::Failed(RequestError::Reset) => Error::Reset,
            RequestFailure::Failed(RequestError::BadTransfer(why)) => Error::Transfer(why),
            RequestFailure::Failed(RequestError::ConnectionClosed) => Error::ConnectionClosed,
            RequestFailure::Failed(RequestError::Malformed) => Error::Malformed,
            RequestFailure::Failed(RequestError::Unreachable) => Error::Refused(SocketAddr::from(([0, 0, 0, 0], 0))),
            RequestFailure::Failed(RequestError::Dtls(why)) => Error::Dtls {
                addr: SocketAddr::from(([0, 0, 0, 0], 0)),
                reason: corral_dtls::HandshakeFailure::Other(why.into()),
            },
            RequestFailure::Failed(e) => Error::Failed(e),
            RequestFailure::Start(e) => Error::Start(e),
            RequestFailure::Unreachable => Error::Unreachable(SocketAddr::from(([0, 0, 0, 0], 0))),
            RequestFailure::NoRoute => Error::NoRoute(SocketAddr::from(([0, 0, 0, 0], 0))),
            RequestFailure::Connect(reason) => Error::Connect { addr: SocketAddr::from(([0, 0, 0, 0], 0)), reason },
        }
    }
}

impl From<UriError> for Error {
    fn from(e: UriError) -> Error {
        Error::InvalidUri(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn an_oscore_failure_carries_corral_oscores_error_and_keeps_its_words() {
        let e = Error::from(corral_oscore::Error::DecryptionFailed);
        assert!(matches!(e, Error::Oscore(OscoreError::Protection(corral_oscore::Error::DecryptionFailed))));
        let inner = e.source().and_then(|s| s.source()).and_then(|s| s.downcast_ref::<corral_oscore::Error>());
        assert_eq!(inner, Some(&corral_oscore::Error::DecryptionFailed));
        assert_eq!(e.to_string(), format!("OSCORE: {}", corral_oscore::Error::DecryptionFailed));
        let refused =
            OscoreError::Unprotected { code: corral_proto::wire::Code::UNAUTHORIZED, diagnostic: "no".into() };
        assert_eq!(refused.to_string(), "the server answered without OSCORE: 4.01 Unauthorized no");
        let from: SocketAddr = "127.0.0.1:5683".parse().unwrap();
        let one = OscoreError::Unverified { from, error: Box::new(refused) };
        assert_eq!(
            Error::Oscore(one).to_string(),
            "OSCORE: the response from 127.0.0.1:5683 does not verify: OSCORE: the server answered without OSCORE: \
             4.01 Unauthorized no"
        );
    }
}
