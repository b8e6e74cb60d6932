//! `[baseline]` in a scenario: seed 002's evaluation of CoAP against HTTP (TinyCoAP §6) — a client on the
//! gateway (the paper's PC behind its 6LoWPAN base station) asks a server mote one IEEE 802.15.4 hop away
//! for a body of `payload` bytes, with CoAP or one of the three HTTP baselines (run by
//! `crate::family::baseline`).

use super::point::AxisValue;
use super::{err, ScenarioError};
use serde::{Deserialize, Serialize};

/// The solutions (the `solution` axis; seed 002's word): CoAP (corral's endpoint; CON, or NON when `rate` >
/// 0) on one of the paper's two server profiles — `coap` TinyCoAP's, `coapblip` CoapBlip's (see
/// `crate::family::baseline`) — and the HTTP baselines of `corral_sim::http`; and [`AA_TWIN`].
pub const SOLUTIONS: [&str; 6] = ["coap", "coapblip", "http-tcp", "http-persistent", "http-udp", AA_TWIN];

/// The A/A twin: TinyCoAP's profile again, on a second sequence of random draws (its point's seed mixed
/// with a constant, `crate::family::baseline::aa_seed`). Not a solution of the paper: its spread against
/// `coap` in the same run is the noise every comparison of solutions is reported beside and must exceed
/// (`crate::findings::Noise`).
pub const AA_TWIN: &str = "coap-aa";

/// How a CoAP server holds a request it received (seed 002 §4.3): `copied` (TinyCoAP: the PDU is copied
/// into its pool and the UDP buffer freed at once) or `held` (CoapBlip: the PDU stays in its malloc'd
/// UDP-level buffer, read through pointers, until the request has been processed).
pub const BUFFERS: [&str; 2] = ["copied", "held"];

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct BaselineSpec {
    pub solution: String,
    /// Response body bytes.
    pub payload: usize,
    /// Transactions per point (the paper: 100).
    pub count: usize,
    pub quick_count: usize,
    /// Requests per second, open loop (the server workload, §6.4); 0: each request after the previous
    /// response.
    pub rate: f64,
    /// Table 4's SNR in dB (2.5, 2, 1.5 or 1); 0: a loss-free link.
    pub snr_db: f64,
    /// How Table 4 is applied (see `crate::family::baseline`): `message` (the paper's procedure, §6.5: a
    /// message is discarded whole at the receiver's UDP layer with Table 4's `C_f` for its `f` fragments)
    /// or `frames` (corral's variant: every frame lost by Eq. (1) with the symbol error rate read back from
    /// Table 4's `f = 1` column; MAC retries and fragmentation do the rest).
    pub loss_model: String,
    /// With `message`: where messages are discarded — `server` (the paper's words: "the CoAP or HTTP message
    /// received by the server is discarded at UDP layer") or `both` (either end, each message by its own
    /// fragments).
    pub discard_at: String,
    /// TCP's timers: `paper` (§6.5: RFC 6298's 1 s initial and minimum RTO, exponential back-off capped at
    /// `tcp_max_rto_ms`) or `smoltcp` (its own: 10 ms to 10 s).
    pub tcp: String,
    pub tcp_max_rto_ms: u32,
    /// CoAP's ACK_TIMEOUT and MAX_RETRANSMIT (seed 002 §6.5: 1 s, no randomness, 4).
    pub ack_timeout_ms: u64,
    pub max_retransmit: u8,
    /// Virtual time a point may take at most, s.
    pub limit_s: u64,
    /// The largest response body each CoAP server profile can build (seed 002 §6: TinyCoAP 1200 B, its
    /// compile-time PoolC size; CoapBlip 650 B). A larger one is answered 5.00 (Internal Server Error).
    pub tinycoap_max_payload: usize,
    pub coapblip_max_payload: usize,
    /// How CoapBlip's server holds a received request ([`BUFFERS`]; the paper's: `held`). TinyCoAP's is
    /// always `copied`.
    pub coapblip_buffer: String,
    /// Every radio timing `radio_speed` times as fast (bit rate × k; turnaround, CCA, backoff period and
    /// ACK wait ÷ k). 1 is IEEE 802.15.4 at 250 kb/s; other values are a deliberately wrong model for
    /// `[[sensitivity]]` variants that take channel access out of a claim's cause.
    pub radio_speed: f64,
}

impl Default for BaselineSpec {
    /// The paper's CoAP set-up (§6): 100 transactions of a 50-byte body one after the other (20 with
    /// `--quick`), a loss-free link, ACK_TIMEOUT 1 s and 4 retransmissions, at most 2 h of virtual time.
    fn default() -> BaselineSpec {
        BaselineSpec {
            solution: "coap".into(),
            payload: 50,
            count: 100,
            quick_count: 20,
            rate: 0.0,
            snr_db: 0.0,
            loss_model: "message".into(),
            discard_at: "server".into(),
            tcp: "paper".into(),
            tcp_max_rto_ms: 16_000,
            ack_timeout_ms: 1000,
            max_retransmit: 4,
            limit_s: 7200,
            radio_speed: 1.0,
            tinycoap_max_payload: 1200,
            coapblip_max_payload: 650,
            coapblip_buffer: "held".into(),
        }
    }
}

impl BaselineSpec {
    /// The sweep axes of `[baseline]`: `solution` (seed 002's word for what it compares: a CoAP server
    /// profile or an HTTP baseline, [`SOLUTIONS`]), `payload`, `rate`, `snr_db`.
    pub const AXES: &'static [&'static str] = &["solution", "payload", "rate", "snr_db"];

    pub(super) fn apply_axis(&mut self, axis: &str, v: &AxisValue) -> Result<(), ScenarioError> {
        match axis {
            "solution" => self.solution = v.to_string(),
            "payload" => self.payload = v.whole(axis)?,
            "rate" => self.rate = v.number(axis)?,
            _ => self.snr_db = v.number(axis)?,
        }
        Ok(())
    }

    pub fn validate(&self) -> Result<(), ScenarioError> {
        if !SOLUTIONS.contains(&self.solution.as_str()) {
            return err(format!("baseline.solution {:?}: one of {}", self.solution, SOLUTIONS.join(", ")));
        }
        if self.rate > 0.0 && !matches!(self.solution.as_str(), "coap" | "coapblip" | AA_TWIN | "http-udp") {
            return err("baseline.rate: an open loop needs coap, coapblip, coap-aa or http-udp (TCP paces itself)");
        }
        if !BUFFERS.contains(&self.coapblip_buffer.as_str()) {
            return err(format!("baseline.coapblip_buffer {:?}: one of {}", self.coapblip_buffer, BUFFERS.join(", ")));
        }
        if self.snr_db != 0.0 && corral_sim::loss::snr::table4_symbol_error_rate(self.snr_db).is_none() {
            return err(format!("baseline.snr_db {}: 0 or one of Table 4's 2.5, 2, 1.5, 1", self.snr_db));
        }
        if !matches!(self.loss_model.as_str(), "message" | "frames") {
            return err(format!("baseline.loss_model {:?}: message or frames", self.loss_model));
        }
        if !matches!(self.discard_at.as_str(), "server" | "both") {
            return err(format!("baseline.discard_at {:?}: server or both", self.discard_at));
        }
        if !matches!(self.tcp.as_str(), "paper" | "smoltcp") {
            return err(format!("baseline.tcp {:?}: paper or smoltcp", self.tcp));
        }
        Ok(())
    }
}
