//! The client's error: why a request produced no response, whatever part of the client found it (the
//! driver, the URI, OSCORE, a block-wise transfer).
//!
//! Owns: the [`Error`] type and its words. Used by [`crate::client`] and [`crate::oscore`], which need
//! nothing else of each other's for it.

use crate::driver::RequestFailure;
use crate::uri::UriError;
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
    /// OSCORE: the response does not verify, the server refused the protected request, or the context
    /// cannot be used (the text says which).
    Oscore(String),
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
            Error::Oscore(why) => write!(f, "OSCORE: {why}"),
            Error::Connect { addr, reason } => write!(f, "cannot connect to {addr} over TCP: {reason}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<RequestFailure> for Error {
    fn from(f: RequestFailure) -> Error {
        match f {
            RequestFailure::Failed(RequestError::Timeout) => Error::Timeout,
            RequestFailure::Failed(RequestError::Reset) => Error::Reset,
            RequestFailure::Failed(RequestError::BadTransfer(why)) => Error::Transfer(why),
            RequestFailure::Failed(RequestError::ConnectionClosed) => Error::ConnectionClosed,
            RequestFailure::Failed(RequestError::Malformed) => Error::Malformed,
            RequestFailure::Failed(RequestError::Unreachable) => Error::Refused(SocketAddr::from(([0, 0, 0, 0], 0))),
            RequestFailure::Start(e) => Error::Start(e),
            RequestFailure::Unreachable => Error::Unreachable(SocketAddr::from(([0, 0, 0, 0], 0))),
            RequestFailure::Connect(reason) => Error::Connect { addr: SocketAddr::from(([0, 0, 0, 0], 0)), reason },
        }
    }
}

impl From<UriError> for Error {
    fn from(e: UriError) -> Error {
        Error::InvalidUri(e)
    }
}
