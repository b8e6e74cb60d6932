//! The Entity Manager gateway of seed 000 on a UDP socket: [`GatewayConfig`] in, [`Gateway::start`], a
//! [`Gateway`] handle out — what `corral gateway` runs, and what a test or the console starts in-process.
//!
//! Owns: the data directory's lock and database, binding (one socket or a steered group of workers),
//! wiring corral-group's [`EntityManager`] into the workers with its store thread, OSCORE guard, directory
//! (`rd`) and DTLS, the testbed devices and re-joining them to the groups of stored multicast entities,
//! and a clean stop. The Entity Manager itself is corral-group's, and so is the topology of several workers
//! (`corral_group::gateway`); the devices are [`crate::fleet`]'s. Must never: parse a command line or print
//! (the binary turns its arguments into a [`GatewayConfig`] and prints what the handle reports).

use crate::fleet::{Fleet, FleetConfig};
use crate::{lock::DataLock, Error, StoreLocation};
use corral_group::{AccessPolicy, Budget, EmConfig, EntityManager, MemberPolicy, Prefix, Snapshot, Store};
use corral_proto::{EndpointConfig, Node};
use corral_store::{PgStore, SqliteStore, StoreThread};
use corral_tokio::uri::base_uri;
use corral_tokio::workers::Driver;
use corral_tokio::{on_this_machine, Client, Code, DtlsMuxConfig};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

mod guard;
mod workers;

/// How worker `i` mounts its Entity Manager on its node at `em` (e.g. wrapped in the HTTP window's
/// snapshot publisher); without one, the Entity Manager is mounted as it is.
pub type MountEm = Arc<dyn Fn(usize, &mut Node, EntityManager) + Send + Sync>;

/// The lifetime of the testbed devices' registrations with the gateway's directory (`rd`), in seconds.
const TESTBED_RD_LIFETIME: u32 = 3600;

/// What a gateway runs with. [`GatewayConfig::new`] gives a gateway that only this machine may use and
/// whose members may be anywhere on loopback; the fields say the rest.
pub struct GatewayConfig {
    /// Address and port to listen on (port 0: any free port; [`Gateway::local_addr`] says which).
    pub bind: SocketAddr,
    /// The data directory: `em.db` (entities), `rd.db` (with `rd`), `gateway.lock`; created if missing
    /// (unused with a PostgreSQL store).
    pub data: PathBuf,
    /// Where entities, groups, the journal and counters (and with `rd`, registrations) are kept [SQLite in
    /// `data`]. Several gateways may share one PostgreSQL store.
    pub store: StoreLocation,
    /// Who may read, actuate and manage.
    pub access: AccessPolicy,
    /// Where members may be. The gateway fills in its own port (`gateway_port`); the addresses it answers
    /// on (`gateway`) are the caller's, since a wildcard socket answers on all of the host's.
    pub members: MemberPolicy,
    /// With a testbed: add the devices' port to `members.ports` (what a default member policy does).
    pub testbed_ports_are_members: bool,
    pub budget: Budget,
    /// How long a released multicast address rests before reuse [corral-group's default].
    pub quarantine: Option<Duration>,
    /// Virtual devices to run in this process, started before the gateway so that stored entities find
    /// their members answering.
    pub testbed: Option<Testbed>,
    /// IPv4 address of the interface multicast requests leave from [loopback when the gateway is on
    /// loopback or runs a testbed, otherwise the routing table's choice].
    pub mcast_if: Option<Ipv4Addr>,
    /// Interface index for IPv6 multicast requests [1 on `::1`, otherwise the kernel's choice].
    pub mcast_if6: Option<u32>,
    /// Port multicast requests go to [the members' port].
    pub mcast_port: Option<u16>,
    /// Multicast leisure, of the Entity Manager and the testbed devices.
    pub leisure: Option<Duration>,
    /// Workers on one port (1 to 64; Linux beyond 1).
    pub workers: u8,
    /// Requests outstanding to one member at once, per worker.
    pub nstart: u16,
    /// [the blocking driver on Linux; the tokio driver with DTLS]
    pub driver: Option<Driver>,
    /// The networks whose sources count as verified from their first datagram.
    pub verified_nets: Vec<Prefix>,
    /// Serve a Resource Directory beside the Entity Manager (one worker only), its registrations in
    /// `DATA/rd.db`.
    pub rd: Option<corral_rd::Policy>,
    /// OSCORE for requests to the gateway.
    pub oscore: Option<Oscore>,
    /// coaps:// on the same port, and credentials for coaps:// members (one worker, tokio driver).
    pub dtls: Option<DtlsMuxConfig>,
    /// See [`MountEm`].
    pub mount_em: Option<MountEm>,
}

