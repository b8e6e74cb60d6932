//! # corral-tokio
//!
//! The tokio runtime for corral: it runs the sans-IO [`corral_proto::Endpoint`], [`corral_proto::TcpEndpoint`]
//! and [`corral_proto::Node`] over real UDP sockets and TCP connections, and offers an async [`Client`] and
//! [`Server`] to library users.
//!
//! - [`socket`]: UDP over IPv4 and IPv6 (one dual-stack `[::]` socket), batched receive (`recvmmsg`, GRO)
//!   with the local destination address of every datagram (IP_PKTINFO / IPV6_RECVPKTINFO, via `quinn-udp`)
//!   so that multicast requests are recognised, multicast joins and leaves. Sends stay one `sendmsg` per
//!   datagram: a `sendmmsg` batch of each turn's replies was measured (branch `sendmmsg`, 2026-11-22,
//!   16 and 64 bench clients, server pinned to one core) at 8.52-9.44 µs of server CPU per request
//!   against 8.49-9.02 µs without it — no gain on loopback, where the kernel's per-datagram work
//!   dominates — so it was not merged.
//! - The driver maps corral's [`Instant`](corral_proto::Instant) onto a `std::time::Instant` epoch taken
//!   at start, seeds each endpoint from the OS, and drains `poll_transmit` / `poll_event` /
//!   `poll_command` / `poll_timeout` after every input.
//! - CoAP over TCP (RFC 8323): a listener and connection tasks with bounded buffers (`tcp`); the
//!   protocol itself is corral-proto's.
//! - [`Client`]: `client.get("coap://[::1]/s/t").await`, `coap+tcp://` URIs, a request builder with
//!   block sizes, [`Observation`] streams (RFC 7641), multicast response streams.
//! - [`Server`]: sans-IO services at path prefixes and async handlers with path patterns,
//!   `/.well-known/core`, UDP and optionally TCP, graceful shutdown.
//! - [`uri`]: corral-wire's [`Uri`] plus the OS lookup of IPv6 zones.
//!
//! This crate never implements protocol behaviour: retransmission, deduplication, separate responses and
//! leisure all happen in corral-proto, identically under the simulator.

mod client;
mod driver;
pub mod oscore;
mod server;
pub mod socket;
mod tcp;
pub mod uri;

pub use client::{Client, ClientBuilder, Error, MulticastResponses, Observation, RequestBuilder};
pub use driver::{os_seed, Clock, DriverStats};
pub use server::{RouteConfig, Server, ServerBuilder, ServerHandle, ServerRequest};
pub use tcp::bind_listener;
pub use uri::{parse_uri, Scheme, Uri, UriError};

pub use corral_proto;
pub use corral_proto::wire::{Code, ContentFormat, OptionNumber, Token};
pub use corral_proto::{
    BlockConfig, EndpointConfig, Limits, ObservePolicy, Request, Response, SendParams, Service, TcpConfig,
    TransferProgress, TransmissionParams,
};
