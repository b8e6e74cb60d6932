//! The application-level request and response types, free of message-layer fields.
//!
//! Type, message ID and token belong to the endpoint; an application only says what it wants
//! (method or code, options, payload) and how to send it ([`SendParams`]).

use crate::time::Duration;
use corral_wire::{Code, ContentFormat, OptionNumber, Options, Token};
use std::fmt;
use std::net::SocketAddr;

/// A request as the application sees it.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Request {
    pub method: Code,
    pub options: Options,
    pub payload: Vec<u8>,
}

impl Request {
    pub fn new(method: Code) -> Request {
        Request { method, options: Options::new(), payload: Vec::new() }
    }

    /// A GET of a `/`-separated path.
    pub fn get(path: &str) -> Request {
        Request::new(Code::GET).with_path(path)
    }

    pub fn with_path(mut self, path: &str) -> Request {
        self.options.set_path(path);
        self
    }

    /// Adds one Uri-Query item (`key=value`).
    pub fn with_query(mut self, item: &str) -> Request {
        self.options.push_str(OptionNumber::URI_QUERY, item);
        self
    }

    pub fn with_option(mut self, number: OptionNumber, value: &[u8]) -> Request {
        self.options.push(number, value);
        self
    }

    pub fn with_payload(mut self, payload: impl Into<Vec<u8>>) -> Request {
        self.payload = payload.into();
        self
    }

    pub fn with_content_format(mut self, cf: ContentFormat) -> Request {
        self.options.set_uint(OptionNumber::CONTENT_FORMAT, u64::from(cf.0));
        self
    }

    pub fn with_accept(mut self, cf: ContentFormat) -> Request {
        self.options.set_uint(OptionNumber::ACCEPT, u64::from(cf.0));
        self
    }

    /// Uri-Path segments as strings (lossy for non-UTF-8).
    pub fn path_segments(&self) -> impl Iterator<Item = std::borrow::Cow<'_, str>> {
        self.options.get_all(OptionNumber::URI_PATH).map(String::from_utf8_lossy)
    }

    /// Whether the request is addressed to a forward proxy (it carries Proxy-Uri or Proxy-Scheme,
    /// RFC 7252 §5.7.2).
    pub fn is_proxied(&self) -> bool {
        self.options.contains(OptionNumber::PROXY_URI) || self.options.contains(OptionNumber::PROXY_SCHEME)
    }

    /// The name Observe registrations and [`crate::Context::changed`] give the requested resource: its
    /// path (`/s/t`), or for a request to a forward proxy the absolute URI it asks for (the Proxy-Uri
    /// as sent, or `scheme://host:port/path?query` from Proxy-Scheme and the Uri-* options), which no
    /// path can be confused with.
    pub fn resource_id(&self) -> String {
        if let Some(uri) = self.options.get(OptionNumber::PROXY_URI) {
            return String::from_utf8_lossy(uri).into_owned();
        }
        let Some(scheme) = self.options.get(OptionNumber::PROXY_SCHEME) else { return self.options.path() };
        let host = self.options.get(OptionNumber::URI_HOST).map(String::from_utf8_lossy).unwrap_or_default();
        let port = self.options.get_uint(OptionNumber::URI_PORT).map(|p| format!(":{p}")).unwrap_or_default();
        let query = self.options.query();
        let query = if query.is_empty() { String::new() } else { format!("?{query}") };
        format!("{}://{host}{port}{}{query}", String::from_utf8_lossy(scheme), self.options.path())
    }

    /// The value of the first `key=value` Uri-Query with this key.
    pub fn query_value(&self, key: &str) -> Option<&str> {
        self.options.query_pairs().find(|(k, _)| *k == key).map(|(_, v)| v)
    }
}

impl fmt::Debug for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method, self.options.path())?;
        let q = self.options.query();
        if !q.is_empty() {
            write!(f, "?{q}")?;
        }
        write!(f, " ({} B)", self.payload.len())
    }
}

/// A response as the application sees it.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Response {
    pub code: Code,
    pub options: Options,
    pub payload: Vec<u8>,
}

impl Response {
    pub fn new(code: Code) -> Response {
        Response { code, options: Options::new(), payload: Vec::new() }
    }

    /// 2.05 Content with a payload in a content format.
    pub fn content(cf: ContentFormat, payload: impl Into<Vec<u8>>) -> Response {
        Response::new(Code::CONTENT).with_content_format(cf).with_payload(payload)
    }

    /// An error response with a diagnostic payload (RFC 7252 §5.5.2: UTF-8 text, no Content-Format).
    pub fn error(code: Code, diagnostic: impl Into<String>) -> Response {
        Response::new(code).with_payload(diagnostic.into().into_bytes())
    }

    pub fn with_payload(mut self, payload: impl Into<Vec<u8>>) -> Response {
        self.payload = payload.into();
        self
    }

    pub fn with_content_format(mut self, cf: ContentFormat) -> Response {
        self.options.set_uint(OptionNumber::CONTENT_FORMAT, u64::from(cf.0));
        self
    }

    pub fn with_option(mut self, number: OptionNumber, value: &[u8]) -> Response {
        self.options.push(number, value);
        self
    }

