//! The server's request and response processing above the transport, shared by the UDP endpoint and the
//! TCP endpoint: Observe registration and deregistration, Block1 assembly, Block2 follow-ups served from
//! the rendered body, and cutting large responses into blocks.
//!
//! This module decides *what* to answer; the transport decides *how* it travels (ACK, CON, NON, frame).

use super::block::{self, Assemblies, Block1Step, BodyCache};
use super::observe::{ObservePolicy, ObserverKey, Observers, Refused};
use super::BlockConfig;
use crate::message::{Request, Response};
use crate::rng::Rng;
use crate::time::{Duration, Instant};
use corral_wire::{BlockValue, Code, OptionNumber, Options, Token};
use std::net::SocketAddr;
use tracing::{debug, warn};

/// What the server remembers about a request between its arrival and the application's response.
#[derive(Debug, Default)]
pub(crate) struct RequestMeta {
    /// The request's key, block options aside (for the Block2 body cache).
    pub(crate) key: u64,
    /// The Block2 option of the request (the block the client wants).
    pub(crate) block2: Option<BlockValue>,
    /// The completed upload's last Block1, echoed in the response (RFC 7959 §2.3).
    pub(crate) block1_echo: Option<BlockValue>,
    /// An Observe registration: the resource ([`Request::resource_id`]) and the request to replay for
    /// notifications.
    pub(crate) observe: Option<Box<(String, Request)>>,
}

/// What to do with a received request.
pub(crate) enum Incoming {
    /// Answer at once with this, without the application (2.31, 4.08, 4.13, a cached block).
    Reply(Response),
    /// Hand this request to the application.
    Deliver(Request, RequestMeta),
    /// Answer 4.01 with an Echo value (RFC 9175 §2.4): an unverified source wants state (an upload) while
    /// unverified sources already hold their share of it.
    Challenge,
}

pub(crate) struct ServerLayer {
    hasher: foldhash::fast::FixedState,
    assemblies: Assemblies,
    bodies: BodyCache,
    pub(crate) observers: Observers,
}

impl ServerLayer {
    pub(crate) fn new(seed: u64) -> ServerLayer {
        ServerLayer {
            hasher: foldhash::fast::FixedState::with_seed(seed),
            assemblies: Assemblies::new(seed),
            bodies: BodyCache::new(seed),
            observers: Observers::new(seed),
        }
    }

    pub(crate) fn uploads(&self) -> usize {
        self.assemblies.len()
    }

