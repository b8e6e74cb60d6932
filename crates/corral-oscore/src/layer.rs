//! [`OscoreLayer`]: OSCORE on a server node, between the message layer and the services
//! ([`corral_proto::Layer`]). Services see the original requests and answer them as usual; the layer
//! unprotects on the way in and protects on the way out, Observe included (every notification after the
//! first carries a Partial IV of the server's, RFC 8613 §4.1.3.5.2).
//!
//! Failures get the unprotected answers of §8.2 (Max-Age 0). A context served before (by an earlier run,
//! however it ended) has an unknown replay window ([`crate::store`] says why nothing else can be
//! trusted): each peer's authentic request is answered with a protected 4.01 carrying only an Echo
//! option (RFC 9175 §2.4, RFC 8613 Appendix B.1.2), and only the request that echoes it re-establishes
//! the window — a request captured before the crash and replayed after it is refused.
//!
//! Block-wise (RFC 8613 §4.1.3.4): the endpoint below reassembles outer blocks before the layer sees a
//! request and cuts a protected response into outer blocks (§4.1.3.4.2). Inner blocks (§4.1.3.4.1) are
//! the layer's: a client's inner Block1 upload is assembled here; a response is cut into inner Block2
//! blocks, each protected on its own, when the client asks for a block or when one protected message
//! cannot hold it ([`crate::Aead::max_plaintext`], 64 KiB) — [`crate::INNER_BLOCK`] bytes then — and the
//! rendered body is kept for the later blocks, whose requests are answered from it (each is a new
//! protected request of the client's). The response to an Observe registration and the notifications go
//! whole: an observer fetches no inner blocks.

use crate::served::{Binding, Sender, Served};
use crate::store::ContextDir;
use crate::{Error, Plain};
use corral_proto::blockwise::{self, BodyCache};
use corral_proto::wire::{BlockValue, Code, OptionNumber, Token};
use corral_proto::{BlockConfig, Inbound, InboundId, IncomingRequest, Instant, Layer, LayerCounter, Request, Response};
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;

/// Observations held through OSCORE at most (each needs its binding for the notifications).
const MAX_OBSERVERS: usize = 1024;
/// How long an Echo challenge stays good; until then every unsynchronised request of that peer gets the
/// same value, so that concurrent requests (a load generator's, a retransmission) do not void each
/// other's challenge.
const ECHO_LIFETIME: corral_proto::Duration = corral_proto::Duration::from_secs(60);
/// Inner block-wise uploads (RFC 8613 §4.1.3.4.1) being assembled at once, and the largest body.
const MAX_UPLOADS: usize = 16;
const MAX_UPLOAD_BYTES: usize = 16 << 20;
/// Responses cut into inner Block2 blocks kept at once for their later blocks, their bytes together, and
/// for how long.
const MAX_BODIES: usize = 16;
const MAX_BODY_BYTES: usize = 16 << 20;
const BODY_LIFETIME: corral_proto::Duration = corral_proto::Duration::from_secs(60);

/// A request being answered: which context, the binding, whether the response needs a Partial IV of its
/// own, whether it may carry Observe (a registration this layer keeps, a notification), and (a request
/// outside an observation) where a response cut into inner blocks is kept.
struct Pending {
    /// The method of the request inside ([`Layer::protects`]).
    method: Code,
    ci: usize,
    binding: Binding,
    own_piv: bool,
    observe: bool,
    cut: Option<Cut>,
}

/// Where a response cut into inner Block2 blocks is kept for the request's client, and the block it
/// asked for (none: block 0 of [`crate::INNER_BLOCK`] bytes, if the response must be cut at all).
struct Cut {
    peer: SocketAddr,
    key: u64,
    want: Option<BlockValue>,
    /// The client has not proved its address: a body larger than one inner block goes in inner blocks,
    /// so that each later block is a protected request of its own that the reflection bound can
    /// challenge through this layer ([`Layer::protects`]). Outer blocks are the endpoint's, answered from
    /// its cache without this layer, so the bound could only answer them with a challenge in the clear,
    /// which an OSCORE client cannot read (aiocoap fails the transfer).
    unproven: bool,
}

/// An inner Block1 upload being assembled: the body so far and the next block number expected.
struct Upload {
    body: Vec<u8>,
    next: u32,
}

