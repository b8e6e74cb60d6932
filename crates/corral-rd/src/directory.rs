//! The directory itself: registrations, their lifetimes, and lookups (RFC 9176 §5, §7).
//!
//! Owns: every registration (endpoint name, sector, base URI, lifetime, extra registration attributes,
//! its links), the index by `(ep, d)`, the bounds, the "first come, first remembered" rule for endpoint
//! names, and the lookup filters and paging. Knows nothing of CoAP messages: [`crate::RdService`] turns
//! requests into calls here and results into responses.
//!
//! # Decisions
//! - **A name registered with an identity is bound to it** (RFC 9176 §7: the directory authorizes changes
//!   to a registration by the credentials it was made with): a registration over DTLS (the PSK identity
//!   or certificate subject its session proved) or protected by OSCORE (the client's kid and ID Context)
//!   belongs to that identity until it ends; a registration, update or removal of it from another
//!   identity is refused (4.03), from none (plain CoAP) too (4.01), whatever the source address — and the
//!   owner may change its address. An identity re-registering a name it holds by address alone binds it.
//! - **Otherwise names are first come, first remembered** (RFC 9176 §7.5): the source IP address that
//!   registered an `(ep, d)` without an identity is its owner until the registration ends; a
//!   registration, update or removal of it from another address is refused (4.03). Without OSCORE or
//!   DTLS, the address is the only identity a CoAP server has; the service asks an unverified source to
//!   prove its address first (Echo, RFC 9175), so a blind spoofer can neither take a name nor hold one.
//!   [`Policy::Identity`] refuses registrations without an identity altogether (4.01).
//! - **Locations are unguessable**: `/rd/<16 hex digits>` from the driver's CSPRNG, so that knowing a
//!   device's name does not tell where to send its removal.
//! - **Bounded**: registrations in all, per source address and per network (a /24 for IPv4, a /56 for
//!   IPv6), links per registration, bytes of a registration's links, the memory all registrations take
//!   (counted by [`footprint`], an upper bound of what they hold on the heap), name lengths, lifetimes
//!   ([`Limits`]). A full directory answers 5.03, a source or network over its share 4.29 — refusals,
//!   never evictions of someone else's registration.
//! - **Shares smaller than the whole** (issue 41 item 8: 10,880 registrations from 170 addresses filled a
//!   directory of 10,000 that gave each address 64, and it refused every registrant after them): an
//!   address holds at most 16 registrations and 1/256 of the memory, a network at most 1,024 and 1/8, so
//!   that a flood from a few hundred addresses, or from one network, leaves most of the directory to
//!   everyone else. Not protected against: thousands of addresses in hundreds of networks (an IPv6
//!   attacker with many /56s); there, `--rd-policy identity` is the answer.
//! - **Lifetimes are capped** at [`Limits::max_lifetime`] (RFC 9176 §5.3's default, 90000 s, unless the
//!   operator says otherwise): a longer `lt` is refused (4.00 naming the maximum), not shortened, because
//!   RFC 9176 gives a registrant no way to learn the lifetime it got — one told nothing would refresh
//!   after the directory had forgotten it. A name squatted with `lt=4294967295` (136 years) is thus held
//!   for at most a day unless refreshed; registrations restored from an older store are cut to the cap.

use corral_proto::{Duration, Instant};
use corral_wire::link_format::{self, Link, LinkOwned};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::net::IpAddr;

/// The directory's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Registrations in all.
    pub registrations: usize,
    /// Registrations per source IP address.
    pub per_source: usize,
    /// Registrations per source network: a /24 for IPv4, a /56 for IPv6 ([`network_of`]).
    pub per_network: usize,
    /// Links in one registration.
    pub links: usize,
    /// Bytes of one registration's link-format document.
    pub bytes: usize,
    /// Bytes of memory all registrations may take, as [`footprint`] counts them; an address may take
    /// 1/256 of it ([`SOURCE_SHARE`]), a network 1/8 ([`NETWORK_SHARE`]).
    pub memory: usize,
    /// Bytes of an endpoint or sector name (RFC 9176 §9.3: at most 63).
    pub name: usize,
    /// The longest lifetime a registration may ask for, in seconds; a longer one is refused.
    pub max_lifetime: u32,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            registrations: 10_000,
            per_source: 16,
            per_network: 1_024,
            links: 256,
            bytes: 16 * 1024,
            memory: 64 << 20,
            name: 63,
            max_lifetime: DEFAULT_LIFETIME,
        }
    }
}

