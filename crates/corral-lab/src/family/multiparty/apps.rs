//! The CoAP ends of seed 001's experiment: the client that asks `/instruction?t=k` on the original code's
//! schedule and the server that answers it, each with a small per-deployment *security adapter* around the
//! real corral-oscore calls — which is where the cryptographic operations of Table III are counted, one per
//! call that seals or opens (AEAD), signs or verifies (signature), or computes an HMAC.
//!
//! Owns the bookkeeping of every request (sent, answered, verified) and of the server's responses; never
//! reads a clock (time is `cx.now()`), never draws randomness it was not given (the schedule is drawn from
//! a seeded [`Rng`] when the client is made).

use crate::error::{RunError, ScenarioError};
use crate::harness::coap_uri;
use crate::record::Ops;
use corral_oscore::{
    CryptoOps, GroupBinding, GroupContext, GroupParams, Params, Plain, RequestBinding, SecurityContext,
};
use corral_proto::wire::{Code, ContentFormat, OptionNumber};
use corral_proto::{
    Context, Duration, InboundId, IncomingRequest, Instant, Outcome, Request, RequestId, Response, Rng, SendParams,
    Service,
};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::net::SocketAddr;

/// The shared OSCORE master secret of the lab (any value: the keys only need to differ per client).
const MASTER_SECRET: &[u8] = b"corral seed 001 lab master secret";

/// The server's Sender ID; client `c` (1-based) has Sender ID `[c]`; the Deterministic Client `[0xdc]`.
pub const SERVER_ID: u8 = 0;
pub const DETERMINISTIC_ID: u8 = 0xdc;

fn ops_of(o: CryptoOps) -> Ops {
    Ops { aead: o.aead, signatures: o.signatures, hmac: o.hmac }
}

/// Why a message did not protect, open or verify. Its text is the diagnostic payload of the server's 4.00
/// or 5.00 response.
#[derive(Debug)]
pub enum SecurityError {
    /// corral-oscore refused it.
    Oscore(corral_oscore::Error),
    /// A response without an OSCORE option, where the request was protected.
    Unprotected(Code),
    /// The binding of another deployment's request (`"an OSCORE"`, `"a group"`: the one expected).
    WrongBinding(&'static str),
    /// A request whose kid is none of the server's contexts.
    UnknownKid,
}

impl fmt::Display for SecurityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecurityError::Oscore(e) => e.fmt(f),
            SecurityError::Unprotected(code) => write!(f, "unprotected {code}"),
            SecurityError::WrongBinding(kind) => write!(f, "not {kind} binding"),
            SecurityError::UnknownKid => f.write_str("unknown kid"),
        }
    }
}

impl From<corral_oscore::Error> for SecurityError {
    fn from(e: corral_oscore::Error) -> SecurityError {
        SecurityError::Oscore(e)
    }
}

/// What a client needs to check the response to one request.
#[derive(Debug, Clone)]
pub enum Binding {
    Oscore(RequestBinding),
    Group(GroupBinding),
    /// No object security ([`Unprotected`]).
    Plain,
}

/// A client's security for its requests, per deployment. Operations are the library's own counters
/// (`SecurityContext::ops`, `GroupContext::ops`): every AEAD, signature and HMAC corral-oscore performed.
pub trait ClientSecurity {
    /// The request to send for `plain` and what its response must match.
    fn protect(&mut self, plain: &Plain) -> Result<(Plain, Binding), SecurityError>;
    /// The inner response, if the response verifies.
    fn verify(&mut self, binding: &Binding, outer: &Plain) -> Result<Plain, SecurityError>;
    fn ops(&self) -> Ops;
}

/// The server's side of a deployment's security.
pub trait ServerSecurity {
    /// The inner request and the handle its response is protected with.
    fn open(&mut self, outer: &Plain) -> Result<(Plain, ServerBinding), SecurityError>;
    fn seal(&mut self, binding: &ServerBinding, response: &Plain) -> Result<Plain, SecurityError>;
    /// Whether a response costs the server a signature (and the scenario's signature time).
    fn signs(&self) -> bool;
    fn ops(&self) -> Ops;
}

