//! `corral proxy`: the multiparty forward proxy of seed 001 (corral-proxy) on a UDP socket, and with
//! `--tcp` over TCP too, until Ctrl-C or SIGTERM.

use crate::cli::exit::Failure;
use crate::cli::policy::parse_prefix;
use clap::Args;
use corral_gateway::proxy::{Proxy, ProxyConfig as Config};
use corral_proxy::{Destinations, Fib, ProxyConfig};
use corral_tokio::corral_proto::{Duration, Prefix};
use std::net::{IpAddr, ToSocketAddrs};
use std::path::PathBuf;

pub const AFTER_HELP: &str = "\
Clients send their requests to the proxy with the target in a Proxy-Uri option (corral get URI -P \
coap://PROXY, coap-client -P, aiocoap-client --proxy). The proxy answers from its cache when it \
can, attaches a request to an identical one already on its way (one upstream request, an answer \
for every client), and otherwise forwards by its FIB: the most specific rule's next hops each get \
a copy, the first success is forwarded and later answers are dropped; no rule means straight to \
the origin. Hop-Limit (RFC 8768; corral get -H N sets it) ends forwarding loops with 5.08. GET \
/proxy shows its counters, GET /proxy/fib its FIB, GET /proxy/cache what it caches (JSON; this \
machine only, as DELETE /proxy/cache, which purges it). With --http the same as /api/proxy… and a \
console page at /.

