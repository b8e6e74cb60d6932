//! The client verbs (`get`, `post`, …, modelled on libcoap's coap-client) and `discover`.

use crate::cli::exit::{ExitCode, Failure};
use crate::cli::output;
use crate::cli::parse_method;
use crate::cli::units;
// `corral entity` reaches these through this file until its own change moves it onto `cli`.
pub use crate::cli::Verbosity;
use clap::Args;
use corral_tokio::corral_proto::wire::link_format;
use corral_tokio::uri::{Host, Scheme};
use corral_tokio::{
    BlockConfig, Client, Code, ContentFormat, EndpointConfig, OptionNumber, RequestBuilder, Response, Token, Uri,
};
use serde_json::json;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

pub const AFTER_HELP: &str = "\
Examples:
  corral get coap://[::1]/hello
  corral get coap://127.0.0.1:5683/multi-format -A xml
  corral put coap://[::1]/test -e 'mode=on' -t text
  echo -n '{\"on\":true}' | corral post coap://[::1]/echo -f - -t json --json
  corral get coap://[::1]/test -O 2048,0xcafe -T a1b2 -N -v
  corral request -m put coap://[::1]/test -e on   # the method as a flag
  corral get coap://[::1]/obs -s 30            # observe for 30 s
  corral get coap://[::1]/obs -s 30 --json     # one JSON object per line
  corral get coap://[::1]/obs -s 1m --timestamps   # each line with its time
  corral get coap://[::1]/large -b 64          # block-wise, 64-byte blocks
  corral get coap://[::1]/large -o large.txt   # the payload into a file
  corral put coap://[::1]/large-update -f big.bin -b 1024 -B 60
  corral get coap+tcp://[::1]/hello            # CoAP over TCP (RFC 8323)
  corral get coaps+tcp://127.0.0.1/hello -C ca.pem   # over TLS (RFC 8323)
  corral get coap://10.0.0.7/temp -P coap://127.0.0.1:5700   # via a proxy
  corral get coap://127.0.0.1:5701/hello --credentials keys/client.json
  corral get coap://224.0.1.187/.well-known/core --mcast-if 192.168.1.10

Payloads larger than a block (1024 bytes, or -b) go block-wise (RFC 7959) and large responses are \
reassembled; a transfer that breaks off never prints a partial body. A text payload on standard \
output ends with a newline; -w adds one after every payload, also in -o files.
Formats (-t, -A): a number or a name: text, link, xml, octet-stream, json, cbor, senml+json, …
Durations (-B, -s) take a unit: 250ms, 2s, 1.5s, 2m; a bare number is seconds.
Exit status: 0 for 2.xx, 4 for 4.xx, 5 for 5.xx, 3 timeout or port unreachable, 6 block-wise \
transfer failed, 7 OSCORE verification or refusal, 2 usage, 1 other.";

pub const DISCOVER_HELP: &str = "\
Examples:
  corral discover coap://[::1]
  corral discover 'coap://[::1]?rt=Type1'   # RFC 6690 filtering on the server
  corral discover coap://127.0.0.1:5683 --json";