/// The part of [`Limits::memory`] one source address may take.
pub const SOURCE_SHARE: usize = 256;
/// The part of [`Limits::memory`] one source network may take.
pub const NETWORK_SHARE: usize = 8;

/// The network a source address is counted in: its /24 (IPv4) or /56 (IPv6, a site's usual delegation).
pub fn network_of(ip: IpAddr) -> IpAddr {
    let ip = corral_proto::canonical(ip);
    let len = if ip.is_ipv4() { 24 } else { 56 };
    corral_proto::Prefix::new(ip, len).map_or(ip, |p| p.addr())
}

/// Bytes of memory a registration is counted for: its strings, plus a fixed allowance per registration
/// (the struct, its places in the indexes), per link and per attribute (their headers, the vectors'
/// spare capacity, the allocator's rounding). Measured as an upper bound of the heap it holds (issue 41:
/// a directory filled to [`Limits::memory`] grows its RSS by less than the limit).
pub fn footprint(reg: &Registration) -> usize {
    const REGISTRATION: usize = 1024;
    const LINK: usize = 128;
    const ATTRIBUTE: usize = 160;
    let strings = reg.id.len() * 3 + reg.ep.len() * 2 + reg.d.as_ref().map_or(0, |d| d.len() * 2) + reg.base.len();
    let extra: usize = reg.extra.iter().map(|(k, v)| ATTRIBUTE + k.len() + v.len()).sum();
    let links: usize = reg
        .links
        .iter()
        .map(|l| {
            LINK + l.target().len() + l.attrs().map(|(n, v)| ATTRIBUTE + n.len() + v.map_or(0, str::len)).sum::<usize>()
        })
        .sum();
    REGISTRATION + strings + extra + links
}

/// What one holder (a source address, a network) has registered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Usage {
    registrations: usize,
    memory: usize,
}

/// Which registrations the directory accepts (RFC 9176 §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// Every registration; a name is bound to the identity it was registered with, or else to the source
    /// address (first come, first remembered).
    #[default]
    FirstCome,
    /// Only registrations made with an identity (DTLS or OSCORE); plain CoAP may look up, not register.
    Identity,
}

/// Who asks: the source address, and the identity a security layer proved for the request, as
/// [`identity_of`](crate::service::identity_of) names it (`dtls:alice`, `oscore:0a`, `oscore:0a@c0ffee`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requester {
    pub addr: IpAddr,
    pub identity: Option<String>,
}

impl Requester {
    /// A source without an identity (plain CoAP).
    pub fn plain(addr: IpAddr) -> Requester {
        Requester { addr, identity: None }
    }
}

/// RFC 9176 §5.3: the lifetime when a registration gives none (25 hours).
pub const DEFAULT_LIFETIME: u32 = 90_000;

/// What a registration says besides its links: the registration parameters of RFC 9176 §5.3.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params {
    pub ep: Option<String>,
    pub d: Option<String>,
    /// Seconds.
    pub lt: Option<u32>,
    pub base: Option<String>,
    /// Every other `name=value` (as `et`), kept and shown in lookups.
    pub extra: Vec<(String, String)>,
}

/// Why the directory refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RdError {
    /// The request is wrong (4.00), with what to fix.
    BadRequest(String),
    /// The name belongs to another source or identity (4.03).
    Forbidden(String),
    /// The request needs an identity it does not carry (4.01): the name is bound to one, or the directory
    /// takes registrations with an identity only.
    Unauthorized(String),
    /// No such registration (4.04): it expired or was removed; register again.
    NotFound,
    /// The links are too large (4.13).
    TooLarge(String),
    /// This source holds its share (4.29).
    SourceFull,
    /// This source's network (its /24 or /56) holds its share (4.29).
    NetworkFull,
    /// The directory is full (5.03).
    Full,
}

impl fmt::Display for RdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RdError::BadRequest(m) | RdError::Forbidden(m) | RdError::Unauthorized(m) | RdError::TooLarge(m) => {
                f.write_str(m)
            }
            RdError::NotFound => f.write_str("no such registration: it expired or was removed; register again"),
            RdError::SourceFull => f.write_str("this address holds as many registrations as it may"),
            RdError::NetworkFull => {
                f.write_str("this address's network (its /24 or /56) holds as many registrations as it may")
            }
            RdError::Full => f.write_str("the directory is full"),
        }
    }
}

