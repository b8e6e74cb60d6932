//! The directory as a CoAP service (RFC 9176): the registration interface `/rd`, registration resources
//! `/rd/<id>`, the lookup interfaces `/rd-lookup/ep` and `/rd-lookup/res` (observable), and simple
//! registration at `/.well-known/rd`. Mount it at `""` (it routes these paths itself); `/.well-known/core`
//! lists the interfaces with their `rt=core.rd*`.
//!
//! Owns: turning requests into [`Directory`] calls and their results into responses, the store writes
//! (a change is answered only once it is stored), lifetime expiry on the sans-IO clock, the simple
//! registrations in flight, and the notifications of the lookups' observers.
//!
//! Must never: change state for a request from beyond loopback that does not carry the Echo value its
//! source was just given (RFC 9175 — a blind spoofer could otherwise take, hold or rewrite names, or aim the
//! directory's simple registration fetch at a victim), keep state that grows without a bound, or panic on
//! a request.

use crate::directory::{Directory, Limits, Params, Policy, Query, RdError, Registered, Registration, Requester};
use crate::store::{Store, Stored};
use corral_proto::wire::link_format;
use corral_proto::wire::{Code, ContentFormat, OptionNumber};
use corral_proto::{
    canonical, Context, Duration, InboundId, IncomingRequest, Instant, Outcome, Request, RequestId, ResourceLink,
    Response, SendParams, Service,
};
use std::collections::HashMap;
use std::net::SocketAddr;

/// Simple registrations whose `/.well-known/core` fetch may be in flight at once.
const MAX_PENDING_SIMPLE: usize = 16;

/// How long a simple registration's fetch of `/.well-known/core` may take.
const SIMPLE_FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// What the directory has done since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RdStats {
    pub registered: u64,
    pub updated: u64,
    pub removed: u64,
    pub expired: u64,
    /// Requests refused (4.xx/5.xx), challenges excluded.
    pub refused: u64,
    /// Store writes that failed (the change was not made).
    pub store_failures: u64,
}

struct PendingSimple {
    inbound: InboundId,
    sender: Sender,
    params: Params,
}

/// Who registers: the request's source, the identity it was made with ([`identity_of`]), and whether it
/// came over DTLS (then the base defaults to a `coaps://` URI).
struct Sender {
    addr: SocketAddr,
    identity: Option<String>,
    dtls: bool,
}

impl Sender {
    fn of(req: &IncomingRequest) -> Sender {
        Sender { addr: req.from, identity: identity_of(req), dtls: req.peer_identity.is_some() }
    }
}

/// The Resource Directory service.
pub struct RdService {
    dir: Directory,
    store: Option<Box<dyn Store + Send>>,
    /// The wall-clock time (Unix ms) of the sans-IO clock's zero, for the store's lifetimes.
    unix_ms_at_zero: u64,
    pending: HashMap<RequestId, PendingSimple>,
    stats: RdStats,
}

impl RdService {
    /// A directory in memory only.
    pub fn new(limits: Limits) -> RdService {
        RdService {
            dir: Directory::new(limits),
            store: None,
            unix_ms_at_zero: 0,
            pending: HashMap::new(),
            stats: RdStats::default(),
        }
    }

    /// A directory kept in `store`, with what the store holds: `unix_ms_at_zero` is the wall-clock time of
    /// the driver's `Instant::ZERO`, so that a registration keeps its end across restarts. Registrations
    /// whose end has passed are dropped at the first timeout. Returns the service and how many stored rows
    /// could not be read (skipped).
    pub fn with_store(
        limits: Limits,
        mut store: Box<dyn Store + Send>,
        unix_ms_at_zero: u64,
    ) -> Result<(RdService, usize), crate::store::StoreError> {
        let (rows, bad) = store.load()?;
        let mut dir = Directory::new(limits);
        let mut skipped = bad;
        for Stored { mut reg, expires_unix_ms } in rows {
            reg.expires = Instant::from_millis(expires_unix_ms.saturating_sub(unix_ms_at_zero));
            if !dir.restore(reg) {
                skipped += 1;
            }
        }
        let svc =
            RdService { dir, store: Some(store), unix_ms_at_zero, pending: HashMap::new(), stats: RdStats::default() };
        Ok((svc, skipped))
    }

    /// Which registrations to accept (RFC 9176 §7): [`Policy::FirstCome`] unless told.
    pub fn with_policy(mut self, policy: Policy) -> RdService {
        self.dir.set_policy(policy);
        self
    }