/// The server's handle on one request.
#[derive(Debug, Clone)]
pub enum ServerBinding {
    Oscore {
        kid: Vec<u8>,
        binding: RequestBinding,
    },
    Group(GroupBinding),
    /// No object security ([`Unprotected`]).
    Plain,
}

/// No object security: requests and responses as they are — plain CoAP, or CoAP whose transport
/// protects it (the `[dtls]` family's DTLS points).
pub struct Unprotected;

impl ClientSecurity for Unprotected {
    fn protect(&mut self, plain: &Plain) -> Result<(Plain, Binding), SecurityError> {
        Ok((plain.clone(), Binding::Plain))
    }

    fn verify(&mut self, _: &Binding, outer: &Plain) -> Result<Plain, SecurityError> {
        Ok(outer.clone())
    }

    fn ops(&self) -> Ops {
        Ops::default()
    }
}

impl ServerSecurity for Unprotected {
    fn open(&mut self, outer: &Plain) -> Result<(Plain, ServerBinding), SecurityError> {
        Ok((outer.clone(), ServerBinding::Plain))
    }

    fn seal(&mut self, _: &ServerBinding, response: &Plain) -> Result<Plain, SecurityError> {
        Ok(response.clone())
    }

    fn signs(&self) -> bool {
        false
    }

    fn ops(&self) -> Ops {
        Ops::default()
    }
}

/// RFC 8613 OSCORE between one client and the server: one security context each (deployments i and ii).
pub struct OscoreClient {
    ctx: SecurityContext,
}

impl OscoreClient {
    /// Client `c` (1-based).
    pub fn new(c: u8) -> Result<OscoreClient, corral_oscore::Error> {
        let ctx = SecurityContext::derive(Params::new(MASTER_SECRET, &[c], &[SERVER_ID]))?;
        Ok(OscoreClient { ctx })
    }
}

fn unprotected(outer: &Plain) -> Result<(), SecurityError> {
    if outer.options.contains(OptionNumber::OSCORE) {
        Ok(())
    } else {
        Err(SecurityError::Unprotected(outer.code))
    }
}

impl ClientSecurity for OscoreClient {
    fn protect(&mut self, plain: &Plain) -> Result<(Plain, Binding), SecurityError> {
        let (outer, b) = self.ctx.protect_request(plain, false)?;
        Ok((outer, Binding::Oscore(b)))
    }

    fn verify(&mut self, binding: &Binding, outer: &Plain) -> Result<Plain, SecurityError> {
        let Binding::Oscore(b) = binding else { return Err(SecurityError::WrongBinding("an OSCORE")) };
        unprotected(outer)?;
        Ok(self.ctx.unprotect_response(b, outer)?.0)
    }

    fn ops(&self) -> Ops {
        ops_of(self.ctx.ops())
    }
}

/// The server's OSCORE contexts, one per client, found by the request's kid.
pub struct OscoreServer {
    contexts: HashMap<Vec<u8>, SecurityContext>,
}

impl OscoreServer {
    pub fn new(clients: u8) -> Result<OscoreServer, corral_oscore::Error> {
        let mut contexts = HashMap::new();
        for c in 1..=clients {
            let ctx = SecurityContext::derive(Params::new(MASTER_SECRET, &[SERVER_ID], &[c]))?;
            contexts.insert(vec![c], ctx);
        }
        Ok(OscoreServer { contexts })
    }
}

impl ServerSecurity for OscoreServer {
    fn open(&mut self, outer: &Plain) -> Result<(Plain, ServerBinding), SecurityError> {
        let (kid, _) = corral_oscore::request_kid(&outer.options)?;
        let ctx = self.contexts.get_mut(&kid).ok_or(SecurityError::UnknownKid)?;
        let (plain, binding) = ctx.unprotect_request(outer)?;
        Ok((plain, ServerBinding::Oscore { kid, binding }))
    }

