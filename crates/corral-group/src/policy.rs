//! Who may do what through the gateway, and where the gateway may send on a client's behalf.
//!
//! Owns: address prefixes, the access policy of `/em` (which clients may read, actuate or manage), the
//! member policy (which addresses and ports an entity's members may have), the fan-out budget and the
//! exchange quotas, and the groups a device must never join. All of it is plain data checked by the EM and
//! `/mc`; the `corral gateway` and `corral device` commands fill it from their options (and a TOML file).
//! Must never: resolve names or read the host's interfaces itself (the binary passes its networks in).
//!
//! # Why (issue 11, RFC 7252 §11.2–11.5)
//! An Entity Manager sends requests on a client's behalf, so without a policy it is an open relay (any
//! `IP:port` as a member), an amplifier (one datagram in, one per member out, multiplied by nesting), and a
//! lock (a client can hold every outgoing exchange). The policy closes each: clients are authorised by
//! role, members must lie in allowed prefixes and ports and may not be the gateway itself, a broadcast
//! address or a network's own address, one client request may cause at most `budget.datagrams` member
//! requests through any nesting (passed on to other corral gateways with the `budget` query parameter), and
//! quotas bound what one client or one entity may hold at once.

pub use corral_proto::{canonical, Prefix};
use serde::Deserialize;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::str::FromStr;

/// What a client may do with `/em`, each role including the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// List entities, read profiles, read (and observe) entities.
    Read,
    /// Also actuate entities (PUT/POST to `/em/<name>`), which acts on every member.
    Actuate,
    /// Also create, change and delete entities.
    Manage,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Actuate => "actuate",
            Role::Manage => "manage",
        }
    }
}

impl FromStr for Role {
    type Err = UnknownRole;
    fn from_str(s: &str) -> Result<Role, UnknownRole> {
        match s {
            "read" => Ok(Role::Read),
            "actuate" => Ok(Role::Actuate),
            "manage" => Ok(Role::Manage),
            other => Err(UnknownRole(other.to_owned())),
        }
    }
}

/// A role name that is none of `read`, `actuate`, `manage` (a `--allow` option or a policy file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownRole(pub String);

impl fmt::Display for UnknownRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Quoted as Rust quotes a string, as the message always read.
        write!(f, "role {:?}: expected read, actuate or manage", self.0)
    }
}

impl std::error::Error for UnknownRole {}

/// Who is asking: the transport source address and, for a request that came inside a DTLS session
/// (`coaps://`), the PSK identity its handshake proved ([`corral_proto::IncomingRequest::peer_identity`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClientIdentity {
    pub addr: SocketAddr,
    pub psk: Option<std::sync::Arc<[u8]>>,
}

impl ClientIdentity {
    pub fn new(addr: SocketAddr) -> ClientIdentity {
        ClientIdentity { addr: SocketAddr::new(canonical(addr.ip()), addr.port()), psk: None }
    }

    /// A client that proved `psk` (a PSK identity) in a DTLS handshake.
    pub fn with_psk(self, psk: Option<std::sync::Arc<[u8]>>) -> ClientIdentity {
        ClientIdentity { psk, ..self }
    }

    /// How a 4.03 names the client: its address, and its PSK identity if it has one.
    pub fn describe(&self) -> String {
        match &self.psk {
            Some(id) => format!("{} (PSK identity {:?})", self.addr.ip(), String::from_utf8_lossy(id)),
            None => self.addr.ip().to_string(),
        }
    }
}

/// Access to `/em`: a client gets the highest role of every rule whose prefix holds its address, of
/// every rule that names the PSK identity it proved over DTLS (`--allow manage=psk:alice`), and of a rule
/// for its exact loopback socket (the gateway's own HTTP window, which checked its HTTP client's role
/// before sending on its behalf).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AccessPolicy {
    pub rules: Vec<(Prefix, Role)>,
    /// Roles of PSK identities (a client that proved one in its `coaps://` handshake).
    pub identities: Vec<(Vec<u8>, Role)>,
    /// Roles of exact sockets on this machine (canonical addresses): the gateway's own HTTP window's
    /// client. Only a loopback address is honoured, which no datagram from another machine carries, and
    /// the port is held by the window's socket, so no other process on the machine sends from it.
    pub sockets: Vec<(SocketAddr, Role)>,
}