    /// Marks the response of a GET handler as observable: if the request registered (Observe=0), the
    /// endpoint registers the observer and sets the sequence number (RFC 7641 §4.1). Services call
    /// `Context::changed` when the resource changes; the handler then renders each notification.
    pub fn observable(mut self) -> Response {
        self.options.set_uint(OptionNumber::OBSERVE, 0);
        self
    }

    pub fn with_max_age(mut self, secs: u32) -> Response {
        self.options.set_uint(OptionNumber::MAX_AGE, u64::from(secs));
        self
    }

    /// The payload as text, lossily.
    pub fn payload_text(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.payload)
    }
}

impl fmt::Debug for Response {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#} ({} B)", self.code, self.payload.len())
    }
}

/// How to send a request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SendParams {
    /// CON (reliable) or NON. Requests to a multicast address are always NON (RFC 7252 §8.1).
    pub confirmable: bool,
    /// A token to use instead of a random one (it must not be in use for another outstanding request).
    pub token: Option<Token>,
    /// Fail the request with [`RequestError::Timeout`] if it has not completed this long after it started.
    pub timeout: Option<Duration>,
    /// For multicast requests: how long responses are collected before [`crate::Event::MulticastDone`].
    /// Defaults to the endpoint's `multicast_window`.
    pub multicast_window: Option<Duration>,
    /// Block size exponent for this request (`2^(szx+4)` bytes, 0-6): uploads use it for Block1 and the
    /// first request asks for it in Block2 (early negotiation, RFC 7959 §2.4). `None`: the endpoint's.
    pub block_szx: Option<u8>,
}

impl Default for SendParams {
    fn default() -> Self {
        SendParams { confirmable: true, token: None, timeout: None, multicast_window: None, block_szx: None }
    }
}

impl SendParams {
    pub fn non() -> SendParams {
        SendParams { confirmable: false, ..SendParams::default() }
    }
}

/// The transport an exchange runs over: the [`Endpoint`](crate::Endpoint) (UDP, or a simulated link) or
/// the [`TcpEndpoint`](crate::TcpEndpoint) (CoAP over TCP, RFC 8323). Every [`RequestId`] and
/// [`InboundId`] carries it, so a node with both answers or cancels on the right one.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Transport {
    Udp,
    Tcp,
}

/// Where the ids of the TCP endpoint start: the transport is the id's high bit, so ids of the two
/// transports never meet and order as before (UDP first).
const TCP_ID_BASE: u64 = 1 << 62;

impl Transport {
    /// The `seq`-th id of this transport (numbered from 0).
    fn id(self, seq: u64) -> u64 {
        match self {
            Transport::Udp => seq + 1,
            Transport::Tcp => TCP_ID_BASE + seq,
        }
    }

    fn of(id: u64) -> Transport {
        if id >= TCP_ID_BASE {
            Transport::Tcp
        } else {
            Transport::Udp
        }
    }
}

/// Identifies a request this endpoint sent.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct RequestId(u64);

impl RequestId {
    /// The `seq`-th request (from 0) of an endpoint of `transport`.
    pub(crate) fn new(transport: Transport, seq: u64) -> RequestId {
        RequestId(transport.id(seq))
    }

    /// The transport the request went out on.
    pub fn transport(self) -> Transport {
        Transport::of(self.0)
    }

    /// Whether cancelling this request, while it registers an observation, also ends the observation at
    /// the server: over UDP the first notification after a cancel is answered with a Reset, which
    /// deregisters (RFC 7641 §3.6); over TCP there is no Reset, so only a deregistration ends it (RFC
    /// 8323 §7.2) and a caller who leaves early must wait for the registration to deregister.
    pub fn cancel_ends_observation(self) -> bool {
        // A match, not a comparison: a new transport must answer the question.
        match self.transport() {
            Transport::Udp => true,
            Transport::Tcp => false,
        }
    }
}

/// Identifies a request this endpoint received and has not answered yet.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct InboundId(u64);

impl InboundId {
    /// The `seq`-th received request (from 0) of an endpoint of `transport`.
    pub(crate) fn new(transport: Transport, seq: u64) -> InboundId {
        InboundId(transport.id(seq))
    }

    /// The transport the request came on.
    pub fn transport(self) -> Transport {
        Transport::of(self.0)
    }

    /// Whether the client can be sent more than one response to this request (see
    /// [`crate::Endpoint::respond_again`]): over UDP, a NON with the request's token after the first
    /// answer, as a group's answers are relayed (RFC 7390 §2.7); over TCP a request has exactly one
    /// response (RFC 8323 §3.3), unless it registered an observation.
    pub fn can_respond_again(self) -> bool {
        // A match, not a comparison: a new transport must answer the question.
        match self.transport() {
            Transport::Udp => true,
            Transport::Tcp => false,
        }
    }
}