    fn seal(&mut self, b: &ServerBinding, response: &Plain) -> Result<Plain, SecurityError> {
        let ServerBinding::Oscore { kid, binding } = b else { return Err(SecurityError::WrongBinding("an OSCORE")) };
        let ctx = self.contexts.get_mut(kid).ok_or(SecurityError::UnknownKid)?;
        Ok(ctx.protect_response(binding, response, false)?)
    }

    fn signs(&self) -> bool {
        false
    }

    fn ops(&self) -> Ops {
        let mut o = Ops::default();
        for c in self.contexts.values() {
            o += ops_of(c.ops());
        }
        o
    }
}

/// The group of deployment iii: the server and the nine clients as members (Ed25519 keys from fixed
/// seeds), with a Deterministic Client; AES-CCM-16-64-128 and HKDF-SHA256 as RFC 8613's defaults.
fn group_params(me: u8, members: &std::collections::BTreeMap<Vec<u8>, Vec<u8>>) -> GroupParams {
    let others = members.iter().filter(|(id, _)| id.as_slice() != [me]).map(|(k, v)| (k.clone(), v.clone())).collect();
    GroupParams {
        deterministic_id: Some(vec![DETERMINISTIC_ID]),
        ..GroupParams::new(MASTER_SECRET.to_vec(), b"g".to_vec(), vec![me], [me.wrapping_add(1); 32], others)
    }
}

/// Every member's group context: the server's, and client 1..=clients'.
fn group(clients: u8) -> Result<(GroupContext, Vec<GroupContext>), corral_oscore::Error> {
    let mut creds = std::collections::BTreeMap::new();
    for id in std::iter::once(SERVER_ID).chain(1..=clients) {
        let alone = GroupContext::derive(group_params(id, &Default::default()))?;
        creds.insert(vec![id], alone.own_credential().to_vec());
    }
    let server = GroupContext::derive(group_params(SERVER_ID, &creds))?;
    let members = (1..=clients).map(|id| GroupContext::derive(group_params(id, &creds))).collect::<Result<_, _>>()?;
    Ok((server, members))
}

/// A client of deployment iii: deterministic requests (every client the same bytes for the same `t`),
/// signed group-mode responses.
pub struct DeterministicClient {
    ctx: GroupContext,
}

impl ClientSecurity for DeterministicClient {
    fn protect(&mut self, plain: &Plain) -> Result<(Plain, Binding), SecurityError> {
        let (outer, b) = self.ctx.protect_deterministic(plain)?;
        Ok((outer, Binding::Group(b)))
    }

    fn verify(&mut self, binding: &Binding, outer: &Plain) -> Result<Plain, SecurityError> {
        let Binding::Group(b) = binding else { return Err(SecurityError::WrongBinding("a group")) };
        unprotected(outer)?;
        Ok(self.ctx.unprotect_response(b, outer)?.0)
    }

    fn ops(&self) -> Ops {
        ops_of(self.ctx.ops())
    }
}

/// The server of deployment iii: opens deterministic requests, answers in group mode (signed).
pub struct GroupServer {
    ctx: GroupContext,
}

impl ServerSecurity for GroupServer {
    fn open(&mut self, outer: &Plain) -> Result<(Plain, ServerBinding), SecurityError> {
        let (plain, b) = self.ctx.unprotect_request(outer)?;
        Ok((plain, ServerBinding::Group(b)))
    }

    fn seal(&mut self, b: &ServerBinding, response: &Plain) -> Result<Plain, SecurityError> {
        let ServerBinding::Group(b) = b else { return Err(SecurityError::WrongBinding("a group")) };
        Ok(self.ctx.protect_response(b, response, false)?)
    }

    fn signs(&self) -> bool {
        true
    }

    fn ops(&self) -> Ops {
        ops_of(self.ctx.ops())
    }
}

/// The client and server adapters of a CoAP deployment.
pub type Adapters = (Vec<Box<dyn ClientSecurity>>, Box<dyn ServerSecurity>);