/// What the layer counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LayerStats {
    /// Requests verified and unprotected.
    pub unprotected: u64,
    /// Responses protected.
    pub protected: u64,
    /// Requests without OSCORE.
    pub plain_requests: u64,
    /// Requests refused, for whatever reason (the next three and malformed options among them).
    pub refused: u64,
    /// Requests whose Partial IV was seen before or is older than the replay window.
    pub replays: u64,
    /// Requests that failed authentication (wrong key, tampered, or not a request).
    pub verification_failures: u64,
    /// Requests naming a Security Context this server does not have.
    pub unknown_contexts: u64,
    /// 4.01 Echo challenges after a restart (RFC 8613 Appendix B.1.2).
    pub echo_challenges: u64,
}

/// See the module docs.
pub struct OscoreLayer {
    contexts: Vec<Served>,
    /// Requests being answered.
    pending: HashMap<InboundId, Pending, foldhash::fast::FixedState>,
    observers: HashMap<(SocketAddr, Token), (usize, Binding), foldhash::fast::FixedState>,
    /// The Echo value each peer (context and Sender ID: a group has many) must return before its window is
    /// trusted again, and when it was given.
    challenges: HashMap<(usize, Vec<u8>), (Vec<u8>, Instant)>,
    /// The endpoint's Echo value found inside the request just unprotected, for the node to take
    /// ([`Layer::address_proof`]).
    proof: Option<(InboundId, Vec<u8>)>,
    /// Inner block-wise uploads by (context, client, resource).
    uploads: HashMap<(usize, SocketAddr, String), Upload>,
    /// Block1 values to echo in the final response of an upload (RFC 7959 §2.3).
    block1_echo: HashMap<InboundId, Vec<u8>, foldhash::fast::FixedState>,
    /// Responses cut into inner Block2 blocks, for the requests of their later blocks.
    bodies: BodyCache,
    bodies_config: BlockConfig,
    hasher: foldhash::fast::FixedState,
    /// Refuse requests without OSCORE (4.01), except discovery.
    require: bool,
    counter: u64,
    stats: LayerStats,
}

fn table<K, V>() -> HashMap<K, V, foldhash::fast::FixedState> {
    HashMap::with_hasher(foldhash::fast::FixedState::with_seed(0))
}

fn refusal(code: Code, text: &str) -> Response {
    Response::error(code, text).with_max_age(0)
}

impl OscoreLayer {
    /// A layer serving the peers of `contexts` (picked by the kid of each request). With `require`, plain
    /// CoAP requests are refused with 4.01 (`/.well-known/core` excepted).
    pub fn new(contexts: Vec<ContextDir>, require: bool) -> OscoreLayer {
        OscoreLayer::serving(contexts.into_iter().map(Served::Pairwise).collect(), require)
    }

    /// A layer serving pairwise and group contexts (Group OSCORE members and deterministic requests).
    /// Every context is marked as served before any request is accepted; one served before starts with its
    /// replay windows unknown (see [`crate::store`]).
    pub fn serving(mut contexts: Vec<Served>, require: bool) -> OscoreLayer {
        for c in &mut contexts {
            if let Err(e) = c.start_serving() {
                tracing::warn!(dir = %c.dir().display(), error = %e, "cannot mark the OSCORE context as served; its replay window counts as unknown");
            }
        }
        OscoreLayer {
            contexts,
            pending: table(),
            observers: table(),
            challenges: HashMap::new(),
            proof: None,
            uploads: HashMap::new(),
            block1_echo: table(),
            bodies: BodyCache::new(0),
            bodies_config: BlockConfig {
                cache_entries: MAX_BODIES,
                cache_bytes: MAX_BODY_BYTES,
                cache_lifetime: BODY_LIFETIME,
                ..BlockConfig::default()
            },
            hasher: foldhash::fast::FixedState::with_seed(0),
            require,
            counter: 0,
            stats: LayerStats::default(),
        }
    }

    pub fn stats(&self) -> LayerStats {
        self.stats
    }

    fn answer(&mut self, id: InboundId, e: &Error) -> Inbound {
        self.stats.refused += 1;
        match e {
            Error::Replay => self.stats.replays += 1,
            Error::DecryptionFailed => self.stats.verification_failures += 1,
            Error::UnknownContext => self.stats.unknown_contexts += 1,
            _ => {}
        }
        let (code, text) = e.response_code().unwrap_or((Code::BAD_REQUEST, "OSCORE processing failed"));
        tracing::debug!(error = %e, "OSCORE request refused");
        Inbound::Answer(id, refusal(code, text))
    }

