//! What a run leaves behind: per-packet records, CoAP-aware datagram records, counters per node and per
//! link, and the trace hash the determinism check compares.
//!
//! # What it owns
//! The record and counter *types* and the hashing of records. The simulator ([`crate::sim`]) decides what
//! to record; it always feeds the hash (so the determinism check works even with storage off) and stores
//! records only when [`crate::SimConfig::record`] asks for them.
//!
//! # Reading records
//! A datagram (one `Transmit` of one node, identified by [`DatagramId`]) may produce many records: `Sent`
//! at its source, `Forwarded` at every intermediate hop, frame records for every MAC attempt, and one
//! `Delivered` per receiving node (several for multicast). It is lost end to end when it has no `Delivered`
//! record; it may have several `Dropped` records (one per node that gave up on it — e.g. the sender whose MAC
//! retries ran out and the receiver whose reassembly timed out).

use crate::radio::Layout;
use corral_proto::wire::{Code, MessageType, Packet};
use corral_proto::{Duration, Instant};
use std::net::SocketAddr;

/// Index of a simulated node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl NodeId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Identifies one datagram (one `Transmit`) for the whole run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DatagramId(pub u64);

/// Why a frame or datagram was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// Two transmissions overlapped at the receiver and this frame did not win the capture (or capture is
    /// off).
    Collision,
    /// The receiver was transmitting (half-duplex radio).
    HalfDuplex,
    /// CSMA/CA found the channel busy `macMaxCSMABackoffs + 1` times in a row (channel-access failure).
    ChannelBusy,
    /// No MAC ACK after `macMaxFrameRetries` retransmissions.
    MacRetriesExhausted,
    /// The link's Bernoulli loss.
    Bernoulli,
    /// The link's Gilbert–Elliott loss.
    Burst,
    /// The link's SNR-driven loss.
    Snr,
    /// A Wi-Fi burst corrupted the frame.
    Interference,
    /// The forwarding queue was full.
    QueueOverflow,
    /// No route to the destination (or a multicast SMRF does not forward).
    NoRoute,
    /// A fragment never arrived: the reassembly timed out or was displaced.
    FragmentLost,
    /// Too large for 6LoWPAN (over 2047 bytes).
    TooBig,
    /// A wired link's loss.
    WiredLoss,
    /// The hop limit ran out (a routing loop).
    HopLimit,
    /// A fault-injection rule ([`crate::Sim::set_frame_rule`]) dropped it.
    Rule,
    /// Discarded whole at its destination ([`crate::Sim::set_message_discard`]).
    Discarded,
}

impl DropReason {
    pub const ALL: [DropReason; 16] = [
        DropReason::Collision,
        DropReason::HalfDuplex,
        DropReason::ChannelBusy,
        DropReason::MacRetriesExhausted,
        DropReason::Bernoulli,
        DropReason::Burst,
        DropReason::Snr,
        DropReason::Interference,
        DropReason::QueueOverflow,
        DropReason::NoRoute,
        DropReason::FragmentLost,
        DropReason::TooBig,
        DropReason::WiredLoss,
        DropReason::HopLimit,
        DropReason::Rule,
        DropReason::Discarded,
    ];

    /// A stable kebab-case name (for CSV).
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Collision => "collision",
            DropReason::HalfDuplex => "half-duplex",
            DropReason::ChannelBusy => "channel-busy",
            DropReason::MacRetriesExhausted => "mac-retries-exhausted",
            DropReason::Bernoulli => "bernoulli",
            DropReason::Burst => "burst",
            DropReason::Snr => "snr",
            DropReason::Interference => "interference",
            DropReason::QueueOverflow => "queue-overflow",
            DropReason::NoRoute => "no-route",
            DropReason::FragmentLost => "fragment-lost",
            DropReason::TooBig => "too-big",
            DropReason::WiredLoss => "wired-loss",
            DropReason::HopLimit => "hop-limit",
            DropReason::Rule => "rule",
            DropReason::Discarded => "discarded",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordKind {
    /// A node handed a datagram to the network (its `Transmit`).
    Sent,
    /// An intermediate node queued the datagram towards the next hop.
    Forwarded,
    /// The datagram reached a node's CoAP endpoint (`latency` since `Sent`, `hops` links crossed).
    Delivered,
    /// The datagram was lost at `node` for `reason`.
    Dropped,
    /// A data frame went on the air (`attempt` 0 is the first transmission, ≥ 1 a MAC retransmission).
    FrameSent,
    /// The intended receiver got a data frame.
    FrameReceived,
    /// The intended receiver missed a data frame (`reason`).
    FrameLost,
    /// The sender got the MAC ACK.
    AckReceived,
    /// A MAC ACK was lost on its way back (`reason`).
    AckLost,
}

/// One record; fields that do not apply are `None`/zero. Flat, so the lab can write it as a CSV row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Record {
    pub at: Instant,
    /// Where it happened: the sender for `Sent`/`FrameSent`/`AckReceived`, the receiver for
    /// `Delivered`/`FrameReceived`/`FrameLost`, the dropping node for `Dropped`.
    pub node: NodeId,
    pub kind: RecordKind,
    pub datagram: DatagramId,
    /// The other end of the link (receiver of a frame, sender of a received frame); `None` for broadcast.
    pub peer: Option<NodeId>,
    /// Fragment index and count.
    pub frag: u16,
    pub frags: u16,
    /// MAC attempt (0 = first transmission).
    pub attempt: u8,
    /// Bytes on the air (PHY included) for frame records, UDP payload bytes for datagram records.
    pub bytes: u32,
    pub reason: Option<DropReason>,
    pub latency: Option<Duration>,
    pub hops: u8,
}

