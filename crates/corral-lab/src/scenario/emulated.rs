//! `[emulated]` in a scenario: seed 004's experiment — real programs on either side of `corral link` (an
//! emulated link between two network namespaces), CoAP over UDP or HTTP over TCP, throughput in bytes per
//! second through the link (run by `crate::family::emulated`). Real time: a point takes `duration_s`.

use super::point::AxisValue;
use super::{err, ScenarioError};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmulatedSpec {
    /// `coap` (corral serve and a CoAP client, see `sender`) or `http` (python3 -m http.server and the
    /// paper's Python client: a GET on a new connection, then `http_pause_ms`, in a loop): the `protocol`
    /// axis.
    pub protocol: String,
    /// `none`, `dN` (N ms of delay) or `lN` (N % loss), on the directions `direction` names.
    pub impairment: String,
    /// `false`: every point runs on a clean link whatever its impairment says — the sensitivity variant
    /// that removes the cause of every "falls with" claim.
    pub impaired: bool,
    /// The impaired directions: `to-server` (the client's packets only, as `tc netem` on the client's
    /// interface: the paper) or `both` (`corral link`'s default).
    pub direction: String,
    /// The CoAP client: `open` (a NON GET every `interval_ms` from one socket, never waiting for the
    /// answer: the paper's changed coap-client as its capture shows it) or `closed` (`corral get -N` in a
    /// shell loop: each request waits for its answer or its 5 s timeout).
    pub sender: String,
    /// The open-loop sender's period, ms.
    pub interval_ms: u64,
    /// The HTTP client's pause after each response, ms (the paper's client: `sleep(0.02)`).
    pub http_pause_ms: u64,
    /// Seconds of traffic per point (seed 004: 60) and with `--quick`.
    pub duration_s: u64,
    pub quick_duration_s: u64,
    /// Bytes of the HTTP resource (the paper's index.html: 4).
    pub http_bytes: usize,
}

impl Default for EmulatedSpec {
    fn default() -> EmulatedSpec {
        EmulatedSpec {
            protocol: "coap".into(),
            impairment: "none".into(),
            impaired: true,
            direction: "to-server".into(),
            sender: "open".into(),
            interval_ms: 200,
            http_pause_ms: 20,
            duration_s: 60,
            quick_duration_s: 5,
            http_bytes: 4,
        }
    }
}

impl EmulatedSpec {
    /// The sweep axes of `[emulated]`: `protocol` (CoAP/UDP or HTTP/TCP, seed 004's two) and `impairment`.
    pub const AXES: &'static [&'static str] = &["protocol", "impairment"];

    pub(super) fn apply_axis(&mut self, axis: &str, v: &AxisValue) -> Result<(), ScenarioError> {
        match axis {
            "protocol" => self.protocol = v.to_string(),
            _ => self.impairment = v.to_string(),
        }
        Ok(())
    }

    /// Forgets the other protocol's parameters: the CoAP sender's for an HTTP point, HTTP's for a CoAP one.
    /// They are no input of that point's run, so two points that differ only in them are one run (a
    /// sensitivity variant that changes the CoAP sender takes the base run's HTTP rows, see
    /// `sweep::run_sensitivity`).
    pub fn keep_own_protocol(&mut self) {
        let d = EmulatedSpec::default();
        if self.protocol == "http" {
            (self.sender, self.interval_ms) = (d.sender, d.interval_ms);
        } else {
            (self.http_pause_ms, self.http_bytes) = (d.http_pause_ms, d.http_bytes);
        }
    }

    /// `(delay ms, loss)` the link applies: the impairment's, or none when `impaired` is false.
    pub fn applied(&self) -> Result<(f64, f64), ScenarioError> {
        let i = self.impairment()?;
        Ok(if self.impaired { i } else { (0.0, 0.0) })
    }

    /// `(delay ms, loss)` of the impairment.
    pub fn impairment(&self) -> Result<(f64, f64), ScenarioError> {
        let bad = || {
            ScenarioError::invalid(format!("impairment {:?}: none, dN (ms of delay) or lN (% loss)", self.impairment))
        };
        match self.impairment.as_str() {
            "none" => Ok((0.0, 0.0)),
            s => {
                let (k, v) = s.split_at(1);
                let v: f64 = v.parse().map_err(|_| bad())?;
                match k {
                    "d" if (0.0..=10_000.0).contains(&v) => Ok((v, 0.0)),
                    "l" if (0.0..100.0).contains(&v) => Ok((0.0, v / 100.0)),
                    _ => Err(bad()),
                }
            }
        }
    }

    pub fn validate(&self) -> Result<(), ScenarioError> {
        if !matches!(self.protocol.as_str(), "coap" | "http") {
            return err(format!("emulated.protocol {:?}: coap or http", self.protocol));
        }
        if !matches!(self.direction.as_str(), "to-server" | "both") {
            return err(format!(
                "emulated.direction {:?}: to-server (netem on the client's interface) or both",
                self.direction
            ));
        }
        if !matches!(self.sender.as_str(), "open" | "closed") {
            return err(format!(
                "emulated.sender {:?}: open (NON GETs on a timer) or closed (corral get in a loop)",
                self.sender
            ));
        }
        self.impairment()?;
        Ok(())
    }
}
