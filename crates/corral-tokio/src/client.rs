//! The async CoAP client: one [`Client`] is one UDP socket and one corral [`Endpoint`], driven by a task.
//!
//! ```no_run
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! use corral_tokio::Client;
//! let client = Client::bind("[::]:0").await?;
//! let resp = client.get("coap://[::1]/s/t").await?;
//! println!("{:#} {}", resp.code, resp.payload_text());
//! let resp = client.put("coap://[::1]/led").payload("on").content_format(corral_tokio::ContentFormat::TEXT_PLAIN).non().await?;
//! # let _ = resp; Ok(()) }
//! ```
//!
//! Requests to one server obey NSTART = 1 (RFC 7252 §4.7): concurrent requests to the same server queue
//! behind each other inside the endpoint. Dropping a request's future cancels it.

use crate::driver::{os_seed, Clock, Command, Driver, DriverStats, Reply, RequestFailure};
use crate::socket::{can_reach, PreparedSocket, SocketOptions};
use crate::uri::{parse_uri, Host, Uri, UriError};
use corral_proto::wire::{Code, ContentFormat, OptionNumber, Token};
use corral_proto::{Endpoint, EndpointConfig, Request, RequestError, Response, SendParams, StartError};
use std::fmt;
use std::future::{Future, IntoFuture};
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV6};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

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
            RequestFailure::Start(e) => Error::Start(e),
            RequestFailure::Unreachable => Error::Unreachable(SocketAddr::from(([0, 0, 0, 0], 0))),
        }
    }
}

impl From<UriError> for Error {
    fn from(e: UriError) -> Error {
        Error::InvalidUri(e)
    }
}

/// Configures a [`Client`] before binding it.
#[derive(Debug, Clone, Default)]
pub struct ClientBuilder {
    config: Option<EndpointConfig>,
    socket: SocketOptions,
    timeout: Option<Duration>,
}

impl ClientBuilder {
    /// The endpoint configuration (transmission parameters, limits). Its seed is replaced by one drawn from
    /// the OS: tokens and message IDs must not be predictable off-path.
    pub fn endpoint_config(mut self, config: EndpointConfig) -> Self {
        self.config = Some(config);
        self
    }

    pub fn socket_options(mut self, opts: SocketOptions) -> Self {
        self.socket = opts;
        self
    }

    /// The interface (by address) IPv4 multicast requests leave from, e.g. `127.0.0.1` for loopback.
    pub fn multicast_interface_v4(mut self, ifaddr: Ipv4Addr) -> Self {
        self.socket.multicast_if_v4 = Some(ifaddr);
        self
    }

    /// The interface index IPv6 multicast requests leave from.
    pub fn multicast_interface_v6(mut self, index: u32) -> Self {
        self.socket.multicast_if_v6 = index;
        self
    }

    /// A timeout applied to every request that does not set its own.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Binds the socket and starts the client's driver task. Must be called inside a tokio runtime.
    pub async fn bind(self, addr: impl tokio::net::ToSocketAddrs) -> io::Result<Client> {
        let addr = tokio::net::lookup_host(addr)
            .await?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "bind address resolved to nothing"))?;
        let prepared = PreparedSocket::bind(addr, self.socket)?;
        let local = prepared.local_addr();
        let dual_stack = prepared.dual_stack();
        let socket = prepared.into_tokio()?;
        let mut config = self.config.unwrap_or_default();
        config.seed = os_seed();
        let (tx, rx) = mpsc::unbounded_channel();
        let driver = Driver::new(Endpoint::new(config), socket, Clock::new(), rx);
        let span = tracing::debug_span!("coap_client", local = %local);
        tokio::spawn(driver.run().instrument(span));
        Ok(Client {
            inner: Arc::new(Inner { tx, local, dual_stack, next_ticket: AtomicU64::new(1), timeout: self.timeout }),
        })
    }
}

struct Inner {
    tx: mpsc::UnboundedSender<Command>,
    local: SocketAddr,
    dual_stack: bool,
    next_ticket: AtomicU64,
    timeout: Option<Duration>,
}

/// An async CoAP client. Cheap to clone; all clones share one socket and endpoint. The driver stops when
/// the last clone and the last request are gone.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client").field("local", &self.inner.local).finish()
    }
}

