//! Socket addresses as the endpoints see them: IPv4-mapped IPv6 addresses (a dual-stack socket's view of
//! an IPv4 peer) made IPv4, the address a local client reaches a bound endpoint at, and addresses from `nix`'s storage. Used by [`crate::socket`], the blocking
//! driver and the ICMP error queue alike.

use std::net::{IpAddr, SocketAddr};

/// Turns `::ffff:a.b.c.d` into `a.b.c.d`.
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

pub fn canonical(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), v6.port()),
            None => addr,
        },
        v4 => v4,
    }
}

/// Where a client on this machine reaches an endpoint bound to `local`: an unspecified address is
/// loopback's (the gateway's own directory, the window's routes, a testbed's devices).
pub fn on_this_machine(local: SocketAddr) -> SocketAddr {
    match local.ip() {
        ip if ip.is_unspecified() => SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), local.port()),
        _ => local,
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
