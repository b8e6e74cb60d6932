//! Where the proxy may send on a client's behalf: the destination policy, checked before the cache, before
//! aggregation and before anything is sent.
//!
//! Owns: the rules (networks, ports, whether this host is reachable from beyond it) and their check for
//! one client and one destination. Must never: read the host's interfaces or resolve names — the driver
//! passes this host's addresses and networks in ([`Destinations::this_host`], [`Destinations::broadcasts`]).
//!
//! # Why (issue 26 item 6; RFC 7252 §11.2)
//! A forward proxy sends from its own address: a client that may use it but not the services behind it
//! (a service bound to loopback, a gateway that lets only this machine manage it, a device whose `/mc`
//! obeys only this host) reaches them through it, and the proxy's answers — 5.04 after its upstream
//! timeout for an open TCP port, 5.02 at once for a closed one — make it a port scanner. So, for a client
//! from beyond this host:
//!
//! - this host's own addresses (loopback and every interface address) are refused unless the operator
//!   opens them (`this_host = true`);
//! - only the listed networks and ports are reachable (the command line's default: port 5683, the CoAP
//!   port, on any address);
//!
//! and for every client, this host included, broadcast addresses (255.255.255.255 and the directed
//! broadcast of this host's and the listed networks) are refused, as multicast is: one request would
//! reach many servers. A client on this host could send anywhere itself, so nothing else limits it.
//!
//! A refusal is 4.03 Forbidden with the rule in the diagnostic, answered at once whatever is (or is not)
//! listening at the destination: open and closed ports look the same. RFC 7252 §5.7 leaves it to the
//! proxy's policy which requests it forwards; 4.03 says that repeating the request will not help (5.05
//! would suggest another scheme might). The next hops of a FIB rule are the operator's own choice and are
//! not checked here: a rule that sends matching requests to a loopback service opens that service to every
//! client the proxy admits, as the rule says.

use crate::target::Refusal;
use corral_proto::wire::Code;
use corral_proto::{canonical, Prefix};
use std::net::{IpAddr, SocketAddr};

/// The destination policy. The default restricts nothing but broadcast and multicast (the library's
/// default: the simulator's forwarders, tests); `corral proxy` fills it from its options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Destinations {
    /// Networks a client from beyond this host may make the proxy send to; empty: any.
    pub networks: Vec<Prefix>,
    /// Ports it may make the proxy send to; empty: any.
    pub ports: Vec<u16>,
    /// Whether a client from beyond this host may reach this host's own addresses (subject to `networks`
    /// and `ports` like any other destination).
    pub this_host_open: bool,
    /// This host's addresses: loopback and each interface's address. A client whose source is one of them
    /// is on this host. Empty: every client counts as local (nothing is known about the host).
    pub this_host: Vec<Prefix>,
    /// Directed broadcast addresses of this host's networks (the driver's; those of `networks` are added
    /// by the check itself).
    pub broadcasts: Vec<IpAddr>,
}

impl Destinations {
    /// Whether `ip` is one of this host's addresses.
    pub fn is_this_host(&self, ip: IpAddr) -> bool {
        self.this_host.iter().any(|p| p.contains(ip))
    }

