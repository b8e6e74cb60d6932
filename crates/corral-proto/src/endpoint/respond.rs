//! The server side's answers (RFC 7252 §5.2, §8.2; RFC 7641 §4; RFC 7959 §2): how a response to a received
//! request leaves — piggybacked, separate or NON, suppressed for multicast errors and No-Response —,
//! notifications to the observers of a changed resource, and the ways to end a received request
//! without an answer (discard) or with an empty ACK first (accept).
//!
//! # What it owns
//! The path from [`Endpoint::respond`] to a [`Transmit`]: the exchange's record of what was sent (so a
//! duplicate is answered the same), the observer registration a response completes, the block of a
//! large body the client asked for, and the answer's share of the peer's amplification credit.
//!
//! # What it must never do
//! Decide what to answer (the services do) or read a datagram (`receive.rs` and `inbound.rs` do).

use super::observe::ObserverKey;
use super::server::RequestMeta;
use super::{echo_challenge, suppressed, Delayed, Endpoint, Inbound, InboundKind, Owner, Reply, Sent, Transmit};
use crate::message::{InboundId, IncomingRequest, Request, Response, Transport, UnknownExchange};
use crate::time::Instant;
use corral_wire::{Message, MessageId, MessageType, OptionNumber, Token};
use std::cmp::Reverse;
use std::net::SocketAddr;
use tracing::{trace, warn};

impl Endpoint {
    /// Answers a received request: piggybacked on the ACK if the CON is not acknowledged yet, as a separate
    /// CON if it is, as a NON for a NON request (after leisure for a multicast request). Errors to multicast
    /// requests and classes suppressed by No-Response are not sent (RFC 7252 §8.2, RFC 7967).
    ///
    /// On the way out the endpoint registers an observer if the request asked for it and the response is
    /// marked [`Response::observable`], echoes Block1 for a completed upload, and sends a body larger than
    /// one block as the Block2 block the client asked for (RFC 7959).
    pub fn respond(&mut self, now: Instant, id: InboundId, response: Response) -> Result<(), UnknownExchange> {
        let mut inb = self.inbound.remove(&id).ok_or(UnknownExchange)?;
        // The peer is looked up once for the whole answer.
        let slot = self.peers.slot_of(&inb.peer);
        if let Some(slot) = slot {
            let peer = self.peers.get_mut(slot);
            match inb.kind {
                InboundKind::Request => peer.release_inbound(),
                InboundKind::Notification(_) => peer.release_ref(),
            }
        }
        self.forget_answered_deadlines();
        if let InboundKind::Notification(key) = inb.kind {
            self.send_notification(now, &inb, key, response);
            return Ok(());
        }
        let meta = std::mem::take(&mut inb.meta);
        let registers = meta.observe.is_some();
        let (block, policy) = (self.config.block, self.config.observe);
        let verified =
            self.config.amplification.is_none() || slot.is_some_and(|slot| self.peers.get_mut(slot).verified);
        let rendered = self.server.on_response(
            now,
            &block,
            &policy,
            &mut self.rng,
            (inb.peer, inb.token),
            meta,
            response,
            0,
            verified,
        );
        let response = match rendered {
            Some(r) => r,
            None => match slot {
                Some(slot) => echo_challenge(self.give_echo(now, slot)),
                None => return Ok(()),
            },
        };
        let registered = registers && response.options.contains(OptionNumber::OBSERVE);
        self.send_response(now, &inb, slot, response, registered);
        Ok(())
    }

    /// Sends one more response to a request this endpoint has already answered: a NON with the request's
    /// token and a message ID of its own, paid for like any answer within the reflection bound of an
    /// unverified source. A proxy that carries one request to a group relays each member's answer this
    /// way (draft-ietf-core-groupcomm-proxy §5.4.1: the first over the exchange, later ones separately
    /// with the same token); the client collects them as it collects a multicast request's. Block-wise
    /// and Observe options are the caller's to leave out.
    pub fn respond_again(&mut self, now: Instant, peer: SocketAddr, token: Token, response: Response) {
        let Some(slot) = self.peer_slot(peer) else {
            warn!(%peer, "further response dropped: peer table full");
            return;
        };
        let mid = self.peers.next_mid(slot, self.config.shard);
        trace!(%peer, code = %response.code, "respond again");
        let msg = Message {
            mtype: MessageType::Non,
            code: response.code,
            mid,
            token,
            options: response.options,
            payload: response.payload,
        };
        self.push_answer_at(now, slot, Transmit { dst: peer, payload: msg.encode(), src: None });
    }

    /// Drops the piggyback deadlines at the front of the queue whose requests are answered: they would
    /// only wake the driver to do nothing (under a steady load, once per request, one window after it),
    /// and requests are mostly answered in the order they came.
    fn forget_answered_deadlines(&mut self) {
        while let Some((_, id)) = self.piggyback_deadlines.front() {
            if self.inbound.contains_key(id) {
                break;
            }
            self.piggyback_deadlines.pop_front();
        }
    }