/// The testbed: `count` virtual devices on consecutive addresses from `first`.
#[derive(Debug, Clone)]
pub struct Testbed {
    pub count: usize,
    /// Device 0's address [the address after the gateway's, same port].
    pub first: Option<SocketAddr>,
    pub mc_slots: usize,
    /// Device `i` draws its values from `seed + i`.
    pub seed: u64,
    /// Who may change the devices' groups through `/mc`.
    pub managers: Vec<Prefix>,
    /// A JSON line per request a device receives.
    pub request_log: Option<PathBuf>,
}

/// OSCORE in front of the Entity Manager (worker 0 holds the contexts).
pub struct Oscore {
    pub contexts: Vec<corral_oscore::served::Served>,
    /// Refuse every plain request to `/em` (4.01).
    pub require: bool,
    /// Refuse plain changes and actuations from beyond loopback (4.01).
    pub require_remote: bool,
}

impl GatewayConfig {
    /// A gateway on `bind` keeping its data in `data`: managed from loopback only, its members on
    /// loopback at any port, one worker.
    pub fn new(bind: SocketAddr, data: impl Into<PathBuf>) -> GatewayConfig {
        let loopback = Prefix::loopback().to_vec();
        GatewayConfig {
            bind,
            data: data.into(),
            store: StoreLocation::Sqlite,
            access: AccessPolicy {
                rules: loopback.iter().map(|p| (*p, corral_group::Role::Manage)).collect(),
                ..AccessPolicy::default()
            },
            members: MemberPolicy {
                prefixes: loopback,
                gateway: vec![Prefix::host(bind.ip())],
                ..MemberPolicy::default()
            },
            testbed_ports_are_members: true,
            budget: Budget::default(),
            quarantine: None,
            testbed: None,
            mcast_if: None,
            mcast_if6: None,
            mcast_port: None,
            leisure: None,
            workers: 1,
            nstart: 1,
            driver: None,
            verified_nets: Vec::new(),
            rd: None,
            oscore: None,
            dtls: None,
            mount_em: None,
        }
    }

    /// Settings that cannot go together, found before anything is opened.
    fn check(&self) -> Result<(), Error> {
        if self.rd.is_some() && self.workers > 1 {
            return Err(Error::Config(
                "--rd serves the directory from one worker: drop --workers, or run `corral rd`".into(),
            ));
        }
        if self.rd.is_some() && self.testbed.is_some() && self.bind.port() == 0 {
            return Err(Error::Config(
                "--rd with --testbed: give --bind a port, so that the devices know where to register".into(),
            ));
        }
        if self.dtls.is_some() && self.driver.is_some_and(|d| d != Driver::Tokio || self.workers > 1) {
            return Err(Error::Config("--dtls and --peer-psk-file need one worker on the tokio driver".into()));
        }
        Ok(())
    }
}

/// A running gateway. [`Gateway::stop`] ends it as Ctrl-C does; dropping it stops it too.
pub struct Gateway {
    local: SocketAddr,
    database: PathBuf,
    store: String,
    entities: Vec<String>,
    members: MemberPolicy,
    fleet: Option<Fleet>,
    running: Option<workers::Running>,
    to_rejoin: usize,
    rejoined: usize,
    _lock: Option<DataLock>,
}