impl AccessPolicy {
    /// Everything to everyone: the library default (tests, the simulator, a gateway an integrator wraps).
    /// `corral gateway` never uses it unless told to (`--allow manage=0.0.0.0/0`).
    pub fn open() -> AccessPolicy {
        AccessPolicy {
            rules: vec![(Prefix::any_v4(), Role::Manage), (Prefix::any_v6(), Role::Manage)],
            identities: Vec::new(),
            sockets: Vec::new(),
        }
    }

    /// Management from this machine only (loopback), nothing for anyone else.
    pub fn loopback_only() -> AccessPolicy {
        AccessPolicy {
            rules: Prefix::loopback().into_iter().map(|p| (p, Role::Manage)).collect(),
            identities: Vec::new(),
            sockets: Vec::new(),
        }
    }

    pub fn role_of(&self, client: &ClientIdentity) -> Option<Role> {
        let by_addr = self.rules.iter().filter(|(p, _)| p.contains(client.addr.ip())).map(|(_, r)| *r);
        let by_socket = self.sockets.iter().filter(|(a, _)| *a == client.addr && a.ip().is_loopback()).map(|(_, r)| *r);
        let by_psk = client
            .psk
            .as_deref()
            .into_iter()
            .flat_map(|psk| self.identities.iter().filter(move |(id, _)| id.as_slice() == psk).map(|(_, r)| *r));
        by_addr.chain(by_psk).chain(by_socket).max()
    }

    /// Rules that give a role to every address of a family: the start-up warning names them.
    pub fn open_rules(&self) -> Vec<(Prefix, Role)> {
        self.rules.iter().filter(|(p, _)| p.is_everything()).copied().collect()
    }
}

/// Where members may be.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberPolicy {
    /// Allowed member prefixes; empty: any address (the library default).
    pub prefixes: Vec<Prefix>,
    /// Allowed member ports; empty: any port.
    pub ports: Vec<u16>,
    /// The gateway's own addresses (a member there is one of its entities, or refused: never a relay to
    /// itself). Its port is `gateway_port`.
    pub gateway: Vec<Prefix>,
    pub gateway_port: u16,
}

impl MemberPolicy {
    /// Whether `addr` is the gateway itself.
    pub fn is_gateway(&self, addr: SocketAddr) -> bool {
        addr.port() == self.gateway_port && self.gateway.iter().any(|p| p.contains(addr.ip()))
    }

    /// Checks a unicast member address; `Err` says why it is refused.
    pub fn check(&self, addr: SocketAddr) -> Result<(), MemberRefusal> {
        let ip = canonical(addr.ip());
        if ip.is_unspecified() || ip.is_multicast() {
            return Err(MemberRefusal::NotUnicast(ip));
        }
        if ip == IpAddr::V4(Ipv4Addr::BROADCAST) || self.prefixes.iter().any(|p| p.broadcast() == Some(ip)) {
            return Err(MemberRefusal::Broadcast(ip));
        }
        if let Some(network) = self.prefixes.iter().find(|p| network_address(p) == Some(ip)) {
            return Err(MemberRefusal::NetworkAddress { ip, network: *network });
        }
        if self.is_gateway(addr) {
            return Err(MemberRefusal::Gateway(addr));
        }
        if !self.prefixes.is_empty() && !self.prefixes.iter().any(|p| p.contains(ip)) {
            return Err(MemberRefusal::OutsideNetworks { ip, allowed: self.prefixes.clone() });
        }
        if !self.ports.is_empty() && !self.ports.contains(&addr.port()) {
            return Err(MemberRefusal::Port { port: addr.port(), allowed: self.ports.clone() });
        }
        Ok(())
    }
}

