//! The demo and ETSI plugtest resources on real sockets: [`ServeConfig`] in, [`Serve::start`], a [`Serve`]
//! handle out — what `corral serve` runs, and what a test starts in-process.
//!
//! Owns: the workers on one port (their sockets' options, the multicast groups they join), the secure
//! transports on the first worker (`coaps+tcp://` and `coaps://`, on that worker's own node: one set of
//! resources for every scheme, so a PUT over one is read back over another), the resources every worker
//! mounts (corral-services' plugtest and demo set, corral-stream's collector) and a clean stop. Must never:
//! parse a command line or print; the resources themselves are corral-services'.

use crate::Error;
use corral_oscore::OscoreLayer;
use corral_proto::{Duration, EndpointConfig, Node};
use corral_services::{Echo, Hello, Plugtest, Stats};
use corral_tokio::socket::SocketOptions;
use corral_tokio::workers::{self, Driver, Sharing, WorkerConfig, Workers};
use corral_tokio::{DtlsConfig, DtlsWatch, TlsServerConfig};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

/// What a worker mounts beside the resources (e.g. the HTTP window's probe), called on the worker's
/// thread with the worker's index and its node.
pub type MountServe = Arc<dyn Fn(usize, &mut Node) + Send + Sync>;

/// What `serve` runs with.
pub struct ServeConfig {
    /// Address and port to listen on (port 0: any free port); `[::]` serves IPv4 and IPv6 on one socket.
    pub bind: SocketAddr,
    /// CoAP over TCP too (first worker, tokio driver): `Some(None)` on the UDP address and port.
    pub tcp: Option<Option<SocketAddr>>,
    /// Workers on the one port (SO_REUSEPORT), each with its own node and resources; at least 1.
    pub workers: u16,
    pub driver: Driver,
    /// Multicast groups every worker joins (not with several workers: each would answer).
    pub join: Vec<IpAddr>,
    /// IPv4 address of the interface on which IPv4 groups are joined.
    pub mcast_if: Option<Ipv4Addr>,
    /// Interface index on which IPv6 groups are joined (0: the kernel's choice).
    pub mcast_if6: u32,
    /// Keep polling the socket this long after a burst before sleeping (tokio driver).
    pub busy_poll: std::time::Duration,
    /// Every worker's endpoint configuration but its seed and shard.
    pub endpoint: EndpointConfig,
    /// How often the observable resources (/obs, /obs-non, /obs-large) change.
    pub obs_period: Duration,
    /// OSCORE for the clients it knows (one worker only: a context's sequence numbers are nonces).
    pub oscore: Option<OscoreLayer>,
    /// `coaps+tcp://` on the first worker.
    pub tls: Option<(SocketAddr, TlsServerConfig)>,
    /// `coaps://` on a socket of its own, on the first worker's node.
    pub dtls: Option<(SocketAddr, DtlsConfig)>,
    /// Where the `coaps://` socket's counters go.
    pub dtls_watch: Option<DtlsWatch>,
    /// See [`MountServe`].
    pub mount: Option<MountServe>,
    /// The blocking driver's threads are named `{name}-{i}`.
    pub name: String,
}

impl ServeConfig {
    /// One worker on `bind` (tokio driver, UDP only) with the endpoint's defaults and /obs changing every
    /// 5 s.
    pub fn new(bind: SocketAddr) -> ServeConfig {
        ServeConfig {
            bind,
            tcp: None,
            workers: 1,
            driver: Driver::Tokio,
            join: Vec::new(),
            mcast_if: None,
            mcast_if6: 0,
            busy_poll: std::time::Duration::ZERO,
            endpoint: EndpointConfig::default(),
            obs_period: Duration::from_secs(5),
            oscore: None,
            tls: None,
            dtls: None,
            dtls_watch: None,
            mount: None,
            name: "corral-serve".into(),
        }
    }

    fn socket_options(&self) -> SocketOptions {
        SocketOptions {
            busy_poll: self.busy_poll,
            // Several workers: one endpoint per worker on one port. --join: several servers of one user on
            // one host can share a multicast group's port (each receives every multicast request; a unicast
            // datagram reaches one of them). SO_REUSEPORT, not SO_REUSEADDR: the kernel lets only the same
            // user join the port, so another local user cannot bind it and take the server's traffic.
            reuse_port: self.workers > 1 || !self.join.is_empty(),
            multicast_if_v4: self.mcast_if,
            multicast_if_v6: self.mcast_if6,
            ..Default::default()
        }
    }
}

