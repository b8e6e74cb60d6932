//! What the server verbs share (serve, gateway, proxy, rd, device, stream recv): their addresses, the
//! driver choice, the directory's policy, a multicast leisure, device address ranges.

use super::exit::Failure;
use corral_tokio::workers;
use std::net::SocketAddr;

/// `--bind ADDR:PORT` and `--tcp [ADDR:PORT]` of a server command: the UDP address, and whether to listen
/// on TCP too (`Some(None)`: on the UDP address and port).
pub(crate) fn listen_args(bind: &str, tcp: Option<&str>) -> Result<(SocketAddr, Option<Option<SocketAddr>>), Failure> {
    let udp: SocketAddr = bind
        .parse()
        .map_err(|_| Failure::usage(format!("`{bind}` is not ADDR:PORT (e.g. [::]:5683 or 127.0.0.1:5683)")))?;
    let tcp = match tcp {
        None => None,
        Some("") => Some(None),
        Some(a) => Some(Some(a.parse().map_err(|_| {
            Failure::usage(format!("`{a}` is not ADDR:PORT for --tcp (e.g. [::]:5683 or 127.0.0.1:5683)"))
        })?)),
    };
    Ok((udp, tcp))
}

/// How the workers are driven. `Blocking` (Linux, UDP only, the default there): each worker a thread
/// asleep inside its receive call, the bare echo floor's shape (corral-tokio's `blocking` module);
/// `Tokio`: each worker a tokio runtime (what CoAP over TCP and busy polling need).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    Blocking,
    Tokio,
}

impl From<Driver> for workers::Driver {
    fn from(d: Driver) -> workers::Driver {
        match d {
            Driver::Blocking => workers::Driver::Blocking,
            Driver::Tokio => workers::Driver::Tokio,
        }
    }
}

/// The directory of `--rd URI` (`corral device`, `corral proxy`): a coap:// URI whose host is an IP
/// address (the devices send from their own sockets, so a name would be resolved once here).
pub(crate) fn rd_addr(uri: &str) -> Result<SocketAddr, Failure> {
    let u = corral_tokio::parse_uri(uri).map_err(|e| Failure::usage(format!("--rd {uri}: {e}")))?;
    if u.scheme != corral_proto::wire::Scheme::Coap {
        return Err(Failure::usage(format!("--rd {uri}: a coap:// directory (the devices speak CoAP over UDP)")));
    }
    match &u.host {
        corral_proto::wire::Host::Ip(ip) => Ok(SocketAddr::new(*ip, u.port)),
        corral_proto::wire::Host::Name(name) => corral_tokio::socket::resolve((name.as_str(), u.port))
            .map_err(|e| Failure::usage(format!("--rd {uri}: cannot resolve {name}: {e}"))),
    }
}

/// A multicast leisure (`--leisure` of `device` and `gateway`): 0 to an hour, as seconds.
pub fn parse_leisure(s: &str) -> Result<f64, String> {
    super::units::secs(super::units::Range::up_to(super::units::HOUR))(s)
}

pub fn parse_bind(s: &str) -> Result<SocketAddr, Failure> {
    s.parse().map_err(|_| Failure::usage(format!("`{s}` is not ADDR:PORT (e.g. 127.0.0.2:5683 or [::1]:5683)")))
}

/// Describes a range of device addresses in one phrase.
pub fn describe_range(addrs: &[SocketAddr]) -> String {
    match addrs {
        [] => "no devices".into(),
        [one] => one.to_string(),
        [first, .., last] => format!("{first} … {last}"),
    }
}

/// `--rd-policy` of `corral rd` and `corral gateway --rd`: which registrations the directory accepts
/// (RFC 9176 §7).
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RdPolicy {
    /// Anyone may register; a name registered over coaps:// or OSCORE is bound to that identity, any other
    /// to the address that registered it (first come, first remembered).
    #[default]
    FirstCome,
    /// Only clients with an identity (coaps:// or OSCORE) may register, each name bound to it; plain CoAP
    /// may look up.
    Identity,
}

impl From<RdPolicy> for corral_rd::Policy {
    fn from(p: RdPolicy) -> corral_rd::Policy {
        match p {
            RdPolicy::FirstCome => corral_rd::Policy::FirstCome,
            RdPolicy::Identity => corral_rd::Policy::Identity,
        }
    }
}

/// `--store` and `--store-password-file` of `corral gateway` and `corral rd`: where their state is kept.
#[derive(clap::Args, Debug, Default)]
pub struct StoreArgs {
    /// Keep the state in a PostgreSQL database that several gateways (or directories) share, instead of
    /// SQLite in --data: a URL (postgresql://USER@HOST:PORT/DB, or `postgres://` alone to take all from
    /// PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD) or libpq's key=value pairs ('host=/run/postgresql
    /// dbname=corral'). Unreachable, or a schema newer than this corral: exit status 9, naming the URL
    /// without its password. No TLS to the database (use a Unix socket or a trusted network).
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// With --store: read the database password from the first line of FILE, so that it is in no
    /// command line nor environment.
    #[arg(long, value_name = "FILE", requires = "store")]
    pub store_password_file: Option<std::path::PathBuf>,
}

impl StoreArgs {
    /// Where the program keeps its state: SQLite in its data directory unless --store names a database.
    pub fn location(&self) -> Result<corral_gateway::StoreLocation, Failure> {
        match &self.store {
            None => Ok(corral_gateway::StoreLocation::Sqlite),
            Some(url) if url.starts_with("sqlite") || url.starts_with('/') || url.starts_with('.') => {
                Err(Failure::usage(format!(
                    "--store takes a PostgreSQL connection string (postgresql://…); SQLite is the default, in --data \
                     (`{url}`)"
                )))
            }
            Some(url) => corral_gateway::PgTarget::new(url, self.store_password_file.as_deref())
                .map(|t| corral_gateway::StoreLocation::Postgres(Box::new(t)))
                .map_err(|e| {
                    if e.starts_with("cannot read") || e.contains("is empty") {
                        Failure::other(e)
                    } else {
                        Failure::usage(e)
                    }
                }),
        }
    }
}
