//! The CoAP server: a [`Node`] (endpoint + services) on a UDP socket and, when asked
//! ([`ServerBuilder::tcp`]), a TCP listener for CoAP over TCP (RFC 8323) and ([`Server::listen_tls`]) one
//! for CoAP over TLS (`coaps+tcp://`): the same services answer all of them, Observe and block-wise
//! transfer included.
//!
//! Resources are sans-IO [`Service`]s mounted at path prefixes, or async functions registered with
//! [`Server::route`]; the node routes by longest prefix, answers 4.04 for unknown paths and serves
//! `/.well-known/core` (RFC 6690, with query filtering) from every service's links.
//!
//! ```no_run
//! # async fn f() -> std::io::Result<()> {
//! use corral_tokio::{ContentFormat, Response, Server};
//! let mut server = Server::bind("[::]:5683").await?;
//! server.route("/hello", |_req| async move { Response::content(ContentFormat::TEXT_PLAIN, "hello") }).rt("greeting");
//! let handle = server.spawn()?;
//! # let stop = async {};
//! stop.await; // e.g. tokio::signal::ctrl_c()
//! handle.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! The node and its services are not `Send` (the `Service` contract does not ask it), so the driver runs
//! on a dedicated thread with its own single-threaded tokio runtime; services are moved there when the
//! server starts. Async handlers run on the runtime that created the server (or that thread's, if none)
//! and hand their responses back through a channel; a handler slower than the piggyback window gets an
//! empty ACK and a separate response (RFC 7252 §5.2.2) from the endpoint.

use crate::driver::{os_seeded, Clock, Command, Driver, DriverStats, TcpSide};
use crate::net::socket::{PreparedSocket, SocketOptions};
use corral_dtls::SecureConfig;
use corral_proto::wire::{Code, ContentFormat, Options};
use corral_proto::{
    Context, Endpoint, EndpointConfig, IncomingRequest, Node, Request, ResourceLink, Response, Service, TcpConfig,
};
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;
use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

type Mounter = Box<dyn FnOnce(&mut Node) + Send>;

/// Configures a [`Server`] before binding it.
#[derive(Debug, Clone, Default)]
pub struct ServerBuilder {
    config: Option<EndpointConfig>,
    tcp_config: Option<TcpConfig>,
    socket: SocketOptions,
    tcp: Option<TcpBind>,
    dtls: Option<corral_dtls::DtlsConfig>,
}

/// Where the TCP listener goes.
#[derive(Debug, Clone, Copy)]
enum TcpBind {
    /// The UDP socket's address and port (its actual port when it was bound to port 0).
    SameAsUdp,
    At(SocketAddr),
}

impl ServerBuilder {
    /// The endpoint configuration (limits, piggyback window, leisure…); its seed is replaced by one from
    /// the OS.
    pub fn endpoint_config(mut self, config: EndpointConfig) -> Self {
        self.config = Some(config);
        self
    }

    pub fn socket_options(mut self, opts: SocketOptions) -> Self {
        self.socket = opts;
        self
    }

    /// Also serves CoAP over TCP (RFC 8323) on `addr`; `None` listens on the UDP socket's address and port
    /// (RFC 8323 §8.1: coap+tcp uses the same default port, 5683).
    pub fn tcp(mut self, addr: Option<SocketAddr>) -> Self {
        self.tcp = Some(addr.map_or(TcpBind::SameAsUdp, TcpBind::At));
        self
    }

    /// The CoAP-over-TCP configuration (Max-Message-Size announced in the CSM, connection limit). Default:
    /// [`TcpConfig::default`] with the endpoint's block and Observe settings. Its seed is replaced.
    pub fn tcp_config(mut self, config: TcpConfig) -> Self {
        self.tcp_config = Some(config);
        self
    }

    /// Serves `coaps://` on this socket: every datagram goes through a DTLS session (a server
    /// [`crate::DtlsRole`] with the PSK identities it accepts); plain CoAP is not answered.
    pub fn dtls(mut self, config: corral_dtls::DtlsConfig) -> Self {
        self.dtls = Some(config);
        self
    }

