//! The async CoAP client: one [`Client`] is one UDP socket with its corral [`Endpoint`], plus a
//! [`TcpEndpoint`] for `coap+tcp://` URIs, driven by one task.
//!
//! ```no_run
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! use corral_tokio::Client;
//! let client = Client::bind("[::]:0").await?;
//! let resp = client.get("coap://[::1]/s/t").await?;
//! println!("{:#} {}", resp.code, resp.payload_text());
//! let resp = client.put("coap://[::1]/led").payload("on").content_format(corral_tokio::ContentFormat::TEXT_PLAIN).non().await?;
//! let firmware = client.get("coap+tcp://[::1]/fw").block_size(512).await?;   // block-wise, over TCP
//! let mut temperature = client.get("coap://[::1]/temp").observe().await?;   // RFC 7641
//! while let Some(notification) = temperature.next().await {
//!     println!("{}", notification?.payload_text());
//! #   break;
//! }
//! temperature.cancel().await?;                                             // GET with Observe=1
//! # let _ = (resp, firmware); Ok(()) }
//! ```
//!
//! Requests to one server obey NSTART = 1 (RFC 7252 §4.7): concurrent requests to the same server queue
//! behind each other inside the endpoint. Dropping a request's future cancels it; dropping an
//! [`Observation`] deregisters it.
//!
//! Block-wise transfer (RFC 7959) is transparent: a payload larger than a block goes out block by block and
//! a block-wise response is assembled before it is returned; a transfer that breaks off is an
//! [`Error::Transfer`] (or [`Error::Timeout`]), never a truncated body.
//!
//! `coap+tcp://` (RFC 8323): the first request to a server opens a connection, which later requests reuse;
//! responses, notifications and block-wise transfers look exactly as over UDP. `coaps+tcp://` is the same
//! inside TLS, on a client made with [`ClientBuilder::tls`]: the server's certificate must be signed by
//! its CA and name the URI's host; a failed handshake is an [`Error::Tls`] that says why.

mod multicast;
pub use multicast::{Collected, MulticastResponse, MulticastResponses};

use crate::driver::{
    os_seeded, ClientMachine, Clock, Command, Driver, DriverStats, Outcome, Reply, RequestFailure, TcpSide, Transport,
    OBSERVE_QUEUE,
};
pub use crate::error::{Error, OscoreError};
use crate::net::socket::{can_reach, PreparedSocket, SocketOptions};
use crate::net::uri::{parse_scoped, Host, Scheme, Uri, UriError};
use crate::secure::oscore::{protect, verify, SharedContext};
use corral_proto::wire::{BlockValue, Code, ContentFormat, OptionNumber, Token};
use corral_proto::{
    Endpoint, EndpointConfig, Request, RequestError, Response, SendParams, TcpConfig, TcpEndpoint, TransferProgress,
    Transports,
};
use std::fmt;
use std::future::{Future, IntoFuture};
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

/// Configures a [`Client`] before binding it.
#[derive(Debug, Clone, Default)]
pub struct ClientBuilder {
    config: Option<EndpointConfig>,
    tcp: Option<TcpConfig>,
    socket: SocketOptions,
    timeout: Option<Duration>,
    dtls: Option<corral_dtls::DtlsConfig>,
    tls: Option<crate::net::tls::TlsClientConfig>,
}

impl ClientBuilder {
    /// The endpoint configuration (transmission parameters, limits). Its seed is replaced by one drawn from
    /// the OS: tokens and message IDs must not be predictable off-path.
    pub fn endpoint_config(mut self, config: EndpointConfig) -> Self {
        self.config = Some(config);
        self
    }