/// The address of a network itself, no host's: an IPv4 prefix's all-zeros host (the old BSD broadcast,
/// RFC 1122 §3.2.1.3 forbids it as a source or a host's address) or an IPv6 prefix's Subnet-Router anycast
/// address (RFC 4291 §2.6.1: any router of the subnet answers it). `None` for a prefix without host bits to
/// spare (an IPv4 /31 or /32, RFC 3021; an IPv6 /127 or /128).
fn network_address(p: &Prefix) -> Option<IpAddr> {
    let hosts = if p.addr().is_ipv4() { 32 } else { 128 };
    (p.prefix_len() >= 1 && p.prefix_len() + 1 < hosts).then(|| p.addr())
}

/// Why the member policy refuses a member address ([`MemberPolicy::check`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemberRefusal {
    /// The unspecified or a multicast address.
    NotUnicast(IpAddr),
    /// The limited broadcast address or the broadcast address of an allowed network.
    Broadcast(IpAddr),
    /// The address of an allowed network itself, not of a host on it (`10.77.0.0` of `10.77.0.0/16`).
    NetworkAddress { ip: IpAddr, network: Prefix },
    /// The gateway itself.
    Gateway(SocketAddr),
    /// An address outside the allowed networks (`--member-net`), which it lists.
    OutsideNetworks { ip: IpAddr, allowed: Vec<Prefix> },
    /// A port outside the allowed ones (`--member-port`), which it lists.
    Port { port: u16, allowed: Vec<u16> },
}

impl fmt::Display for MemberRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |items: Vec<String>| items.join(", ");
        match self {
            MemberRefusal::NotUnicast(ip) => write!(f, "{ip} is not a unicast address"),
            MemberRefusal::Broadcast(ip) => write!(f, "{ip} is a broadcast address"),
            MemberRefusal::NetworkAddress { ip, network } => {
                write!(f, "{ip} is the address of the network {network} itself, not of a host on it")
            }
            MemberRefusal::Gateway(addr) => write!(f, "{addr} is this gateway (name its entities as /em/<name>)"),
            MemberRefusal::OutsideNetworks { ip, allowed } => write!(
                f,
                "{ip} is outside the allowed member networks ({}; the gateway's --member-net)",
                list(allowed.iter().map(Prefix::to_string).collect())
            ),
            MemberRefusal::Port { port, allowed } => write!(
                f,
                "port {port} is not an allowed member port ({}; the gateway's --member-port)",
                list(allowed.iter().map(u16::to_string).collect())
            ),
        }
    }
}

impl std::error::Error for MemberRefusal {}

/// How much network work one client request, one client and one entity may cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Member requests (first transmissions) one client request may cause, nested entities and other
    /// corral gateways included. An entity whose fan-out exceeds it cannot be created; a use that would
    /// exceed the budget a parent passed down (`budget=`) is refused with 5.03.
    pub datagrams: u32,
    /// Member exchanges one client may have in progress at once: its endpoint (address and port) when
    /// its address is verified (loopback, a verified network, coaps://, or proved by an Echo), else its
    /// address.
    pub per_client: usize,
    /// Member exchanges all clients at one address may have in progress at once: the ceiling for the
    /// applications of one host or the clients behind one NAT. The default, 1,024, is four clients' full
    /// share, or 51 uses of a 20-member entity at once; it keeps one address to a third of `uses_total`.
    pub per_address: usize,
    /// Member exchanges one entity's uses may have in progress at once.
    pub per_entity: usize,
    /// Member exchanges all uses together may have in progress: the rest of the endpoint's exchanges is
    /// kept for management (validation, joins), so a flood of uses never blocks a creation or deletion.
    pub uses_total: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget { datagrams: 64, per_client: 256, per_address: 1024, per_entity: 512, uses_total: 3072 }
    }
}

