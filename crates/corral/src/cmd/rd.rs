//! `corral rd`: a Resource Directory (RFC 9176, corral-rd) on a UDP socket, its registrations kept in an
//! SQLite file (or a PostgreSQL database several directories share: `--store`), until Ctrl-C or SIGTERM.

use crate::cli::exit::Failure;
use crate::cli::server::RdPolicy;
use clap::Args;
use corral_gateway::data_dir_for;
use corral_gateway::directory::{Directory, DirectoryConfig};
use corral_rd::Limits;
use corral_tokio::uri::base_uri;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

pub const AFTER_HELP: &str = "\
Interfaces (RFC 9176): POST /rd?ep=NAME[&d=SECTOR][&lt=SECONDS][&base=URI] with the device's links \
(application/link-format) registers and answers 2.01 with the registration's location /rd/ID; POST \
/rd/ID refreshes it (a new lt or base may be given), DELETE /rd/ID removes it, GET /rd/ID shows its \
links; an empty POST /.well-known/rd?ep=NAME registers what the sender's /.well-known/core lists \
(simple registration). GET /rd-lookup/ep and /rd-lookup/res look endpoints and resources up, filtered \
by any attribute (rt=temp*, ep=node1, d=floor2, …) and paged (page=N&count=M); both are observable. \
A registration lives lt seconds (90000 unless given, at most --max-lifetime) after its last refresh.

A name belongs to the address that registered it until its registration ends (first come, first \
remembered; held at most --max-lifetime unless refreshed); a change from beyond loopback must carry the \
Echo value its source was just given (the first attempt gets 4.01 with one, RFC 9175), so a spoofed \
datagram can neither take, hold nor rewrite a name, nor make the directory fetch from a victim. An \
address holds at most --max-per-source registrations (16) and its network (/24 or /56) \
--max-per-network (1024), so that a flood from a few hundred addresses leaves the directory to everyone \
else.