    pub fn directory(&self) -> &Directory {
        &self.dir
    }

    pub fn stats(&self) -> RdStats {
        self.stats
    }

    fn refuse(&mut self, cx: &mut Context<'_>, id: InboundId, e: &RdError) {
        self.stats.refused += 1;
        let code = match e {
            RdError::BadRequest(_) => Code::BAD_REQUEST,
            RdError::Forbidden(_) => Code::FORBIDDEN,
            RdError::Unauthorized(_) => Code::UNAUTHORIZED,
            RdError::NotFound => Code::NOT_FOUND,
            RdError::TooLarge(_) => Code::REQUEST_ENTITY_TOO_LARGE,
            RdError::SourceFull | RdError::NetworkFull => Code::TOO_MANY_REQUESTS,
            RdError::Full => Code::SERVICE_UNAVAILABLE,
        };
        cx.respond(id, Response::error(code, e.to_string()));
    }

    /// Writes `reg` (or its removal) to the store; on failure the caller undoes the change.
    fn persist(&mut self, reg: Option<&Registration>, removed: Option<&str>) -> Result<(), String> {
        let Some(store) = self.store.as_mut() else { return Ok(()) };
        let result = match (reg, removed) {
            (Some(r), _) => store.save(&Stored {
                reg: r.clone(),
                expires_unix_ms: self.unix_ms_at_zero.saturating_add(r.expires.as_millis()),
            }),
            (None, Some(id)) => store.remove(id),
            (None, None) => Ok(()),
        };
        result.map_err(|e| {
            self.stats.store_failures += 1;
            tracing::warn!(error = %e, "resource directory: store write failed; change not made");
            e.to_string()
        })
    }

    fn lookups_changed(cx: &mut Context<'_>) {
        cx.changed("/rd-lookup/ep");
        cx.changed("/rd-lookup/res");
    }

    /// A registration (full or simple) with its links: stored, then answered.
    fn register(
        &mut self,
        cx: &mut Context<'_>,
        inbound: InboundId,
        sender: Sender,
        params: Params,
        links: Vec<corral_proto::wire::link_format::LinkOwned>,
        simple: bool,
    ) {
        let before = params.ep.as_deref().and_then(|ep| self.dir.by_name(ep, params.d.as_deref()).cloned());
        let fresh = format!("{:016x}", cx.secret_u64());
        let who = Requester { addr: canonical(sender.addr.ip()), identity: sender.identity };
        let result = self.dir.register(cx.now(), &who, source_uri(sender.addr, sender.dtls), params, links, fresh);
        let done = match result {
            Ok(done) => done,
            Err(e) => return self.refuse(cx, inbound, &e),
        };
        let reg = self.dir.get(done.id()).cloned().expect("just registered");
        if let Err(e) = self.persist(Some(&reg), None) {
            match before {
                Some(prev) => self.dir.put_back(prev),
                None => {
                    let _ = self.dir.take(done.id());
                }
            }
            return cx.respond(inbound, Response::error(Code::INTERNAL_SERVER_ERROR, e));
        }
        self.stats.registered += 1;
        tracing::debug!(ep = %reg.ep, location = %reg.location(), lt = reg.lt, replaced = matches!(done, Registered::Replaced(_)), "registered");
        Self::lookups_changed(cx);
        let response = if simple {
            Response::new(Code::CHANGED)
        } else {
            let mut r = Response::new(Code::CREATED);
            for seg in ["rd", reg.id.as_str()] {
                r = r.with_option(OptionNumber::LOCATION_PATH, seg.as_bytes());
            }
            r
        };
        cx.respond(inbound, response);
    }

    fn on_registration(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        let params = match params(&req.request) {
            Ok(p) => p,
            Err(e) => return self.refuse(cx, req.id, &e),
        };
        if let Some(cf) = req.request.options.content_format() {
            if cf != ContentFormat::LINK_FORMAT {
                self.stats.refused += 1;
                return cx.respond(
                    req.id,
                    Response::error(Code::UNSUPPORTED_CONTENT_FORMAT, "register links as application/link-format (40)"),
                );
            }
        }
        let Ok(text) = std::str::from_utf8(&req.request.payload) else {
            return self.refuse(cx, req.id, &RdError::BadRequest("the links are not UTF-8".into()));
        };
        let links = match self.dir.parse_links(text) {
            Ok(l) => l,
            Err(e) => return self.refuse(cx, req.id, &e),
        };
        self.register(cx, req.id, Sender::of(&req), params, links, false);
    }

