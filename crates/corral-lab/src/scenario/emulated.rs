//! `[emulated]` in a scenario: seed 004's experiment — real programs on either side of `corral link` (an
//! emulated link between two network namespaces), CoAP over UDP or HTTP over TCP, throughput in bytes per
//! second through the link (run by `crate::family::emulated`). Real time: a point takes `duration_s`.

use super::{err, ScenarioError};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmulatedSpec {
    /// `coap` (corral serve, corral get -N in a loop) or `http` (python3 -m http.server, curl in a loop).
    pub scheme: String,
    /// `none`, `dN` (N ms of delay each way) or `lN` (N % loss each way).
    pub impairment: String,
    /// Seconds of traffic per point (seed 004: 60) and with `--quick`.
    pub duration_s: u64,
    pub quick_duration_s: u64,
    /// Bytes of the HTTP resource.
    pub http_bytes: usize,
}

impl Default for EmulatedSpec {
    fn default() -> EmulatedSpec {
        EmulatedSpec {
            scheme: "coap".into(),
            impairment: "none".into(),
            duration_s: 60,
            quick_duration_s: 3,
            http_bytes: 1000,
        }
    }
}

impl EmulatedSpec {
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
        if !matches!(self.scheme.as_str(), "coap" | "http") {
            return err(format!("emulated.scheme {:?}: coap or http", self.scheme));
        }
        self.impairment()?;
        if self.duration_s == 0 || self.quick_duration_s == 0 || self.duration_s > 3600 {
            return err("emulated: duration_s and quick_duration_s between 1 and 3600");
        }
        Ok(())
    }
}