impl Gateway {
    /// Opens the data directory (one gateway per directory), the database and the directory, starts the
    /// testbed and the workers, and re-joins the testbed devices to the groups of stored multicast
    /// entities.
    pub async fn start(mut config: GatewayConfig) -> Result<Gateway, Error> {
        config.check()?;
        let data = config.data.clone();
        // One gateway per data directory: held while the handle lives (the kernel drops it even after
        // kill -9).
        let lock = config.store.lock(&data)?;
        let database = data.join("em.db");
        let store_name = config.store.describe(&data, "em.db");
        let (location, rd_policy) = (config.store.clone(), config.rd);
        let (snapshot, rd, stores) = crate::off_runtime(move || open_stores(&data, &location, rd_policy))??;
        // The testbed first, so that entities loaded from the store find their members answering.
        let fleet = start_testbed(&config)?;
        let mut bound = bind(&mut config, fleet.is_some())?;
        let local = bound.local_addr();
        // coaps:// members: the peers the DTLS socket has credentials for.
        let dtls_members: Vec<SocketAddr> =
            config.dtls.as_ref().map(|m| m.peers.iter().map(|(a, _)| *a).collect()).unwrap_or_default();
        if let Some(mux) = config.dtls.take() {
            bound.set_dtls_mux(mux)?;
        }
        let em_config = em_config(&config, local, fleet.as_ref(), dtls_members);
        let mut ems = corral_group::gateway::entity_managers(em_config.clone(), snapshot, config.workers, || {
            corral_tokio::os_seed() as u32
        })
        .map_err(|e| Error::Start(format!("cannot load the entities of {store_name}: {e}")))?
        .into_iter();
        let em = ems.next().ok_or_else(|| Error::Start("a gateway has a worker 0".into()))?;
        let entities = em.entity_names();
        let rejoin = fleet.as_ref().map(|f| memberships(&em, f.addrs())).unwrap_or_default();
        let parts = parts(&mut config, em, ems, rd, stores);
        let running = bound.start(parts)?;
        let rejoined = rejoin_groups(&rejoin).await;
        Ok(Gateway {
            local,
            database,
            store: store_name,
            entities,
            members: em_config.members,
            fleet,
            running: Some(running),
            to_rejoin: rejoin.len(),
            rejoined,
            _lock: lock,
        })
    }

    /// The address the gateway listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Where a client on this machine reaches the gateway (an unspecified address is loopback's).
    pub fn contact(&self) -> SocketAddr {
        on_this_machine(self.local)
    }

    /// `coap://…` of [`Gateway::contact`].
    pub fn uri(&self) -> String {
        base_uri(self.contact())
    }

    /// The entity database's file (`DATA/em.db`; with a PostgreSQL store, a file that is not used).
    pub fn database(&self) -> &std::path::Path {
        &self.database
    }

    /// Where the entities are kept: the SQLite file, or the PostgreSQL URL without its password.
    pub fn store(&self) -> &str {
        &self.store
    }

    /// The entities loaded from the database at start.
    pub fn entities(&self) -> &[String] {
        &self.entities
    }

    /// The member policy the Entity Manager runs with (the configured one with the gateway's port, the
    /// testbed's and the coaps:// members' ports filled in).
    pub fn members(&self) -> &MemberPolicy {
        &self.members
    }

    /// The testbed devices' addresses.
    pub fn devices(&self) -> &[SocketAddr] {
        self.fleet.as_ref().map(|f| f.addrs()).unwrap_or_default()
    }

    /// Testbed memberships of stored multicast entities: how many there were, and how many devices joined
    /// again at start.
    pub fn rejoined(&self) -> (usize, usize) {
        (self.rejoined, self.to_rejoin)
    }

    /// Stops the workers (requests in progress get a second to finish), then the testbed devices.
    pub async fn stop(mut self) {
        if let Some(running) = self.running.take() {
            running.stop().await;
        }
        if let Some(fleet) = self.fleet.take() {
            fleet.shutdown();
        }
    }
}

/// The testbed's devices, registering with the gateway's own directory when it has one.
fn start_testbed(config: &GatewayConfig) -> Result<Option<Fleet>, Error> {
    let Some(t) = &config.testbed else { return Ok(None) };
    let cfg = FleetConfig {
        mc_slots: t.mc_slots,
        seed: t.seed,
        leisure: config.leisure,
        mcast_port: config.mcast_port,
        request_log: t.request_log.clone(),
        // The devices retry until the directory (bound next) answers.
        rd: config.rd.map(|_| (on_this_machine(config.bind), TESTBED_RD_LIFETIME)),
        ..FleetConfig::new(t.first.unwrap_or_else(|| next_addr(config.bind)), t.count, t.managers.clone())
    };
    Fleet::start(cfg).map(Some).map_err(|e| Error::Start(format!("testbed: {e}")))
}

/// The workers' sockets, bound.
fn bind(config: &mut GatewayConfig, testbed: bool) -> Result<workers::Bound, Error> {
    let bind = config.bind;
    let loopback = bind.ip().is_loopback();
    let socket = corral_tokio::socket::SocketOptions {
        multicast_if_v4: config.mcast_if.or_else(|| (loopback || testbed).then_some(Ipv4Addr::LOCALHOST)),
        multicast_if_v6: config
            .mcast_if6
            .or_else(|| (bind.ip() == IpAddr::V6(Ipv6Addr::LOCALHOST)).then_some(1))
            .unwrap_or(0),
        ..Default::default()
    };
    // The DTLS layer sits in the tokio driver.
    let driver = match &config.dtls {
        Some(_) => Driver::Tokio,
        None => config.driver.unwrap_or_else(workers::default_driver),
    };
    let mut endpoint = EndpointConfig::default();
    endpoint.params.nstart = config.nstart;
    endpoint.verified_nets = config.verified_nets.clone();
    workers::bind(driver, bind, socket, endpoint, config.workers, testbed)
}

