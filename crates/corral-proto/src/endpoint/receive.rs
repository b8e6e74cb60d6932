//! The message layer's input (RFC 7252 §4): a datagram from the socket, or an ICMP error for one sent,
//! becomes an ACK, a Reset, a duplicate answered again, a response for a client exchange or a request for
//! the server side (`inbound.rs`).
//!
//! # What it owns
//! Parsing and first checks of every datagram, ACK and RST matching against what was sent, duplicate
//! detection per (peer, message ID), the empty ACK of a separate response, and failing the exchanges of a
//! peer the driver cannot reach.
//!
//! # What it must never do
//! Panic or allocate per datagram for input it rejects (a flood must cost little), or answer a datagram it
//! cannot parse with more than a Reset.

use super::{to_response, ClientState, DedupEntry, Endpoint, Event, Owner, Reply, Transmit};
use crate::message::{RequestError, RequestId};
use crate::time::Instant;
use corral_wire::{Message, MessageId, MessageType, OptionNumber, Packet, Token};
use std::net::{IpAddr, SocketAddr};
use tracing::{debug, info, trace, warn};

impl Endpoint {
    /// The PSK identity the peer of the datagrams handed in next proved in its DTLS handshake: a driver
    /// with a DTLS layer sets it before [`Endpoint::handle_datagram`] with a datagram that layer decrypted,
    /// and sets `None` after it, so that requests in it carry [`IncomingRequest::peer_identity`](crate::IncomingRequest::peer_identity).
    pub fn set_datagram_identity(&mut self, identity: Option<std::sync::Arc<[u8]>>) {
        self.datagram_identity = identity;
    }

    /// Every unicast request to `peer` ends with `error` at once: the driver could not reach the peer
    /// (a failed DTLS handshake: [`RequestError::Dtls`]).
    pub fn fail_peer(&mut self, now: Instant, peer: SocketAddr, error: RequestError) {
        let ids: Vec<RequestId> =
            self.exchanges.iter().filter(|(_, ex)| ex.dst == peer && !ex.multicast).map(|(id, _)| *id).collect();
        for id in ids {
            info!(%peer, ?id, %error, "request failed");
            self.fail_exchange(now, id, error);
        }
    }

    /// A datagram arrived from `from`. `dst_ip` is the local address it was sent to, when the runtime knows
    /// it; a multicast address there marks the request as multicast (RFC 7252 §8.2).
    pub fn handle_datagram(&mut self, now: Instant, from: SocketAddr, dst_ip: Option<IpAddr>, data: &[u8]) {
        let queued = self.transmits.len();
        self.on_datagram(now, from, dst_ip, data);
        // Answers leave from the address the peer wrote to (a wildcard socket has many).
        if let Some(local) = dst_ip.filter(|ip| !ip.is_multicast()) {
            for t in self.transmits.iter_mut().skip(queued).filter(|t| t.dst == from && t.src.is_none()) {
                t.src = Some(local);
            }
            if let Some(slot) = self.peers.slot_of(&from) {
                self.peers.get_mut(slot).local = Some(local);
            }
        }
    }