impl Client {
    /// Binds a client socket with default settings: `Client::bind("[::]:0")` for dual stack.
    pub async fn bind(addr: impl tokio::net::ToSocketAddrs) -> io::Result<Client> {
        ClientBuilder::default().bind(addr).await
    }

    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local
    }

    /// A request with any method; finish it with the builder's methods and `.await` it.
    pub fn request(&self, method: Code, uri: &str) -> RequestBuilder {
        RequestBuilder {
            client: self.clone(),
            uri: parse_uri(uri),
            dst: None,
            request: Request::new(method),
            params: SendParams { timeout: self.inner.timeout.map(Into::into), ..SendParams::default() },
        }
    }

    pub fn get(&self, uri: &str) -> RequestBuilder {
        self.request(Code::GET, uri)
    }

    pub fn post(&self, uri: &str) -> RequestBuilder {
        self.request(Code::POST, uri)
    }

    pub fn put(&self, uri: &str) -> RequestBuilder {
        self.request(Code::PUT, uri)
    }

    pub fn delete(&self, uri: &str) -> RequestBuilder {
        self.request(Code::DELETE, uri)
    }

    pub fn fetch(&self, uri: &str) -> RequestBuilder {
        self.request(Code::FETCH, uri)
    }

    pub fn patch(&self, uri: &str) -> RequestBuilder {
        self.request(Code::PATCH, uri)
    }

    pub fn ipatch(&self, uri: &str) -> RequestBuilder {
        self.request(Code::IPATCH, uri)
    }

    /// Sends a ready-made request to an address (no URI involved); returns the responder and the response.
    pub async fn send(
        &self,
        dst: SocketAddr,
        request: Request,
        params: SendParams,
    ) -> Result<(SocketAddr, Response), Error> {
        let (tx, rx) = oneshot::channel();
        let guard = self.start(dst, request, params, Reply::Unicast(tx))?;
        let result = rx.await.map_err(|_| Error::Closed)?;
        guard.disarm();
        result.map_err(|f| match f {
            RequestFailure::Unreachable => Error::Unreachable(dst),
            f => f.into(),
        })
    }

    /// Sends a request to a multicast group; responses arrive on the returned stream until the window
    /// (`params.multicast_window`, default DEFAULT_LEISURE + ACK_TIMEOUT) closes.
    pub fn send_multicast(
        &self,
        dst: SocketAddr,
        request: Request,
        params: SendParams,
    ) -> Result<MulticastResponses, Error> {
        let (tx, rx) = mpsc::unbounded_channel();
        let guard = self.start(dst, request, params, Reply::Multicast(tx))?;
        Ok(MulticastResponses { rx, guard: Some(guard) })
    }

    /// Counters and table sizes of this client's endpoint; `None` if the driver has stopped.
    pub async fn stats(&self) -> Option<DriverStats> {
        let (reply, rx) = oneshot::channel();
        self.inner.tx.send(Command::Stats { reply }).ok()?;
        rx.await.ok()
    }

    fn start(&self, dst: SocketAddr, request: Request, params: SendParams, reply: Reply) -> Result<CancelGuard, Error> {
        if !can_reach(self.inner.local, self.inner.dual_stack, &dst) {
            return Err(Error::Unreachable(dst));
        }
        let ticket = self.inner.next_ticket.fetch_add(1, Ordering::Relaxed);
        self.inner.tx.send(Command::Request { ticket, dst, request, params, reply }).map_err(|_| Error::Closed)?;
        Ok(CancelGuard { tx: self.inner.tx.clone(), ticket, armed: true })
    }

    /// Where a URI's request goes: its IP literal, or the first resolved address this socket can reach.
    pub async fn resolve(&self, uri: &Uri) -> Result<SocketAddr, Error> {
        match &uri.host {
            Host::Ip { ip: std::net::IpAddr::V6(ip), scope_id } => {
                Ok(SocketAddr::V6(SocketAddrV6::new(*ip, uri.port, 0, *scope_id)))
            }
            Host::Ip { ip, .. } => Ok(SocketAddr::new(*ip, uri.port)),
            Host::Name(name) => {
                let addrs = tokio::net::lookup_host((name.as_str(), uri.port))
                    .await
                    .map_err(|e| Error::Resolve { host: name.clone(), reason: e.to_string() })?;
                let (local, dual) = (self.inner.local, self.inner.dual_stack);
                addrs.into_iter().find(|a| can_reach(local, dual, a)).ok_or_else(|| Error::Resolve {
                    host: name.clone(),
                    reason: "no address of a family this socket can reach".into(),
                })
            }
        }
    }
}

/// Cancels a request in the driver when its future or stream is dropped before the end.
struct CancelGuard {
    tx: mpsc::UnboundedSender<Command>,
    ticket: u64,
    armed: bool,
}

impl CancelGuard {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.tx.send(Command::Cancel { ticket: self.ticket });
        }
    }
}

