//! `[multiparty]` in a scenario: seed 001's experiment (§IV) — nine clients ask one server for
//! `/instruction?t=x` once a second over the Fig. 6 tree, in one of Table II's four deployments (run by
//! `crate::family::multiparty`). The `deployment` axis picks the deployment.

use super::point::AxisValue;
use super::{err, ScenarioError};
use serde::{Deserialize, Serialize};

/// Table II's deployments, as the `deployment` axis names them.
pub const DEPLOYMENTS: [&str; 4] = ["oscore", "oscore-proxy", "det-oscore-proxy", "ndn"];

/// Defaults are the paper's and the original code's (`icn-*/app/Makefile`, `main.c`): 1000 requests per
/// client, one a second, 40 cache entries, a 20 ms signature on the server.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct MultipartySpec {
    /// `oscore`, `oscore-proxy`, `det-oscore-proxy` or `ndn` (the `deployment` axis overrides it).
    pub deployment: String,
    /// Requests per client (seed 001: 1000) and with `--quick`.
    pub requests: u32,
    pub quick_requests: u32,
    /// Request k is due before k · interval (the original `EVENT_TIME`), ms.
    pub interval_ms: u64,
    /// The first request's offset (the original's `event.offset = 100`), ms.
    pub first_ms: u64,
    /// Responses each forwarder caches (seed 001: 40).
    pub cache_entries: usize,
    /// The server's signature time in the deployment that signs (seed 001: 20 ms), ms.
    pub signature_ms: f64,
    /// Requests a client or proxy may have outstanding (the original's `REQ_WAITING_MAX` 94).
    pub nstart: u16,
    /// Radio contact range, m: nodes this close hear, carrier-sense and collide with each other (next hops
    /// stand 10 m apart). 0: only the route table's next hops are in contact.
    pub contact_m: f64,
    /// Bytes of queued packets a node holds at most (RIOT GNRC's packet buffer, `CONFIG_GNRC_PKTBUF_SIZE`:
    /// 6144 by default in `sys/include/net/gnrc/pktbuf.h`); a packet that does not fit in its transmit
    /// queue is dropped. 0: no byte bound (only corral-sim's datagram count).
    pub pktbuf_bytes: usize,
    /// Datagrams a node's transmit queue holds at most (corral-sim's default 8 is Contiki's
    /// `QUEUEBUF_CONF_NUM`; with `pktbuf_bytes` a GNRC node may hold as many as fit in its buffer).
    pub queue_datagrams: usize,
    /// Count each retransmitted copy of a request that the server's message layer answered from its store
    /// (RFC 7252 §4.5) as a server response, as the seed's gcoap server, which built a new response for every
    /// copy, would have sent one: the variant that tests why corral's end-to-end OSCORE server stays at the
    /// 9/s optimum. A way of counting, not of running: the run is the same.
    pub count_copies: bool,
}

impl Default for MultipartySpec {
    fn default() -> MultipartySpec {
        MultipartySpec {
            deployment: "oscore".into(),
            requests: 1000,
            quick_requests: 60,
            interval_ms: 1000,
            first_ms: 100,
            cache_entries: 40,
            signature_ms: 20.0,
            nstart: 94,
            contact_m: 25.0,
            pktbuf_bytes: 0,
            queue_datagrams: 8,
            count_copies: false,
        }
    }
}

impl MultipartySpec {
    /// The sweep axes of `[multiparty]`: `deployment` (Table II's) and `interval_ms`.
    pub const AXES: &'static [&'static str] = &["deployment", "interval_ms"];

    pub(super) fn apply_axis(&mut self, axis: &str, v: &AxisValue) -> Result<(), ScenarioError> {
        match axis {
            "deployment" => self.deployment = v.to_string(),
            _ => self.interval_ms = v.whole(axis)?,
        }
        Ok(())
    }

    pub fn validate(&self) -> Result<(), ScenarioError> {
        if !DEPLOYMENTS.contains(&self.deployment.as_str()) {
            return err(format!("multiparty.deployment {:?}: one of {}", self.deployment, DEPLOYMENTS.join(", ")));
        }
        Ok(())
    }
}