A FIB file (TOML):
  [hosts]          # names a Proxy-Uri may use (the proxy has no DNS)
  sensor = \"10.0.0.7\"

  [[rule]]         # two forwarders: a copy to each, first answer wins
  match = \"coap://sensor/temp/**\"   # * = one segment, a final ** = any
  next = [\"coap://10.0.1.1:5683\", \"coap://10.0.1.2:5683\"]

  [[rule]]         # the origin itself: rewritten to Uri-* options
  match = \"/light/*\"                # a path alone: any server
  next = [{ to = \"coap://10.0.0.9\", send_host = false }]

send_host (default true) keeps the Proxy-Uri for another proxy; false sends the origin a plain \
request. A rule's next hop may be a Resource Directory lookup instead (with --rd URI):
  [[rule]]         # every device the directory lists with rt=temperature
  match = \"/temp/**\"
  next = [\"rd:rt=temperature\"]
The proxy observes the directory's /rd-lookup/res?rt=temperature and makes the endpoints it lists \
the rule's next hops (plain requests, at most --rd-max-next-hops), as devices register and leave; \
/proxy lists such rules under \"directory\".

Where clients from other hosts may make the proxy send (--dest-net, --dest-port, \
--dest-this-host, or in the FIB file; the command line adds to the file):
  [destinations]
  networks = [\"10.0.0.0/8\"]   # default: any address...
  ports = [5683]             # ...on port 5683
  this_host = false          # ...never this host's own addresses (default)
Clients on this host may reach any unicast address; nobody reaches a broadcast address, nor a \
multicast one unless --allow-group opens it. A refused destination is answered 4.03 at once, naming \
the rule, before anything is sent. The next hops of FIB rules are yours and are not checked.

One request to a group (draft-ietf-core-groupcomm-proxy): with --allow-group, a target whose host \
(or FIB rule's first next hop) is an allowed multicast group goes out as ONE multicast request; \
each member's answer within the client's Multicast-Timeout comes back as its own response with \
a Reply-From option naming the member (at most --group-answers of them). A client that did not \
send Multicast-Timeout gets 4.00 naming it; one that has not proved its address, an Echo \
challenge first.

Examples:
  corral proxy                     # [::]:5683, clients on this machine only
  corral proxy --bind 127.0.0.1:5700 --fib fib.toml --cache-entries 200
  corral proxy --allow 10.0.0.0/8 --dest-net 10.1.0.0/16 --tcp   # also over TCP
  corral get coap://127.0.0.1:5683/hello -P coap://127.0.0.1:5700
  corral proxy --bind 127.0.0.1:5700 --allow-group 224.0.1.187
  corral get coap://224.0.1.187/hello -P coap://127.0.0.1:5700 --mc-timeout 6

coaps:// (DTLS 1.2 PSK): --dtls --psk-file FILE accepts coaps:// clients on the proxy's own port (a \
datagram's first byte tells DTLS from CoAP); --peer-psk-file FILE holds the identity and key for each \
coaps:// origin or next hop, e.g. {\"coaps://10.0.0.7\": {\"identity\": \"proxy\", \"key\": \"secretPSK\"}}:
  corral proxy --bind 127.0.0.1:5700 --peer-psk-file peers.json
  corral get coaps://10.0.0.7/hello -P coap://127.0.0.1:5700   # coaps out
  corral proxy --bind 127.0.0.1:5700 --dtls --psk-file keys.json
  corral get coap://10.0.0.8/hello -P coaps://127.0.0.1:5700 -k key -u alice";

#[derive(Args, Debug)]
pub struct ProxyArgs {
    /// Address and port to listen on; [::] serves IPv4 and IPv6 on one socket.
    #[arg(long, value_name = "ADDR:PORT", default_value = "[::]:5683")]
    pub bind: String,
    /// Also accept CoAP over TCP clients (RFC 8323); without ADDR:PORT on the UDP address and port.
    #[arg(long, value_name = "ADDR:PORT", num_args = 0..=1, default_missing_value = "")]
    pub tcp: Option<String>,
    /// The FIB: forwarding rules and host names, TOML (see below). Without it every request goes straight
    /// to its origin.
    #[arg(long, value_name = "FILE")]
    pub fib: Option<PathBuf>,
    /// Responses the cache holds at most (seed 001 used 40).
    #[arg(long, value_name = "N", default_value_t = ProxyConfig::default().cache_entries)]
    pub cache_entries: usize,
    /// Bytes the cache holds at most (options and payloads).
    #[arg(long, value_name = "BYTES", default_value_t = ProxyConfig::default().cache_bytes)]
    pub cache_bytes: usize,
    /// Distinct requests waiting for an upstream answer at once; beyond it 5.03.
    #[arg(long, value_name = "N", default_value_t = ProxyConfig::default().max_pending)]
    pub max_pending: usize,
    /// Clients attached to one pending request at most; beyond it 5.03.
    #[arg(long, value_name = "N", default_value_t = ProxyConfig::default().max_waiters)]
    pub max_waiters: usize,
    /// Clients that may use the proxy (repeatable or comma-separated prefixes) [default: this machine].
    /// `--allow 0.0.0.0/0,::/0` opens it to everyone: an open proxy relays for anybody.
    #[arg(long, value_name = "PREFIX", value_delimiter = ',', value_parser = parse_prefix)]
    pub allow: Vec<Prefix>,
    /// Networks clients from other hosts may make the proxy send to (repeatable or comma-separated
    /// prefixes) [default: any address but this host's].
    #[arg(long, value_name = "PREFIX", value_delimiter = ',', value_parser = parse_prefix)]
    pub dest_net: Vec<Prefix>,
    /// Ports clients from other hosts may make the proxy send to (repeatable or comma-separated)
    /// [default: 5683].
    #[arg(long, value_name = "PORT", value_delimiter = ',')]
    pub dest_port: Vec<u16>,
    /// Let clients from other hosts reach this host's own addresses (loopback and its interfaces) too,
    /// within --dest-net and --dest-port: services that trust "this machine" then trust them.
    #[arg(long)]
    pub dest_this_host: bool,
    /// Multicast groups a client may reach with one request (repeatable or comma-separated prefixes, e.g.
    /// 224.0.1.187 or ff05::/16) [default: none]. The client must signal with Multicast-Timeout (corral
    /// get --mc-timeout) and prove its address; the proxy sends ONE multicast request and relays each
    /// member's answer with Reply-From naming it (draft-ietf-core-groupcomm-proxy).
    #[arg(long, value_name = "PREFIX", value_delimiter = ',', value_parser = parse_prefix)]
    pub allow_group: Vec<Prefix>,
    /// The IPv4 address of the interface group requests leave from (default: the routing table's choice),
    /// e.g. 127.0.0.1 for groups joined on loopback.
    #[arg(long, value_name = "ADDR", requires = "allow_group")]
    pub mcast_if: Option<std::net::Ipv4Addr>,
    /// Members' answers relayed per group request at most (the fan-out budget); later ones are dropped.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..))]
    pub group_answers: u16,
    /// Members' answers to group requests the cache holds at most (one per member and request). A later
    /// request still goes to the group; a member that does not answer it is answered from the cache.
    #[arg(long, value_name = "N", default_value_t = ProxyConfig::default().group_cache_entries)]
    pub group_cache_entries: usize,
    /// Bytes the cache of members' answers holds at most.
    #[arg(long, value_name = "BYTES", default_value_t = ProxyConfig::default().group_cache_bytes)]
    pub group_cache_bytes: usize,
    /// The longest a member's answer stays in that cache, whatever Max-Age it carried, e.g. 60, 5m.
    #[arg(long, value_name = "DURATION", default_value = "60",
          value_parser = crate::cli::units::secs(crate::cli::units::Range::up_to(crate::cli::units::DAY)))]
    pub group_cache_max_age: f64,
    /// Where the groups' members are (repeatable or comma-separated prefixes): their answers are cached
    /// from the first, and an answer from elsewhere is relayed but never cached (anyone on the link can
    /// answer a group request). Without it, an answer is cached once its address answered an earlier
    /// request to the group [default: none].
    #[arg(long, value_name = "PREFIX", value_delimiter = ',', value_parser = parse_prefix, requires = "allow_group")]
    pub group_member: Vec<Prefix>,
    /// Requests outstanding to one next hop at once (NSTART, RFC 7252 §4.7). A proxy carries many
    /// clients' requests to one server: with 1 they queue behind each other.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    pub nstart: u16,
    /// Give up on a next hop after this long and answer 5.04, e.g. 8, 2.5s. Keep it below your clients'
    /// patience (corral get waits 10s), or they time out before the proxy can tell them why.
    #[arg(long, value_name = "DURATION", default_value = "8",
          value_parser = crate::cli::units::secs(crate::cli::units::Range::positive(crate::cli::units::DAY)))]
    pub upstream_timeout: f64,
    /// Send upstream requests as NON instead of CON (no hop-wise retransmission).
    #[arg(long)]
    pub non_upstream: bool,
    /// How the proxy names itself in a 5.08 Hop Limit Reached [default: proxy@ADDR:PORT].
    #[arg(long, value_name = "TEXT")]
    pub name: Option<String>,
    /// The Resource Directory whose lookups the FIB's `rd:` rules follow, e.g. coap://127.0.0.1:5690.
    #[arg(long, value_name = "URI")]
    pub rd: Option<String>,
    /// Next hops of one `rd:` rule at most; a larger lookup result is cut (with a warning).
    #[arg(long, value_name = "N", default_value_t = ProxyConfig::default().max_rd_next_hops, requires = "rd")]
    pub rd_max_next_hops: usize,
    /// Print the start-up summary as one JSON object on stdout ({"udp", "tcp", "proxy_uri", "rules"}).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub http: crate::http::HttpArgs,
    #[command(flatten)]
    pub dtls: crate::cli::dtls::DtlsNodeArgs,
    #[command(flatten)]
    pub verified: crate::cli::policy::VerifiedNetArgs,
}

fn system_resolve(name: &str) -> Option<IpAddr> {
    (name, 0).to_socket_addrs().ok()?.next().map(|a| a.ip())
}

/// The destination policy: the FIB file's `[destinations]` and the options (which add to it), port 5683 when
/// neither names a port, and what this host is (its addresses, its networks' broadcast addresses). Also
/// whether the operator gave any of it.
fn destinations(args: &ProxyArgs, file: Option<Destinations>) -> (Destinations, bool) {
    let configured = file.is_some() || !args.dest_net.is_empty() || !args.dest_port.is_empty() || args.dest_this_host;
    let mut d = file.unwrap_or_default();
    d.networks.extend(&args.dest_net);
    d.ports.extend(&args.dest_port);
    if d.ports.is_empty() {
        d.ports.push(corral_tokio::uri::Scheme::Coap.default_port());
    }
    d.this_host_open |= args.dest_this_host;
    d.this_host = crate::cli::policy::this_machine();
    d.broadcasts = crate::cli::policy::host_networks().iter().filter_map(Prefix::broadcast).collect();
    (d, configured)
}

fn load_fib(path: &std::path::Path) -> Result<Fib, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::other(format!("cannot read the FIB {}: {e}", path.display())))?;
    Fib::parse(&text, &system_resolve).map_err(|e| Failure::usage(format!("{}: {e}", path.display())))
}

