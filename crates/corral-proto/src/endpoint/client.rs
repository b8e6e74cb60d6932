//! The client side of an [`Endpoint`]: starting requests (and pings), NSTART queueing per peer, reliable
//! sending, the rounds of a block-wise exchange, what a response does to its exchange (including the rest
//! of a block-wise notification), cancelling and deregistering. Methods of [`Endpoint`] over its tables
//! (see `mod.rs`).

use super::block::{Step, Transfer};
use super::observe::Freshness;
use super::{
    request_message, ClientExchange, ClientState, Endpoint, Event, Owner, Retransmit, Sent, Timer, TransferProgress,
    Transmit,
};
use crate::message::{Request, RequestError, RequestId, Response, SendParams, StartError, Transport};
use crate::time::{Duration, Instant};
use corral_wire::{Code, Message, MessageId, MessageType, OptionNumber, Token};
use std::cmp::Reverse;
use std::net::SocketAddr;
use tracing::{debug, info};

impl Endpoint {
    // ---------------------------------------------------------------------------------------------
    // Client side
    // ---------------------------------------------------------------------------------------------

    /// Starts a request to `dst` (a multicast address sends a NON to the group). The outcome arrives as
    /// [`Event::Response`], [`Event::Failed`] or, for multicast, [`Event::MulticastDone`].
    ///
    /// A payload larger than one block goes out block-wise (Block1) and a block-wise response is assembled
    /// (Block2) before it is delivered. A GET or FETCH with Observe=0 registers an observation: every fresh
    /// notification is an [`Event::Response`] for the same id, until [`Endpoint::cancel`],
    /// [`Endpoint::deregister`] or a final response (an error, or one without Observe).
    pub fn request(
        &mut self,
        now: Instant,
        dst: SocketAddr,
        request: Request,
        params: SendParams,
    ) -> Result<RequestId, StartError> {
        self.start_exchange(now, dst, request, params, None)
    }

    pub(super) fn start_exchange(
        &mut self,
        now: Instant,
        dst: SocketAddr,
        mut request: Request,
        params: SendParams,
        parent: Option<RequestId>,
    ) -> Result<RequestId, StartError> {
        if self.exchanges.len() >= self.config.limits.max_client_exchanges {
            return Err(StartError::TooManyExchanges);
        }
        if params.token.is_some_and(|t| self.tokens.contains_key(&t)) {
            return Err(StartError::TokenInUse);
        }
        // A group request through a proxy (draft-ietf-core-groupcomm-proxy) gets many answers, as a multicast
        // request does: collected for the window, and sent as NON like one.
        let multicast = dst.ip().is_multicast() || request.options.contains(OptionNumber::MULTICAST_TIMEOUT);
        let confirmable = params.confirmable && !multicast;
        let Some(slot) = self.peer_slot(dst) else {
            return Err(StartError::TooManyPeers);
        };
        let nstart = self.params_for(&dst).nstart;
        let peer = self.peers.get_mut(slot);
        if peer.outstanding >= nstart && peer.queue.len() >= self.config.limits.max_queued_per_peer {
            return Err(StartError::QueueFull);
        }
        let token = params.token.unwrap_or_else(|| self.fresh_token());
        let szx = params.block_szx.unwrap_or(self.config.block.szx).min(6);
        let observe = (matches!(request.method, Code::GET | Code::FETCH)
            && request.options.observe() == Some(corral_wire::OBSERVE_REGISTER))
        .then(Freshness::default);
        let mut transfer = None;
        if !multicast && (Transfer::needs_upload(&request, szx) || params.block_szx.is_some()) {
            // RFC 9175 §3.3: concurrent uploads to one peer must be told apart by Request-Tag.
            let concurrent =
                self.exchanges.values().any(|e| e.dst == dst && e.transfer.as_ref().is_some_and(|t| t.is_uploading()));
            let tag = concurrent.then(|| (self.secret.next_u64() as u32).to_be_bytes());
            let (t, first) = Transfer::start(request, szx, self.config.block.max_body, tag, params.block_szx.is_some());
            transfer = Some(Box::new(t));
            request = first;
        }
        let id = RequestId::new(Transport::Udp, self.next_request_id);
        self.next_request_id += 1;
        let mtype = if confirmable { MessageType::Con } else { MessageType::Non };
        let msg = request_message(mtype, token, request);
        let peer = self.peers.get_mut(slot);
        peer.refs += 1;
        peer.client_refs += 1;
        self.tokens.insert(token, id);
        self.exchanges.insert(
            id,
            ClientExchange {
                dst,
                token,
                confirmable,
                multicast,
                counted: false,
                deadline: params.timeout.map(|t| now + t),
                multicast_window: params.multicast_window.unwrap_or(self.config.multicast_window()),
                state: ClientState::Queued,
                msg: Box::new(msg),
                observe,
                transfer,
                parent,
                szx,
            },
        );
        debug!(?id, %dst, %token, "request started");
        self.send_or_queue(now, id);
        Ok(id)
    }