    fn on_datagram(&mut self, now: Instant, from: SocketAddr, dst_ip: Option<IpAddr>, data: &[u8]) {
        self.stats.datagrams_in += 1;
        let multicast = dst_ip.is_some_and(|ip| ip.is_multicast());
        let packet = match Packet::new_checked(data) {
            Ok(p) => p,
            Err(e) => {
                self.stats.malformed_in += 1;
                debug!(%from, error = %e, len = data.len(), "malformed datagram");
                match Packet::<&[u8]>::peek_header(data) {
                    // RFC 7252 §4.2: a CON with a format error is rejected with RST (never on multicast).
                    Some((MessageType::Con, _, mid)) if !multicast => self.send_rst(from, mid),
                    // An ACK that answers one of our requests with garbage: the request has its answer, and it
                    // is unusable. Waiting for a retransmission's answer would only repeat it.
                    Some((MessageType::Ack, code, mid)) if !multicast && code.is_response() => {
                        self.on_malformed_ack(now, from, mid)
                    }
                    _ => {}
                }
                return;
            }
        };
        let code = packet.code();
        match packet.mtype() {
            MessageType::Ack if !multicast => self.on_ack(now, from, &packet),
            MessageType::Rst if !multicast => self.on_rst(now, from, packet.message_id()),
            MessageType::Con | MessageType::Non if code.is_request() => self.on_request(now, from, multicast, &packet),
            MessageType::Con | MessageType::Non if code.is_response() && !multicast => {
                self.on_response_message(now, from, &packet)
            }
            MessageType::Con if code.is_empty() && !multicast => {
                trace!(%from, "ping answered");
                self.send_rst(from, packet.message_id());
            }
            mtype => {
                // Reserved classes, empty NON, signalling codes over UDP: a CON is rejected, the rest ignored.
                self.stats.malformed_in += 1;
                debug!(%from, ?mtype, %code, "ignoring message with unexpected type or code");
                if mtype == MessageType::Con && !multicast {
                    self.send_rst(from, packet.message_id());
                }
            }
        }
    }

    /// The network reported that a datagram to `peer` could not be delivered (an ICMP port, host or
    /// network unreachable error, which the driver reads from its socket's error queue). `quoted` is the
    /// start of the datagram the error refers to, when the driver has it (ICMP quotes it): the exchange,
    /// notification or response that datagram carried is matched by message ID *and* token, so that an
    /// off-path attacker who spoofs ICMP errors must guess a token as well. `None` (a connected socket's
    /// bare ECONNREFUSED) ends every request this endpoint has outstanding to `peer`.
    ///
    /// A request ends with [`RequestError::Unreachable`] at once instead of after its retransmissions; an
    /// observer whose notification bounced is forgotten (it has gone away); a separate response being
    /// retransmitted to it stops.
    pub fn handle_unreachable(&mut self, now: Instant, peer: SocketAddr, quoted: Option<&[u8]>) {
        let Some(quoted) = quoted else {
            let ids: Vec<RequestId> =
                self.exchanges.iter().filter(|(_, ex)| ex.dst == peer && !ex.multicast).map(|(id, _)| *id).collect();
            for id in ids {
                info!(%peer, ?id, "request failed: peer unreachable");
                self.fail_exchange(now, id, RequestError::Unreachable);
            }
            return;
        };
        let Some((_, _, mid)) = Packet::<&[u8]>::peek_header(quoted) else { return };
        let tkl = usize::from(quoted[0] & 0x0f);
        let Some(token) = quoted.get(4..4 + tkl).and_then(Token::new) else { return };
        let Some(owner) = self.sent.get(&(peer, mid)).map(|s| s.owner) else {
            trace!(%peer, %mid, "unreachable error for nothing outstanding");
            return;
        };
        match owner {
            Owner::Request(id) => {
                if self.exchanges.get(&id).is_some_and(|ex| ex.token == token && !ex.multicast) {
                    if self.sent.remove(&(peer, mid)).is_some_and(|s| s.retransmit.is_some()) {
                        self.peers.release_ref(peer);
                    }
                    info!(%peer, ?id, "request failed: peer unreachable");
                    self.fail_exchange(now, id, RequestError::Unreachable);
                }
            }
            Owner::Notification(key) if key.1 == token => {
                if self.sent.remove(&(peer, mid)).is_some_and(|s| s.retransmit.is_some()) {
                    self.peers.release_ref(peer);
                }
                if self.server.observers.remove(&key) {
                    self.stats.observers_lost += 1;
                    info!(%peer, "observer unreachable; removed");
                }
            }
            Owner::Response => {
                if self.sent.remove(&(peer, mid)).is_some_and(|s| s.retransmit.is_some()) {
                    self.peers.release_ref(peer);
                }
                info!(%peer, %mid, "separate response undeliverable: peer unreachable");
            }
            Owner::Ping(_) | Owner::Notification(_) => {}
        }
    }