    /// Processes a request's Observe and block options. `multicast` requests are neither observed nor
    /// assembled (RFC 7641 and RFC 7959 leave group requests out).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_request<'a>(
        &mut self,
        now: Instant,
        cfg: &BlockConfig,
        lifetime: Duration,
        peer: SocketAddr,
        token: Token,
        method: Code,
        options: impl Iterator<Item = (OptionNumber, &'a [u8])> + Clone,
        payload: &[u8],
        multicast: bool,
        verified: bool,
    ) -> Incoming {
        let key = block::request_key(&self.hasher, method, options.clone(), payload, false);
        let mut options: Options = options.collect();
        let observe = options.get(OptionNumber::OBSERVE).and_then(corral_wire::decode_uint);
        if observe == Some(u64::from(corral_wire::OBSERVE_DEREGISTER)) && self.observers.remove(&(peer, token)) {
            debug!(%peer, "observer deregistered (Observe=1)");
        }
        let block2 = options.block2();
        let mut body = None;
        let mut block1_echo = None;
        if !multicast {
            // A later block of a large response: answer from the rendered body, without the application.
            if let Some(b2) = block2.filter(|b| b.num > 0) {
                match self.bodies.get(now, peer, key) {
                    Some(full) => {
                        let want = BlockValue { szx: b2.szx.min(cfg.szx), ..b2 };
                        return Incoming::Reply(block::slice(full, want).unwrap_or_else(|e| e));
                    }
                    None if !matches!(method, Code::GET | Code::FETCH) => {
                        return Incoming::Reply(Response::error(
                            Code::REQUEST_ENTITY_INCOMPLETE,
                            "the block-wise response is no longer available; repeat the request",
                        ))
                    }
                    None => {} // GET/FETCH: render again
                }
            }
            // A block of an upload: collect it; only the whole body reaches the application.
            if let Some(b1) = options.block1() {
                let key1 = block::request_key(&self.hasher, method, options.iter(), &[], true);
                let size1 = options.get_uint(OptionNumber::SIZE1);
                match self.assemblies.on_block(now, lifetime, cfg, peer, key1, b1, size1, payload, verified) {
                    Block1Step::Challenge => return Incoming::Challenge,
                    Block1Step::Continue(echo) => {
                        let (b, l) = echo.encode();
                        return Incoming::Reply(
                            Response::new(Code::CONTINUE).with_option(OptionNumber::BLOCK1, &b[..l]),
                        );
                    }
                    Block1Step::Reject(r) => {
                        debug!(%peer, code = %r.code, "block-wise upload rejected");
                        return Incoming::Reply(r);
                    }
                    Block1Step::Complete { body: whole, echo } => {
                        options.remove(OptionNumber::BLOCK1);
                        options.remove(OptionNumber::SIZE1);
                        options.remove(OptionNumber::REQUEST_TAG);
                        body = Some(whole);
                        block1_echo = Some(echo);
                    }
                }
            }
        }
        let request = Request { method, options, payload: body.unwrap_or_else(|| payload.to_vec()) };
        let observe = (observe == Some(u64::from(corral_wire::OBSERVE_REGISTER))
            && matches!(method, Code::GET | Code::FETCH)
            && !multicast)
            .then(|| Box::new((request.resource_id(), request.clone())));
        Incoming::Deliver(request, RequestMeta { key, block2, block1_echo, observe })
    }