    /// Sends a queued exchange now if NSTART allows, else queues it behind the peer's outstanding ones.
    pub(super) fn send_or_queue(&mut self, now: Instant, id: RequestId) {
        let Some(ex) = self.exchanges.get(&id) else { return };
        let dst = ex.dst;
        let nstart = self.params_for(&dst).nstart;
        let Some(slot) = self.peer_slot(dst) else {
            self.fail_exchange(now, id, RequestError::Timeout);
            return;
        };
        let peer = self.peers.get_mut(slot);
        if peer.outstanding >= nstart {
            peer.queue.push_back(id);
            self.arm_exchange(id);
        } else {
            self.send_queued(now, id);
        }
    }

    /// Sends an empty CON to `dst` (CoAP ping, RFC 7252 §4.3); the answer is [`Event::Pong`].
    pub fn ping(&mut self, now: Instant, dst: SocketAddr) -> Result<RequestId, StartError> {
        let Some(slot) = self.peer_slot(dst) else {
            return Err(StartError::TooManyPeers);
        };
        let id = RequestId::new(Transport::Udp, self.next_request_id);
        self.next_request_id += 1;
        let mid = self.peers.next_mid(slot, self.config.shard);
        let bytes = Message::empty(MessageType::Con, mid).encode();
        self.peers.get_mut(slot).client_refs += 1;
        self.send_reliable(now, dst, mid, Owner::Ping(id), bytes);
        Ok(id)
    }

    /// Abandons a request: no more retransmissions, no event. Responses that arrive later are rejected
    /// (for an observation, the next notification is answered with RST, RFC 7641 §3.6).
    pub fn cancel(&mut self, now: Instant, id: RequestId) {
        if self.exchanges.contains_key(&id) {
            debug!(?id, "request cancelled");
            self.finish_exchange(now, id);
        }
    }

    /// Ends an observation explicitly with a GET carrying Observe=1 and the same token (RFC 7641 §3.6);
    /// its response is the last [`Event::Response`] for `id`. Does nothing for other requests.
    pub fn deregister(&mut self, now: Instant, id: RequestId) {
        self.end_observation(now, id, |msg| {
            msg.options.set_uint(OptionNumber::OBSERVE, u64::from(corral_wire::OBSERVE_DEREGISTER));
            msg.options.remove(OptionNumber::BLOCK2);
        });
    }

    /// Like [`Endpoint::deregister`], with the caller's own deregistration `request` (sent with the
    /// registration's token): an end-to-end protected registration cannot be sent again with another
    /// Observe value, so OSCORE makes a new request (RFC 8613 §4.1.3.5, §7.4: a Partial IV is used once).
    pub fn deregister_with(&mut self, now: Instant, id: RequestId, request: Request) {
        self.end_observation(now, id, |msg| {
            msg.code = request.method;
            msg.options = request.options;
            msg.payload = request.payload;
        });
    }

    fn end_observation(&mut self, now: Instant, id: RequestId, deregistration: impl FnOnce(&mut Message)) {
        let Some(ex) = self.exchanges.get_mut(&id) else { return };
        if !matches!(ex.state, ClientState::Observing) {
            return;
        }
        ex.observe = None;
        ex.state = ClientState::Queued;
        deregistration(&mut ex.msg);
        self.send_or_queue(now, id);
    }

    /// Whether a request is still in progress (for an observation: still observing).
    pub fn is_active(&self, id: RequestId) -> bool {
        self.exchanges.contains_key(&id)
    }

    /// How far request `id`'s block-wise transfer has come; `None` when it is not (or not yet) one.
    pub fn transfer_progress(&self, id: RequestId) -> Option<TransferProgress> {
        self.exchanges.get(&id)?.transfer.as_deref().map(|t| t.progress())
    }

