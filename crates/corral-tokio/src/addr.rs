//! Socket addresses as the drivers hand them to the sans-IO core: IPv4-mapped IPv6 addresses made IPv4
//! (one peer, one key, whichever socket it came through), addresses out of `nix`'s storage, and the source
//! address a reply must name. Below `socket` and `icmp`, which both read addresses.

use std::net::{IpAddr, SocketAddr};

/// Turns `::ffff:a.b.c.d` into `a.b.c.d`.
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

/// Turns an IPv4-mapped IPv6 socket address into the IPv4 one (see [`canonical_ip`]).
pub fn canonical(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), v6.port()),
            None => addr,
        },
        v4 => v4,
    }
}

/// A socket address from `nix`'s storage (IPv4 or IPv6).
#[cfg(target_os = "linux")]
pub(crate) fn to_socket_addr(a: &nix::sys::socket::SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = a.as_sockaddr_in() {
        return Some(SocketAddr::new(IpAddr::V4(v4.ip()), v4.port()));
    }
    a.as_sockaddr_in6().map(|v6| SocketAddr::new(IpAddr::V6(v6.ip()), v6.port()))
}

/// The address a datagram must name as its source on a socket bound to `local`: only on a wildcard-bound
/// socket, and as IPv4 for an IPv4 peer of a dual-stack socket (the kernel sends it as IPv4).
pub(crate) fn source_for(local: SocketAddr, src: Option<IpAddr>) -> Option<IpAddr> {
    src.filter(|_| local.ip().is_unspecified()).map(|ip| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    })
}