pub fn run(args: ProxyArgs, v: crate::cli::Verbosity) -> Result<(), Failure> {
    let (mut config, configured) = config(&args)?;
    let (rules, clients, destinations) =
        (config.fib.rules.len(), config.service.clients.clone(), config.service.destinations.clone());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::other(format!("cannot start the runtime: {e}")))?;
    rt.block_on(async move {
        let board = crate::http::Board::new(1);
        if let Some(mux) = &mut config.dtls {
            mux.watch = Some(board.dtls());
        }
        let window = args.http.bind("proxy", board.clone(), crate::http::this_machine())?;
        if window.is_some() {
            config.mount = Some(std::sync::Arc::new(move |server, proxy| {
                let watched = crate::http::watch::Watched::new(proxy, board.slot(0), crate::http::ProxyNumbers::of);
                server.mount_forward_proxy("proxy", watched);
            }));
        }
        let proxy = Proxy::start(config)?;
        let local = proxy.local_addr();
        let http = window.as_ref().and_then(|w| w.local_addr());
        if let Some(w) = window {
            w.proxy(crate::http::ProxySide { coap: crate::http::on_this_machine(local) }).spawn().await?;
        }
        let proxy_uri = corral_tokio::uri::base_uri(local);
        if args.json {
            let j = serde_json::json!({
                "udp": local.to_string(),
                "tcp": proxy.tcp_local_addr().map(|t| t.to_string()),
                "proxy_uri": proxy_uri,
                "rules": rules,
                "clients": clients.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
                "destinations": {
                    "networks": destinations.networks.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
                    "ports": destinations.ports,
                    "this_host": destinations.this_host_open,
                },
                "http": http.map(|a| a.to_string()),
            });
            out!("{j}");
        } else if !v.quiet {
            banner(&proxy, rules, &clients);
        }
        warn(&clients, &destinations, configured);
        crate::cli::wait_for_signal().await;
        tracing::info!("shutting down");
        proxy.stop().await;
        Ok(())
    })
}