impl Record {
    pub(crate) fn new(at: Instant, node: NodeId, kind: RecordKind, datagram: DatagramId) -> Record {
        Record {
            at,
            node,
            kind,
            datagram,
            peer: None,
            frag: 0,
            frags: 0,
            attempt: 0,
            bytes: 0,
            reason: None,
            latency: None,
            hops: 0,
        }
    }

    pub(crate) fn hash_into(&self, h: &mut TraceHash) {
        h.add(self.at.as_micros());
        h.add(u64::from(self.node.0));
        h.add(self.kind as u64);
        h.add(self.datagram.0);
        h.add(self.peer.map_or(u64::MAX, |p| u64::from(p.0)));
        h.add(u64::from(self.frag) << 32 | u64::from(self.frags) << 16 | u64::from(self.attempt));
        h.add(u64::from(self.bytes));
        h.add(self.reason.map_or(u64::MAX, |r| r as u64));
        h.add(self.latency.map_or(u64::MAX, |l| l.as_micros()));
        h.add(u64::from(self.hops));
    }
}

/// A CoAP message's header fields, parsed with corral-wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoapSummary {
    pub mtype: MessageType,
    pub code: Code,
    pub mid: u16,
    /// Token bytes (first `token_len`).
    pub token: [u8; 8],
    pub token_len: u8,
}

impl CoapSummary {
    pub fn parse(bytes: &[u8]) -> Option<CoapSummary> {
        let p = Packet::new_checked(bytes).ok()?;
        let t = p.token_bytes();
        let mut token = [0u8; 8];
        token[..t.len()].copy_from_slice(t);
        Some(CoapSummary { mtype: p.mtype(), code: p.code(), mid: p.message_id().0, token, token_len: t.len() as u8 })
    }

    pub fn token(&self) -> &[u8] {
        &self.token[..usize::from(self.token_len)]
    }
}

/// One datagram as its source sent it.
#[derive(Debug, Clone, PartialEq)]
pub struct DatagramInfo {
    pub id: DatagramId,
    pub at: Instant,
    pub node: NodeId,
    pub src: SocketAddr,
    pub dst: SocketAddr,
    /// UDP payload length.
    pub len: usize,
    /// How the first radio hop framed it (`None` if it never went on a radio).
    pub layout: Option<Layout>,
    /// `None` if the payload is not a valid CoAP message.
    pub coap: Option<CoapSummary>,
}

/// Counters of one node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeCounters {
    pub datagrams_sent: u64,
    pub datagrams_forwarded: u64,
    pub datagrams_delivered: u64,
    pub frames_sent: u64,
    pub frame_bytes_sent: u64,
    pub frames_received: u64,
    pub frame_bytes_received: u64,
    pub acks_sent: u64,
    pub mac_retries: u64,
    pub busy_ccas: u64,
    pub queue_peak: u64,
    pub drops: [u64; DropReason::ALL.len()],
}

impl NodeCounters {
    pub fn drops(&self, reason: DropReason) -> u64 {
        self.drops[reason.index()]
    }

    pub(crate) fn drop(&mut self, reason: DropReason) {
        self.drops[reason.index()] += 1;
    }

    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }
}

/// Counters of one directed radio link `from → to` (link stress = `frames`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LinkCounters {
    /// Unicast data frames sent to `to` (retransmissions included).
    pub frames: u64,
    pub bytes: u64,
    pub retransmissions: u64,
    /// Data frames (unicast or broadcast) `to` received from `from`.
    pub received: u64,
    /// Frames meant for `to` it missed, by reason.
    pub lost: [u64; DropReason::ALL.len()],
}

impl LinkCounters {
    pub fn lost(&self, reason: DropReason) -> u64 {
        self.lost[reason.index()]
    }

    pub(crate) fn lose(&mut self, reason: DropReason) {
        self.lost[reason.index()] += 1;
    }
}

/// A fast, stable 64-bit hash of the record stream (a multiply-rotate mix; not cryptographic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceHash(u64);

impl Default for TraceHash {
    fn default() -> Self {
        TraceHash(0x243f_6a88_85a3_08d3)
    }
}

impl TraceHash {
    pub fn add(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29) ^ (self.0 >> 17);
    }

    pub fn value(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_proto::wire::{Message, MessageId, Token};

    #[test]
    fn coap_summary_and_names() {
        let m = Message::new(MessageType::Con, Code::GET, MessageId(0x1234), Token::new(&[1, 2]).unwrap());
        let s = CoapSummary::parse(&m.encode()).unwrap();
        assert_eq!((s.mtype, s.code, s.mid, s.token()), (MessageType::Con, Code::GET, 0x1234, &[1u8, 2][..]));
        assert!(CoapSummary::parse(&[0xff]).is_none());
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
        let mut a = TraceHash::default();
        let mut b = TraceHash::default();
        a.add(1);
        a.add(2);
        b.add(2);
        b.add(1);
        assert_ne!(a, b);
    }
}