    /// The CoAP-over-TCP configuration (Max-Message-Size, limits). Default: the UDP endpoint's block
    /// settings, the rest [`TcpConfig::default`]. Its seed is replaced by one from the OS.
    pub fn tcp_config(mut self, config: TcpConfig) -> Self {
        self.tcp = Some(config);
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

    /// Speaks `coaps://`: every UDP datagram of this client goes through a DTLS session with its server,
    /// opened on the first request to it with these credentials (a client [`crate::DtlsRole`]).
    pub fn dtls(mut self, config: corral_dtls::DtlsConfig) -> Self {
        self.dtls = Some(config);
        self
    }

    /// Speaks `coaps+tcp://` (CoAP over TLS, RFC 8323 §9) with these settings: the CA that verifies
    /// servers, and this client's certificate if it has one.
    pub fn tls(mut self, config: crate::net::tls::TlsClientConfig) -> Self {
        self.tls = Some(config);
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
        let prepared = PreparedSocket::bind(addr, self.socket.clone())?;
        self.start(prepared)
    }

    /// Binds a wildcard socket on `port` (0: any) of a family that reaches `host`: IPv4 for an IPv4 literal,
    /// else dual-stack `[::]`, falling back to IPv4 where the host has no IPv6. The error names the
    /// address that could not be bound.
    pub async fn bind_reaching(self, host: &Host, port: u16) -> Result<Client, (SocketAddr, io::Error)> {
        let v4 = SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), port);
        if matches!(host, Host::Ip(std::net::IpAddr::V4(_))) {
            return self.bind(v4).await.map_err(|e| (v4, e));
        }
        let v6 = SocketAddr::new(std::net::Ipv6Addr::UNSPECIFIED.into(), port);
        match self.clone().bind(v6).await {
            Ok(c) => Ok(c),
            Err(_) => self.bind(v4).await.map_err(|e| (v4, e)),
        }
    }

    /// Starts the client on a socket bound beforehand (e.g. by [`crate::socket::bind_std`], when its
    /// address must be known before a runtime exists). Must be called inside a tokio runtime.
    pub fn from_std(self, socket: std::net::UdpSocket) -> io::Result<Client> {
        let prepared = PreparedSocket::from_std(socket, self.socket.clone())?;
        self.start(prepared)
    }

    fn start(self, prepared: PreparedSocket) -> io::Result<Client> {
        let local = prepared.local_addr();
        let dual_stack = prepared.dual_stack();
        let socket = prepared.into_tokio()?;
        let config = os_seeded(self.config.unwrap_or_default());
        let tcp = os_seeded(self.tcp.unwrap_or_else(|| TcpConfig { block: config.block, ..TcpConfig::default() }));
        let machine = ClientMachine(Transports::new(Endpoint::new(config), TcpEndpoint::new(tcp)));
        let (tx, rx) = mpsc::unbounded_channel();
        let span = tracing::debug_span!("coap_client", local = %local);
        let tls = self.tls.as_ref().map(crate::net::tls::TlsConnect::new);
        let tls_failures = tls.as_ref().map(|t| t.failures.clone());
        let (clock, tcp) = (Clock::new(), TcpSide::new(None).with_tls(tls));
        let dtls = match self.dtls {
            Some(c) => {
                let failures = Arc::new(crate::secure::DtlsFailures::default());
                let config = corral_dtls::SecureConfig { client: Some(c), ..Default::default() };
                let machine = crate::secure::SecureMachine::new(machine, config, Some(failures.clone()), None)?;
                tokio::spawn(Driver::new(machine, socket, clock, rx, tcp).run().instrument(span));
                Some(failures)
            }
            None => {
                tokio::spawn(Driver::new(machine, socket, clock, rx, tcp).run().instrument(span));
                None
            }
        };
        let (next_ticket, timeout) = (AtomicU64::new(1), self.timeout);
        let tls = tls_failures;
        Ok(Client { inner: Arc::new(Inner { tx, local, dual_stack, next_ticket, timeout, dtls, tls }) })
    }
}

struct Inner {
    tx: mpsc::UnboundedSender<Command>,
    local: SocketAddr,
    dual_stack: bool,
    next_ticket: AtomicU64,
    timeout: Option<Duration>,
    /// coaps://: why handshakes failed, by server (`None`: this client speaks no DTLS).
    dtls: Option<Arc<crate::secure::DtlsFailures>>,
    /// coaps+tcp://: why TLS handshakes failed, by server (`None`: this client speaks no TLS).
    tls: Option<Arc<crate::net::tls::TlsFailures>>,
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
            uri: parse_scoped(uri),
            dst: None,
            proxy: None,
            oscore: None,
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

    /// A ready-made request (its method, options and payload, its Uri-Path and Uri-Query among them: e.g.
    /// corral-group's `EntityRequest::to_request`) to the origin `base` (`coap://HOST[:PORT]`, without a
    /// path); finish it with the builder's methods and `.await` it.
    pub fn request_with(&self, base: &str, request: Request) -> RequestBuilder {
        RequestBuilder { request, ..self.request(Code::GET, base) }
    }

    /// Sends a ready-made request to an address (no URI involved); returns the responder and the response.
    pub async fn send(
        &self,
        dst: SocketAddr,
        request: Request,
        params: SendParams,
    ) -> Result<(SocketAddr, Response), Error> {
        self.send_via(Transport::Udp, dst, request, params).await
    }

    /// Sends a ready-made request over CoAP over TCP (RFC 8323) to `dst`, connecting first if this client
    /// has no connection to it yet. `params.confirmable` does not matter: TCP has no message layer.
    pub async fn send_tcp(
        &self,
        dst: SocketAddr,
        request: Request,
        params: SendParams,
    ) -> Result<(SocketAddr, Response), Error> {
        self.send_via(Transport::Tcp, dst, request, params).await
    }

    async fn send_via(
        &self,
        transport: Transport,
        dst: SocketAddr,
        request: Request,
        params: SendParams,
    ) -> Result<(SocketAddr, Response), Error> {
        self.send_watched(transport, dst, request, params, None).await
    }

