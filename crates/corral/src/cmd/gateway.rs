//! `corral gateway`: the Entity Manager of seed 000 on a UDP socket, its entities in an SQLite database,
//! and with `--testbed N` a building of N virtual devices in the same process to talk to.
//!
//! Owns: the command's arguments turned into corral-gateway's [`GatewayConfig`] (the gateway itself —
//! binding, workers, database, testbed — is [`Gateway::start`]'s), the HTTP window's side of it, the
//! start-up warnings and summary, and waiting for Ctrl-C.

use crate::cli::exit::Failure;
use crate::cli::server::{describe_range, parse_bind, parse_leisure};
use crate::cli::Verbosity;
use clap::Args;
use corral_gateway::gateway::{Oscore, Testbed};
use corral_gateway::{Gateway, GatewayConfig};
use corral_tokio::uri::base_uri;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

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

Several gateways, one truth (--store postgresql://…): the entities, groups, journal and counters (and \
with --rd, the registrations) live in a PostgreSQL database instead, which any number of gateways \
share; --data is then unused. The schema is made or migrated at start. A database that cannot be \
reached at start, or whose schema is newer than this corral, ends the gateway with exit status 9 and \
the URL (without its password) and the reason. E.g.
  corral gateway --store 'postgresql://corral@db.example/corral' \\
      --store-password-file /run/secrets/pg
  export PGHOST=/var/run/postgresql PGDATABASE=corral
  corral gateway --store postgres://    # all from the PG* variables

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
    /// Directory of the entity database (DIR/em.db); created if missing. Not with --store (the database
    /// keeps the state).
    #[arg(long, value_name = "DIR", conflicts_with = "store")]
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
    pub driver: Option<crate::cli::server::Driver>,
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
    pub rd_policy: crate::cli::server::RdPolicy,
    #[command(flatten)]
    pub store: crate::cli::server::StoreArgs,
    #[command(flatten)]
    pub policy: crate::cli::policy::PolicyArgs,
    #[command(flatten)]
    pub http: crate::http::HttpArgs,
    #[command(flatten)]
    pub dtls: crate::cli::dtls::DtlsNodeArgs,
    #[command(flatten)]
    pub verified: crate::cli::policy::VerifiedNetArgs,
}

/// The default data directory (see [`AFTER_HELP`]).
pub fn default_data_dir(testbed: bool) -> PathBuf {
    corral_gateway::data_dir_for(if testbed { "testbed" } else { "gateway" })
}

pub fn run(args: GatewayArgs, v: Verbosity) -> Result<(), Failure> {
    let bind = match (&args.bind, args.testbed) {
        (Some(b), _) => parse_bind(b)?,
        (None, Some(_)) => SocketAddr::from((Ipv4Addr::LOCALHOST, 5683)),
        (None, None) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 5683)),
    };
    let testbed_port = match &args.testbed_from {
        Some(s) => parse_bind(s)?.port(),
        None => bind.port(),
    };
    let policy = args.policy.resolve(bind, args.testbed.map(|_| testbed_port).filter(|p| *p != 0))?;
    // The operator's window (--http) reads the workers' snapshots and the coaps:// socket's counters here.
    let board = crate::http::Board::new(usize::from(args.workers));
    let window = args.http.bind("gateway", board.clone(), policy.access.clone())?;
    let dtls = args.dtls.mux()?;
    // The HTTP window's cross-proxy reaches the same coaps:// peers with the same credentials.
    let coaps_peers = dtls.as_ref().map(|m| m.peers.clone()).unwrap_or_default();
    let mut config = config(&args, bind, &policy)?;
    config.dtls = dtls.map(|mux| corral_tokio::DtlsMuxConfig { watch: Some(board.dtls()), ..mux });
    if let Some(w) = &window {
        // Its HTTP guard checks each HTTP client's role before the window sends the matching /em request
        // from its own loopback socket, so that socket gets the manage role: an HTTP manager from another
        // network is not refused by the Entity Manager for the window's address (its quota is the window's).
        let manage = w.client_sockets().into_iter().map(|a| (a, corral_group::policy::Role::Manage));
        config.access.sockets.extend(manage);
        // The workers publish snapshots only when the window is asked for.
        let board = board.clone();
        config.mount_em = Some(std::sync::Arc::new(move |i, node, em| {
            node.mount("em", crate::http::watch::Watched::new(em, board.slot(i), crate::http::EmNumbers::of));
        }));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::other(format!("cannot start the runtime: {e}")))?;
    rt.block_on(async {
        let gateway = Gateway::start(config).await?;
        let http = match window {
            Some(w) => {
                let side = crate::http::GatewaySide {
                    coap: gateway.contact(),
                    members: gateway.members().clone(),
                    store: PathBuf::from(gateway.store()),
                    coaps_peers,
                };
                let w = w.gateway(side);
                let at = w.local_addr();
                w.spawn().await?;
                at
            }
            None => None,
        };
        warn(&args, &policy, gateway.local_addr());
        if args.json {
            out!("{}", summary(&args, &policy, &gateway, http));
        } else if !v.quiet {
            banner(&args, &gateway, http);
        }
        crate::cli::wait_for_signal().await;
        if !v.quiet && !args.json {
            say!("corral gateway: stopping (requests in progress get a second to finish)");
        }
        gateway.stop().await;
        Ok::<(), Failure>(())
    })
}

