//! `corral gateway`: the Entity Manager of seed 000 on a UDP socket, its entities in an SQLite database,
//! and with `--testbed N` a building of N virtual devices in the same process to talk to.
//!
//! Owns: choosing the data directory, binding, wiring corral-group's [`EntityManager`] into a
//! corral-tokio server, re-joining testbed devices to the groups of stored multicast entities, the
//! start-up summary and graceful shutdown. The Entity Manager itself is corral-group's, and so is the
//! topology of several workers (a manager and its replicas: `corral_group::gateway`); the devices are
//! [`crate::devices`].

use crate::client_cmd::Verbosity;
use crate::devices::{describe_range, parse_bind, parse_leisure, Fleet, FleetConfig};
use crate::exit::Failure;
use clap::Args;
use corral_group::{EmConfig, EntityManager, Store};
use corral_store::SqliteStore;
use corral_tokio::uri::base_uri;
use corral_tokio::{Client, Code};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

pub(crate) mod directory;
mod guard;
pub(crate) mod lock;
mod workers;

pub const AFTER_HELP: &str = "\
The gateway exposes groups of CoAP resources (entities) as one resource each under /em: create one \
with PUT /em/<name>, read it with GET /em/<name>?eo=avg, delete it with DELETE /em/<name>, or use \
`corral entity`. Multicast entities get a group address from 239.255.89.1-254 (IPv4 members) or \
ff1e::89:1… (IPv6) and their members join it through their /mc resource.

Examples:
  corral gateway --testbed 20    # on 127.0.0.1:5683, devices on 127.0.0.2 …
  corral gateway --bind 127.0.0.1:5683 --data /var/lib/corral
  corral gateway --testbed 5 --leisure 500ms --data /tmp/demo   # scratch data
  corral entity create room1 coap://127.0.0.2/s/t coap://127.0.0.3/s/t
  corral entity use room1
  corral gateway --testbed 5 --rd    # devices register with its directory
  corral entity create temps --from-rd 'rt=temperature'

Data: entities, members, multicast memberships and the address allocator live in DIR/em.db \
(SQLite, WAL, synchronous=FULL). A change is on disk before it is answered, so a restart, a crash \
or kill -9 loses nothing. Default DIR: $XDG_DATA_HOME/corral/gateway, i.e. \
~/.local/share/corral/gateway, or …/corral/testbed with --testbed, so that the demo building never \
mixes with a real one. One gateway per DIR: a second one exits naming the first's PID.

Testbed: devices are volatile (a restart starts them with an empty /mc); the gateway re-joins them \
to the groups of its stored multicast entities when it starts. They accept /mc changes from this \
machine only.

Workers (--workers N, Linux): N endpoints share the port in one SO_REUSEPORT group. A classic BPF \
program steers each datagram by its CoAP header: ACKs, RSTs and responses to the worker whose \
message ID or token they echo (each worker sends from its own slice of both), GETs by a hash of \
the client's address and port (so a client's retransmissions and observations stay on one worker), \
and every other request to worker 0, which makes all changes. Start-up fails if probes show the \
steering is off. The per-entity exchange quota is shared among the workers; the per-client quota \
holds as configured.

