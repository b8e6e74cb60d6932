//! `corral device`: virtual constrained devices on real UDP sockets (corral-gateway's [`Fleet`]), one
//! per address from `--bind` on, until Ctrl-C.

use crate::cli::server::{describe_range, parse_bind, parse_leisure, rd_addr};
pub use corral_gateway::fleet::{Fleet, FleetConfig};
use std::path::PathBuf;
use std::time::Duration;

/// The shortest `--rd-lifetime`: the registrant's own floor.
const MIN_RD_LIFETIME: std::time::Duration = std::time::Duration::from_secs(corral_rd::registrant::MIN_LIFETIME as u64);

pub const AFTER_HELP: &str = "\
Each device serves /s/t (temperature, °C), /s/h (humidity, %RH) and /s/l (light, lx) — seeded, \
slowly varying, observable — the actuators /a/shutter (open, close, 0-100) and /a/light (on, off, \
toggle), the multicast membership resource /mc (seed 000 Table 4) and /.well-known/core. Device i \
of --count N listens on the i-th address after --bind (127.0.0.2, 127.0.0.3, …: all of \
127.0.0.0/8 is local on Linux) and joins the groups a gateway asks for through /mc.

Examples:
  corral device                           # one device on 127.0.0.2:5683
  corral device --count 10                # 127.0.0.2 … 127.0.0.11, port 5683
  corral device --bind 127.0.1.1:5700 --count 3 --mc-slots 1 --seed 7
  corral get coap://127.0.0.2/s/t -A senml+json
  corral put coap://127.0.0.3/a/shutter -e close

A gateway on the same port must listen on a specific address (corral gateway --bind \
127.0.0.1:5683): one on [::] or 0.0.0.0 holds the port on every address.";

#[derive(clap::Args, Debug)]
pub struct DeviceArgs {
    /// Address of the first device; port 0 picks a free port for all of them.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.2:5683")]
    pub bind: String,
    /// How many devices, on consecutive addresses from --bind.
    #[arg(short = 'n', long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub count: u32,
    /// Multicast slots of each device's /mc (a join beyond them gets 5.03).
    #[arg(long, value_name = "K", default_value_t = corral_group::mc::DEFAULT_SLOTS)]
    pub mc_slots: usize,
    /// Seed of the sensor values: device i uses SEED+i, so a restart reports the same readings.
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// Multicast leisure: answers to a group request are spread over it, e.g. 5, 300ms (seed 000: 5s).
    #[arg(long, value_name = "DURATION", value_parser = parse_leisure)]
    pub leisure: Option<f64>,
    /// Append a JSON line per request received (time, device, source, group, MID, method, path) to FILE.
    #[arg(long, value_name = "FILE")]
    pub request_log: Option<PathBuf>,
    /// Who may change the devices' multicast groups through /mc: address prefixes of the managing
    /// gateway(s), repeatable or comma-separated [default: this machine: loopback and its addresses]. Anyone
    /// else gets 4.03. `--manager 0.0.0.0/0,::/0` lets everyone in.
    #[arg(long, value_name = "PREFIX", value_delimiter = ',', value_parser = crate::cli::policy::parse_prefix)]
    pub manager: Vec<corral_group::Prefix>,
    /// Register every device with this Resource Directory (RFC 9176), e.g. coap://127.0.0.1:5690, as
    /// `dev-ADDR-PORT-RANDOM` with its resources (48 random bits, new at each start, so that nobody can
    /// take the name first); each refreshes before --rd-lifetime ends and removes its registration when
    /// the devices stop.
    #[arg(long, value_name = "URI")]
    pub rd: Option<String>,
    /// Lifetime of the registrations (--rd), 10 s to a day, e.g. 600, 10m, 1h; each is refreshed at 90 %
    /// of it.
    #[arg(long, value_name = "DURATION", default_value = "3600", requires = "rd",
          value_parser = crate::cli::units::secs(crate::cli::units::Range::between(MIN_RD_LIFETIME, crate::cli::units::DAY)))]
    pub rd_lifetime: f64,
    /// Print the started devices as one JSON object on stdout instead of the banner.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: DeviceArgs, v: crate::cli::Verbosity) -> Result<(), crate::cli::exit::Failure> {
    use crate::cli::exit::Failure;
    let first = parse_bind(&args.bind)?;
    let cfg = FleetConfig {
        mc_slots: args.mc_slots,
        seed: args.seed,
        leisure: args.leisure.map(Duration::from_secs_f64),
        request_log: args.request_log.clone(),
        ..FleetConfig::new(first, args.count as usize, crate::cli::policy::this_machine())
    };
    let mut cfg = if args.manager.is_empty() { cfg } else { FleetConfig { managers: args.manager.clone(), ..cfg } };
    if let Some(uri) = &args.rd {
        cfg.rd = Some((rd_addr(uri)?, args.rd_lifetime as u32));
    }
    let managers: Vec<String> = cfg.managers.iter().map(|p| p.to_string()).collect();
    for p in args.manager.iter().filter(|p| !crate::cli::policy::within_loopback(p)) {
        tracing::warn!(
            "{}",
            crate::cli::policy::address_only_warning(
                &format!("--manager {p}"),
                "change the devices' groups",
                "give --manager the managing gateway's address only, on a network you trust"
            )
        );
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::other(format!("cannot start the runtime: {e}")))?;
    let fleet = Fleet::start(cfg).map_err(|e| Failure::other(e.to_string()))?;
    let addrs = fleet.addrs().to_vec();
    if args.json {
        let j = serde_json::json!({
            "devices": addrs.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            "mc_slots": args.mc_slots,
            "seed": args.seed,
            "managers": managers,
        });
        out!("{j}");
    } else if !v.quiet {
        out!(
            "corral device: {} device(s) on {} (seed {}, {} /mc slot(s) each)",
            addrs.len(),
            describe_range(&addrs),
            args.seed,
            args.mc_slots
        );
        out!("  /mc accepts membership changes from {} (--manager)", managers.join(", "));
        if let Some(uri) = &args.rd {
            out!("  registering with the resource directory {uri} (lifetime {} s)", args.rd_lifetime);
        }
        let b = corral_tokio::uri::base_uri(addrs[0]);
        out!("resources: /s/t /s/h /s/l (observable), /a/shutter /a/light, /mc, /.well-known/core (Ctrl-C stops)");
        out!("try:\n  corral discover {b}\n  corral get {b}/s/t\n  corral put {b}/a/light -e on");
    }
    rt.block_on(crate::cli::wait_for_signal());
    tracing::info!("stopping the devices");
    fleet.shutdown();
    Ok(())
}
