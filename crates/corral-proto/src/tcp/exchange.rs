//! Requests and responses on CoAP-over-TCP connections (RFC 8323 §7): the server side (requests in,
//! responses and notifications out, observers) and the client side (requests out on a connection this
//! endpoint holds or asks the driver for, block-wise and Observe, deadlines). The frames come from and
//! go to `conn`. Must never: read a clock or open a socket.

use super::{ConnId, Exchange, Inbound, TcpEndpoint, Waiting};
use crate::endpoint::block::{Step, Transfer};
use crate::endpoint::server::{Incoming, RequestMeta};
use crate::endpoint::Event;
use crate::message::{
    InboundId, IncomingRequest, Request, RequestError, RequestId, Response, SendParams, StartError, Transport,
    UnknownExchange,
};
use crate::rng::SecretRng;
use crate::time::Instant;
use corral_wire::tcp::TcpMessage;
use corral_wire::{Code, OptionNumber, Token};
use std::cmp::Reverse;
use std::net::SocketAddr;
use tracing::debug;

impl TcpEndpoint {
    pub(super) fn on_request(&mut self, now: Instant, conn: ConnId, msg: TcpMessage) {
        let Some(c) = self.conns.get_mut(&conn) else { return };
        c.requests += 1;
        let peer = c.peer;
        let token = msg.token;
        let error = crate::endpoint::server::refuse_request(
            msg.code,
            msg.options.iter(),
            &self.config.extra_known_options,
            true,
        );
        if let Some(r) = error {
            self.send_response(conn, token, r);
            return;
        }
        let cfg = self.config.block;
        let (request, meta) = match self.server.on_request(
            now,
            &cfg,
            self.config.request_timeout,
            peer,
            token,
            msg.code,
            msg.options.iter(),
            &msg.payload,
            false,
            true, // a TCP peer completed the handshake: its address is proved
        ) {
            Incoming::Reply(r) => {
                self.send_response(conn, token, r);
                return;
            }
            Incoming::Challenge => unreachable!("only unverified sources are challenged"),
            Incoming::Deliver(request, meta) => (request, meta),
        };
        if self.inbound.len() >= self.config.max_inbound_exchanges {
            let r = Response::error(Code::SERVICE_UNAVAILABLE, "too many requests in progress").with_max_age(2);
            self.send_response(conn, token, r);
            return;
        }
        let id = InboundId::new(Transport::Tcp, self.next_inbound_id);
        self.next_inbound_id += 1;
        self.inbound.insert(id, Inbound { conn, peer, token, notification: false, meta });
        self.events.push_back(Event::Request(IncomingRequest {
            id,
            from: peer,
            multicast: false,
            confirmable: true,
            token,
            request,
            notification: false,
            verified: true,
            echoed: true,
            peer_identity: None,
            oscore_identity: None,
        }));
    }

    pub(super) fn send_response(&mut self, conn: ConnId, token: Token, r: Response) {
        let m = TcpMessage { code: r.code, token, options: r.options, payload: r.payload };
        self.send(conn, &m);
    }

    /// The largest payload that fits the peer's Max-Message-Size with room for the header and options.
    pub(super) fn unblocked_limit(&self, conn: ConnId) -> usize {
        self.conns.get(&conn).map_or(0, |c| c.peer_mms.saturating_sub(128))
    }

    // ---------------------------------------------------------------------------------------------
    // Server API
    // ---------------------------------------------------------------------------------------------

    /// See [`crate::Endpoint::retarget_observation`].
    pub fn retarget_observation(&mut self, id: InboundId, inner: &Request) {
        if let Some(reg) = self.inbound.get_mut(&id).and_then(|inb| inb.meta.observe.as_mut()) {
            **reg = (inner.resource_id(), inner.clone());
        }
    }

    /// Answers a received request. Registers observers and cuts large bodies as the UDP endpoint does.
    pub fn respond(&mut self, now: Instant, id: InboundId, response: Response) -> Result<(), UnknownExchange> {
        let inb = self.inbound.remove(&id).ok_or(UnknownExchange)?;
        if !self.conns.contains_key(&inb.conn) {
            return Ok(()); // the connection went away meanwhile
        }
        let limit = self.unblocked_limit(inb.conn);
        let (block, policy) = (self.config.block, self.config.observe);
        if inb.notification {
            let key = (inb.peer, inb.token);
            let Some((r, last)) = self.server.on_notification(now, &block, key, inb.meta.key, false, response, limit)
            else {
                return Ok(());
            };
            self.send_response(inb.conn, inb.token, r);
            if last {
                self.server.observers.remove(&key);
            }
            return Ok(());
        }
        let r = self.server.on_response(
            now,
            &block,
            &policy,
            &mut self.rng,
            (inb.peer, inb.token),
            inb.meta,
            response,
            limit,
            true,
        );
        // `None` only for unverified sources (an Echo challenge); TCP peers are verified.
        if let Some(r) = r {
            self.send_response(inb.conn, inb.token, r);
        }
        Ok(())
    }

