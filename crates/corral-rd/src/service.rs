//! The directory as a CoAP service (RFC 9176): the registration interface `/rd`, registration resources
//! `/rd/<id>`, the lookup interfaces `/rd-lookup/ep` and `/rd-lookup/res` (observable), and simple
//! registration at `/.well-known/rd`. Mount it at `""` (it routes these paths itself); `/.well-known/core`
//! lists the interfaces with their `rt=core.rd*`.
//!
//! Owns: turning requests into [`Directory`] calls and their results into responses, the store writes
//! as effects (a change is answered only once it is stored: [`crate::store`], [`crate::writes`]),
//! lifetime expiry on the sans-IO clock, the simple
//! registrations in flight, and the notifications of the lookups' observers.
//!
//! Must never: change state for a request from beyond loopback that does not carry the Echo value its
//! source was just given (RFC 9175 — a blind spoofer could otherwise take, hold or rewrite names, or aim the
//! directory's simple registration fetch at a victim), keep state that grows without a bound, or panic on
//! a request.

use crate::directory::{Directory, Limits, Params, Policy, Query, RdError, Registered, Registration, Requester};
use crate::store::{StoreDone, StoreError, StoreOp, Stored, Write};
use crate::writes::{Change, Writes};
use corral_proto::wire::link_format;
use corral_proto::wire::{Code, ContentFormat, OptionNumber};
use corral_proto::{
    canonical, Context, Duration, EffectDone, EffectId, InboundId, IncomingRequest, Instant, Outcome, Request,
    RequestId, ResourceLink, Response, SendParams, Service,
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
    /// Kept in a store: the wall-clock time (Unix ms) of the sans-IO clock's zero, for the store's
    /// lifetimes. `None`: in memory only, no writes.
    durable: Option<u64>,
    writes: Writes,
    pending: HashMap<RequestId, PendingSimple>,
    stats: RdStats,
}

impl RdService {
    /// A directory in memory only.
    pub fn new(limits: Limits) -> RdService {
        RdService {
            dir: Directory::new(limits),
            durable: None,
            writes: Writes::default(),
            pending: HashMap::new(),
            stats: RdStats::default(),
        }
    }

