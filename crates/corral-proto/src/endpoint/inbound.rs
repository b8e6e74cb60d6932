//! Requests from the network: duplicate-free requests routed to the server layer (block-wise, Observe),
//! Echo challenges, and the replies sent at once (errors, overload, RST) — within the reflection bound
//! for unverified sources (`peers.rs`).

use super::server;
use super::server::Incoming;
use super::{echo_challenge, Endpoint, Event, Inbound, InboundKind, Reply, Transmit};
use crate::message::{InboundId, IncomingRequest, Response, Transport, UnknownExchange};
use crate::time::{Duration, Instant};
use corral_wire::{Code, Message, MessageType, OptionNumber, Packet};
use std::net::SocketAddr;
use tracing::{debug, warn};

impl Endpoint {
    pub(super) fn on_request(&mut self, now: Instant, from: SocketAddr, multicast: bool, packet: &Packet<&[u8]>) {
        let con = packet.mtype() == MessageType::Con && !multicast;
        let mid = packet.message_id();
        let slot = match self.dedup(now, from, packet) {
            Ok(slot) => slot,
            Err(()) if self.peers.contains(&from) => return, // a duplicate, handled
            Err(()) => {
                self.stats.overload_rejections += 1;
                if con {
                    self.reject_overload(from, packet, "too many peers");
                }
                return;
            }
        };
        self.stats.requests_in += 1;
        let echoed = packet.option(OptionNumber::ECHO).is_some_and(|echo| self.check_echo(now, slot, echo));
        let method = packet.code();
        let error = server::refuse_request(method, packet.options(), &self.config.extra_known_options, false);
        if let Some(response) = error {
            if multicast {
                return;
            }
            debug!(%from, code = %response.code, "rejecting request");
            if con {
                self.reply_now(now, slot, from, packet, true, response);
            } else {
                // RFC 7252 §5.4.1: a NON with an unrecognised critical option is rejected (RST).
                self.send_rst(from, mid);
            }
            return;
        }
        let token = packet.token();
        let lifetime = self.params_for(&from).exchange_lifetime();
        let block = self.config.block;
        // Without a reflection bound (a trusted network) no source is held to proving its address.
        let verified = self.config.amplification.is_none() || self.peers.get_mut(slot).verified;
        let (request, meta) = match self.server.on_request(
            now,
            &block,
            lifetime,
            from,
            token,
            method,
            packet.options(),
            packet.payload(),
            multicast,
            verified,
        ) {
            Incoming::Reply(reply) => {
                self.reply_now(now, slot, from, packet, con, reply);
                return;
            }
            Incoming::Challenge => {
                let challenge = echo_challenge(self.give_echo(now, slot));
                self.reply_now(now, slot, from, packet, con, challenge);
                return;
            }
            Incoming::Deliver(request, meta) => (request, meta),
        };
        if self.peers.get_mut(slot).inbound as usize >= self.config.limits.max_inbound_per_peer {
            self.stats.overload_rejections += 1;
            if !multicast {
                self.reject_overload(from, packet, "too many of your requests in progress");
            }
            return;
        }
        if self.inbound.len() >= self.config.limits.max_inbound_exchanges && !self.displace_inbound(from) {
            self.stats.overload_rejections += 1;
            if !multicast {
                self.reject_overload(from, packet, "too many requests in progress");
            }
            return;
        }
        let id = InboundId::new(Transport::Udp, self.next_inbound_id);
        self.next_inbound_id += 1;
        let params = self.params_for(&from);
        let not_before = if multicast {
            now + Duration::from_micros(self.rng.below(params.default_leisure.as_micros() + 1))
        } else {
            now
        };
        let no_response = packet.option(OptionNumber::NO_RESPONSE).map(|v| v.first().copied().unwrap_or(0));
        let expires = now + params.exchange_lifetime();
        self.inbound.insert(
            id,
            Inbound {
                kind: InboundKind::Request,
                safe: matches!(request.method, Code::GET | Code::FETCH),
                meta,
                peer: from,
                mid,
                token,
                con,
                multicast,
                acked: false,
                no_response,
                not_before,
                expires,
            },
        );
        let peer = self.peers.get_mut(slot);
        peer.refs += 1;
        peer.inbound += 1;
        if con {
            self.remember_reply(Some(slot), mid, Reply::Pending(id));
        }
        self.piggyback_deadlines.push_back((now + self.config.piggyback_window(), id));
        let verified = self.peers.get_mut(slot).trusted();
        let peer_identity = self.datagram_identity.clone();
        let secured = peer_identity.is_some();
        self.events.push_back(Event::Request(IncomingRequest {
            id,
            from,
            multicast,
            confirmable: packet.mtype() == MessageType::Con,
            token,
            request,
            notification: false,
            verified: verified || secured,
            echoed: echoed || secured,
            peer_identity,
            oscore_identity: None,
        }));
    }

    /// Answers received request `id` with 4.01 Unauthorized and a fresh Echo value instead of serving it
    /// (RFC 9175 §2.4): the application wants proof that the source receives at its address before it
    /// changes state or commits resources on its behalf. A client that repeats the request with the Echo
    /// value (corral's and libcoap's do so by themselves) is then verified, and its repetition arrives
    /// with [`IncomingRequest::verified`] set. A blind spoofer never sees the value.
    pub fn challenge(&mut self, now: Instant, id: InboundId) -> Result<(), UnknownExchange> {
        let inb = self.inbound.get(&id).ok_or(UnknownExchange)?;
        if inb.kind != InboundKind::Request {
            return Err(UnknownExchange);
        }
        let peer = inb.peer;
        let Some(slot) = self.peers.slot_of(&peer) else { return Err(UnknownExchange) };
        let value = self.give_echo(now, slot);
        debug!(%peer, ?id, "state change from an unverified source: 4.01 with Echo");
        self.respond(now, id, echo_challenge(value))
    }