    pub(super) fn fresh_token(&mut self) -> Token {
        let shard = self.config.shard;
        // The shard's index takes bits of the first byte: a byte more keeps the randomness.
        let len = usize::from(self.config.token_len.saturating_add(u8::from(shard.count() > 1)).clamp(1, 8));
        loop {
            let mut b = [0u8; 8];
            self.secret.fill(&mut b[..len]);
            b[0] = shard.claim_token(b[0]);
            let t = Token::new(&b[..len]).unwrap_or(Token::EMPTY);
            if !self.tokens.contains_key(&t) {
                return t;
            }
        }
    }

    /// Sends a queued exchange's message now.
    pub(super) fn send_queued(&mut self, now: Instant, id: RequestId) {
        let Some(ex) = self.exchanges.get(&id) else { return };
        let ClientState::Queued = ex.state else { return };
        let dst = ex.dst;
        let Some(slot) = self.peers.slot_of(&dst) else { return };
        let mid = self.peers.next_mid(slot, self.config.shard);
        self.peers.get_mut(slot).outstanding += 1;
        let ex = self.exchanges.get_mut(&id).expect("exchange exists: checked above");
        ex.counted = true;
        ex.msg.mid = mid;
        let bytes = ex.msg.encode();
        if ex.confirmable {
            ex.state = ClientState::ExpectAck { mid };
            self.send_reliable(now, dst, mid, Owner::Request(id), bytes);
        } else {
            let params = self.params_for(&dst);
            let ex = self.exchanges.get_mut(&id).expect("exchange exists: checked above");
            ex.state = if ex.multicast {
                ClientState::Collecting { mid, until: now + ex.multicast_window }
            } else {
                ClientState::ExpectResponse { mid, until: now + self.config.non_timeout() }
            };
            let fire_and_forget =
                !ex.multicast && ex.msg.options.get_uint(OptionNumber::NO_RESPONSE).is_some_and(|v| v & 26 == 26);
            self.sent.insert((dst, mid), Sent { owner: Owner::Request(id), retransmit: None });
            self.sent_non_expiry.push_back((now + params.non_lifetime(), dst, mid));
            self.transmits.push_back(Transmit { dst, payload: bytes, src: None });
            if fire_and_forget {
                // RFC 7967: a NON request that suppresses every response expects none. The exchange ends
                // as it is sent (no outcome is delivered), so it holds neither NSTART nor a table entry.
                debug!(?id, "NON request with No-Response: done when sent");
                self.finish_exchange(now, id);
                return;
            }
        }
        self.arm_exchange(id);
    }

    /// Sends a CON and tracks it until ACK, RST or give-up. The tracking entry holds a peer reference.
    pub(super) fn send_reliable(
        &mut self,
        now: Instant,
        dst: SocketAddr,
        mid: MessageId,
        owner: Owner,
        bytes: Vec<u8>,
    ) {
        if let Some(slot) = self.peers.slot_of(&dst) {
            self.peers.get_mut(slot).refs += 1;
        }
        let p = self.params_for(&dst);
        let (lo, hi) = (p.ack_timeout.as_micros(), p.max_initial_timeout().as_micros());
        let timeout = Duration::from_micros(self.rng.range_inclusive(lo, hi));
        let next = now + timeout;
        let transmit = Transmit { dst, payload: bytes.clone(), src: None };
        if matches!(owner, Owner::Response | Owner::Notification(_)) {
            self.push_answer(now, transmit);
        } else {
            self.transmits.push_back(transmit);
        }
        self.sent.insert((dst, mid), Sent { owner, retransmit: Some(Retransmit { bytes, count: 0, timeout, next }) });
        self.push_timer(next, Timer::Retransmit(dst, mid));
    }

    pub(super) fn arm_exchange(&mut self, id: RequestId) {
        if let Some(at) = self.exchanges.get(&id).and_then(|e| e.wake_at()) {
            self.push_timer(at, Timer::Exchange(id));
        }
    }

    /// Timers are never removed from the heap when their reason goes away (an ACK arrives, a request
    /// completes); they are skipped when they fire. A busy client would pile up such stale entries for a
    /// whole timeout, so when stale ones clearly dominate, the heap is rebuilt with the live ones only.
    pub(super) fn push_timer(&mut self, at: Instant, timer: Timer) {
        self.timers.push(Reverse((at, timer)));
        let live = self.sent.len() + self.exchanges.len();
        if self.timers.len() > 4096 && self.timers.len() > 4 * live {
            let (sent, exchanges) = (&self.sent, &self.exchanges);
            self.timers.retain(|Reverse((at, t))| match t {
                Timer::Retransmit(dst, mid) => {
                    sent.get(&(*dst, *mid)).and_then(|s| s.retransmit.as_ref()).is_some_and(|r| r.next == *at)
                }
                Timer::Exchange(id) => exchanges.get(id).and_then(|e| e.wake_at()) == Some(*at),
            });
        }
    }