    /// The interface (by address) on which IPv4 multicast groups are joined, e.g. `127.0.0.1`.
    pub fn multicast_interface_v4(mut self, ifaddr: Ipv4Addr) -> Self {
        self.socket.multicast_if_v4 = Some(ifaddr);
        self
    }

    /// The interface index on which IPv6 multicast groups are joined.
    pub fn multicast_interface_v6(mut self, index: u32) -> Self {
        self.socket.multicast_if_v6 = index;
        self
    }

    /// Binds the socket. The server does not answer until [`Server::spawn`].
    pub async fn bind(self, addr: impl tokio::net::ToSocketAddrs) -> io::Result<Server> {
        let addr = tokio::net::lookup_host(addr)
            .await?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "bind address resolved to nothing"))?;
        self.bind_addr(addr)
    }

    /// Like [`ServerBuilder::bind`], for a resolved address and without a runtime. Binds the TCP listener
    /// too, if one was asked for.
    pub fn bind_addr(mut self, addr: SocketAddr) -> io::Result<Server> {
        self.socket = self.socket.for_server();
        let socket = PreparedSocket::bind(addr, self.socket.clone())?;
        let tcp = match self.tcp {
            None => None,
            Some(TcpBind::SameAsUdp) => Some(crate::net::tcp::bind_listener(socket.local_addr())?),
            Some(TcpBind::At(a)) => Some(crate::net::tcp::bind_listener(a)?),
        };
        let config = self.config.clone().unwrap_or_default();
        let mut server = Server::new(socket, tcp, self.tcp_config, config);
        server.secure = self.dtls.map(|c| SecureConfig { server: Some(c), ..SecureConfig::default() });
        Ok(server)
    }

    /// Binds `count` servers (2 to 64) to one address as shards of one port: an SO_REUSEPORT group whose
    /// datagrams the kernel steers by their CoAP header ([`crate::steer`]), so that server `i`, whose
    /// endpoint uses shard `i` of the message IDs and tokens ([`corral_proto::Shard`]), gets the answers to
    /// its own requests. `manager`: the server that gets every request but GET. CoAP over UDP only.
    #[cfg(target_os = "linux")]
    pub fn bind_shards(self, addr: SocketAddr, count: u8, manager: Option<u8>) -> io::Result<Vec<Server>> {
        if self.tcp.is_some() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "sharded servers serve CoAP over UDP only"));
        }
        let opts = self.socket.for_server();
        let steering = crate::driver::steer::Steering { count, manager };
        let sockets = crate::driver::steer::bind_group(addr, &opts, steering)?;
        let config = self.config.unwrap_or_default();
        let mut servers = Vec::with_capacity(sockets.len());
        for (i, std) in sockets.into_iter().enumerate() {
            let shard = corral_proto::Shard::new(i as u8, count).expect("bind_group checked the count");
            let socket = PreparedSocket::from_std(std, opts.clone())?;
            servers.push(Server::new(socket, None, None, EndpointConfig { shard, ..config.clone() }));
        }
        Ok(servers)
    }
}

/// A CoAP server being set up; [`Server::spawn`] starts it.
pub struct Server {
    socket: PreparedSocket,
    tcp: Option<std::net::TcpListener>,
    tcp_config: Option<TcpConfig>,
    config: EndpointConfig,
    mounts: Vec<Mounter>,
    routes: Vec<Route>,
    tx: mpsc::UnboundedSender<Command>,
    rx: mpsc::UnboundedReceiver<Command>,
    well_known_core: bool,
    /// coaps:// ([`ServerBuilder::dtls`], [`Server::set_dtls_mux`], [`Server::listen_dtls`]).
    secure: Option<SecureConfig>,
    /// The socket of [`Server::listen_dtls`].
    secure_socket: Option<PreparedSocket>,
    /// Where the coaps:// layers publish their counters.
    dtls_watch: Option<crate::DtlsWatch>,
    /// coaps+tcp:// (see [`Server::listen_tls`]).
    tls: Option<(std::net::TcpListener, crate::net::tls::TlsServerConfig)>,
}