/// One registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// The registration resource's last path segment (`/rd/<id>`).
    pub id: String,
    pub ep: String,
    pub d: Option<String>,
    /// The base URI its relative links resolve against.
    pub base: String,
    /// The base was given (`base=`) rather than taken from the source address.
    pub base_explicit: bool,
    /// Seconds.
    pub lt: u32,
    pub extra: Vec<(String, String)>,
    /// The links as registered (relative to `base`).
    pub links: Vec<LinkOwned>,
    /// The source address that registered it (counted against its share; owns the name when there is
    /// no `identity`).
    pub owner: IpAddr,
    /// The identity the name is bound to (`dtls:…`, `oscore:…`), if it was registered with one.
    pub identity: Option<String>,
    /// When it ends unless refreshed.
    pub expires: Instant,
}

impl Registration {
    /// The registration resource's path.
    pub fn location(&self) -> String {
        format!("/rd/{}", self.id)
    }

    /// The registration as an endpoint-lookup link (RFC 9176 §7.3): its location with `ep`, `d`, `base`,
    /// `lt` and the extra attributes.
    pub fn endpoint_link(&self) -> LinkOwned {
        let mut l = Link::new(self.location()).attr("ep", self.ep.clone());
        if let Some(d) = &self.d {
            l = l.attr("d", d.clone());
        }
        l = l.attr("base", self.base.clone()).attr("lt", self.lt.to_string());
        for (k, v) in &self.extra {
            l = l.attr(k.clone(), v.clone());
        }
        l
    }

    /// Its links with targets and anchors resolved against `base` (RFC 9176 Appendix C): what resource
    /// lookup returns.
    pub fn resolved_links(&self) -> impl Iterator<Item = LinkOwned> + '_ {
        self.links.iter().map(|l| {
            let mut out = Link::new(resolve(&self.base, l.target()));
            let mut anchored = false;
            for (name, value) in l.attrs() {
                if name.eq_ignore_ascii_case("anchor") {
                    anchored = true;
                    out = out.attr("anchor", resolve(&self.base, value.unwrap_or("")));
                } else {
                    out = match value {
                        Some(v) => out.attr(name.to_string(), v.to_string()),
                        None => out.flag(name.to_string()),
                    };
                }
            }
            if !anchored {
                out = out.attr("anchor", self.base.clone());
            }
            out
        })
    }

    /// Whether a registration-level filter `name=value` matches (RFC 9176 §7.2): `ep`, `d`, `base`, `lt`,
    /// an extra attribute, or `href` against the location. A trailing `*` matches a prefix.
    fn matches_param(&self, name: &str, value: &str) -> Option<bool> {
        let hit = |candidate: &str| match value.strip_suffix('*') {
            Some(prefix) => candidate.starts_with(prefix),
            None => candidate == value,
        };
        let lt = self.lt.to_string();
        match name {
            "ep" => Some(hit(&self.ep)),
            "d" => Some(self.d.as_deref().is_some_and(hit)),
            "base" => Some(hit(&self.base)),
            "lt" => Some(hit(&lt)),
            "href" => Some(hit(&self.location())),
            _ => {
                let mut values = self.extra.iter().filter(|(k, _)| k == name).peekable();
                values.peek().is_some().then(|| values.any(|(_, v)| hit(v)))
            }
        }
    }
}

/// `target` resolved against `base` (a scheme and authority, perhaps with a path): the Limited Link Format
/// of RFC 9176 Appendix C, where a target is absolute, absolute-path, or empty.
fn resolve(base: &str, target: &str) -> String {
    if target.contains("://") {
        return target.to_string();
    }
    let authority_end = base.find("://").map(|i| i + 3).and_then(|s| base[s..].find('/').map(|p| s + p));
    let origin = authority_end.map_or(base, |e| &base[..e]);
    if target.is_empty() {
        return base.to_string();
    }
    if target.starts_with('/') {
        return format!("{origin}{target}");
    }
    // A relative path: against the base's directory.
    let dir = match authority_end {
        Some(e) => &base[..e + base[e..].rfind('/').unwrap_or(0) + 1],
        None => return format!("{base}/{target}"),
    };
    format!("{dir}{target}")
}