    /// Ends the current round of an exchange at the message layer: its tracked message goes, and it no
    /// longer counts towards NSTART. The token stays mapped.
    pub(super) fn end_round(&mut self, now: Instant, id: RequestId) {
        let Some(ex) = self.exchanges.get_mut(&id) else { return };
        let dst = ex.dst;
        let counted = std::mem::replace(&mut ex.counted, false);
        match ex.state {
            ClientState::ExpectAck { mid } => {
                if self.sent.remove(&(dst, mid)).is_some() {
                    self.peers.release_ref(dst);
                }
            }
            ClientState::ExpectResponse { mid, .. } | ClientState::Collecting { mid, .. } => {
                // A NON's tracking entry (for RST matching) goes with the round.
                if self.sent.get(&(dst, mid)).is_some_and(|s| s.retransmit.is_none()) {
                    self.sent.remove(&(dst, mid));
                }
            }
            ClientState::Queued => {
                if let Some(slot) = self.peers.slot_of(&dst) {
                    self.peers.get_mut(slot).queue.retain(|q| *q != id);
                }
            }
            ClientState::Observing => {}
        }
        if counted {
            self.release_outstanding(now, dst);
        }
    }

    /// Ends an exchange: frees its token, NSTART slot, tracked message and peer reference, and starts the
    /// next queued request to that peer.
    pub(super) fn finish_exchange(&mut self, now: Instant, id: RequestId) {
        self.end_round(now, id);
        let Some(ex) = self.exchanges.remove(&id) else { return };
        self.tokens.remove(&ex.token);
        self.peers.release_client_ref(ex.dst);
    }

    /// Starts the next round of a block-wise transfer: a new message with a new token.
    pub(super) fn next_round(&mut self, now: Instant, id: RequestId, request: Request) {
        self.end_round(now, id);
        let token = self.fresh_token();
        let Some(ex) = self.exchanges.get_mut(&id) else { return };
        let old = std::mem::replace(&mut ex.token, token);
        ex.state = ClientState::Queued;
        *ex.msg = request_message(ex.msg.mtype, token, request);
        self.tokens.remove(&old);
        self.tokens.insert(token, id);
        self.send_or_queue(now, id);
    }

    /// One outstanding interaction with `dst` ended: start the next queued request, if any.
    pub(super) fn release_outstanding(&mut self, now: Instant, dst: SocketAddr) {
        let Some(slot) = self.peers.slot_of(&dst) else { return };
        let peer = self.peers.get_mut(slot);
        peer.outstanding = peer.outstanding.saturating_sub(1);
        if let Some(next) = peer.queue.pop_front() {
            self.send_queued(now, next);
        }
    }

    /// Marks an exchange as no longer outstanding for NSTART (its CON was acknowledged).
    pub(super) fn uncount(&mut self, now: Instant, id: RequestId) {
        if let Some(ex) = self.exchanges.get_mut(&id) {
            if ex.counted {
                ex.counted = false;
                let dst = ex.dst;
                self.release_outstanding(now, dst);
            }
        }
    }

    /// Ends an exchange with an error, reported to the application (or, for the block fetch of a
    /// notification, only logged: the observation goes on).
    pub(super) fn fail_exchange(&mut self, now: Instant, id: RequestId, error: RequestError) {
        let Some(ex) = self.exchanges.get(&id) else { return };
        let parent = ex.parent;
        let error = Transfer::failure(ex.transfer.as_deref(), error);
        self.finish_exchange(now, id);
        match parent {
            Some(p) => info!(?p, %error, "could not fetch the rest of a block-wise notification"),
            None => self.events.push_back(Event::Failed { id, error }),
        }
    }

