//! Multicast address pools for multicast entities (seed 000 §4.2).
//!
//! Owns: which group address the next multicast entity gets. Addresses come in sequence from a cursor that
//! only grows, so an address is never handed out again until the whole pool has been used (a bookmarked
//! `mcstURI` must not suddenly reach another group); after that, addresses still in use are skipped. The
//! cursor is persisted by the EM through the store before the address is used.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A range of multicast addresses: `base + first … base + first + size − 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressPool {
    pub base: IpAddr,
    pub first: u32,
    pub size: u32,
}

impl AddressPool {
    /// Seed 000: `ff1e::89:xx` — transient (`1`), global scope (`e`), `xx` a 16-bit sequence number from 1.
    pub fn default_v6() -> AddressPool {
        AddressPool { base: IpAddr::V6(Ipv6Addr::new(0xff1e, 0, 0, 0, 0, 0, 0x89, 0)), first: 1, size: 0xffff }
    }

    /// For IPv4 networks *(decision)*: `239.255.89.1 … 239.255.89.254`, in the IPv4 Local Scope
    /// (RFC 2365), mirroring the IPv6 pool's `89`.
    pub fn default_v4() -> AddressPool {
        AddressPool { base: IpAddr::V4(Ipv4Addr::new(239, 255, 89, 0)), first: 1, size: 254 }
    }

    /// The address at `offset` from the base, if it stays in the base's family.
    pub fn address(&self, offset: u32) -> Option<IpAddr> {
        match self.base {
            IpAddr::V6(b) => u128::from(b).checked_add(u128::from(offset)).map(|v| IpAddr::V6(Ipv6Addr::from(v))),
            IpAddr::V4(b) => u32::from(b).checked_add(offset).map(|v| IpAddr::V4(Ipv4Addr::from(v))),
        }
    }

    /// Whether the pool is usable: multicast base, non-empty, every address multicast.
    pub fn check(&self) -> Result<(), PoolError> {
        if self.size == 0 {
            return Err(PoolError::Empty);
        }
        for off in [self.first, self.first.saturating_add(self.size - 1)] {
            match self.address(off) {
                Some(a) if a.is_multicast() => {}
                _ => return Err(PoolError::NotMulticast(self.base)),
            }
        }
        Ok(())
    }

    /// The next address from `cursor` (allocations so far) not in use; advances the cursor past it.
    /// `None` when every address of the pool is in use.
    pub fn allocate(&self, cursor: &mut u64, in_use: impl Fn(IpAddr) -> bool) -> Option<IpAddr> {
        for _ in 0..self.size {
            let offset = self.first + (*cursor % u64::from(self.size)) as u32;
            *cursor += 1;
            if let Some(a) = self.address(offset) {
                if !in_use(a) {
                    return Some(a);
                }
            }
        }
        None
    }
}

/// Why an address pool is unusable ([`AddressPool::check`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PoolError {
    /// The pool has no address.
    Empty,
    /// The pool (its base) reaches addresses that are not multicast.
    NotMulticast(IpAddr),
}

impl fmt::Display for PoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolError::Empty => f.write_str("empty multicast pool"),
            PoolError::NotMulticast(base) => write!(f, "multicast pool {base:?} leaves the multicast range"),
        }
    }
}

impl std::error::Error for PoolError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_never_reuses_until_exhausted() {
        let p = AddressPool { size: 3, ..AddressPool::default_v6() };
        let mut c = 0;
        let a1 = p.allocate(&mut c, |_| false).unwrap();
        assert_eq!(a1, "ff1e::89:1".parse::<IpAddr>().unwrap());
        let a2 = p.allocate(&mut c, |_| false).unwrap();
        assert_eq!(a2, "ff1e::89:2".parse::<IpAddr>().unwrap());
        // a1 freed, a2 in use: the next is still the fresh :3, then wrap to :1, skipping :2.
        let a3 = p.allocate(&mut c, |a| a == a2).unwrap();
        assert_eq!(a3, "ff1e::89:3".parse::<IpAddr>().unwrap());
        let a4 = p.allocate(&mut c, |a| a == a2 || a == a3).unwrap();
        assert_eq!(a4, a1);
        assert_eq!(p.allocate(&mut c, |_| true), None);
        AddressPool::default_v4().check().unwrap();
        AddressPool::default_v6().check().unwrap();
        assert!(AddressPool { base: "10.0.0.0".parse().unwrap(), first: 0, size: 2 }.check().is_err());
        assert_eq!(AddressPool::default_v4().address(1), Some("239.255.89.1".parse().unwrap()));
    }
}