/// A lookup's filters and page (RFC 9176 §7.2), from the request's Uri-Query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    pub filters: Vec<(String, String)>,
    pub page: Option<usize>,
    pub count: Option<usize>,
}

impl Query {
    /// The filters and page of `pairs`; `page` without `count` is refused.
    pub fn parse<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)>) -> Result<Query, RdError> {
        let mut q = Query::default();
        for (k, v) in pairs {
            let number =
                || v.parse::<usize>().map_err(|_| RdError::BadRequest(format!("{k}={v}: a non-negative integer")));
            match k {
                "page" => q.page = Some(number()?),
                "count" => q.count = Some(number()?),
                "" => {}
                _ => q.filters.push((k.to_string(), v.to_string())),
            }
        }
        if q.page.is_some() && q.count.is_none() {
            return Err(RdError::BadRequest("page needs count (RFC 9176 §7.2)".into()));
        }
        Ok(q)
    }

    fn paginate<T>(&self, items: impl Iterator<Item = T>) -> Vec<T> {
        let count = self.count.unwrap_or(usize::MAX);
        let skip = self.page.unwrap_or(0).saturating_mul(count);
        items.skip(skip).take(count).collect()
    }
}

/// The directory: registrations by id and by `(ep, d)`, in registration order for stable paging.
#[derive(Debug, Default)]
pub struct Directory {
    limits: Limits,
    policy: Policy,
    regs: BTreeMap<u64, Registration>,
    by_id: HashMap<String, u64>,
    by_key: HashMap<(String, Option<String>), u64>,
    per_source: HashMap<IpAddr, Usage>,
    /// By [`network_of`] the owner.
    per_network: HashMap<IpAddr, Usage>,
    /// Memory of every registration, as [`footprint`] counts it.
    memory: usize,
    /// When each registration ends, soonest first: expiry and the next wake-up without a scan.
    expiries: BTreeSet<(Instant, u64)>,
    seq: u64,
}

/// What a registration did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registered {
    /// A new registration at this location.
    Created(String),
    /// An existing `(ep, d)` registered again: same location, links and parameters replaced.
    Replaced(String),
}

impl Registered {
    pub fn id(&self) -> &str {
        match self {
            Registered::Created(id) | Registered::Replaced(id) => id,
        }
    }
}

impl Directory {
    pub fn new(limits: Limits) -> Directory {
        Directory { limits, ..Directory::default() }
    }

    /// Which registrations to accept from now on.
    pub fn set_policy(&mut self, policy: Policy) {
        self.policy = policy;
    }

    pub fn policy(&self) -> Policy {
        self.policy
    }

    pub fn len(&self) -> usize {
        self.regs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.regs.is_empty()
    }

    pub fn get(&self, id: &str) -> Option<&Registration> {
        self.by_id.get(id).and_then(|s| self.regs.get(s))
    }

    /// The registration of `(ep, d)`.
    pub fn by_name(&self, ep: &str, d: Option<&str>) -> Option<&Registration> {
        self.by_key.get(&(ep.to_string(), d.map(str::to_string))).and_then(|s| self.regs.get(s))
    }

    /// Puts a registration back as it was, replacing the one with its id (undoing a change the store
    /// could not record).
    pub fn put_back(&mut self, reg: Registration) {
        let _ = self.take(&reg.id);
        self.insert(reg);
    }