    pub(super) fn send_rst(&mut self, to: SocketAddr, mid: MessageId) {
        self.stats.resets_out += 1;
        self.transmits.push_back(Transmit {
            dst: to,
            payload: Message::empty(MessageType::Rst, mid).encode(),
            src: None,
        });
    }

    fn on_ack(&mut self, now: Instant, from: SocketAddr, packet: &Packet<&[u8]>) {
        let mid = packet.message_id();
        let Some(sent) = self.sent.remove(&(from, mid)) else {
            trace!(%from, %mid, "ACK for nothing outstanding (duplicate?)");
            return;
        };
        if sent.retransmit.is_none() {
            // An ACK for a NON: meaningless; keep tracking the NON.
            self.sent.insert((from, mid), sent);
            return;
        }
        self.peers.release_ref(from);
        self.mark_verified(from);
        match sent.owner {
            Owner::Response => trace!(%from, %mid, "separate response acknowledged"),
            Owner::Notification(key) => {
                if self.server.observers.get(&key).is_some_and(|o| o.pending == Some(mid)) {
                    self.server.observers.set_pending(&key, None);
                    if let Some((next, bytes)) = self.server.observers.take_queued(&key) {
                        self.send_reliable(now, key.0, next, Owner::Notification(key), bytes);
                        self.server.observers.set_pending(&key, Some(next));
                    }
                }
            }
            Owner::Ping(id) => {
                self.peers.ping_done(from);
                self.events.push_back(Event::Pong { id, from });
            }
            Owner::Request(id) => {
                let Some(ex) = self.exchanges.get_mut(&id) else { return };
                let token_matches = ex.token.as_bytes() == packet.token_bytes();
                if packet.code().is_response() && token_matches {
                    // The round ends with this ACK: the response is handled like a separate one.
                    ex.state = ClientState::ExpectResponse { mid, until: now };
                    self.uncount(now, id);
                    self.on_client_response(now, id, from, to_response(packet));
                    return;
                }
                if !packet.code().is_empty() {
                    warn!(%from, %mid, "piggybacked response with a foreign token or code; treating as empty ACK");
                }
                // Empty ACK: the response will come separately; the CON is no longer outstanding.
                ex.state = ClientState::ExpectResponse { mid, until: now + self.config.separate_timeout() };
                self.arm_exchange(id);
                self.uncount(now, id);
            }
        }
    }

    fn on_malformed_ack(&mut self, now: Instant, from: SocketAddr, mid: MessageId) {
        let Some(Owner::Request(id)) = self.sent.get(&(from, mid)).map(|s| s.owner) else { return };
        if self.exchanges.get(&id).is_none_or(|e| e.multicast) {
            return;
        }
        if self.sent.remove(&(from, mid)).is_some_and(|s| s.retransmit.is_some()) {
            self.peers.release_ref(from);
        }
        info!(%from, ?id, "request answered with a malformed message");
        self.fail_exchange(now, id, RequestError::Malformed);
    }

    fn on_rst(&mut self, now: Instant, from: SocketAddr, mid: MessageId) {
        self.stats.resets_in += 1;
        let Some(sent) = self.sent.remove(&(from, mid)) else {
            trace!(%from, %mid, "RST for nothing outstanding");
            return;
        };
        self.mark_verified(from);
        if sent.retransmit.is_some() {
            self.peers.release_ref(from);
        }
        match sent.owner {
            Owner::Ping(id) => {
                self.peers.ping_done(from);
                self.events.push_back(Event::Pong { id, from });
            }
            Owner::Response => info!(%from, %mid, "separate response rejected with RST"),
            Owner::Notification(key) => {
                // RFC 7641 §3.6: a client rejects a notification it does not want; forget the observer.
                if self.server.observers.remove(&key) {
                    self.stats.observers_lost += 1;
                    info!(peer = %from, "observer rejected a notification with RST; removed");
                }
            }
            Owner::Request(id) => {
                if self.exchanges.get(&id).is_some_and(|e| e.multicast) {
                    return; // one member's RST does not end a group request
                }
                info!(%from, ?id, "request reset by peer");
                self.fail_exchange(now, id, RequestError::Reset);
            }
        }
    }

