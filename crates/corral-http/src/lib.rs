//! The operator's window (`--http ADDR:PORT` on `corral gateway`, `corral proxy` and `corral serve`): one
//! HTTP listener (axum on the command's tokio runtime) with `/metrics` (Prometheus text format),
//! `/healthz` and `/readyz`, on the gateway the admin API (`/api`, JSON, errors as RFC 9457 problem
//! documents), the HTTP→CoAP cross-proxy (`/hc/coap://…`, RFC 8075) and the console (`console`), on the
//! proxy its status, FIB and cache (`/api/proxy…`) and its console page (`proxy`).
//!
//! Owns: the listener's options and the routes' wiring; who may ask what is [`rules`]' (the listener's
//! names, the gateway's access roles applied to the HTTP client's address as to a CoAP client's, this
//! machine only on the server and the proxy, Origin, an optional bearer token), and what the listener holds
//! at most is [`bounds`]' (connections, header time, event streams, cross-proxy requests). It is a
//! driver-level front end, a library so that whoever runs a node (the `corral` command, a library user of
//! `corral_tokio::Server`) serves the same window from a [`WindowConfig`]: the numbers come from the nodes'
//! published snapshots ([`watch`]),
//! never from a lock the data path takes; the admin API and the cross-proxy are CoAP requests to the
//! gateway's own `/em` and to the members, through corral-tokio's client, so that the Entity Manager's code
//! paths and the member policy decide as they do for CoAP. Must never: hold anything a worker waits for,
//! or send a request the gateway's policy would refuse a CoAP client.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use corral_group::policy::{AccessPolicy, MemberPolicy};
use corral_group::Prefix;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

mod admin;
mod bounds;
mod console;
mod hc;
mod mapping;
mod metrics;
mod page;
mod problem;
mod proxy;
mod rules;
pub mod watch;

pub use problem::Problem;

/// The path prefix of the cross-proxy's default URI mapping (RFC 8075 §5.3): its routes (`hc`) and the
/// window's rules (`rules`, which ask more of a change through it) both go by it.
pub(crate) const HC_PREFIX: &str = "/hc/";

/// A window's listener and who may use it: what `--http` and its options say on the command line.
#[derive(Debug, Clone)]
pub struct WindowConfig {
    /// Where the listener binds (port 0: any free port, see [`Bound::local_addr`]).
    pub listen: SocketAddr,
    /// With a token, the admin API, the cross-proxy and the console's forms also need
    /// `Authorization: Bearer TOKEN` (the forms are then off: a browser form cannot send it).
    pub token: Option<String>,
    /// The names the listener is reached by besides its address (`NAME`, or `NAME:PORT` for that port
    /// only; see [`parse_host`]): a request whose Host is neither is refused (DNS rebinding).
    pub host_names: Vec<(String, Option<u16>)>,
    /// Loopback and this host's addresses: a listener on a wildcard address answers to them, and the
    /// cross-proxy sends no change to them unless [`WindowConfig::hc_this_host`] opens one.
    pub this_machine: Vec<Prefix>,
    /// The directed broadcast addresses of this host's networks, which the cross-proxy never sends to.
    pub broadcasts: Vec<IpAddr>,
    /// Addresses of this host the cross-proxy may send changes to, and that HTTP clients from other hosts
    /// may reach through it (still within the gateway's member policy).
    pub hc_this_host: Vec<Prefix>,
}

impl WindowConfig {
    /// A window on `listen` that knows this machine as loopback only, without a token, names or openings.
    pub fn new(listen: SocketAddr) -> WindowConfig {
        WindowConfig {
            listen,
            token: None,
            host_names: Vec::new(),
            this_machine: Prefix::loopback().to_vec(),
            broadcasts: Vec::new(),
            hc_this_host: Vec::new(),
        }
    }
}

pub use rules::parse_host;

/// Why a window could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum WindowError {
    /// The listener could not bind its address.
    Listen { addr: SocketAddr, source: std::io::Error },
    /// The window's CoAP client (admin API, cross-proxy) could not open its socket.
    CoapSocket(std::io::Error),
    /// The bound listener could not join the tokio runtime.
    Serve(std::io::Error),
}

impl std::fmt::Display for WindowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WindowError::Listen { addr, source } => write!(f, "cannot listen on {addr}: {source}"),
            WindowError::CoapSocket(e) => write!(f, "cannot open the HTTP side's CoAP socket: {e}"),
            WindowError::Serve(e) => write!(f, "cannot serve HTTP: {e}"),
        }
    }
}

impl std::error::Error for WindowError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WindowError::Listen { source: e, .. } | WindowError::CoapSocket(e) | WindowError::Serve(e) => Some(e),
        }
    }
}

/// What the numbers of one worker's inner service are (published through [`watch::Board`]).
#[derive(Debug, Clone, Default)]
pub enum Extra {
    /// `corral serve`: the endpoint's counters only.
    #[default]
    None,
    /// The Entity Manager of a gateway worker.
    Em(EmNumbers),
    /// The proxy.
    Proxy(ProxyNumbers),
}

