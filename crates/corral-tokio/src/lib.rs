//! # corral-tokio
//!
//! The tokio runtime for corral: it runs the sans-IO [`corral_proto::Endpoint`] and [`corral_proto::Node`]
//! over real UDP sockets, and offers an async [`Client`] and [`Server`] to library users.
//!
//! - [`socket`]: UDP over IPv4 and IPv6 (one dual-stack `[::]` socket), batched receive (`recvmmsg`, GRO)
//!   with the local destination address of every datagram (IP_PKTINFO / IPV6_RECVPKTINFO, via `quinn-udp`)
//!   so that multicast requests are recognised, multicast joins and leaves.
//! - The driver maps corral's [`Instant`](corral_proto::Instant) onto a `std::time::Instant` epoch taken
//!   at start, seeds each endpoint from the OS, and drains `poll_transmit` / `poll_event` /
//!   `poll_command` / `poll_timeout` after every input.
//! - [`Client`]: `client.get("coap://[::1]/s/t").await`, a request builder, multicast response streams.
//! - [`Server`]: sans-IO services at path prefixes and async handlers with path patterns,
//!   `/.well-known/core`, graceful shutdown.
//!
//! This crate never implements protocol behaviour: retransmission, deduplication, separate responses and
//! leisure all happen in corral-proto, identically under the simulator.

mod client;
mod driver;
mod server;
pub mod socket;
pub mod uri;

pub use client::{Client, ClientBuilder, Error, MulticastResponses, RequestBuilder};
pub use driver::{os_seed, Clock, DriverStats};
pub use server::{RouteConfig, Server, ServerBuilder, ServerHandle, ServerRequest};
pub use uri::{parse_uri, Uri, UriError};

pub use corral_proto;
pub use corral_proto::wire::{Code, ContentFormat, OptionNumber, Token};
pub use corral_proto::{EndpointConfig, Limits, Request, Response, SendParams, Service, TransmissionParams};
