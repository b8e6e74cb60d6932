//! The peer table: per-peer state (message IDs, duplicate detection, NSTART queue, the reflection credit
//! of a peer that has not proved its address, see [`AmplificationLimit`]), bounded by
//! [`Limits::max_peers`](super::Limits), and what happens when it is full.
//!
//! # Eviction under floods
//! A full table first forgets the least recently active peer that holds nothing. If every peer holds
//! something, it forgets the least recently active *unverified* peer that holds only server-side state
//! (requests it sent us, responses and notifications we owe it): a source that never proved it receives
//! what we send — no ACK, RST or response from it, no Echo returned — loses its pending exchanges, so a
//! flood from spoofed source ports cannot keep new clients out after it ends. Peers we send requests to,
//! and verified peers, are never forced out. Must never: touch an exchange this endpoint initiated.

use super::*;

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

impl Endpoint {
    pub(super) fn peer_mut(&mut self, slot: u32) -> &mut Peer {
        self.slab[slot as usize].as_mut().expect("peer slot is live: slots come from the peers map")
    }

    pub(super) fn next_mid(&mut self, slot: u32) -> MessageId {
        let shard = self.config.shard;
        let peer = self.peer_mut(slot);
        let mid = shard.next_mid(peer.next_mid);
        peer.next_mid = mid.wrapping_add(1);
        MessageId(mid)
    }

    pub(super) fn release_peer_ref(&mut self, addr: SocketAddr) {
        if let Some(&slot) = self.peers.get(&addr) {
            let p = self.peer_mut(slot);
            p.refs = p.refs.saturating_sub(1);
        }
    }