impl Server {
    fn new(
        socket: PreparedSocket,
        tcp: Option<std::net::TcpListener>,
        tcp_config: Option<TcpConfig>,
        config: EndpointConfig,
    ) -> Server {
        let (tx, rx) = mpsc::unbounded_channel();
        Server {
            socket,
            tcp,
            tcp_config,
            config,
            mounts: Vec::new(),
            routes: Vec::new(),
            tx,
            rx,
            well_known_core: true,
            secure: None,
            secure_socket: None,
            dtls_watch: None,
            tls: None,
        }
    }

    /// Binds a server socket with default settings; `"[::]:5683"` serves IPv4 and IPv6.
    pub async fn bind(addr: impl tokio::net::ToSocketAddrs) -> io::Result<Server> {
        ServerBuilder::default().bind(addr).await
    }

    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.socket.local_addr()
    }

    /// The address of the CoAP-over-TCP listener, if there is one.
    pub fn tcp_local_addr(&self) -> Option<SocketAddr> {
        self.tcp.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Also serves `coaps+tcp://` (CoAP over TLS, RFC 8323 §9) on `addr` with `config`: a TCP listener
    /// whose connections make a TLS handshake first, then speak CoAP over TCP to the same services, within
    /// the same connection limits and idle timeout ([`ServerBuilder::tcp_config`]) as `coap+tcp://`. Returns
    /// the listener's address.
    pub fn listen_tls(&mut self, addr: SocketAddr, config: crate::net::tls::TlsServerConfig) -> io::Result<SocketAddr> {
        let listener = crate::net::tcp::bind_listener(addr)?;
        let local = listener.local_addr()?;
        self.tls = Some((listener, config));
        Ok(local)
    }

    /// The address of the CoAP-over-TLS listener, if there is one.
    pub fn tls_local_addr(&self) -> Option<SocketAddr> {
        self.tls.as_ref().and_then(|(l, _)| l.local_addr().ok())
    }

    /// Mounts a sans-IO service at a path prefix (`""` catches every path nothing else claims).
    pub fn mount<S: Service + Send>(&mut self, prefix: &str, service: S) -> &mut Self {
        let prefix = prefix.to_string();
        self.mounts.push(Box::new(move |node: &mut Node| {
            node.mount(&prefix, service);
        }));
        self
    }

    /// Sets the node up as `setup` says (mounts, layers), on the server's thread when it starts: what
    /// [`crate::workers`] runs for each worker, whatever its driver.
    pub fn configure(&mut self, setup: impl FnOnce(&mut Node) + Send + 'static) -> &mut Self {
        self.mounts.push(Box::new(setup));
        self
    }

    /// Makes this socket speak coaps:// beside coap:// (the first byte of each datagram tells them apart):
    /// accepting DTLS clients, reaching the peers the configuration has credentials for over DTLS.
    pub fn set_dtls_mux(&mut self, config: crate::DtlsMuxConfig) -> &mut Self {
        self.secure =
            Some(SecureConfig { server: config.server, peers: config.peers, plain: true, ..Default::default() });
        if let Some(w) = config.watch {
            self.dtls_watch = Some(w);
        }
        self
    }

    /// Also serves `coaps://` on a UDP socket of its own at `addr`, with `config` (a server
    /// [`crate::DtlsRole`]): the same node, the same resources as `coap://` on the main socket — a PUT
    /// over one is read back over the other. Returns the socket's address.
    pub fn listen_dtls(&mut self, addr: SocketAddr, config: corral_dtls::DtlsConfig) -> io::Result<SocketAddr> {
        let socket = PreparedSocket::bind(addr, SocketOptions::default().for_server())?;
        let local = socket.local_addr();
        self.secure_socket = Some(socket);
        self.secure = Some(SecureConfig { server: Some(config), plain: true, secure_port: true, ..Default::default() });
        Ok(local)
    }

    /// The address of the `coaps://` socket of [`Server::listen_dtls`], if there is one.
    pub fn dtls_local_addr(&self) -> Option<SocketAddr> {
        self.secure_socket.as_ref().map(PreparedSocket::local_addr)
    }

    /// Publishes the counters of the coaps:// layers to `watch` every [`crate::DTLS_PUBLISH_PERIOD`]
    /// (or through [`crate::DtlsMuxConfig::watch`]).
    pub fn set_dtls_watch(&mut self, watch: crate::DtlsWatch) -> &mut Self {
        self.dtls_watch = Some(watch);
        self
    }

    /// Puts a layer between the message layer and the services (OSCORE: `corral_oscore::OscoreLayer`).
    pub fn set_layer<L: corral_proto::Layer + Send + 'static>(&mut self, layer: L) -> &mut Self {
        let mut layer = Some(layer);
        self.mounts.push(Box::new(move |node: &mut Node| {
            if let Some(l) = layer.take() {
                node.set_layer(Box::new(l));
            }
        }));
        self
    }

    /// Mounts a service at a path prefix and makes it the node's forward proxy: it also gets every request
    /// that carries Proxy-Uri or Proxy-Scheme (RFC 7252 §5.7), whatever its path.
    pub fn mount_forward_proxy<S: Service + Send>(&mut self, prefix: &str, service: S) -> &mut Self {
        let prefix = prefix.to_string();
        self.mounts.push(Box::new(move |node: &mut Node| {
            let h = node.mount(&prefix, service);
            node.set_forward_proxy(h);
        }));
        self
    }

    /// Registers an async handler for a path pattern: literal segments, `{name}` for one segment, and a
    /// final `{*name}` for the rest of the path (`/users/{id}`, `/files/{*path}`). Literal matches win over
    /// patterns. The returned [`RouteConfig`] sets methods and the link attributes listed in
    /// `/.well-known/core`.
    ///
    /// Async routes live in one service mounted at the root: sans-IO services mounted at a prefix take
    /// precedence for their paths.
    pub fn route<F, Fut>(&mut self, pattern: &str, handler: F) -> RouteConfig<'_>
    where
        F: Fn(ServerRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Response> + Send + 'static,
    {
        let segments = parse_pattern(pattern);
        let link_path = segments
            .iter()
            .map(|s| match s {
                Segment::Literal(l) => Some(l.as_str()),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .map(|segs| segs.join("/"));
        let handler: Arc<dyn Handler> = Arc::new(move |req| -> BoxFuture { Box::pin(handler(req)) });
        self.routes.push(Route { segments, methods: None, handler, link: link_path.map(|p| ResourceLink::new(&p)) });
        let route = self.routes.last_mut().expect("a route was just pushed");
        RouteConfig { route }
    }

    /// Whether the node answers `/.well-known/core` (default: yes).
    pub fn well_known_core(&mut self, enabled: bool) -> &mut Self {
        self.well_known_core = enabled;
        self
    }

    /// Joins a multicast group now (on the configured interface).
    pub fn join_group(&mut self, group: IpAddr) -> io::Result<&mut Self> {
        self.socket.join(group)?;
        Ok(self)
    }

    /// Starts the server on its own thread and returns a handle to it.
    pub fn spawn(self) -> io::Result<ServerHandle> {
        let local = self.socket.local_addr();
        let tcp_local = self.tcp_local_addr();
        let handlers = Handle::try_current().ok();
        let (done_tx, done_rx) = oneshot::channel();
        let Server {
            socket,
            tcp,
            tcp_config,
            config,
            mounts,
            routes,
            tx,
            rx,
            well_known_core,
            secure,
            secure_socket,
            dtls_watch,
            tls,
        } = self;
        let config = os_seeded(config);
        let tcp_config = (tcp.is_some() || tls.is_some()).then(|| {
            os_seeded(tcp_config.unwrap_or_else(|| TcpConfig {
                block: config.block,
                observe: config.observe,
                extra_known_options: config.extra_known_options.clone(),
                ..TcpConfig::default()
            }))
        });
        let router_tx = tx.clone();
        std::thread::Builder::new().name("corral-server".into()).spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!(error = %e, "cannot start the server's runtime");
                    return;
                }
            };
            let span = tracing::info_span!("coap_server", local = %local);
            rt.block_on(
                async move {
                    let socket = match socket.into_tokio() {
                        Ok(s) => s,
                        Err(e) => {
                            tracing::error!(error = %e, "cannot register the server socket");
                            return;
                        }
                    };
                    let mut node = Node::new(Endpoint::new(config));
                    if let Some(c) = tcp_config {
                        node.set_tcp_config(c);
                    }
                    node.set_well_known_core(well_known_core);
                    for mount in mounts {
                        mount(&mut node);
                    }
                    if !routes.is_empty() {
                        let spawner = handlers.unwrap_or_else(Handle::current);
                        node.mount("", Router { routes, tx: router_tx, spawner });
                    }
                    // The span names the UDP address; CoAP over TCP only when there is one (no Debug `None`).
                    match tcp_local {
                        Some(tcp) => tracing::info!(%tcp, "serving, CoAP over TCP too"),
                        None => tracing::info!("serving"),
                    }
                    let (clock, tcp) = (Clock::new(), TcpSide::new(tcp).with_tls_listener(tls));
                    let Some(config) = secure else {
                        return Driver::new(node, socket, clock, rx, tcp).run().await;
                    };
                    let secure_socket = match secure_socket.map(PreparedSocket::into_tokio).transpose() {
                        Ok(s) => s,
                        Err(e) => {
                            tracing::error!(error = %e, "cannot register the coaps:// socket");
                            return;
                        }
                    };
                    let config = crate::secure::reporting(config, &dtls_watch);
                    match crate::secure::SecureMachine::new(node, config, None, dtls_watch) {
                        Ok(m) => Driver::new(m, socket, clock, rx, tcp).with_secure_socket(secure_socket).run().await,
                        Err(e) => tracing::error!(error = %e, "cannot serve coaps://"),
                    }
                }
                .instrument(span),
            );
            let _ = done_tx.send(());
        })?;
        Ok(ServerHandle { tx, local, tcp_local, done: done_rx })
    }

    /// Runs the server until `signal` completes, then shuts it down gracefully.
    pub async fn run_until(self, signal: impl Future<Output = ()>) -> io::Result<()> {
        let handle = self.spawn()?;
        signal.await;
        handle.shutdown().await;
        Ok(())
    }
}