Identities (RFC 9176 §7): with --dtls --psk-file FILE (a JSON object {\"alice\": \"secretPSK\"}), coaps:// clients reach the directory on the same port; \
a name registered over coaps:// is bound to the PSK identity that registered it, and only that identity \
may update, remove or register it again (another gets 4.03, plain CoAP 4.01), from any address. \
--rd-policy identity takes registrations over coaps:// only; lookups stay open to plain CoAP.

Examples:
  corral rd                      # [::]:5683, data in ~/.local/share/corral/rd
  corral rd --bind 127.0.0.1:5690 --data /var/lib/corral-rd
  corral post 'coap://127.0.0.1:5690/rd?ep=n1&lt=600' -t link -e '</t>;rt=temp'
  corral get 'coap://127.0.0.1:5690/rd-lookup/res?rt=temp*'
  corral get 'coap://127.0.0.1:5690/rd-lookup/ep' -s 60     # observe
  corral device --rd coap://127.0.0.1:5690    # devices that register
  corral rd --dtls --psk-file psk.json --rd-policy identity
  corral rd --store 'postgresql://corral@db.example/corral'  # shared

Several directories, one database (--store postgresql://…, as `corral gateway --store`): the \
registrations live in PostgreSQL, which any number of directories share; --data is then unused. \
Unreachable at start, or a newer schema: exit status 9, naming the URL without its password.";

/// What --max-lifetime takes: a minute to the most `lt` can say (a u32 of seconds).
const LIFETIMES: crate::cli::units::Range = crate::cli::units::Range::between(
    std::time::Duration::from_secs(60),
    std::time::Duration::from_secs(u32::MAX as u64),
);

#[derive(Args, Debug)]
pub struct RdArgs {
    /// Address and port to listen on.
    #[arg(long, value_name = "ADDR:PORT", default_value = "[::]:5683")]
    pub bind: String,
    /// Directory of the registration database (DIR/rd.db); created if missing [default:
    /// $XDG_DATA_HOME/corral/rd, else ~/.local/share/corral/rd].
    #[arg(long, value_name = "DIR", conflicts_with = "store")]
    pub data: Option<PathBuf>,
    /// Registrations in all; a full directory answers 5.03.
    #[arg(long, value_name = "N", default_value_t = Limits::default().registrations)]
    pub max_registrations: usize,
    /// Registrations per source address; more answer 4.29. A commissioning tool that registers many
    /// devices from one address needs more.
    #[arg(long, value_name = "N", default_value_t = Limits::default().per_source)]
    pub max_per_source: usize,
    /// Registrations per source network (a /24 for IPv4, a /56 for IPv6); more answer 4.29.
    #[arg(long, value_name = "N", default_value_t = Limits::default().per_network)]
    pub max_per_network: usize,
    /// Bytes of memory all registrations may take (an address may take 1/256 of it, a network 1/8); a
    /// full directory answers 5.03.
    #[arg(long, value_name = "BYTES", default_value_t = Limits::default().memory)]
    pub max_memory: usize,
    /// The longest lifetime (lt) a registration may ask for, e.g. 90000, 25h; a longer one is refused
    /// 4.00 naming it [default: 90000 s, RFC 9176's default lifetime].
    #[arg(long, value_name = "DURATION", default_value = "90000",
          value_parser = crate::cli::units::secs(LIFETIMES))]
    pub max_lifetime: f64,
    /// Which registrations the directory accepts: `first-come` (anyone; a name is bound to the identity
    /// that registered it over coaps://, else to its address) or `identity` (coaps:// clients only).
    #[arg(long, value_enum, value_name = "POLICY", default_value_t)]
    pub rd_policy: RdPolicy,
    /// Print the start-up summary as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: crate::cli::server::StoreArgs,
    #[command(flatten)]
    pub dtls: crate::cli::dtls::DtlsNodeArgs,
    #[command(flatten)]
    pub verified: crate::cli::policy::VerifiedNetArgs,
}

pub fn run(args: RdArgs, v: crate::cli::Verbosity) -> Result<(), Failure> {
    let bind: SocketAddr = args.bind.parse().map_err(|_| {
        Failure::usage(format!("`{}` is not ADDR:PORT for --bind (e.g. [::]:5683 or 127.0.0.1:5690)", args.bind))
    })?;
    let config = DirectoryConfig {
        limits: Limits {
            registrations: args.max_registrations.max(1),
            per_source: args.max_per_source.max(1),
            per_network: args.max_per_network.max(1),
            memory: args.max_memory,
            max_lifetime: args.max_lifetime as u32,
            ..Limits::default()
        },
        policy: args.rd_policy.into(),
        verified_nets: args.verified.verified_nets(),
        dtls: args.dtls.mux()?,
        store: args.store.location()?,
        ..DirectoryConfig::new(bind, args.data.clone().unwrap_or_else(|| data_dir_for("rd")))
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::other(format!("cannot start the runtime: {e}")))?;
    rt.block_on(async move {
        let directory = Directory::start(config)?;
        announce(&args, directory.local_addr(), directory.store(), directory.restored(), v);
        crate::cli::wait_for_signal().await;
        tracing::info!("shutting down");
        directory.stop().await;
        Ok::<(), Failure>(())
    })
}

fn announce(args: &RdArgs, local: SocketAddr, db: &str, restored: usize, v: crate::cli::Verbosity) {
    let base = base_uri(local);
    let mut out = std::io::stdout().lock();
    if args.json {
        let j = serde_json::json!({ "udp": local.to_string(), "uri": base, "database": db,
            "registrations": restored, "dtls": args.dtls.dtls, "policy": policy_name(args.rd_policy) });
        let _ = writeln!(out, "{j}");
    } else if !v.quiet {
        let _ = writeln!(out, "corral rd: listening on {local}");
        let _ = writeln!(out, "  registrations in {db} ({restored} restored)");
        if args.dtls.dtls {
            let _ = writeln!(out, "  coaps:// (DTLS 1.2, PSK) on the same port: coaps://{}", &base["coap://".len()..]);
        }
        if args.rd_policy == RdPolicy::Identity {
            let _ = writeln!(out, "  policy: identity (registrations over coaps:// only)");
        }
        let _ = writeln!(
            out,
            "try:\n  corral post '{base}/rd?ep=node1&lt=600' -t link -e '</temp>;rt=temperature'\n  corral get '{base}/rd-lookup/res?rt=temperature'"
        );
    }
    let _ = out.flush();
}

/// How the banner and `--json` name a policy: as the flag spells it.
fn policy_name(p: RdPolicy) -> String {
    clap::ValueEnum::to_possible_value(&p).map(|v| v.get_name().to_string()).unwrap_or_default()
}