    /// The Echo value for a challenge to `peer`: the one given less than [`ECHO_LIFETIME`] ago, or a new
    /// one. Unreadable to anyone without the key (it travels encrypted), and never the same for two
    /// peers or two lifetimes in this process.
    fn challenge(&mut self, now: Instant, peer: (usize, Vec<u8>)) -> Vec<u8> {
        if let Some((v, at)) = self.challenges.get(&peer) {
            if now.saturating_since(*at) < ECHO_LIFETIME {
                return v.clone();
            }
        }
        self.counter += 1;
        let mut v = now.as_micros().to_be_bytes().to_vec();
        v.extend_from_slice(&self.counter.to_be_bytes());
        self.challenges.insert(peer, (v.clone(), now));
        v
    }

    /// The key a response cut into inner blocks is kept under: the context and the request, its block
    /// options aside (as the endpoint keys its own, [`blockwise::request_key`]).
    fn body_key(&self, ci: usize, request: &Request) -> u64 {
        let key = blockwise::request_key(&self.hasher, request.method, request.options.iter(), &request.payload, false);
        let mut h = self.hasher.build_hasher();
        h.write_usize(ci);
        h.write_u64(key);
        h.finish()
    }

    /// `response` cut into the block `want` (its SZX at most 1024 bytes'), keeping the whole for the later
    /// blocks; a response that fits in the first block goes whole, as the endpoint's do.
    fn cut(&mut self, now: Instant, cut: &Cut, want: BlockValue, mut response: Response) -> Response {
        let want = BlockValue { szx: want.szx.min(6), more: false, ..want };
        if !response.code.is_success() || (want.num == 0 && response.payload.len() <= want.size()) {
            return response;
        }
        blockwise::ensure_etag(&self.hasher, &mut response);
        let block = blockwise::slice(&response, want).unwrap_or_else(|e| e);
        self.bodies.insert(now, &self.bodies_config, cut.peer, cut.key, response);
        block
    }
}

