//! The network below the protocol: UDP sockets (`socket`: dual stack, batched receive with each
//! datagram's destination address, multicast membership), socket addresses as the endpoints see them
//! (`addr`), ICMP errors read from the socket's error queue (`icmp`, Linux), TCP connections (`tcp`), TLS
//! on them (`tls`, `coaps+tcp://`) and URIs with the OS's lookup of IPv6 zones (`uri`).
//!
//! Owns: sockets, connections and the bytes on them. Must never: implement protocol behaviour (corral-proto
//! does) nor run a driver loop (`crate::driver` does); nothing here names a driver, a client or a server.

pub(crate) mod addr;
#[cfg(target_os = "linux")]
pub(crate) mod icmp;
pub mod socket;
pub(crate) mod tcp;
pub mod tls;
pub mod uri;