/// Controls a running server. Dropping it leaves the server running (detached).
pub struct ServerHandle {
    tx: mpsc::UnboundedSender<Command>,
    local: SocketAddr,
    tcp_local: Option<SocketAddr>,
    done: oneshot::Receiver<()>,
}

impl ServerHandle {
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The address of the CoAP-over-TCP listener, if the server has one.
    pub fn tcp_local_addr(&self) -> Option<SocketAddr> {
        self.tcp_local
    }

    /// Counters and table sizes of the server's endpoint; `None` if it has stopped.
    pub async fn stats(&self) -> Option<DriverStats> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(Command::Stats { reply }).ok()?;
        rx.await.ok()
    }

    /// Joins (or with `join == false`, leaves) a multicast group on the server's socket.
    pub async fn set_group(&self, group: IpAddr, join: bool) -> io::Result<()> {
        let (reply, rx) = oneshot::channel();
        let gone = || io::Error::other("server stopped");
        self.tx.send(Command::Join { group, join, reply }).map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }

    /// Stops reading requests, gives requests in progress up to one second to be answered, and waits for
    /// the server to stop.
    pub async fn shutdown(self) {
        self.shutdown_with_grace(Duration::from_secs(1)).await
    }

    pub async fn shutdown_with_grace(self, grace: Duration) {
        let _ = self.tx.send(Command::Shutdown { grace });
        let _ = self.done.await;
    }

    /// Waits until the server stops (after a shutdown, or if its socket fails).
    pub async fn stopped(&mut self) {
        let _ = (&mut self.done).await;
    }
}