/// The security adapters of a deployment.
pub fn security(deployment: &str, clients: u8) -> Result<Adapters, RunError> {
    match deployment {
        "oscore" | "oscore-proxy" => {
            let mut cs: Vec<Box<dyn ClientSecurity>> = Vec::new();
            for c in 1..=clients {
                cs.push(Box::new(OscoreClient::new(c).map_err(RunError::Security)?));
            }
            Ok((cs, Box::new(OscoreServer::new(clients).map_err(RunError::Security)?)))
        }
        "det-oscore-proxy" => {
            let (server, members) = group(clients).map_err(RunError::Security)?;
            let cs: Vec<Box<dyn ClientSecurity>> = members
                .into_iter()
                .map(|ctx| Box::new(DeterministicClient { ctx }) as Box<dyn ClientSecurity>)
                .collect();
            Ok((cs, Box::new(GroupServer { ctx: server })))
        }
        other => Err(ScenarioError::invalid(format!("no CoAP security adapter for deployment {other:?}")).into()),
    }
}

/// The original code's schedule (`main.c`, `EVENT_TIME`): after sending request k at t, the next is drawn
/// uniformly between t and k · interval; the first goes at `first`. Send times of requests 1..=n.
pub fn schedule(rng: &mut Rng, n: u32, interval: Duration, first: Duration) -> Vec<Instant> {
    let mut out = Vec::with_capacity(n as usize);
    let mut t = Instant::ZERO + first;
    for k in 1..=u64::from(n) {
        out.push(t);
        let due = Instant::ZERO + interval.saturating_mul(k);
        let room = due.saturating_since(t).as_micros();
        t += Duration::from_micros(rng.below(room + 1));
    }
    out
}

/// One request of one client: when it left, when its verified content arrived.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Retrieval {
    pub client: u8,
    pub k: u32,
    pub sent: Instant,
    pub done: Option<Instant>,
}

/// The resource every client asks for: `/instruction?t=k`.
pub fn instruction(k: u32) -> (String, String) {
    ("instruction".into(), format!("t={k}"))
}

/// Seed 001's client: `n` requests for `/instruction?t=k` on the original schedule, through its first
/// hop (a proxy, with the server in Proxy-Uri) or straight to the server.
pub struct MpClient {
    client: u8,
    schedule: Vec<Instant>,
    next: usize,
    server: SocketAddr,
    /// The first proxy, or `None`: to the server itself.
    proxy: Option<SocketAddr>,
    security: Box<dyn ClientSecurity>,
    timeout: Duration,
    pending: HashMap<RequestId, (usize, Binding)>,
    pub retrievals: Vec<Retrieval>,
}

impl MpClient {
    pub fn new(
        client: u8,
        schedule: Vec<Instant>,
        server: SocketAddr,
        proxy: Option<SocketAddr>,
        security: Box<dyn ClientSecurity>,
        timeout: Duration,
    ) -> MpClient {
        MpClient {
            client,
            schedule,
            next: 0,
            server,
            proxy,
            security,
            timeout,
            pending: HashMap::new(),
            retrievals: Vec::new(),
        }
    }

    pub fn ops(&self) -> Ops {
        self.security.ops()
    }

    /// Every request was sent and has ended.
    pub fn finished(&self) -> bool {
        self.next >= self.schedule.len() && self.pending.is_empty()
    }

    fn send(&mut self, cx: &mut Context<'_>, k: u32) {
        let (path, query) = instruction(k);
        let mut plain = Plain { code: Code::GET, ..Plain::default() };
        match self.proxy {
            Some(_) => {
                plain.options.push_str(OptionNumber::PROXY_URI, &coap_uri(self.server, &format!("{path}?{query}")));
            }
            None => {
                plain.options.push_str(OptionNumber::URI_PATH, &path);
                plain.options.push_str(OptionNumber::URI_QUERY, &query);
            }
        }
        let now = cx.now();
        let index = self.retrievals.len();
        self.retrievals.push(Retrieval { client: self.client, k, sent: now, done: None });
        let Ok((outer, binding)) = self.security.protect(&plain) else { return };
        let request = Request { method: outer.code, options: outer.options, payload: outer.payload };
        let params = SendParams { timeout: Some(self.timeout), ..SendParams::default() };
        if let Ok(id) = cx.request(self.proxy.unwrap_or(self.server), request, params) {
            self.pending.insert(id, (index, binding));
        }
    }
}