/// A request received from a peer, to be answered with [`crate::Endpoint::respond`].
#[derive(Debug, Clone)]
pub struct IncomingRequest {
    pub id: InboundId,
    pub from: SocketAddr,
    /// It arrived on a multicast address: answer after leisure, never with an error (RFC 7252 §8.2).
    pub multicast: bool,
    pub confirmable: bool,
    pub token: Token,
    pub request: Request,
    /// This is an observer's registration replayed to render a notification (RFC 7641 §4.2), not a
    /// request that came from the network.
    pub notification: bool,
    /// The source has proved that it receives what is sent to its address: it acknowledged, reset or
    /// answered a message of this endpoint's, or returned an Echo value it was given (RFC 9175 §2.4), or
    /// the request came over a TCP connection (whose handshake proves the address), or its source is in a
    /// network that cannot be spoofed (loopback, [`crate::EndpointConfig::verified_nets`]). A request from an
    /// unverified source may come from a blind spoofer; a service that would change state or commit
    /// resources for it can answer [`crate::Context::challenge`] instead, and the client's repetition
    /// with the Echo value arrives verified.
    pub verified: bool,
    /// This very request carried the Echo value this endpoint last gave its source, still fresh: the
    /// source received our challenge at its address just now, so the request is its repetition (request
    /// freshness, RFC 9175 §2.4). Stronger than `verified`, which holds for every later request from the
    /// same address and port — a pair a blind spoofer may know (a gateway's fixed port) or guess. A
    /// service that acts on a source's address alone asks for it with [`crate::Context::challenge`] on
    /// each state change. Requests over TCP carry it (the connection is the proof).
    pub echoed: bool,
    /// The PSK identity the source proved in a DTLS handshake, for a request that arrived inside that DTLS
    /// session (`coaps://`); `None` over plain CoAP and in rendered notifications. The driver's DTLS layer
    /// hands it in with [`crate::Endpoint::set_datagram_identity`]; a service may grant roles by it. Such
    /// a request is also `verified` and `echoed`: the handshake's cookie exchange proved the address and
    /// the record layer's replay window its freshness.
    pub peer_identity: Option<std::sync::Arc<[u8]>>,
    /// The OSCORE security context that protected this request (RFC 8613), set by an OSCORE layer that
    /// verified it; `None` for a request that OSCORE did not protect and in rendered notifications. A
    /// service may bind state to it (as the Resource Directory binds endpoint names, RFC 9176 §7). Such a
    /// request is authentic and fresh (the context's replay window) whatever its outer message says.
    pub oscore_identity: Option<std::sync::Arc<OscoreIdentity>>,
}

/// Who protected a request with OSCORE (RFC 8613 §3.1): the client's Sender ID (the request's kid) and
/// the ID Context (kid context), if it has one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OscoreIdentity {
    pub kid: Vec<u8>,
    pub kid_context: Option<Vec<u8>>,
}

/// Why a request ended without a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequestError {
    /// No ACK after MAX_RETRANSMIT retransmissions, no response in time, or the request's own timeout.
    Timeout,
    /// The peer answered with RST.
    Reset,
    /// A block-wise transfer broke off (RFC 7959): the text says why — a bad block, a representation that
    /// changed, or (text starting "stalled") a timeout after some blocks had gone through. No partial body
    /// is delivered.
    BadTransfer(&'static str),
    /// CoAP over TCP: the connection closed or was aborted before the response arrived (or could not be
    /// made).
    ConnectionClosed,
    /// The peer acknowledged the request with a message that does not parse (RFC 7252 §3).
    Malformed,
    /// The network said the peer cannot be reached (an ICMP port or host unreachable error reported by
    /// the driver through [`crate::Endpoint::handle_unreachable`]).
    Unreachable,
    /// `coaps://`: the DTLS handshake with the peer failed; the text says why (the driver reports it with
    /// [`crate::Endpoint::fail_peer`]).
    Dtls(&'static str),
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::Timeout => f.write_str("timed out"),
            RequestError::Reset => f.write_str("reset by peer"),
            RequestError::BadTransfer(why) => write!(f, "block-wise transfer failed: {why}"),
            RequestError::ConnectionClosed => f.write_str("connection closed"),
            RequestError::Malformed => f.write_str("answered with a malformed message"),
            RequestError::Unreachable => f.write_str("unreachable (ICMP)"),
            RequestError::Dtls(why) => write!(f, "DTLS handshake failed: {why}"),
        }
    }
}

impl std::error::Error for RequestError {}

/// Why a request could not be started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StartError {
    /// The limit on concurrent client exchanges is reached.
    TooManyExchanges,
    /// NSTART requests to this peer are outstanding and its queue is full.
    QueueFull,
    /// The requested token is already in use.
    TokenInUse,
    /// The peer table is full of peers with state that cannot be dropped.
    TooManyPeers,
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::TooManyExchanges => f.write_str("too many concurrent requests"),
            StartError::QueueFull => f.write_str("request queue for this peer is full"),
            StartError::TokenInUse => f.write_str("token already in use"),
            StartError::TooManyPeers => f.write_str("too many peers"),
        }
    }
}

impl std::error::Error for StartError {}

/// [`crate::Endpoint::respond`] was given an exchange that is already answered or has expired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnknownExchange;

impl fmt::Display for UnknownExchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no such inbound exchange (already answered or expired)")
    }
}

impl std::error::Error for UnknownExchange {}