    fn on_registration_resource(&mut self, cx: &mut Context<'_>, req: IncomingRequest, id: &str) {
        let who = Requester { addr: canonical(req.from.ip()), identity: identity_of(&req) };
        match req.request.method {
            Code::GET => {
                let Some(reg) = self.dir.get(id) else { return self.refuse(cx, req.id, &RdError::NotFound) };
                let mut body = String::new();
                link_format::serialize(&reg.links, &mut body);
                cx.respond(req.id, Response::content(ContentFormat::LINK_FORMAT, body));
            }
            Code::POST => {
                if !req.request.payload.is_empty() || req.request.options.content_format().is_some() {
                    let e = RdError::BadRequest(
                        "a registration update carries no links: register again to replace them".into(),
                    );
                    return self.refuse(cx, req.id, &e);
                }
                let params = match params(&req.request) {
                    Ok(p) => p,
                    Err(e) => return self.refuse(cx, req.id, &e),
                };
                let before = self.dir.get(id).cloned();
                if let Err(e) =
                    self.dir.update(cx.now(), id, &who, source_uri(req.from, req.peer_identity.is_some()), params)
                {
                    return self.refuse(cx, req.id, &e);
                }
                let reg = self.dir.get(id).cloned().expect("just updated");
                if let Err(e) = self.persist(Some(&reg), None) {
                    if let Some(prev) = before {
                        self.dir.put_back(prev);
                    }
                    return cx.respond(req.id, Response::error(Code::INTERNAL_SERVER_ERROR, e));
                }
                self.stats.updated += 1;
                let visible = |r: &Registration| (r.endpoint_link(), r.links.clone());
                if before.as_ref().map(visible) != Some(visible(&reg)) {
                    Self::lookups_changed(cx);
                }
                cx.respond(req.id, Response::new(Code::CHANGED));
            }
            Code::DELETE => {
                let reg = match self.dir.remove(id, &who) {
                    Ok(r) => r,
                    Err(e) => return self.refuse(cx, req.id, &e),
                };
                if let Err(e) = self.persist(None, Some(id)) {
                    self.dir.put_back(reg);
                    return cx.respond(req.id, Response::error(Code::INTERNAL_SERVER_ERROR, e));
                }
                self.stats.removed += 1;
                tracing::debug!(ep = %reg.ep, location = %reg.location(), "removed");
                Self::lookups_changed(cx);
                cx.respond(req.id, Response::new(Code::DELETED));
            }
            m => cx.respond(req.id, not_allowed(m, "GET, POST (update) and DELETE")),
        }
    }

    fn on_lookup(&mut self, cx: &mut Context<'_>, req: IncomingRequest, kind: &str) {
        if req.request.method != Code::GET {
            return cx.respond(req.id, not_allowed(req.request.method, "GET"));
        }
        if req.request.options.accept().is_some_and(|a| a != ContentFormat::LINK_FORMAT) {
            return cx.respond(
                req.id,
                Response::error(Code::NOT_ACCEPTABLE, "lookups are served as application/link-format (40)"),
            );
        }
        let q = match Query::parse(req.request.options.query_pairs()) {
            Ok(q) => q,
            Err(e) => return self.refuse(cx, req.id, &e),
        };
        let mut body = String::new();
        if kind == "ep" {
            let links: Vec<_> = self.dir.lookup_endpoints(&q).into_iter().map(Registration::endpoint_link).collect();
            link_format::serialize(&links, &mut body);
        } else {
            link_format::serialize(&self.dir.lookup_resources(&q), &mut body);
        }
        cx.respond(req.id, Response::content(ContentFormat::LINK_FORMAT, body).observable());
    }

