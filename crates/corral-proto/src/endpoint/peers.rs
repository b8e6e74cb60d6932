//! The peer table: per-peer state (message IDs, duplicate detection, NSTART queue), bounded by
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

#[derive(Debug)]
pub(super) struct Peer {
    pub(super) addr: SocketAddr,
    pub(super) next_mid: u16,
    /// Outstanding interactions this endpoint initiated (NSTART, RFC 7252 §4.7).
    pub(super) outstanding: u16,
    pub(super) queue: VecDeque<RequestId>,
    pub(super) dedup: VecDeque<DedupEntry>,
    /// Exchanges and reliable messages that refer to this peer; a peer with refs is never evicted.
    pub(super) refs: u32,
    pub(super) lru_stamp: u64,
}

impl Endpoint {
    pub(super) fn peer_mut(&mut self, slot: u32) -> &mut Peer {
        self.slab[slot as usize].as_mut().expect("peer slot is live: slots come from the peers map")
    }

    pub(super) fn next_mid(&mut self, slot: u32) -> MessageId {
        let peer = self.peer_mut(slot);
        let mid = peer.next_mid;
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
            next_mid: self.rng.next_u16(),
            outstanding: 0,
            queue: VecDeque::new(),
            dedup: VecDeque::new(),
            refs: 0,
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

    /// Forgets the least recently active peer that has no exchanges or reliable messages pending.
    pub(super) fn evict_peer(&mut self) -> bool {
        let mut budget = self.lru.len();
        while budget > 0 {
            budget -= 1;
            let Some((slot, stamp)) = self.lru.pop_front() else { return false };
            let Some(peer) = self.slab[slot as usize].as_ref() else { continue };
            if peer.lru_stamp != stamp {
                continue; // a newer touch of this peer is further back
            }
            if peer.refs > 0 || peer.outstanding > 0 || !peer.queue.is_empty() {
                self.lru.push_back((slot, stamp));
                continue;
            }
            let addr = peer.addr;
            self.peers.remove(&addr);
            self.slab[slot as usize] = None;
            self.free_slots.push(slot);
            self.stats.peers_evicted += 1;
            debug!(peer = %addr, "forgot idle peer (peer table full)");
            return true;
        }
        false
    }

    pub(super) fn compact_lru(&mut self) {
        if self.lru.len() > 4 * self.peers.len() + 64 {
            let slab = &self.slab;
            self.lru.retain(|(slot, stamp)| slab[*slot as usize].as_ref().is_some_and(|p| p.lru_stamp == *stamp));
        }
    }
}