#[derive(Args, Debug)]
pub struct RequestArgs {
    /// coap://host[:port]/path?query; coap+tcp://… for CoAP over TCP, coaps://… over DTLS (-k/-u or
    /// -c/-j/-C), coaps+tcp://… over TLS (-C CA, and -c/-j for a client certificate) (IPv6 in brackets:
    /// coap://[::1]/x).
    pub uri: String,
    /// Payload text.
    #[arg(short = 'e', long, value_name = "TEXT")]
    pub payload: Option<String>,
    /// Payload from a file, or `-` for standard input.
    #[arg(short = 'f', long, value_name = "PATH|-", conflicts_with = "payload")]
    pub file: Option<String>,
    /// Content-Format of the payload: a number or a name (text, json, cbor, link, xml, octet-stream, …).
    #[arg(short = 't', long = "content-format", value_name = "FMT", value_parser = parse_format)]
    pub content_format: Option<ContentFormat>,
    /// Accept: the Content-Format wanted in the response.
    #[arg(short = 'A', long, value_name = "FMT", value_parser = parse_format)]
    pub accept: Option<ContentFormat>,
    /// Send a NON (non-confirmable) request instead of CON.
    #[arg(short = 'N', long)]
    pub non: bool,
    /// A raw option: NUM,TEXT or NUM,0xHEX (NUM may be a name such as Uri-Query). Repeatable.
    #[arg(short = 'O', long = "option", value_name = "NUM,VALUE", value_parser = parse_raw_option)]
    pub options: Vec<(OptionNumber, Vec<u8>)>,
    /// Token, in hex (up to 8 bytes).
    #[arg(short = 'T', long, value_name = "HEX", value_parser = parse_token)]
    pub token: Option<Token>,
    /// How long to wait (libcoap's -B), e.g. 10, 2.5s or 500ms; a bare number is seconds. For multicast:
    /// how long answers are collected; with -s: the wait for the first response. A block-wise transfer
    /// must complete within it.
    #[arg(short = 'B', long, visible_alias = "wait", value_name = "DURATION", default_value = "10",
          value_parser = units::secs(units::Range::positive(units::DAY)))]
    pub timeout: f64,
    /// Block size for block-wise transfer (RFC 7959), as libcoap's -b: SIZE is a power of two from 16 to
    /// 1024; NUM, the block to start at, must be 0. Asks the server for this size from the first request.
    #[arg(short = 'b', long = "block-size", value_name = "[NUM,]SIZE", value_parser = parse_block_size)]
    pub block_size: Option<usize>,
    /// Observe the resource (RFC 7641) for this long (libcoap's -s; a bare number is seconds): print the
    /// response and each notification as it arrives, then deregister and exit 0.
    #[arg(short = 's', long = "observe", value_name = "DURATION",
          value_parser = units::secs(units::Range::positive(units::DAY)))]
    pub observe: Option<f64>,
    /// With -s: start each notification's line with the time it arrived (UTC, RFC 3339 to the
    /// millisecond). With --json every notification carries it as "timestamp" anyway.
    #[arg(long, requires = "observe")]
    pub timestamps: bool,
    /// The method (libcoap's -m): get, post, put, delete, fetch, patch or ipatch. `corral request -m
    /// METHOD` takes any; after a verb (`corral put`) it must name the same method.
    #[arg(short = 'm', long, value_name = "METHOD", value_parser = parse_method)]
    pub method: Option<Code>,
    /// Write the received payload to FILE instead of standard output (libcoap's -o; `-` is standard
    /// output): the bytes as received, with -s each notification after the previous one.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
    /// Append a newline to every payload received (libcoap's -w), also in an -o file and after binary
    /// payloads. Without it a text payload on standard output ends with one anyway.
    #[arg(short = 'w', long = "newline")]
    pub newline: bool,
    /// The local address to send from (libcoap's -a), e.g. 127.0.0.5 or ::1 (UDP).
    #[arg(short = 'a', long = "local-addr", value_name = "ADDR")]
    pub local_addr: Option<IpAddr>,
    /// The local port to send from (libcoap's -p) [default: one the system picks] (UDP).
    #[arg(short = 'p', long = "local-port", value_name = "PORT")]
    pub local_port: Option<u16>,
    /// Hop-Limit option (RFC 8768, libcoap's -H): how many proxies may forward the request, 1 to 255; a
    /// proxy that would forward it further answers 5.08 Hop Limit Reached.
    #[arg(short = 'H', long = "hop-limit", value_name = "N",
          value_parser = clap::value_parser!(u8).range(1..=255))]
    pub hop_limit: Option<u8>,
    /// Print the whole response as JSON on stdout (code, options, payload as text or base64).
    #[arg(long)]
    pub json: bool,
    /// For multicast URIs: the IPv4 address of the interface to send from (default: the routing table's).
    #[arg(long, value_name = "ADDR")]
    pub mcast_if: Option<Ipv4Addr>,
    /// After each datagram received, keep polling the socket this many microseconds before sleeping:
    /// a block-wise transfer's next block usually comes back within it and is taken without a wake-up.
    /// Default: 200 on a machine with two or more CPUs, 0 on one (where spinning would delay the peer).
    #[arg(long, value_name = "MICROS", value_parser = clap::value_parser!(u64).range(0..=100_000))]
    pub busy_poll: Option<u64>,
    /// Send through this forward proxy (libcoap's -P): coap://, coaps:// (with -k/-u) or coap+tcp://HOST:PORT. The URI
    /// goes in a Proxy-Uri option; the proxy fetches it (`corral proxy` runs one).
    #[arg(short = 'P', long, value_name = "PROXY-URI")]
    pub proxy: Option<String>,
    /// With -P and a group URI (a multicast address, or a name the proxy's FIB maps to a group): the
    /// seconds the proxy collects the members' answers, sent as Multicast-Timeout
    /// (draft-ietf-core-groupcomm-proxy) [default for a multicast address: 6]. Every answer is printed with
    /// the member that sent it; the command ends a second after. Members wait up to their leisure (5 s by
    /// default) before answering.
    #[arg(long, value_name = "SECS", requires = "proxy", value_parser = clap::value_parser!(u32).range(0..=3600))]
    pub mc_timeout: Option<u32>,
    /// Protect the request end to end with OSCORE (RFC 8613), with the context this credentials file
    /// (aiocoap's format) gives for the URI. Exit status 7 if the response does not verify. A Group OSCORE
    /// member's context (corral oscore group) signs the request in group mode, which is also how a
    /// multicast request is protected: each answer is verified on its own and one that does not verify is
    /// reported and left out.
    #[arg(long, value_name = "FILE")]
    pub credentials: Option<std::path::PathBuf>,
    /// With a Group OSCORE entry in --credentials: send a deterministic request
    /// (draft-ietf-core-cacheable-oscore) — every member of the group sends the same bytes for the same
    /// GET, so a proxy between them and the server can aggregate and cache it; the server's signed answer
    /// verifies at each.
    #[arg(long, requires = "credentials")]
    pub deterministic: bool,
    /// With a Group OSCORE entry in --credentials: protect the request in pairwise mode for the member
    /// with this Sender ID (hex; `corral oscore group` numbers the servers from 00), with keys derived
    /// from both members' credentials and no signature — cheaper than group mode, readable by that
    /// member only.
    #[arg(long, value_name = "SENDER-ID", requires = "credentials", conflicts_with = "deterministic")]
    pub pairwise_with: Option<String>,
    #[command(flatten)]
    pub dtls: crate::cli::dtls::DtlsClientArgs,
}

