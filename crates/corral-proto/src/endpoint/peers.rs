//! The peer table, [`PeerTable`]: per-peer state (message IDs, duplicate detection, NSTART queue, the
//! reflection credit of a peer that has not proved its address, see [`AmplificationLimit`]) and the
//! first-answer buckets of their IP addresses, bounded by [`Limits::max_peers`](super::Limits), and what
//! happens when it is full. The table decides and reports (a peer evicted, a peer newly verified, an answer
//! paid for or not); the [`Endpoint`] acts on the rest of its state (the glue at the end of this file).
//!
//! # Eviction under floods
//! A full table first forgets the least recently active peer that holds nothing. If every peer holds
//! something, it forgets the least recently active *unverified* peer that holds only server-side state
//! (requests it sent us, responses and notifications we owe it): a source that never proved it receives
//! what we send — no ACK, RST or response from it, no Echo returned — loses its pending exchanges, so a
//! flood from spoofed source ports cannot keep new clients out after it ends. Peers we send requests to,
//! and verified peers, are never forced out. Must never: touch an exchange this endpoint initiated.

use super::credit;

use super::{new_map, AmplificationLimit, DedupEntry, Endpoint, Map, Transmit};
use crate::message::RequestId;
use crate::rng::SecretRng;
use crate::time::{Duration, Instant};
use corral_wire::{Code, Message, MessageId, OptionNumber};
use std::collections::hash_map::Entry;
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use tracing::{debug, warn};

/// The most credit an unverified peer can save up (bytes), so that a long quiet exchange cannot bank a
/// burst.
const MAX_CREDIT: usize = 64 * 1024;

#[derive(Debug)]
pub(super) struct Peer {
    pub(super) addr: SocketAddr,
    pub(super) next_mid: u16,
    /// Outstanding interactions this endpoint initiated (NSTART, RFC 7252 §4.7).
    pub(super) outstanding: u16,
    pub(super) queue: VecDeque<RequestId>,
    pub(super) dedup: VecDeque<DedupEntry>,
    /// Exchanges and reliable messages that refer to this peer; a peer with refs is evicted only when it
    /// is unverified and they are all server-side (see the module docs).
    pub(super) refs: u32,
    /// Exchanges (and pings) this endpoint initiated towards the peer: never forced out.
    pub(super) client_refs: u32,
    /// Requests from this peer awaiting the application's response (its share of the inbound table).
    pub(super) inbound: u32,
    /// The peer proved it receives what we send: it acknowledged, reset or answered a message of ours, or
    /// returned an Echo value we gave it (RFC 9175 §2.4).
    pub(super) verified: bool,
    /// Its address is in a network whose sources cannot be spoofed (loopback,
    /// [`EndpointConfig::verified_nets`]): its answers are not bounded and the application sees its
    /// requests as verified, as if it had proved its address. The tables' fairness rules (which peers,
    /// requests, observations and uploads give way under a flood) still go by `verified`: a real flood
    /// from such a network has proved nothing by being there.
    pub(super) unspoofable: bool,
    /// The Echo value last given to this peer and when (RFC 9175 §2.4 amplification mitigation).
    pub(super) echo: Option<([u8; 8], Instant)>,
    /// Bytes that may still be sent to this peer as answers while it is unverified: `factor` times every
    /// byte received from it, less every byte of answer sent; beyond it its IP address's first-answer
    /// bucket pays (see [`Endpoint::push_answer`]).
    pub(super) credit: usize,
    /// The local (unicast) address this peer last wrote to: what we answer it from.
    pub(super) local: Option<IpAddr>,
    pub(super) lru_stamp: u64,
}

/// A peer forgotten to make room; `busy`: it held server-side state, which the endpoint drops with it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Evicted {
    pub(super) addr: SocketAddr,
    pub(super) busy: bool,
}

/// Whether an answer to a peer may go out (see [`PeerTable::pay_answer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Payment {
    /// Verified, no bound, or paid for from the peer's credit and its address's bucket.
    Paid,
    /// The peer is not in the table (a bound applies, so nothing is sent to an unknown source).
    UnknownPeer,
    /// Over what the unverified peer may still be sent.
    Withheld,
}