/// A request handed to an async handler.
#[derive(Debug, Clone)]
pub struct ServerRequest {
    pub from: SocketAddr,
    /// It was sent to a multicast address: errors are not sent back, the response waits for leisure.
    pub multicast: bool,
    pub confirmable: bool,
    pub request: Request,
    /// Values of the pattern's `{name}` segments.
    pub params: Vec<(String, String)>,
}

impl ServerRequest {
    pub fn method(&self) -> Code {
        self.request.method
    }

    pub fn options(&self) -> &Options {
        &self.request.options
    }

    pub fn payload(&self) -> &[u8] {
        &self.request.payload
    }

    pub fn payload_text(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.request.payload)
    }

    /// `/a/b`.
    pub fn path(&self) -> String {
        self.request.options.path()
    }

    /// The value of a `{name}` segment of the route pattern.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The value of the first `key=value` Uri-Query item.
    pub fn query(&self, key: &str) -> Option<&str> {
        self.request.query_value(key)
    }

    pub fn content_format(&self) -> Option<ContentFormat> {
        self.request.options.content_format()
    }

    pub fn accept(&self) -> Option<ContentFormat> {
        self.request.options.accept()
    }
}

/// Sets what a route answers and how it is described in `/.well-known/core`.
pub struct RouteConfig<'a> {
    route: &'a mut Route,
}

