//! Shards: several endpoints that share one UDP port (SO_REUSEPORT workers), each owning a slice of the
//! message-ID and token spaces, so that what answers a shard's own messages can be steered back to it.
//!
//! A worker that only answers requests needs no steering: the kernel keeps every datagram of one client
//! address and port on one socket, so duplicate detection and Observe stay on the worker that saw the
//! request. A worker that also *sends* requests (a gateway asking its members) does: the member answers
//! the shared port from its own address, and the kernel's hash of the member's address picks some
//! worker — usually not the one that asked. So a sharded endpoint makes every message ID it sends
//! `≡ index (mod count)` and the first byte of every token it generates `≡ index (mod count)`, and the
//! socket's steering program (corral-tokio's `socket::Steering`) reads the CoAP header of each datagram:
//!
//! - ACK and RST (empty or piggybacked): they echo one of our message IDs → shard `MID mod count`;
//! - a response in a CON or NON (separate responses, notifications, answers to multicast requests): it
//!   echoes one of our tokens → shard `token[0] mod count`;
//! - a request: the kernel's usual hash of the client's address (a *manager* shard may take the requests
//!   that change state, see the gateway).
//!
//! The endpoint keeps its side of the contract here; the program is I/O and lives with the socket.
//! Tokens a caller passes in [`crate::SendParams::token`] are used as given: a sharded caller must make
//! them with [`Shard::claim_token`].

/// One shard of `count` endpoints that share a port; `index` is this one's place (0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shard {
    index: u8,
    count: u8,
}

impl Default for Shard {
    fn default() -> Self {
        Shard::ALONE
    }
}

impl Shard {
    /// An endpoint alone on its port: every message ID and token is its own.
    pub const ALONE: Shard = Shard { index: 0, count: 1 };

    /// Shard `index` of `count` (1 ≤ count ≤ 64, index < count).
    pub fn new(index: u8, count: u8) -> Option<Shard> {
        ((1..=64).contains(&count) && index < count).then_some(Shard { index, count })
    }

    pub fn index(self) -> u8 {
        self.index
    }

    pub fn count(self) -> u8 {
        self.count
    }

    /// Whether message ID `mid` is in this shard's slice.
    pub fn owns_mid(self, mid: u16) -> bool {
        mid % u16::from(self.count) == u16::from(self.index)
    }

    /// Whether a token starting with `first` is in this shard's slice.
    pub fn owns_token(self, first: u8) -> bool {
        first % self.count == self.index
    }

    /// The first message ID at or after `mid` (wrapping) in this shard's slice.
    pub fn next_mid(self, mid: u16) -> u16 {
        let mut m = mid;
        // At most `count` steps; more only across the wrap when `count` does not divide 65,536.
        while !self.owns_mid(m) {
            m = m.wrapping_add(1);
        }
        m
    }

    /// `first` moved into this shard's slice, keeping as much of its randomness as the slice has.
    pub fn claim_token(self, first: u8) -> u8 {
        let base = first - first % self.count;
        match base.checked_add(self.index) {
            Some(b) => b,
            None => base - self.count + self.index,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_partition_the_spaces() {
        for count in [1u8, 2, 3, 4, 7, 16, 64] {
            for index in 0..count {
                let s = Shard::new(index, count).unwrap();
                for first in 0..=255u8 {
                    let t = s.claim_token(first);
                    assert!(s.owns_token(t), "count {count} index {index} first {first} → {t}");
                    assert!(t.abs_diff(first) < count.max(2) * 2);
                }
                for mid in [0u16, 1, 2, 1000, 65_533, 65_534, 65_535] {
                    let m = s.next_mid(mid);
                    assert!(s.owns_mid(m), "count {count} index {index} mid {mid} → {m}");
                    assert!(m.wrapping_sub(mid) < u16::from(count) * 2);
                }
            }
        }
        assert_eq!(Shard::new(2, 2), None);
        assert_eq!(Shard::new(0, 0), None);
        assert_eq!(Shard::new(0, 65), None);
        assert!(Shard::ALONE.owns_mid(12345) && Shard::ALONE.owns_token(0xAB));
    }

    #[test]
    fn a_sharded_endpoint_sends_only_its_own_ids_and_tokens() {
        use crate::{Endpoint, EndpointConfig, Instant, Request, SendParams};
        for (index, count) in [(0u8, 2u8), (1, 2), (2, 3), (5, 8)] {
            let shard = Shard::new(index, count).unwrap();
            let mut ep = Endpoint::new(EndpointConfig { seed: u64::from(index) * 77 + 1, shard, ..Default::default() });
            let mut seen = 0;
            for peer in 0..40u16 {
                let dst = std::net::SocketAddr::from(([10, 0, 0, 1], 5683 + peer));
                for confirmable in [true, false] {
                    let params = SendParams { confirmable, ..SendParams::default() };
                    ep.request(Instant::ZERO, dst, Request::get("/x"), params).unwrap();
                }
                while let Some(t) = ep.poll_transmit() {
                    let mid = u16::from_be_bytes([t.payload[2], t.payload[3]]);
                    assert!(t.payload[0] & 0x0f >= 1, "a generated token is never empty");
                    assert!(shard.owns_mid(mid), "{shard:?}: MID {mid}");
                    assert!(shard.owns_token(t.payload[4]), "{shard:?}: token byte {}", t.payload[4]);
                    seen += 1;
                }
            }
            assert!(seen >= 40, "{seen} requests sent");
        }
    }
}
