//! `[stream]` in a scenario: seed 003's streaming experiment — a sensor on the wired host streams readings
//! over a lossy link of the given bit rate to a collector on the gateway, with CoAP-SC or a baseline (run
//! by `crate::streaming`).

use super::{err, ScenarioError};
use serde::{Deserialize, Serialize};

/// The paper's set-up by default (§4): 600 readings of 150 bytes every 500 ms, a 5-reading buffer, a
/// 1 Mb/s link (between its access points) with 5 ms of delay each way.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StreamSpec {
    #[serde(default = "sc")]
    pub scheme: String,
    #[serde(default = "count")]
    pub count: u32,
    #[serde(default = "size")]
    pub size: usize,
    #[serde(default = "interval")]
    pub interval_ms: u64,
    #[serde(default = "buffer")]
    pub buffer: u32,
    /// Probability that the link loses a datagram, each direction (the `loss` axis overrides it).
    #[serde(default)]
    pub loss: f64,
    #[serde(default = "bandwidth")]
    pub bandwidth_bps: u64,
    #[serde(default = "delay")]
    pub delay_ms: f64,
}

fn sc() -> String {
    "sc".into()
}
fn count() -> u32 {
    600
}
fn size() -> usize {
    150
}
fn interval() -> u64 {
    500
}
fn buffer() -> u32 {
    5
}
fn bandwidth() -> u64 {
    1_000_000
}
fn delay() -> f64 {
    5.0
}

impl StreamSpec {
    /// Checks a point's values (after the axes applied).
    pub fn validate(&self) -> Result<(), ScenarioError> {
        if !matches!(self.scheme.as_str(), "sc" | "udp" | "tcp") {
            return err(format!("stream.scheme {:?}: sc, udp or tcp", self.scheme));
        }
        if !(0.0..1.0).contains(&self.loss) {
            return err(format!("stream.loss {}: a probability below 1", self.loss));
        }
        if self.count == 0 || self.buffer == 0 || self.buffer > 1024 || self.size == 0 || self.size > 1024 {
            return err("stream: count ≥ 1, buffer 1..1024, size 1..1024 bytes");
        }
        if self.bandwidth_bps == 0 || self.interval_ms == 0 {
            return err("stream: bandwidth_bps and interval_ms above 0");
        }
        Ok(())
    }
}
