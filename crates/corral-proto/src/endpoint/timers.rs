//! The timers of an [`Endpoint`]: `handle_timeout` and what each kind of timer does when it fires — a
//! retransmission with exponential back-off (or giving up), and the end of an exchange's lifetime.
//! Methods of [`Endpoint`] over its tables (see `mod.rs`, where `poll_timeout` is).

use super::{ClientState, Endpoint, Event, InboundKind, Owner, Retransmit, Sent, Timer, Transmit};
use crate::message::{RequestError, RequestId};
use crate::time::Instant;
use corral_wire::MessageId;
use std::cmp::Reverse;
use std::net::SocketAddr;
use tracing::{debug, info, warn};

impl Endpoint {
    // ---------------------------------------------------------------------------------------------
    // Timers
    // ---------------------------------------------------------------------------------------------

    /// Processes every timer due at or before `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(&Reverse((at, _))) = self.timers.peek() {
            if at > now {
                break;
            }
            let Some(Reverse((at, timer))) = self.timers.pop() else { break };
            match timer {
                Timer::Retransmit(dst, mid) => self.on_retransmit_timer(now, at, dst, mid),
                Timer::Exchange(id) => self.on_exchange_timer(now, at, id),
            }
        }
        while self.delayed.peek().is_some_and(|Reverse(d)| d.at <= now) {
            if let Some(Reverse(d)) = self.delayed.pop() {
                self.transmits.push_back(d.transmit);
            }
        }
        while let Some(&(at, id)) = self.piggyback_deadlines.front() {
            if at > now {
                break;
            }
            self.piggyback_deadlines.pop_front();
            let Some(inb) = self.inbound.get(&id) else { continue };
            let expires = inb.expires;
            if inb.con && !inb.acked {
                debug!(?id, "no response within the piggyback window: sending empty ACK");
                let _ = self.accept(id);
            }
            self.inbound_expiry.push_back((expires, id));
        }
        while let Some(&(at, id)) = self.inbound_expiry.front() {
            if at > now {
                break;
            }
            self.inbound_expiry.pop_front();
            if let Some(inb) = self.inbound.get(&id) {
                if inb.expires <= now {
                    warn!(?id, peer = %inb.peer, "request never answered by the application; dropping it");
                    let (peer, kind) = (inb.peer, inb.kind);
                    self.inbound.remove(&id);
                    match kind {
                        InboundKind::Request => self.peers.release_inbound(peer),
                        InboundKind::Notification(_) => self.peers.release_ref(peer),
                    }
                }
            }
        }
        while let Some(&(at, dst, mid)) = self.sent_non_expiry.front() {
            if at > now {
                break;
            }
            self.sent_non_expiry.pop_front();
            if self.sent.get(&(dst, mid)).is_some_and(|s| s.retransmit.is_none()) {
                self.sent.remove(&(dst, mid));
            }
        }
    }

    pub(super) fn on_retransmit_timer(&mut self, now: Instant, at: Instant, dst: SocketAddr, mid: MessageId) {
        let max_retransmit = self.params_for(&dst).max_retransmit;
        let Some(sent) = self.sent.get_mut(&(dst, mid)) else { return };
        let Some(rt) = sent.retransmit.as_mut() else { return };
        if rt.next != at {
            return; // stale
        }
        if rt.count < max_retransmit {
            rt.count += 1;
            rt.timeout = rt.timeout.saturating_mul(2);
            rt.next = now + rt.timeout;
            let (next, count, timeout, bytes) = (rt.next, rt.count, rt.timeout, rt.bytes.clone());
            let owner = sent.owner;
            let answer = matches!(owner, Owner::Response | Owner::Notification(_));
            // RFC 7641 §4.5.2: a newer notification goes out in place of the one being retransmitted,
            // with a new message ID and the old one's back-off, so an observer that went away still gets
            // at most 1 + MAX_RETRANSMIT transmissions. Its peer reference passes to the new entry.
            let queued = match owner {
                Owner::Notification(key) if self.server.observers.get(&key).is_some_and(|o| o.pending == Some(mid)) => {
                    self.server.observers.take_queued(&key).map(|q| (key, q))
                }
                _ => None,
            };
            let (mid, bytes) = match queued {
                Some((key, (newer, newer_bytes))) => {
                    self.sent.remove(&(dst, mid));
                    let retransmit = Retransmit { bytes: newer_bytes.clone(), count, timeout, next };
                    self.sent.insert((dst, newer), Sent { owner, retransmit: Some(retransmit) });
                    self.server.observers.set_pending(&key, Some(newer));
                    (newer, newer_bytes)
                }
                None => (mid, bytes),
            };
            self.stats.retransmissions += 1;
            info!(%dst, %mid, count, "retransmitting CON");
            let transmit = Transmit { dst, payload: bytes, src: None };
            if answer {
                // An unverified peer's credit bounds retransmissions too; one withheld still counts, so
                // a spoofed victim is given up on in time.
                self.push_answer(now, transmit);
            } else {
                self.transmits.push_back(transmit);
            }
            self.push_timer(next, Timer::Retransmit(dst, mid));
            return;
        }
        let owner = sent.owner;
        self.sent.remove(&(dst, mid));
        self.peers.release_ref(dst);
        self.stats.timeouts += 1;
        info!(%dst, %mid, "CON not acknowledged after MAX_RETRANSMIT retransmissions");
        match owner {
            Owner::Request(id) => self.fail_exchange(now, id, RequestError::Timeout),
            Owner::Ping(id) => {
                self.peers.ping_done(dst);
                self.events.push_back(Event::Failed { id, error: RequestError::Timeout });
            }
            Owner::Response => {}
            Owner::Notification(key) => {
                // RFC 7641 §4.5: an observer that does not acknowledge a CON notification is removed.
                if self.server.observers.remove(&key) {
                    self.stats.observers_lost += 1;
                    info!(peer = %dst, "observer did not acknowledge a notification; removed");
                }
            }
        }
    }

    pub(super) fn on_exchange_timer(&mut self, now: Instant, at: Instant, id: RequestId) {
        let Some(ex) = self.exchanges.get(&id) else { return };
        if ex.wake_at() != Some(at) {
            return; // stale
        }
        if let ClientState::Collecting { .. } = ex.state {
            debug!(?id, "multicast response window closed");
            self.finish_exchange(now, id);
            self.events.push_back(Event::MulticastDone { id });
            return;
        }
        if matches!(ex.state, ClientState::Observing) {
            return; // an observation has no deadline of its own
        }
        self.stats.timeouts += 1;
        info!(?id, "request timed out");
        self.fail_exchange(now, id, RequestError::Timeout);
    }
}