    /// Ends a received request without a response (see [`crate::Endpoint::discard`]).
    pub fn discard(&mut self, id: InboundId) -> Result<(), UnknownExchange> {
        self.inbound.remove(&id).map(|_| ()).ok_or(UnknownExchange)
    }

    /// The resource at `path` changed: one request per observer over TCP, to be rendered and answered with
    /// [`TcpEndpoint::respond`]; each answer goes out as a notification.
    #[must_use = "each request must be rendered and answered, or its observer gets no notification"]
    pub fn notify(&mut self, _now: Instant, path: &str) -> Vec<IncomingRequest> {
        let mut out = Vec::new();
        for key in self.server.observers.keys_for(path) {
            let Some(conn) = self.conns.iter().find(|(_, c)| c.peer == key.0 && !c.closing).map(|(id, _)| *id) else {
                self.server.observers.remove(&key);
                continue;
            };
            let Some(o) = self.server.observers.get(&key) else { continue };
            let request = o.request.clone();
            let id = InboundId::new(Transport::Tcp, self.next_inbound_id);
            self.next_inbound_id += 1;
            let meta = RequestMeta { key: self.server.key_of(&request), ..RequestMeta::default() };
            self.inbound.insert(id, Inbound { conn, peer: key.0, token: key.1, notification: true, meta });
            out.push(IncomingRequest {
                id,
                from: key.0,
                multicast: false,
                confirmable: true,
                token: key.1,
                request,
                notification: true,
                verified: true,
                echoed: false,
                peer_identity: None,
                oscore_identity: None,
            });
        }
        out
    }

    pub fn observer_count(&self, path: &str) -> usize {
        self.server.observers.count_for(path)
    }

    /// Forgets every observer of `path` without telling them (see [`crate::Endpoint::drop_observers`]).
    pub fn drop_observers(&mut self, path: &str) -> usize {
        self.server.observers.remove_path(path)
    }

    // ---------------------------------------------------------------------------------------------
    // Client API
    // ---------------------------------------------------------------------------------------------

    /// Sends a request on `conn`. Outcomes arrive as events, as for the UDP endpoint (Observe and
    /// block-wise included); `params.timeout` overrides the configured request timeout.
    pub fn request(
        &mut self,
        now: Instant,
        conn: ConnId,
        request: Request,
        params: SendParams,
    ) -> Result<RequestId, StartError> {
        self.start(now, conn, request, params, None)
    }

    /// Sends a request to the server at `dst` over the connection this endpoint has to it, or — if it has
    /// none — asks the driver for one (`poll_connect`) and sends the request once it is up. The request's
    /// timeout runs from now, connecting included.
    pub fn request_to(
        &mut self,
        now: Instant,
        dst: SocketAddr,
        request: Request,
        params: SendParams,
    ) -> Result<RequestId, StartError> {
        let known = self.to_server.get(&dst).copied().filter(|c| self.conns.get(c).is_some_and(|c| !c.closing));
        // Any open connection with that peer will do (RFC 8323: either side may send requests).
        let known = known.or_else(|| self.conns.iter().find(|(_, c)| c.peer == dst && !c.closing).map(|(id, _)| *id));
        if let Some(conn) = known {
            self.to_server.insert(dst, conn);
            return self.start(now, conn, request, params, None);
        }
        if self.exchanges.len() + self.waiting.len() >= self.config.max_client_exchanges {
            return Err(StartError::TooManyExchanges);
        }
        let id = RequestId::new(Transport::Tcp, self.next_request_id);
        self.next_request_id += 1;
        let deadline = now + params.timeout.unwrap_or(self.config.request_timeout);
        self.waiting.insert(id, Waiting { dst, request, params, deadline });
        self.push_timer(deadline, id);
        let queue = self.connecting.entry(dst).or_default();
        if queue.is_empty() {
            debug!(%dst, "connecting to a server");
            self.connects.push_back(dst);
        }
        queue.push(id);
        Ok(id)
    }