    /// Whether a client at `client` may make the proxy send to `dst`; the refusal names the rule.
    pub fn check(&self, client: IpAddr, dst: SocketAddr) -> Result<(), Refusal> {
        let ip = canonical(dst.ip());
        crate::target::check_destination(ip)?;
        if self.broadcasts.contains(&ip) || self.networks.iter().any(|n| n.broadcast() == Some(ip)) {
            return Err(Refusal::new(
                Code::NOT_IMPLEMENTED,
                format!("{ip} is a broadcast address; this proxy does not forward to multicast or broadcast addresses"),
            ));
        }
        if self.this_host.is_empty() || self.is_this_host(client) {
            return Ok(());
        }
        if self.is_this_host(ip) && !self.this_host_open {
            return Err(Refusal::new(
                Code::FORBIDDEN,
                format!(
                    "{ip} is this proxy's own host: clients from other hosts may not reach it through the proxy \
                     (--dest-this-host, or this_host in [destinations], opens it)"
                ),
            ));
        }
        if !self.networks.is_empty() && !self.networks.iter().any(|n| n.contains(ip)) {
            let allowed: Vec<String> = self.networks.iter().map(Prefix::to_string).collect();
            return Err(Refusal::new(
                Code::FORBIDDEN,
                format!(
                    "{ip} is outside the networks this proxy forwards to for clients from other hosts ({}; \
                     --dest-net, or networks in [destinations])",
                    allowed.join(", ")
                ),
            ));
        }
        if !self.ports.is_empty() && !self.ports.contains(&dst.port()) {
            let allowed: Vec<String> = self.ports.iter().map(u16::to_string).collect();
            return Err(Refusal::new(
                Code::FORBIDDEN,
                format!(
                    "port {} is not a port this proxy forwards to for clients from other hosts ({}; --dest-port, \
                     or ports in [destinations])",
                    dst.port(),
                    allowed.join(", ")
                ),
            ));
        }
        Ok(())
    }

    /// Whether anything beyond broadcast and multicast is restricted for clients from other hosts.
    pub fn restricts(&self) -> bool {
        !self.networks.is_empty() || !self.ports.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Destinations {
        Destinations {
            networks: vec!["10.1.0.0/16".parse().unwrap()],
            ports: vec![5683],
            this_host_open: false,
            this_host: vec!["127.0.0.0/8".parse().unwrap(), "::1".parse().unwrap(), "10.1.0.1".parse().unwrap()],
            broadcasts: vec!["192.168.7.255".parse().unwrap()],
        }
    }

    fn check(p: &Destinations, client: &str, dst: &str) -> Result<(), Code> {
        p.check(client.parse().unwrap(), dst.parse().unwrap()).map_err(|r| r.code)
    }

    #[test]
    fn remote_clients_get_neither_this_host_nor_unlisted_networks_or_ports() {
        let p = policy();
        let remote = "10.1.2.3";
        assert_eq!(check(&p, remote, "10.1.9.9:5683"), Ok(()));
        for dst in ["127.0.0.1:5683", "127.9.9.9:5683", "[::1]:5683", "10.1.0.1:5683", "[::ffff:127.0.0.1]:5683"] {
            assert_eq!(check(&p, remote, dst), Err(Code::FORBIDDEN), "{dst}");
        }
        assert_eq!(check(&p, remote, "192.0.2.1:5683"), Err(Code::FORBIDDEN), "outside --dest-net");
        assert_eq!(check(&p, remote, "10.1.9.9:22"), Err(Code::FORBIDDEN), "outside --dest-port");
        let e = p.check(remote.parse().unwrap(), "10.1.9.9:22".parse().unwrap()).unwrap_err();
        assert!(e.diagnostic.contains("port 22") && e.diagnostic.contains("--dest-port"), "{}", e.diagnostic);
        let open = Destinations { this_host_open: true, ..policy() };
        assert_eq!(check(&open, remote, "10.1.0.1:5683"), Ok(()), "opened, and inside the network");
        assert_eq!(check(&open, remote, "127.0.0.1:5683"), Err(Code::FORBIDDEN), "opened, outside the network");
    }

    #[test]
    fn local_clients_reach_anything_unicast_and_nobody_reaches_a_broadcast() {
        let p = policy();
        for client in ["127.0.0.1", "10.1.0.1", "::1"] {
            assert_eq!(check(&p, client, "127.0.0.1:22"), Ok(()), "{client}");
            assert_eq!(check(&p, client, "192.0.2.1:7"), Ok(()), "{client}");
        }
        for client in ["127.0.0.1", "10.1.2.3"] {
            for dst in ["255.255.255.255:5683", "10.1.255.255:5683", "192.168.7.255:5683", "224.0.1.187:5683"] {
                assert_eq!(check(&p, client, dst), Err(Code::NOT_IMPLEMENTED), "{client} → {dst}");
            }
        }
        assert_eq!(check(&Destinations::default(), "192.0.2.9", "127.0.0.1:22"), Ok(()), "the library default");
    }
}