    /// Sends a response (or suppresses it) the way the request arrived, within the reflection bound for an
    /// unverified source (see [`AmplificationLimit`]): a response the bound replaces with an Echo challenge
    /// does not register the observer it would have (`registered`).
    fn send_response(&mut self, now: Instant, inb: &Inbound, slot: Option<u32>, response: Response, registered: bool) {
        let suppressed = suppressed(response.code, inb.no_response, inb.multicast);
        trace!(peer = %inb.peer, code = %response.code, suppressed, "respond");
        let mut msg = Message {
            mtype: MessageType::Ack,
            code: response.code,
            mid: inb.mid,
            token: inb.token,
            options: response.options,
            payload: response.payload,
        };
        // An unsafe request's effect has happened: its answer is not replaced (repeating the request with
        // an Echo value would repeat the effect); beyond the bound it waits for the client's retransmission.
        if let Some(slot) = slot.filter(|_| !suppressed && !inb.multicast && inb.safe) {
            if self.bound_answer(now, slot, inb.peer, &mut msg) && registered {
                self.server.observers.remove(&(inb.peer, inb.token));
            }
        }
        if inb.con && !inb.acked {
            let bytes = if suppressed { Message::empty(MessageType::Ack, inb.mid).encode() } else { msg.encode() };
            self.remember_reply(slot, inb.mid, Reply::Sent(bytes.clone()));
            // Not sent now when over the credit: the client's retransmission (earning more) gets it.
            let transmit = Transmit { dst: inb.peer, payload: bytes, src: None };
            match slot {
                Some(slot) => self.push_answer_at(now, slot, transmit),
                None => self.push_answer(now, transmit),
            };
            return;
        }
        if suppressed {
            return;
        }
        let Some(slot) = slot.or_else(|| self.peer_slot(inb.peer)) else {
            warn!(peer = %inb.peer, "response dropped: peer table full");
            return;
        };
        msg.mid = self.peers.next_mid(slot, self.config.shard);
        if inb.con {
            // Separate response (RFC 7252 §5.2.2): a CON of its own, retransmitted until acknowledged.
            msg.mtype = MessageType::Con;
            let bytes = msg.encode();
            self.send_reliable(now, inb.peer, msg.mid, Owner::Response, bytes);
        } else {
            msg.mtype = MessageType::Non;
            let transmit = Transmit { dst: inb.peer, payload: msg.encode(), src: None };
            if inb.not_before > now {
                if self.delayed.len() >= self.config.limits.max_delayed {
                    warn!(peer = %inb.peer, "multicast response dropped: too many delayed responses");
                    return;
                }
                self.seq += 1;
                self.delayed.push(Reverse(Delayed { at: inb.not_before, seq: self.seq, transmit }));
            } else if inb.multicast {
                self.transmits.push_back(transmit);
            } else {
                self.push_answer(now, transmit);
            }
        }
    }

    /// Sends a rendered notification to its observer (RFC 7641 §4.2): same token, new message ID, the next
    /// sequence number, CON or NON as decided in [`Endpoint::notify`]. A response that is not a success or
    /// no longer observable is the last notification and ends the observation.
    fn send_notification(&mut self, now: Instant, inb: &Inbound, key: ObserverKey, response: Response) {
        let block = self.config.block;
        let Some((response, last)) = self.server.on_notification(now, &block, key, inb.meta.key, inb.con, response, 0)
        else {
            return; // the observer went away while the notification was rendered
        };
        let Some(slot) = self.peer_slot(key.0) else {
            warn!(peer = %key.0, "notification dropped: peer table full");
            return;
        };
        let mid = self.peers.next_mid(slot, self.config.shard);
        let msg = Message {
            mtype: if inb.con { MessageType::Con } else { MessageType::Non },
            code: response.code,
            mid,
            token: key.1,
            options: response.options,
            payload: response.payload,
        };
        let bytes = msg.encode();
        if inb.con {
            // RFC 7641 §4.5.2: one CON notification in flight per observer. A newer one waits: the ACK of
            // the one in flight sends it at once (`on_ack`), or it goes in its place at the next
            // retransmission, continuing the back-off, so an observer that went away is still given up on
            // in time (`on_retransmit_timer`). The last notification of an observation cannot wait (the
            // observer is removed below): it replaces the one in flight now.
            let in_flight = self
                .server
                .observers
                .get(&key)
                .and_then(|o| o.pending)
                .filter(|old| self.sent.get(&(key.0, *old)).is_some_and(|s| s.retransmit.is_some()));
            match in_flight {
                Some(_) if !last => self.server.observers.queue(&key, mid, bytes),
                Some(old) => {
                    self.sent.remove(&(key.0, old));
                    self.peers.release_ref(key.0);
                    self.send_reliable(now, key.0, mid, Owner::Notification(key), bytes);
                }
                None => {
                    self.send_reliable(now, key.0, mid, Owner::Notification(key), bytes);
                    self.server.observers.set_pending(&key, Some(mid));
                }
            }
        } else {
            let lifetime = self.params_for(&key.0).non_lifetime();
            self.sent.insert((key.0, mid), Sent { owner: Owner::Notification(key), retransmit: None });
            self.sent_non_expiry.push_back((now + lifetime, key.0, mid));
            self.push_answer(now, Transmit { dst: key.0, payload: bytes, src: None });
        }
        if last {
            self.server.observers.remove(&key);
        }
    }