    /// Every registration, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Registration> {
        self.regs.values()
    }

    /// Checks a link-format document against the bounds and parses it.
    pub fn parse_links(&self, text: &str) -> Result<Vec<LinkOwned>, RdError> {
        if text.len() > self.limits.bytes {
            return Err(RdError::TooLarge(format!(
                "{} bytes of links; this directory keeps at most {} per registration",
                text.len(),
                self.limits.bytes
            )));
        }
        let mut links = Vec::new();
        for l in link_format::parse(text) {
            let l = l.map_err(|e| RdError::BadRequest(format!("the payload is not link-format (RFC 6690): {e}")))?;
            if links.len() == self.limits.links {
                return Err(RdError::TooLarge(format!("more than {} links in one registration", self.limits.links)));
            }
            links.push(l.into_owned());
        }
        Ok(links)
    }

    /// A registration (RFC 9176 §5.3): `params` from the query, `base` defaulting to `source_base` (the
    /// request's source as a URI), `fresh_id` the location to use if it is new.
    pub fn register(
        &mut self,
        now: Instant,
        who: &Requester,
        source_base: String,
        params: Params,
        links: Vec<LinkOwned>,
        fresh_id: String,
    ) -> Result<Registered, RdError> {
        if self.policy == Policy::Identity && who.identity.is_none() {
            return Err(RdError::Unauthorized(
                "this directory registers only clients with an identity: register over coaps:// (DTLS) or with \
                 OSCORE"
                    .into(),
            ));
        }
        let ep = params.ep.ok_or_else(|| RdError::BadRequest("ep: the endpoint name is required".into()))?;
        self.check_name("ep", &ep)?;
        if let Some(d) = &params.d {
            self.check_name("d", d)?;
        }
        let lt = lifetime(params.lt, self.limits.max_lifetime)?;
        if let Some(b) = &params.base {
            check_base(b)?;
        }
        let key = (ep.clone(), params.d.clone());
        if let Some(&seq) = self.by_key.get(&key) {
            let reg = self.regs.get(&seq).expect("indexed registration exists");
            may_change(reg, who, &format!("ep={ep}"))?;
            let mut new = reg.clone();
            if new.identity.is_none() {
                new.identity = who.identity.clone();
            }
            new.base_explicit = params.base.is_some();
            new.base = params.base.unwrap_or(source_base);
            new.lt = lt;
            new.extra = params.extra;
            new.links = links;
            let id = new.id.clone();
            self.replace(seq, new)?;
            self.set_expiry(seq, now + Duration::from_secs(u64::from(lt)));
            return Ok(Registered::Replaced(id));
        }
        let reg = Registration {
            id: fresh_id,
            ep,
            d: params.d,
            base_explicit: params.base.is_some(),
            base: params.base.unwrap_or(source_base),
            lt,
            extra: params.extra,
            links,
            owner: who.addr,
            identity: who.identity.clone(),
            expires: now + Duration::from_secs(u64::from(lt)),
        };
        self.room_for(reg.owner, footprint(&reg), true)?;
        let id = reg.id.clone();
        self.insert(reg);
        Ok(Registered::Created(id))
    }

    /// Puts a registration back (from the store, after a restart, at the service's clock's zero); `false`
    /// if it breaks a bound or its name or id is taken. A lifetime beyond [`Limits::max_lifetime`] (stored
    /// before the cap) is cut to it, from now.
    pub fn restore(&mut self, mut reg: Registration) -> bool {
        let key = (reg.ep.clone(), reg.d.clone());
        if self.by_key.contains_key(&key)
            || self.by_id.contains_key(&reg.id)
            || self.room_for(reg.owner, footprint(&reg), true).is_err()
        {
            return false;
        }
        reg.lt = reg.lt.min(self.limits.max_lifetime);
        reg.expires = reg.expires.min(Instant::ZERO + Duration::from_secs(u64::from(self.limits.max_lifetime)));
        self.insert(reg);
        true
    }

    /// Whether a registration of `owner` taking `memory` bytes fits: within the owner's share, its
    /// network's, and the whole directory's (`new`: one more registration; else one that replaces its own,
    /// already uncounted).
    fn room_for(&self, owner: IpAddr, memory: usize, new: bool) -> Result<(), RdError> {
        let one = usize::from(new);
        let (source_memory, network_memory) = (self.limits.memory / SOURCE_SHARE, self.limits.memory / NETWORK_SHARE);
        if memory > source_memory {
            return Err(RdError::TooLarge(format!(
                "these links take {memory} bytes of this directory's memory; one address may hold {source_memory} \
                 (fewer links or attributes)"
            )));
        }
        let fits = |u: Option<&Usage>, count: usize, bytes: usize| {
            let u = u.copied().unwrap_or_default();
            u.registrations + one <= count && u.memory + memory <= bytes
        };
        if !fits(self.per_source.get(&owner), self.limits.per_source, source_memory) {
            return Err(RdError::SourceFull);
        }
        if !fits(self.per_network.get(&network_of(owner)), self.limits.per_network, network_memory) {
            return Err(RdError::NetworkFull);
        }
        if self.regs.len() + one > self.limits.registrations || self.memory + memory > self.limits.memory {
            return Err(RdError::Full);
        }
        Ok(())
    }

    /// Counts `reg` for its owner, its network and the whole (or, with `add` false, no longer).
    fn account(&mut self, reg: &Registration, add: bool) {
        let memory = footprint(reg);
        for (table, key) in [(&mut self.per_source, reg.owner), (&mut self.per_network, network_of(reg.owner))] {
            let u = table.entry(key).or_default();
            if add {
                u.registrations += 1;
                u.memory += memory;
            } else {
                u.registrations = u.registrations.saturating_sub(1);
                u.memory = u.memory.saturating_sub(memory);
                if u.registrations == 0 {
                    table.remove(&key);
                }
            }
        }
        self.memory = if add { self.memory + memory } else { self.memory.saturating_sub(memory) };
    }

    /// Replaces registration `seq` by `new` (the same name, id and owner) if it fits the bounds.
    fn replace(&mut self, seq: u64, new: Registration) -> Result<(), RdError> {
        let old = self.regs.remove(&seq).expect("indexed registration exists");
        self.account(&old, false);
        let fits = self.room_for(new.owner, footprint(&new), false);
        let kept = if fits.is_ok() { new } else { old };
        self.account(&kept, true);
        self.regs.insert(seq, kept);
        fits
    }

    fn insert(&mut self, reg: Registration) {
        self.seq += 1;
        self.account(&reg, true);
        self.by_id.insert(reg.id.clone(), self.seq);
        self.by_key.insert((reg.ep.clone(), reg.d.clone()), self.seq);
        self.expiries.insert((reg.expires, self.seq));
        self.regs.insert(self.seq, reg);
    }

    /// Moves registration `seq`'s end to `expires`, in the registration and in the index.
    fn set_expiry(&mut self, seq: u64, expires: Instant) {
        if let Some(reg) = self.regs.get_mut(&seq) {
            self.expiries.remove(&(reg.expires, seq));
            reg.expires = expires;
            self.expiries.insert((expires, seq));
        }
    }

    /// A registration update (RFC 9176 §5.3.1): a new lifetime, base or extra attributes, and the
    /// lifetime starts again.
    pub fn update(
        &mut self,
        now: Instant,
        id: &str,
        who: &Requester,
        source_base: String,
        params: Params,
    ) -> Result<(), RdError> {
        if params.ep.is_some() || params.d.is_some() {
            return Err(RdError::BadRequest("ep and d cannot change in an update: register again".into()));
        }
        let lt = params.lt.map(|lt| lifetime(Some(lt), self.limits.max_lifetime)).transpose()?;
        if let Some(b) = &params.base {
            check_base(b)?;
        }
        let mut reg = self.owned_mut(id, who)?.clone();
        if let Some(lt) = lt {
            reg.lt = lt;
        }
        match params.base {
            Some(b) => {
                reg.base = b;
                reg.base_explicit = true;
            }
            // A device whose address changed and that gave no base is found at its new address.
            None if !reg.base_explicit => reg.base = source_base,
            None => {}
        }
        for (k, v) in params.extra {
            match reg.extra.iter_mut().find(|(n, _)| *n == k) {
                Some(e) => e.1 = v,
                None => reg.extra.push((k, v)),
            }
        }
        let expires = now + Duration::from_secs(u64::from(reg.lt));
        let seq = self.by_id[id];
        self.replace(seq, reg)?;
        self.set_expiry(seq, expires);
        Ok(())
    }

    /// A registration's removal (RFC 9176 §5.3.2).
    pub fn remove(&mut self, id: &str, who: &Requester) -> Result<Registration, RdError> {
        self.owned_mut(id, who)?;
        Ok(self.take(id).expect("checked above"))
    }

    fn owned_mut(&mut self, id: &str, who: &Requester) -> Result<&mut Registration, RdError> {
        let seq = *self.by_id.get(id).ok_or(RdError::NotFound)?;
        let reg = self.regs.get_mut(&seq).expect("indexed registration exists");
        may_change(reg, who, &reg.location())?;
        Ok(reg)
    }

    /// Takes a registration out whoever owns it (undoing a registration the store could not record).
    pub(crate) fn take(&mut self, id: &str) -> Option<Registration> {
        let seq = self.by_id.remove(id)?;
        let reg = self.regs.remove(&seq)?;
        self.expiries.remove(&(reg.expires, seq));
        self.by_key.remove(&(reg.ep.clone(), reg.d.clone()));
        self.account(&reg, false);
        Some(reg)
    }

    /// Ends every registration whose lifetime has passed; returns them.
    pub fn expire(&mut self, now: Instant) -> Vec<Registration> {
        let mut ended = Vec::new();
        while let Some(&(at, seq)) = self.expiries.first() {
            if at > now {
                break;
            }
            self.expiries.pop_first();
            let id = self.regs.get(&seq).map(|r| r.id.clone());
            if let Some(reg) = id.and_then(|id| self.take(&id)) {
                ended.push(reg);
            }
        }
        ended
    }

    /// When the next registration ends.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.expiries.first().map(|(at, _)| *at)
    }

    /// Endpoint lookup (RFC 9176 §7.3): registrations matching every filter — a filter on a registration
    /// parameter matches the registration, any other matches if one of its links has it.
    pub fn lookup_endpoints(&self, q: &Query) -> Vec<&Registration> {
        q.paginate(self.regs.values().filter(|r| {
            q.filters.iter().all(|(k, v)| match r.matches_param(k, v) {
                Some(hit) => hit,
                None => r.resolved_links().any(|l| link_format::matches(&l, k, v)),
            })
        }))
    }

    /// Resource lookup (RFC 9176 §7.3): the resolved links matching every filter, a filter on a
    /// registration parameter applying to the link's registration.
    pub fn lookup_resources(&self, q: &Query) -> Vec<LinkOwned> {
        let all = self.regs.values().flat_map(|r| {
            r.resolved_links().filter(move |l| {
                q.filters.iter().all(|(k, v)| match (k.as_str(), r.matches_param(k, v)) {
                    ("href", _) => link_format::matches(l, k, v),
                    (_, Some(hit)) => hit,
                    (_, None) => link_format::matches(l, k, v),
                })
            })
        });
        q.paginate(all)
    }

    fn check_name(&self, what: &str, name: &str) -> Result<(), RdError> {
        if name.is_empty() || name.len() > self.limits.name {
            return Err(RdError::BadRequest(format!("{what}: 1 to {} bytes", self.limits.name)));
        }
        if name.chars().any(|c| c.is_control()) {
            return Err(RdError::BadRequest(format!("{what}: no control characters")));
        }
        Ok(())
    }
}

