//! The gateway's policy options: `--allow`, `--member-net`, `--member-port`, `--budget`, `--quarantine`
//! and `--policy FILE`, turned into corral-group's [`AccessPolicy`], [`MemberPolicy`] and [`Budget`]; and
//! `--verified-net`, which every server verb shares (the networks whose sources cannot be spoofed).
//!
//! Owns: the defaults a gateway starts with (safe beyond loopback), reading this host's networks for the
//! default member policy, the TOML policy file, and the start-up warnings about an open gateway. The
//! checks themselves are corral-group's (`corral_group::policy`).

use crate::cli::exit::Failure;
use clap::Args;
use corral_group::{AccessPolicy, Budget, MemberPolicy, Prefix, Role};
use serde::Deserialize;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

#[derive(Args, Debug, Clone, Default)]
pub struct PolicyArgs {
    /// Give clients in PREFIX(es), or coaps:// clients that proved a PSK identity (psk:IDENTITY), a role:
    /// read, actuate or manage (repeatable), e.g. `--allow manage=10.1.2.0/24 --allow read=10.0.0.0/8,fd00::/8
    /// --allow manage=psk:alice`.
    #[arg(long, value_name = "ROLE=PREFIX|psk:ID,...", value_parser = parse_allow)]
    pub allow: Vec<(Role, Vec<Subject>)>,
    /// Networks members may be in (repeatable or comma-separated) [default: this host's networks and
    /// loopback].
    #[arg(long, value_name = "PREFIX", value_delimiter = ',', value_parser = parse_prefix)]
    pub member_net: Vec<Prefix>,
    /// Ports members may listen on (repeatable or comma-separated) [default: 5683 and the testbed's].
    #[arg(long, value_name = "PORT", value_delimiter = ',')]
    pub member_port: Vec<u16>,
    /// Member requests one client request may cause at most, nested entities and other gateways
    /// included [default: 64].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub budget: Option<u32>,
    /// How long a released multicast address rests before reuse, e.g. 600, 10m [default: 10m].
    #[arg(long, value_name = "DURATION",
          value_parser = crate::cli::units::whole_secs(crate::cli::units::Range::up_to(7 * crate::cli::units::DAY)))]
    pub quarantine: Option<u64>,
    /// Read the policy from a TOML file ([access], [members], [budget]; see the text below); options
    /// given on the command line add to it.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
}

pub fn parse_prefix(s: &str) -> Result<Prefix, String> {
    s.parse::<Prefix>().map_err(|e| e.to_string())
}

/// `--verified-net`, on every server verb that bounds what it reflects (serve, gateway, proxy, rd): the
/// networks whose sources the endpoint treats as verified from their first datagram
/// (`EndpointConfig::verified_nets`; loopback always is).
#[derive(Args, Debug, Clone, Default)]
pub struct VerifiedNetArgs {
    /// A network whose source addresses cannot be spoofed (repeatable or comma-separated), e.g. a LAN
    /// whose routers drop datagrams from outside that claim one of its addresses (BCP 38). Its clients
    /// count as verified at once: answered in full without the reflection bound or an Echo round trip,
    /// and held to per-client (address and port) quotas. Loopback always is. This trusts that nobody
    /// outside the network can send with a source address inside it; if someone can, the server may be
    /// made to reflect large answers onto those addresses.
    #[arg(long, value_name = "PREFIX", value_delimiter = ',', value_parser = parse_prefix)]
    pub verified_net: Vec<Prefix>,
}

impl VerifiedNetArgs {
    /// Sets the endpoint's verified networks, with a warning for one that is every address of a family
    /// (the reflection bound is then off for it).
    pub fn apply(&self, endpoint: &mut corral_tokio::EndpointConfig) {
        endpoint.verified_nets = self.verified_nets();
    }

    /// The verified networks, with the same warning.
    pub fn verified_nets(&self) -> Vec<Prefix> {
        for p in self.verified_net.iter().filter(|p| p.is_everything()) {
            tracing::warn!(prefix = %p, "--verified-net {p}: every such source counts as verified, so the reflection bound is off for them");
        }
        self.verified_net.clone()
    }
}