    /// A response for exchange `id` arrived (piggybacked or separate; already matched by token and peer).
    pub(super) fn on_client_response(&mut self, now: Instant, id: RequestId, from: SocketAddr, response: Response) {
        let Some(ex) = self.exchanges.get_mut(&id) else { return };
        self.stats.responses_in += 1;
        // RFC 9175 §2.4: a server that wants proof of our address answers 4.01 with an Echo value; the
        // request goes again, once, with that value (and a new token, as every round).
        if response.code == Code::UNAUTHORIZED
            && !ex.dst.ip().is_multicast()
            && !ex.msg.options.contains(OptionNumber::ECHO)
        {
            if let Some(echo) = response.options.get(OptionNumber::ECHO) {
                debug!(?id, %from, "4.01 with Echo: repeating the request with it");
                // A block-wise upload goes again from its first block, not as its last block alone.
                let upload = ex.transfer.as_deref_mut().and_then(|t| t.restart_upload(OptionNumber::ECHO, echo));
                let request = upload.unwrap_or_else(|| {
                    let mut r = Request {
                        method: ex.msg.code,
                        options: ex.msg.options.clone(),
                        payload: ex.msg.payload.clone(),
                    };
                    r.options.set(OptionNumber::ECHO, echo);
                    r
                });
                self.next_round(now, id, request);
                return;
            }
        }
        let notification_seq =
            ex.observe.as_ref().and(response.options.observe()).filter(|_| response.code.is_success() && !ex.multicast);
        if let Some(seq) = notification_seq {
            let fresh = ex.observe.as_mut().is_some_and(|f| f.accept(seq, now));
            if !matches!(ex.state, ClientState::Observing) {
                // The registration succeeded: the exchange now waits for notifications.
                self.end_round(now, id);
                if let Some(ex) = self.exchanges.get_mut(&id) {
                    ex.state = ClientState::Observing;
                }
            }
            if !fresh {
                self.stats.stale_notifications += 1;
                debug!(?id, seq, "dropping a notification older than the last one (RFC 7641 §3.4)");
                return;
            }
            if response.options.block2().is_some_and(|b| b.more) {
                self.fetch_notification_rest(now, id, response);
                return;
            }
            self.events.push_back(Event::Response { id, from, response });
            return;
        }
        let block_more = response.options.block2().is_some_and(|b| b.more);
        let ex = self.exchanges.get_mut(&id).expect("exchange exists: checked above");
        let mut response = response;
        if ex.transfer.is_some() || block_more {
            let (max_body, szx) = (self.config.block.max_body, ex.szx);
            let step = match ex.transfer.as_mut() {
                Some(t) => t.on_response(response),
                None => {
                    let request = Request {
                        method: ex.msg.code,
                        options: ex.msg.options.clone(),
                        payload: ex.msg.payload.clone(),
                    };
                    let (t, step) = Transfer::from_first_response(request, szx, max_body, response);
                    ex.transfer = Some(Box::new(t));
                    step
                }
            };
            match step {
                Step::Send(next) => {
                    self.next_round(now, id, next);
                    return;
                }
                Step::Fail(e) => {
                    info!(?id, %e, "block-wise transfer failed");
                    self.fail_exchange(now, id, e);
                    return;
                }
                Step::Done(full) => response = full,
            }
        }
        if ex.multicast {
            self.events.push_back(Event::Response { id, from, response });
            return;
        }
        let parent = ex.parent;
        self.finish_exchange(now, id);
        match parent {
            Some(p) if self.exchanges.contains_key(&p) => {
                self.events.push_back(Event::Response { id: p, from, response })
            }
            Some(_) => {}
            None => self.events.push_back(Event::Response { id, from, response }),
        }
    }

    /// A notification carried only block 0 (RFC 7641 §4.5, RFC 7959 §2.6): fetch the rest with a GET
    /// without Observe, and report the whole representation as the notification.
    pub(super) fn fetch_notification_rest(&mut self, now: Instant, parent: RequestId, block0: Response) {
        let Some(ex) = self.exchanges.get(&parent) else { return };
        let request = Request { method: ex.msg.code, options: ex.msg.options.clone(), payload: ex.msg.payload.clone() };
        let (dst, confirmable, szx) = (ex.dst, ex.confirmable, ex.szx);
        let (transfer, step) = Transfer::for_notification(request, szx, self.config.block.max_body, block0);
        let Step::Send(next) = step else { return };
        let params = SendParams { confirmable, ..SendParams::default() };
        match self.start_exchange(now, dst, next, params, Some(parent)) {
            Ok(sub) => {
                if let Some(e) = self.exchanges.get_mut(&sub) {
                    e.transfer = Some(Box::new(transfer));
                }
            }
            Err(e) => info!(?parent, %e, "cannot fetch the rest of a block-wise notification"),
        }
    }
}