    /// Prepares the application's response: Block1 echo, Observe registration (if asked for and the
    /// response is [`Response::observable`]), and the requested block of a large body. A body up to
    /// `unblocked_limit` bytes goes whole unless the client asked for blocks (TCP peers announce how large a
    /// message they take; over UDP the limit is the block size). `None`: the registration of an unverified
    /// source found unverified observers holding their share of the slots; answer with an Echo challenge
    /// instead (see [`Observers`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_response(
        &mut self,
        now: Instant,
        cfg: &BlockConfig,
        policy: &ObservePolicy,
        rng: &mut Rng,
        (peer, token): ObserverKey,
        meta: RequestMeta,
        mut response: Response,
        unblocked_limit: usize,
        verified: bool,
    ) -> Option<Response> {
        if let Some(echo) = meta.block1_echo {
            let (b, l) = echo.encode();
            response.options.set(OptionNumber::BLOCK1, &b[..l]);
        }
        match meta.observe {
            Some(reg) if response.code.is_success() && response.options.contains(OptionNumber::OBSERVE) => {
                let (path, request) = *reg;
                let start = rng.next_u32() & 0xffff;
                match self.observers.register(now, policy, (peer, token), &path, request, start, verified) {
                    Ok(seq) => {
                        debug!(%peer, %path, "observer registered");
                        response.options.set_uint(OptionNumber::OBSERVE, u64::from(seq));
                    }
                    Err(Refused::Unverified) => {
                        debug!(%peer, %path, "registration of an unverified source under pressure: Echo challenge");
                        return None;
                    }
                    Err(Refused::Full) => {
                        warn!(%peer, %path, "observer limit reached; answering without Observe");
                        response.options.remove(OptionNumber::OBSERVE);
                    }
                }
            }
            Some(_) => {
                self.observers.remove(&(peer, token));
                response.options.remove(OptionNumber::OBSERVE);
            }
            None => {
                response.options.remove(OptionNumber::OBSERVE);
            }
        }
        Some(self.blockify(now, cfg, peer, meta.key, meta.block2, response, unblocked_limit))
    }

    /// Prepares a rendered notification for `key`: the next sequence number, or — for a response that is
    /// not a success or no longer observable — the final notification without Observe (the observer is
    /// then removed by the caller once sent). Returns `None` if the observer is gone.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_notification(
        &mut self,
        now: Instant,
        cfg: &BlockConfig,
        key: ObserverKey,
        request_key: u64,
        con: bool,
        mut response: Response,
        unblocked_limit: usize,
    ) -> Option<(Response, bool)> {
        self.observers.get(&key)?;
        let last = !(response.code.is_success() && response.options.contains(OptionNumber::OBSERVE));
        if last {
            response.options.remove(OptionNumber::OBSERVE);
        } else if let Some(seq) = self.observers.next_seq(&key, now, con) {
            response.options.set_uint(OptionNumber::OBSERVE, u64::from(seq));
        }
        Some((self.blockify(now, cfg, key.0, request_key, None, response, unblocked_limit), last))
    }

    /// The key of a stored registration request (for notifications' Block2 follow-ups).
    pub(crate) fn key_of(&self, request: &Request) -> u64 {
        block::request_key(&self.hasher, request.method, request.options.iter(), &request.payload, false)
    }

    /// Cuts a response larger than one block into the requested block (block 0 by default), keeping the
    /// rendered body for the follow-up requests.
    #[allow(clippy::too_many_arguments)]
    fn blockify(
        &mut self,
        now: Instant,
        cfg: &BlockConfig,
        peer: SocketAddr,
        key: u64,
        requested: Option<BlockValue>,
        mut response: Response,
        unblocked_limit: usize,
    ) -> Response {
        let szx = requested.map_or(cfg.szx, |b| b.szx.min(cfg.szx)).min(6);
        let want = BlockValue { num: requested.map_or(0, |b| b.num), more: false, szx };
        let limit = if requested.is_some() { want.size() } else { want.size().max(unblocked_limit) };
        if !response.code.is_success() || (response.payload.len() <= limit && want.num == 0) {
            return response;
        }
        block::ensure_etag(&self.hasher, &mut response);
        let block = block::slice(&response, want).unwrap_or_else(|e| e);
        response.options.remove(OptionNumber::OBSERVE);
        self.bodies.insert(now, cfg, peer, key, response);
        block
    }
}

/// Why a request must be refused before anything else looks at it, as the response to send: an unknown
/// method (4.05), an unrecognised critical option (4.02), a Hop-Limit of 0 (4.00, RFC 8768 §3), or a
/// block option with the reserved SZX 7 on a transport without BERT (4.00, RFC 7959 §2.2 / RFC 8323 §6).
pub(crate) fn refuse_request<'a>(
    method: Code,
    options: impl Iterator<Item = (OptionNumber, &'a [u8])> + Clone,
    extra_known: &[OptionNumber],
    reliable: bool,
) -> Option<Response> {
    if method.detail() > 7 {
        return Some(Response::error(Code::METHOD_NOT_ALLOWED, format!("unknown method 0.{:02}", method.detail())));
    }
    if let Err(bad) = corral_wire::check_critical(options.clone(), extra_known) {
        return Some(Response::error(Code::BAD_OPTION, bad.to_string()));
    }
    for (n, v) in options {
        if n == OptionNumber::HOP_LIMIT && corral_wire::decode_uint(v) == Some(0) {
            return Some(Response::error(Code::BAD_REQUEST, "Hop-Limit 0 is not allowed (RFC 8768 §3)"));
        }
        if !reliable && (n == OptionNumber::BLOCK1 || n == OptionNumber::BLOCK2) && v.last().is_some_and(|b| b & 7 == 7)
        {
            return Some(Response::error(
                Code::BAD_REQUEST,
                "block size exponent 7 is reserved (BERT, only over reliable transports: RFC 7959 §2.2, RFC 8323)",
            ));
        }
    }
    None
}