    /// The Echo challenge (4.01 with an Echo value, RFC 9175 §2.4) that the reflection bound would put in
    /// place of an answer of about `len` bytes to received request `id`, a safe request inside a protected
    /// one (the caller knows its method; outside it is a POST), or `None` if the answer may go: the source
    /// is verified, the request multicast, or the answer fits what the source may still be sent. Of a
    /// body larger than one block only that block counts, as only it goes out now.
    ///
    /// For a layer that protects responses (OSCORE): an answer the endpoint replaced after the layer
    /// protected it would reach the client unprotected, which an OSCORE client refuses (aiocoap: "No
    /// Object-Security option present"). The layer sends this challenge protected instead, the Echo option
    /// inside (Class E, RFC 9175 §2.2.1), and hands the value the client returns to
    /// [`Endpoint::prove_address`].
    pub fn challenge_for(&mut self, now: Instant, id: InboundId, len: usize) -> Option<Response> {
        let limit = self.config.amplification?;
        let inb = self.inbound.get(&id)?;
        if inb.kind != InboundKind::Request || inb.multicast {
            return None;
        }
        let (peer, block2) = (inb.peer, inb.meta.block2);
        let slot = self.peers.slot_of(&peer)?;
        if self.peers.get_mut(slot).trusted() {
            return None;
        }
        let szx = block2.map_or(self.config.block.szx, |b| b.szx.min(self.config.block.szx)).min(6);
        let block = corral_wire::BlockValue { num: 0, more: false, szx }.size();
        // A block goes with its header and options: a generous allowance for them.
        let size = len.min(block + 64);
        if size <= self.peers.answer_credit(&limit, now, slot, peer) {
            return None;
        }
        debug!(%peer, ?id, size, "answer too large for an unverified source: Echo challenge through the layer");
        Some(echo_challenge(self.give_echo(now, slot)))
    }

    /// A layer found `echo` inside the protected request `id` (see [`Endpoint::challenge_for`]): if it is
    /// the value given to that request's source and still fresh, the source has shown it receives at its
    /// address and counts as verified from now on, exactly as if the value had come outside. Returns
    /// whether it did.
    pub fn prove_address(&mut self, now: Instant, id: InboundId, echo: &[u8]) -> bool {
        let Some(peer) = self.inbound.get(&id).map(|inb| inb.peer) else { return false };
        let Some(slot) = self.peers.slot_of(&peer) else { return false };
        self.check_echo(now, slot, echo)
    }

    /// Answers a request on the spot, without involving the application (protocol-level replies such as
    /// 2.31 Continue, 4.08, or a cached block): piggybacked for a CON, as a NON otherwise.
    fn reply_now(
        &mut self,
        now: Instant,
        slot: u32,
        to: SocketAddr,
        packet: &Packet<&[u8]>,
        con: bool,
        response: Response,
    ) {
        let (mid, token) = (packet.message_id(), packet.token());
        let mut msg = Message {
            mtype: MessageType::Ack,
            code: response.code,
            mid,
            token,
            options: response.options,
            payload: response.payload,
        };
        self.bound_answer(now, slot, to, &mut msg);
        if con {
            let bytes = msg.encode();
            self.remember_reply(Some(slot), mid, Reply::Sent(bytes.clone()));
            self.push_answer(now, Transmit { dst: to, payload: bytes, src: None });
        } else {
            msg.mtype = MessageType::Non;
            msg.mid = self.peers.next_mid(slot, self.config.shard);
            self.push_answer(now, Transmit { dst: to, payload: msg.encode(), src: None });
        }
    }

    /// A stateless 5.03 with Max-Age for a CON request that hit a limit (RFC 7252 §5.9.3.4).
    fn reject_overload(&mut self, to: SocketAddr, packet: &Packet<&[u8]>, why: &str) {
        warn!(peer = %to, why, "overloaded: answering 5.03");
        let mut ack = Message::new(MessageType::Ack, Code::SERVICE_UNAVAILABLE, packet.message_id(), packet.token());
        ack.options.set_uint(OptionNumber::MAX_AGE, u64::from(self.config.overload_max_age));
        ack.payload = format!("overloaded: {why}").into_bytes();
        self.transmits.push_back(Transmit { dst: to, payload: ack.encode(), src: None });
    }

    /// The inbound table is full: the oldest request of an unverified peer other than `except` makes room
    /// for a new one (its later answer finds no exchange). `false` if every request is a verified peer's.
    fn displace_inbound(&mut self, except: SocketAddr) -> bool {
        let candidate = self
            .inbound_expiry
            .iter()
            .map(|(_, id)| *id)
            .chain(self.piggyback_deadlines.iter().map(|(_, id)| *id))
            .find(|id| {
                self.inbound.get(id).is_some_and(|i| {
                    i.kind == InboundKind::Request && i.peer != except && !self.peers.is_verified(&i.peer)
                })
            });
        let Some(id) = candidate else { return false };
        if let Some(inb) = self.inbound.remove(&id) {
            self.peers.release_inbound(inb.peer);
            self.stats.displaced += 1;
            if self.stats.displaced.is_power_of_two() {
                warn!(peer = %inb.peer, displaced = self.stats.displaced, "inbound table full: dropped the oldest requests of unverified peers");
            }
        }
        true
    }
}
