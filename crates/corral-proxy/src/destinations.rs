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
//!
//! Next hops a rule learns from a Resource Directory (`rd:`) are not the operator's choice but whoever
//! registered (issue 41 item 7: a registration with `base=coap://127.0.0.9:22` aimed clients' requests at
//! this host and at a refused port). Each is checked as a client's own target would be, for the least
//! trusted client the proxy admits ([`Destinations::check_learnt_hop`]): a proxy open to other hosts
//! follows only registrations within the networks and ports it forwards to for them. The result goes into
//! the shared cache, so checking per client at forwarding time would not do: a local client's request could
//! fetch from a hop a remote client may not reach and the remote client read it from the cache.

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
        let ip = self.check_for_everyone(dst)?;
        if self.this_host.is_empty() || self.is_this_host(client) {
            return Ok(());
        }
        self.check_from_elsewhere(ip, dst.port())
    }

    /// Whether the proxy may send to `dst`, a next hop learnt from a directory, for every client it admits
    /// (`clients`; empty: anyone): the check of [`Destinations::check`] for the least trusted of them.
    pub fn check_learnt_hop(&self, clients: &[Prefix], dst: SocketAddr) -> Result<(), Refusal> {
        let ip = self.check_for_everyone(dst)?;
        if self.this_host.is_empty() || !self.admits_other_hosts(clients) {
            return Ok(());
        }
        self.check_from_elsewhere(ip, dst.port())
    }

    /// Whether `clients` (empty: anyone) takes in an address that is not this host's.
    pub fn admits_other_hosts(&self, clients: &[Prefix]) -> bool {
        let covered =
            |c: &Prefix| self.this_host.iter().any(|h| h.prefix_len() <= c.prefix_len() && h.contains(c.addr()));
        clients.is_empty() || clients.iter().any(|c| !covered(c))
    }

    /// What no client may reach, this host included: multicast, unspecified and broadcast addresses.
    fn check_for_everyone(&self, dst: SocketAddr) -> Result<IpAddr, Refusal> {
        let ip = canonical(dst.ip());
        crate::target::check_destination(ip)?;
        if self.broadcasts.contains(&ip) || self.networks.iter().any(|n| n.broadcast() == Some(ip)) {
            return Err(Refusal::new(
                Code::NOT_IMPLEMENTED,
                format!("{ip} is a broadcast address; this proxy does not forward to multicast or broadcast addresses"),
            ));
        }
        Ok(ip)
    }

    /// What a client from beyond this host may not reach: this host unless opened, unlisted networks and
    /// ports.
    fn check_from_elsewhere(&self, ip: IpAddr, port: u16) -> Result<(), Refusal> {
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
        if !self.ports.is_empty() && !self.ports.contains(&port) {
            let allowed: Vec<String> = self.ports.iter().map(u16::to_string).collect();
            return Err(Refusal::new(
                Code::FORBIDDEN,
                format!(
                    "port {port} is not a port this proxy forwards to for clients from other hosts ({}; \
                     --dest-port, or ports in [destinations])",
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
    fn a_learnt_hop_passes_the_check_of_the_least_trusted_client_admitted() {
        let p = policy();
        let hop = |clients: &[&str], dst: &str| {
            let clients: Vec<Prefix> = clients.iter().map(|c| c.parse().unwrap()).collect();
            p.check_learnt_hop(&clients, dst.parse().unwrap()).map_err(|r| r.code)
        };
        let local = ["127.0.0.0/8", "10.1.0.1"];
        assert_eq!(hop(&local, "127.0.0.9:22"), Ok(()), "only this host's clients: what they could reach");
        assert_eq!(hop(&local, "10.1.255.255:5683"), Err(Code::NOT_IMPLEMENTED), "a broadcast never");
        for clients in [&["127.0.0.0/8", "10.1.0.0/16"][..], &[]] {
            assert_eq!(hop(clients, "10.1.9.9:5683"), Ok(()), "{clients:?}");
            for dst in ["127.0.0.9:5683", "10.1.9.9:22", "192.0.2.1:5683"] {
                assert_eq!(hop(clients, dst), Err(Code::FORBIDDEN), "{clients:?} → {dst}");
            }
        }
        assert!(p.admits_other_hosts(&[]) && !p.admits_other_hosts(&["127.0.0.1/32".parse().unwrap()]));
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