/// The peers of one endpoint, by address, in slots (see the module docs).
#[derive(Debug)]
pub(super) struct PeerTable {
    index: Map<SocketAddr, u32>,
    slab: Vec<Option<Peer>>,
    free_slots: Vec<u32>,
    /// (slot, stamp) in order of activity, oldest first; an entry whose stamp differs from its peer's is
    /// stale (a newer touch is further back).
    lru: VecDeque<(u32, u64)>,
    lru_clock: u64,
    /// The first-answer buckets of unverified sources' IP addresses (see [`AmplificationLimit`]).
    first_answers: credit::FirstAnswers,
}

impl Peer {
    /// A message or exchange that referred to this peer ended.
    #[inline]
    pub(super) fn release_ref(&mut self) {
        self.refs = self.refs.saturating_sub(1);
    }

    /// A request of this peer left the inbound table (answered, expired or displaced).
    #[inline]
    pub(super) fn release_inbound(&mut self) {
        self.refs = self.refs.saturating_sub(1);
        self.inbound = self.inbound.saturating_sub(1);
    }

    /// Whether answers to this peer are free of the reflection bound: it proved its address, or its
    /// network cannot be spoofed. The application sees its requests as verified.
    #[inline]
    pub(super) fn trusted(&self) -> bool {
        self.verified || self.unspoofable
    }

    /// A datagram of `len` bytes came from this peer: while it is unverified, it may be answered with
    /// `factor` times as many bytes more (see [`AmplificationLimit`]).
    #[inline]
    pub(super) fn earn(&mut self, factor: usize, len: usize) {
        if !self.verified {
            self.credit = self.credit.saturating_add(len.saturating_mul(factor)).min(MAX_CREDIT);
        }
    }
}

impl PeerTable {
    /// `sharers`: how many endpoints share the port (they split the shared first-answer allowance).
    pub(super) fn new(hash_seed: u64, sharers: usize) -> PeerTable {
        PeerTable {
            index: new_map(hash_seed),
            slab: Vec::new(),
            free_slots: Vec::new(),
            lru: VecDeque::new(),
            lru_clock: 0,
            first_answers: credit::FirstAnswers::new(hash_seed, sharers),
        }
    }

    #[inline]
    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    /// The slot of `addr`'s state, if it has one.
    #[inline]
    pub(super) fn slot_of(&self, addr: &SocketAddr) -> Option<u32> {
        self.index.get(addr).copied()
    }

    #[inline]
    pub(super) fn contains(&self, addr: &SocketAddr) -> bool {
        self.index.contains_key(addr)
    }

    #[inline]
    pub(super) fn get(&self, addr: &SocketAddr) -> Option<&Peer> {
        self.index.get(addr).and_then(|s| self.slab[*s as usize].as_ref())
    }

    #[inline]
    pub(super) fn get_mut(&mut self, slot: u32) -> &mut Peer {
        self.slab[slot as usize].as_mut().expect("peer slot is live: slots come from the peers map")
    }

    /// Duplicate-detection entries over all peers.
    pub(super) fn dedup_entries(&self) -> usize {
        self.slab.iter().flatten().map(|p| p.dedup.len()).sum()
    }

    #[inline]
    pub(super) fn next_mid(&mut self, slot: u32, shard: crate::Shard) -> MessageId {
        let peer = self.get_mut(slot);
        let mid = shard.next_mid(peer.next_mid);
        peer.next_mid = mid.wrapping_add(1);
        MessageId(mid)
    }