impl RouteConfig<'_> {
    /// The methods the route accepts; others get 4.05. Default: all.
    pub fn methods(self, methods: &[Code]) -> Self {
        self.route.methods = Some(methods.to_vec());
        self
    }

    /// A link attribute (RFC 6690 §3, §7.2); ignored for routes with `{…}` segments, which are not listed.
    pub fn attr(self, name: &str, value: impl Into<String>) -> Self {
        if let Some(link) = self.route.link.take() {
            self.route.link = Some(link.attr(name, value));
        }
        self
    }

    /// Resource type (`rt`).
    pub fn rt(self, rt: &str) -> Self {
        self.attr("rt", rt)
    }

    /// Interface description (`if`).
    pub fn iface(self, iface: &str) -> Self {
        self.attr("if", iface)
    }

    /// Content format (`ct`).
    pub fn ct(self, cf: ContentFormat) -> Self {
        self.attr("ct", cf.0.to_string())
    }

    /// Maximum size estimate (`sz`).
    pub fn sz(self, size: usize) -> Self {
        self.attr("sz", size.to_string())
    }

    pub fn title(self, title: &str) -> Self {
        self.attr("title", title)
    }

    /// Marks the resource observable (`obs`).
    pub fn obs(self) -> Self {
        if let Some(link) = self.route.link.take() {
            self.route.link = Some(link.flag("obs"));
        }
        self
    }

    /// Leaves the route out of `/.well-known/core`.
    pub fn hidden(self) -> Self {
        self.route.link = None;
        self
    }
}

type BoxFuture = Pin<Box<dyn Future<Output = Response> + Send>>;

trait Handler: Send + Sync {
    fn call(&self, req: ServerRequest) -> BoxFuture;
}

impl<F: Fn(ServerRequest) -> BoxFuture + Send + Sync> Handler for F {
    fn call(&self, req: ServerRequest) -> BoxFuture {
        self(req)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Param(String),
    Rest(String),
}

fn parse_pattern(pattern: &str) -> Vec<Segment> {
    pattern
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| match s.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some(name) => match name.strip_prefix('*') {
                Some(rest) => Segment::Rest(rest.to_string()),
                None => Segment::Param(name.to_string()),
            },
            None => Segment::Literal(s.to_string()),
        })
        .collect()
}

/// Matches a path against a pattern; returns the captured parameters.
fn match_pattern(pattern: &[Segment], path: &[String]) -> Option<Vec<(String, String)>> {
    let mut params = Vec::new();
    for (i, seg) in pattern.iter().enumerate() {
        match seg {
            Segment::Rest(name) => {
                params.push((name.clone(), path.get(i..).map(|p| p.join("/")).unwrap_or_default()));
                return Some(params);
            }
            Segment::Literal(l) => {
                if path.get(i) != Some(l) {
                    return None;
                }
            }
            Segment::Param(name) => params.push((name.clone(), path.get(i)?.clone())),
        }
    }
    (path.len() == pattern.len()).then_some(params)
}