Running a gateway safely: the gateway sends requests on its clients' behalf, so it decides who may \
use it and where it may send.
- Access (--allow ROLE=PREFIX,...): read (list, profiles, read and observe entities) < actuate \
(also PUT/POST to entities) < manage (also create, change, delete). Default: manage from this \
machine (loopback and its own addresses) and nothing for anyone else; the gateway warns at start-up \
when it listens beyond loopback that way, and when a rule opens it to everyone (0.0.0.0/0 or ::/0).
- Members (--member-net, --member-port): where entities' members may be. Default: the networks of \
this host's interfaces and loopback, port 5683 (and the testbed's port); never the gateway itself \
or a broadcast address. Refusals are 4.03 naming the member.
- Budget (--budget N): member requests one client request may cause, through nesting and other \
gateways [64]. Quotas: 256 member exchanges per client (its address and port once its address is \
verified: loopback, --verified-net, coaps://, an Echo returned; else its address), 1,024 for all \
clients at one address (a host, a NAT), 512 per entity at once (5.03 + Max-Age), each given back as \
its member request ends; readers may pace a use by at most 1 s.
- Proof of address: beyond loopback, a client's first use and each change or actuation get 4.01 \
with an Echo value first (RFC 9175); corral's and libcoap's clients repeat with it by themselves, \
a spoofer never sees it. A remote manage or actuate role still rests on its address: the gateway \
warns, and --credentials with --require-oscore-remote makes remote changes need OSCORE.
- --policy FILE: the same as TOML, e.g.
      [access]
      manage = [\"127.0.0.0/8\", \"::1\"]
      read   = [\"10.1.0.0/16\"]
      [members]
      networks = [\"10.1.0.0/16\"]
      ports    = [5683]
      [budget]
      datagrams = 64";

#[derive(Args, Debug)]
pub struct GatewayArgs {
    /// Address and port to listen on [default: [::]:5683 (IPv4 and IPv6); with --testbed 127.0.0.1:5683].
    #[arg(long, value_name = "ADDR:PORT")]
    pub bind: Option<String>,
    /// Directory of the entity database (DIR/em.db); created if missing.
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// Serve OSCORE-protected requests (RFC 8613) from the clients this credentials file (aiocoap's
    /// format) lists.
    #[arg(long, value_name = "FILE")]
    pub credentials: Option<PathBuf>,
    /// With --credentials: refuse every request to /em that is not OSCORE-protected (4.01). A gateway that
    /// listens beyond loopback without it warns at start-up.
    #[arg(long, requires = "credentials")]
    pub require_oscore: bool,
    /// With --credentials: refuse changes and actuations (every request but GET) from beyond loopback that
    /// are not OSCORE-protected (4.01), so that remote manage and actuate roles rest on keys, not on
    /// addresses; remote clients may still read with plain CoAP as --allow says.
    #[arg(long, requires = "credentials")]
    pub require_oscore_remote: bool,
    /// Also run N virtual devices in this process, on consecutive loopback addresses.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub testbed: Option<u32>,
    /// Address of the first testbed device [default: the address after the gateway's, same port].
    #[arg(long, value_name = "ADDR:PORT", requires = "testbed")]
    pub testbed_from: Option<String>,
    /// Multicast slots of each testbed device's /mc.
    #[arg(long, value_name = "K", default_value_t = corral_group::mc::DEFAULT_SLOTS, requires = "testbed")]
    pub mc_slots: usize,
    /// Seed of the testbed's sensor values (device i uses SEED+i).
    #[arg(long, value_name = "S", default_value_t = 1, requires = "testbed")]
    pub seed: u64,
    /// Append a JSON line per request a testbed device receives to FILE (see `corral device --help`).
    #[arg(long, value_name = "FILE", requires = "testbed")]
    pub request_log: Option<PathBuf>,
    /// IPv4 address of the interface multicast requests leave from [default: 127.0.0.1 when the gateway
    /// is on loopback or runs a testbed, otherwise the routing table's choice].
    #[arg(long, value_name = "ADDR")]
    pub mcast_if: Option<Ipv4Addr>,
    /// Interface index for IPv6 multicast requests [default: the kernel's choice].
    #[arg(long, value_name = "INDEX")]
    pub mcast_if6: Option<u32>,
    /// Port multicast requests go to, for devices that listen for their groups on a port other than their
    /// own [default: the members' port, which the members of a multicast entity must share]. Also the
    /// port of the testbed devices' group sockets.
    #[arg(long, value_name = "PORT")]
    pub mcast_port: Option<u16>,
    /// Multicast leisure: how long members spread their answers and the EM collects them, e.g. 5, 300ms
    /// (seed 000: 5s). Also the testbed devices' leisure.
    #[arg(long, value_name = "DURATION", value_parser = parse_leisure)]
    pub leisure: Option<f64>,
    /// Serve with N workers (Linux), each a thread with its own endpoint and Entity Manager on one
    /// shared port. Worker 0 manages: it gets every request but GET (creations, changes, deletions,
    /// actuations, OSCORE) and owns the database; the others serve reads and observations of entities
    /// from the table it publishes. The kernel hands each worker the answers to its own member requests
    /// (see "Workers" below).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=64))]
    pub workers: u8,
    /// Requests outstanding to one member at once (NSTART, RFC 7252 §4.7), per worker. 1, RFC 7252's
    /// default, suits constrained devices; with it, many clients' uses of one member queue behind each
    /// other. Raise it for members that can take more (servers on a LAN, other gateways).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub nstart: u16,
    /// How workers wait for datagrams: `blocking` (the default on Linux) sleeps inside the receive call;
    /// `tokio` runs an async runtime per worker. For comparing the two (scripts/bench-gateway.sh).
    #[arg(long, value_enum, value_name = "DRIVER", hide_short_help = true)]
    pub driver: Option<crate::serve::Driver>,
    /// Print the start-up summary as one JSON object on stdout (addresses, database, entities).
    #[arg(long)]
    pub json: bool,
    /// Also serve a Resource Directory (RFC 9176: /rd, /rd-lookup/ep, /rd-lookup/res, as `corral rd`) on
    /// the gateway's endpoint, its registrations in DIR/rd.db. Entities created with --from-rd and no
    /// --rd follow it; with --testbed, the devices register with it. One worker only.
    #[arg(long)]
    pub rd: bool,
    /// With --rd: which registrations the directory accepts (as `corral rd --rd-policy`).
    #[arg(long, value_enum, value_name = "POLICY", default_value_t, requires = "rd")]
    pub rd_policy: directory::RdPolicy,
    #[command(flatten)]
    pub policy: crate::policy_args::PolicyArgs,
    #[command(flatten)]
    pub http: crate::http::HttpArgs,
    #[command(flatten)]
    pub dtls: crate::dtls_args::DtlsNodeArgs,
    #[command(flatten)]
    pub verified: crate::policy_args::VerifiedNetArgs,
}

/// The default data directory (see [`AFTER_HELP`]).
pub fn default_data_dir(testbed: bool) -> PathBuf {
    data_dir_for(if testbed { "testbed" } else { "gateway" })
}

/// `$XDG_DATA_HOME/corral/LEAF` (or `~/.local/share/corral/LEAF`, or `./corral-data/LEAF`): where a
/// service of this binary keeps its database unless told otherwise.
pub fn data_dir_for(leaf: &str) -> PathBuf {
    let base = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|h| PathBuf::from(h).join(".local/share")));
    match base {
        Some(b) => b.join("corral").join(leaf),
        None => PathBuf::from("corral-data").join(leaf),
    }
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

pub fn run(args: GatewayArgs, v: Verbosity) -> Result<(), Failure> {
    let testbed = args.testbed.map(|n| n as usize);
    let bind = match (&args.bind, testbed) {
        (Some(b), _) => parse_bind(b)?,
        (None, Some(_)) => SocketAddr::from((Ipv4Addr::LOCALHOST, 5683)),
        (None, None) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 5683)),
    };
    let data = args.data.clone().unwrap_or_else(|| default_data_dir(testbed.is_some()));
    std::fs::create_dir_all(&data)
        .map_err(|e| Failure::other(format!("cannot create the data directory {}: {e}", data.display())))?;
    // One gateway per directory: held until this process ends (the kernel drops it even after kill -9).
    let _lock = lock::DataLock::take(&data)?;
    let db = data.join("em.db");
    let store = SqliteStore::open(&db)
        .map_err(|e| Failure::other(format!("cannot open the entity database {}: {e}", db.display())))?;
    let snapshot =
        store.load().map_err(|e| Failure::other(format!("cannot load the entities of {}: {e}", db.display())))?;

    // --rd: the directory beside the Entity Manager, on worker 0's endpoint.
    let rd = match args.rd {
        false => None,
        true if args.workers > 1 => {
            return Err(Failure::usage("--rd serves the directory from one worker: drop --workers, or run `corral rd`"))
        }
        true if testbed.is_some() && bind.port() == 0 => {
            return Err(Failure::usage(
                "--rd with --testbed: give --bind a port, so that the devices know where to register",
            ))
        }
        true => Some(directory::open_directory(&data, corral_rd::Limits::default(), args.rd_policy)?.0),
    };
    // The testbed first, so that entities loaded from the store find their members answering.
    let fleet = match testbed {
        Some(n) => {
            let first = match &args.testbed_from {
                Some(s) => parse_bind(s)?,
                None => next_addr(bind),
            };
            let cfg = FleetConfig {
                mc_slots: args.mc_slots,
                seed: args.seed,
                leisure: args.leisure.map(Duration::from_secs_f64),
                mcast_port: args.mcast_port,
                request_log: args.request_log.clone(),
                // With --rd, the devices register with the gateway's own directory (bound below; they
                // retry until it answers).
                rd: rd.as_ref().map(|_| (gateway_contact(bind), TESTBED_RD_LIFETIME)),
                ..FleetConfig::new(first, n, crate::policy_args::this_machine())
            };
            Some(Fleet::start(cfg).map_err(|e| Failure::other(format!("testbed: {e}")))?)
        }
        None => None,
    };

    let loopback = bind.ip().is_loopback();
    let socket = corral_tokio::socket::SocketOptions {
        multicast_if_v4: args.mcast_if.or_else(|| (loopback || fleet.is_some()).then_some(Ipv4Addr::LOCALHOST)),
        multicast_if_v6: args
            .mcast_if6
            .or_else(|| (bind.ip() == IpAddr::V6(Ipv6Addr::LOCALHOST)).then_some(1))
            .unwrap_or(0),
        ..Default::default()
    };
    let dtls = args.dtls.mux()?;
    let driver = match (&dtls, args.driver) {
        // The DTLS layer sits in the tokio driver.
        (Some(_), None) => crate::serve::Driver::Tokio,
        (Some(_), Some(d)) if d != crate::serve::Driver::Tokio || args.workers > 1 => {
            return Err(Failure::usage("--dtls and --peer-psk-file need one worker on the tokio driver"));
        }
        (_, d) => d.unwrap_or_else(workers::default_driver),
    };
    let mut endpoint = corral_tokio::corral_proto::EndpointConfig::default();
    endpoint.params.nstart = args.nstart;
    args.verified.apply(&mut endpoint);
    let mut bound = workers::bind(driver, bind, socket, endpoint, args.workers, fleet.is_some())?;
    let local = bound.local_addr();
    // The HTTP window's cross-proxy reaches the same coaps:// peers with the same credentials.
    let coaps_peers = dtls.as_ref().map(|m| m.peers.clone()).unwrap_or_default();
    let dtls_peers: Vec<SocketAddr> = coaps_peers.iter().map(|(a, _)| *a).collect();
    // The operator's window (--http) reads the workers' snapshots and the coaps:// socket's counters here.
    let board = crate::http::Board::new(usize::from(args.workers));
    if let Some(mut mux) = dtls {
        mux.watch = Some(board.dtls());
        bound.set_dtls_mux(mux)?;
    }

    let testbed_port = fleet.as_ref().and_then(|f| f.addrs().first()).map(|a| a.port());
    let mut policy = args.policy.resolve(local, testbed_port)?;
    // The operator named these coaps:// members' ports by giving their credentials.
    if !policy.members.ports.is_empty() {
        let ports = &mut policy.members.ports;
        for port in dtls_peers.iter().map(|a| a.port()) {
            if !ports.contains(&port) {
                ports.push(port);
            }
        }
    }
    // The operator's window (--http): the workers publish snapshots only when it is asked for. Its HTTP
    // guard checks each HTTP client's role before the window sends the matching /em request from its own
    // loopback socket, so that socket gets the manage role: an HTTP manager from another network is not
    // refused by the Entity Manager for the window's address (its quota is the window's, shared).
    let window = args.http.bind("gateway", board.clone(), policy.access.clone())?.map(|w| {
        w.gateway(crate::http::GatewaySide {
            coap: gateway_contact(local),
            members: policy.members.clone(),
            store: db.clone(),
            coaps_peers,
        })
    });
    if let Some(w) = &window {
        policy.access.sockets.extend(w.client_sockets().into_iter().map(|a| (a, corral_group::policy::Role::Manage)));
    }
    let wall_ms =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
    let mut em_config = EmConfig {
        local_addrs: local_addrs(local),
        access: policy.access.clone(),
        members: policy.members.clone(),
        budget: policy.budget,
        // The driver's clock starts with the server (below): close enough for a quarantine of minutes.
        wall_clock_at_zero_ms: wall_ms,
        // Beyond loopback, work and changes need proof of the source's address (issue 26).
        challenge_unverified: true,
        // A creation with a silent member answers within a client's patience (issue 27).
        management_wait: Some(corral_group::em::MANAGEMENT_WAIT),
        // Entities with fromRd and no rd follow the gateway's own directory.
        rd: args.rd.then(|| gateway_contact(local)),
        dtls_members: dtls_peers,
        ..EmConfig::default()
    };
    if let Some(q) = policy.quarantine {
        em_config.quarantine = corral_proto::Duration::from_secs(q);
    }
    em_config.multicast_port = args.mcast_port;
    if let Some(l) = args.leisure {
        em_config.multicast_leisure = corral_proto::Duration::from_secs_f64(l);
    }
    let mcast_port = em_config.multicast_port;
    let workers = args.workers;
    let mut ems =
        corral_group::gateway::entity_managers(em_config, snapshot, workers, || corral_tokio::os_seed() as u32)
            .map_err(|e| Failure::other(format!("cannot load the entities of {}: {e}", db.display())))?
            .into_iter();
    let em = ems.next().expect("a gateway has a worker 0");
    let names = em.entity_names();
    let rejoin = fleet.as_ref().map(|f| memberships(&em, f.addrs())).unwrap_or_default();
    let mut contexts = match &args.credentials {
        Some(file) => Some(crate::credentials::Credentials::load(file)?.all()?),
        None => None,
    };
    let require_remote = args.require_oscore_remote;
    let guard = |oscore: Option<corral_oscore::OscoreLayer>| {
        args.credentials.is_some().then_some(guard::Guard { oscore, require_remote })
    };
    let mut parts = vec![workers::Part {
        em,
        guard: guard(contexts.take().map(|c| corral_oscore::OscoreLayer::serving(c, args.require_oscore))),
        watch: None,
        rd,
        store: Some(Box::new(
            corral_store::em_store_thread(store)
                .map_err(|e| Failure::other(format!("cannot start the entity database's thread: {e}")))?,
        )),
    }];
    for em in ems {
        parts.push(workers::Part {
            em,
            // OSCORE requests (POST or FETCH outside) go to worker 0; the others refuse plain ones as worker
            // 0 does when OSCORE is required.
            guard: guard(args.require_oscore.then(|| corral_oscore::OscoreLayer::serving(Vec::new(), true))),
            watch: None,
            rd: None,
            store: None,
        });
    }
    for (i, p) in parts.iter_mut().enumerate() {
        p.watch = window.as_ref().map(|_| board.slot(i));
    }
    let http = window.as_ref().and_then(|w| w.local_addr());
    let running = bound.start(parts)?;

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::other(format!("cannot start the runtime: {e}")))?;
    rt.block_on(async {
        if let Some(w) = window {
            w.spawn().await?;
        }
        let rejoined = rejoin_groups(&rejoin).await;
        let devices = fleet.as_ref().map(|f| f.addrs().to_vec()).unwrap_or_default();
        for w in &policy.warnings {
            tracing::warn!("{w}");
        }
        if !args.require_oscore && !args.require_oscore_remote {
            for w in policy.address_only_roles() {
                tracing::warn!("{w}");
            }
        }
        if !loopback && !args.require_oscore {
            tracing::warn!(
                "the gateway listens on {local} without --require-oscore: requests to /em are not authenticated \
                 end to end (the --allow policy checks addresses only)"
            );
        }
        if args.json {
            let j = serde_json::json!({
                "access": policy.access.rules.iter().map(|(p, r)| format!("{}={p}", r.as_str()))
                    .chain(policy.access.identities.iter()
                        .map(|(id, r)| format!("{}=psk:{}", r.as_str(), String::from_utf8_lossy(id))))
                    .collect::<Vec<_>>(),
                "dtls": args.dtls.dtls,
                "member_networks": policy.members.prefixes.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
                "member_ports": policy.members.ports,
                "budget": policy.budget.datagrams,
                "gateway": local.to_string(),
                "workers": workers,
                "uri": base_uri(gateway_contact(local)),
                "data": db.display().to_string(),
                "entities": names,
                "devices": devices.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
                "mcast_port": mcast_port,
                "rejoined": rejoined,
                "http": http.map(|a| a.to_string()),
                "rd": args.rd.then(|| data.join("rd.db").display().to_string()),
            });
            out!("{j}");
        } else {
            banner(local, workers, &db, &names, &devices, rejoin.len(), rejoined, v.quiet);
            if let Some(a) = http {
                out!("  http: http://{a}/ (/metrics, /healthz, /readyz, /api, /hc/coap://…)");
            }
            if args.rd {
                out!("  resource directory: /rd, /rd-lookup/res (registrations in {})", data.join("rd.db").display());
            }
            if args.dtls.dtls {
                out!(
                    "  coaps: DTLS 1.2 PSK on the same port ({})",
                    base_uri(gateway_contact(local)).replacen("coap", "coaps", 1)
                );
            }
        }
        crate::wait_for_signal().await;
        if !v.quiet && !args.json {
            say!("corral gateway: stopping (requests in progress get a second to finish)");
        }
        running.stop().await;
        Ok::<(), Failure>(())
    })?;
    if let Some(f) = fleet {
        f.shutdown();
    }
    Ok(())
}

/// The lifetime of the testbed devices' registrations with the gateway's directory (`--rd`), in seconds.
const TESTBED_RD_LIFETIME: u32 = 3600;

/// Where a client reaches a gateway bound to `local` on this machine.
fn gateway_contact(local: SocketAddr) -> SocketAddr {
    crate::http::on_this_machine(local)
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

#[allow(clippy::too_many_arguments)]
fn banner(
    local: SocketAddr,
    workers: u8,
    db: &std::path::Path,
    names: &[String],
    devices: &[SocketAddr],
    to_rejoin: usize,
    rejoined: usize,
    quiet: bool,
) {
    let families = match local.ip() {
        IpAddr::V6(ip) if ip.is_unspecified() => " (IPv4 and IPv6)",
        _ => "",
    };
    let shards = if workers > 1 { format!(", {workers} workers") } else { String::new() };
    out!("corral gateway: listening on {local}{families}{shards}");
    out!("  entities: {} in {}", names.len(), db.display());
    if !devices.is_empty() {
        out!("  testbed: {} virtual device(s) on {}", devices.len(), describe_range(devices));
        if to_rejoin > 0 {
            out!("  re-joined {rejoined} of {to_rejoin} testbed membership(s) of stored multicast entities");
        }
    }
    if quiet {
        return;
    }
    let contact = gateway_contact(local);
    let gw_flag = if base_uri(contact) == "coap://127.0.0.1" {
        String::new()
    } else {
        format!(" --gateway {}", base_uri(contact))
    };
    out!("Ctrl-C stops; entities survive restarts.");
    if devices.is_empty() {
        if local.ip().is_unspecified() {
            out!("devices on this machine: `--testbed N`, or run the gateway on one address (--bind 127.0.0.1:5683)");
            out!("  so that `corral device --count 3` can take 127.0.0.2 … on the same port");
        }
        out!("try (members are any CoAP resources, e.g. `corral device --count 3` on 127.0.0.2 …):");
        out!("  corral entity create room1 coap://127.0.0.2/s/t coap://127.0.0.3/s/t{gw_flag}");
        out!("  corral entity use room1{gw_flag}");
        out!("  corral entity list{gw_flag}");
        return;
    }
    let n = devices.len().min(3);
    let members =
        |path: &str| devices[..n].iter().map(|d| format!("{}{path}", base_uri(*d))).collect::<Vec<_>>().join(" ");
    out!("try:");
    out!("  corral entity create room1 {} --eo avg,min,max,lst{gw_flag}", members("/s/t"));
    out!("  corral entity use room1{gw_flag}                         # the average temperature");
    out!("  corral entity use room1 --eo lst --accept senml+json{gw_flag}");
    out!("  corral entity create lights {} --ect multicast --repair unicast{gw_flag}", members("/a/light"));
    out!("  corral entity use lights{gw_flag}                        # one multicast request");
    out!("  corral entity actuate lights on{gw_flag}                 # switch every light");
    out!("  corral entity list{gw_flag}");
    out!("  corral entity delete lights{gw_flag}");
    out!("  corral get {}/em/room1?eo=max                # plain CoAP works too", base_uri(contact));
    out!("  corral get '{}/em/room1?eo=avg' -s 300       # observe: a new average as readings move", base_uri(contact));
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

    #[test]
    fn data_dir_follows_xdg() {
        let d = default_data_dir(true);
        assert!(d.ends_with("corral/testbed"), "{}", d.display());
        assert!(default_data_dir(false).ends_with("corral/gateway"));
    }
}