    /// The slot of `addr`'s state, creating it (its first message ID from `secret`; `unspoofable` if its
    /// network cannot be spoofed) and, if the table holds `max_peers`, evicting a peer first (returned:
    /// the endpoint drops what it held). `None`: full, and no peer may be forced out.
    pub(super) fn slot(
        &mut self,
        addr: SocketAddr,
        max_peers: usize,
        unspoofable: bool,
        secret: &mut SecretRng,
    ) -> Option<(u32, Option<Evicted>)> {
        self.lru_clock += 1;
        let stamp = self.lru_clock;
        if let Some(&slot) = self.index.get(&addr) {
            self.get_mut(slot).lru_stamp = stamp;
            self.lru.push_back((slot, stamp));
            self.compact_lru();
            return Some((slot, None));
        }
        let evicted = if self.index.len() >= max_peers { Some(self.evict()?) } else { None };
        let peer = Peer {
            addr,
            next_mid: secret.next_u16(),
            outstanding: 0,
            queue: VecDeque::new(),
            dedup: VecDeque::new(),
            refs: 0,
            client_refs: 0,
            inbound: 0,
            verified: false,
            unspoofable,
            echo: None,
            credit: 0,
            local: None,
            lru_stamp: stamp,
        };
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.slab[s as usize] = Some(peer);
                s
            }
            None => {
                self.slab.push(Some(peer));
                (self.slab.len() - 1) as u32
            }
        };
        match self.index.entry(addr) {
            Entry::Vacant(v) => {
                v.insert(slot);
            }
            Entry::Occupied(_) => unreachable!("checked absent above"),
        }
        self.lru.push_back((slot, stamp));
        self.compact_lru();
        Some((slot, evicted))
    }

    /// Makes room in a full table (see the module docs): an idle peer, or else an unverified one that holds
    /// only server-side state.
    fn evict(&mut self) -> Option<Evicted> {
        self.evict_where(|p| p.refs == 0 && p.outstanding == 0 && p.queue.is_empty()).or_else(|| {
            self.evict_where(|p| !p.verified && p.client_refs == 0 && p.outstanding == 0 && p.queue.is_empty())
        })
    }

    /// Forgets the least recently active peer for which `ok` holds.
    fn evict_where(&mut self, ok: impl Fn(&Peer) -> bool) -> Option<Evicted> {
        let mut budget = self.lru.len();
        while budget > 0 {
            budget -= 1;
            let (slot, stamp) = self.lru.pop_front()?;
            let Some(peer) = self.slab[slot as usize].as_ref() else { continue };
            if peer.lru_stamp != stamp {
                continue; // a newer touch of this peer is further back
            }
            if !ok(peer) {
                self.lru.push_back((slot, stamp));
                continue;
            }
            let evicted = Evicted { addr: peer.addr, busy: peer.refs > 0 };
            self.index.remove(&evicted.addr);
            self.slab[slot as usize] = None;
            self.free_slots.push(slot);
            return Some(evicted);
        }
        None
    }

    fn compact_lru(&mut self) {
        if self.lru.len() > 4 * self.index.len() + 64 {
            let slab = &self.slab;
            self.lru.retain(|(slot, stamp)| slab[*slot as usize].as_ref().is_some_and(|p| p.lru_stamp == *stamp));
        }
    }

    fn peer_of(&mut self, addr: &SocketAddr) -> Option<&mut Peer> {
        let slot = *self.index.get(addr)?;
        Some(self.get_mut(slot))
    }

    /// A message or exchange that referred to `addr` ended.
    pub(super) fn release_ref(&mut self, addr: SocketAddr) {
        if let Some(p) = self.peer_of(&addr) {
            p.release_ref();
        }
    }

    /// An exchange or ping this endpoint initiated towards `addr` ended.
    pub(super) fn release_client_ref(&mut self, addr: SocketAddr) {
        if let Some(p) = self.peer_of(&addr) {
            p.refs = p.refs.saturating_sub(1);
            p.client_refs = p.client_refs.saturating_sub(1);
        }
    }

    /// A ping to `addr` was answered or gave up (its message reference went with its `sent` entry).
    pub(super) fn ping_done(&mut self, addr: SocketAddr) {
        if let Some(p) = self.peer_of(&addr) {
            p.client_refs = p.client_refs.saturating_sub(1);
        }
    }

    /// A request of `addr` left the inbound table (answered, expired or displaced).
    pub(super) fn release_inbound(&mut self, addr: SocketAddr) {
        if let Some(p) = self.peer_of(&addr) {
            p.release_inbound();
        }
    }

    /// `addr` proved it receives what we send. Returns whether it was not verified before.
    pub(super) fn verify(&mut self, addr: SocketAddr) -> bool {
        match self.peer_of(&addr) {
            Some(peer) if !peer.verified => {
                peer.verified = true;
                true
            }
            _ => false,
        }
    }

    #[inline]
    pub(super) fn is_verified(&self, addr: &SocketAddr) -> bool {
        self.get(addr).is_some_and(|p| p.verified)
    }

    /// Whether `addr` is a peer whose answers are free of the reflection bound ([`Peer::trusted`]).
    #[inline]
    pub(super) fn is_trusted(&self, addr: &SocketAddr) -> bool {
        self.get(addr).is_some_and(Peer::trusted)
    }

    /// Remembers the Echo value given to the peer in `slot` and when (RFC 9175 §2.4).
    pub(super) fn set_echo(&mut self, slot: u32, value: [u8; 8], now: Instant) {
        self.get_mut(slot).echo = Some((value, now));
    }

    /// Whether `echo` is the value given to the peer in `slot`, given at most `lifetime` ago. The value
    /// stays good for its lifetime, so that every block of a block-wise repetition carries a good one.
    pub(super) fn echo_matches(&mut self, now: Instant, slot: u32, echo: &[u8], lifetime: Duration) -> bool {
        matches!(self.get_mut(slot).echo, Some((value, at)) if echo == value && now.saturating_since(at) <= lifetime)
    }

    /// What the unverified peer in `slot` may still be sent: its own credit and its address's first-answer
    /// bucket.
    pub(super) fn answer_credit(
        &mut self,
        limit: &AmplificationLimit,
        now: Instant,
        slot: u32,
        to: SocketAddr,
    ) -> usize {
        let own = self.get_mut(slot).credit;
        own.saturating_add(self.first_answers.available(limit, to.ip(), now))
    }

    /// Pays for an answer of `len` bytes to `dst` if the peer is unverified (see
    /// [`Endpoint::push_answer`]): the peer's own credit first, then its address's first-answer bucket.
    pub(super) fn pay_answer(
        &mut self,
        limit: Option<&AmplificationLimit>,
        now: Instant,
        dst: SocketAddr,
        len: usize,
    ) -> Payment {
        let Some(limit) = limit else { return Payment::Paid };
        let Some(&slot) = self.index.get(&dst) else { return Payment::UnknownPeer };
        self.pay_answer_at(limit, now, slot, dst, len)
    }

    /// [`PeerTable::pay_answer`] for a peer whose slot the caller holds.
    #[inline]
    pub(super) fn pay_answer_at(
        &mut self,
        limit: &AmplificationLimit,
        now: Instant,
        slot: u32,
        dst: SocketAddr,
        len: usize,
    ) -> Payment {
        if self.get_mut(slot).trusted() {
            return Payment::Paid;
        }
        if self.answer_credit(limit, now, slot, dst) < len {
            return Payment::Withheld;
        }
        let peer = self.get_mut(slot);
        let own = peer.credit.min(len);
        peer.credit -= own;
        self.first_answers.spend(limit, dst.ip(), now, len - own);
        Payment::Paid
    }
}