/// What one endpoint must own alone cannot be spread over `workers` workers: an OSCORE context (`oscore`)
/// or multicast groups (`join`). [`Serve::start`] checks it; a caller may ask first, before loading what
/// the rest of its configuration needs.
pub fn check_workers(workers: u16, oscore: bool, join: &[IpAddr]) -> Result<(), Error> {
    if workers > 1 && oscore {
        return Err(Error::Config(format!(
            "--workers {workers} cannot be combined with --credentials: an OSCORE security context belongs to \
             one endpoint (its sequence numbers are nonces)"
        )));
    }
    if workers > 1 && !join.is_empty() {
        return Err(Error::Config(format!(
            "--workers {workers} cannot be combined with --join: a multicast datagram reaches every socket of \
             a SO_REUSEPORT group, so every worker would answer it"
        )));
    }
    Ok(())
}

/// The resources of `corral serve`: the ETSI plugtest set at the root, the demo resources, the CoAP-SC
/// stream collector.
pub fn mount_resources(node: &mut Node, obs_period: Duration) {
    node.mount("", Plugtest::new(obs_period));
    node.mount("hello", Hello);
    node.mount("echo", Echo);
    node.mount("stats", Stats);
    node.mount("stream", corral_stream::StreamReceiver::default());
}

/// A running `serve`. [`Serve::stop`] ends it as Ctrl-C does.
pub struct Serve {
    local: SocketAddr,
    tcp: Option<SocketAddr>,
    tls: Option<SocketAddr>,
    dtls: Option<SocketAddr>,
    workers: Workers,
}

impl Serve {
    /// Binds the workers (the first with the `coaps+tcp://` listener and the `coaps://` socket), joins the
    /// groups and starts serving. On the tokio driver it needs a tokio runtime (the current one).
    pub fn start(mut config: ServeConfig) -> Result<Serve, Error> {
        check_workers(config.workers, config.oscore.is_some(), &config.join)?;
        let driver = config.driver;
        let mut bound = workers::Bound::bind(WorkerConfig {
            driver,
            count: config.workers.max(1),
            addr: config.bind,
            socket: config.socket_options(),
            endpoint: config.endpoint.clone(),
            sharing: Sharing::ReusePort,
            tcp: config.tcp,
            name: config.name.clone(),
        })
        .map_err(|e| Error::Start(format!("cannot listen on {}: {}", e.addr, e.error)))?;
        for g in &config.join {
            bound.join(*g).map_err(|e| Error::Start(format!("cannot join multicast group {g}: {e}")))?;
        }
        let (local, tcp) = (bound.local_addr(), bound.tcp_local_addr());
        let tls = match config.tls.take() {
            Some((at, tls)) => Some(
                bound
                    .listen_tls(at, tls)
                    .map_err(|e| Error::Start(format!("cannot listen on {at} for coaps+tcp://: {e}")))?,
            ),
            None => None,
        };
        let dtls = match config.dtls.take() {
            Some((at, dtls)) => Some(
                bound
                    .listen_dtls(at, dtls, config.dtls_watch.take())
                    .map_err(|e| Error::Start(format!("cannot listen on {at} for coaps://: {e}")))?,
            ),
            None => None,
        };
        let setups = (0..usize::from(config.workers.max(1)))
            .map(|i| -> workers::Setup {
                let (layer, period, mount) = (config.oscore.take(), config.obs_period, config.mount.clone());
                Box::new(move |node| {
                    mount_resources(node, period);
                    if let Some(mount) = mount {
                        mount(i, node);
                    }
                    if let Some(layer) = layer {
                        node.set_layer(Box::new(layer));
                    }
                })
            })
            .collect();
        let workers = bound.start(setups).map_err(|e| match driver {
            Driver::Tokio => Error::Start(format!("cannot start the server: {e}")),
            Driver::Blocking => Error::Start(format!("cannot start a worker: {e}")),
        })?;
        Ok(Serve { local, tcp, tls, dtls, workers })
    }

    /// The UDP address every worker listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The TCP address, with CoAP over TCP.
    pub fn tcp_local_addr(&self) -> Option<SocketAddr> {
        self.tcp
    }

    /// The `coaps+tcp://` address, with TLS.
    pub fn tls_local_addr(&self) -> Option<SocketAddr> {
        self.tls
    }

    /// The `coaps://` address, with DTLS.
    pub fn dtls_local_addr(&self) -> Option<SocketAddr> {
        self.dtls
    }

    /// Stops every worker; exchanges in progress get the server's grace period.
    pub async fn stop(self) {
        self.workers.stop().await
    }
}