impl Service for MpClient {
    fn handle_request(&mut self, cx: &mut Context<'_>, request: IncomingRequest) {
        cx.respond(request.id, Response::error(Code::NOT_FOUND, "a seed-001 client serves nothing"));
    }

    fn handle_response(&mut self, cx: &mut Context<'_>, id: RequestId, outcome: Outcome) {
        let Some((index, binding)) = self.pending.remove(&id) else { return };
        let Outcome::Response { response, .. } = outcome else { return };
        let outer = Plain { code: response.code, options: response.options, payload: response.payload };
        if let Ok(inner) = self.security.verify(&binding, &outer) {
            if inner.code == Code::CONTENT {
                self.retrievals[index].done = Some(cx.now());
            }
        }
    }

    fn handle_timeout(&mut self, cx: &mut Context<'_>) {
        while self.next < self.schedule.len() && self.schedule[self.next] <= cx.now() {
            self.next += 1;
            self.send(cx, self.next as u32);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.schedule.get(self.next).copied()
    }
}

/// Seed 001's server: `/instruction?t=k` answered with a 2-byte instruction (the original's payload), through
/// the deployment's security; a signing deployment's responses wait for a serial signer (`signature`
/// each, as the original firmware's constant-time delay).
pub struct MpServer {
    security: Box<dyn ServerSecurity>,
    signature: Duration,
    /// Responses waiting for the signer, in order, and when the signer is free.
    signing: VecDeque<(Instant, InboundId, Response)>,
    signer_free: Instant,
    /// When each response left (Fig. 8).
    pub responses: Vec<Instant>,
    pub rejected: u64,
}

impl MpServer {
    pub fn new(security: Box<dyn ServerSecurity>, signature: Duration) -> MpServer {
        MpServer {
            security,
            signature,
            signing: VecDeque::new(),
            signer_free: Instant::ZERO,
            responses: Vec::new(),
            rejected: 0,
        }
    }

    pub fn ops(&self) -> Ops {
        self.security.ops()
    }

    fn answer(&mut self, cx: &mut Context<'_>, id: InboundId, response: Response) {
        self.responses.push(cx.now());
        cx.respond(id, response);
    }
}

impl Service for MpServer {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        let outer = Plain { code: req.request.method, options: req.request.options, payload: req.request.payload };
        let (inner, binding) = match self.security.open(&outer) {
            Ok(x) => x,
            Err(e) => {
                self.rejected += 1;
                return cx.respond(req.id, Response::error(Code::BAD_REQUEST, e.to_string()));
            }
        };
        let path: Vec<&str> =
            inner.options.get_all(OptionNumber::URI_PATH).filter_map(|v| std::str::from_utf8(v).ok()).collect();
        let plain = if inner.code == Code::GET && path == ["instruction"] {
            let mut p = Plain { code: Code::CONTENT, payload: vec![0x08, 0x15], ..Plain::default() };
            p.options.set_uint(OptionNumber::CONTENT_FORMAT, u64::from(ContentFormat::OCTET_STREAM.0));
            p
        } else {
            Plain { code: Code::NOT_FOUND, ..Plain::default() }
        };
        let sealed = match self.security.seal(&binding, &plain) {
            Ok(s) => s,
            Err(e) => return cx.respond(req.id, Response::error(Code::INTERNAL_SERVER_ERROR, e.to_string())),
        };
        let response = Response { code: sealed.code, options: sealed.options, payload: sealed.payload };
        if self.security.signs() && !self.signature.is_zero() {
            let start = self.signer_free.max(cx.now());
            self.signer_free = start + self.signature;
            self.signing.push_back((self.signer_free, req.id, response));
        } else {
            self.answer(cx, req.id, response);
        }
    }

    fn handle_timeout(&mut self, cx: &mut Context<'_>) {
        while self.signing.front().is_some_and(|(at, _, _)| *at <= cx.now()) {
            let (_, id, r) = self.signing.pop_front().expect("checked");
            self.answer(cx, id, r);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.signing.front().map(|(at, _, _)| *at)
    }
}