/// The proxy's configuration from its arguments, and whether a destination policy was given.
fn config(args: &ProxyArgs) -> Result<(Config, bool), Failure> {
    let (bind, tcp) = crate::cli::server::listen_args(&args.bind, args.tcp.as_deref())?;
    let fib = match &args.fib {
        Some(p) => load_fib(p)?,
        None => Fib::default(),
    };
    let upstream_timeout = match args.upstream_timeout {
        s if s > 0.0 && s <= 86_400.0 => Some(Duration::from_secs_f64(s)),
        s => return Err(Failure::usage(format!("--upstream-timeout {s}: give 0 to 86400 seconds"))),
    };
    let dtls = args.dtls.mux()?;
    let rd = args.rd.as_deref().map(crate::cli::server::rd_addr).transpose()?;
    let clients = if args.allow.is_empty() { Prefix::loopback().to_vec() } else { args.allow.clone() };
    let (destinations, configured) = destinations(args, fib.destinations.clone());
    let service = ProxyConfig {
        name: args.name.clone().unwrap_or_else(|| format!("proxy@{bind}")),
        cache_entries: args.cache_entries,
        cache_bytes: args.cache_bytes,
        max_pending: args.max_pending.max(1),
        max_waiters: args.max_waiters.max(1),
        upstream_confirmable: !args.non_upstream,
        upstream_timeout,
        clients,
        destinations,
        groups: args.allow_group.clone(),
        max_group_answers: usize::from(args.group_answers),
        group_cache_entries: args.group_cache_entries,
        group_cache_bytes: args.group_cache_bytes,
        group_cache_max_age: args.group_cache_max_age as u32,
        group_members: args.group_member.clone(),
        rd,
        max_rd_next_hops: args.rd_max_next_hops.max(1),
        ..ProxyConfig::default()
    };
    let config = Config {
        tcp,
        service,
        nstart: args.nstart,
        verified_nets: args.verified.verified_nets(),
        mcast_if: args.mcast_if,
        dtls,
        ..Config::new(bind, fib)
    };
    Ok((config, configured))
}

/// The start-up summary for people.
fn banner(proxy: &Proxy, rules: usize, clients: &[Prefix]) {
    let local = proxy.local_addr();
    let proxy_uri = corral_tokio::uri::base_uri(local);
    out!("corral proxy: listening on {local}, {rules} FIB rule(s)");
    if let Some(t) = proxy.tcp_local_addr() {
        out!("corral proxy: CoAP over TCP on {t}");
    }
    let who: Vec<String> = clients.iter().map(|p| p.to_string()).collect();
    out!("  clients allowed: {}", who.join(", "));
    out!("try:\n  corral get coap://HOST/PATH -P {proxy_uri}\n  corral get {proxy_uri}/proxy     # counters (Ctrl-C stops)");
}

/// The start-up warnings: a proxy open to everyone, or to other hosts with no destination policy.
fn warn(clients: &[Prefix], destinations: &Destinations, configured: bool) {
    if clients.iter().any(Prefix::is_everything) {
        tracing::warn!("the proxy admits every client: anybody who reaches it can make it fetch on their behalf");
    }
    if destinations.admits_other_hosts(clients) && !configured {
        let ports: Vec<String> = destinations.ports.iter().map(u16::to_string).collect();
        tracing::warn!(
            "clients from other hosts may use the proxy and no destination policy is given: they may make it \
             send to port {} of any address but this host's; say where with --dest-net and --dest-port (or \
             [destinations] in the FIB)",
            ports.join(", ")
        );
    }
}