    /// The resource at `path` changed: one request per observer of it, to be rendered by the application
    /// (routed like any request; the [`Node`](crate::Node) does it for services). Each answer is sent as a
    /// notification. `confirmable` forces CON or NON; `None` follows the [`ObservePolicy`](super::ObservePolicy).
    #[must_use = "each request must be rendered and answered, or its observer gets no notification"]
    pub fn notify(&mut self, now: Instant, path: &str, confirmable: Option<bool>) -> Vec<IncomingRequest> {
        let mut out = Vec::new();
        for key in self.server.observers.keys_for(path) {
            if self.inbound.len() >= self.config.limits.max_inbound_exchanges {
                warn!(%path, "notifications skipped: too many requests in progress");
                break;
            }
            let Some(o) = self.server.observers.get(&key) else { continue };
            let con =
                self.server.observers.wants_con(&key, now, &self.config.observe, confirmable) || o.pending.is_some();
            let request = o.request.clone();
            let Some(slot) = self.peer_slot(key.0) else { continue };
            self.peers.get_mut(slot).refs += 1;
            let id = InboundId::new(Transport::Udp, self.next_inbound_id);
            self.next_inbound_id += 1;
            let expires = now + self.params_for(&key.0).exchange_lifetime();
            let meta = RequestMeta { key: self.server.key_of(&request), ..RequestMeta::default() };
            self.inbound.insert(
                id,
                Inbound {
                    kind: InboundKind::Notification(key),
                    safe: true,
                    meta,
                    peer: key.0,
                    mid: MessageId(0),
                    token: key.1,
                    con,
                    multicast: false,
                    acked: true,
                    no_response: None,
                    not_before: now,
                    expires,
                },
            );
            self.piggyback_deadlines.push_back((now + self.config.piggyback_window(), id));
            out.push(IncomingRequest {
                id,
                from: key.0,
                multicast: false,
                confirmable: con,
                token: key.1,
                request,
                notification: true,
                verified: self.peers.is_trusted(&key.0),
                echoed: false,
                peer_identity: None,
                oscore_identity: None,
            });
        }
        out
    }

    /// Forgets every observer of `path` without telling them (RFC 7641 §3.3.1: as after a reboot, they
    /// find out when their notifications stop and Max-Age runs out). Returns how many there were.
    pub fn drop_observers(&mut self, path: &str) -> usize {
        self.server.observers.remove_path(path)
    }

    /// A layer above the message layer (OSCORE) turned the received request `id` into `inner`: an Observe
    /// registration it carries is kept under the inner request's resource, and notifications are
    /// rendered by replaying `inner`. Nothing happens for a request that does not register.
    pub fn retarget_observation(&mut self, id: InboundId, inner: &Request) {
        if let Some(reg) = self.inbound.get_mut(&id).and_then(|inb| inb.meta.observe.as_mut()) {
            **reg = (inner.resource_id(), inner.clone());
        }
    }

    /// How many observers `path` has.
    pub fn observer_count(&self, path: &str) -> usize {
        self.server.observers.count_for(path)
    }

    /// Ends a received request without any response: the application recognised it as a repetition of one
    /// it is already answering (a client that re-sent a NON, or a CON under a new message ID, with the same
    /// token). A CON is acknowledged so that its sender stops retransmitting; nothing else is sent.
    pub fn discard(&mut self, id: InboundId) -> Result<(), UnknownExchange> {
        self.accept(id)?;
        if let Some(inb) = self.inbound.remove(&id) {
            match inb.kind {
                InboundKind::Request => self.peers.release_inbound(inb.peer),
                InboundKind::Notification(_) => self.peers.release_ref(inb.peer),
            }
        }
        Ok(())
    }

    /// Sends the empty ACK for a received CON now, committing to a separate response. Useful when the
    /// application knows it will be slow; otherwise the endpoint does it after the piggyback window.
    pub fn accept(&mut self, id: InboundId) -> Result<(), UnknownExchange> {
        let inb = self.inbound.get_mut(&id).ok_or(UnknownExchange)?;
        if inb.con && !inb.acked {
            inb.acked = true;
            let (peer, mid) = (inb.peer, inb.mid);
            let bytes = Message::empty(MessageType::Ack, mid).encode();
            let slot = self.peers.slot_of(&peer);
            self.remember_reply(slot, mid, Reply::Sent(bytes.clone()));
            self.transmits.push_back(Transmit { dst: peer, payload: bytes, src: None });
        }
        Ok(())
    }

    pub(super) fn remember_reply(&mut self, slot: Option<u32>, mid: MessageId, reply: Reply) {
        let Some(slot) = slot else { return };
        if let Some(e) = self.peers.get_mut(slot).dedup.iter_mut().rev().find(|e| e.mid == mid) {
            e.reply = reply;
        }
    }
}
