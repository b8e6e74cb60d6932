//! A CoAP-over-TCP connection (RFC 8323 §3–§5): its life cycle, its byte stream cut into frames, its
//! signalling (CSM, Ping/Pong, Release, Abort) and its timers. Requests and responses it carries are
//! handed to `exchange`. Must never: read a clock or open a socket (the driver reports connections and
//! bytes).

use super::{Conn, ConnId, Exchange, TcpEndpoint, TcpTransmit};
use crate::endpoint::Event;
use crate::message::{Request, RequestError, RequestId, SendParams, StartError, Transport};
use crate::time::Instant;
use corral_wire::tcp::{signal, FrameDecoder, TcpMessage};
use corral_wire::{Code, Token};
use std::cmp::Reverse;
use std::net::SocketAddr;
use tracing::{debug, info, trace, warn};

impl TcpEndpoint {
    // ---------------------------------------------------------------------------------------------
    // Connection life cycle
    // ---------------------------------------------------------------------------------------------

    /// A connection was established (either side initiated it). This side's CSM goes out at once; the
    /// initiator does not wait for the peer's before sending requests (RFC 8323 §5.3).
    pub fn handle_connected(&mut self, now: Instant, conn: ConnId, peer: SocketAddr) {
        let outgoing = self.connecting.contains_key(&peer);
        if !outgoing && !self.make_room(peer) {
            warn!(%peer, "too many connections, none idle; refusing");
            self.abort(conn, "too many connections");
            return;
        }
        self.conns.insert(
            conn,
            Conn {
                peer,
                decoder: FrameDecoder::new(self.config.max_message_size),
                peer_mms: signal::BASE_MAX_MESSAGE_SIZE,
                peer_block_wise: false,
                got_csm: false,
                closing: false,
                outgoing,
                requests: 0,
                last_active: now,
            },
        );
        self.conn_timers.push(Reverse((now + self.config.csm_timeout, conn)));
        let mut csm = TcpMessage::new(Code::CSM, Token::EMPTY);
        csm.options.push_uint(signal::MAX_MESSAGE_SIZE, self.config.max_message_size as u64);
        csm.options.push(signal::BLOCK_WISE_TRANSFER, &[]);
        self.send(conn, &csm);
        debug!(?conn, %peer, "connection established");
        if let Some(ids) = self.connecting.remove(&peer) {
            self.to_server.insert(peer, conn);
            for id in ids {
                let Some(w) = self.waiting.remove(&id) else { continue };
                let timeout = w.deadline.saturating_since(now);
                let params = SendParams { timeout: Some(timeout), ..w.params };
                if let Err(e) = self.start_as(id, now, conn, w.request, params, None) {
                    debug!(?id, error = %e, "request could not start on its new connection");
                    self.events.push_back(Event::Failed { id, error: RequestError::ConnectionClosed });
                }
            }
        }
    }

    /// Makes room for a new connection from `peer` if its address or the table is full, by aborting the
    /// accepted connection least worth keeping (see the module docs); `false` if none may go.
    pub(super) fn make_room(&mut self, peer: SocketAddr) -> bool {
        let per_address = self.config.max_connections_per_address.max(1);
        let same = |c: &Conn| c.peer.ip() == peer.ip();
        if self.conns.values().filter(|c| same(c) && !c.closing).count() >= per_address
            && !self.evict_one(|c| c.peer.ip() == peer.ip())
        {
            return false;
        }
        self.conns.values().filter(|c| !c.closing).count() < self.config.max_connections.max(1)
            || self.evict_one(|_| true)
    }

    /// Aborts the least worthy accepted connection `which` accepts: no CSM yet, then no request ever, then
    /// the longest idle — never one with requests or observations in progress, never one this endpoint
    /// made. `false` if there is none.
    pub(super) fn evict_one(&mut self, which: impl Fn(&Conn) -> bool) -> bool {
        let busy: std::collections::HashSet<ConnId> =
            self.inbound.values().map(|i| i.conn).chain(self.exchanges.values().map(|e| e.conn)).collect();
        let observed = |c: &Conn| self.server.observers.has_peer(c.peer);
        let victim = self
            .conns
            .iter()
            .filter(|(id, c)| which(c) && !c.closing && !c.outgoing && !busy.contains(id) && !observed(c))
            .min_by_key(|(id, c)| (c.got_csm, c.requests > 0, c.last_active, **id))
            .map(|(id, c)| (*id, c.peer));
        let Some((victim, addr)) = victim else { return false };
        debug!(conn = ?victim, peer = %addr, "connection table full: aborting an idle connection for a new one");
        self.abort(victim, "too many connections: idle connection closed");
        true
    }