#[derive(Args, Debug)]
pub struct DiscoverArgs {
    /// The server: coap://host[:port] (a query such as ?rt=foo filters on the server).
    pub uri: String,
    /// How long to wait (libcoap's -B), e.g. 10, 2.5s or 500ms; a bare number is seconds.
    #[arg(short = 'B', long, visible_alias = "wait", value_name = "DURATION", default_value = "10",
          value_parser = units::secs(units::Range::positive(units::DAY)))]
    pub timeout: f64,
    /// Print the links as JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_format(s: &str) -> Result<ContentFormat, String> {
    ContentFormat::parse(s)
        .ok_or_else(|| format!("unknown content format `{s}` (use a number or e.g. text, json, cbor)"))
}

fn parse_token(s: &str) -> Result<Token, String> {
    Token::from_hex(s).ok_or_else(|| format!("`{s}` is not a token: give up to 8 bytes in hex, e.g. a1b2"))
}

/// libcoap's `-b [num,]size`: size a power of two in 16..=1024; a start block other than 0 is not offered.
fn parse_block_size(s: &str) -> Result<usize, String> {
    let (num, size) = match s.split_once(',') {
        Some((n, sz)) => (Some(n.trim()), sz.trim()),
        None => (None, s.trim()),
    };
    if let Some(n) = num {
        match n.parse::<u32>() {
            Ok(0) => {}
            Ok(_) => return Err("starting at a block other than 0 is not supported; give SIZE or 0,SIZE".into()),
            Err(_) => return Err(format!("`{n}` is not a block number")),
        }
    }
    match size.parse::<usize>() {
        Ok(v) if (16..=1024).contains(&v) && v.is_power_of_two() => Ok(v),
        _ => Err(format!("`{size}` is not a block size: use 16, 32, 64, 128, 256, 512 or 1024")),
    }
}

