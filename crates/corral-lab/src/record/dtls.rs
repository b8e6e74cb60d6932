//! What a `[dtls]` point measures: the time and the radio cost to the first protected response, and what
//! the handshake (if any) took — its flights sent again, its largest datagram and that datagram's frames.

use serde::{Deserialize, Serialize};

/// A `[dtls]` point's facts (see `crate::family::dtls`): counted from the client's first datagram to the
/// moment the client had the verified response (the whole run when none came).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DtlsFacts {
    /// Radio hops between the client and the server.
    pub hops: f64,
    /// To the first protected response, ms; NaN when none came within the limit.
    pub first_ms: f64,
    /// IEEE 802.15.4 data frames on the air (every hop, MAC retries included) and their bytes (PHY
    /// included).
    pub frames: u64,
    pub air_bytes: u64,
    /// UDP datagrams the two ends sent (DTLS records or CoAP messages; not counting forwarding).
    pub datagrams: u64,
    /// The largest of them, bytes, and the 6LoWPAN fragments it took.
    pub largest: u64,
    pub largest_frames: u64,
    /// Handshake flights sent again on dimpl's retransmission timer (both ends).
    pub flights_retx: u64,
    /// Handshakes that completed (0 or 1; 0 for the points without DTLS).
    pub handshakes: u64,
}

impl DtlsFacts {
    /// Nothing measured (what a reader starts from).
    pub fn empty() -> DtlsFacts {
        DtlsFacts {
            hops: f64::NAN,
            first_ms: f64::NAN,
            frames: 0,
            air_bytes: 0,
            datagrams: 0,
            largest: 0,
            largest_frames: 0,
            flights_retx: 0,
            handshakes: 0,
        }
    }
}