    /// The connection to `dst` that `poll_connect` asked for cannot be made: the requests waiting for it
    /// fail with [`RequestError::ConnectionClosed`].
    pub fn handle_connect_failed(&mut self, _now: Instant, dst: SocketAddr) {
        let mut ids = self.connecting.remove(&dst).unwrap_or_default();
        ids.sort();
        for id in ids {
            if self.waiting.remove(&id).is_some() {
                self.events.push_back(Event::Failed { id, error: RequestError::ConnectionClosed });
            }
        }
    }

    /// The connection is gone (closed by either side, or broken): its requests fail, its observations and
    /// pending exchanges end.
    pub fn handle_closed(&mut self, now: Instant, conn: ConnId) {
        let Some(c) = self.conns.remove(&conn) else { return };
        self.to_server.retain(|_, c| *c != conn);
        let ids: Vec<RequestId> = self.exchanges.iter().filter(|(_, e)| e.conn == conn).map(|(id, _)| *id).collect();
        let mut failed: Vec<RequestId> = Vec::new();
        for id in ids {
            if let Some(e) = self.exchanges.remove(&id) {
                self.tokens.remove(&(conn, e.token));
                if e.parent.is_none() {
                    failed.push(id);
                }
            }
        }
        failed.sort();
        for id in failed {
            self.events.push_back(Event::Failed { id, error: RequestError::ConnectionClosed });
        }
        self.inbound.retain(|_, i| i.conn != conn);
        let lost = self.server.observers.remove_peer(c.peer);
        debug!(?conn, peer = %c.peer, observers = lost, "connection closed");
        let _ = now;
    }

    /// Ends a connection gracefully: Release (RFC 8323 §5.5), then close.
    pub fn release(&mut self, conn: ConnId) {
        if self.conns.contains_key(&conn) {
            self.send(conn, &TcpMessage::new(Code::RELEASE, Token::EMPTY));
            self.close(conn);
        }
    }

    pub(super) fn abort(&mut self, conn: ConnId, why: &str) {
        let mut m = TcpMessage::new(Code::ABORT, Token::EMPTY);
        m.payload = why.as_bytes().to_vec();
        self.transmits.push_back(TcpTransmit { conn, bytes: m.encode() });
        self.close(conn);
    }

    pub(super) fn close(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.get_mut(&conn) {
            if c.closing {
                return;
            }
            c.closing = true;
        }
        self.closes.push_back(conn);
    }

    pub(super) fn send(&mut self, conn: ConnId, msg: &TcpMessage) {
        self.transmits.push_back(TcpTransmit { conn, bytes: msg.encode() });
    }

    // ---------------------------------------------------------------------------------------------
    // Input
    // ---------------------------------------------------------------------------------------------

    /// Bytes arrived on `conn`.
    pub fn handle_data(&mut self, now: Instant, conn: ConnId, mut data: &[u8]) {
        loop {
            let Some(c) = self.conns.get_mut(&conn) else { return };
            if c.closing {
                return;
            }
            c.last_active = now;
            let taken = c.decoder.feed(data);
            data = &data[taken..];
            loop {
                let Some(c) = self.conns.get_mut(&conn) else { return };
                let msg = match c.decoder.next_frame() {
                    Ok(Some(frame)) => frame.to_owned(),
                    Ok(None) => break,
                    Err(e) => {
                        warn!(?conn, error = %e, "malformed or oversized frame; aborting the connection");
                        self.abort(conn, &format!("{e}"));
                        return;
                    }
                };
                self.on_message(now, conn, msg);
            }
            if data.is_empty() {
                return;
            }
        }
    }

    pub(super) fn on_message(&mut self, now: Instant, conn: ConnId, msg: TcpMessage) {
        let Some(c) = self.conns.get(&conn) else { return };
        trace!(?conn, code = %msg.code, "frame");
        if !c.got_csm && msg.code != Code::CSM {
            self.abort(conn, "the first message must be a CSM (RFC 8323 §5.3)");
            return;
        }
        let code = msg.code;
        if code.is_signal() {
            self.on_signal(now, conn, msg);
        } else if code.is_empty() {
            // RFC 8323 §3.4: an Empty message is a keep-alive and is ignored.
        } else if code.is_request() {
            self.on_request(now, conn, msg);
        } else if code.is_response() {
            self.on_response(now, conn, msg);
        } else {
            self.abort(conn, &format!("reserved code {code}"));
        }
    }