/// The gateway's configuration from its arguments and resolved policy.
fn config(args: &GatewayArgs, bind: SocketAddr, policy: &crate::cli::policy::Policy) -> Result<GatewayConfig, Failure> {
    let testbed = args.testbed.map(|n| n as usize);
    let data = args.data.clone().unwrap_or_else(|| default_data_dir(testbed.is_some()));
    let oscore = match &args.credentials {
        Some(file) => Some(Oscore {
            contexts: crate::cli::credentials::Credentials::load(file)?.all()?,
            require: args.require_oscore,
            require_remote: args.require_oscore_remote,
        }),
        None => None,
    };
    let testbed = match testbed {
        Some(count) => Some(Testbed {
            count,
            first: args.testbed_from.as_deref().map(parse_bind).transpose()?,
            mc_slots: args.mc_slots,
            seed: args.seed,
            managers: crate::cli::policy::this_machine(),
            request_log: args.request_log.clone(),
        }),
        None => None,
    };
    Ok(GatewayConfig {
        access: policy.access.clone(),
        members: policy.members.clone(),
        testbed_ports_are_members: policy.default_ports,
        budget: policy.budget,
        quarantine: policy.quarantine.map(Duration::from_secs),
        testbed,
        mcast_if: args.mcast_if,
        mcast_if6: args.mcast_if6,
        mcast_port: args.mcast_port,
        leisure: args.leisure.map(Duration::from_secs_f64),
        workers: args.workers,
        nstart: args.nstart,
        driver: args.driver.map(Into::into),
        verified_nets: args.verified.verified_nets(),
        rd: args.rd.then(|| args.rd_policy.into()),
        oscore,
        store: args.store.location()?,
        ..GatewayConfig::new(bind, data)
    })
}

/// The start-up warnings: an open policy, remote roles resting on addresses, no end-to-end protection.
fn warn(args: &GatewayArgs, policy: &crate::cli::policy::Policy, local: SocketAddr) {
    for w in &policy.warnings {
        tracing::warn!("{w}");
    }
    if !args.require_oscore && !args.require_oscore_remote {
        for w in policy.address_only_roles() {
            tracing::warn!("{w}");
        }
    }
    if !local.ip().is_loopback() && !args.require_oscore {
        tracing::warn!(
            "the gateway listens on {local} without --require-oscore: requests to /em are not authenticated \
             end to end (the --allow policy checks addresses only)"
        );
    }
}

/// `--json`: the start-up summary as one object.
fn summary(
    args: &GatewayArgs,
    policy: &crate::cli::policy::Policy,
    gateway: &Gateway,
    http: Option<SocketAddr>,
) -> serde_json::Value {
    let members = gateway.members();
    serde_json::json!({
        "access": policy.access.rules.iter().map(|(p, r)| format!("{}={p}", r.as_str()))
            .chain(policy.access.identities.iter()
                .map(|(id, r)| format!("{}=psk:{}", r.as_str(), String::from_utf8_lossy(id))))
            .collect::<Vec<_>>(),
        "dtls": args.dtls.dtls,
        "member_networks": members.prefixes.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
        "member_ports": members.ports,
        "budget": policy.budget.datagrams,
        "gateway": gateway.local_addr().to_string(),
        "workers": args.workers,
        "uri": gateway.uri(),
        "data": gateway.store(),
        "entities": gateway.entities(),
        "devices": gateway.devices().iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        "mcast_port": args.mcast_port,
        "rejoined": gateway.rejoined().0,
        "http": http.map(|a| a.to_string()),
        "rd": args.rd.then(|| rd_store(args, gateway)),
    })
}

/// The start-up summary for people, with commands to try.
fn banner(args: &GatewayArgs, gateway: &Gateway, http: Option<SocketAddr>) {
    let local = gateway.local_addr();
    let families = match local.ip() {
        IpAddr::V6(ip) if ip.is_unspecified() => " (IPv4 and IPv6)",
        _ => "",
    };
    let shards = if args.workers > 1 { format!(", {} workers", args.workers) } else { String::new() };
    out!("corral gateway: listening on {local}{families}{shards}");
    out!("  entities: {} in {}", gateway.entities().len(), gateway.store());
    let devices = gateway.devices();
    if !devices.is_empty() {
        out!("  testbed: {} virtual device(s) on {}", devices.len(), describe_range(devices));
        let (rejoined, to_rejoin) = gateway.rejoined();
        if to_rejoin > 0 {
            out!("  re-joined {rejoined} of {to_rejoin} testbed membership(s) of stored multicast entities");
        }
    }
    if let Some(a) = http {
        out!("  http: http://{a}/ (/metrics, /healthz, /readyz, /api, /hc/coap://…)");
    }
    if args.rd {
        out!("  resource directory: /rd, /rd-lookup/res (registrations in {})", rd_store(args, gateway));
    }
    if args.dtls.dtls {
        out!("  coaps: DTLS 1.2 PSK on the same port ({})", gateway.uri().replacen("coap", "coaps", 1));
    }
    try_these(gateway);
}

/// Where the directory beside the gateway (`--rd`) keeps its registrations.
fn rd_store(args: &GatewayArgs, gateway: &Gateway) -> String {
    match args.store.store {
        Some(_) => gateway.store().to_string(),
        None => gateway.database().with_file_name("rd.db").display().to_string(),
    }
}

/// The commands to try on a gateway just started.
fn try_these(gateway: &Gateway) {
    let (local, devices) = (gateway.local_addr(), gateway.devices());
    let gw_flag =
        if gateway.uri() == "coap://127.0.0.1" { String::new() } else { format!(" --gateway {}", gateway.uri()) };
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
    out!("  corral get {}/em/room1?eo=max                # plain CoAP works too", gateway.uri());
    out!("  corral get '{}/em/room1?eo=avg' -s 300       # observe: a new average as readings move", gateway.uri());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_dir_follows_xdg() {
        let d = default_data_dir(true);
        assert!(d.ends_with("corral/testbed"), "{}", d.display());
        assert!(default_data_dir(false).ends_with("corral/gateway"));
    }
}