/// The Entity Manager's configuration for a gateway bound to `local`; fills in the member policy's ports.
fn em_config(
    config: &GatewayConfig,
    local: SocketAddr,
    fleet: Option<&Fleet>,
    dtls_members: Vec<SocketAddr>,
) -> EmConfig {
    let mut members = config.members.clone();
    members.gateway_port = local.port();
    let testbed_port = fleet.and_then(|f| f.addrs().first()).map(|a| a.port());
    if config.testbed_ports_are_members && !members.ports.is_empty() {
        members.ports.extend(testbed_port.filter(|p| !members.ports.contains(p)));
    }
    // The operator named these coaps:// members' ports by giving their credentials.
    if !members.ports.is_empty() {
        for port in dtls_members.iter().map(|a| a.port()) {
            if !members.ports.contains(&port) {
                members.ports.push(port);
            }
        }
    }
    let wall_ms =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
    let mut em = EmConfig {
        local_addrs: local_addrs(local),
        access: config.access.clone(),
        members,
        budget: config.budget,
        // The driver's clock starts with the server (below): close enough for a quarantine of minutes.
        wall_clock_at_zero_ms: wall_ms,
        // Beyond loopback, work and changes need proof of the source's address (issue 26).
        challenge_unverified: true,
        // A creation with a silent member answers within a client's patience (issue 27).
        management_wait: Some(corral_group::em::MANAGEMENT_WAIT),
        // Entities with fromRd and no rd follow the gateway's own directory.
        rd: config.rd.map(|_| on_this_machine(local)),
        dtls_members,
        multicast_port: config.mcast_port,
        ..EmConfig::default()
    };
    if let Some(q) = config.quarantine {
        em.quarantine = corral_proto::Duration::from(q);
    }
    if let Some(l) = config.leisure {
        em.multicast_leisure = corral_proto::Duration::from(l);
    }
    em
}

/// The entity store (and with `rd`, the directory's) opened and loaded, and the thread that does their
/// writes. Blocking: runs off the async runtime ([`crate::off_runtime`]), as the PostgreSQL driver must.
fn open_stores(
    data: &std::path::Path,
    location: &StoreLocation,
    rd: Option<corral_rd::Policy>,
) -> Result<(Snapshot, Option<corral_rd::RdService>, StoreThread), Error> {
    let at = location.describe(data, "em.db");
    type Opened = (Box<dyn Store>, Option<Box<dyn corral_group::ChangeFeed>>, fn(String) -> Error);
    let (store, feed, failed): Opened = match location {
        StoreLocation::Sqlite => {
            let s = SqliteStore::open(data.join("em.db"))
                .map_err(|e| Error::Start(format!("cannot open the entity database {at}: {e}")))?;
            (Box::new(s), None, Error::Start)
        }
        StoreLocation::Postgres(t) => {
            let s = PgStore::open(t).map_err(|e| Error::Store(format!("cannot use the entity store: {e}")))?;
            // Changes through other gateways sharing the store reach this one through its feed.
            let feed = s.feed(t);
            (Box::new(s), Some(Box::new(feed) as Box<dyn corral_group::ChangeFeed>), Error::Store)
        }
    };
    let snapshot = store.load().map_err(|e| failed(format!("cannot load the entities of {at}: {e}")))?;
    let (rd, rd_store) = match rd {
        Some(policy) => {
            let (service, store, _) =
                crate::directory::open_directory(data, location, corral_rd::Limits::default(), policy)?;
            (Some(service), Some(store))
        }
        None => (None, None),
    };
    let stores = corral_store::Stores { em: Some(store), rd: rd_store, feed }
        .spawn()
        .map_err(|e| Error::Start(format!("cannot start the database's thread: {e}")))?;
    Ok((snapshot, rd, stores))
}

