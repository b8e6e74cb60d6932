//! # corral-proto
//!
//! The sans-IO CoAP protocol engine. It contains no networking code and never reads a clock or the global
//! RNG: inputs are `handle_*(now, …)` calls, outputs are drained with `poll_*`, time is corral's own
//! [`Instant`], and randomness comes from the seeds in the configuration (what peers must not predict
//! from a CSPRNG, [`SecretRng`]; the rest from the cheap [`Rng`]: see `rng.rs`). The tokio runtime (`corral-tokio`)
//! and the simulator (`corral-sim`) drive the very same state machines.
//!
//! - [`Endpoint`]: message layer and exchanges over one datagram transport (RFC 7252 §4, §5, §8).
//! - [`Service`] and [`Node`]: how applications plug in — the server resources, the Entity Manager,
//!   the proxy and simulated devices are all services on a node. What a service needs done outside the
//!   core (a store write) it asks for as an effect and is told when it is done ([`EffectRunner`]).
//! - Observe (RFC 7641) and block-wise transfer (RFC 7959) are part of the endpoint: a service marks a GET
//!   response [`Response::observable`] and calls [`Context::changed`]; large bodies are cut into blocks
//!   and reassembled without the application noticing.
//! - [`TcpEndpoint`]: CoAP over TCP (RFC 8323): CSM, Ping/Pong, Release, Abort, no message layer; the
//!   same block-wise and Observe processing.
//! - [`Transports`]: the UDP endpoint and the TCP endpoint of a node or client, and the one place that
//!   picks between them by the id an exchange carries.
//! - [`Shard`]: the slice of message IDs and tokens of one endpoint among several sharing a port, so that
//!   the socket can hand each answer back to the endpoint that asked.
//! - [`TransmissionParams`]: ACK_TIMEOUT and friends, with the derived values of RFC 7252 §4.8.2.
//! - [`Metric`]: what a stats struct counts, as plain data (`describe` beside each), for an exporter.
//! - `testing` (cargo feature `testing`, for the tests of this crate and the crates above it): an
//!   in-memory network of nodes on virtual time. Not part of the protocol API.
//!
//! ## Driving an endpoint or node
//! After every input (`handle_datagram`, `handle_timeout`, or an application call), drain
//! `poll_transmit` (send each datagram), for an [`Endpoint`] `poll_event`, for a [`Node`] `poll_command`,
//! then ask `poll_timeout` when to call `handle_timeout` next. A node's effects are done by the
//! [`EffectRunner`] the driver installed (`Node::set_effect_runner`) after every input, with no call of the
//! driver's own; its completions are due at the node's `poll_timeout`.
//!
//! ## Logging policy (`tracing`)
//! TRACE per message; DEBUG exchange life cycle and malformed input (a flood must not flood the log);
//! INFO retransmissions, timeouts and resets; WARN limits being hit and peers that misbehave.

mod effect;
mod endpoint;
mod links;
mod message;
pub mod metric;
mod node;
mod params;
mod prefix;
mod rng;
mod service;
mod shard;
pub mod tcp;
#[cfg(feature = "testing")]
pub mod testing;
mod time;
mod transports;

pub use effect::{EffectDone, EffectId, EffectOp, EffectRunner, InlineRunner};
pub use endpoint::{
    AmplificationLimit, BlockConfig, Endpoint, EndpointConfig, Event, Limits, ObservePolicy, Stats, TableSizes,
    TransferProgress, Transmit,
};
pub use links::render as render_links;
pub use message::{
    InboundId, IncomingRequest, OscoreIdentity, Request, RequestError, RequestId, Response, SendParams, StartError,
    Transport, UnknownExchange,
};
pub use metric::{Metric, MetricSink, MetricUnit, MetricValue};
pub use node::{Node, ServiceHandle};
pub use params::TransmissionParams;
pub use prefix::{canonical, Prefix, PrefixError};
pub use rng::{Rng, SecretRng};
pub use service::{
    Context, Inbound, Layer, LayerCounter, NoContent, NoContentReason, NodeCommand, Outcome, ResourceLink, Service,
};
pub use shard::Shard;
pub use tcp::{ConnId, TcpConfig, TcpEndpoint, TcpTransmit};
pub use time::{Duration, Instant};
pub use transports::Transports;

pub use corral_wire as wire;

/// The server's side of block-wise transfers (RFC 7959 §2.2) for a layer that cuts bodies into blocks itself
/// — OSCORE's inner blocks (RFC 8613 §4.1.3.4.1) — with the endpoint's own pieces: the request's key block
/// options aside, the rendered bodies kept for the later blocks, the ETag, the slice.
pub mod blockwise {
    pub use crate::endpoint::block::{ensure_etag, request_key, slice, BodyCache};
}