/// Whether `who` may change `reg` (named `what` in the refusal): the identity it is bound to, or without
/// one the address that registered it.
fn may_change(reg: &Registration, who: &Requester, what: &str) -> Result<(), RdError> {
    match (&reg.identity, &who.identity) {
        (Some(bound), Some(asking)) if bound == asking => Ok(()),
        (Some(bound), Some(asking)) => Err(RdError::Forbidden(format!(
            "{what} is bound to the identity {bound} until its lifetime ends; {asking} may not change it"
        ))),
        (Some(bound), None) => Err(RdError::Unauthorized(format!(
            "{what} is bound to the identity {bound}: change it over coaps:// or OSCORE as that identity"
        ))),
        (None, _) if reg.owner == who.addr => Ok(()),
        (None, _) => Err(RdError::Forbidden(format!(
            "{what} is registered by another address until its lifetime ends (first come, first remembered)"
        ))),
    }
}

/// The lifetime a registration asks for (RFC 9176 §5.3: [`DEFAULT_LIFETIME`] when it gives none), within
/// 1 s and `max` (the module docs say why a longer one is refused, not shortened).
fn lifetime(lt: Option<u32>, max: u32) -> Result<u32, RdError> {
    match lt {
        None => Ok(DEFAULT_LIFETIME.min(max)),
        Some(0) => Err(RdError::BadRequest("lt: at least 1 second".into())),
        Some(lt) if lt > max => Err(RdError::BadRequest(format!(
            "lt={lt}: this directory keeps a registration at most {max} seconds; ask for that or less and \
             refresh before it ends"
        ))),
        Some(lt) => Ok(lt),
    }
}

