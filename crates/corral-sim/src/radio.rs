//! The IEEE 802.15.4 radio and MAC constants, frame sizes, airtime and 6LoWPAN fragmentation arithmetic.
//!
//! # What it owns
//! Pure functions of [`RadioParams`]: how many bytes a datagram occupies on the air, into how many frames
//! it is cut, and how long each frame, ACK and CSMA/CA step takes. The MAC *state machine* that uses these
//! numbers lives in [`crate::sim`]; nothing here keeps state, reads a clock or draws a random number.
//!
//! # The constants and where they come from
//! IEEE 802.15.4-2006 2.4 GHz O-QPSK PHY (§6.5): 250 kbit/s, 62.5 ksymbol/s (16 µs per symbol, 2 symbols
//! per octet).
//! - PHY overhead per frame: SHR (preamble 4 B + SFD 1 B) + PHR 1 B = **6 B** (§6.3). `aMaxPHYPacketSize`
//!   = **127 B** of MPDU, so at most 133 B and 4256 µs on the air.
//! - MAC header + FCS (§7.2.1): frame control 2 + sequence number 1 + PAN ID 2 (PAN ID compression) +
//!   destination + source + FCS 2. Contiki's IPv6 stack uses 8-byte EUI-64 link-layer addresses, so a
//!   unicast data frame carries **23 B** of MAC overhead; a broadcast frame addresses `0xffff` (2 B) and
//!   carries **17 B**.
//! - 6LoWPAN (RFC 6282): IPHC 2 B with both addresses elided through context 0 and EUI-64-derived IIDs,
//!   hop limit inline 1 B, UDP NHC 1 B, both ports inline 4 B (5683 is outside the 0xF0Bx short-port range)
//!   and the checksum 2 B: **10 B**. This is the single-hop best case; a forwarded datagram whose IIDs do not
//!   match the link-layer addresses would need up to 16 B more — set [`RadioParams::lowpan_header`] to model
//!   it. RFC 4944 §5.3 fragment headers: FRAG1 **4 B**, FRAGN **5 B**; fragment offsets count 8-octet units
//!   of the *uncompressed* IPv6 datagram (40 B IPv6 + 8 B UDP + payload), so every fragment but the last
//!   carries a multiple of 8 uncompressed octets.
//! - Imm-ACK frame: 5 B MPDU + 6 B PHY = **11 B**, 352 µs.
//! - `aTurnaroundTime` = 12 symbols = **192 µs** (RX↔TX); CCA = 8 symbols = **128 µs**; `aUnitBackoffPeriod`
//!   = 20 symbols = **320 µs**; `macAckWaitDuration` = aUnitBackoffPeriod + aTurnaroundTime + phySHRDuration +
//!   6·phySymbolsPerOctet = 20 + 12 + 10 + 12 = 54 symbols = **864 µs** (§7.4.2).
//! - Unslotted CSMA/CA (§7.5.1.4): `macMinBE` **3**, `macMaxBE` **5**, `macMaxCSMABackoffs` **4**,
//!   `macMaxFrameRetries` **3** (the seeds' setting: "up to 3 frame retransmissions").
//! - Capture threshold **3 dB** ([`RadioParams::capture_threshold_db`]): the CC2420 datasheet (SWRS041)
//!   gives a co-channel rejection of −3 dB — a wanted IEEE 802.15.4 signal is still received with a
//!   same-channel interferer 3 dB below it; the receiver re-synchronises on a stronger frame only during the
//!   synchronisation header it is still searching (SHR: preamble 4 B + SFD 1 B = 160 µs), as the CC2420
//!   concurrent-transmission measurements behind Glossy-style flooding found.
//! - Forwarding queue: **8** datagrams (Contiki's `QUEUEBUF_CONF_NUM` default); 6LoWPAN reassembly timeout
//!   **8 s** (Contiki's `SICSLOWPAN_REASS_MAXAGE`; RFC 4944 allows up to 60 s).
//! - Optionally a byte bound on that queue ([`RadioParams::queue_bytes`], off by default): RIOT GNRC keeps
//!   every packet in one static packet buffer, `CONFIG_GNRC_PKTBUF_SIZE` = **6144** B by default (RIOT
//!   `sys/include/net/gnrc/pktbuf.h`; its Kconfig: room for 2 incoming and 2 outgoing full-MTU IPv6
//!   packets plus about 1 KiB of metadata), and drops a packet it cannot allocate there.

use corral_proto::Duration;

/// IPv6 (40 B) + UDP (8 B) header sizes of the uncompressed datagram, which RFC 4944 fragment offsets count.
pub const IPV6_UDP_HEADER: usize = 48;

/// The largest datagram 6LoWPAN can fragment (RFC 4944 §5.3: the datagram_size field has 11 bits).
pub const MAX_LOWPAN_DATAGRAM: usize = 2047;

