//! The experiment families: how a point of each family is built on the harness, run and measured — one
//! module per family, named like its section of the scenario file.
//!
//! | module | family | runs |
//! | --- | --- | --- |
//! | [`entity`] | `[entity]` (the default; seed 000) | the real Entity Manager on each gateway, virtual devices on the members; the client creates an entity and queries or follows it |
//! | [`proxy`] | `[proxy]` | corral-proxy on the forwarders; consumers ask the members' resources through them |
//! | [`stream`] | `[stream]` (seed 003) | a sensor streams readings to a collector over one lossy link: CoAP-SC, CoAP over UDP or TCP |
//! | [`emulated`] | `[emulated]` (seed 004) | real programs on either side of an emulated link, in real time |
//! | [`baseline`] | `[baseline]` (seed 002) | CoAP against corral-sim's HTTP baselines over one IEEE 802.15.4 hop |
//! | [`multiparty`] | `[multiparty]` (seed 001) | nine clients and a server over the Fig. 6 tree in Table II's deployments |
//!
//! Each module's `run` takes the point's [`crate::scenario::Common`] (what it models of it) and its own
//! part of [`crate::scenario::Experiment`], and gives a [`crate::harness::PointRun`]. A family never reads a
//! clock (but the emulated one, which runs in real time) or draws randomness that does not follow from the
//! point's seed.

pub mod baseline;
pub mod emulated;
pub mod entity;
pub mod multiparty;
pub mod proxy;
pub mod stream;