/// Builds a request from a URI. `.await` it (or call [`RequestBuilder::send`]) for the response;
/// [`RequestBuilder::multicast`] for a group request.
#[must_use = "a request does nothing until it is awaited"]
pub struct RequestBuilder {
    client: Client,
    uri: Result<Uri, UriError>,
    dst: Option<SocketAddr>,
    request: Request,
    params: SendParams,
}

impl RequestBuilder {
    /// Adds an option (repeatable options may be added several times).
    pub fn option(mut self, number: OptionNumber, value: impl AsRef<[u8]>) -> Self {
        self.request.options.push(number, value.as_ref());
        self
    }

    pub fn option_uint(mut self, number: OptionNumber, value: u64) -> Self {
        self.request.options.push_uint(number, value);
        self
    }

    pub fn payload(mut self, payload: impl Into<Vec<u8>>) -> Self {
        self.request.payload = payload.into();
        self
    }

    pub fn content_format(mut self, cf: ContentFormat) -> Self {
        self.request.options.set_uint(OptionNumber::CONTENT_FORMAT, u64::from(cf.0));
        self
    }

    pub fn accept(mut self, cf: ContentFormat) -> Self {
        self.request.options.set_uint(OptionNumber::ACCEPT, u64::from(cf.0));
        self
    }

    /// Sends the request as NON (no ACK, no retransmission).
    pub fn non(mut self) -> Self {
        self.params.confirmable = false;
        self
    }

    pub fn confirmable(mut self, con: bool) -> Self {
        self.params.confirmable = con;
        self
    }

    /// Uses this token instead of a random one.
    pub fn token(mut self, token: Token) -> Self {
        self.params.token = Some(token);
        self
    }

    /// Fails with [`Error::Timeout`] if no response has arrived this long after sending.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.params.timeout = Some(timeout.into());
        self
    }

    /// For multicast requests: how long responses are collected.
    pub fn multicast_window(mut self, window: Duration) -> Self {
        self.params.multicast_window = Some(window.into());
        self
    }

    /// Sends to this address instead of the URI's host (the URI still supplies the options).
    pub fn to(mut self, dst: SocketAddr) -> Self {
        self.dst = Some(dst);
        self
    }

    /// The request as it will be sent, without the URI's options (for inspection).
    pub fn request(&self) -> &Request {
        &self.request
    }

    async fn prepare(self) -> Result<(Client, SocketAddr, Request, SendParams), Error> {
        let uri = self.uri?;
        let dst = match self.dst {
            Some(d) => d,
            None => self.client.resolve(&uri).await?,
        };
        let mut request = self.request;
        // The URI's Uri-Path/Uri-Query come first: the order of repeated options is meaningful.
        let mut options = uri.to_options();
        for (n, v) in request.options.iter() {
            options.push(n, v);
        }
        request.options = options;
        Ok((self.client, dst, request, self.params))
    }

    /// Sends the request; returns the response (whatever its code).
    pub async fn send(self) -> Result<Response, Error> {
        self.send_from().await.map(|(_, r)| r)
    }

    /// Sends the request; returns the responder's address and the response.
    pub async fn send_from(self) -> Result<(SocketAddr, Response), Error> {
        let (client, dst, request, params) = self.prepare().await?;
        client.send(dst, request, params).await
    }

    /// Sends the request to a multicast group (as NON) and streams the responses.
    pub async fn multicast(self) -> Result<MulticastResponses, Error> {
        let (client, dst, request, mut params) = self.prepare().await?;
        params.confirmable = false;
        params.timeout = None;
        client.send_multicast(dst, request, params)
    }
}

impl IntoFuture for RequestBuilder {
    type Output = Result<Response, Error>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Response, Error>> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.send())
    }
}

/// The responses to a multicast request, as they arrive.
pub struct MulticastResponses {
    rx: mpsc::UnboundedReceiver<Result<(SocketAddr, Response), RequestFailure>>,
    guard: Option<CancelGuard>,
}

impl MulticastResponses {
    /// The next response; `None` once the collection window has closed.
    pub async fn next(&mut self) -> Option<Result<(SocketAddr, Response), Error>> {
        match self.rx.recv().await {
            Some(r) => Some(r.map_err(Error::from)),
            None => {
                if let Some(g) = self.guard.take() {
                    g.disarm();
                }
                None
            }
        }
    }

    /// Waits for the window to close and returns every response.
    pub async fn collect(mut self) -> Result<Vec<(SocketAddr, Response)>, Error> {
        let mut out = Vec::new();
        while let Some(r) = self.next().await {
            out.push(r?);
        }
        Ok(out)
    }
}