/// What each worker serves: worker 0 the OSCORE contexts, the directory and the store (it alone writes);
/// the others serve reads from the table worker 0 publishes.
fn parts(
    config: &mut GatewayConfig,
    em: EntityManager,
    others: impl Iterator<Item = EntityManager>,
    rd: Option<corral_rd::RdService>,
    stores: StoreThread,
) -> Vec<workers::Part> {
    let guard = |oscore: Option<corral_oscore::OscoreLayer>, o: &Oscore| guard::Guard {
        oscore,
        require_remote: o.require_remote,
    };
    let contexts = config.oscore.as_mut().map(|o| std::mem::take(&mut o.contexts));
    let mut parts = vec![workers::Part {
        em,
        guard: config
            .oscore
            .as_ref()
            .zip(contexts)
            .map(|(o, contexts)| guard(Some(corral_oscore::OscoreLayer::serving(contexts, o.require)), o)),
        mount: config.mount_em.clone(),
        rd,
        store: Some(Box::new(stores)),
    }];
    for em in others {
        parts.push(workers::Part {
            em,
            // OSCORE requests (POST or FETCH outside) go to worker 0; the others refuse plain ones as worker
            // 0 does when OSCORE is required.
            guard: config
                .oscore
                .as_ref()
                .map(|o| guard(o.require.then(|| corral_oscore::OscoreLayer::serving(Vec::new(), true)), o)),
            mount: config.mount_em.clone(),
            rd: None,
            store: None,
        });
    }
    parts
}

/// The addresses clients use for a gateway bound to `local`: members `coap://<one of these>/em/<name>`
/// are this gateway's own entities.
fn local_addrs(local: SocketAddr) -> Vec<SocketAddr> {
    let p = local.port();
    match local.ip() {
        IpAddr::V6(ip) if ip.is_unspecified() => {
            vec![
                SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), p),
                SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), p),
            ]
        }
        IpAddr::V4(ip) if ip.is_unspecified() => vec![SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), p)],
        _ => vec![local],
    }
}

/// The address after `a` (127.0.0.1 → 127.0.0.2), same port.
fn next_addr(a: SocketAddr) -> SocketAddr {
    match a.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)), a.port()),
        IpAddr::V6(ip) if ip.is_unspecified() || ip.is_loopback() => {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)), a.port())
        }
        IpAddr::V4(ip) => SocketAddr::new(IpAddr::V4(Ipv4Addr::from(u32::from(ip).wrapping_add(1))), a.port()),
        IpAddr::V6(ip) => SocketAddr::new(IpAddr::V6(Ipv6Addr::from(u128::from(ip).wrapping_add(1))), a.port()),
    }
}

/// Testbed devices that stored multicast entities count as joined, with their groups. The testbed's
/// devices are volatile — a restart starts them with an empty `/mc` — so the gateway asks them to join
/// again through `/mc`, as the EM did when the entity was created.
fn memberships(em: &EntityManager, devices: &[SocketAddr]) -> Vec<(SocketAddr, IpAddr)> {
    let mut out = Vec::new();
    for name in em.entity_names() {
        let Some(e) = em.entity(&name) else { continue };
        let Some(group) = e.group else { continue };
        for (member, joined) in e.profile.er.iter().zip(&e.joined) {
            if let (true, Ok(corral_group::uri::MemberUri::Coap { addr, .. })) =
                (*joined, corral_group::uri::parse(member))
            {
                if devices.contains(&addr) && !out.contains(&(addr, group)) {
                    out.push((addr, group));
                }
            }
        }
    }
    out
}

async fn rejoin_groups(joins: &[(SocketAddr, IpAddr)]) -> usize {
    if joins.is_empty() {
        return 0;
    }
    let Ok(client) = Client::builder().timeout(Duration::from_secs(5)).bind("0.0.0.0:0").await else {
        tracing::warn!("cannot open a socket to re-join testbed devices to their groups");
        return 0;
    };
    let mut ok = 0;
    for (dev, group) in joins {
        let bytes = match group {
            IpAddr::V4(g) => g.octets().to_vec(),
            IpAddr::V6(g) => g.octets().to_vec(),
        };
        let uri = format!("{}/mc?act=add", base_uri(*dev));
        match client.post(&uri).payload(bytes).await {
            Ok(r) if r.code == Code::CHANGED => ok += 1,
            Ok(r) => tracing::warn!(device = %dev, %group, code = %r.code, "testbed device refused to re-join"),
            Err(e) => tracing::warn!(device = %dev, %group, error = %e, "testbed device did not re-join"),
        }
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert_eq!(next_addr(a("127.0.0.1:5683")), a("127.0.0.2:5683"));
        assert_eq!(next_addr(a("[::]:5700")), a("127.0.0.2:5700"));
        assert_eq!(local_addrs(a("[::]:5683")), vec![a("127.0.0.1:5683"), a("[::1]:5683")]);
        assert_eq!(local_addrs(a("10.1.2.3:5683")), vec![a("10.1.2.3:5683")]);
    }
}