fn parse_raw_option(s: &str) -> Result<(OptionNumber, Vec<u8>), String> {
    let (num, value) = s.split_once(',').unwrap_or((s, ""));
    let number = match num.trim().parse::<u16>() {
        Ok(n) => OptionNumber(n),
        Err(_) => OptionNumber::from_name(num.trim())
            .ok_or_else(|| format!("`{num}` is neither an option number nor a known option name"))?,
    };
    let bytes = match value.strip_prefix("0x") {
        Some(hex) if !hex.is_empty() => {
            if hex.len() % 2 != 0 {
                return Err(format!("hex value `{value}` has an odd number of digits"));
            }
            (0..hex.len() / 2)
                .map(|i| hex.get(2 * i..2 * i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
                .collect::<Option<Vec<u8>>>()
                .ok_or_else(|| format!("`{value}` is not valid hex"))?
        }
        _ => value.as_bytes().to_vec(),
    };
    Ok((number, bytes))
}

/// The largest request or response body the client handles: bodies travel block-wise and are held in
/// memory whole.
const MAX_BODY: usize = 64 << 20;

fn read_payload(args: &RequestArgs) -> Result<Option<Vec<u8>>, Failure> {
    let mut buf = Vec::new();
    let (result, what) = match (&args.payload, &args.file) {
        (Some(p), _) => return Ok(Some(p.clone().into_bytes())),
        (None, Some(f)) if f == "-" => {
            (std::io::stdin().take(MAX_BODY as u64 + 1).read_to_end(&mut buf), "standard input".to_string())
        }
        (None, Some(f)) => match std::fs::File::open(f) {
            Ok(file) => (file.take(MAX_BODY as u64 + 1).read_to_end(&mut buf), format!("`{f}`")),
            Err(e) => return Err(Failure::other(format!("cannot read `{f}`: {e}"))),
        },
        (None, None) => return Ok(None),
    };
    result.map_err(|e| Failure::other(format!("cannot read {what}: {e}")))?;
    if buf.len() > MAX_BODY {
        return Err(Failure::usage(format!("the payload from {what} is larger than {} MiB", MAX_BODY >> 20)));
    }
    Ok(Some(buf))
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::other(format!("cannot start the runtime: {e}")))
}

/// Where the client's socket is bound: `-a ADDR` and `-p PORT`, or a wildcard address of a family that
/// can reach `uri` (dual-stack when the host is a name).
#[derive(Debug, Clone, Copy, Default)]
struct Local {
    addr: Option<IpAddr>,
    port: Option<u16>,
}

/// A client socket bound as `local` says.
async fn client_for(
    uri: &Uri,
    timeout: Duration,
    (mcast_if, local): (Option<Ipv4Addr>, Local),
    busy_poll: Duration,
    (dtls, tls): (Option<corral_tokio::DtlsConfig>, Option<corral_tokio::TlsClientConfig>),
) -> Result<Client, Failure> {
    let block = BlockConfig { max_body: MAX_BODY, ..BlockConfig::default() };
    let socket = corral_tokio::socket::SocketOptions { busy_poll, ..Default::default() };
    let mut builder = Client::builder()
        .timeout(timeout)
        .endpoint_config(EndpointConfig { block, ..EndpointConfig::default() })
        .socket_options(socket);
    if let Some(ifaddr) = mcast_if {
        builder = builder.multicast_interface_v4(ifaddr);
    }
    if let Some(c) = dtls {
        builder = builder.dtls(c);
    }
    if let Some(c) = tls {
        builder = builder.tls(c);
    }
    let port = local.port.unwrap_or(0);
    let cannot = |at: SocketAddr, e: std::io::Error| Failure::other(format!("cannot open a UDP socket on {at}: {e}"));
    match local.addr {
        Some(ip) => builder.bind((ip, port)).await.map_err(|e| cannot(SocketAddr::new(ip, port), e)),
        None => builder.bind_reaching(&uri.host, port).await.map_err(|(at, e)| cannot(at, e)),
    }
}

/// The method a client verb sends: the verb's (`corral put`), which `-m` may repeat but not contradict,
/// or `-m`'s (`corral request`, GET without it).
fn method_of(verb: Option<Code>, m: Option<Code>) -> Result<Code, Failure> {
    match (verb, m) {
        (Some(v), Some(m)) if v != m => Err(Failure::usage(format!(
            "`corral {} … -m {}`: the verb already says {v}; drop -m, or use `corral request -m {}`",
            v.to_string().to_ascii_lowercase(),
            m.to_string().to_ascii_lowercase(),
            m.to_string().to_ascii_lowercase()
        ))),
        (Some(v), _) => Ok(v),
        (None, m) => Ok(m.unwrap_or(Code::GET)),
    }
}

/// `host:port` of a URI, for messages that name the peer.
fn peer_of(uri: &Uri) -> String {
    match &uri.host {
        Host::Ip(IpAddr::V6(ip)) => format!("[{ip}]:{}", uri.port),
        Host::Ip(ip) => format!("{ip}:{}", uri.port),
        Host::Name(n) => format!("{n}:{}", uri.port),
    }
}

/// A client error as a failure; a timeout names the peer that stayed silent.
fn failed(e: corral_tokio::Error, peer: &str, timeout: f64) -> Failure {
    match e {
        corral_tokio::Error::Timeout => Failure::new(
            ExitCode::Timeout,
            format!("no response from {peer} within {} (timeout)", units::show_secs(timeout)),
        ),
        e => Failure::from_client(e, timeout),
    }
}

/// `corral get|post|…` (`verb`), or `corral request` (`verb` None: the method is `-m`'s).
pub fn run(verb: Option<Code>, args: RequestArgs, v: Verbosity) -> Result<(), Failure> {
    let method = method_of(verb, args.method)?;
    let uri = corral_tokio::parse_uri(&args.uri).map_err(|e| Failure::usage(format!("invalid URI: {e}")))?;
    let local = Local { addr: args.local_addr, port: args.local_port };
    if !matches!(uri.scheme, Scheme::Coap | Scheme::Coaps) && (local.addr.is_some() || local.port.is_some()) {
        return Err(Failure::usage(format!(
            "-a/-p choose the UDP socket's address and port; a {}:// connection starts from one the system picks",
            uri.scheme
        )));
    }
    let multicast = matches!(uri.host, Host::Ip(ip) if ip.is_multicast());
    if multicast && (uri.scheme != Scheme::Coap || args.observe.is_some()) {
        return Err(Failure::usage("a multicast request goes over coap:// (UDP) and cannot be observed"));
    }
    let proxy = proxy_of(&args, multicast)?;
    // -k/-u are for the hop this client talks to: the proxy's scheme when there is one (the proxy reaches
    // a coaps:// target with credentials of its own).
    let hop = proxy.as_ref().map_or(uri.scheme, |p| p.scheme);
    args.dtls.check(hop)?;
    let credentials = match hop {
        Scheme::CoapsTcp => (None, Some(crate::cli::tls::client_config(&args.dtls)?)),
        _ => (args.dtls.config(), None),
    };
    let oscore = oscore_of(&args, &uri, method, multicast)?;
    let payload = read_payload(&args)?;
    let timeout = Duration::from_secs_f64(args.timeout);
    let peer = peer_of(proxy.as_ref().unwrap_or(&uri));
    let fail = |e| failed(e, &peer, args.timeout);
    let mut sink = output::Sink::new(args.output.as_deref(), args.newline);
    runtime()?.block_on(async {
        let busy = args.busy_poll.map_or_else(corral_tokio::socket::client_busy_poll, Duration::from_micros);
        let at = proxy.as_ref().unwrap_or(&uri);
        let client = client_for(at, timeout, (args.mcast_if, local), busy, credentials).await?;
        let mut req = client.request(method, &args.uri);
        if let Some(p) = &args.proxy {
            req = req.via_proxy(p);
        }
        if let Some(ctx) = oscore {
            req = req.oscore(ctx);
        }
        req = with_options(req, &args, payload);
        if let Some(secs) = args.observe {
            return observe(req, &args, secs, (v, &mut sink), &fail).await;
        }
        // One request to a group through the proxy: Multicast-Timeout T', answers collected for T' + 1 s.
        let group_timeout = args.mc_timeout.or(multicast.then_some(6)).filter(|_| proxy.is_some());
        if let Some(secs) = group_timeout {
            req = req.option_uint(OptionNumber::MULTICAST_TIMEOUT, u64::from(secs));
            let window = Duration::from_secs(u64::from(secs) + 1);
            let collecting = |t: Duration| format!("collecting the group's answers… {} s of {}", t.as_secs(), secs + 1);
            let sent = std::time::Instant::now();
            let collected = output::with_progress(v.quiet, collecting, async {
                req.multicast_window(window).multicast().await?.collect_verified().await
            })
            .await
            .map_err(fail)?;
            return show_group(collected, (sent, secs), &args, v, &mut sink);
        }
        if multicast {
            let window = units::show_secs(args.timeout);
            let collecting = |t: Duration| format!("collecting answers… {} s of {window}", t.as_secs());
            let sent = std::time::Instant::now();
            let collected = output::with_progress(v.quiet, collecting, async {
                req.multicast_window(timeout).multicast().await?.collect_verified().await
            })
            .await
            .map_err(fail)?;
            return show_multicast(&collected, (sent, args.timeout), &args, v, &mut sink);
        }
        let (from, response) = output::send_showing_progress(req, v).await.map_err(fail)?;
        show((from, &response), &args, v, &mut sink, None)
    })
}

/// `--proxy`: the proxy's URI, checked against what goes through it.
fn proxy_of(args: &RequestArgs, multicast: bool) -> Result<Option<corral_tokio::Uri>, Failure> {
    Ok(match &args.proxy {
        None => None,
        Some(p) => {
            let proxy = corral_tokio::parse_uri(p)
                .map_err(|e| Failure::usage(format!("invalid --proxy (expected coap://HOST:PORT): {e}")))?;
            if proxy.scheme == Scheme::CoapsTcp || !proxy.path.is_empty() {
                return Err(Failure::usage(format!(
                    "--proxy {p}: give the proxy as coap://, coaps:// or coap+tcp://HOST:PORT, without a path"
                )));
            }
            if (multicast || args.mc_timeout.is_some()) && (proxy.scheme != Scheme::Coap || args.credentials.is_some())
            {
                return Err(Failure::usage(
                    "a group request goes to the proxy over coap:// (UDP), without OSCORE (not supported yet)",
                ));
            }
            Some(proxy)
        }
    })
}

/// `--credentials`: the OSCORE context that protects this request, checked against the method and group.
fn oscore_of(
    args: &RequestArgs,
    uri: &corral_tokio::Uri,
    method: Code,
    multicast: bool,
) -> Result<Option<corral_tokio::oscore::SharedContext>, Failure> {
    Ok(match &args.credentials {
        None => None,
        Some(file) => {
            let creds = crate::cli::credentials::Credentials::load(file)?;
            let dir = creds.for_uri(&args.uri).or_else(|_| creds.for_uri(&uri.to_string()))?;
            if args.deterministic && !matches!(method, Code::GET | Code::FETCH) {
                return Err(Failure::usage("--deterministic: only GET and FETCH (safe requests) can be deterministic"));
            }
            if multicast && args.deterministic {
                return Err(Failure::usage(
                    "--deterministic: a deterministic request goes to one server (or a proxy), not to a multicast \
                     group; without --deterministic a group member's request is signed in group mode",
                ));
            }
            let ctx = match &args.pairwise_with {
                Some(kid) => crate::cli::credentials::pairwise_context(dir, kid)?,
                None => crate::cli::credentials::client_context(dir, args.deterministic)?,
            };
            if multicast && !ctx.protects_multicast() {
                return Err(Failure::usage(format!(
                    "{}: OSCORE protects a multicast request only in Group OSCORE's group mode: a group \
                     member's context (corral oscore group makes a group), without --pairwise-with",
                    file.display()
                )));
            }
            Some(corral_tokio::oscore::shared(ctx))
        }
    })
}

/// The request's options, formats, payload, token, type and block size from the arguments.
fn with_options(
    mut req: corral_tokio::RequestBuilder,
    args: &RequestArgs,
    payload: Option<Vec<u8>>,
) -> corral_tokio::RequestBuilder {
    for (n, value) in &args.options {
        req = req.option(*n, value);
    }
    if let Some(hops) = args.hop_limit {
        req = req.option_uint(OptionNumber::HOP_LIMIT, u64::from(hops));
    }
    if let Some(cf) = args.content_format {
        req = req.content_format(cf);
    }
    if let Some(cf) = args.accept {
        req = req.accept(cf);
    }
    if let Some(p) = payload {
        req = req.payload(p);
    }
    if let Some(t) = args.token {
        req = req.token(t);
    }
    if args.non {
        req = req.non();
    }
    if let Some(size) = args.block_size {
        req = req.block_size(size);
    }
    req
}

/// `-s DURATION`: the registration's response and each notification, until the time is up (then
/// deregister, exit 0), Ctrl-C or SIGTERM (deregister, exit 130), the server ends the observation, or an
/// error response ends it (exit 4 or 5).
async fn observe(
    req: RequestBuilder,
    args: &RequestArgs,
    secs: f64,
    (v, sink): (Verbosity, &mut output::Sink),
    fail: &impl Fn(corral_tokio::Error) -> Failure,
) -> Result<(), Failure> {
    let mut obs = req.observe().await.map_err(fail)?;
    let until = tokio::time::Instant::now() + Duration::from_secs_f64(secs);
    let mut first = true;
    let interrupted = crate::cli::wait_for_signal();
    tokio::pin!(interrupted);
    let mut stopped = None;
    loop {
        let next = async {
            match first {
                // The registration's response may be slow to come (up to -B): progress on a terminal.
                true => output::with_progress(v.quiet, |t| output::progress_line(t, None), obs.next_from()).await,
                false => obs.next_from().await,
            }
        };
        let item = tokio::select! {
            item = next => item,
            _ = tokio::time::sleep_until(until) => break,
            _ = &mut interrupted => {
                stopped = Some(Failure::interrupted("interrupted: the observation was deregistered"));
                break;
            }
        };
        let (from, response) = match item {
            None => {
                if !v.quiet {
                    say!("the server ended the observation");
                }
                return Ok(());
            }
            Some(Err(e)) => return Err(fail(e)),
            Some(Ok(r)) => r,
        };
        let arrived = output::timestamp(std::time::SystemTime::now());
        show((from, &response), args, v, sink, Some(&arrived))?;
        if first && !obs.is_registered() {
            if !v.quiet {
                say!("note: {} is not observable (its response carries no Observe option)", args.uri);
            }
            return Ok(());
        }
        first = false;
    }
    // Deregister explicitly (RFC 7641 §3.6), so the server stops at once; its answer is not shown. A second
    // Ctrl-C does not wait for it.
    tokio::select! {
        r = obs.cancel() => if let Err(e) = r {
            tracing::info!(error = %e, "deregistration got no answer");
        },
        _ = crate::cli::wait_for_signal(), if stopped.is_some() => {}
    }
    stopped.map_or(Ok(()), Err)
}

/// A response: one JSON object on a line with --json, else its payload (and with -v its code and options on
/// stderr). A notification — `arrived` says when — carries that time in JSON, and before its payload
/// with --timestamps, on a line of its own.
fn show(
    (from, r): (SocketAddr, &Response),
    args: &RequestArgs,
    v: Verbosity,
    sink: &mut output::Sink,
    arrived: Option<&str>,
) -> Result<(), Failure> {
    if args.json {
        let mut j = output::response_json(Some(from), r);
        if let Some(t) = arrived {
            j["timestamp"] = json!(t);
        }
        sink.line(&j.to_string())?;
    } else if v.verbose > 0 {
        say!("{}\n  (from {from})", output::response_head(r));
    }
    if r.code.is_error() {
        return Err(Failure::from_response(r.code, &r.payload));
    }
    if !args.json {
        let prefix = match arrived {
            Some(t) if args.timestamps => format!("{t} "),
            _ => String::new(),
        };
        sink.payload(&prefix, &r.payload, output::declares_text(&r.options), arrived.is_some())?;
    }
    Ok(())
}

/// The responses to a multicast request (with Group OSCORE, the member that signed each); those that failed
/// verification were logged with their source and are only counted.
fn show_multicast(
    collected: &corral_tokio::Collected,
    (sent, window): (std::time::Instant, f64),
    args: &RequestArgs,
    v: Verbosity,
    sink: &mut output::Sink,
) -> Result<(), Failure> {
    let (responses, refused) = (&collected.responses, collected.refused);
    let hex = |id: &[u8]| id.iter().map(|b| format!("{b:02x}")).collect::<String>();
    if args.json {
        let all: Vec<_> = responses
            .iter()
            .map(|r| {
                let mut j = output::response_json(Some(r.from), &r.response);
                if let (Some(m), Some(o)) = (&r.member, j.as_object_mut()) {
                    o.insert("oscore-member".into(), hex(m).into());
                }
                j
            })
            .collect();
        sink.line(&serde_json::Value::Array(all).to_string())?;
    } else {
        for r in responses {
            if v.verbose > 0 {
                say!("{}\n  (from {})", output::response_head(&r.response), r.from);
            }
            let member = r.member.as_deref().map(|m| format!(" (member {})", hex(m))).unwrap_or_default();
            sink.line(&format!("{}{member} {:#}: {}", r.from, r.response.code, r.response.payload_text()))?;
        }
    }
    if responses.is_empty() && refused > 0 {
        return Err(Failure::new(
            ExitCode::Security,
            format!("{refused} response(s) to the multicast request, none of which verified (OSCORE)"),
        ));
    }
    let short = window < corral_tokio::TransmissionParams::default().default_leisure.as_secs_f64();
    if responses.is_empty() {
        let hint =
            if short { " (servers may wait up to their leisure, 5 s by default, before answering: -B 5s)" } else { "" };
        return Err(Failure::new(
            ExitCode::Timeout,
            format!("no response to the multicast request within {}{hint}", units::show_secs(window)),
        ));
    }
    if !v.quiet && !args.json {
        match refused {
            0 => say!("{} response(s)", responses.len()),
            n => say!("{} response(s); {n} more did not verify (OSCORE) and are not shown", responses.len()),
        }
        // Servers spread their answers over their leisure (RFC 7252 §8.2: 5 s by default); a shorter window
        // loses the late ones without a word from anyone. Answers that all came early in the window (servers
        // with a short leisure) lost nothing: the note is for answers still arriving when it closed.
        let last =
            responses.iter().map(|r| r.arrived.saturating_duration_since(sent).as_secs_f64()).fold(0.0, f64::max);
        let still_arriving = last >= window * LATE_IN_WINDOW;
        if still_arriving && short {
            say!(
                "note: answers were collected for {}; servers may wait up to their leisure (5 s by default) \
                 before answering a multicast request, so -B 5s (--mc-timeout 5 through a proxy) or more collects them all",
                units::show_secs(window)
            );
        }
    }
    Ok(())
}

/// The share of a multicast window after which an answer is late: the note that a longer window collects
/// more is shown only when the last answer came after it (answers still coming in the second half of the
/// window; servers whose leisure ended well inside it lost nothing).
const LATE_IN_WINDOW: f64 = 0.5;

/// The answers a proxy relayed for a group request: each names its member in Reply-From and is shown as
/// that member's (as a multicast request's answers are); an answer without one is the proxy's own (a
/// refusal, or 5.04 when no member answered) and ends the command with its code.
fn show_group(
    mut collected: corral_tokio::Collected,
    (sent, secs): (std::time::Instant, u32),
    args: &RequestArgs,
    v: Verbosity,
    sink: &mut output::Sink,
) -> Result<(), Failure> {
    let own = collected.attribute_relayed();
    if collected.responses.is_empty() {
        if let Some(r) = own.filter(|r| r.code.is_error()) {
            return Err(Failure::from_response(r.code, &r.payload));
        }
        return Err(Failure::new(
            ExitCode::Timeout,
            format!("no member of the group answered through the proxy within {secs} s (--mc-timeout)"),
        ));
    }
    show_multicast(&collected, (sent, f64::from(secs)), args, v, sink)
}

pub fn discover(args: DiscoverArgs, v: Verbosity) -> Result<(), Failure> {
    let base = corral_tokio::parse_uri(&args.uri).map_err(|e| Failure::usage(format!("invalid URI: {e}")))?;
    let uri = Uri { path: vec![".well-known".into(), "core".into()], ..base };
    let timeout = Duration::from_secs_f64(args.timeout);
    let peer = peer_of(&uri);
    let (from, r) = runtime()?.block_on(async {
        let client = client_for(&uri, timeout, (None, Local::default()), Duration::ZERO, (None, None)).await?;
        output::send_showing_progress(client.get(&uri.to_string()), v).await.map_err(|e| failed(e, &peer, args.timeout))
    })?;
    if v.verbose > 0 {
        say!("{}\n  (from {from})", output::response_head(&r));
    }
    if r.code.is_error() {
        return Err(Failure::from_response(r.code, &r.payload));
    }
    if r.options.content_format().is_some_and(|cf| cf != ContentFormat::LINK_FORMAT) {
        return Err(Failure::other(format!(
            "{uri} answered with {} instead of application/link-format",
            r.options.content_format().map(|c| c.to_string()).unwrap_or_default()
        )));
    }
    let text = r.payload_text();
    let mut links = Vec::new();
    for link in link_format::parse(&text) {
        match link {
            Ok(l) => links.push(l),
            Err(e) => {
                if !v.quiet {
                    say!("warning: the link-format document is malformed after {} link(s): {e}", links.len());
                }
                break;
            }
        }
    }
    let joined = |l: &link_format::Link<'_>, name: &str| l.values(name).collect::<Vec<_>>().join(" ");
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let all: Vec<_> = links
            .iter()
            .map(|l| {
                let attrs: serde_json::Map<String, serde_json::Value> =
                    l.attrs().map(|(n, v)| (n.to_string(), v.map_or(json!(true), |v| json!(v)))).collect();
                json!({ "path": l.target(), "attributes": attrs })
            })
            .collect();
        let _ = writeln!(stdout, "{}", serde_json::Value::Array(all));
        return Ok(());
    }
    let header = ["PATH", "RT", "IF", "CT", "OBS", "TITLE"];
    let rows: Vec<[String; 6]> = links
        .iter()
        .map(|l| {
            [
                l.target().to_string(),
                joined(l, "rt"),
                joined(l, "if"),
                joined(l, "ct"),
                if l.has("obs") { "yes".into() } else { String::new() },
                l.value("title").unwrap_or_default().to_string(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                s.push_str(cell);
            } else {
                s.push_str(&format!("{cell:<w$}  "));
            }
        }
        s.trim_end().to_string()
    };
    let _ = writeln!(stdout, "{}", line(&header.map(String::from)));
    for row in &rows {
        let _ = writeln!(stdout, "{}", line(row));
    }
    if rows.is_empty() && !v.quiet {
        say!("(no resources listed)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_options() {
        assert_eq!(parse_raw_option("2048,0xcafe").unwrap(), (OptionNumber(2048), vec![0xca, 0xfe]));
        assert_eq!(parse_raw_option("15,a=b").unwrap(), (OptionNumber::URI_QUERY, b"a=b".to_vec()));
        assert_eq!(parse_raw_option("uri-query,x").unwrap(), (OptionNumber::URI_QUERY, b"x".to_vec()));
        assert_eq!(parse_raw_option("5").unwrap(), (OptionNumber::IF_NONE_MATCH, vec![]));
        assert!(parse_raw_option("nope,1").is_err());
        assert!(parse_raw_option("1,0xabc").is_err());
        assert!(parse_raw_option("70000,x").is_err());
    }
}