    /// [`Client::send_via`], calling `progress` every `every` while the request runs with how far its
    /// block-wise transfer has come (`None` before the first block, or when it is not block-wise).
    async fn send_watched(
        &self,
        transport: Transport,
        dst: SocketAddr,
        request: Request,
        params: SendParams,
        mut progress: Option<(Duration, &mut ProgressFn<'_>)>,
    ) -> Result<(SocketAddr, Response), Error> {
        let (tx, mut rx) = oneshot::channel();
        let guard = self.start(transport, dst, request, params, Reply::Unicast(tx))?;
        let result = match progress.as_mut() {
            None => rx.await,
            Some((every, report)) => {
                let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + *every, *every);
                loop {
                    tokio::select! {
                        r = &mut rx => break r,
                        _ = tick.tick() => {
                            let (reply, answer) = oneshot::channel();
                            if self.inner.tx.send(Command::Progress { ticket: guard.ticket, reply }).is_ok() {
                                report(answer.await.ok().flatten());
                            }
                        }
                    }
                }
            }
        }
        .map_err(|_| Error::Closed)?;
        guard.disarm();
        result.map_err(|f| self.failure(f, dst))
    }

    /// A failure to `dst`, said as the DTLS or TLS handshake's when one with `dst` failed.
    fn failure(&self, f: RequestFailure, dst: SocketAddr) -> Error {
        let e = said_by_tls(failure_for(f, dst), self.inner.tls.as_deref(), dst);
        match self.inner.dtls.as_ref().and_then(|d| d.get(dst, matches!(e, Error::Timeout))) {
            Some(reason) => Error::Dtls { addr: dst, reason },
            None => e,
        }
    }

    /// The transport of `uri` on this client: `coaps://` only on one made with [`ClientBuilder::dtls`],
    /// `coaps+tcp://` only on one made with [`ClientBuilder::tls`].
    fn transport(&self, uri: &Uri) -> Result<Transport, Error> {
        let scheme = uri.scheme;
        match (scheme, &self.inner.dtls) {
            (Scheme::CoapsTcp, _) if self.inner.tls.is_none() => Err(Error::InvalidUri(UriError(
                "coaps+tcp:// needs TLS settings: the CA that signed the server's certificate (-C CA)".into(),
            ))),
            (Scheme::CoapsTcp, _) => {
                crate::net::tls::server_name(&uri.host).map(Transport::Tls).map_err(|e| Error::InvalidUri(UriError(e)))
            }
            (Scheme::Coaps, Some(_)) => Ok(Transport::Udp),
            (Scheme::Coap, Some(_)) => Err(Error::InvalidUri(UriError(
                "this client speaks coaps:// (DTLS credentials were given); use a coaps:// URI".into(),
            ))),
            (Scheme::Coaps, None) => {
                Err(Error::InvalidUri(UriError("coaps:// needs DTLS credentials (PSK: -k KEY -u IDENTITY)".into())))
            }
            _ => transport_for(scheme),
        }
    }

    /// Registers an observation of a ready-made request (a GET or FETCH; Observe=0 is added) and streams the
    /// notifications. `params.timeout` bounds the wait for the first response only.
    pub fn observe(&self, dst: SocketAddr, request: Request, params: SendParams) -> Result<Observation, Error> {
        self.observe_via(Transport::Udp, dst, request, params)
    }

    /// Like [`Client::observe`], over CoAP over TCP.
    pub fn observe_tcp(&self, dst: SocketAddr, request: Request, params: SendParams) -> Result<Observation, Error> {
        self.observe_via(Transport::Tcp, dst, request, params)
    }

