//! # corral-tokio
//!
//! The tokio runtime for corral: it runs the sans-IO [`corral_proto::Endpoint`], [`corral_proto::TcpEndpoint`]
//! and [`corral_proto::Node`] over real UDP sockets and TCP connections, and offers an async [`Client`] and
//! [`Server`] to library users.
//!
//! - [`socket`]: UDP over IPv4 and IPv6 (one dual-stack `[::]` socket), batched receive (`recvmmsg`, GRO)
//!   with the local destination address of every datagram (IP_PKTINFO / IPV6_RECVPKTINFO, via `quinn-udp`)
//!   so that multicast requests are recognised, multicast joins and leaves, batched sends (`sendmmsg`).
//! - ICMP errors (`icmp`, Linux): both drivers read the socket's error queue (IP_RECVERR /
//!   IPV6_RECVERR) and hand each port, host or network unreachable to the endpoint, which fails the
//!   exchange the quoted datagram belongs to at once.
//! - [`event_loop`]: the one driver loop (`poll_timeout → handle_timeout → poll_command / poll_event /
//!   poll_transmit`, then the next input or timer) that the client's and server's driver, [`group_node`]
//!   and `corral bench`'s clients run. The driver maps corral's [`Instant`](corral_proto::Instant) onto a
//!   `std::time::Instant` epoch taken at start and keys each endpoint from the OS's CSPRNG ([`os_seeded`]).
//! - [`blocking`] (Linux): a server loop without a runtime, one thread asleep inside `recvmmsg`, for CoAP
//!   over UDP; [`workers`]: N workers on one port (SO_REUSEPORT, or shards steered by [`steer`]) on
//!   either driver.
//! - CoAP over TCP (RFC 8323): a listener and connection tasks with bounded buffers (`tcp`); the
//!   protocol itself is corral-proto's.
//! - [`tls`]: `coaps+tcp://` — CoAP over TLS (rustls, ring provider) on the connections of `tcp`
//!   ([`ClientBuilder::tls`], [`Server::listen_tls`]).
//! - `secure`: `coaps://` — a client's or server's machine behind corral-dtls's sans-IO secure node,
//!   the one composition of DTLS and CoAP every driver runs ([`ClientBuilder::dtls`],
//!   [`ServerBuilder::dtls`], [`Server::set_dtls_mux`], [`Server::listen_dtls`]).
//! - [`Client`]: `client.get("coap://[::1]/s/t").await`, `coap+tcp://` URIs, a request builder with
//!   block sizes, [`Observation`] streams (RFC 7641), multicast response streams.
//! - [`Server`]: sans-IO services at path prefixes and async handlers with path patterns,
//!   `/.well-known/core`, UDP and optionally TCP, graceful shutdown.
//! - [`uri`]: corral-wire's [`Uri`] plus the OS lookup of IPv6 zones.
//! - [`group_node`]: a node on one unicast socket that opens a socket per multicast group it joins
//!   (a group member, such as `corral device`'s virtual devices, which corral-gateway's `fleet` runs).
//!
//! The source is in four rooms, one folder each: `driver/` (the driver, its loop, the blocking driver,
//! steering), `net/` (sockets, addresses, ICMP, TCP, TLS, URIs), `secure/` (`coaps://` and the client's
//! OSCORE) and `app/` (client, server, workers, group node, load generator); floors go
//! app → secure → driver → net, never back. The public modules keep their flat paths.
//!
//! This crate never implements protocol behaviour: retransmission, deduplication, separate responses and
//! leisure all happen in corral-proto, identically under the simulator.
//!
//! Why the drivers look as they do (measurements, CPU per request against the bare echo floor): `PERF.md`
//! beside this crate's `Cargo.toml`.

mod app;
mod driver;
mod error;
mod net;
mod secure;

// The rooms are folders by concern (`driver/`, `net/`, `secure/`, `app/`); the public modules keep their
// flat paths (`corral_tokio::socket`, `corral_tokio::workers`, …) so that users need not know the rooms.
pub use app::{group_node, load, workers};
pub use driver::event_loop;
#[cfg(target_os = "linux")]
pub use driver::{blocking, steer};
pub use net::{socket, tls, uri};
pub use secure::oscore;

pub use app::client::{
    Client, ClientBuilder, Collected, Error, MulticastResponse, MulticastResponses, Observation, OscoreError,
    RequestBuilder,
};
pub use app::server::{RouteConfig, Server, ServerBuilder, ServerHandle, ServerRequest};
pub use corral_dtls::{DtlsConfig, DtlsStats, HandshakeFailure, PeerKeys, PskKeys, Role as DtlsRole, Rpk, X509};
pub use driver::{os_seed, os_seeded, Clock, DriverStats, OsSeeded};
pub use net::addr::on_this_machine;
pub use net::tcp::bind_listener;
pub use net::tls::{PemFile, TlsClientConfig, TlsConfigError, TlsServerConfig};
pub use net::uri::{parse_uri, Scheme, Uri, UriError};
pub use secure::{DtlsMuxConfig, DtlsNumbers, DtlsWatch, DTLS_PUBLISH_PERIOD};

pub use corral_proto;
pub use corral_proto::wire::{Code, ContentFormat, OptionNumber, Token};
pub use corral_proto::{
    BlockConfig, EndpointConfig, Limits, ObservePolicy, Request, Response, SendParams, Service, TcpConfig,
    TransferProgress, TransmissionParams,
};