/// Radio and MAC parameters of the simulated IEEE 802.15.4 network. See the module docs for the sources.
#[derive(Debug, Clone, PartialEq)]
pub struct RadioParams {
    /// Channel bit rate in bit/s (250 kbit/s for the 2.4 GHz O-QPSK PHY).
    pub bit_rate: u32,
    /// `aMaxPHYPacketSize`: the largest MPDU in bytes (127).
    pub max_frame: usize,
    /// SHR + PHR bytes sent before every MPDU (6).
    pub phy_overhead: usize,
    /// MAC header + FCS of a unicast data frame (23: EUI-64 addresses).
    pub mac_overhead_unicast: usize,
    /// MAC header + FCS of a broadcast data frame (17: 0xffff destination).
    pub mac_overhead_broadcast: usize,
    /// Compressed IPv6 + UDP headers (RFC 6282 IPHC + NHC) in an unfragmented frame or the first fragment.
    pub lowpan_header: usize,
    /// RFC 4944 FRAG1 header (4).
    pub frag1_header: usize,
    /// RFC 4944 FRAGN header (5).
    pub fragn_header: usize,
    /// MPDU length of an Imm-ACK frame (5).
    pub ack_mpdu: usize,
    /// `aTurnaroundTime` (192 µs).
    pub turnaround: Duration,
    /// Clear-channel assessment duration (8 symbols, 128 µs).
    pub cca: Duration,
    /// `aUnitBackoffPeriod` (320 µs).
    pub unit_backoff: Duration,
    /// `macAckWaitDuration`, counted from the end of the data frame (864 µs).
    pub ack_wait: Duration,
    /// `macMinBE` (3).
    pub min_be: u8,
    /// `macMaxBE` (5).
    pub max_be: u8,
    /// `macMaxCSMABackoffs` (4): after this many busy CCAs in a row the frame fails with a channel-access
    /// failure.
    pub max_csma_backoffs: u8,
    /// `macMaxFrameRetries` (3): retransmissions of an unacknowledged unicast frame. Broadcast frames are
    /// never acknowledged nor retransmitted.
    pub max_frame_retries: u8,
    /// Datagrams the forwarding (MAC transmit) queue holds, own ones included (8).
    pub queue_capacity: usize,
    /// With `Some(b)`: the queue also holds at most `b` bytes of uncompressed IPv6 datagrams (40 B IPv6 +
    /// 8 B UDP + payload each); a datagram that does not fit is dropped (`queue-overflow`). RIOT GNRC's
    /// packet buffer (`CONFIG_GNRC_PKTBUF_SIZE`, 6144 B by default). `None` (the default): no byte bound.
    pub queue_bytes: Option<usize>,
    /// How long a partially received fragmented datagram is kept (8 s).
    pub reassembly_timeout: Duration,
    /// Capture effect: the power ratio (dB) by which a frame must exceed everything else audible to be
    /// received through an overlap (3 dB); `None`: any overlap destroys every frame involved.
    pub capture_threshold_db: Option<f64>,
}

impl Default for RadioParams {
    fn default() -> Self {
        RadioParams {
            bit_rate: 250_000,
            max_frame: 127,
            phy_overhead: 6,
            mac_overhead_unicast: 23,
            mac_overhead_broadcast: 17,
            lowpan_header: 10,
            frag1_header: 4,
            fragn_header: 5,
            ack_mpdu: 5,
            turnaround: Duration::from_micros(192),
            cca: Duration::from_micros(128),
            unit_backoff: Duration::from_micros(320),
            ack_wait: Duration::from_micros(864),
            min_be: 3,
            max_be: 5,
            max_csma_backoffs: 4,
            max_frame_retries: 3,
            queue_capacity: 8,
            queue_bytes: None,
            reassembly_timeout: Duration::from_secs(8),
            capture_threshold_db: Some(3.0),
        }
    }
}

/// How a datagram is cut into frames: the MPDU length of each frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Number of frames (1 when unfragmented).
    pub frames: u16,
    /// MPDU length of the first frame.
    pub first: u16,
    /// MPDU length of every frame between the first and the last.
    pub middle: u16,
    /// MPDU length of the last frame (equal to `first` when unfragmented).
    pub last: u16,
}

impl Layout {
    /// MPDU length of frame `i`.
    pub fn mpdu(&self, i: u16) -> u16 {
        if i == 0 {
            self.first
        } else if i + 1 == self.frames {
            self.last
        } else {
            self.middle
        }
    }

    /// Total MPDU bytes of all frames.
    pub fn total_mpdu(&self) -> usize {
        match self.frames {
            0 => 0,
            1 => usize::from(self.first),
            n => usize::from(self.first) + usize::from(self.last) + usize::from(n - 2) * usize::from(self.middle),
        }
    }
}

impl RadioParams {
    /// Airtime of a frame with an MPDU of `mpdu` bytes, PHY overhead included (rounded up to 1 µs).
    pub fn airtime(&self, mpdu: usize) -> Duration {
        self.airtime_at(mpdu, self.bit_rate)
    }

