//! The resources of `corral serve`, as sans-IO services that any driver can mount on a node: real sockets
//! (corral-tokio, the `corral` binary) or the simulator (corral-sim, the lab).
//!
//! # What it owns
//! [`plugtest`]: the ETSI CoAP plugtest resources (TD_COAP_CORE, _LINK, _BLOCK, _OBS) and the demo
//! resources `/hello`, `/echo` and `/stats`.
//!
//! # What it must never do
//! Read a clock, open a socket or draw from a global random generator: time comes in as `now`, what the
//! services do goes out through corral-proto's `Context` (`scripts/check-deps.sh` checks that this crate
//! depends on no runtime). Panic on anything a client sends; keep state that grows without a bound.

pub mod plugtest;

pub use plugtest::{Echo, Hello, Plugtest, Stats, OBS_PERIOD};
