//! `corral serve`: the demo and plugtest resources on a UDP socket until Ctrl-C or SIGTERM.

use crate::exit::Failure;
use crate::plugtest::{Echo, Hello, Plugtest, Stats};
use clap::Args;
use corral_tokio::{EndpointConfig, Limits, Server, TransmissionParams};
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

pub const AFTER_HELP: &str = "\
Resources: /hello /echo /stats (demo) and the ETSI plugtest set: /test /separate /seg1/seg2/seg3 /query
/location-query /validate /create1 /multi-format /link1 /link2 /link3 /path /path/sub1..3 /large
/large-update /large-create /obs /obs-non /obs-large (the last six are served plainly until block-wise
and Observe land). GET /.well-known/core lists them all.

Examples:
  corral serve                                  # [::]:5683, IPv4 and IPv6
  corral serve --bind 127.0.0.1:5700
  corral serve --join 224.0.1.187 --mcast-if 192.168.1.10   # also answer All-CoAP-Nodes multicast";

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address and port to listen on; [::] serves IPv4 and IPv6 on one socket.
    #[arg(short, long, value_name = "ADDR:PORT", default_value = "[::]:5683")]
    pub bind: String,
    /// Join a multicast group (repeatable): 224.0.1.187 and ff02::fd are "All CoAP Nodes".
    #[arg(long, value_name = "GROUP")]
    pub join: Vec<IpAddr>,
    /// IPv4 address of the interface on which to join IPv4 groups (default: the routing table's choice).
    #[arg(long, value_name = "ADDR")]
    pub mcast_if: Option<Ipv4Addr>,
    /// Interface index on which to join IPv6 groups (default: the kernel's choice).
    #[arg(long, value_name = "INDEX")]
    pub mcast_if6: Option<u32>,
    /// DEFAULT_LEISURE in seconds: the window over which multicast requests are answered (default 5).
    #[arg(long, value_name = "SECONDS")]
    pub leisure: Option<f64>,
    /// Peers with state the server remembers (a flood from more sources evicts idle ones).
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_peers)]
    pub max_peers: usize,
    /// Requests in progress at once; beyond it new requests get 5.03 Service Unavailable.
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_inbound_exchanges)]
    pub max_pending: usize,
}

pub fn run(args: ServeArgs, v: crate::client_cmd::Verbosity) -> Result<(), Failure> {
    let bind: SocketAddr = args
        .bind
        .parse()
        .map_err(|_| Failure::usage(format!("`{}` is not ADDR:PORT (e.g. [::]:5683 or 127.0.0.1:5683)", args.bind)))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::other(format!("cannot start the runtime: {e}")))?;
    rt.block_on(async move {
        let mut params = TransmissionParams::default();
        if let Some(l) = args.leisure {
            params.default_leisure = corral_tokio::corral_proto::Duration::from_secs_f64(l);
        }
        let limits = Limits {
            max_peers: args.max_peers.max(1),
            max_inbound_exchanges: args.max_pending.max(1),
            ..Limits::default()
        };
        let mut builder =
            Server::builder().endpoint_config(EndpointConfig { params, limits, ..EndpointConfig::default() });
        if let Some(a) = args.mcast_if {
            builder = builder.multicast_interface_v4(a);
        }
        if let Some(i) = args.mcast_if6 {
            builder = builder.multicast_interface_v6(i);
        }
        let mut server =
            builder.bind_addr(bind).map_err(|e| Failure::other(format!("cannot listen on {bind}: {e}")))?;
        for g in &args.join {
            server.join_group(*g).map_err(|e| Failure::other(format!("cannot join multicast group {g}: {e}")))?;
        }
        server.mount("", Plugtest::default()).mount("hello", Hello).mount("echo", Echo).mount("stats", Stats);
        let local = server.local_addr();
        let handle = server.spawn().map_err(|e| Failure::other(format!("cannot start the server: {e}")))?;
        print_banner(local, &args.join, v.quiet);
        wait_for_signal().await;
        tracing::info!("shutting down");
        handle.shutdown().await;
        Ok(())
    })
}

fn print_banner(local: SocketAddr, groups: &[IpAddr], quiet: bool) {
    let families = match local.ip() {
        IpAddr::V6(ip) if ip.is_unspecified() => " (IPv4 and IPv6)",
        _ => "",
    };
    let host = match local.ip() {
        IpAddr::V6(ip) if ip.is_unspecified() => "[::1]".to_string(),
        IpAddr::V4(ip) if ip.is_unspecified() => "127.0.0.1".to_string(),
        IpAddr::V6(ip) => format!("[{ip}]"),
        IpAddr::V4(ip) => ip.to_string(),
    };
    let base = if local.port() == 5683 { format!("coap://{host}") } else { format!("coap://{host}:{}", local.port()) };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "corral serve: listening on {local}{families}");
    for g in groups {
        let _ = writeln!(out, "  member of multicast group {g}");
    }
    if quiet {
        let _ = out.flush();
        return;
    }
    let _ = writeln!(
        out,
        "resources: demo /hello /echo /stats, ETSI plugtest /test /separate /validate /multi-format … (Ctrl-C stops)\n\
         try:\n  corral discover {base}\n  corral get {base}/hello\n  corral put {base}/test -e 'new value' -t text\n  \
         corral bench {base}/ --clients 8 --duration 5"
    );
    let _ = out.flush();
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