    /// Airtime at another bit rate (a channel with its own rate, see [`crate::SimConfig::channel_bit_rates`]).
    pub fn airtime_at(&self, mpdu: usize, bit_rate: u32) -> Duration {
        let bits = ((self.phy_overhead + mpdu) * 8) as u64;
        Duration::from_micros((bits * 1_000_000).div_ceil(u64::from(bit_rate.max(1))))
    }

    /// Airtime of an Imm-ACK frame (352 µs by default).
    pub fn ack_airtime(&self) -> Duration {
        self.airtime(self.ack_mpdu)
    }

    /// The MAC overhead of a data frame.
    pub fn mac_overhead(&self, broadcast: bool) -> usize {
        if broadcast {
            self.mac_overhead_broadcast
        } else {
            self.mac_overhead_unicast
        }
    }

    /// The largest UDP payload (CoAP message) that fits one frame unfragmented (94 B unicast by default).
    pub fn max_unfragmented_payload(&self, broadcast: bool) -> usize {
        self.max_frame.saturating_sub(self.mac_overhead(broadcast) + self.lowpan_header)
    }

    /// How a UDP payload of `len` bytes is framed (RFC 4944 §5.3 fragmentation with RFC 6282 compression).
    /// `None` if the datagram is too large for 6LoWPAN or the parameters leave no room for payload.
    pub fn layout(&self, len: usize, broadcast: bool) -> Option<Layout> {
        let mac = self.mac_overhead(broadcast);
        let room = self.max_frame.checked_sub(mac)?;
        if self.lowpan_header + len <= room {
            let mpdu = (mac + self.lowpan_header + len) as u16;
            return Some(Layout { frames: 1, first: mpdu, middle: mpdu, last: mpdu });
        }
        if IPV6_UDP_HEADER + len > MAX_LOWPAN_DATAGRAM {
            return None;
        }
        // First fragment: FRAG1 + compressed headers + as much payload as keeps the uncompressed offset of
        // the next fragment a multiple of 8.
        let room1 = room.checked_sub(self.frag1_header + self.lowpan_header)?;
        let covered1 = (IPV6_UDP_HEADER + room1) / 8 * 8;
        let p1 = covered1.checked_sub(IPV6_UDP_HEADER).filter(|p| *p > 0)?.min(len);
        let first = (mac + self.frag1_header + self.lowpan_header + p1) as u16;
        let chunk = room.checked_sub(self.fragn_header)? / 8 * 8;
        if chunk == 0 {
            return None;
        }
        let rest = len - p1;
        let n_rest = rest.div_ceil(chunk).max(1);
        let last_payload = rest - (n_rest - 1) * chunk;
        Some(Layout {
            frames: (1 + n_rest) as u16,
            first,
            middle: (mac + self.fragn_header + chunk) as u16,
            last: (mac + self.fragn_header + last_payload) as u16,
        })
    }

    /// The shortest time one acknowledged unicast frame of `mpdu` bytes occupies the channel with zero
    /// backoff: CCA + turnaround + frame + turnaround + ACK. A lower bound used by tests and the lab.
    pub fn min_unicast_exchange(&self, mpdu: usize) -> Duration {
        self.cca + self.turnaround + self.airtime(mpdu) + self.turnaround + self.ack_airtime()
    }

    /// The largest initial CSMA/CA backoff, (2^macMinBE − 1) · aUnitBackoffPeriod (2240 µs by default).
    pub fn max_initial_backoff(&self) -> Duration {
        self.unit_backoff.saturating_mul((1u64 << self.min_be) - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn airtime_of_max_frame_and_ack() {
        let p = RadioParams::default();
        assert_eq!(p.airtime(127), Duration::from_micros(4256));
        assert_eq!(p.ack_airtime(), Duration::from_micros(352));
    }

    #[test]
    fn unfragmented_and_fragmented_layouts() {
        let p = RadioParams::default();
        assert_eq!(p.max_unfragmented_payload(false), 94);
        let l = p.layout(94, false).unwrap();
        assert_eq!((l.frames, l.first), (1, 127));
        let l = p.layout(95, false).unwrap();
        // FRAG1: 23 + 4 + 10 + 88 = 125 (48 + 88 = 136 is a multiple of 8); FRAGN carries the 7 left.
        assert_eq!((l.frames, l.first, l.last), (2, 125, 23 + 5 + 7));
        let l = p.layout(300, false).unwrap();
        // 88 + 96 + 96 + 20 = 300.
        assert_eq!((l.frames, l.first, l.middle, l.last), (4, 125, 124, 23 + 5 + 20));
        assert!(l.mpdu(0) as usize <= p.max_frame && l.mpdu(1) as usize <= p.max_frame);
        assert_eq!(l.total_mpdu(), 125 + 124 + 124 + 48);
        assert!(p.layout(3000, false).is_none());
    }
}
