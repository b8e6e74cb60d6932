//! Address prefixes (`10.0.0.0/8`, `2001:db8::/32`, a host): what access policies of the services on a
//! node (the gateway's, the proxy's) are written in. Plain data; nothing here looks at interfaces.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// An address prefix such as `10.0.0.0/8`, `2001:db8::/32` or `127.0.0.1` (a host). IPv4-mapped IPv6
/// addresses (`::ffff:10.1.2.3`, what a dual-stack socket reports) match IPv4 prefixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Prefix {
    addr: IpAddr,
    len: u8,
}

impl Prefix {
    pub fn new(addr: IpAddr, len: u8) -> Option<Prefix> {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        (len <= max).then(|| Prefix { addr: mask(addr, len), len })
    }

    /// The prefix of one address.
    pub fn host(addr: IpAddr) -> Prefix {
        let addr = canonical(addr);
        Prefix { addr, len: if addr.is_ipv4() { 32 } else { 128 } }
    }

    /// Every address of a family: `0.0.0.0/0` or `::/0`.
    pub fn any_v4() -> Prefix {
        Prefix { addr: IpAddr::V4(Ipv4Addr::UNSPECIFIED), len: 0 }
    }

    pub fn any_v6() -> Prefix {
        Prefix { addr: IpAddr::V6(Ipv6Addr::UNSPECIFIED), len: 0 }
    }

    /// `127.0.0.0/8` and `::1/128`.
    pub fn loopback() -> [Prefix; 2] {
        [
            Prefix { addr: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 0)), len: 8 },
            Prefix::host(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        ]
    }

    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    pub fn prefix_len(&self) -> u8 {
        self.len
    }

    /// A prefix of length 0: every address of its family.
    pub fn is_everything(&self) -> bool {
        self.len == 0
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        ip.is_ipv4() == self.addr.is_ipv4() && mask(ip, self.len) == self.addr
    }

    /// The IPv4 directed-broadcast address of this prefix (all host bits set), for prefixes that have one.
    pub fn broadcast(&self) -> Option<IpAddr> {
        match self.addr {
            IpAddr::V4(a) if (1..31).contains(&self.len) => {
                Some(IpAddr::V4(Ipv4Addr::from(u32::from(a) | (u32::MAX >> self.len))))
            }
            _ => None,
        }
    }
}

/// `::ffff:a.b.c.d` → `a.b.c.d`; everything else unchanged.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

fn mask(ip: IpAddr, len: u8) -> IpAddr {
    match canonical(ip) {
        IpAddr::V4(a) => {
            let m = if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len.min(32))) };
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & m))
        }
        IpAddr::V6(a) => {
            let m = if len == 0 { 0 } else { u128::MAX << (128 - u32::from(len.min(128))) };
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & m))
        }
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl FromStr for Prefix {
    type Err = PrefixError;

    fn from_str(s: &str) -> Result<Prefix, PrefixError> {
        let s = s.trim();
        let (a, len) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let a = a.trim_start_matches('[').trim_end_matches(']');
        let addr: IpAddr = a.parse().map_err(|_| PrefixError::NotAnAddress(s.to_string()))?;
        let addr = canonical(addr);
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            None => max,
            Some(l) => l.parse::<u8>().ok().filter(|l| *l <= max).ok_or_else(|| PrefixError::BadLength {
                prefix: s.to_string(),
                length: l.to_string(),
                max,
            })?,
        };
        Ok(Prefix { addr: mask(addr, len), len })
    }
}

/// Why a text is not an address prefix ([`Prefix`]'s `FromStr`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PrefixError {
    /// The part before `/` is not an IPv4 or IPv6 address.
    NotAnAddress(String),
    /// The length after `/` is not a number from 0 to `max` (32 for IPv4, 128 for IPv6).
    BadLength { prefix: String, length: String, max: u8 },
}

impl fmt::Display for PrefixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrefixError::NotAnAddress(s) => {
                write!(f, "{s:?} is not an address prefix (e.g. 10.0.0.0/8, 2001:db8::/32)")
            }
            PrefixError::BadLength { prefix, length, max } => {
                write!(f, "{prefix:?}: prefix length {length:?} is not 0..={max}")
            }
        }
    }
}

impl std::error::Error for PrefixError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Prefix {
        s.parse().unwrap()
    }
    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn prefixes_parse_and_match() {
        assert_eq!(p("10.1.2.3/8").to_string(), "10.0.0.0/8");
        assert_eq!(p("127.0.0.1").to_string(), "127.0.0.1/32");
        assert_eq!(p("[2001:db8::1]/32").to_string(), "2001:db8::/32");
        assert!(p("10.0.0.0/8").contains(ip("10.255.0.1")));
        assert!(!p("10.0.0.0/8").contains(ip("11.0.0.1")));
        assert!(p("10.0.0.0/8").contains(ip("::ffff:10.0.0.1")), "IPv4-mapped addresses match IPv4 prefixes");
        assert!(!p("10.0.0.0/8").contains(ip("2001:db8::1")));
        assert!(p("0.0.0.0/0").contains(ip("192.0.2.1")));
        assert!(p("::/0").contains(ip("2001:db8::1")));
        for bad in ["10.0.0.0/33", "nope", "::/129", "10.0.0.0/x"] {
            assert!(bad.parse::<Prefix>().is_err(), "{bad}");
        }
        assert_eq!(p("192.168.1.0/24").broadcast(), Some(ip("192.168.1.255")));
        assert_eq!(p("192.168.1.7/32").broadcast(), None);
    }
}