    /// A directory kept in a store, with the registrations it holds (`Store::load`, which the driver
    /// calls once at start-up): `unix_ms_at_zero` is the wall-clock time of the driver's `Instant::ZERO`,
    /// so that a registration keeps its end across restarts. Registrations whose end has passed are
    /// dropped at the first timeout. Every change is written as an effect ([`crate::store`]): the node
    /// needs a runner for the directory's [`StoreOp`]s (corral-store's, or an `InlineRunner` over
    /// [`crate::store::run_op`]). Returns the service and how many rows could not be restored (over a
    /// bound, or a name or id taken twice).
    pub fn durable(limits: Limits, stored: Vec<Stored>, unix_ms_at_zero: u64) -> (RdService, usize) {
        let mut svc = RdService::new(limits);
        svc.durable = Some(unix_ms_at_zero);
        let mut skipped = 0;
        for Stored { mut reg, expires_unix_ms } in stored {
            reg.expires = Instant::from_millis(expires_unix_ms.saturating_sub(unix_ms_at_zero));
            if !svc.dir.restore(reg) {
                skipped += 1;
            }
        }
        (svc, skipped)
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

    /// How many changes wait for their writes.
    pub fn writes_in_flight(&self) -> usize {
        self.writes.len()
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

    /// `reg` as the store keeps it.
    fn save(&self, reg: &Registration) -> Write {
        let at_zero = self.durable.unwrap_or(0);
        Write::Save(Stored { reg: reg.clone(), expires_unix_ms: at_zero.saturating_add(reg.expires.as_millis()) })
    }

    /// Writes a change made in memory, then finishes it ([`RdService::finish`]): at once for a directory
    /// in memory only, else when the store says the write is done. `holds`: the registration it changes,
    /// kept from other changes meanwhile.
    fn write(
        &mut self,
        cx: &mut Context<'_>,
        inbound: Option<InboundId>,
        change: Change,
        write: Write,
        holds: Option<&Registration>,
    ) {
        if self.durable.is_none() {
            return self.finish(cx, inbound, change, Ok(()));
        }
        let id = cx.effect(Box::new(StoreOp(vec![write])));
        self.writes.park(id, inbound, change, holds);
    }

    /// A change's write is done (or failed): answers its request, or undoes it and answers 5.00.
    fn finish(
        &mut self,
        cx: &mut Context<'_>,
        inbound: Option<InboundId>,
        change: Change,
        result: Result<(), StoreError>,
    ) {
        let response = match (change, result) {
            (Change::Registered { id, simple, .. }, Ok(())) => {
                self.stats.registered += 1;
                Self::lookups_changed(cx);
                if simple {
                    Response::new(Code::CHANGED)
                } else {
                    let mut r = Response::new(Code::CREATED);
                    for seg in ["rd", id.as_str()] {
                        r = r.with_option(OptionNumber::LOCATION_PATH, seg.as_bytes());
                    }
                    r
                }
            }
            (Change::Updated { visible, .. }, Ok(())) => {
                self.stats.updated += 1;
                if visible {
                    Self::lookups_changed(cx);
                }
                Response::new(Code::CHANGED)
            }
            (Change::Removed(reg), Ok(())) => {
                self.stats.removed += 1;
                tracing::debug!(ep = %reg.ep, location = %reg.location(), "removed");
                Self::lookups_changed(cx);
                Response::new(Code::DELETED)
            }
            (Change::Expired, Ok(())) => return,
            (change, Err(e)) => {
                self.stats.store_failures += 1;
                tracing::warn!(error = %e, "resource directory: store write failed; change not made");
                match change {
                    Change::Registered { before: Some(prev), .. } => self.dir.put_back(prev),
                    Change::Registered { before: None, id, .. } => {
                        let _ = self.dir.take(&id);
                    }
                    Change::Updated { before, .. } => self.dir.put_back(before),
                    Change::Removed(reg) => self.dir.put_back(reg),
                    // A row left behind is dropped as expired at the next start.
                    Change::Expired => return,
                }
                Response::error(Code::INTERNAL_SERVER_ERROR, e.to_string())
            }
        };
        if let Some(inbound) = inbound {
            cx.respond(inbound, response);
        }
    }

    /// Refuses a change of a registration whose last change is still being written (see
    /// [`crate::writes`]); `true` if it did.
    fn refuse_busy(
        &mut self,
        cx: &mut Context<'_>,
        inbound: InboundId,
        id: Option<&str>,
        name: Option<(&str, Option<&str>)>,
    ) -> bool {
        if !self.writes.busy(id, name) {
            return false;
        }
        self.stats.refused += 1;
        let r = Response::error(Code::SERVICE_UNAVAILABLE, "a change of this registration is being stored: try again")
            .with_max_age(1);
        cx.respond(inbound, r);
        true
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
        if let Some(ep) = params.ep.as_deref() {
            if self.refuse_busy(cx, inbound, None, Some((ep, params.d.as_deref()))) {
                return;
            }
        }
        let before = params.ep.as_deref().and_then(|ep| self.dir.by_name(ep, params.d.as_deref()).cloned());
        let fresh = format!("{:016x}", cx.secret_u64());
        let who = Requester { addr: canonical(sender.addr.ip()), identity: sender.identity };
        let result = self.dir.register(cx.now(), &who, source_uri(sender.addr, sender.dtls), params, links, fresh);
        let done = match result {
            Ok(done) => done,
            Err(e) => return self.refuse(cx, inbound, &e),
        };
        let reg = self.dir.get(done.id()).cloned().expect("just registered");
        tracing::debug!(ep = %reg.ep, location = %reg.location(), lt = reg.lt, replaced = matches!(done, Registered::Replaced(_)), "registered");
        let write = self.save(&reg);
        let change = Change::Registered { before, id: reg.id.clone(), simple };
        self.write(cx, Some(inbound), change, write, Some(&reg));
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
                if self.refuse_busy(cx, req.id, Some(id), None) {
                    return;
                }
                let Some(before) = self.dir.get(id).cloned() else {
                    return self.refuse(cx, req.id, &RdError::NotFound);
                };
                if let Err(e) =
                    self.dir.update(cx.now(), id, &who, source_uri(req.from, req.peer_identity.is_some()), params)
                {
                    return self.refuse(cx, req.id, &e);
                }
                let reg = self.dir.get(id).cloned().expect("just updated");
                let view = |r: &Registration| (r.endpoint_link(), r.links.clone());
                let visible = view(&before) != view(&reg);
                let write = self.save(&reg);
                self.write(cx, Some(req.id), Change::Updated { before, visible }, write, Some(&reg));
            }
            Code::DELETE => {
                if self.refuse_busy(cx, req.id, Some(id), None) {
                    return;
                }
                let reg = match self.dir.remove(id, &who) {
                    Ok(r) => r,
                    Err(e) => return self.refuse(cx, req.id, &e),
                };
                let write = Write::Remove(reg.id.clone());
                let holds = reg.clone();
                self.write(cx, Some(req.id), Change::Removed(reg), write, Some(&holds));
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

    fn handle_effect(&mut self, cx: &mut Context<'_>, id: EffectId, done: EffectDone) {
        let Some(parked) = self.writes.unpark(id) else { return };
        let result = match done.downcast::<StoreDone>() {
            Ok(done) => done.0,
            Err(_) => Err(StoreError("the store's runner answered with something else".into())),
        };
        self.finish(cx, parked.inbound, parked.change, result);
    }

    fn handle_timeout(&mut self, cx: &mut Context<'_>) {
        let gone = self.dir.expire(cx.now());
        if gone.is_empty() {
            return;
        }
        for reg in &gone {
            tracing::debug!(ep = %reg.ep, location = %reg.location(), "registration expired");
        }
        if self.durable.is_some() {
            let removals = gone.iter().map(|r| Write::Remove(r.id.clone())).collect();
            let id = cx.effect(Box::new(StoreOp(removals)));
            self.writes.park(id, None, Change::Expired, None);
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
