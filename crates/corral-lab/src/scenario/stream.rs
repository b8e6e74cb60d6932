//! `[stream]` in a scenario: seed 003's streaming experiment — a sensor on the wired host streams readings
//! over a lossy link of the given bit rate to a collector on the gateway, with CoAP-SC or a baseline (run
//! by `crate::family::stream`).

use super::point::AxisValue;
use super::{err, ScenarioError};
use serde::{Deserialize, Serialize};

/// The paper's set-up by default (§4): 600 readings of 150 bytes every 500 ms, a 5-reading buffer, a
/// 1 Mb/s link (between its access points) with 5 ms of delay each way, the AP's outage generator (a loss
/// event drawn every second, an outage of 2.5 s as the paper's Fig. 12 trace shows), and TCP with Linux's
/// timers (go-coap on Linux).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct StreamSpec {
    /// `sc` (CoAP-SC), `udp` (CoAP over UDP) or `tcp` (CoAP over TCP); the `scheme` axis overrides it.
    pub scheme: String,
    /// Readings sent.
    pub count: u32,
    /// Bytes of a reading.
    pub size: usize,
    /// A reading every so many ms.
    pub interval_ms: u64,
    /// Readings the sender may keep outstanding (the `buffer` axis overrides it).
    pub buffer: u32,
    /// The error rate (the `loss` axis overrides it): with `loss_model = "outage"`, the probability of a
    /// loss event at each draw; with `"independent"`, of losing each datagram, each direction.
    pub loss: f64,
    /// `outage` (the paper's AP: a draw every `outage_period_ms`, an event takes the link down for
    /// `outage_ms`, both directions) or `independent` (each datagram lost on its own: corral's variant).
    pub loss_model: String,
    pub outage_period_ms: u64,
    pub outage_ms: u64,
    /// The TCP stack's timers for CoAP over TCP: `linux` (go-coap on Linux: RTO ≥ SRTT + 200 ms, 1 s
    /// before a sample, exponential back-off, 40 ms delayed ACK, no Nagle) or `smoltcp` (its own: RTO
    /// from 10 ms, 10 ms delayed ACK).
    pub tcp: String,
    pub bandwidth_bps: u64,
    /// One-way delay of the link, ms.
    pub delay_ms: f64,
}

impl Default for StreamSpec {
    fn default() -> StreamSpec {
        StreamSpec {
            scheme: "sc".into(),
            count: 600,
            size: 150,
            interval_ms: 500,
            buffer: 5,
            loss: 0.0,
            loss_model: "outage".into(),
            outage_period_ms: 1000,
            outage_ms: 2500,
            tcp: "linux".into(),
            bandwidth_bps: 1_000_000,
            delay_ms: 5.0,
        }
    }
}

impl StreamSpec {
    /// The sweep axes of `[stream]`: `scheme` (seed 003's candidate schemes), `buffer`, `loss`.
    pub const AXES: &'static [&'static str] = &["scheme", "buffer", "loss"];

    pub(super) fn apply_axis(&mut self, axis: &str, v: &AxisValue) -> Result<(), ScenarioError> {
        match axis {
            "scheme" => self.scheme = v.to_string(),
            "buffer" => self.buffer = v.whole(axis)?,
            _ => self.loss = v.number(axis)?,
        }
        Ok(())
    }

    /// Checks a point's values (after the axes applied).
    pub fn validate(&self) -> Result<(), ScenarioError> {
        if !matches!(self.scheme.as_str(), "sc" | "udp" | "tcp") {
            return err(format!("stream.scheme {:?}: sc, udp or tcp", self.scheme));
        }
        if !matches!(self.loss_model.as_str(), "outage" | "independent") {
            return err(format!("stream.loss_model {:?}: outage or independent", self.loss_model));
        }
        if !matches!(self.tcp.as_str(), "linux" | "smoltcp") {
            return err(format!("stream.tcp {:?}: linux or smoltcp", self.tcp));
        }
        Ok(())
    }
}