/// What the table's verdicts mean for the rest of the endpoint.
impl Endpoint {
    /// The slot of `addr`'s state, creating it; a peer evicted to make room takes what it was owed with it.
    #[inline]
    pub(super) fn peer_slot(&mut self, addr: SocketAddr) -> Option<u32> {
        let unspoofable = self.config.verified_source(addr.ip());
        let (slot, evicted) = self.peers.slot(addr, self.config.limits.max_peers, unspoofable, &mut self.secret)?;
        if let Some(Evicted { addr, busy }) = evicted {
            if busy {
                self.purge_server_state(addr);
            }
            self.stats.peers_evicted += 1;
            debug!(peer = %addr, busy, "forgot a peer (peer table full)");
        }
        Some(slot)
    }

    /// Drops what an unverified peer was owed: its requests in progress (the application's later answer
    /// finds no exchange), responses and notifications being retransmitted to it, and its observations.
    fn purge_server_state(&mut self, addr: SocketAddr) {
        self.inbound.retain(|_, i| i.peer != addr);
        self.sent.retain(|(dst, _), _| *dst != addr);
        self.server.observers.remove_peer(addr);
        self.stats.peers_purged += 1;
        // One line per power of two: a flood must not flood the log.
        if self.stats.peers_purged.is_power_of_two() {
            warn!(peer = %addr, purged = self.stats.peers_purged, "peer table full: dropped the pending exchanges of unverified peers");
        }
    }

    /// `addr` proved it receives what we send: its observations count as verified.
    pub(super) fn mark_verified(&mut self, addr: SocketAddr) {
        if self.peers.verify(addr) {
            self.server.observers.verify_peer(addr);
        }
    }