    pub(super) fn start(
        &mut self,
        now: Instant,
        conn: ConnId,
        request: Request,
        params: SendParams,
        parent: Option<RequestId>,
    ) -> Result<RequestId, StartError> {
        let id = RequestId::new(Transport::Tcp, self.next_request_id);
        self.next_request_id += 1;
        self.start_as(id, now, conn, request, params, parent)?;
        Ok(id)
    }

    pub(super) fn start_as(
        &mut self,
        id: RequestId,
        now: Instant,
        conn: ConnId,
        mut request: Request,
        params: SendParams,
        parent: Option<RequestId>,
    ) -> Result<(), StartError> {
        if self.exchanges.len() >= self.config.max_client_exchanges {
            return Err(StartError::TooManyExchanges);
        }
        let Some(c) = self.conns.get(&conn) else { return Err(StartError::TooManyPeers) };
        let peer_mms = c.peer_mms;
        if params.token.is_some_and(|t| self.tokens.contains_key(&(conn, t))) {
            return Err(StartError::TokenInUse);
        }
        let token = params.token.unwrap_or_else(|| self.fresh_token(conn));
        // Blocks must fit the peer's Max-Message-Size (1152 until its CSM arrives).
        let fit = corral_wire::BlockValue::szx_for_size(peer_mms.saturating_sub(128)).min(6);
        let szx = params.block_szx.unwrap_or(self.config.block.szx).min(fit);
        let observe = matches!(request.method, Code::GET | Code::FETCH)
            && request.options.observe() == Some(corral_wire::OBSERVE_REGISTER);
        let mut transfer = None;
        let too_big = request.payload.len() + 256 > peer_mms;
        if too_big || params.block_szx.is_some() {
            let (t, first) =
                Transfer::start(request, szx, self.config.block.max_body, None, params.block_szx.is_some());
            transfer = Some(Box::new(t));
            request = first;
        }
        let deadline = now + params.timeout.unwrap_or(self.config.request_timeout);
        self.tokens.insert((conn, token), id);
        self.send(
            conn,
            &TcpMessage {
                code: request.method,
                token,
                options: request.options.clone(),
                payload: request.payload.clone(),
            },
        );
        self.exchanges.insert(
            id,
            Exchange {
                conn,
                token,
                deadline: Some(deadline),
                request,
                observe,
                observing: false,
                transfer,
                parent,
                szx,
                ping: false,
            },
        );
        self.push_timer(deadline, id);
        Ok(())
    }

    /// Abandons a request without telling the peer (for an observation prefer [`TcpEndpoint::deregister`]:
    /// over TCP there is no RST to reject the next notification with).
    pub fn cancel(&mut self, _now: Instant, id: RequestId) {
        if let Some(e) = self.exchanges.remove(&id) {
            self.tokens.remove(&(e.conn, e.token));
        }
        if let Some(w) = self.waiting.remove(&id) {
            if let Some(q) = self.connecting.get_mut(&w.dst) {
                q.retain(|i| *i != id);
            }
        }
    }

    /// Ends an observation with a GET carrying Observe=1 (RFC 8323 §7.2 requires explicit cancellation).
    pub fn deregister(&mut self, now: Instant, id: RequestId) {
        self.end_observation(now, id, |request| {
            request.options.set_uint(OptionNumber::OBSERVE, u64::from(corral_wire::OBSERVE_DEREGISTER));
            request.options.remove(OptionNumber::BLOCK2);
        });
    }

    /// Like [`TcpEndpoint::deregister`], with the caller's own deregistration `request` (see
    /// [`crate::Endpoint::deregister_with`]).
    pub fn deregister_with(&mut self, now: Instant, id: RequestId, request: Request) {
        self.end_observation(now, id, |r| *r = request);
    }

    pub(super) fn end_observation(&mut self, now: Instant, id: RequestId, deregistration: impl FnOnce(&mut Request)) {
        let Some(e) = self.exchanges.get_mut(&id) else { return };
        if !e.observing {
            return;
        }
        e.observing = false;
        e.observe = false;
        deregistration(&mut e.request);
        let deadline = now + self.config.request_timeout;
        e.deadline = Some(deadline);
        let m = TcpMessage {
            code: e.request.method,
            token: e.token,
            options: e.request.options.clone(),
            payload: e.request.payload.clone(),
        };
        let conn = e.conn;
        self.push_timer(deadline, id);
        self.send(conn, &m);
    }

    pub fn is_active(&self, id: RequestId) -> bool {
        self.exchanges.contains_key(&id) || self.waiting.contains_key(&id)
    }