    /// The slot of `addr`'s state, creating it (and evicting an idle peer if the table is full).
    pub(super) fn peer_slot(&mut self, addr: SocketAddr) -> Option<u32> {
        self.lru_clock += 1;
        let stamp = self.lru_clock;
        if let Some(&slot) = self.peers.get(&addr) {
            self.peer_mut(slot).lru_stamp = stamp;
            self.lru.push_back((slot, stamp));
            self.compact_lru();
            return Some(slot);
        }
        if self.peers.len() >= self.config.limits.max_peers && !self.evict_peer() {
            return None;
        }
        let peer = Peer {
            addr,
            next_mid: self.secret.next_u16(),
            outstanding: 0,
            queue: VecDeque::new(),
            dedup: VecDeque::new(),
            refs: 0,
            client_refs: 0,
            inbound: 0,
            verified: false,
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
        match self.peers.entry(addr) {
            Entry::Vacant(v) => {
                v.insert(slot);
            }
            Entry::Occupied(_) => unreachable!("checked absent above"),
        }
        self.lru.push_back((slot, stamp));
        self.compact_lru();
        Some(slot)
    }

    /// Makes room in a full table (see the module docs): an idle peer, or else an unverified one that holds
    /// only server-side state, which is dropped with it.
    pub(super) fn evict_peer(&mut self) -> bool {
        if self.evict_where(|p| p.refs == 0 && p.outstanding == 0 && p.queue.is_empty()) {
            return true;
        }
        self.evict_where(|p| !p.verified && p.client_refs == 0 && p.outstanding == 0 && p.queue.is_empty())
    }

    /// Forgets the least recently active peer for which `ok` holds, with everything it holds.
    fn evict_where(&mut self, ok: impl Fn(&Peer) -> bool) -> bool {
        let mut budget = self.lru.len();
        while budget > 0 {
            budget -= 1;
            let Some((slot, stamp)) = self.lru.pop_front() else { return false };
            let Some(peer) = self.slab[slot as usize].as_ref() else { continue };
            if peer.lru_stamp != stamp {
                continue; // a newer touch of this peer is further back
            }
            if !ok(peer) {
                self.lru.push_back((slot, stamp));
                continue;
            }
            let (addr, busy) = (peer.addr, peer.refs > 0);
            if busy {
                self.purge_server_state(addr);
            }
            self.peers.remove(&addr);
            self.slab[slot as usize] = None;
            self.free_slots.push(slot);
            self.stats.peers_evicted += 1;
            debug!(peer = %addr, busy, "forgot a peer (peer table full)");
            return true;
        }
        false
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

    /// A datagram of `len` bytes came from the peer in `slot`: while it is unverified, it may be answered
    /// with `factor` times as many bytes more (see [`AmplificationLimit`]).
    pub(super) fn earn(&mut self, slot: u32, len: usize) {
        let Some(limit) = self.config.amplification else { return };
        let peer = self.peer_mut(slot);
        if !peer.verified {
            peer.credit = peer.credit.saturating_add(len.saturating_mul(limit.factor)).min(MAX_CREDIT);
        }
    }

    /// Keeps an answer to an unverified peer within what it may still be sent (RFC 9175 §2.4): one larger
    /// than its credit and its address's first-answer bucket together becomes 4.01 Unauthorized with an
    /// Echo value; the peer that repeats its request with it has shown it receives at its address and gets
    /// the answer. Returns whether the message was replaced. Spending is [`Endpoint::push_answer`]'s.
    pub(super) fn bound_answer(&mut self, now: Instant, slot: u32, to: SocketAddr, msg: &mut Message) -> bool {
        if self.peer_mut(slot).verified {
            return false;
        }
        let Some(credit) = self.answer_credit(now, slot, to) else { return false };
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

    /// What an unverified peer may still be sent: its own credit and its address's first-answer bucket.
    /// `None`: no bound.
    fn answer_credit(&mut self, now: Instant, slot: u32, to: SocketAddr) -> Option<usize> {
        let limit = self.config.amplification?;
        let own = self.peer_mut(slot).credit;
        Some(own.saturating_add(self.first_answers.available(&limit, to.ip(), now)))
    }

    /// Sends an answer (a response, a notification, a retransmission of either, a reply resent for a
    /// duplicate) if the peer is verified or it fits what the peer may still be sent, which it then spends:
    /// the peer's own credit first, then its address's first-answer bucket. So what a flood of spoofed
    /// requests makes this endpoint send to one address stays within the bound of [`AmplificationLimit`].
    /// Returns whether it went out.
    pub(super) fn push_answer(&mut self, now: Instant, t: Transmit) -> bool {
        if let Some(limit) = self.config.amplification {
            let Some(&slot) = self.peers.get(&t.dst) else { return false };
            if !self.peer_mut(slot).verified {
                let len = t.payload.len();
                if self.answer_credit(now, slot, t.dst).unwrap_or(usize::MAX) < len {
                    self.stats.answers_withheld += 1;
                    if self.stats.answers_withheld.is_power_of_two() {
                        debug!(peer = %t.dst, withheld = self.stats.answers_withheld, "answer withheld: over an unverified source's credit");
                    }
                    return false;
                }
                let peer = self.peer_mut(slot);
                let own = peer.credit.min(len);
                peer.credit -= own;
                self.first_answers.spend(&limit, t.dst.ip(), now, len - own);
            }
        }
        self.transmits.push_back(t);
        true
    }

    /// A fresh Echo value for the peer in `slot`, remembered with the time it was given (RFC 9175 §2.4).
    pub(super) fn give_echo(&mut self, now: Instant, slot: u32) -> [u8; 8] {
        let value = self.secret.next_u64().to_be_bytes();
        self.peer_mut(slot).echo = Some((value, now));
        self.stats.echo_challenges += 1;
        value
    }

    /// A request carried an Echo value: the one given to this peer, still fresh, verifies it. Returns
    /// whether it did (the request is then fresh: see [`IncomingRequest::echoed`]). The value stays good
    /// for its lifetime, so that every block of a block-wise repetition carries a good one.
    pub(super) fn check_echo(&mut self, now: Instant, slot: u32, echo: &[u8]) -> bool {
        let lifetime = self.config.amplification.map_or(Duration::ZERO, |a| a.echo_lifetime);
        let peer = self.peer_mut(slot);
        match peer.echo {
            Some((value, at)) if echo == value && now.saturating_since(at) <= lifetime => {
                let addr = peer.addr;
                self.mark_verified(addr);
                true
            }
            _ => false,
        }
    }

    /// `addr` proved it receives what we send.
    pub(super) fn mark_verified(&mut self, addr: SocketAddr) {
        if let Some(&slot) = self.peers.get(&addr) {
            let peer = self.peer_mut(slot);
            if !peer.verified {
                peer.verified = true;
                self.server.observers.verify_peer(addr);
            }
        }
    }

    pub(super) fn is_verified(&self, addr: &SocketAddr) -> bool {
        self.peers.get(addr).and_then(|s| self.slab[*s as usize].as_ref()).is_some_and(|p| p.verified)
    }

    /// An exchange or ping this endpoint initiated towards `addr` ended.
    pub(super) fn release_client_ref(&mut self, addr: SocketAddr) {
        if let Some(&slot) = self.peers.get(&addr) {
            let p = self.peer_mut(slot);
            p.refs = p.refs.saturating_sub(1);
            p.client_refs = p.client_refs.saturating_sub(1);
        }
    }

    /// A ping to `addr` was answered or gave up (its message reference went with its `sent` entry).
    pub(super) fn ping_done(&mut self, addr: SocketAddr) {
        if let Some(&slot) = self.peers.get(&addr) {
            let p = self.peer_mut(slot);
            p.client_refs = p.client_refs.saturating_sub(1);
        }
    }

    /// A request of `addr` left the inbound table (answered, expired or displaced).
    pub(super) fn release_inbound(&mut self, addr: SocketAddr) {
        if let Some(&slot) = self.peers.get(&addr) {
            let p = self.peer_mut(slot);
            p.refs = p.refs.saturating_sub(1);
            p.inbound = p.inbound.saturating_sub(1);
        }
    }

    /// The inbound table is full: the oldest request of an unverified peer other than `except` makes room
    /// for a new one (its later answer finds no exchange). `false` if every request is a verified peer's.
    pub(super) fn displace_inbound(&mut self, except: SocketAddr) -> bool {
        let candidate = self
            .inbound_expiry
            .iter()
            .map(|(_, id)| *id)
            .chain(self.piggyback_deadlines.iter().map(|(_, id)| *id))
            .find(|id| {
                self.inbound
                    .get(id)
                    .is_some_and(|i| i.kind == InboundKind::Request && i.peer != except && !self.is_verified(&i.peer))
            });
        let Some(id) = candidate else { return false };
        if let Some(inb) = self.inbound.remove(&id) {
            self.release_inbound(inb.peer);
            self.stats.displaced += 1;
            if self.stats.displaced.is_power_of_two() {
                warn!(peer = %inb.peer, displaced = self.stats.displaced, "inbound table full: dropped the oldest requests of unverified peers");
            }
        }
        true
    }

    pub(super) fn compact_lru(&mut self) {
        if self.lru.len() > 4 * self.peers.len() + 64 {
            let slab = &self.slab;
            self.lru.retain(|(slot, stamp)| slab[*slot as usize].as_ref().is_some_and(|p| p.lru_stamp == *stamp));
        }
    }
}