fn check_base(base: &str) -> Result<(), RdError> {
    let scheme_ok = ["coap://", "coaps://", "coap+tcp://", "coaps+tcp://"].iter().any(|s| base.starts_with(s));
    if !scheme_ok || base.len() > 255 || base.contains(['?', '#']) {
        return Err(RdError::BadRequest(format!(
            "base={base}: a coap, coaps, coap+tcp or coaps+tcp URI without query or fragment"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_resolve_against_the_base_as_limited_link_format_says() {
        assert_eq!(resolve("coap://[2001:db8::1]:5683", "/temp"), "coap://[2001:db8::1]:5683/temp");
        assert_eq!(resolve("coap://h/a/b", "/c"), "coap://h/c");
        assert_eq!(resolve("coap://h/a/b", "c"), "coap://h/a/c");
        assert_eq!(resolve("coap://h", ""), "coap://h");
        assert_eq!(resolve("coap://h", "coap://other/x"), "coap://other/x");
    }

    fn at(ip: &str, identity: Option<&str>) -> Requester {
        Requester { addr: ip.parse().unwrap(), identity: identity.map(str::to_string) }
    }

    fn register(dir: &mut Directory, who: &Requester, fresh: &str) -> Result<Registered, RdError> {
        let params = Params { ep: Some("node1".into()), ..Params::default() };
        dir.register(Instant::ZERO, who, "coap://192.0.2.1:5683".into(), params, Vec::new(), fresh.into())
    }

    #[test]
    fn a_name_registered_with_an_identity_is_changed_by_that_identity_only() {
        let mut dir = Directory::new(Limits::default());
        let alice = at("192.0.2.1", Some("dtls:alice"));
        let id = register(&mut dir, &alice, "1").unwrap().id().to_string();
        // Another identity, even from the same address, is refused 4.03; none at all 4.01.
        let bob_same_address = at("192.0.2.1", Some("dtls:bob"));
        assert!(matches!(register(&mut dir, &bob_same_address, "2"), Err(RdError::Forbidden(_))));
        assert!(matches!(register(&mut dir, &at("192.0.2.1", None), "2"), Err(RdError::Unauthorized(_))));
        let no_params = Params::default;
        let base = || "coap://192.0.2.9:5683".to_string();
        assert!(matches!(
            dir.update(Instant::ZERO, &id, &bob_same_address, base(), no_params()),
            Err(RdError::Forbidden(_))
        ));
        assert!(matches!(dir.remove(&id, &at("192.0.2.1", None)), Err(RdError::Unauthorized(_))));
        // The owner may move: its identity, not its address, holds the name.
        let alice_moved = at("192.0.2.9", Some("dtls:alice"));
        dir.update(Instant::ZERO, &id, &alice_moved, base(), no_params()).unwrap();
        assert_eq!(dir.get(&id).unwrap().base, "coap://192.0.2.9:5683");
        assert!(matches!(register(&mut dir, &alice_moved, "3"), Ok(Registered::Replaced(_))));
        dir.remove(&id, &alice_moved).unwrap();
        assert!(dir.is_empty());
    }

    #[test]
    fn a_name_registered_without_an_identity_stays_first_come_first_remembered() {
        let mut dir = Directory::new(Limits::default());
        let id = register(&mut dir, &at("192.0.2.1", None), "1").unwrap().id().to_string();
        // Another address is refused, with an identity or without.
        assert!(matches!(register(&mut dir, &at("192.0.2.2", None), "2"), Err(RdError::Forbidden(_))));
        assert!(matches!(register(&mut dir, &at("192.0.2.2", Some("dtls:eve")), "2"), Err(RdError::Forbidden(_))));
        assert!(matches!(dir.remove(&id, &at("192.0.2.2", Some("dtls:eve"))), Err(RdError::Forbidden(_))));
        // Its own address registering again with an identity binds the name to it.
        register(&mut dir, &at("192.0.2.1", Some("dtls:alice")), "3").unwrap();
        assert_eq!(dir.get(&id).unwrap().identity.as_deref(), Some("dtls:alice"));
        assert!(matches!(dir.remove(&id, &at("192.0.2.1", None)), Err(RdError::Unauthorized(_))));
    }

    #[test]
    fn the_identity_policy_refuses_registrations_without_an_identity() {
        let mut dir = Directory::new(Limits::default());
        dir.set_policy(Policy::Identity);
        assert!(matches!(register(&mut dir, &at("192.0.2.1", None), "1"), Err(RdError::Unauthorized(_))));
        assert!(register(&mut dir, &at("192.0.2.1", Some("oscore:01")), "1").is_ok());
    }

    #[test]
    fn page_without_count_is_refused() {
        assert!(Query::parse([("page", "1")].into_iter()).is_err());
        let q = Query::parse([("page", "1"), ("count", "2"), ("rt", "temp*")].into_iter()).unwrap();
        assert_eq!(q.paginate(0..10), vec![2, 3]);
        assert_eq!(q.filters, vec![("rt".to_string(), "temp*".to_string())]);
    }
}