    pub(super) fn fresh_token(&mut self, conn: ConnId) -> Token {
        let len = usize::from(self.config.token_len.clamp(1, 8));
        loop {
            let mut b = [0u8; 8];
            let (key, seed) = (self.config.secret_seed, self.config.seed ^ 0x7c9);
            self.secret.get_or_insert_with(|| Box::new(SecretRng::keyed(key, seed, 1))).fill(&mut b[..len]);
            let t = Token::new(&b[..len]).unwrap_or(Token::EMPTY);
            if !self.tokens.contains_key(&(conn, t)) {
                return t;
            }
        }
    }

    pub(super) fn on_response(&mut self, now: Instant, conn: ConnId, msg: TcpMessage) {
        let Some(&id) = self.tokens.get(&(conn, msg.token)) else {
            debug!(?conn, token = %msg.token, "response for no request; ignoring (TCP has no RST)");
            return;
        };
        let from = match self.conns.get(&conn) {
            Some(c) => c.peer,
            None => return,
        };
        let response = Response { code: msg.code, options: msg.options, payload: msg.payload };
        let Some(ex) = self.exchanges.get_mut(&id) else { return };
        if ex.observe && response.code.is_success() && response.options.observe().is_some() {
            ex.observing = true;
            ex.deadline = None;
            if response.options.block2().is_some_and(|b| b.more) {
                let mut request = ex.request.clone();
                request.options.remove(OptionNumber::OBSERVE);
                let (t, step) = Transfer::for_notification(request, ex.szx, self.config.block.max_body, response);
                if let Step::Send(next) = step {
                    if let Ok(sub) = self.start(now, conn, next, SendParams::default(), Some(id)) {
                        if let Some(e) = self.exchanges.get_mut(&sub) {
                            e.transfer = Some(Box::new(t));
                        }
                    }
                }
                return;
            }
            self.events.push_back(Event::Response { id, from, response });
            return;
        }
        let mut response = response;
        let block_more = response.options.block2().is_some_and(|b| b.more);
        if ex.transfer.is_some() || block_more {
            let (max_body, szx) = (self.config.block.max_body, ex.szx);
            let step = match ex.transfer.as_mut() {
                Some(t) => t.on_response(response),
                None => {
                    let (t, step) = Transfer::from_first_response(ex.request.clone(), szx, max_body, response);
                    ex.transfer = Some(Box::new(t));
                    step
                }
            };
            match step {
                Step::Send(next) => {
                    let old = ex.token;
                    let token = self.fresh_token(conn);
                    let Some(ex) = self.exchanges.get_mut(&id) else { return };
                    ex.token = token;
                    ex.request = next.clone();
                    self.tokens.remove(&(conn, old));
                    self.tokens.insert((conn, token), id);
                    self.send(
                        conn,
                        &TcpMessage { code: next.method, token, options: next.options, payload: next.payload },
                    );
                    return;
                }
                Step::Fail(e) => {
                    self.finish(id, Some(e), None, from);
                    return;
                }
                Step::Done(full) => response = full,
            }
        }
        self.finish(id, None, Some(response), from);
    }

    /// Ends exchange `id` with a response or an error, reporting to it or to the observation it serves.
    pub(super) fn finish(
        &mut self,
        id: RequestId,
        error: Option<RequestError>,
        response: Option<Response>,
        from: SocketAddr,
    ) {
        let Some(ex) = self.exchanges.remove(&id) else { return };
        self.tokens.remove(&(ex.conn, ex.token));
        let report = match ex.parent {
            Some(p) if self.exchanges.contains_key(&p) => p,
            Some(_) => return,
            None => id,
        };
        match (response, error) {
            (Some(response), _) => self.events.push_back(Event::Response { id: report, from, response }),
            (None, Some(error)) if ex.parent.is_none() => self.events.push_back(Event::Failed { id, error }),
            _ => {}
        }
    }

    /// Request deadlines stay in the heap after their request completes and are skipped when they fire;
    /// when such stale entries clearly dominate, the heap is rebuilt with the live ones.
    pub(super) fn push_timer(&mut self, at: Instant, id: RequestId) {
        self.timers.push(Reverse((at, id)));
        if self.timers.len() > 4096 && self.timers.len() > 4 * (self.exchanges.len() + self.waiting.len()) {
            let exchanges = &self.exchanges;
            let waiting = &self.waiting;
            self.timers.retain(|Reverse((at, id))| {
                exchanges.get(id).is_some_and(|e| e.deadline == Some(*at)) || waiting.contains_key(id)
            });
        }
    }
}