impl Budget {
    /// No limits worth the name: the lab's large experiments (1,000-member groups) use it.
    pub fn unlimited() -> Budget {
        Budget {
            datagrams: u32::MAX,
            per_client: usize::MAX,
            per_address: usize::MAX,
            per_entity: usize::MAX,
            uses_total: usize::MAX,
        }
    }
}

/// Why a device refuses to join `group` even from its manager, or `None` if it may join. Refused: groups
/// with a fixed meaning on the link or the Internet, which would make the device answer discovery and
/// control traffic it was never meant to see — IPv4 224.0.0.0/24 (local network control) and 224.0.1.0/24
/// (internetwork control, with 224.0.1.187 All CoAP Nodes), IPv6 permanently assigned (well-known) groups
/// and every group of interface- or link-local scope (ff01::1, ff02::1, ff02::fd, ff05::fd …).
pub fn reserved_group(group: IpAddr) -> Option<&'static str> {
    match canonical(group) {
        IpAddr::V4(g) if !g.is_multicast() => Some("not a multicast address"),
        IpAddr::V4(g) => {
            let o = g.octets();
            match (o[0], o[1], o[2]) {
                (224, 0, 0) => Some("224.0.0.0/24 is reserved for local network control"),
                (224, 0, 1) => Some("224.0.1.0/24 is reserved for internetwork control (224.0.1.187: All CoAP Nodes)"),
                _ => None,
            }
        }
        IpAddr::V6(g) if !g.is_multicast() => Some("not a multicast address"),
        IpAddr::V6(g) => {
            let s = g.segments()[0];
            let (flags, scope) = ((s >> 4) & 0xf, s & 0xf);
            if scope <= 2 {
                Some("interface- and link-local groups (ff01::/16, ff02::/16) are not for entities")
            } else if flags & 0x1 == 0 {
                Some("a permanently assigned (well-known) group such as ff05::fd (All CoAP Nodes)")
            } else {
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Prefix {
        s.parse().unwrap()
    }
    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }
    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn roles_take_the_highest_matching_rule() {
        let pol = AccessPolicy {
            rules: vec![(p("10.0.0.0/8"), Role::Read), (p("10.1.0.0/16"), Role::Manage), (p("::1"), Role::Actuate)],
            identities: Vec::new(),
            sockets: Vec::new(),
        };
        let c = |s: &str| ClientIdentity::new(sa(s));
        assert_eq!(pol.role_of(&c("10.9.0.1:1000")), Some(Role::Read));
        assert_eq!(pol.role_of(&c("10.1.0.1:1000")), Some(Role::Manage));
        assert_eq!(pol.role_of(&c("[::1]:1000")), Some(Role::Actuate));
        assert_eq!(pol.role_of(&c("192.0.2.1:1000")), None);
        assert_eq!(AccessPolicy::loopback_only().role_of(&c("127.0.0.9:5")), Some(Role::Manage));
        assert_eq!(AccessPolicy::loopback_only().role_of(&c("[::ffff:127.0.0.1]:5")), Some(Role::Manage));
        assert_eq!(AccessPolicy::loopback_only().role_of(&c("192.0.2.1:5")), None);
        assert!(Role::Read < Role::Actuate && Role::Actuate < Role::Manage);
    }

    #[test]
    fn an_exact_loopback_socket_gets_its_role_and_nothing_else_does() {
        let pol = AccessPolicy {
            rules: vec![(p("127.0.0.0/8"), Role::Read)],
            sockets: vec![(sa("127.0.0.1:40000"), Role::Manage), (sa("192.0.2.1:40000"), Role::Manage)],
            ..Default::default()
        };
        let c = |s: &str| ClientIdentity::new(sa(s));
        assert_eq!(pol.role_of(&c("127.0.0.1:40000")), Some(Role::Manage));
        assert_eq!(pol.role_of(&c("[::ffff:127.0.0.1]:40000")), Some(Role::Manage), "canonical");
        assert_eq!(pol.role_of(&c("127.0.0.1:40001")), Some(Role::Read), "another port");
        assert_eq!(pol.role_of(&c("127.0.0.2:40000")), Some(Role::Read), "another address");
        // A socket rule off loopback is never honoured: such a source can be spoofed from afar.
        assert_eq!(pol.role_of(&c("192.0.2.1:40000")), None);
    }

    #[test]
    fn a_psk_identity_proved_over_dtls_adds_its_role() {
        let pol = AccessPolicy {
            rules: vec![(p("10.0.0.0/8"), Role::Read)],
            identities: vec![(b"alice".to_vec(), Role::Manage)],
            sockets: Vec::new(),
        };
        let c = |s: &str, psk: Option<&[u8]>| ClientIdentity::new(sa(s)).with_psk(psk.map(Into::into));
        assert_eq!(pol.role_of(&c("10.0.0.1:1", None)), Some(Role::Read));
        assert_eq!(pol.role_of(&c("10.0.0.1:1", Some(b"alice"))), Some(Role::Manage));
        assert_eq!(pol.role_of(&c("192.0.2.1:1", Some(b"alice"))), Some(Role::Manage));
        assert_eq!(pol.role_of(&c("192.0.2.1:1", Some(b"bob"))), None);
    }

    #[test]
    fn member_policy_refuses_relays() {
        let pol = MemberPolicy {
            prefixes: vec![p("192.168.1.0/24"), p("127.0.0.0/8")],
            ports: vec![5683],
            gateway: vec![p("127.0.0.0/8")],
            gateway_port: 5683,
        };
        assert!(pol.check(sa("192.168.1.20:5683")).is_ok());
        for (bad, why) in [
            ("192.168.1.20:22", "port 22"),
            ("10.0.0.1:5683", "outside"),
            ("127.0.0.1:5683", "this gateway"),
            ("127.0.0.2:5683", "this gateway"),
            ("255.255.255.255:5683", "broadcast"),
            ("192.168.1.255:5683", "broadcast"),
            ("192.168.1.0:5683", "the network 192.168.1.0/24 itself"),
            ("127.0.0.0:5683", "the network 127.0.0.0/8 itself"),
            ("0.0.0.0:5683", "unicast"),
            ("224.0.1.187:5683", "unicast"),
        ] {
            let e = pol.check(sa(bad)).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert!(MemberPolicy::default().check(sa("203.0.113.5:9")).is_ok(), "the library default is open");
    }

    #[test]
    fn a_networks_own_address_is_no_member_and_the_error_names_the_network() {
        let pol = MemberPolicy {
            prefixes: vec![p("10.77.0.0/16"), p("10.9.9.8/31"), p("2001:db8:1::/64")],
            ..MemberPolicy::default()
        };
        let e = pol.check(sa("10.77.0.0:5683")).unwrap_err();
        assert_eq!(e.to_string(), "10.77.0.0 is the address of the network 10.77.0.0/16 itself, not of a host on it");
        assert!(pol.check(sa("[2001:db8:1::]:5683")).is_err(), "the Subnet-Router anycast address");
        for host in ["10.77.0.1:5683", "10.77.1.0:5683", "10.9.9.8:5683", "[2001:db8:1::1]:5683"] {
            assert!(pol.check(sa(host)).is_ok(), "{host}: a host (a /31 has no network address, RFC 3021)");
        }
    }

    #[test]
    fn reserved_groups() {
        for g in ["224.0.0.1", "224.0.1.187", "ff02::1", "ff01::1", "ff05::fd", "ff02::fd", "ff0e::1", "10.0.0.1"] {
            assert!(reserved_group(ip(g)).is_some(), "{g}");
        }
        for g in ["239.255.89.1", "ff1e::89:1", "ff15::1234", "232.1.2.3"] {
            assert_eq!(reserved_group(ip(g)), None, "{g}");
        }
    }
}