/// The Entity Manager's numbers in a snapshot.
#[derive(Debug, Clone, Default)]
pub struct EmNumbers {
    pub entities: usize,
    pub jobs: usize,
    pub counters: corral_group::em::EmStats,
}

impl EmNumbers {
    pub fn of(em: &corral_group::EntityManager) -> Extra {
        Extra::Em(EmNumbers { entities: em.entity_count(), jobs: em.jobs_in_progress(), counters: em.stats().clone() })
    }
}

/// The proxy's numbers in a snapshot.
#[derive(Debug, Clone, Default)]
pub struct ProxyNumbers {
    pub stats: corral_proxy::Stats,
    pub cache_entries: usize,
    pub cache_bytes: usize,
    pub pending: usize,
    pub observations: usize,
}

impl ProxyNumbers {
    pub fn of(p: &corral_proxy::ProxyService) -> Extra {
        let (cache_entries, pending, observations) = p.occupancy();
        Extra::Proxy(ProxyNumbers {
            stats: p.stats().clone(),
            cache_entries,
            cache_bytes: p.cache_bytes(),
            pending,
            observations,
        })
    }
}

pub type Board = watch::Board<Extra>;

/// What the gateway's routes need beyond the numbers.
pub struct GatewaySide {
    /// Where the gateway's CoAP endpoint answers on this machine.
    pub coap: SocketAddr,
    pub members: MemberPolicy,
    /// The database the Entity Manager keeps (named by /readyz).
    pub store: PathBuf,
    /// The coaps:// peers the gateway has credentials for (`--peer-psk-file`): the cross-proxy reaches
    /// `/hc/coaps://` targets among them, each through a client of its own with the peer's credentials.
    pub coaps_peers: Vec<(SocketAddr, corral_tokio::DtlsConfig)>,
}

/// What the proxy's routes need beyond the numbers.
pub struct ProxySide {
    /// Where the proxy's CoAP endpoint answers on this machine.
    pub coap: SocketAddr,
}

pub use corral_tokio::on_this_machine;

/// Everything a running window knows.
pub struct Window {
    /// `gateway`, `proxy` or `serve`: the `service` label and the console's title.
    pub verb: &'static str,
    pub board: Arc<Board>,
    pub access: AccessPolicy,
    pub token: Option<String>,
    /// The names requests may give the listener (`Host`, `Origin`).
    pub names: rules::Names,
    /// Where the cross-proxy may send: this host's addresses and those the operator opened.
    pub reach: hc::Reach,
    pub gateway: Option<GatewaySide>,
    pub proxy: Option<ProxySide>,
}

/// A window ready to serve: its socket is bound, so that a port in use fails the command at start-up.
pub struct Bound {
    listener: std::net::TcpListener,
    window: Window,
    /// The socket of the window's CoAP client (admin API, cross-proxy, the proxy's routes), bound here so
    /// that the gateway knows its port before it starts (see [`Bound::client_sockets`]).
    coap: std::net::UdpSocket,
}

impl Bound {
    /// Binds the listener and the window's CoAP socket, so that a port in use fails at start-up.
    /// `verb` (`gateway`, `proxy`, `serve`) names the service; `access` says who may use which route.
    pub fn bind(
        config: WindowConfig,
        verb: &'static str,
        board: Arc<Board>,
        access: AccessPolicy,
    ) -> Result<Bound, WindowError> {
        let addr = config.listen;
        let listener = std::net::TcpListener::bind(addr)
            .and_then(|l| l.set_nonblocking(true).map(|_| l))
            .map_err(|source| WindowError::Listen { addr, source })?;
        let names = rules::Names {
            listen: listener.local_addr().unwrap_or(addr),
            this_machine: config.this_machine.clone(),
            names: config.host_names,
        };
        let reach = hc::Reach::new(config.this_machine, config.broadcasts, &config.hc_this_host);
        // IPv4 and IPv6 on one socket where the host has IPv6.
        let opts = corral_tokio::socket::SocketOptions::default();
        let coap = corral_tokio::socket::bind_std("[::]:0".parse().expect("an address"), &opts)
            .or_else(|_| corral_tokio::socket::bind_std("0.0.0.0:0".parse().expect("an address"), &opts))
            .map_err(WindowError::CoapSocket)?;
        let window = Window { verb, board, access, token: config.token, names, reach, gateway: None, proxy: None };
        Ok(Bound { listener, window, coap })
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Where the window's CoAP requests come from as this machine's endpoints see them: its port on
    /// IPv4 and IPv6 loopback (canonical addresses).
    pub fn client_sockets(&self) -> Vec<SocketAddr> {
        let Ok(port) = self.coap.local_addr().map(|a| a.port()) else { return Vec::new() };
        vec![
            SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), port),
            SocketAddr::new(std::net::Ipv6Addr::LOCALHOST.into(), port),
        ]
    }

    /// Adds the gateway's routes.
    pub fn gateway(mut self, side: GatewaySide) -> Bound {
        self.window.gateway = Some(side);
        self
    }

    /// Adds the proxy's routes.
    pub fn proxy(mut self, side: ProxySide) -> Bound {
        self.window.proxy = Some(side);
        self
    }

    /// Serves on the current tokio runtime until it ends.
    pub async fn spawn(self) -> Result<(), WindowError> {
        let listener = tokio::net::TcpListener::from_std(self.listener).map_err(WindowError::Serve)?;
        let app = router(self.window, self.coap).await?;
        tokio::spawn(bounds::serve(listener, app));
        Ok(())
    }
}