    /// Keeps an answer to an unverified peer within what it may still be sent (RFC 9175 §2.4): one larger
    /// than its credit and its address's first-answer bucket together becomes 4.01 Unauthorized with an
    /// Echo value; the peer that repeats its request with it has shown it receives at its address and gets
    /// the answer. Returns whether the message was replaced. Spending is [`Endpoint::push_answer`]'s.
    pub(super) fn bound_answer(&mut self, now: Instant, slot: u32, to: SocketAddr, msg: &mut Message) -> bool {
        if self.peers.get_mut(slot).trusted() {
            return false;
        }
        let Some(limit) = self.config.amplification else { return false };
        let credit = self.peers.answer_credit(&limit, now, slot, to);
        let size = msg.encoded_len();
        let challenged = msg.code == Code::UNAUTHORIZED && msg.options.contains(OptionNumber::ECHO);
        if size <= credit || challenged {
            return false;
        }
        let value = self.give_echo(now, slot);
        debug!(peer = %to, size, credit, "answer too large for an unverified source: 4.01 with Echo");
        let mut challenge = Message::new(msg.mtype, Code::UNAUTHORIZED, msg.mid, msg.token);
        // No diagnostic payload: the challenge must itself fit three times the request (a 12-byte `GET /`
        // with an 8-byte token allows 36 bytes; with a payload it took 39 and was withheld).
        challenge.options.set(OptionNumber::ECHO, &value);
        *msg = challenge;
        true
    }

    /// Sends an answer (a response, a notification, a retransmission of either, a reply resent for a
    /// duplicate) if the peer is verified or it fits what the peer may still be sent, which it then spends
    /// ([`PeerTable::pay_answer`]). So what a flood of spoofed requests makes this endpoint send to one
    /// address stays within the bound of [`AmplificationLimit`]. Returns whether it went out.
    pub(super) fn push_answer(&mut self, now: Instant, t: Transmit) -> bool {
        let payment = self.peers.pay_answer(self.config.amplification.as_ref(), now, t.dst, t.payload.len());
        self.settle(payment, t)
    }

    /// [`Endpoint::push_answer`] to the peer in `slot` (the caller looked it up already).
    #[inline]
    pub(super) fn push_answer_at(&mut self, now: Instant, slot: u32, t: Transmit) -> bool {
        let payment = match &self.config.amplification {
            None => Payment::Paid,
            Some(limit) => self.peers.pay_answer_at(limit, now, slot, t.dst, t.payload.len()),
        };
        self.settle(payment, t)
    }

    fn settle(&mut self, payment: Payment, t: Transmit) -> bool {
        match payment {
            Payment::Paid => {
                self.transmits.push_back(t);
                true
            }
            Payment::UnknownPeer => false,
            Payment::Withheld => {
                self.stats.answers_withheld += 1;
                if self.stats.answers_withheld.is_power_of_two() {
                    debug!(peer = %t.dst, withheld = self.stats.answers_withheld, "answer withheld: over an unverified source's credit");
                }
                false
            }
        }
    }

    /// A fresh Echo value for the peer in `slot`, remembered with the time it was given (RFC 9175 §2.4).
    ///
    /// Requests that arrive together from one new peer (a proxy or a gateway multiplexes many onto one
    /// socket) each get a challenge: while the value last given is young (half its lifetime) they all
    /// get it, so that every repetition verifies — a new value per challenge left only the last one good.
    pub(super) fn give_echo(&mut self, now: Instant, slot: u32) -> [u8; 8] {
        let lifetime = self.config.amplification.map_or(Duration::ZERO, |a| a.echo_lifetime);
        if let Some((value, at)) = self.peers.get_mut(slot).echo {
            if now.saturating_since(at) < Duration::from_micros(lifetime.as_micros() / 2) {
                self.stats.echo_challenges += 1;
                return value;
            }
        }
        let value = self.secret.next_u64().to_be_bytes();
        self.peers.set_echo(slot, value, now);
        self.stats.echo_challenges += 1;
        value
    }

    /// A request carried an Echo value: the one given to this peer, still fresh, verifies it. Returns
    /// whether it did (the request is then fresh: see [`IncomingRequest::echoed`]).
    pub(super) fn check_echo(&mut self, now: Instant, slot: u32, echo: &[u8]) -> bool {
        let lifetime = self.config.amplification.map_or(Duration::ZERO, |a| a.echo_lifetime);
        if !self.peers.echo_matches(now, slot, echo, lifetime) {
            return false;
        }
        let addr = self.peers.get_mut(slot).addr;
        self.mark_verified(addr);
        true
    }
}