struct Route {
    segments: Vec<Segment>,
    methods: Option<Vec<Code>>,
    handler: Arc<dyn Handler>,
    link: Option<ResourceLink>,
}

/// The service behind [`Server::route`]: matches a route, runs its handler, and answers inline if the
/// handler completes at once or from a task otherwise.
struct Router {
    routes: Vec<Route>,
    tx: mpsc::UnboundedSender<Command>,
    spawner: Handle,
}

impl Service for Router {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        let path: Vec<String> = req.request.path_segments().map(|s| s.into_owned()).collect();
        let best = self.routes.iter().filter_map(|r| match_pattern(&r.segments, &path).map(|p| (r, p))).max_by_key(
            |(r, _)| {
                let literals = r.segments.iter().filter(|s| matches!(s, Segment::Literal(_))).count();
                (literals, std::cmp::Reverse(r.segments.len()))
            },
        );
        let Some((route, params)) = best else {
            let path = req.request.options.path();
            cx.respond(req.id, Response::error(Code::NOT_FOUND, format!("no resource at {path}")));
            return;
        };
        if route.methods.as_ref().is_some_and(|m| !m.contains(&req.request.method)) {
            cx.respond(
                req.id,
                Response::error(Code::METHOD_NOT_ALLOWED, format!("{} not allowed here", req.request.method)),
            );
            return;
        }
        let id = req.id;
        let request = ServerRequest {
            from: req.from,
            multicast: req.multicast,
            confirmable: req.confirmable,
            request: req.request,
            params,
        };
        let mut fut = CatchUnwind(route.handler.call(request));
        // A handler that needs no waiting is answered inline, piggybacked, without a task or a channel.
        let mut task_cx = TaskContext::from_waker(std::task::Waker::noop());
        if let Poll::Ready(response) = Pin::new(&mut fut).poll(&mut task_cx) {
            cx.respond(id, response);
            return;
        }
        let tx = self.tx.clone();
        self.spawner.spawn(async move {
            let response = fut.await;
            let _ = tx.send(Command::Respond { id, response });
        });
    }

    fn links(&self) -> Vec<ResourceLink> {
        self.routes.iter().filter_map(|r| r.link.clone()).collect()
    }
}

/// Turns a panicking handler into a 5.00 response instead of a request that is never answered.
struct CatchUnwind(BoxFuture);

impl Future for CatchUnwind {
    type Output = Response;
    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Response> {
        let inner = &mut self.0;
        match std::panic::catch_unwind(AssertUnwindSafe(|| inner.as_mut().poll(cx))) {
            Ok(p) => p,
            Err(_) => {
                tracing::error!("request handler panicked; answering 5.00");
                Poll::Ready(Response::error(Code::INTERNAL_SERVER_ERROR, "handler failed"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segs(p: &str) -> Vec<String> {
        p.split('/').filter(|s| !s.is_empty()).map(str::to_string).collect()
    }

    #[test]
    fn patterns() {
        let p = parse_pattern("/users/{id}/x");
        assert_eq!(match_pattern(&p, &segs("/users/7/x")), Some(vec![("id".into(), "7".into())]));
        assert_eq!(match_pattern(&p, &segs("/users/7")), None);
        assert_eq!(match_pattern(&p, &segs("/users/7/x/y")), None);
        let r = parse_pattern("/files/{*rest}");
        assert_eq!(match_pattern(&r, &segs("/files/a/b")), Some(vec![("rest".into(), "a/b".into())]));
        assert_eq!(match_pattern(&r, &segs("/files")), Some(vec![("rest".into(), String::new())]));
        assert_eq!(match_pattern(&parse_pattern("/"), &segs("/")), Some(vec![]));
    }
}
