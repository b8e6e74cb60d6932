//! Transmission parameters (RFC 7252 §4.8) and the time values derived from them (§4.8.2).

use crate::time::Duration;

/// CoAP transmission parameters. Defaults are RFC 7252's; every endpoint has one set, overridable per peer.
///
/// <https://www.rfc-editor.org/rfc/rfc7252#section-4.8>
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransmissionParams {
    /// ACK_TIMEOUT: the initial retransmission timeout lower bound (2 s).
    pub ack_timeout: Duration,
    /// ACK_RANDOM_FACTOR: the initial timeout is uniform in [ACK_TIMEOUT, ACK_TIMEOUT·factor] (1.5).
    pub ack_random_factor: f64,
    /// MAX_RETRANSMIT: retransmissions of a CON before giving up (4).
    pub max_retransmit: u8,
    /// NSTART: outstanding interactions per peer (1).
    pub nstart: u16,
    /// DEFAULT_LEISURE: the window a server spreads its responses to multicast requests over (5 s).
    pub default_leisure: Duration,
    /// PROBING_RATE: bytes per second to a peer that does not respond (1 B/s).
    pub probing_rate: u32,
    /// MAX_LATENCY: the longest a datagram is assumed to travel (100 s).
    pub max_latency: Duration,
    /// PROCESSING_DELAY: how long a node takes to turn a CON into an ACK (ACK_TIMEOUT).
    pub processing_delay: Duration,
}

impl Default for TransmissionParams {
    fn default() -> Self {
        TransmissionParams {
            ack_timeout: Duration::from_secs(2),
            ack_random_factor: 1.5,
            max_retransmit: 4,
            nstart: 1,
            default_leisure: Duration::from_secs(5),
            probing_rate: 1,
            max_latency: Duration::from_secs(100),
            processing_delay: Duration::from_secs(2),
        }
    }
}

impl TransmissionParams {
    /// MAX_TRANSMIT_SPAN = ACK_TIMEOUT · (2^MAX_RETRANSMIT − 1) · ACK_RANDOM_FACTOR (45 s by default): the
    /// longest time from the first transmission of a CON to its last retransmission.
    pub fn max_transmit_span(&self) -> Duration {
        self.ack_timeout.mul_f64(((1u64 << self.max_retransmit) - 1) as f64 * self.ack_random_factor)
    }

    /// MAX_TRANSMIT_WAIT = ACK_TIMEOUT · (2^(MAX_RETRANSMIT+1) − 1) · ACK_RANDOM_FACTOR (93 s): the longest a
    /// sender waits for an ACK or RST after the first transmission.
    pub fn max_transmit_wait(&self) -> Duration {
        self.ack_timeout.mul_f64(((1u64 << (self.max_retransmit + 1)) - 1) as f64 * self.ack_random_factor)
    }

    /// EXCHANGE_LIFETIME = MAX_TRANSMIT_SPAN + 2·MAX_LATENCY + PROCESSING_DELAY (247 s): how long a message ID
    /// of a CON stays in use.
    pub fn exchange_lifetime(&self) -> Duration {
        self.max_transmit_span() + self.max_latency.saturating_mul(2) + self.processing_delay
    }

    /// NON_LIFETIME = MAX_TRANSMIT_SPAN + MAX_LATENCY (145 s): how long a message ID of a NON stays in use.
    pub fn non_lifetime(&self) -> Duration {
        self.max_transmit_span() + self.max_latency
    }

    /// The upper bound of the random initial retransmission timeout.
    pub fn max_initial_timeout(&self) -> Duration {
        self.ack_timeout.mul_f64(self.ack_random_factor)
    }

    /// Checks the values for sanity; the error says which is wrong.
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.ack_timeout.is_zero() {
            return Err("ACK_TIMEOUT must be positive");
        }
        if !(self.ack_random_factor >= 1.0 && self.ack_random_factor.is_finite()) {
            return Err("ACK_RANDOM_FACTOR must be at least 1.0");
        }
        if self.max_retransmit > 20 {
            return Err("MAX_RETRANSMIT above 20 is not supported");
        }
        if self.nstart == 0 {
            return Err("NSTART must be at least 1");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_defaults_match_rfc() {
        let p = TransmissionParams::default();
        assert_eq!(p.max_transmit_span(), Duration::from_secs(45));
        assert_eq!(p.max_transmit_wait(), Duration::from_secs(93));
        assert_eq!(p.exchange_lifetime(), Duration::from_secs(247));
        assert_eq!(p.non_lifetime(), Duration::from_secs(145));
    }
}