/// The shared state of every route.
pub(crate) struct App {
    pub window: Window,
    pub client: Option<corral_tokio::Client>,
    /// Cross-proxy requests in progress ([`bounds::MAX_REQUESTS`], a share per client); beyond it 503.
    pub requests: Arc<bounds::Shares>,
    /// Event streams: the console's live values and the cross-proxy's observations
    /// ([`bounds::MAX_STREAMS`], a share per client).
    pub streams: Arc<bounds::Shares>,
    /// The cross-proxy's coaps:// clients, one per peer of [`GatewaySide::coaps_peers`] that was asked
    /// (so at most as many as the credentials file names), made on first use.
    pub coaps_clients: tokio::sync::Mutex<std::collections::HashMap<SocketAddr, corral_tokio::Client>>,
}

pub(crate) type Shared = Arc<App>;

async fn router(window: Window, coap: std::net::UdpSocket) -> Result<Router, WindowError> {
    let (gateway, proxy) = (window.gateway.is_some(), window.proxy.is_some());
    let client = match gateway || proxy {
        true => Some(client_builder(None).from_std(coap).map_err(WindowError::CoapSocket)?),
        false => None,
    };
    let app = Arc::new(App {
        window,
        client,
        requests: bounds::Shares::new("cross-proxy requests", bounds::MAX_REQUESTS, bounds::PER_CLIENT_SHARE),
        streams: bounds::Shares::new("event streams", bounds::MAX_STREAMS, bounds::PER_CLIENT_SHARE),
        coaps_clients: Default::default(),
    });
    let mut r = Router::new()
        .route("/metrics", get(metrics::metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz));
    if gateway {
        r = r.merge(admin::routes()).merge(hc::routes()).merge(console::routes());
    }
    if proxy {
        r = r.merge(proxy::routes());
    }
    Ok(r.fallback(not_found).layer(axum::middleware::from_fn_with_state(app.clone(), rules::guard)).with_state(app))
}

/// How the window's CoAP clients are made: with `dtls`, one that speaks coaps:// with those credentials.
fn client_builder(dtls: Option<&corral_tokio::DtlsConfig>) -> corral_tokio::ClientBuilder {
    let b = corral_tokio::Client::builder().timeout(std::time::Duration::from_secs(30));
    match dtls {
        Some(c) => b.dtls(c.clone()),
        None => b,
    }
}

/// A coaps:// client of the cross-proxy (IPv4 and IPv6 on one socket where the host has IPv6).
async fn client(dtls: Option<corral_tokio::DtlsConfig>) -> Result<corral_tokio::Client, WindowError> {
    let builder = || client_builder(dtls.as_ref());
    match builder().bind("[::]:0").await {
        Ok(c) => Ok(c),
        Err(_) => builder().bind("0.0.0.0:0").await.map_err(WindowError::CoapSocket),
    }
}

async fn not_found() -> Response {
    Problem::new(StatusCode::NOT_FOUND, "no such resource on this listener").into_response()
}

async fn healthz() -> Response {
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "ok\n").into_response()
}

/// Ready: every worker published a snapshot within the last few periods (its node runs), and on the
/// gateway the store is open (the gateway opened it before binding; it is named here).
async fn readyz(State(app): State<Shared>) -> Response {
    let snaps = app.window.board.read();
    let stale = watch::PERIOD.as_micros() * 4;
    let mut workers = Vec::new();
    let mut ready = true;
    for (i, s) in snaps.iter().enumerate() {
        let alive = s.published.is_some_and(|t| t.elapsed().as_micros() as u64 <= stale);
        ready &= alive;
        workers.push(serde_json::json!({ "worker": i, "alive": alive, "uptime_s": s.uptime_s }));
    }
    let mut body =
        serde_json::json!({ "ready": ready, "service": app.window.verb, "sockets_bound": true, "workers": workers });
    if let Some(g) = &app.window.gateway {
        body["store"] = serde_json::json!({ "open": true, "path": g.store.display().to_string() });
    }
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, admin::json_line(body)).into_response()
}

/// Who may use the window of `corral serve` and `corral proxy`: this machine (loopback), every route.
pub fn this_machine() -> AccessPolicy {
    AccessPolicy::loopback_only()
}