/// Whom an access rule names: the clients in an address prefix, or the coaps:// client that proved a PSK
/// identity in its DTLS handshake (`psk:IDENTITY`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    Prefix(Prefix),
    Psk(Vec<u8>),
}

impl std::str::FromStr for Subject {
    type Err = String;
    fn from_str(s: &str) -> Result<Subject, String> {
        match s.trim().strip_prefix("psk:") {
            Some("") => Err(format!("`{s}`: psk: needs an identity, e.g. psk:alice")),
            Some(id) => Ok(Subject::Psk(id.as_bytes().to_vec())),
            None => parse_prefix(s).map(Subject::Prefix),
        }
    }
}

fn parse_allow(s: &str) -> Result<(Role, Vec<Subject>), String> {
    let (role, prefixes) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}`: expected ROLE=PREFIX[,PREFIX…] or ROLE=psk:IDENTITY, e.g. read=10.0.0.0/8"))?;
    let role: Role = role.trim().parse().map_err(|e: corral_group::UnknownRole| e.to_string())?;
    let prefixes =
        prefixes.split(',').filter(|p| !p.trim().is_empty()).map(str::parse).collect::<Result<Vec<_>, _>>()?;
    if prefixes.is_empty() {
        return Err(format!("`{s}`: no prefix after `=`"));
    }
    Ok((role, prefixes))
}

/// The policy file's format.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    access: AccessSection,
    #[serde(default)]
    members: MembersSection,
    #[serde(default)]
    budget: BudgetSection,
    quarantine: Option<u64>,
}

/// A list of prefixes (or of access subjects, `"psk:alice"`) in a TOML file: `["10.0.0.0/8", "::1"]`.
fn prefixes<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    let texts = Vec::<String>::deserialize(d)?;
    texts.iter().map(|t| t.parse().map_err(serde::de::Error::custom)).collect()
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AccessSection {
    #[serde(default, deserialize_with = "prefixes")]
    read: Vec<Subject>,
    #[serde(default, deserialize_with = "prefixes")]
    actuate: Vec<Subject>,
    #[serde(default, deserialize_with = "prefixes")]
    manage: Vec<Subject>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MembersSection {
    #[serde(default, deserialize_with = "prefixes")]
    networks: Vec<Prefix>,
    #[serde(default)]
    ports: Vec<u16>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct BudgetSection {
    datagrams: Option<u32>,
    per_client: Option<usize>,
    per_address: Option<usize>,
    per_entity: Option<usize>,
}

/// What the gateway runs with, and what it should warn about.
#[derive(Debug, Clone)]
pub struct Policy {
    pub access: AccessPolicy,
    pub members: MemberPolicy,
    pub budget: Budget,
    pub quarantine: Option<u64>,
    pub warnings: Vec<String>,
    /// Whether the access rules were given (`--allow`, `[access]`) rather than this machine's default.
    pub configured: bool,
    /// Whether the member ports are the default (5683 and the testbed's) rather than given.
    pub default_ports: bool,
}

impl Policy {
    /// Warnings for the configured actuate and manage roles beyond loopback: they rest on the source
    /// address alone (the gateway warns unless OSCORE is required for remote changes).
    pub fn address_only_roles(&self) -> Vec<String> {
        if !self.configured {
            return Vec::new();
        }
        self.access
            .rules
            .iter()
            .filter(|(p, r)| *r >= Role::Actuate && !within_loopback(p))
            .map(|(p, r)| {
                address_only_warning(
                    &format!("--allow {}={p}", r.as_str()),
                    "act with that role",
                    "require OSCORE for remote changes (--credentials with --require-oscore-remote)",
                )
            })
            .collect()
    }
}

/// Whether every address of `p` is a loopback address.
pub fn within_loopback(p: &Prefix) -> bool {
    Prefix::loopback().iter().any(|l| l.contains(p.addr()) && p.prefix_len() >= l.prefix_len())
}

/// The start-up warning for a role that rests on source addresses alone (the gateway's remote roles, a
/// device's remote managers): what the Echo round trip protects against, and what it does not.
pub fn address_only_warning(what: &str, act: &str, remedy: &str) -> String {
    format!(
        "{what} rests on the source address alone: every change from there must first return an Echo value \
         sent to that address, which a blind spoofer never sees, but anyone who receives that address's \
         traffic (on its network, or on the path to it) can {act}; {remedy}"
    )
}

impl PolicyArgs {
    /// The policy of a gateway listening on `local`, whose testbed devices (if any) listen on
    /// `testbed_port`.
    /// An unreadable policy file is exit status 1, a malformed one a usage error (2).
    pub fn resolve(&self, local: SocketAddr, testbed_port: Option<u16>) -> Result<Policy, Failure> {
        let file = match &self.policy {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| Failure::other(format!("cannot read the policy file {}: {e}", path.display())))?;
                toml::from_str::<PolicyFile>(&text).map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?
            }
            None => PolicyFile::default(),
        };
        let mut rules: Vec<(Prefix, Role)> = Vec::new();
        let mut identities: Vec<(Vec<u8>, Role)> = Vec::new();
        let given = [
            (Role::Read, &file.access.read),
            (Role::Actuate, &file.access.actuate),
            (Role::Manage, &file.access.manage),
        ]
        .into_iter()
        .flat_map(|(role, list)| list.iter().map(move |s| (role, s)))
        .chain(self.allow.iter().flat_map(|(role, list)| list.iter().map(|s| (*role, s))));
        for (role, subject) in given {
            match subject {
                Subject::Prefix(p) => rules.push((*p, role)),
                Subject::Psk(id) => identities.push((id.clone(), role)),
            }
        }
        let configured = !rules.is_empty() || !identities.is_empty();
        if rules.is_empty() {
            // This machine: loopback, and its own addresses (a local client talking to the gateway's
            // non-loopback address uses one of them as its source). Roles of PSK identities add to it.
            rules = this_machine().into_iter().map(|p| (p, Role::Manage)).collect();
        }
        let access = AccessPolicy { rules, identities, sockets: Vec::new() };

        let mut networks: Vec<Prefix> = file.members.networks.iter().chain(&self.member_net).copied().collect();
        if networks.is_empty() {
            networks = host_networks();
        }
        let mut ports: Vec<u16> = file.members.ports.iter().chain(&self.member_port).copied().collect();
        let default_ports = ports.is_empty();
        if default_ports {
            ports.push(corral_group::uri::COAP_PORT);
            ports.extend(testbed_port);
            ports.dedup();
        }
        let gateway = if local.ip().is_unspecified() {
            // A wildcard socket answers on every address of this host.
            host_addresses().into_iter().map(Prefix::host).chain(Prefix::loopback()).collect()
        } else {
            vec![Prefix::host(local.ip())]
        };
        let members = MemberPolicy { prefixes: networks, ports, gateway, gateway_port: local.port() };

        let mut budget = Budget::default();
        if let Some(d) = self.budget.or(file.budget.datagrams) {
            budget.datagrams = d;
        }
        if let Some(v) = file.budget.per_client {
            budget.per_client = v;
        }
        if let Some(v) = file.budget.per_address {
            budget.per_address = v;
        }
        if let Some(v) = file.budget.per_entity {
            budget.per_entity = v;
        }

        let mut warnings = Vec::new();
        let open = access.open_rules();
        if !open.is_empty() {
            let what: Vec<String> = open.iter().map(|(p, r)| format!("{} to {p}", r.as_str())).collect();
            warnings.push(format!("the gateway is open to everyone: {} (--allow)", what.join(", ")));
        } else if !configured && !local.ip().is_loopback() {
            warnings.push(format!(
                "listening on {local}, but only this machine may use the gateway; let clients in with --allow, e.g. --allow read=10.0.0.0/8"
            ));
        }
        let quarantine = self.quarantine.or(file.quarantine);
        Ok(Policy { access, members, budget, quarantine, warnings, configured, default_ports })
    }
}

/// This machine: loopback and every address of its interfaces (a local program talking to one of the
/// host's non-loopback addresses uses one of them as its source).
pub fn this_machine() -> Vec<Prefix> {
    let mut out = Prefix::loopback().to_vec();
    for a in host_addresses() {
        let p = Prefix::host(a);
        if !out.iter().any(|o| o.contains(a)) {
            out.push(p);
        }
    }
    out
}

/// This host's addresses.
fn host_addresses() -> Vec<IpAddr> {
    if_addrs::get_if_addrs().map(|v| v.into_iter().map(|i| i.ip()).collect()).unwrap_or_default()
}

/// The networks of this host's interfaces (address and netmask), and loopback.
pub fn host_networks() -> Vec<Prefix> {
    let mut out: Vec<Prefix> = Prefix::loopback().to_vec();
    for i in if_addrs::get_if_addrs().unwrap_or_default() {
        let (ip, mask) = match &i.addr {
            if_addrs::IfAddr::V4(a) => (IpAddr::V4(a.ip), u32::from(a.netmask).count_ones() as u8),
            if_addrs::IfAddr::V6(a) => (IpAddr::V6(a.ip), u128::from(a.netmask).count_ones() as u8),
        };
        if let Some(p) = Prefix::new(ip, mask) {
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_safe_and_warn_beyond_loopback() {
        let a = PolicyArgs::default();
        let p = a.resolve("127.0.0.1:5683".parse().unwrap(), Some(5800)).unwrap();
        assert!(p.access.rules.starts_with(&AccessPolicy::loopback_only().rules));
        assert!(p.access.rules.iter().all(|(p, r)| *r == Role::Manage && !p.is_everything()));
        assert!(p.warnings.is_empty());
        assert_eq!(p.members.ports, vec![5683, 5800]);
        assert!(p.members.prefixes.contains(&"127.0.0.0/8".parse().unwrap()));
        assert!(p.members.is_gateway("127.0.0.1:5683".parse().unwrap()));
        let p = a.resolve("[::]:5683".parse().unwrap(), None).unwrap();
        assert!(p.warnings[0].contains("only this machine"), "{:?}", p.warnings);
        assert!(
            p.members.is_gateway("127.0.0.9:5683".parse().unwrap()),
            "a wildcard gateway is on every local address"
        );
    }

    #[test]
    fn allow_rules_and_open_warning() {
        let a = PolicyArgs { allow: vec![parse_allow("manage=0.0.0.0/0").unwrap()], ..PolicyArgs::default() };
        let p = a.resolve("0.0.0.0:5683".parse().unwrap(), None).unwrap();
        assert!(p.warnings[0].contains("open to everyone"), "{:?}", p.warnings);
        assert!(parse_allow("admin=10.0.0.0/8").unwrap_err().contains("read, actuate or manage"));
        assert!(parse_allow("read").is_err());
        assert!(parse_allow("read=10.0.0.0/99").is_err());
    }

    #[test]
    fn policy_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.toml");
        std::fs::write(&path, "[access]\nread = [\"10.0.0.0/8\"]\n[members]\nnetworks = [\"10.1.0.0/16\"]\nports = [5683, 6000]\n[budget]\ndatagrams = 10\n").unwrap();
        let a = PolicyArgs { policy: Some(path.clone()), ..PolicyArgs::default() };
        let p = a.resolve("10.0.0.1:5683".parse().unwrap(), None).unwrap();
        assert_eq!(p.access.rules, vec![("10.0.0.0/8".parse().unwrap(), Role::Read)]);
        assert_eq!(p.members.ports, vec![5683, 6000]);
        assert_eq!(p.budget.datagrams, 10);
        std::fs::write(&path, "[acess]\n").unwrap();
        assert!(a.resolve("10.0.0.1:5683".parse().unwrap(), None).unwrap_err().message.contains("unknown field"));
    }
}