    fn observe_via(
        &self,
        transport: Transport,
        dst: SocketAddr,
        mut request: Request,
        mut params: SendParams,
    ) -> Result<Observation, Error> {
        request.options.set_uint(OptionNumber::OBSERVE, u64::from(corral_proto::wire::OBSERVE_REGISTER));
        // The endpoint's deadline would cover the whole observation: the first response is timed here.
        let first_timeout = params.timeout.take().map(Duration::from).or(self.inner.timeout);
        let (tx, rx) = mpsc::channel(OBSERVE_QUEUE);
        let guard = self.start(transport, dst, request, params, Reply::Observe(tx))?;
        Ok(Observation {
            rx,
            ticket: Some(guard.ticket),
            tx: guard.disarm_keep(),
            dst,
            first_timeout,
            established: false,
            registered: false,
            oscore: None,
            peeked: None,
            tls: self.inner.tls.clone(),
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
        let guard = self.start(Transport::Udp, dst, request, params, Reply::Multicast(tx))?;
        Ok(MulticastResponses::new(rx, guard))
    }

    /// Counters and table sizes of this client's endpoint; `None` if the driver has stopped.
    pub async fn stats(&self) -> Option<DriverStats> {
        let (reply, rx) = oneshot::channel();
        self.inner.tx.send(Command::Stats { reply }).ok()?;
        rx.await.ok()
    }

    fn start(
        &self,
        transport: Transport,
        dst: SocketAddr,
        request: Request,
        params: SendParams,
        reply: Reply,
    ) -> Result<CancelGuard, Error> {
        if transport == Transport::Udp && !can_reach(self.inner.local, self.inner.dual_stack, &dst) {
            return Err(Error::Unreachable(dst));
        }
        let ticket = self.inner.next_ticket.fetch_add(1, Ordering::Relaxed);
        self.inner
            .tx
            .send(Command::Request { ticket, dst, transport, request, params, reply })
            .map_err(|_| Error::Closed)?;
        Ok(CancelGuard { tx: self.inner.tx.clone(), ticket, armed: true })
    }

    /// Where a URI's request goes: its IP literal, or the first resolved address this client can reach
    /// (over UDP, one of its socket's family; over TCP, any).
    pub async fn resolve(&self, uri: &Uri) -> Result<SocketAddr, Error> {
        self.resolve_scoped(uri, 0).await
    }

    /// Like [`Client::resolve`], with the interface index of an IPv6 zone (see [`crate::uri::parse_scoped`]).
    pub async fn resolve_scoped(&self, uri: &Uri, scope_id: u32) -> Result<SocketAddr, Error> {
        if let Some(addr) = crate::net::uri::literal_addr(uri, scope_id) {
            return Ok(addr);
        }
        match &uri.host {
            Host::Ip(ip) => Ok(SocketAddr::new(*ip, uri.port)),
            Host::Name(name) => {
                let addrs = tokio::net::lookup_host((name.as_str(), uri.port))
                    .await
                    .map_err(|e| Error::Resolve { host: name.clone(), reason: e.to_string() })?;
                let (local, dual) = (self.inner.local, self.inner.dual_stack);
                let tcp = uri.scheme.is_reliable();
                addrs.into_iter().find(|a| tcp || can_reach(local, dual, a)).ok_or_else(|| Error::Resolve {
                    host: name.clone(),
                    reason: "no address of a family this socket can reach".into(),
                })
            }
        }
    }
}

/// Puts the destination into failures that name it.
fn failure_for(f: RequestFailure, dst: SocketAddr) -> Error {
    match f {
        RequestFailure::Unreachable => Error::Unreachable(dst),
        RequestFailure::Connect(reason) => Error::Connect { addr: dst, reason },
        RequestFailure::Failed(RequestError::Unreachable) => Error::Refused(dst),
        RequestFailure::NoRoute => Error::NoRoute(dst),
        f => f.into(),
    }
}

/// A connection to `dst` that could not be made or closed at once, said as the TLS handshake's failure
/// when one with `dst` failed.
fn said_by_tls(e: Error, tls: Option<&crate::net::tls::TlsFailures>, dst: SocketAddr) -> Error {
    match (&e, tls.and_then(|t| t.get(dst))) {
        (Error::Connect { .. } | Error::ConnectionClosed, Some(reason)) => Error::Tls { addr: dst, reason },
        _ => e,
    }
}

/// The transport of a scheme corral speaks.
fn transport_for(scheme: Scheme) -> Result<Transport, Error> {
    match scheme {
        Scheme::Coap => Ok(Transport::Udp),
        Scheme::CoapTcp => Ok(Transport::Tcp),
        Scheme::Coaps | Scheme::CoapsTcp => Err(Error::InvalidUri(UriError(format!(
            "{scheme}:// needs credentials: a client made with ClientBuilder::dtls (coaps) or ::tls (coaps+tcp)"
        )))),
    }
}

/// Cancels a request in the driver when its future or stream is dropped before the end.
/// A caller's progress callback (see [`RequestBuilder::send_with_progress`]).
type ProgressFn<'a> = dyn FnMut(Option<TransferProgress>) + Send + 'a;

struct CancelGuard {
    tx: mpsc::UnboundedSender<Command>,
    ticket: u64,
    armed: bool,
}

impl CancelGuard {
    fn disarm(mut self) {
        self.armed = false;
    }

    /// Disarms the guard, keeping its command sender (the driver stays alive while it exists).
    fn disarm_keep(mut self) -> mpsc::UnboundedSender<Command> {
        self.armed = false;
        self.tx.clone()
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
    uri: Result<(Uri, u32), UriError>,
    dst: Option<SocketAddr>,
    /// A forward proxy to send the request through (RFC 7252 §5.7).
    proxy: Option<Result<(Uri, u32), UriError>>,
    /// An OSCORE security context to protect the request with (RFC 8613).
    oscore: Option<SharedContext>,
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

    /// Block size for block-wise transfer (RFC 7959): uploads use it for Block1, and the first request asks
    /// the server for it in Block2 (early negotiation). `bytes` is rounded down to a power of two in
    /// 16..=1024. Without it, the endpoint's block size (1024) is used for bodies that need it.
    pub fn block_size(mut self, bytes: usize) -> Self {
        self.params.block_szx = Some(BlockValue::szx_for_size(bytes.clamp(16, 1024)).min(6));
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

    /// Sends the request through the forward proxy at `proxy` (`coap://HOST:PORT` or `coap+tcp://…`, as
    /// libcoap's `-P`): to the proxy, over the proxy's scheme, with the whole URI in a Proxy-Uri option
    /// instead of the Uri-* options (RFC 7252 §5.7.2).
    pub fn via_proxy(mut self, proxy: &str) -> Self {
        self.proxy = Some(parse_scoped(proxy));
        self
    }

    /// Protects the request end to end with OSCORE (RFC 8613): its method, path, query, payload and every
    /// option a proxy need not read are encrypted with `context`, and the response must verify. A server
    /// that lost its replay window after a restart answers with an Echo challenge (RFC 9175), which is
    /// met by repeating the request once, transparently.
    pub fn oscore(mut self, context: SharedContext) -> Self {
        self.oscore = Some(context);
        self
    }

    /// The request as it will be sent, without the URI's options (for inspection).
    pub fn request(&self) -> &Request {
        &self.request
    }

    /// The request to send, protected with OSCORE if it is to be; with `inner_blocks`, a body larger than
    /// [`corral_oscore::INNER_BLOCK`] goes in inner Block1 blocks (see [`send_protected`]).
    async fn prepare(self, inner_blocks: bool) -> Result<Prepared, Error> {
        let (uri, scope_id) = self.uri?;
        if let Some(proxy) = self.proxy {
            let (proxy, proxy_scope) = proxy?;
            let transport = self.client.transport(&proxy)?;
            let dst = match self.dst {
                Some(d) => d,
                None => self.client.resolve_scoped(&proxy, proxy_scope).await?,
            };
            let mut request = self.request;
            request.options.push_str(OptionNumber::PROXY_URI, &uri.to_string());
            return Prepared::new(self.client, transport, dst, request, self.params, self.oscore, inner_blocks);
        }
        let transport = self.client.transport(&uri)?;
        let dst = match self.dst {
            Some(d) => d,
            None => self.client.resolve_scoped(&uri, scope_id).await?,
        };
        let mut request = self.request;
        // The URI's Uri-* options come first: the order of repeated options is meaningful.
        let mut options = corral_proto::wire::Options::new();
        uri.to_options(&mut options);
        for (n, v) in request.options.iter() {
            options.push(n, v);
        }
        request.options = options;
        Prepared::new(self.client, transport, dst, request, self.params, self.oscore, inner_blocks)
    }

    /// Sends the request; returns the response (whatever its code).
    pub async fn send(self) -> Result<Response, Error> {
        self.send_from().await.map(|(_, r)| r)
    }

    /// Sends the request; returns the responder's address and the response.
    pub async fn send_from(self) -> Result<(SocketAddr, Response), Error> {
        let p = self.prepare(true).await?;
        send_protected(p).await
    }

    /// Sends the request like [`RequestBuilder::send_from`], calling `progress` every `every` while it runs
    /// with how far its block-wise transfer has come: bytes the server accepted or sent, and the total when
    /// known (`None` before the first block or when the exchange is not block-wise). For a command line's
    /// progress display; the response is the same as without it.
    pub async fn send_with_progress(
        self,
        every: Duration,
        mut progress: impl FnMut(Option<TransferProgress>) + Send,
    ) -> Result<(SocketAddr, Response), Error> {
        let p = self.prepare(true).await?;
        if p.oscore.is_some() {
            return send_protected(p).await;
        }
        p.client.send_watched(p.transport, p.dst, p.request, p.params, Some((every, &mut progress))).await
    }

    /// Sends the request to a multicast group (as NON) and streams the responses. With OSCORE the context
    /// must be a Group OSCORE member's in group mode ([`crate::oscore::ClientContext::Group`]): the
    /// request is signed, and every response is verified on its own — one that fails verification (a
    /// member that lies, or a node outside the group) is an `Err` item of the stream, and the others still
    /// arrive.
    pub async fn multicast(self) -> Result<MulticastResponses, Error> {
        if let Some(ctx) = &self.oscore {
            let ok = ctx.lock().map(|c| c.protects_multicast()).unwrap_or(false);
            if !ok {
                return Err(Error::Oscore(OscoreError::NotForMulticast));
            }
        }
        let mut p = self.prepare(false).await?;
        if p.transport != Transport::Udp {
            return Err(Error::InvalidUri(UriError("multicast needs coap:// (UDP)".into())));
        }
        p.params.confirmable = false;
        p.params.timeout = None;
        let mut responses = p.client.send_multicast(p.dst, p.request, p.params)?;
        responses.verify_with(p.oscore.map(|(ctx, binding, _)| (ctx, binding)));
        Ok(responses)
    }

    /// Observes the resource (RFC 7641): sends the request (a GET or FETCH) with Observe=0 and streams the
    /// registration's response and every notification after it, until the server ends the observation,
    /// [`Observation::cancel`] deregisters it, or the [`Observation`] is dropped (which deregisters too).
    /// The request's timeout bounds the wait for the first response only.
    pub async fn observe(mut self) -> Result<Observation, Error> {
        // Set before OSCORE protects the request: Observe is both inner and outer (RFC 8613 §4.1.3.5).
        self.request.options.set_uint(OptionNumber::OBSERVE, u64::from(corral_proto::wire::OBSERVE_REGISTER));
        let mut p = self.prepare(false).await?;
        let mut echoed = false;
        loop {
            let mut obs = p.client.observe_via(p.transport.clone(), p.dst, p.request.clone(), p.params)?;
            obs.oscore = p.oscore.as_ref().map(|(ctx, binding, plain)| ObservedOscore {
                ctx: ctx.clone(),
                binding: binding.clone(),
                highest: None,
                registration: plain.clone(),
                deregistration: None,
            });
            if p.oscore.is_none() || echoed {
                return Ok(obs);
            }
            // A server that lost its replay window in a restart answers the registration with an Echo
            // challenge and does not register it (RFC 8613 Appendix B.1.2): register again, once, with it.
            let first = obs.next_from().await;
            let echo = match &first {
                Some(Ok((_, r))) if r.code == Code::UNAUTHORIZED => {
                    r.options.get(OptionNumber::ECHO).map(<[u8]>::to_vec)
                }
                _ => None,
            };
            let Some(echo) = echo else {
                obs.peeked = Some(first);
                return Ok(obs);
            };
            echoed = true;
            drop(obs);
            p = p.again_with(OptionNumber::ECHO, &echo)?;
        }
    }
}

/// Sends a prepared request; with OSCORE, meets an Echo challenge once, sends the remaining inner Block1
/// blocks of an upload and fetches the remaining blocks of a response the server cut into inner Block2
/// blocks (RFC 8613 §4.1.3.4.1, as aiocoap does). (Without progress reports: they would show the
/// protected transfer.)
async fn send_protected(mut p: Prepared) -> Result<(SocketAddr, Response), Error> {
    let mut echoed = false;
    let mut body: Option<(Response, Vec<u8>)> = None;
    let mut sent_block = 0u32;
    loop {
        let (from, response) = p.client.send_via(p.transport.clone(), p.dst, p.request.clone(), p.params).await?;
        let r = match p.verify(response)? {
            Verified::Response(r) => r,
            Verified::Echo(echo) if !echoed => {
                echoed = true;
                p = p.again_with(OptionNumber::ECHO, &echo)?;
                continue;
            }
            Verified::Echo(_) => return Err(Error::Oscore(OscoreError::EchoAgain)),
        };
        if p.upload.is_some() {
            if r.code == Code::CONTINUE {
                sent_block += 1;
                p = p.block1(sent_block)?;
                continue;
            }
            p.upload = None;
        }
        let block = r.options.block2().filter(|_| p.oscore.is_some() && r.code.is_success());
        let Some(block) = block else {
            return Ok((
                from,
                match body {
                    Some((_, so_far)) => Response { payload: so_far, ..r },
                    None => r,
                },
            ));
        };
        let (first, mut so_far) = body.take().unwrap_or_else(|| (r.clone(), Vec::new()));
        so_far.extend_from_slice(&r.payload);
        if !block.more {
            let mut whole = Response { payload: so_far, ..first };
            whole.options.remove(OptionNumber::BLOCK2);
            return Ok((from, whole));
        }
        if so_far.len() > 16 << 20 {
            return Err(Error::Transfer("an inner block-wise response larger than 16 MiB"));
        }
        let next = corral_proto::wire::BlockValue::new(block.num + 1, false, block.szx)
            .ok_or(Error::Transfer("too many inner blocks"))?;
        let (b, l) = next.encode();
        body = Some((first, so_far));
        p = p.again_with(OptionNumber::BLOCK2, &b[..l])?;
    }
}

struct Prepared {
    client: Client,
    transport: Transport,
    dst: SocketAddr,
    request: Request,
    params: SendParams,
    /// The context, the binding of the protected request, and the request before protection (an inner
    /// block of `upload` when there is one).
    oscore: Option<(SharedContext, crate::secure::oscore::Binding, Request)>,
    /// OSCORE: the whole body of an upload in inner Block1 blocks, each protected on its own (RFC 8613
    /// §4.1.3.4.1): one protected message holds at most 64 KiB (AES-CCM's 16-bit length), and aiocoap,
    /// for one, does not reassemble outer blocks of an OSCORE request.
    upload: Option<Vec<u8>>,
}

enum Verified {
    Response(Response),
    /// The server wants freshness proven: repeat with this Echo value.
    Echo(Vec<u8>),
}

impl Prepared {
    /// With `inner_blocks`, a body larger than [`corral_oscore::INNER_BLOCK`] is cut before it is protected:
    /// the request is its first inner block.
    fn new(
        client: Client,
        transport: Transport,
        dst: SocketAddr,
        mut request: Request,
        params: SendParams,
        oscore: Option<SharedContext>,
        inner_blocks: bool,
    ) -> Result<Prepared, Error> {
        let Some(ctx) = oscore else {
            return Ok(Prepared { client, transport, dst, request, params, oscore: None, upload: None });
        };
        let upload = (inner_blocks && request.payload.len() > corral_oscore::INNER_BLOCK)
            .then(|| std::mem::take(&mut request.payload));
        if let Some(whole) = &upload {
            request = inner_block1(request, whole, 0)?;
        }
        let (outer, binding) = protect(&ctx, &request)?;
        Ok(Prepared { client, transport, dst, request: outer, params, oscore: Some((ctx, binding, request)), upload })
    }

    fn verify(&self, response: Response) -> Result<Verified, Error> {
        let Some((ctx, binding, _)) = &self.oscore else { return Ok(Verified::Response(response)) };
        let (inner, _) = verify(ctx, binding, response)?;
        if inner.code == Code::UNAUTHORIZED {
            if let Some(echo) = inner.options.get(OptionNumber::ECHO) {
                return Ok(Verified::Echo(echo.to_vec()));
            }
        }
        Ok(Verified::Response(inner))
    }

    /// Inner block `num` of the upload, newly protected.
    fn block1(self, num: u32) -> Result<Prepared, Error> {
        let (Some(whole), Some((_, _, plain))) = (&self.upload, &self.oscore) else { return Ok(self) };
        let block = inner_block1(plain.clone(), whole, num)?;
        self.protected(block)
    }

    /// The same request again, newly protected, with `option` set (an Echo answer, the next inner block).
    fn again_with(self, option: OptionNumber, value: &[u8]) -> Result<Prepared, Error> {
        let Some((_, _, plain)) = &self.oscore else { return Ok(self) };
        let mut plain = plain.clone();
        plain.options.set(option, value);
        self.protected(plain)
    }

    /// `plain` protected as the request to send (a new Partial IV, a new binding).
    fn protected(mut self, plain: Request) -> Result<Prepared, Error> {
        let Some((ctx, ..)) = self.oscore.take() else { return Ok(self) };
        let (outer, binding) = protect(&ctx, &plain)?;
        self.request = outer;
        self.oscore = Some((ctx, binding, plain));
        Ok(self)
    }
}

/// `plain` carrying inner block `num` of `whole` (Block1 and Size1, RFC 7959 §2.2, §4).
fn inner_block1(mut plain: Request, whole: &[u8], num: u32) -> Result<Request, Error> {
    let size = corral_oscore::INNER_BLOCK;
    let start = num as usize * size;
    let end = (start + size).min(whole.len());
    let chunk = whole.get(start..end).ok_or(Error::Transfer("the server asked for more blocks than the body has"))?;
    let szx = corral_proto::wire::BlockValue::szx_for_size(size);
    let value = corral_proto::wire::BlockValue::new(num, end < whole.len(), szx)
        .ok_or(Error::Transfer("too many inner blocks"))?;
    let (b, l) = value.encode();
    plain.options.set(OptionNumber::BLOCK1, &b[..l]);
    plain.options.set_uint(OptionNumber::SIZE1, whole.len() as u64);
    plain.payload = chunk.to_vec();
    Ok(plain)
}

/// An observation (RFC 7641): the registration's response, then each notification as it arrives.
///
/// Notifications older than the last one are dropped by the endpoint (the freshness rule of RFC 7641
/// §3.4); a block-wise notification arrives assembled. A reader that falls far behind misses intermediate
/// notifications, never the end. Dropping the observation deregisters it in the background.
pub struct Observation {
    rx: mpsc::Receiver<Outcome>,
    /// Set while the driver may still be observing; dropping sends the deregistration.
    ticket: Option<u64>,
    tx: mpsc::UnboundedSender<Command>,
    dst: SocketAddr,
    first_timeout: Option<Duration>,
    established: bool,
    registered: bool,
    oscore: Option<ObservedOscore>,
    /// The first response, already read (and verified) while meeting an Echo challenge.
    peeked: Option<Option<Result<(SocketAddr, Response), Error>>>,
    /// coaps+tcp://: the client's TLS handshake failures, to say why the connection failed.
    tls: Option<Arc<crate::net::tls::TlsFailures>>,
}

impl Observation {
    /// The next notification (the first is the registration's response); `None` once the observation has
    /// ended: a final response, an error, or after deregistration.
    pub async fn next(&mut self) -> Option<Result<Response, Error>> {
        self.next_from().await.map(|r| r.map(|(_, r)| r))
    }

    /// Like [`Observation::next`], with the address the notification came from.
    pub async fn next_from(&mut self) -> Option<Result<(SocketAddr, Response), Error>> {
        if let Some(first) = self.peeked.take() {
            return first;
        }
        let item = match (self.established, self.first_timeout) {
            (false, Some(limit)) => match tokio::time::timeout(limit, self.rx.recv()).await {
                Ok(item) => item,
                Err(_) => {
                    self.stop();
                    return Some(Err(Error::Timeout));
                }
            },
            _ => self.rx.recv().await,
        };
        match item {
            None => {
                self.ticket = None; // ended in the driver: nothing to deregister
                None
            }
            Some(Ok((from, response))) => {
                let response = match &mut self.oscore {
                    None => response,
                    Some(o) => match verify(&o.ctx, &o.binding, response) {
                        Ok((inner, number)) => {
                            // RFC 8613 §7.4.1: a notification is new only with a higher Partial IV.
                            if let (Some(n), Some(h)) = (number, o.highest) {
                                if n <= h {
                                    return Box::pin(self.next_from()).await;
                                }
                            }
                            if number.is_some() {
                                o.highest = number;
                            }
                            inner
                        }
                        Err(e) => return Some(Err(e)),
                    },
                };
                if !self.established {
                    self.established = true;
                    self.registered = response.code.is_success() && response.options.observe().is_some();
                }
                Some(Ok((from, response)))
            }
            Some(Err(f)) => Some(Err(said_by_tls(failure_for(f, self.dst), self.tls.as_deref(), self.dst))),
        }
    }

    /// Whether the server accepted the registration: its first response was a success carrying Observe.
    /// `false` before the first response and for a resource that is not observable.
    pub fn is_registered(&self) -> bool {
        self.registered
    }

    /// Ends the observation with a GET carrying Observe=1 (RFC 7641 §3.6; over TCP the only way, RFC 8323
    /// §7.2) and waits for the server's answer, which is returned (`None` if the observation had not been
    /// established or had already ended). With OSCORE the GET is a new protected request (the
    /// registration's Partial IV is spent: a server would refuse it as a replay), and its answer is
    /// verified.
    pub async fn cancel(mut self) -> Result<Option<Response>, Error> {
        self.stop();
        let limit = self.first_timeout.unwrap_or(Duration::from_secs(10));
        let dst = self.dst;
        let mut last = None;
        let drain = async {
            while let Some(item) = self.rx.recv().await {
                last = Some(item.map_err(|f| failure_for(f, dst))?.1);
            }
            Ok::<(), Error>(())
        };
        match tokio::time::timeout(limit, drain).await {
            Ok(Ok(())) => match (&self.oscore, last) {
                (Some(o), Some(last)) => o.verify_last(last).map(Some),
                (_, last) => Ok(last),
            },
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::Timeout),
        }
    }

    fn stop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            let deregistration = self.oscore.as_mut().and_then(ObservedOscore::deregistration);
            let _ = self.tx.send(Command::StopObserving { ticket, deregistration });
        }
    }
}

/// What an observation protected with OSCORE keeps.
struct ObservedOscore {
    ctx: SharedContext,
    /// The registration's binding: its notifications verify with it.
    binding: crate::secure::oscore::Binding,
    /// The highest notification number seen.
    highest: Option<u64>,
    /// The registration before protection, to deregister with.
    registration: Request,
    /// The deregistration's binding, once it is made: the observation's last response verifies with it.
    deregistration: Option<crate::secure::oscore::Binding>,
}

impl ObservedOscore {
    /// The deregistration (RFC 7641 §3.6): the registration with Observe=1, protected anew — a new Partial
    /// IV (RFC 8613 §4.1.3.5, §7.4: the registration's is spent, and a server refuses it again as a
    /// replay). `None` if it cannot be protected; the observation then ends as a plain one does.
    fn deregistration(&mut self) -> Option<Request> {
        let mut plain = self.registration.clone();
        plain.options.set_uint(OptionNumber::OBSERVE, u64::from(corral_proto::wire::OBSERVE_DEREGISTER));
        plain.options.remove(OptionNumber::BLOCK2);
        match protect(&self.ctx, &plain) {
            Ok((outer, binding)) => {
                self.deregistration = Some(binding);
                Some(outer)
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot protect the deregistration of an observation");
                None
            }
        }
    }

    /// The observation's last response, verified: the answer to the deregistration, or a notification
    /// that came before it.
    fn verify_last(&self, last: Response) -> Result<Response, Error> {
        let dereg = self.deregistration.as_ref().map(|b| verify(&self.ctx, b, last.clone()));
        match dereg {
            Some(Ok((inner, _))) => Ok(inner),
            _ => verify(&self.ctx, &self.binding, last).map(|(inner, _)| inner),
        }
    }
}

impl Drop for Observation {
    fn drop(&mut self) {
        self.stop();
    }
}

impl fmt::Debug for Observation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observation").field("dst", &self.dst).field("registered", &self.registered).finish()
    }
}

impl IntoFuture for RequestBuilder {
    type Output = Result<Response, Error>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Response, Error>> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.send())
    }
}