impl Layer for OscoreLayer {
    fn inbound(&mut self, now: Instant, req: IncomingRequest) -> Inbound {
        if req.notification {
            if let Some((ci, b)) = self.observers.get(&(req.from, req.token)) {
                self.pending.insert(
                    req.id,
                    Pending { method: Code::GET, ci: *ci, binding: b.clone(), own_piv: true, observe: true, cut: None },
                );
            }
            return Inbound::Pass(req);
        }
        if !req.request.options.contains(OptionNumber::OSCORE) {
            self.stats.plain_requests += 1;
            let discovery = req.request.options.path() == "/.well-known/core";
            if self.require && !discovery {
                self.stats.refused += 1;
                return Inbound::Answer(req.id, refusal(Code::UNAUTHORIZED, "OSCORE required"));
            }
            return Inbound::Pass(req);
        }
        let sender = match Sender::of(&req.request.options) {
            Ok(s) => s,
            Err(e) => return self.answer(req.id, &e),
        };
        let Some(ci) = self.contexts.iter().position(|c| c.serves(&sender)) else {
            return self.answer(req.id, &Error::UnknownContext);
        };
        let outer = Plain {
            code: req.request.method,
            options: req.request.options.clone(),
            payload: req.request.payload.clone(),
        };
        // Who protected it, for the services (as a DTLS session's identity reaches them).
        let identity = std::sync::Arc::new(corral_proto::OscoreIdentity {
            kid: sender.kid.clone(),
            kid_context: sender.kid_context.clone(),
        });
        let ctx = &mut self.contexts[ci];
        let (inner, binding, window) = match ctx.open_request(&outer) {
            Ok(x) => x,
            Err(e) => return self.answer(req.id, &e),
        };
        // An Echo value inside that this layer did not give (for its replay window) is the endpoint's: the
        // proof of the client's address after the reflection bound challenged it through this layer
        // (`Layer::protects`), kept for the node to take (`Layer::address_proof`).
        let mut own_echo = false;
        match window {
            Ok(()) => ctx.replay_accept(&binding),
            Err(crate::Refusal::Unsynchronised) => {
                let peer = (ci, sender.kid);
                let echoed = inner.options.get(OptionNumber::ECHO);
                let given = self.challenges.get(&peer).filter(|(_, at)| now.saturating_since(*at) < ECHO_LIFETIME);
                if echoed.is_some() && echoed == given.map(|(v, _)| v.as_slice()) {
                    ctx.resynchronise(&binding);
                    self.challenges.remove(&peer);
                    own_echo = true;
                } else {
                    // Authentic, but it could be a replay from before the restart: challenge it, with the
                    // Echo option alone (Appendix B.1.2: no diagnostic payload).
                    self.stats.echo_challenges += 1;
                    let echo = self.challenge(now, peer);
                    self.pending.insert(
                        req.id,
                        Pending { method: inner.code, ci, binding, own_piv: true, observe: false, cut: None },
                    );
                    let r = Response::new(Code::UNAUTHORIZED).with_option(OptionNumber::ECHO, &echo).with_max_age(0);
                    return Inbound::Answer(req.id, r);
                }
            }
            Err(_) => return self.answer(req.id, &Error::Replay),
        }
        self.stats.unprotected += 1;
        let registers = match inner.options.observe() {
            Some(0) if self.observers.len() < MAX_OBSERVERS => {
                self.observers.insert((req.from, req.token), (ci, binding.clone()));
                true
            }
            Some(1) => {
                self.observers.remove(&(req.from, req.token));
                false
            }
            _ => false,
        };
        self.pending
            .insert(req.id, Pending { method: inner.code, ci, binding, own_piv: false, observe: registers, cut: None });
        let mut options = inner.options;
        if let Some(echo) = options.get(OptionNumber::ECHO).filter(|_| !own_echo) {
            self.proof = Some((req.id, echo.to_vec()));
        }
        options.remove(OptionNumber::ECHO);
        let mut payload = inner.payload;
        if let Some(block) = options.block1() {
            // The client's own block-wise upload, inside OSCORE: assemble it here, since the endpoint only
            // sees (and reassembles) outer blocks.
            let key = (ci, req.from, options.path());
            if block.num == 0 && !self.uploads.contains_key(&key) && self.uploads.len() >= MAX_UPLOADS {
                return Inbound::Answer(
                    req.id,
                    Response::error(Code::SERVICE_UNAVAILABLE, "too many uploads").with_max_age(2),
                );
            }
            let up = self.uploads.entry(key.clone()).or_insert(Upload { body: Vec::new(), next: 0 });
            if block.num == 0 {
                *up = Upload { body: Vec::new(), next: 0 };
            }
            if block.num != up.next {
                self.uploads.remove(&key);
                return Inbound::Answer(req.id, Response::error(Code::REQUEST_ENTITY_INCOMPLETE, "a block is missing"));
            }
            if up.body.len() + payload.len() > MAX_UPLOAD_BYTES {
                self.uploads.remove(&key);
                return Inbound::Answer(req.id, Response::error(Code::REQUEST_ENTITY_TOO_LARGE, "body too large"));
            }
            up.body.extend_from_slice(&payload);
            up.next += 1;
            let echo = options.get(OptionNumber::BLOCK1).unwrap_or_default().to_vec();
            if block.more {
                return Inbound::Answer(req.id, Response::new(Code::CONTINUE).with_option(OptionNumber::BLOCK1, &echo));
            }
            payload = self.uploads.remove(&key).map(|u| u.body).unwrap_or_default();
            options.remove(OptionNumber::BLOCK1);
            options.remove(OptionNumber::SIZE1);
            self.block1_echo.insert(req.id, echo);
        }
        let mut request = Request { method: inner.code, options, payload };
        if request.options.observe().is_none() {
            // Inner Block2 is the layer's (see the module docs): the services render the whole body.
            let want = request.options.block2();
            request.options.remove(OptionNumber::BLOCK2);
            let cut = Cut { peer: req.from, key: self.body_key(ci, &request), want, unproven: !req.verified };
            if let Some(later) = want.filter(|b| b.num > 0) {
                let kept = self.bodies.get(now, cut.peer, cut.key);
                let answer = match kept {
                    Some(whole) => Some(blockwise::slice(whole, BlockValue { szx: later.szx.min(6), ..later })),
                    None if !matches!(request.method, Code::GET | Code::FETCH) => Some(Err(Response::error(
                        Code::REQUEST_ENTITY_INCOMPLETE,
                        "the block-wise response is no longer available; repeat the request",
                    ))),
                    None => None, // rendered again, and cut in `outbound`
                };
                if let Some(answer) = answer {
                    return Inbound::Answer(req.id, answer.unwrap_or_else(|e| e));
                }
            }
            if let Some(p) = self.pending.get_mut(&req.id) {
                p.cut = Some(cut);
            }
        }
        Inbound::Replaced(IncomingRequest { request, oscore_identity: Some(identity), ..req })
    }