    /// Duplicate detection for a received CON or NON. Returns the peer slot if the message is new.
    pub(super) fn dedup(&mut self, now: Instant, from: SocketAddr, packet: &Packet<&[u8]>) -> Result<u32, ()> {
        let Some(slot) = self.peer_slot(from) else {
            return Err(());
        };
        let mid = packet.message_id();
        let con = packet.mtype() == MessageType::Con;
        // Everything the peer's entry needs is computed first, so the hot path takes the peer once.
        let lifetime = {
            let p = self.params_for(&from);
            if con {
                p.exchange_lifetime()
            } else {
                p.non_lifetime()
            }
        };
        let cap = self.config.limits.dedup_per_peer.max(1);
        let factor = self.config.amplification.as_ref().map(|l| l.factor);
        let peer = self.peers.get_mut(slot);
        if let Some(factor) = factor {
            peer.earn(factor, packet.as_bytes().len());
        }
        if let Some(pos) = peer.dedup.iter().rposition(|e| e.mid == mid) {
            if peer.dedup[pos].expires > now {
                let reply = peer.dedup[pos].reply.clone();
                self.on_duplicate(now, from, mid, con, reply);
                return Err(());
            }
            peer.dedup.remove(pos);
        }
        let evicted = peer.dedup.len() >= cap && peer.dedup.pop_front().is_some();
        peer.dedup.push_back(DedupEntry { mid, expires: now + lifetime, reply: Reply::Nothing });
        if evicted {
            self.stats.dedup_evicted += 1;
        }
        Ok(slot)
    }

    /// A message seen before within its lifetime: a CON gets what was answered the first time.
    #[cold]
    fn on_duplicate(&mut self, now: Instant, from: SocketAddr, mid: MessageId, con: bool, reply: Reply) {
        self.stats.duplicates_in += 1;
        trace!(%from, %mid, "duplicate");
        if !con {
            return;
        }
        match reply {
            Reply::Sent(bytes) => {
                self.push_answer(now, Transmit { dst: from, payload: bytes, src: None });
            }
            Reply::Pending(iid) => {
                // Still being handled: stop the client's retransmissions with an empty ACK.
                let _ = self.accept(iid);
            }
            Reply::Nothing => {}
        }
    }

    fn on_response_message(&mut self, now: Instant, from: SocketAddr, packet: &Packet<&[u8]>) {
        let con = packet.mtype() == MessageType::Con;
        let mid = packet.message_id();
        let slot = match self.dedup(now, from, packet) {
            Ok(slot) => Some(slot),
            Err(()) if self.peers.contains(&from) => return,
            Err(()) => None,
        };
        let token = packet.token();
        let matched = self.tokens.get(&token).copied().filter(|id| {
            self.exchanges.get(id).is_some_and(|ex| {
                (ex.multicast && ex.dst.ip().is_multicast())
                    || (ex.dst == from && !matches!(ex.state, ClientState::Queued))
            })
        });
        let Some(id) = matched else {
            // Nobody asked: reject a CON; a NON notification too, so the server forgets the observer
            // (RFC 7641 §3.6). Late NON replies to a closed multicast window are dropped quietly.
            if con || packet.option(OptionNumber::OBSERVE).is_some() {
                debug!(%from, %token, "rejecting unexpected response");
                self.send_rst(from, mid);
                self.remember_reply(slot, mid, Reply::Sent(Message::empty(MessageType::Rst, mid).encode()));
            }
            return;
        };
        if con {
            let ack = Message::empty(MessageType::Ack, mid).encode();
            self.remember_reply(slot, mid, Reply::Sent(ack.clone()));
            self.transmits.push_back(Transmit { dst: from, payload: ack, src: None });
        }
        self.mark_verified(from);
        self.on_client_response(now, id, from, to_response(packet));
    }
}