    /// Simple registration (RFC 9176 §5.1): the directory fetches the source's `/.well-known/core` and
    /// registers what it lists, then answers 2.04.
    fn on_simple(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        let params = match params(&req.request) {
            Ok(p) if p.base.is_some() => {
                // The fetch goes to the source: a base elsewhere would aim it at another host.
                let e = RdError::BadRequest("simple registration takes no base: the directory asks the sender".into());
                return self.refuse(cx, req.id, &e);
            }
            Ok(p) => p,
            Err(e) => return self.refuse(cx, req.id, &e),
        };
        if params.ep.is_none() {
            return self.refuse(cx, req.id, &RdError::BadRequest("ep: the endpoint name is required".into()));
        }
        if self.pending.len() >= MAX_PENDING_SIMPLE {
            return self.refuse(cx, req.id, &RdError::Full);
        }
        let fetch = Request::get("/.well-known/core");
        let send = SendParams { timeout: Some(SIMPLE_FETCH_TIMEOUT), ..SendParams::default() };
        match cx.request(req.from, fetch, send) {
            Ok(rid) => {
                // The fetch goes over plain CoAP: so does the base.
                let sender = Sender { dtls: false, ..Sender::of(&req) };
                self.pending.insert(rid, PendingSimple { inbound: req.id, sender, params });
            }
            Err(e) => {
                cx.respond(req.id, Response::error(Code::SERVICE_UNAVAILABLE, format!("cannot ask for links: {e}")))
            }
        }
    }
}

impl Service for RdService {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        let segments = cx.subpath(&req.request);
        let segs: Vec<&str> = segments.iter().map(String::as_str).collect();
        let changes_state =
            matches!(req.request.method, Code::POST | Code::PUT | Code::DELETE | Code::PATCH | Code::IPATCH);
        let ours = matches!(segs[..], ["rd"] | ["rd", _] | ["rd-lookup", _] | [".well-known", "rd"]);
        // Every change from beyond loopback carries the Echo value its source was just given (RFC 9175
        // request freshness), not only a source that proved its address once: a blind spoofer may know or
        // guess a registered device's address and port. Loopback cannot be spoofed from outside (the
        // kernel drops such datagrams as martians), as the Entity Manager's policy holds too.
        // A request OSCORE verified is fresh by its replay window, whatever its outer message carried.
        let fresh = req.echoed || req.oscore_identity.is_some();
        if ours && changes_state && !fresh && !canonical(req.from.ip()).is_loopback() {
            return cx.challenge(req.id);
        }
        match (req.request.method, &segs[..]) {
            (Code::POST, ["rd"]) => self.on_registration(cx, req),
            (m, ["rd"]) => cx.respond(req.id, not_allowed(m, "POST (registration)")),
            (_, ["rd", id]) => {
                let id = id.to_string();
                self.on_registration_resource(cx, req, &id);
            }
            (_, ["rd-lookup", kind @ ("ep" | "res")]) => {
                let kind = kind.to_string();
                self.on_lookup(cx, req, &kind);
            }
            (Code::POST, [".well-known", "rd"]) => self.on_simple(cx, req),
            (m, [".well-known", "rd"]) => cx.respond(req.id, not_allowed(m, "POST (simple registration)")),
            _ => cx.respond(req.id, Response::error(Code::NOT_FOUND, "no such resource in this directory")),
        }
    }

    fn handle_response(&mut self, cx: &mut Context<'_>, id: RequestId, outcome: Outcome) {
        let Some(p) = self.pending.remove(&id) else { return };
        let links = match outcome {
            Outcome::Response { response, .. } if response.code == Code::CONTENT => {
                match std::str::from_utf8(&response.payload).map_err(|_| RdError::BadRequest("not UTF-8".into())) {
                    Ok(text) => self.dir.parse_links(text),
                    Err(e) => Err(e),
                }
            }
            Outcome::Response { response, .. } => {
                let msg = format!("the endpoint answered /.well-known/core with {}", response.code);
                return cx.respond(p.inbound, Response::error(Code::BAD_GATEWAY, msg));
            }
            _ => {
                let msg = "the endpoint did not answer GET /.well-known/core";
                return cx.respond(p.inbound, Response::error(Code::GATEWAY_TIMEOUT, msg));
            }
        };
        match links {
            Ok(links) => {
                // Its own /.well-known/core is not one of the resources it offers.
                let links = links.into_iter().filter(|l| l.target() != "/.well-known/core").collect();
                self.register(cx, p.inbound, p.sender, p.params, links, true);
            }
            Err(e) => {
                let msg = format!("the endpoint's /.well-known/core: {e}");
                cx.respond(p.inbound, Response::error(Code::BAD_GATEWAY, msg));
            }
        }
    }

    fn handle_timeout(&mut self, cx: &mut Context<'_>) {
        let gone = self.dir.expire(cx.now());
        if gone.is_empty() {
            return;
        }
        for reg in &gone {
            tracing::debug!(ep = %reg.ep, location = %reg.location(), "registration expired");
            // A failed removal leaves a row that the next start drops as expired.
            let _ = self.persist(None, Some(&reg.id));
        }
        self.stats.expired += gone.len() as u64;
        Self::lookups_changed(cx);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.dir.next_expiry()
    }

    fn links(&self) -> Vec<ResourceLink> {
        vec![
            ResourceLink::new("rd").attr("rt", "core.rd").attr("ct", "40"),
            ResourceLink::new("rd-lookup/ep").attr("rt", "core.rd-lookup-ep").attr("ct", "40").flag("obs"),
            ResourceLink::new("rd-lookup/res").attr("rt", "core.rd-lookup-res").attr("ct", "40").flag("obs"),
        ]
    }
}