    fn outbound(&mut self, now: Instant, id: InboundId, mut response: Response) -> Response {
        if let Some(echo) = self.block1_echo.remove(&id) {
            response.options.set(OptionNumber::BLOCK1, &echo);
        }
        let Some(Pending { ci, binding, own_piv, observe, cut, .. }) = self.pending.remove(&id) else {
            return response;
        };
        if !observe {
            // A service marks a resource observable whoever asks; the endpoint drops the mark from an answer
            // that registers nothing, but only outside: inside, the client would read a registration (or, not
            // having asked, refuse the response, RFC 8613 §8.4).
            response.options.remove(OptionNumber::OBSERVE);
        }
        let own_piv = own_piv || Served::needs_own_piv(&binding);
        if !response.code.is_success() {
            // The observation (if any) ends with this response.
            self.observers.retain(|_, (c, b)| !(*c == ci && *b == binding));
        }
        if let Some(cut) = &cut {
            // The block the client asked for; else block 0 of a body one protected message cannot hold, or
            // of one larger than a block to a client that has not proved its address.
            let max = self.contexts[ci].max_plaintext();
            let want = cut.want.or_else(|| {
                let szx = BlockValue::szx_for_size(crate::INNER_BLOCK);
                let fits = crate::protect::fits(&response.options, response.payload.len(), max);
                let beyond_a_block = cut.unproven && response.payload.len() > crate::INNER_BLOCK;
                (!fits || beyond_a_block).then_some(BlockValue { num: 0, more: false, szx })
            });
            if let Some(want) = want {
                response = self.cut(now, cut, want, response);
            }
        }
        let dir = &mut self.contexts[ci];
        if own_piv {
            if let Err(e) = dir.reserve() {
                tracing::error!(error = %e, "cannot persist the OSCORE sequence number; not answering protected");
                return refusal(Code::INTERNAL_SERVER_ERROR, "cannot persist the OSCORE sequence number");
            }
        }
        let plain = Plain { code: response.code, options: response.options, payload: response.payload };
        match dir.protect_response(&binding, &plain, own_piv) {
            Ok(outer) => {
                self.stats.protected += 1;
                Response { code: outer.code, options: outer.options, payload: outer.payload }
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot protect a response");
                refusal(Code::INTERNAL_SERVER_ERROR, "cannot protect the response")
            }
        }
    }

    fn protects(&self, id: InboundId) -> Option<Code> {
        self.pending.get(&id).map(|p| p.method)
    }

    fn address_proof(&mut self, id: InboundId) -> Option<Vec<u8>> {
        self.proof.take().filter(|(of, _)| *of == id).map(|(_, echo)| echo)
    }

    fn counters(&self) -> Vec<LayerCounter> {
        let s = &self.stats;
        let c = |name, help, value| LayerCounter { name, help, value };
        vec![
            c("oscore_requests_verified", "OSCORE requests verified and unprotected", s.unprotected),
            c("oscore_responses_protected", "responses protected with OSCORE", s.protected),
            c("oscore_plain_requests", "requests that came without OSCORE", s.plain_requests),
            c("oscore_refused", "requests the OSCORE layer refused, for any reason", s.refused),
            c("oscore_replays", "OSCORE requests refused as replays", s.replays),
            c("oscore_verification_failures", "OSCORE requests that failed authentication", s.verification_failures),
            c("oscore_unknown_contexts", "OSCORE requests naming no known Security Context", s.unknown_contexts),
            c("oscore_echo_challenges", "4.01 Echo challenges after a restart (RFC 8613 B.1.2)", s.echo_challenges),
        ]
    }
}