    pub(super) fn on_signal(&mut self, now: Instant, conn: ConnId, msg: TcpMessage) {
        match msg.code {
            Code::CSM => {
                for (n, v) in msg.options.iter() {
                    match n {
                        signal::MAX_MESSAGE_SIZE => {
                            let mms = corral_wire::decode_uint(v).unwrap_or(1152) as usize;
                            if let Some(c) = self.conns.get_mut(&conn) {
                                c.peer_mms = mms.max(64);
                            }
                        }
                        signal::BLOCK_WISE_TRANSFER => {
                            if let Some(c) = self.conns.get_mut(&conn) {
                                c.peer_block_wise = true;
                            }
                        }
                        n if n.is_critical() => {
                            // RFC 8323 §5.3: an unknown critical CSM option aborts, naming it.
                            let mut a = TcpMessage::new(Code::ABORT, Token::EMPTY);
                            a.options.push_uint(signal::BAD_CSM_OPTION, u64::from(n.0));
                            a.payload = format!("unsupported critical CSM option {}", n.0).into_bytes();
                            self.send(conn, &a);
                            self.close(conn);
                            return;
                        }
                        _ => {}
                    }
                }
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.got_csm = true;
                    debug!(?conn, mms = c.peer_mms, block_wise = c.peer_block_wise, "peer CSM");
                }
                self.conn_timers.push(Reverse((now + self.config.idle_timeout, conn)));
            }
            Code::PING => {
                let mut pong = TcpMessage::new(Code::PONG, msg.token);
                if let Some(custody) = msg.options.get(signal::CUSTODY) {
                    pong.options.push(signal::CUSTODY, custody);
                }
                self.send(conn, &pong);
            }
            Code::PONG => {
                if let Some(id) = self.tokens.remove(&(conn, msg.token)) {
                    if let Some(ex) = self.exchanges.remove(&id) {
                        let from = self.conns.get(&conn).map(|c| c.peer);
                        if let (true, Some(from)) = (ex.ping, from) {
                            self.events.push_back(Event::Pong { id, from });
                        }
                    }
                }
            }
            Code::RELEASE => {
                info!(?conn, "peer released the connection");
                self.close(conn);
            }
            Code::ABORT => {
                info!(?conn, why = %String::from_utf8_lossy(&msg.payload), "peer aborted the connection");
                self.close(conn);
                self.handle_closed(now, conn);
            }
            other => self.abort(conn, &format!("unknown signal {other}")),
        }
    }

    /// Sends a Ping (RFC 8323 §5.4); the Pong arrives as [`Event::Pong`].
    pub fn ping(&mut self, now: Instant, conn: ConnId) -> Result<RequestId, StartError> {
        if !self.conns.contains_key(&conn) {
            return Err(StartError::TooManyPeers);
        }
        let token = self.fresh_token(conn);
        let id = RequestId::new(Transport::Tcp, self.next_request_id);
        self.next_request_id += 1;
        self.send(conn, &TcpMessage::new(Code::PING, token));
        self.tokens.insert((conn, token), id);
        let deadline = now + self.config.request_timeout;
        self.exchanges.insert(
            id,
            Exchange {
                conn,
                token,
                deadline: Some(deadline),
                request: Request::new(Code::EMPTY),
                observe: false,
                observing: false,
                transfer: None,
                parent: None,
                szx: 6,
                ping: true,
            },
        );
        self.push_timer(deadline, id);
        Ok(id)
    }

    /// A connection's deadline came: abort it if its CSM is still missing, release it if it has been idle
    /// for the idle timeout with nothing in progress, else look again when it could next be idle.
    pub(super) fn check_conn(&mut self, now: Instant, conn: ConnId) {
        let Some(c) = self.conns.get(&conn) else { return };
        if c.closing {
            return;
        }
        if !c.got_csm {
            info!(?conn, peer = %c.peer, "no CSM in time; aborting the connection");
            self.abort(conn, "no CSM within the CSM timeout (RFC 8323 §5.3)");
            return;
        }
        let idle_until = c.last_active + self.config.idle_timeout;
        let busy = self.inbound.values().any(|i| i.conn == conn)
            || self.exchanges.values().any(|e| e.conn == conn)
            || self.server.observers.has_peer(c.peer);
        if idle_until <= now && !busy {
            debug!(?conn, peer = %c.peer, "connection idle; releasing it");
            self.release(conn);
        } else {
            let next = if idle_until > now { idle_until } else { now + self.config.idle_timeout };
            self.conn_timers.push(Reverse((next, conn)));
        }
    }
}