/// The registration parameters of a request's query (RFC 9176 §5.3): `ep`, `d`, `lt`, `base`, and every
/// other `name=value` kept as an extra attribute. `page`, `count`, `rt`, `href` and `anchor` belong to
/// lookups and links, not to registrations.
fn params(request: &Request) -> Result<Params, RdError> {
    let mut p = Params::default();
    for (k, v) in request.options.query_pairs() {
        let once = |slot: &Option<String>| {
            if slot.is_some() {
                Err(RdError::BadRequest(format!("{k} given twice")))
            } else {
                Ok(Some(v.to_string()))
            }
        };
        match k {
            "ep" => p.ep = once(&p.ep)?,
            "d" => p.d = once(&p.d)?,
            "base" => p.base = once(&p.base)?,
            "lt" => {
                let lt =
                    v.parse::<u32>().map_err(|_| RdError::BadRequest(format!("lt={v}: seconds, 1 to 4294967295")))?;
                p.lt = Some(lt);
            }
            "page" | "count" | "rt" | "href" | "anchor" | "" => {
                return Err(RdError::BadRequest(format!("`{k}` is not a registration parameter")));
            }
            _ => {
                if p.extra.len() >= 16 || v.len() > 255 {
                    return Err(RdError::TooLarge("at most 16 extra attributes of 255 bytes".into()));
                }
                p.extra.push((k.to_string(), v.to_string()));
            }
        }
    }
    Ok(p)
}

/// The identity a request was made with, as the directory binds names to it: the OSCORE context that
/// protected it (`oscore:KID` or `oscore:KID@IDCONTEXT`, in hex), else the identity its DTLS session proved
/// (`dtls:NAME`, its PSK identity or certificate subject as text, or `dtls:hex:…` when that is not
/// printable UTF-8); `None` over plain CoAP. OSCORE goes first: it protects the request end to end, where a DTLS
/// session may end at a proxy.
pub fn identity_of(req: &IncomingRequest) -> Option<String> {
    if let Some(o) = &req.oscore_identity {
        return Some(match &o.kid_context {
            Some(c) => format!("oscore:{}@{}", hex(&o.kid), hex(c)),
            None => format!("oscore:{}", hex(&o.kid)),
        });
    }
    let id = req.peer_identity.as_deref()?;
    Some(match std::str::from_utf8(id) {
        Ok(text) if !text.is_empty() && !text.chars().any(char::is_control) => format!("dtls:{text}"),
        _ => format!("dtls:hex:{}", hex(id)),
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The source of a request as a base URI: `coap://192.0.2.1:5683`, `coap://[2001:db8::1]:5683`, and
/// `coaps://…` for a request that came over DTLS (the device is reached the way it registered).
fn source_uri(addr: SocketAddr, dtls: bool) -> String {
    let scheme = if dtls { "coaps" } else { "coap" };
    match (canonical(addr.ip()), addr) {
        (std::net::IpAddr::V4(v4), _) => format!("{scheme}://{v4}:{}", addr.port()),
        (std::net::IpAddr::V6(v6), SocketAddr::V6(a)) if a.scope_id() != 0 => {
            format!("{scheme}://[{v6}%25{}]:{}", a.scope_id(), addr.port())
        }
        (std::net::IpAddr::V6(v6), _) => format!("{scheme}://[{v6}]:{}", addr.port()),
    }
}

fn not_allowed(method: Code, allowed: &str) -> Response {
    Response::error(Code::METHOD_NOT_ALLOWED, format!("{method} not allowed here; allowed: {allowed}"))
}
