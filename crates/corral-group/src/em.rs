//! The Entity Manager (seed 000 §2.3, §4; `entity-manager.md`): a sans-IO service, mounted at `em`, that
//! turns groups of CoAP resources into entities.
//!
//! Owns: the entity table (an in-memory copy of the store, so a use request never touches the store), the
//! fan-outs in progress (jobs), the management flows (validate → join → commit, rollback, leave), and the
//! answers to clients. Acts only through [`Context`]: member requests with `cx.request`, answers with
//! `cx.respond`; timers through `poll_timeout`. Must never: read a clock, block on the network, or panic on
//! anything a client or member sends. The one synchronous I/O is the [`Store`] (see [`crate::store`]).
//!
//! # Jobs
//! Every fan-out is a job: a list of members, one slot per member (waiting, requested, nested job, done),
//! the pacing (`delay`), the stop rule (`enr`, `timeout`, or the multicast window) and what to do with the
//! result — answer a client, feed a parent job (nested entities run as child jobs, without the network),
//! or continue a management flow. Jobs never call each other: a finished child's result is queued and
//! delivered after the current input, so there is no re-entrancy.
//!
//! # Unicast repair (beyond the paper)
//! A multicast use with `repair=unicast` does not finish when its window closes with members silent: the
//! multicast request ends and the same job goes on as a unicast use of the silent slots only (CON, paced
//! by `delay`, skipping members that answered), then answers as any use does.
//!
//! # Observed entities (beyond the paper)
//! `GET /em/<name>` with Observe=0 on a unicast entity whose members are all remote resources registers
//! the client as an observer (RFC 7641). The first registration starts a *watch*: the use job that answers
//! it asks every member with Observe=0 too, and the member observations outlive the job. The watch keeps
//! each member's latest result; every member notification updates it and, once every member has answered
//! (or failed), re-renders the entity for its observers (`cx.changed`). A notification — and any later
//! registration — is rendered from that cache with the observer's own query (`eo`, `enr`, Accept), so a
//! change costs one member notification, not a fan-out. Members that are other gateways' entities are
//! asked for the operation's aggregate, so such an entity has one watch per arithmetic operation. Members that do not support Observe keep their
//! first value. The watch ends — members deregistered with Observe=1 — when a member notification finds
//! the entity without observers, and when the entity is updated or deleted (its observers then get a
//! final rendering: the new entity, or 4.04). Multicast entities and entities with local (nested) members
//! answer a registration once, without Observe.

use crate::output::{self, MemberReport, Reading, UseResult};
use crate::pool::AddressPool;
use crate::profile::{Ect, Emt, Op, Profile, ProfilePatch, Repair, UseOverrides};
use crate::store::{Store, StoreError, StoredEntity};
use crate::uri::{self, MemberUri};
use corral_proto::wire::{Code, ContentFormat, OptionNumber, OBSERVE_REGISTER};
use corral_proto::{
    Context, Duration, InboundId, IncomingRequest, Instant, Outcome, Request, RequestId, ResourceLink, Response,
    SendParams, Service,
};
use serde_json::{json, Value as Json};
use std::collections::{BTreeMap, BTreeSet, HashSet};

type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::FixedState>;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use tracing::{debug, info, warn};

/// Configuration of the Entity Manager.
#[derive(Debug, Clone)]
pub struct EmConfig {
    /// Addresses of this gateway: a member `coap://<one of these>/em/<name>` is resolved locally.
    pub local_addrs: Vec<SocketAddr>,
    /// Group addresses for multicast entities of IPv6 members (default `ff1e::89:xx`).
    pub pool_v6: AddressPool,
    /// Group addresses for multicast entities of IPv4 members (default `239.255.89.x`).
    pub pool_v4: AddressPool,
    /// Port of multicast use requests (and of `mcstURI`).
    pub multicast_port: u16,
    /// The members' leisure (seed 000 Table 6: 5 s): replies to a multicast request are collected for
    /// `multicast_leisure + multicast_slack`, or until `enr` arrived.
    pub multicast_leisure: Duration,
    /// Allowance for the round trip after the last leisure.
    pub multicast_slack: Duration,
    /// `S` of seed 000 Eq. (2): estimated response size in bytes (80).
    pub response_size: u32,
    /// `R` of seed 000 Eq. (2): target rate in bytes per second (1000).
    pub rate: u32,
    /// Path of the members' membership resource (`mc`).
    pub mc_path: String,
    /// Hop-Limit (RFC 8768) put on requests to remote entities, to stop loops across gateways.
    pub hop_limit: u8,
    /// Entities the EM keeps at most.
    pub max_entities: usize,
    /// Concurrent client operations at most; beyond, 5.03 with Max-Age.
    pub max_jobs: usize,
    /// Nesting depth of local entities at most (cycles are refused, this bounds pathological chains).
    pub max_depth: usize,
}

impl Default for EmConfig {
    fn default() -> Self {
        EmConfig {
            local_addrs: Vec::new(),
            pool_v6: AddressPool::default_v6(),
            pool_v4: AddressPool::default_v4(),
            multicast_port: uri::COAP_PORT,
            multicast_leisure: Duration::from_secs(5),
            multicast_slack: Duration::from_secs(1),
            response_size: 80,
            rate: 1000,
            mc_path: "mc".into(),
            hop_limit: 16,
            max_entities: 4096,
            max_jobs: 4096,
            max_depth: 16,
        }
    }
}

/// How to reach one member.
#[derive(Debug, Clone, PartialEq)]
enum Target {
    /// A resource on another node. `entity`: its path is `/em/<name>` (another gateway's entity), so it is
    /// asked for SenML and the operation.
    Remote { addr: SocketAddr, path: Vec<String>, query: Vec<String>, entity: bool },
    /// An entity of this gateway.
    Local(String),
}

#[derive(Debug, Clone)]
struct Item {
    label: String,
    target: Target,
}

/// An entity: what is stored, plus the parsed members.
#[derive(Debug, Clone)]
struct Entity {
    stored: StoredEntity,
    items: Arc<[Item]>,
}

impl Entity {
    fn local_members(&self) -> impl Iterator<Item = &str> {
        self.items.iter().filter_map(|i| match &i.target {
            Target::Local(n) => Some(n.as_str()),
            _ => None,
        })
    }
}

type JobId = u64;

/// One member's result in a job.
#[derive(Debug, Clone)]
struct Res {
    /// `None`: no response (timeout, reset, not sent, cut off).
    code: Option<Code>,
    readings: Vec<Reading>,
    text: String,
}

impl Res {
    fn failed(text: impl Into<String>) -> Res {
        Res { code: None, readings: Vec::new(), text: text.into() }
    }
    fn ok(&self) -> bool {
        self.code.is_some_and(|c| c.is_success())
    }
    /// The result as report text; formatted only when asked (the per-member fast path allocates none).
    fn describe(&self) -> String {
        match (&self.code, self.text.is_empty()) {
            (_, false) => self.text.clone(),
            (Some(c), true) => format!("{c:#}"),
            (None, true) => "no response".into(),
        }
    }
}

#[derive(Debug)]
enum Slot {
    Waiting,
    Requested(RequestId),
    Child(JobId),
    Done(Res),
}

#[derive(Debug, Clone)]
enum Kind {
    Read,
    Actuate {
        method: Code,
        payload: Vec<u8>,
        cf: Option<ContentFormat>,
    },
    /// GET every member (falling back to `/.well-known/core?href=` on 4.05).
    Validate,
    Join(IpAddr),
    Leave(IpAddr),
}

#[derive(Debug, Clone, Copy)]
enum Sink {
    Client {
        id: InboundId,
        accept: ContentFormat,
    },
    Parent {
        job: JobId,
        slot: usize,
    },
    /// A management flow continues (the flow travels in the job).
    Flow,
}

#[derive(Debug)]
struct Job {
    kind: Kind,
    entity: String,
    sink: Sink,
    flow: Option<Box<Flow>>,
    items: Arc<[Item]>,
    op: Op,
    confirmable: bool,
    delay: Duration,
    enr: usize,
    stop_at_enr: bool,
    deadline: Option<Instant>,
    next: usize,
    next_at: Instant,
    slots: Vec<Slot>,
    wkc_tried: Vec<bool>,
    ok: usize,
    done: usize,
    multicast: bool,
    mc_done: bool,
    hop_limit: u8,
    depth: usize,
    timed_out: bool,
    timer: Option<Instant>,
    /// The client's answer registers it as an observer (Observe=0 on an observable entity).
    observable: bool,
    /// Member requests register observations for this watch (its key; see the module docs).
    watch: Option<String>,
    /// A multicast use whose silent members are asked again by unicast CON when the window closes
    /// (`repair=unicast`); cleared when the repair starts.
    repair: bool,
}

impl Job {
    fn complete(&self, now: Instant) -> bool {
        if self.timed_out || self.deadline.is_some_and(|d| now >= d) {
            return true;
        }
        if self.stop_at_enr && self.ok >= self.enr {
            return true;
        }
        if self.multicast {
            return self.mc_done || self.done == self.slots.len();
        }
        self.next == self.slots.len() && self.done == self.slots.len()
    }

    /// The multicast window closed with members silent and the use asks them again by unicast.
    fn needs_repair(&self, now: Instant) -> bool {
        self.repair
            && self.multicast
            && !self.timed_out
            && self.deadline.is_none_or(|d| now < d)
            && !(self.stop_at_enr && self.ok >= self.enr)
            && self.slots.iter().any(|s| matches!(s, Slot::Waiting))
    }

    fn wake_at(&self) -> Option<Instant> {
        let send = (self.next < self.slots.len() && !self.multicast).then_some(self.next_at);
        match (send, self.deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Create {
        generated: bool,
    },
    Update,
    Delete,
    /// After a restart: a multicast creation the crash interrupted is undone (members leave, record goes).
    Recover,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Validating,
    Joining,
    LeavingRemoved,
    RollingBack,
    LeavingAll,
}

/// A management operation in progress (creation, profile update, deletion).
#[derive(Debug)]
struct Flow {
    action: Action,
    /// The client to answer; `None` for the EM's own recovery.
    client: Option<InboundId>,
    /// A pending record of this (multicast) creation is in the store and must go if the creation fails.
    pending_saved: bool,
    accept: Option<ContentFormat>,
    name: String,
    old: Option<StoredEntity>,
    new: Option<StoredEntity>,
    items: Arc<[Item]>,
    reports: Vec<MemberReport>,
    stage: Stage,
    /// Members (labels) that joined in this flow, to roll back on failure.
    joined_now: Vec<String>,
    /// The group allocated by this flow (kept reserved while it runs).
    allocated: Option<IpAddr>,
    failure: Option<(Code, String)>,
}

impl Flow {
    fn report(&mut self, label: &str) -> &mut MemberReport {
        if let Some(i) = self.reports.iter().position(|r| r.member == label) {
            return &mut self.reports[i];
        }
        self.reports.push(MemberReport { member: label.to_string(), steps: Vec::new() });
        let last = self.reports.len() - 1;
        &mut self.reports[last]
    }
}

/// An observed entity: the member observations and each member's latest result (see the module docs).
#[derive(Debug)]
struct Watch {
    entity: String,
    /// The entity's path as its observers registered it (`/em/<name>`).
    path: String,
    /// The member observations still running, by slot.
    obs: Vec<Option<RequestId>>,
    /// Each member's latest result; `None` until it first answered or failed.
    latest: Vec<Option<Res>>,
    /// The use job whose member requests registered the observations, while it runs.
    job: Option<JobId>,
}

impl Watch {
    /// Every member has answered or failed: notifications can be rendered from the cache.
    fn ready(&self) -> bool {
        self.latest.iter().all(Option::is_some)
    }
}

/// An error answer: code and diagnostic.
type Fail = (Code, String);

fn bad(msg: impl Into<String>) -> Fail {
    (Code::BAD_REQUEST, msg.into())
}

const COUNTER_NAMES: &str = "names.seq";

fn pool_key(ip: &IpAddr) -> &'static str {
    if ip.is_ipv4() {
        "pool.v4"
    } else {
        "pool.v6"
    }
}

/// Whether `name` may name an entity: 1–64 of `[A-Za-z0-9_.-]`, starting alphanumeric.
pub fn valid_entity_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// The Entity Manager service. See the module docs and `entity-manager.md`.
pub struct EntityManager {
    config: EmConfig,
    store: Box<dyn Store>,
    entities: BTreeMap<String, Entity>,
    counters: BTreeMap<String, u64>,
    /// Names with a management flow in progress.
    busy: HashSet<String>,
    /// Groups reserved by flows in progress.
    reserved_groups: HashSet<IpAddr>,
    jobs: HashMap<JobId, Job>,
    next_job: JobId,
    requests: HashMap<RequestId, (JobId, Option<usize>)>,
    timers: BTreeSet<(Instant, JobId)>,
    /// Results of finished child jobs, to deliver to their parents after the current input.
    ready: Vec<(JobId, usize, Res)>,
    client_jobs: usize,
    /// Interrupted multicast creations found at start-up, undone at the first wake-up.
    recovery: Vec<StoredEntity>,
    /// Observed entities, by name.
    watches: HashMap<String, Watch>,
    /// Member observations of the watches: watch key and member slot.
    watch_requests: HashMap<RequestId, (String, usize)>,
}

impl std::fmt::Debug for EntityManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EntityManager")
            .field("entities", &self.entities.len())
            .field("jobs", &self.jobs.len())
            .finish_non_exhaustive()
    }
}

impl EntityManager {
    /// Loads every entity from `store`. Fails if the store cannot be read or holds an invalid entity.
    pub fn new(config: EmConfig, store: Box<dyn Store>) -> Result<EntityManager, StoreError> {
        config.pool_v6.check().map_err(StoreError)?;
        config.pool_v4.check().map_err(StoreError)?;
        let snap = store.load()?;
        let mut em = EntityManager {
            config,
            store,
            entities: BTreeMap::new(),
            counters: snap.counters,
            busy: HashSet::new(),
            reserved_groups: HashSet::new(),
            jobs: HashMap::default(),
            next_job: 1,
            requests: HashMap::default(),
            timers: BTreeSet::new(),
            ready: Vec::new(),
            client_jobs: 0,
            recovery: Vec::new(),
            watches: HashMap::default(),
            watch_requests: HashMap::default(),
        };
        for stored in snap.entities {
            if stored.pending {
                warn!(entity = %stored.name, "multicast creation interrupted by a restart: members will be asked to leave");
                em.busy.insert(stored.name.clone());
                em.recovery.push(stored);
                continue;
            }
            let items = em
                .resolve_items(&stored.profile.er)
                .map_err(|(_, m)| StoreError(format!("entity {}: {m}", stored.name)))?;
            em.entities.insert(stored.name.clone(), Entity { stored, items: items.into() });
        }
        info!(entities = em.entities.len(), "entity manager loaded");
        Ok(em)
    }

    pub fn config(&self) -> &EmConfig {
        &self.config
    }

    /// The store, to inspect it (tests, diagnostics).
    pub fn store(&self) -> &dyn Store {
        self.store.as_ref()
    }

    /// Entity names, sorted.
    pub fn entity_names(&self) -> Vec<String> {
        self.entities.keys().cloned().collect()
    }

    /// An entity as stored.
    pub fn entity(&self, name: &str) -> Option<&StoredEntity> {
        self.entities.get(name).map(|e| &e.stored)
    }

    /// Operations in progress (fan-outs and flows).
    pub fn jobs_in_progress(&self) -> usize {
        self.jobs.len()
    }

    // ------------------------------------------------------------------------------------------------
    // Members
    // ------------------------------------------------------------------------------------------------

    fn resolve_target(&self, text: &str) -> Result<Target, String> {
        match uri::parse(text).map_err(|e| e.0)? {
            MemberUri::Relative { path } => match path.as_slice() {
                [em, name] if em == "em" => Ok(Target::Local(name.clone())),
                _ => Err("a relative member must be /em/<name> (an entity of this gateway)".into()),
            },
            MemberUri::Coap { addr, path, query } => {
                if addr.ip().is_multicast() || addr.ip().is_unspecified() {
                    return Err(format!("{} is not a unicast address", addr.ip()));
                }
                let entity = path.len() == 2 && path[0] == "em";
                if entity && self.config.local_addrs.contains(&addr) {
                    if !query.is_empty() {
                        return Err("a member that is an entity of this gateway may not carry a query".into());
                    }
                    return Ok(Target::Local(path[1].clone()));
                }
                Ok(Target::Remote { addr, path, query, entity })
            }
        }
    }

    fn resolve_items(&self, er: &[String]) -> Result<Vec<Item>, Fail> {
        er.iter()
            .map(|m| {
                self.resolve_target(m)
                    .map(|target| Item { label: m.clone(), target })
                    .map_err(|why| bad(format!("malformed member URI {m}: {why}")))
            })
            .collect()
    }

    /// Checks of a new member list against the other entities: local members exist, no cycle, and the
    /// constraints of multicast entities.
    fn check_members(&self, name: &str, profile: &Profile, items: &[Item]) -> Result<(), Fail> {
        for it in items {
            if let Target::Local(child) = &it.target {
                if child == name {
                    return Err(bad(format!("cycle: entity {name} cannot be a member of itself ({})", it.label)));
                }
                if !self.entities.contains_key(child) {
                    return Err(bad(format!("member {}: no entity {child} on this gateway", it.label)));
                }
            }
        }
        // A cycle exists if `name` is reachable from one of its new local members.
        for it in items {
            let Target::Local(child) = &it.target else { continue };
            let mut stack = vec![(child.clone(), vec![name.to_string(), child.clone()])];
            let mut seen = HashSet::new();
            while let Some((cur, path)) = stack.pop() {
                if !seen.insert(cur.clone()) {
                    continue;
                }
                let Some(e) = self.entities.get(&cur) else { continue };
                for next in e.local_members() {
                    let mut p = path.clone();
                    p.push(next.to_string());
                    if next == name {
                        return Err(bad(format!("cycle of nested entities: {}", p.join(" → "))));
                    }
                    stack.push((next.to_string(), p));
                }
            }
        }
        if profile.ect == Ect::Multicast {
            let mut first: Option<(&Item, &Vec<String>, &Vec<String>)> = None;
            for it in items {
                let Target::Remote { addr, path, query, entity } = &it.target else {
                    return Err(bad(format!(
                        "member {}: a multicast entity's members must be device resources, not entities",
                        it.label
                    )));
                };
                if *entity {
                    return Err(bad(format!(
                        "member {}: a multicast entity's members must be device resources, not entities",
                        it.label
                    )));
                }
                match first {
                    None => first = Some((it, path, query)),
                    Some((f, fp, fq)) => {
                        if fp != path || fq != query {
                            return Err(bad(format!(
                                "multicast members must share one resource path (seed 000 §4.2): {} and {} differ",
                                f.label, it.label
                            )));
                        }
                        let Target::Remote { addr: fa, .. } = &f.target else { continue };
                        if fa.is_ipv4() != addr.is_ipv4() {
                            return Err(bad(format!(
                                "multicast members must share an address family: {} and {} differ",
                                f.label, it.label
                            )));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------------------------------------------
    // Jobs
    // ------------------------------------------------------------------------------------------------

    #[allow(clippy::too_many_arguments)]
    fn new_job(
        &mut self,
        now: Instant,
        kind: Kind,
        entity: &str,
        sink: Sink,
        items: Arc<[Item]>,
        op: Op,
        confirmable: bool,
        delay: Duration,
        enr: usize,
        stop_at_enr: bool,
        deadline: Option<Instant>,
        hop_limit: u8,
        depth: usize,
    ) -> JobId {
        let id = self.next_job;
        self.next_job += 1;
        let n = items.len();
        let validate = matches!(kind, Kind::Validate);
        self.jobs.insert(
            id,
            Job {
                kind,
                entity: entity.to_string(),
                sink,
                flow: None,
                items,
                op,
                confirmable,
                delay,
                enr,
                stop_at_enr,
                deadline,
                next: 0,
                next_at: now,
                slots: (0..n).map(|_| Slot::Waiting).collect(),
                wkc_tried: if validate { vec![false; n] } else { Vec::new() },
                ok: 0,
                done: 0,
                multicast: false,
                mc_done: false,
                hop_limit,
                depth,
                timed_out: false,
                timer: None,
                observable: false,
                watch: None,
                repair: false,
            },
        );
        id
    }

    /// When a fan-out without a `timeout` gives up on silent members *(decision)*: every member asked (the
    /// pacing, after the multicast window if there is one) plus one MAX_TRANSMIT_WAIT (93 s by default). A
    /// member exchange ends by itself within MAX_TRANSMIT_WAIT of its first transmission, but one that waited
    /// in the NSTART=1 queue behind a silent member's (several uses of one entity, one member down) could
    /// otherwise keep the answer past the client's own EXCHANGE_LIFETIME (247 s), and the client would never
    /// see it. The answer then carries what arrived.
    fn default_deadline(&self, cx: &Context<'_>, n: usize, delay: Duration, multicast: bool) -> Instant {
        let window =
            if multicast { self.config.multicast_leisure + self.config.multicast_slack } else { Duration::ZERO };
        let mtw = cx.endpoint().config().params.max_transmit_wait();
        cx.now() + window + delay.saturating_mul(n as u64) + mtw
    }

    /// Starts a use (read or actuation) of an entity. Errors are answered by the caller.
    #[allow(clippy::too_many_arguments)]
    fn start_use(
        &mut self,
        cx: &mut Context<'_>,
        name: &str,
        sink: Sink,
        o: &UseOverrides,
        kind: Kind,
        hop_limit: u8,
        depth: usize,
    ) -> Result<JobId, Fail> {
        let Some(ent) = self.entities.get(name) else {
            return Err((Code::NOT_FOUND, format!("no entity {name}")));
        };
        if depth > self.config.max_depth {
            return Err((
                Code::INTERNAL_SERVER_ERROR,
                format!("entity {name}: nesting deeper than {}", self.config.max_depth),
            ));
        }
        let p = &ent.stored.profile;
        let n = ent.items.len();
        let actuate = matches!(kind, Kind::Actuate { .. });
        let op = o.eo.unwrap_or_else(|| p.default_op());
        let enr = match o.enr {
            Some(e) if e as usize > n => {
                return Err(bad(format!("enr={e} exceeds the number of members of {name} ({n})")))
            }
            Some(e) => e as usize,
            None => p.enr_resolved().clamp(1, n.max(1)),
        };
        let emt = o.emt.unwrap_or(p.emt);
        let delay = o.delay.unwrap_or(p.delay).resolve(n, self.config.response_size, self.config.rate);
        let timeout = o.timeout.or(p.timeout);
        let now = cx.now();
        let multicast = p.ect == Ect::Multicast;
        let repair = match o.repair {
            Some(Repair::Unicast) if !multicast => {
                return Err(bad(format!("repair=unicast applies to multicast entities; {name} is unicast")))
            }
            Some(r) => r,
            None => p.repair,
        } == Repair::Unicast;
        // A plain multicast use is bounded by its window; one that may send unicast requests gets the default.
        let deadline = match timeout {
            Some(ms) => Some(now + Duration::from_millis(ms)),
            None if multicast && !repair => None,
            None => Some(self.default_deadline(cx, n, Duration::from(delay), multicast)),
        };
        let group = ent.stored.group;
        let items = ent.items.clone();
        let (enr, stop) = if actuate { (n, false) } else { (enr, true) };
        let id = self.new_job(
            now,
            kind,
            name,
            sink,
            items,
            op,
            emt == Emt::Con,
            Duration::from(delay),
            enr,
            stop,
            deadline,
            hop_limit,
            depth,
        );
        if multicast {
            if let Some(job) = self.jobs.get_mut(&id) {
                // Only requests that may be repeated: a member whose answer to the multicast request was lost
                // may have acted on it, and a second POST (e.g. `toggle`) would act twice (RFC 7252 §5.1).
                job.repair = repair
                    && match &job.kind {
                        Kind::Read => true,
                        Kind::Actuate { method, .. } => matches!(*method, Code::PUT | Code::DELETE),
                        _ => false,
                    };
            }
            self.start_multicast(cx, id, group);
        }
        Ok(id)
    }

    /// The one NON multicast request of a multicast entity's use.
    fn start_multicast(&mut self, cx: &mut Context<'_>, id: JobId, group: Option<IpAddr>) {
        let window = self.config.multicast_leisure + self.config.multicast_slack;
        let port = self.config.multicast_port;
        let Some(job) = self.jobs.get_mut(&id) else { return };
        job.multicast = true;
        job.next = job.slots.len();
        let (Some(group), Some(first)) = (group, job.items.first()) else {
            job.timed_out = true;
            return;
        };
        let Target::Remote { path, query, .. } = &first.target else {
            job.timed_out = true;
            return;
        };
        let mut req = Request::new(Code::GET);
        for s in path {
            req.options.push_str(OptionNumber::URI_PATH, s);
        }
        for q in query {
            req.options.push_str(OptionNumber::URI_QUERY, q);
        }
        if let Kind::Actuate { method, payload, cf } = &job.kind {
            req.method = *method;
            req.payload = payload.clone();
            if let Some(cf) = cf {
                req = req.with_content_format(*cf);
            }
        }
        let params = SendParams { confirmable: false, multicast_window: Some(window), ..SendParams::default() };
        match cx.request(SocketAddr::new(group, port), req, params) {
            Ok(rid) => {
                self.requests.insert(rid, (id, None));
            }
            Err(e) => {
                warn!(error = %e, "multicast request not sent");
                job.mc_done = true;
            }
        }
    }

    /// The request to send to a remote member for a job.
    fn member_request(&self, job: &Job, i: usize, target: &Target) -> Option<(SocketAddr, Request, bool)> {
        let Target::Remote { addr, path, query, entity } = target else { return None };
        let mut req = Request::new(Code::GET);
        let resource = |req: &mut Request| {
            for s in path {
                req.options.push_str(OptionNumber::URI_PATH, s);
            }
            for q in query {
                req.options.push_str(OptionNumber::URI_QUERY, q);
            }
        };
        let ask_entity = |req: &mut Request, op: Option<Op>| {
            if *entity {
                if let Some(op) = op.filter(|o| o.is_arithmetic()) {
                    req.options.push_str(OptionNumber::URI_QUERY, &format!("eo={op}"));
                }
                req.options.set_uint(OptionNumber::ACCEPT, u64::from(ContentFormat::SENML_CBOR.0));
                req.options.set_uint(OptionNumber::HOP_LIMIT, u64::from(job.hop_limit.saturating_sub(1).max(1)));
            }
        };
        let confirmable = match &job.kind {
            Kind::Read => {
                resource(&mut req);
                ask_entity(&mut req, Some(job.op));
                if job.watch.is_some() {
                    req.options.set_uint(OptionNumber::OBSERVE, u64::from(OBSERVE_REGISTER));
                }
                job.confirmable
            }
            Kind::Actuate { method, payload, cf } => {
                resource(&mut req);
                req.method = *method;
                req.payload = payload.clone();
                if let Some(cf) = cf {
                    req = req.with_content_format(*cf);
                }
                if *entity {
                    req.options.set_uint(OptionNumber::HOP_LIMIT, u64::from(job.hop_limit.saturating_sub(1).max(1)));
                }
                job.confirmable
            }
            Kind::Validate => {
                if job.wkc_tried.get(i).copied().unwrap_or(false) {
                    req = req.with_path(".well-known/core").with_query(&format!("href=/{}", path.join("/")));
                } else {
                    resource(&mut req);
                    ask_entity(&mut req, Some(job.op));
                }
                true
            }
            Kind::Join(g) | Kind::Leave(g) => {
                let act = if matches!(job.kind, Kind::Join(_)) { "act=add" } else { "act=del" };
                req = Request::new(Code::POST).with_path(&self.config.mc_path).with_query(act).with_payload(match g {
                    IpAddr::V4(a) => a.octets().to_vec(),
                    IpAddr::V6(a) => a.octets().to_vec(),
                });
                true
            }
        };
        Some((*addr, req, confirmable))
    }

    fn send_slot(&mut self, cx: &mut Context<'_>, id: JobId, i: usize) {
        let Some(job) = self.jobs.get(&id) else { return };
        let items = job.items.clone();
        let target = &items[i].target;
        let slot = match target {
            Target::Local(child) => {
                let kind = match &job.kind {
                    Kind::Actuate { .. } => job.kind.clone(),
                    _ => Kind::Read,
                };
                // Arithmetic operations ask the child for its aggregate (avg of averages); `lst` and `count`
                // take the child's own default.
                let o = UseOverrides { eo: Some(job.op).filter(|o| o.is_arithmetic()), ..UseOverrides::default() };
                let (hop, depth) = (job.hop_limit, job.depth + 1);
                let child = child.clone();
                match self.start_use(cx, &child, Sink::Parent { job: id, slot: i }, &o, kind, hop, depth) {
                    Ok(cid) => {
                        self.drive(cx, cid);
                        Slot::Child(cid)
                    }
                    Err((code, msg)) => {
                        Slot::Done(Res { code: Some(code), readings: Vec::new(), text: format!("{code:#}: {msg}") })
                    }
                }
            }
            Target::Remote { entity, .. } => {
                if *entity && job.hop_limit <= 1 {
                    Slot::Done(Res::failed(format!("{:#}: not forwarded", Code::HOP_LIMIT_REACHED)))
                } else {
                    let Some((addr, req, confirmable)) = self.member_request(job, i, target) else { return };
                    let watch = job.watch.clone();
                    match cx.request(addr, req, SendParams { confirmable, ..SendParams::default() }) {
                        Ok(rid) => {
                            self.requests.insert(rid, (id, Some(i)));
                            if let Some(key) = watch {
                                self.watch_track(id, &key, i, rid);
                            }
                            Slot::Requested(rid)
                        }
                        Err(e) => Slot::Done(Res::failed(format!("not sent: {e}"))),
                    }
                }
            }
        };
        self.set_slot(id, i, slot);
    }

    fn set_slot(&mut self, id: JobId, i: usize, slot: Slot) {
        let Some(job) = self.jobs.get_mut(&id) else { return };
        if let Slot::Done(res) = &slot {
            if matches!(job.slots[i], Slot::Done(_)) {
                return; // a second reply from the same member (multicast) counts once
            }
            job.done += 1;
            if res.ok() {
                job.ok += 1;
            }
        }
        job.slots[i] = slot;
    }

    /// Sends what is due, finishes the job if it is complete, re-arms its timer.
    fn drive(&mut self, cx: &mut Context<'_>, id: JobId) {
        let now = cx.now();
        loop {
            let Some(job) = self.jobs.get(&id) else { return };
            if job.complete(now) {
                if job.needs_repair(now) {
                    self.start_repair(cx, id);
                    continue;
                }
                self.finish(cx, id);
                return;
            }
            let enough = job.stop_at_enr && job.ok >= job.enr;
            if !job.multicast && job.next < job.slots.len() && job.next_at <= now && !enough {
                let i = job.next;
                let job = self.jobs.get_mut(&id).expect("job exists: checked above");
                job.next += 1;
                if !matches!(job.slots[i], Slot::Waiting) {
                    continue; // answered the multicast request: a repair skips it, without a delay
                }
                job.next_at = if job.delay.is_zero() { now } else { job.next_at + job.delay };
                self.send_slot(cx, id, i);
                continue;
            }
            break;
        }
        let Some(job) = self.jobs.get_mut(&id) else { return };
        let wake = job.wake_at();
        if job.timer != wake {
            if let Some(old) = job.timer.take() {
                self.timers.remove(&(old, id));
            }
            if let Some(w) = wake {
                self.timers.insert((w, id));
            }
            job.timer = wake;
        }
    }

    /// `repair=unicast`: the multicast window closed with members silent. The multicast request ends and
    /// the job goes on as a unicast use of the silent members only, by CON, paced by the entity's delay.
    fn start_repair(&mut self, cx: &mut Context<'_>, id: JobId) {
        let mine: Vec<RequestId> =
            self.requests.iter().filter(|(_, (j, s))| *j == id && s.is_none()).map(|(r, _)| *r).collect();
        for rid in mine {
            cx.cancel(rid);
            self.requests.remove(&rid);
        }
        let Some(job) = self.jobs.get_mut(&id) else { return };
        let silent = job.slots.iter().filter(|s| matches!(s, Slot::Waiting)).count();
        debug!(entity = %job.entity, job = id, silent, "multicast window closed; asking the silent members by unicast");
        job.repair = false;
        job.multicast = false;
        job.mc_done = true;
        job.confirmable = true;
        job.next = 0;
        job.next_at = cx.now();
    }

    /// Delivers queued child results to their parents until nothing is left.
    fn pump(&mut self, cx: &mut Context<'_>) {
        while let Some((parent, slot, res)) = self.ready.pop() {
            let live = self.jobs.get(&parent).is_some_and(|j| matches!(j.slots.get(slot), Some(Slot::Child(_))));
            if live {
                self.set_slot(parent, slot, Slot::Done(res));
                self.drive(cx, parent);
            }
        }
    }

    /// Abandons a job and everything it started (no answer is sent).
    fn cancel_job(&mut self, cx: &mut Context<'_>, id: JobId) {
        let Some(mut job) = self.jobs.remove(&id) else { return };
        if let Some(t) = job.timer.take() {
            self.timers.remove(&(t, id));
        }
        self.release_outstanding(cx, id, &mut job, "cancelled");
    }

    /// Cancels the requests and child jobs still running for job `id`, marking their slots done with `why`.
    fn release_outstanding(&mut self, cx: &mut Context<'_>, id: JobId, job: &mut Job, why: &str) {
        if job.multicast {
            let mine: Vec<RequestId> =
                self.requests.iter().filter(|(_, (j, s))| *j == id && s.is_none()).map(|(r, _)| *r).collect();
            for rid in mine {
                cx.cancel(rid);
                self.requests.remove(&rid);
            }
            job.mc_done = true;
        }
        for slot in job.slots.iter_mut() {
            match std::mem::replace(slot, Slot::Waiting) {
                Slot::Requested(rid) => {
                    // A member observation of a watch goes on after the job that started it.
                    if !self.watch_requests.contains_key(&rid) {
                        cx.cancel(rid);
                    }
                    self.requests.remove(&rid);
                    *slot = Slot::Done(Res::failed(why));
                }
                Slot::Child(cid) => {
                    self.cancel_job(cx, cid);
                    *slot = Slot::Done(Res::failed(why));
                }
                Slot::Waiting => *slot = Slot::Done(Res::failed(if job.multicast { why } else { "not asked" })),
                done @ Slot::Done(_) => *slot = done,
            }
        }
    }

    fn finish(&mut self, cx: &mut Context<'_>, id: JobId) {
        let Some(mut job) = self.jobs.remove(&id) else { return };
        if job.watch.is_some() {
            self.watch_unasked(cx, id, &job);
        }
        if let Some(key) = &job.watch {
            self.watch_job_done(id, key);
        }
        if let Some(t) = job.timer.take() {
            self.timers.remove(&(t, id));
        }
        let timed_out = job.timed_out || job.deadline.is_some_and(|d| cx.now() >= d);
        let why = if timed_out {
            "no reply before the entity timeout"
        } else if job.multicast {
            "no reply in the multicast window"
        } else {
            "not needed (enough replies)"
        };
        self.release_outstanding(cx, id, &mut job, why);
        match job.kind {
            Kind::Read | Kind::Actuate { .. } => self.finish_use(cx, job, timed_out),
            _ => self.flow_step(cx, job),
        }
    }

    fn finish_use(&mut self, cx: &mut Context<'_>, job: Job, timed_out: bool) {
        let n = job.slots.len();
        let (code, payload_for, res_for_parent) = if let Kind::Actuate { .. } = job.kind {
            let mut reports = Vec::with_capacity(n);
            let mut all_ok = true;
            let mut silent = false;
            for (it, slot) in job.items.iter().zip(&job.slots) {
                let text = match slot {
                    Slot::Done(r) => {
                        all_ok &= r.ok();
                        silent |= r.code.is_none();
                        r.describe()
                    }
                    _ => "not asked".into(),
                };
                reports.push(MemberReport { member: it.label.clone(), steps: vec![("result".into(), text)] });
            }
            let code = if all_ok {
                Code::CHANGED
            } else if silent || timed_out {
                Code::GATEWAY_TIMEOUT
            } else {
                Code::BAD_GATEWAY
            };
            let head =
                json!({ "entity": job.entity, "message": format!("{code:#}: {} of {n} members changed", job.ok) });
            let text = format!("{code:#}: {} of {n} members changed", job.ok);
            (code, Some((head, reports)), Res { code: Some(code), readings: Vec::new(), text })
        } else {
            let result = build_use_result(&job);
            match result {
                Err(msg) => {
                    let code = Code::BAD_REQUEST;
                    if let Sink::Client { id, .. } = job.sink {
                        self.client_done();
                        cx.respond(id, Response::error(code, msg));
                        return;
                    }
                    (code, None, Res { code: Some(code), readings: Vec::new(), text: format!("{code:#}: {msg}") })
                }
                Ok(r) => {
                    let code = if r.replies >= r.enr {
                        Code::CONTENT
                    } else if job.slots.iter().any(|s| matches!(s, Slot::Done(Res { code: None, .. }))) || timed_out {
                        Code::GATEWAY_TIMEOUT
                    } else {
                        Code::BAD_GATEWAY
                    };
                    if let Sink::Client { id, accept } = job.sink {
                        self.client_done();
                        let resp = Response::new(code).with_content_format(accept).with_payload(r.render(accept));
                        let resp = if job.observable && code == Code::CONTENT { resp.observable() } else { resp };
                        cx.respond(id, resp);
                        return;
                    }
                    let text = format!("{code:#} ({} of {} replies)", r.replies, r.members);
                    let readings = if code.is_success() { r.into_readings() } else { Vec::new() };
                    (code, None, Res { code: Some(code), readings, text })
                }
            }
        };
        match job.sink {
            Sink::Client { id, accept } => {
                self.client_done();
                let (head, reports) = payload_for.unwrap_or((json!({}), Vec::new()));
                let accept = if output::REPORT_FORMATS.contains(&accept) || accept.0 >= 110 {
                    accept
                } else {
                    ContentFormat::TEXT_PLAIN
                };
                let resp = Response::new(code)
                    .with_content_format(accept)
                    .with_payload(output::render_reports(&head, &reports, accept));
                cx.respond(id, resp);
            }
            Sink::Parent { job: parent, slot } => self.ready.push((parent, slot, res_for_parent)),
            Sink::Flow => {}
        }
    }

    fn client_done(&mut self) {
        self.client_jobs = self.client_jobs.saturating_sub(1);
    }

    // ------------------------------------------------------------------------------------------------
    // Management flows
    // ------------------------------------------------------------------------------------------------

    /// Starts a flow's fan-out stage over `items`.
    fn flow_job(&mut self, cx: &mut Context<'_>, flow: Box<Flow>, kind: Kind, items: Vec<Item>) {
        let profile = flow.new.as_ref().or(flow.old.as_ref()).map(|e| e.profile.clone()).unwrap_or_default();
        let n = items.len();
        let delay = profile.delay.resolve(n, self.config.response_size, self.config.rate);
        let now = cx.now();
        let deadline = match profile.timeout {
            Some(ms) => now + Duration::from_millis(ms),
            None => self.default_deadline(cx, n, Duration::from(delay), false),
        };
        let op = profile.default_op();
        let name = flow.name.clone();
        let id = self.new_job(
            now,
            kind,
            &name,
            Sink::Flow,
            items.into(),
            op,
            true,
            Duration::from(delay),
            n,
            false,
            Some(deadline),
            self.config.hop_limit,
            0,
        );
        if let Some(job) = self.jobs.get_mut(&id) {
            job.flow = Some(flow);
        }
        self.drive(cx, id);
    }

    fn flow_step(&mut self, cx: &mut Context<'_>, job: Job) {
        let Some(mut flow) = job.flow else { return };
        let results: Vec<(String, Res)> = job
            .items
            .iter()
            .zip(job.slots)
            .map(|(it, s)| (it.label.clone(), if let Slot::Done(r) = s { r } else { Res::failed("not asked") }))
            .collect();
        match flow.stage {
            Stage::Validating => {
                let arithmetic = job.op.is_arithmetic();
                let mut first_bad: Option<String> = None;
                for (label, r) in &results {
                    let mut text = r.describe();
                    let mut good = r.ok();
                    if good && arithmetic {
                        if let Some(v) = output::single_number(&r.readings) {
                            text = format!("{text}, value {v}");
                        } else {
                            good = false;
                            let shown = r
                                .readings
                                .first()
                                .map(|x| match &x.value {
                                    crate::senml::Value::Num(v) => format!("{v}"),
                                    crate::senml::Value::Str(t) | crate::senml::Value::Data(t) => format!("{t:?}"),
                                    crate::senml::Value::Bool(b) => format!("{b}"),
                                })
                                .unwrap_or_else(|| "no value".into());
                            text = format!("{text}, but not numeric ({shown}) as eo={} requires", job.op);
                        }
                    }
                    flow.report(label).steps.push(("validate".into(), text.clone()));
                    if !good && first_bad.is_none() {
                        first_bad = Some(format!("member {label}: {text}"));
                    }
                }
                if let Some(why) = first_bad {
                    let msg = format!("entity {} not {}: {why}", flow.name, verb(flow.action));
                    return self.flow_fail(cx, flow, bad(msg));
                }
                self.after_validation(cx, flow);
            }
            Stage::Joining => {
                let mut first_bad = None;
                for (label, r) in &results {
                    flow.report(label).steps.push(("join".into(), r.describe()));
                    if r.ok() {
                        flow.joined_now.push(label.clone());
                        if let Some(new) = flow.new.as_mut() {
                            if let Some(k) = new.profile.er.iter().position(|m| m == label) {
                                new.joined[k] = true;
                            }
                        }
                    } else if first_bad.is_none() {
                        first_bad = Some(format!("member {label}: join failed: {}", r.describe()));
                    }
                }
                if let Some(why) = first_bad {
                    flow.failure = Some(bad(format!("entity {} not {}: {why}", flow.name, verb(flow.action))));
                    return self.rollback(cx, flow);
                }
                // Update: members that left the entity leave the group.
                let removed = self.removed_items(&flow);
                if !removed.is_empty() {
                    flow.stage = Stage::LeavingRemoved;
                    let g = flow.new.as_ref().and_then(|e| e.group).or(flow.allocated);
                    if let Some(g) = g {
                        return self.flow_job(cx, flow, Kind::Leave(g), removed);
                    }
                }
                self.commit(cx, flow);
            }
            Stage::LeavingRemoved => {
                for (label, r) in &results {
                    flow.report(label).steps.push(("leave".into(), r.describe()));
                }
                self.commit(cx, flow);
            }
            Stage::RollingBack => {
                for (label, r) in &results {
                    flow.report(label).steps.push(("rollback leave".into(), r.describe()));
                }
                let fail = flow.failure.take().unwrap_or_else(|| bad("failed"));
                self.flow_fail(cx, flow, fail);
            }
            Stage::LeavingAll => {
                for (label, r) in &results {
                    flow.report(label).steps.push(("leave".into(), r.describe()));
                }
                self.commit(cx, flow);
            }
        }
    }

    /// Old members no longer in the new member list (for multicast updates).
    fn removed_items(&self, flow: &Flow) -> Vec<Item> {
        let (Some(old), Some(new)) = (&flow.old, &flow.new) else { return Vec::new() };
        let Some(ent) = self.entities.get(&old.name) else { return Vec::new() };
        ent.items
            .iter()
            .enumerate()
            .filter(|(i, it)| !new.profile.er.contains(&it.label) && old.joined.get(*i).copied().unwrap_or(false))
            .map(|(_, it)| it.clone())
            .collect()
    }

    fn after_validation(&mut self, cx: &mut Context<'_>, mut flow: Box<Flow>) {
        let Some(new) = flow.new.as_mut() else { return self.commit(cx, flow) };
        if new.profile.ect != Ect::Multicast {
            return self.commit(cx, flow);
        }
        // Multicast: a group (kept on update), the mcstURI, then joins of members not yet joined.
        let group = match new.group {
            Some(g) => g,
            None => {
                let first_v4 =
                    flow.items.iter().any(|i| matches!(i.target, Target::Remote { addr, .. } if addr.is_ipv4()));
                let pool = if first_v4 { self.config.pool_v4 } else { self.config.pool_v6 };
                let key = pool_key(&pool.base);
                let mut cursor = self.counters.get(key).copied().unwrap_or(0);
                let in_use: HashSet<IpAddr> = self
                    .entities
                    .values()
                    .filter_map(|e| e.stored.group)
                    .chain(self.reserved_groups.iter().copied())
                    .collect();
                let Some(g) = pool.allocate(&mut cursor, |a| in_use.contains(&a)) else {
                    return self.flow_fail(
                        cx,
                        flow,
                        (Code::SERVICE_UNAVAILABLE, "multicast address pool exhausted".into()),
                    );
                };
                // Persist the cursor before the address is used anywhere: never reused, even after a crash.
                if let Err(e) = self.store.set_counter(key, cursor) {
                    return self.flow_fail(cx, flow, (Code::INTERNAL_SERVER_ERROR, e.to_string()));
                }
                self.counters.insert(key.to_string(), cursor);
                self.reserved_groups.insert(g);
                flow.allocated = Some(g);
                g
            }
        };
        if flow.old.is_none() && !flow.pending_saved {
            // Before any member joins: a crash from here on is undone at the next start-up.
            let mut pending = new.clone();
            pending.group = Some(group);
            pending.joined = vec![false; pending.profile.er.len()];
            pending.pending = true;
            if let Err(e) = self.store.save_entity(&pending) {
                return self.flow_fail(
                    cx,
                    flow,
                    (Code::INTERNAL_SERVER_ERROR, format!("entity {} not created: {e}", pending.name)),
                );
            }
            flow.pending_saved = true;
        }
        let Some(new) = flow.new.as_mut() else { return };
        new.group = Some(group);
        let path = match flow.items.first().map(|i| &i.target) {
            Some(Target::Remote { path, query, .. }) => {
                let mut s = uri::format_coap(SocketAddr::new(group, self.config.multicast_port), path);
                if !query.is_empty() {
                    s.push('?');
                    s.push_str(&query.join("&"));
                }
                s
            }
            _ => String::new(),
        };
        new.profile.mcst_uri = Some(path);
        // Members already joined (update) keep their membership.
        let old_joined: HashSet<String> = flow
            .old
            .as_ref()
            .map(|o| o.profile.er.iter().zip(&o.joined).filter(|(_, j)| **j).map(|(m, _)| m.clone()).collect())
            .unwrap_or_default();
        let to_join: Vec<Item> = flow.items.iter().filter(|i| !old_joined.contains(&i.label)).cloned().collect();
        new.joined = new.profile.er.iter().map(|m| old_joined.contains(m)).collect();
        flow.stage = Stage::Joining;
        if to_join.is_empty() {
            // Nothing to join; go on as if the joins were done (leaves of removed members follow).
            let removed = self.removed_items(&flow);
            if !removed.is_empty() {
                flow.stage = Stage::LeavingRemoved;
                return self.flow_job(cx, flow, Kind::Leave(group), removed);
            }
            return self.commit(cx, flow);
        }
        self.flow_job(cx, flow, Kind::Join(group), to_join);
    }

    /// Asks the members that joined in this flow to leave again, then fails.
    fn rollback(&mut self, cx: &mut Context<'_>, mut flow: Box<Flow>) {
        let group = flow.new.as_ref().and_then(|e| e.group);
        let items: Vec<Item> = flow.items.iter().filter(|i| flow.joined_now.contains(&i.label)).cloned().collect();
        match group {
            Some(g) if !items.is_empty() => {
                flow.stage = Stage::RollingBack;
                self.flow_job(cx, flow, Kind::Leave(g), items);
            }
            _ => {
                let fail = flow.failure.take().unwrap_or_else(|| bad("failed"));
                self.flow_fail(cx, flow, fail);
            }
        }
    }

    fn flow_fail(&mut self, cx: &mut Context<'_>, flow: Box<Flow>, (code, msg): Fail) {
        info!(entity = %flow.name, %code, msg = %msg, "entity change refused");
        if flow.pending_saved {
            // If this fails too, the record stays pending and the next start-up undoes it.
            if let Err(e) = self.store.delete_entity(&flow.name) {
                warn!(entity = %flow.name, error = %e, "could not remove the pending record");
            }
        }
        self.busy.remove(&flow.name);
        if let Some(g) = flow.allocated {
            self.reserved_groups.remove(&g);
        }
        let Some(client) = flow.client else { return };
        self.client_done();
        let head = json!({ "message": msg });
        let mut payload = output::render_reports(&head, &flow.reports, ContentFormat::TEXT_PLAIN);
        payload.truncate(8 * 1024);
        cx.respond(client, Response::new(code).with_payload(payload));
    }

    /// Writes the flow's result to the store, updates the in-memory copy, answers the client.
    fn commit(&mut self, cx: &mut Context<'_>, mut flow: Box<Flow>) {
        let result = match (&flow.action, &flow.new) {
            (Action::Delete | Action::Recover, _) => self.store.delete_entity(&flow.name),
            (Action::Create { generated: true }, Some(new)) => {
                let seq = self.counters.get(COUNTER_NAMES).copied().unwrap_or(0) + 1;
                self.store.set_counter(COUNTER_NAMES, seq).and_then(|_| {
                    self.counters.insert(COUNTER_NAMES.into(), seq);
                    self.store.save_entity(new)
                })
            }
            (_, Some(new)) => self.store.save_entity(new),
            (_, None) => Err(StoreError("internal: nothing to save".into())),
        };
        if let Err(e) = result {
            warn!(entity = %flow.name, error = %e, "store write failed");
            if flow.action == Action::Recover {
                self.busy.remove(&flow.name);
                return; // still pending in the store: retried at the next start-up
            }
            flow.failure = Some((Code::INTERNAL_SERVER_ERROR, format!("entity {} unchanged: {e}", flow.name)));
            return self.rollback(cx, flow);
        }
        self.busy.remove(&flow.name);
        if let Some(g) = flow.allocated {
            self.reserved_groups.remove(&g);
        }
        let Some(client) = flow.client else {
            info!(entity = %flow.name, "interrupted multicast creation undone");
            return;
        };
        self.client_done();
        let accept = flow.accept.unwrap_or(ContentFormat::JSON);
        let (code, head) = match flow.action {
            Action::Delete | Action::Recover => {
                self.entities.remove(&flow.name);
                (Code::DELETED, json!({ "entity": flow.name, "message": format!("entity {} deleted", flow.name) }))
            }
            action => {
                let Some(new) = flow.new.take() else { return };
                let profile = new.profile.to_json();
                let items = flow.items.clone();
                self.entities.insert(flow.name.clone(), Entity { stored: new, items });
                let code = if matches!(action, Action::Update) { Code::CHANGED } else { Code::CREATED };
                let msg = format!("entity {} {}", flow.name, if code == Code::CREATED { "created" } else { "updated" });
                (
                    code,
                    json!({ "entity": flow.name, "message": msg, "location": format!("/em/{}", flow.name), "profile": profile }),
                )
            }
        };
        info!(entity = %flow.name, %code, "entity change committed");
        self.end_watches_of(cx, &flow.name);
        let mut resp = Response::new(code).with_content_format(accept).with_payload(output::render_reports(
            &head,
            &flow.reports,
            accept,
        ));
        if flow.action == (Action::Create { generated: true }) {
            resp = resp
                .with_option(OptionNumber::LOCATION_PATH, b"em")
                .with_option(OptionNumber::LOCATION_PATH, flow.name.as_bytes());
        }
        cx.respond(client, resp);
    }

    // ------------------------------------------------------------------------------------------------
    // Requests
    // ------------------------------------------------------------------------------------------------

    /// Undoes a multicast creation a crash interrupted: every member is asked to leave (those that never
    /// joined answer 4.04), then the pending record is removed. The name stays busy meanwhile.
    fn recover(&mut self, cx: &mut Context<'_>, stored: StoredEntity) {
        let items = match self.resolve_items(&stored.profile.er) {
            Ok(items) => items,
            Err((_, why)) => {
                warn!(entity = %stored.name, why = %why, "pending record unreadable; removing it");
                let _ = self.store.delete_entity(&stored.name);
                self.busy.remove(&stored.name);
                return;
            }
        };
        let name = stored.name.clone();
        let group = stored.group;
        if let Some(g) = group {
            self.reserved_groups.insert(g);
        }
        let flow = Box::new(Flow {
            action: Action::Recover,
            client: None,
            pending_saved: true,
            accept: None,
            name,
            old: Some(stored),
            new: None,
            items: items.clone().into(),
            reports: Vec::new(),
            stage: Stage::LeavingAll,
            joined_now: Vec::new(),
            allocated: group,
            failure: None,
        });
        match group {
            Some(g) => self.flow_job(cx, flow, Kind::Leave(g), items),
            None => self.commit(cx, flow),
        }
    }

    fn list(&self, req: &Request) -> Response {
        if !matches!(req.options.accept().map(|c| c.0), None | Some(40)) {
            return Response::error(Code::NOT_ACCEPTABLE, "the entity list is link-format (40)");
        }
        let links: Vec<ResourceLink> = self
            .entities
            .values()
            .map(|e| {
                ResourceLink::new(&format!("em/{}", e.stored.name))
                    .attr("rt", "core.entity")
                    .attr("ect", e.stored.profile.ect.as_str())
            })
            .collect();
        Response::content(ContentFormat::LINK_FORMAT, corral_proto::render_links(&links, None))
    }

    fn read_profile(&self, name: &str, req: &Request) -> Response {
        let Some(e) = self.entities.get(name) else {
            return Response::error(Code::NOT_FOUND, format!("no entity {name}"));
        };
        let Some(cf) =
            output::negotiate(req.options.accept(), &[ContentFormat::JSON, ContentFormat::CBOR], ContentFormat::JSON)
        else {
            return Response::error(Code::NOT_ACCEPTABLE, "profiles are JSON (50) or CBOR (60)");
        };
        Response::content(cf, output::encode_doc(&e.stored.profile.to_json(), cf))
    }

    /// Reads the profile fields of a creation or update request (document or link-format, then queries).
    fn read_patch(req: &Request) -> Result<ProfilePatch, Fail> {
        let cf = req.options.content_format();
        let body = &req.payload;
        let sniffed = match cf {
            Some(c) => Some(c),
            None if body.is_empty() => None,
            None => match body.iter().find(|b| !b.is_ascii_whitespace()) {
                Some(b'{') => Some(ContentFormat::JSON),
                Some(b'<') => Some(ContentFormat::LINK_FORMAT),
                _ => {
                    return Err((
                        Code::UNSUPPORTED_CONTENT_FORMAT,
                        "profile documents are JSON (50), CBOR (60) or a link-format member list (40)".into(),
                    ))
                }
            },
        };
        let mut patch = match sniffed.map(|c| c.0) {
            None => ProfilePatch::default(),
            Some(50) => {
                let doc: Json = serde_json::from_slice(body)
                    .map_err(|e| bad(format!("profile document is not valid JSON: {e}")))?;
                ProfilePatch::from_json(&doc).map_err(|e| bad(e.0))?
            }
            Some(60) => {
                let doc: ciborium::Value = ciborium::from_reader(&body[..])
                    .map_err(|e| bad(format!("profile document is not valid CBOR: {e}")))?;
                let doc = output::cbor_to_json(&doc).map_err(|e| bad(format!("profile document: {e}")))?;
                ProfilePatch::from_json(&doc).map_err(|e| bad(e.0))?
            }
            Some(40) => {
                let text = std::str::from_utf8(body).map_err(|_| bad("link-format is not UTF-8"))?;
                ProfilePatch {
                    er: Some(crate::profile::parse_link_members(text).map_err(|e| bad(e.0))?),
                    ..ProfilePatch::default()
                }
            }
            Some(other) => {
                return Err((
                    Code::UNSUPPORTED_CONTENT_FORMAT,
                    format!("content format {other}: profile documents are JSON (50), CBOR (60) or link-format (40)"),
                ))
            }
        };
        patch.apply_queries(req.options.query_pairs()).map_err(|e| bad(e.0))?;
        Ok(patch)
    }

    /// Whether a PUT to an existing entity carries a profile (an update) rather than an actuation value:
    /// a link-format member list, or a JSON/CBOR map with an `er` field *(decision)*.
    fn is_profile_document(req: &Request) -> bool {
        match req.options.content_format().map(|c| c.0) {
            Some(40) => true,
            Some(50) => serde_json::from_slice::<Json>(&req.payload).is_ok_and(|j| j.get("er").is_some()),
            Some(60) => ciborium::from_reader::<ciborium::Value, _>(&req.payload[..])
                .ok()
                .and_then(|v| output::cbor_to_json(&v).ok())
                .is_some_and(|j| j.get("er").is_some()),
            _ => false,
        }
    }

    fn report_accept(req: &Request) -> Result<Option<ContentFormat>, Fail> {
        match req.options.accept() {
            None => Ok(None),
            Some(a) if output::REPORT_FORMATS.contains(&a) => Ok(Some(a)),
            Some(a) => {
                Err((Code::NOT_ACCEPTABLE, format!("reports are text/plain (0), JSON (50) or CBOR (60), not {}", a.0)))
            }
        }
    }

    fn create(&mut self, cx: &mut Context<'_>, inb: &IncomingRequest, name: Option<&str>) -> Result<(), Fail> {
        let req = &inb.request;
        let accept = Self::report_accept(req)?;
        let patch = Self::read_patch(req)?;
        let (name, generated) = match name {
            Some(n) => (n.to_string(), false),
            None => {
                let mut seq = self.counters.get(COUNTER_NAMES).copied().unwrap_or(0) + 1;
                loop {
                    let n = format!("e{seq}");
                    if !self.entities.contains_key(&n) && !self.busy.contains(&n) {
                        break (n, true);
                    }
                    seq += 1;
                }
            }
        };
        if !valid_entity_name(&name) {
            return Err(bad(format!(
                "entity name {name:?}: use 1 to 64 of A-Z a-z 0-9 _ . - starting with a letter or digit"
            )));
        }
        if self.busy.contains(&name) {
            return Err((Code::CONFLICT, format!("entity {name}: another change is in progress")));
        }
        if self.entities.len() >= self.config.max_entities {
            return Err((Code::SERVICE_UNAVAILABLE, format!("entity limit ({}) reached", self.config.max_entities)));
        }
        if patch.mcst_uri.is_some() {
            return Err(bad("mcstURI is read-only: the EM assigns it"));
        }
        if patch.er.is_none() {
            return Err(bad("er: the member list is missing"));
        }
        let mut profile = Profile::default();
        profile.apply(&patch);
        profile.check().map_err(|e| bad(e.0))?;
        let items = self.resolve_items(&profile.er)?;
        self.check_members(&name, &profile, &items)?;
        let new = StoredEntity { name: name.clone(), profile, group: None, joined: Vec::new(), pending: false };
        let flow = Box::new(Flow {
            action: Action::Create { generated },
            client: Some(inb.id),
            pending_saved: false,
            accept,
            name: name.clone(),
            old: None,
            new: Some(new),
            items: items.clone().into(),
            reports: items.iter().map(|i| MemberReport { member: i.label.clone(), steps: Vec::new() }).collect(),
            stage: Stage::Validating,
            joined_now: Vec::new(),
            allocated: None,
            failure: None,
        });
        info!(entity = %name, members = items.len(), "creating entity");
        self.busy.insert(name);
        self.client_jobs += 1;
        self.flow_job(cx, flow, Kind::Validate, items);
        Ok(())
    }

    fn update(&mut self, cx: &mut Context<'_>, inb: &IncomingRequest, name: &str, whole: bool) -> Result<(), Fail> {
        let req = &inb.request;
        let Some(ent) = self.entities.get(name) else {
            return Err((Code::NOT_FOUND, format!("no entity {name}")));
        };
        if self.busy.contains(name) {
            return Err((Code::CONFLICT, format!("entity {name}: another change is in progress")));
        }
        let accept = Self::report_accept(req)?;
        let patch = Self::read_patch(req)?;
        let old = ent.stored.clone();
        if let Some(ect) = patch.ect {
            if ect != old.profile.ect {
                return Err((
                    Code::CONFLICT,
                    format!(
                        "ect of {name} is {} and can only be set at creation (delete and re-create the entity)",
                        old.profile.ect.as_str()
                    ),
                ));
            }
        }
        if patch.mcst_uri.as_ref().is_some_and(|u| Some(u) != old.profile.mcst_uri.as_ref()) {
            return Err(bad("mcstURI is read-only: the EM assigns it"));
        }
        let mut profile = if whole {
            if patch.er.is_none() {
                return Err(bad("er: a whole profile (PUT) needs the member list; POST changes single fields"));
            }
            Profile { ect: old.profile.ect, ..Profile::default() }
        } else {
            old.profile.clone()
        };
        profile.apply(&patch);
        profile.mcst_uri = old.profile.mcst_uri.clone();
        profile.check().map_err(|e| bad(e.0))?;
        let items = self.resolve_items(&profile.er)?;
        self.check_members(name, &profile, &items)?;
        let same_members = {
            let a: BTreeSet<&String> = old.profile.er.iter().collect();
            let b: BTreeSet<&String> = profile.er.iter().collect();
            a == b
        };
        let joined: Vec<bool> = profile
            .er
            .iter()
            .map(|m| {
                old.profile.er.iter().position(|o| o == m).and_then(|i| old.joined.get(i).copied()).unwrap_or(false)
            })
            .collect();
        let new = StoredEntity { name: name.to_string(), profile, group: old.group, joined, pending: false };
        let flow = Box::new(Flow {
            action: Action::Update,
            client: Some(inb.id),
            pending_saved: false,
            accept,
            name: name.to_string(),
            old: Some(old),
            new: Some(new),
            items: items.clone().into(),
            reports: Vec::new(),
            stage: Stage::Validating,
            joined_now: Vec::new(),
            allocated: None,
            failure: None,
        });
        self.busy.insert(name.to_string());
        self.client_jobs += 1;
        if same_members {
            self.commit(cx, flow);
        } else {
            self.flow_job(cx, flow, Kind::Validate, items);
        }
        Ok(())
    }

    fn delete(&mut self, cx: &mut Context<'_>, inb: &IncomingRequest, name: &str) -> Result<(), Fail> {
        let Some(ent) = self.entities.get(name) else {
            return Err((Code::NOT_FOUND, format!("no entity {name}")));
        };
        if self.busy.contains(name) {
            return Err((Code::CONFLICT, format!("entity {name}: another change is in progress")));
        }
        let parents: Vec<&str> = self
            .entities
            .values()
            .filter(|e| e.local_members().any(|m| m == name))
            .map(|e| e.stored.name.as_str())
            .collect();
        if !parents.is_empty() {
            return Err((
                Code::CONFLICT,
                format!("entity {name} is a member of {}; remove it there first", parents.join(", ")),
            ));
        }
        let accept = Self::report_accept(&inb.request)?;
        let old = ent.stored.clone();
        let items = ent.items.clone();
        let leave: Vec<Item> = items
            .iter()
            .zip(old.joined.iter().chain(std::iter::repeat(&false)))
            .filter(|(_, j)| **j)
            .map(|(i, _)| i.clone())
            .collect();
        let group = old.group;
        let flow = Box::new(Flow {
            action: Action::Delete,
            client: Some(inb.id),
            pending_saved: false,
            accept,
            name: name.to_string(),
            old: Some(old),
            new: None,
            items,
            reports: Vec::new(),
            stage: Stage::LeavingAll,
            joined_now: Vec::new(),
            allocated: None,
            failure: None,
        });
        self.busy.insert(name.to_string());
        self.client_jobs += 1;
        match group {
            Some(g) if !leave.is_empty() => self.flow_job(cx, flow, Kind::Leave(g), leave),
            _ => self.commit(cx, flow),
        }
        Ok(())
    }

    fn use_entity(
        &mut self,
        cx: &mut Context<'_>,
        inb: &IncomingRequest,
        name: &str,
        actuate: bool,
    ) -> Result<(), Fail> {
        let req = &inb.request;
        if !self.entities.contains_key(name) {
            return Err((Code::NOT_FOUND, format!("no entity {name}")));
        }
        let (accept, kind) = if actuate {
            let accept = match req.options.accept() {
                None => ContentFormat::TEXT_PLAIN,
                Some(a) if output::USE_FORMATS.contains(&a) => a,
                Some(a) => return Err((Code::NOT_ACCEPTABLE, format!("content format {} not offered", a.0))),
            };
            (
                accept,
                Kind::Actuate { method: req.method, payload: req.payload.clone(), cf: req.options.content_format() },
            )
        } else {
            let Some(accept) = output::negotiate(req.options.accept(), &output::USE_FORMATS, ContentFormat::TEXT_PLAIN)
            else {
                return Err((
                    Code::NOT_ACCEPTABLE,
                    "offered: text/plain (0), JSON (50), CBOR (60), SenML JSON (110), SenML CBOR (112)".into(),
                ));
            };
            (accept, Kind::Read)
        };
        let o = UseOverrides::parse(req.options.query_pairs()).map_err(|e| bad(e.0))?;
        if actuate && o.eo.is_some() {
            return Err(bad("eo applies to reading an entity, not to actuation"));
        }
        if self.client_jobs >= self.config.max_jobs {
            return Err((Code::SERVICE_UNAVAILABLE, "too many entity requests in progress".into()));
        }
        let hop =
            req.options.get_uint(OptionNumber::HOP_LIMIT).map(|h| h.min(255) as u8).unwrap_or(self.config.hop_limit);
        let register = !actuate && req.options.observe() == Some(OBSERVE_REGISTER) && self.observable(name);
        let id = self.start_use(cx, name, Sink::Client { id: inb.id, accept }, &o, kind, hop, 0)?;
        self.client_jobs += 1;
        if register {
            self.attach_watch(id, name, req.options.path());
        }
        debug!(entity = %name, job = id, register, "use started");
        self.drive(cx, id);
        Ok(())
    }

    // ------------------------------------------------------------------------------------------------
    // Observed entities
    // ------------------------------------------------------------------------------------------------

    /// Whether a registration on `name` can be kept: a unicast entity of remote members only.
    fn observable(&self, name: &str) -> bool {
        self.entities.get(name).is_some_and(|e| {
            e.stored.profile.ect == Ect::Unicast && e.items.iter().all(|i| matches!(i.target, Target::Remote { .. }))
        })
    }

    /// The watch that serves observers of `name` with operation `op`. One per entity — the members'
    /// values do not depend on the operation — except for members that are other gateways' entities: they
    /// are asked for the operation's aggregate (avg of averages), so each arithmetic operation has its own.
    fn watch_key(&self, name: &str, op: Op) -> String {
        let remote_entities = self
            .entities
            .get(name)
            .is_some_and(|e| e.items.iter().any(|i| matches!(i.target, Target::Remote { entity: true, .. })));
        if remote_entities && op.is_arithmetic() {
            format!("{name}?eo={op}")
        } else {
            name.to_string()
        }
    }

    /// Makes use job `id` answer an Observe registration (or render a notification): from the watch's
    /// cache when it is ready; else by asking the members, with Observe=0 when there is no watch yet.
    fn attach_watch(&mut self, id: JobId, name: &str, path: String) {
        let Some((n, op)) = self.jobs.get(&id).map(|j| (j.slots.len(), j.op)) else { return };
        let key = self.watch_key(name, op);
        let cached: Option<Vec<Res>> = self
            .watches
            .get(&key)
            .filter(|w| w.ready() && w.job.is_none() && w.latest.len() == n)
            .map(|w| w.latest.iter().flatten().cloned().collect());
        let first = !self.watches.contains_key(&key);
        let Some(job) = self.jobs.get_mut(&id) else { return };
        job.observable = true;
        if let Some(cached) = cached {
            job.next = n;
            for (i, res) in cached.into_iter().enumerate() {
                self.set_slot(id, i, Slot::Done(res));
            }
        } else if first {
            job.watch = Some(key.clone());
            let w = Watch { entity: name.to_string(), path, obs: vec![None; n], latest: vec![None; n], job: Some(id) };
            self.watches.insert(key, w);
        }
        // Otherwise the first round is still running: this registration asks the members once more.
    }

    /// A member observation of watch `key` answered, notified, or ended.
    fn watch_update(&mut self, cx: &mut Context<'_>, key: &str, i: usize, rid: RequestId, outcome: &Outcome) {
        let res = match outcome {
            Outcome::Response { response, .. } => member_result(true, response),
            Outcome::Failed(e) => Res::failed(e.to_string()),
            Outcome::MulticastDone | Outcome::Pong { .. } => Res::failed("no response"),
        };
        let active = cx.endpoint().is_active(rid);
        if !active {
            self.watch_requests.remove(&rid);
        }
        let Some(w) = self.watches.get_mut(key) else { return };
        if let Some(latest) = w.latest.get_mut(i) {
            *latest = Some(res);
        }
        if !active {
            if let Some(o) = w.obs.get_mut(i) {
                *o = None;
            }
        }
        if w.job.is_some() {
            return; // the first round answers its client itself
        }
        if cx.observer_count(&w.path) == 0 {
            debug!(entity = %w.entity, "nobody observes the entity any more; members deregistered");
            self.end_watch(cx, key);
            return;
        }
        if w.ready() {
            cx.changed(&w.path);
        }
        if w.obs.iter().all(Option::is_none) {
            // No member notifies any more: the observers' next rendering starts a new watch.
            self.watches.remove(key);
        }
    }

    /// A watch's first use answered before asking every member (`enr` reached, or its timeout): the members
    /// it never asked are registered now, all at once, so that the watch covers the whole entity.
    fn watch_unasked(&mut self, cx: &mut Context<'_>, id: JobId, job: &Job) {
        let Some(key) = job.watch.clone() else { return };
        for (i, item) in job.items.iter().enumerate() {
            if !matches!(job.slots[i], Slot::Waiting) {
                continue;
            }
            let Some((addr, req, confirmable)) = self.member_request(job, i, &item.target) else { continue };
            if let Ok(rid) = cx.request(addr, req, SendParams { confirmable, ..SendParams::default() }) {
                if !self.watch_track(id, &key, i, rid) {
                    cx.cancel(rid);
                    return;
                }
            }
        }
    }

    /// Records `rid` as member `i`'s observation in watch `key`, if that watch is still the one job `id`
    /// started (an entity changed meanwhile ends it, and a new watch may have taken the key).
    fn watch_track(&mut self, id: JobId, key: &str, i: usize, rid: RequestId) -> bool {
        let Some(slot) = self.watches.get_mut(key).filter(|w| w.job == Some(id)).and_then(|w| w.obs.get_mut(i)) else {
            return false;
        };
        *slot = Some(rid);
        self.watch_requests.insert(rid, (key.to_string(), i));
        true
    }

    /// The use job `id` that started watch `key` finished.
    fn watch_job_done(&mut self, id: JobId, key: &str) {
        let Some(w) = self.watches.get_mut(key) else { return };
        if w.job == Some(id) {
            w.job = None;
            if w.obs.iter().all(Option::is_none) {
                self.watches.remove(key); // no member is observable: nothing would ever refresh the cache
            }
        }
    }

    /// Ends watch `key`: every member observation is deregistered (RFC 7641 §3.6). Returns its path.
    fn end_watch(&mut self, cx: &mut Context<'_>, key: &str) -> Option<String> {
        let w = self.watches.remove(key)?;
        for rid in w.obs.into_iter().flatten() {
            self.watch_requests.remove(&rid);
            cx.deregister(rid);
        }
        Some(w.path)
    }

    /// The entity `name` changed or went away: its watches end and its observers get a last rendering
    /// (the new entity, or 4.04).
    fn end_watches_of(&mut self, cx: &mut Context<'_>, name: &str) {
        let keys: Vec<String> = self.watches.iter().filter(|(_, w)| w.entity == name).map(|(k, _)| k.clone()).collect();
        let mut paths: Vec<String> = keys.iter().filter_map(|k| self.end_watch(cx, k)).collect();
        paths.dedup();
        for path in paths {
            cx.changed(&path);
        }
    }

    /// Whether job `id` reads its members' values (reads and validation do; actuation and joins do not).
    fn parses(&self, id: JobId) -> bool {
        self.jobs.get(&id).is_some_and(|j| matches!(j.kind, Kind::Read | Kind::Validate))
    }

    /// How many watches the EM keeps (one per observed entity; see [`EntityManager::watch_key`]).
    pub fn watched_entities(&self) -> usize {
        self.watches.len()
    }

    fn route(&mut self, cx: &mut Context<'_>, inb: &IncomingRequest) -> Result<(), Fail> {
        let sub = cx.subpath(&inb.request);
        let m = inb.request.method;
        let parts: Vec<&str> = sub.iter().map(String::as_str).collect();
        let respond = |cx: &mut Context<'_>, r: Response| {
            cx.respond(inb.id, r);
            Ok(())
        };
        match (m, parts.as_slice()) {
            (Code::GET, []) => respond(cx, self.list(&inb.request)),
            (Code::POST, []) => self.create(cx, inb, None),
            (_, []) => Err((Code::METHOD_NOT_ALLOWED, "/em supports GET (list) and POST (create)".into())),
            (Code::GET, [name]) => self.use_entity(cx, inb, name, false),
            (Code::PUT, [name]) => {
                if !self.entities.contains_key(*name) {
                    if self.busy.contains(*name) {
                        return Err((Code::CONFLICT, format!("entity {name}: another change is in progress")));
                    }
                    let cf = inb.request.options.content_format();
                    if matches!(cf.map(|c| c.0), Some(0) | Some(42)) {
                        return Err((
                            Code::NOT_FOUND,
                            format!("no entity {name} (send a profile document to create it)"),
                        ));
                    }
                    self.create(cx, inb, Some(name))
                } else if Self::is_profile_document(&inb.request) {
                    self.update(cx, inb, name, true)
                } else {
                    self.use_entity(cx, inb, name, true)
                }
            }
            (Code::POST, [name]) => self.use_entity(cx, inb, name, true),
            (Code::DELETE, [name]) => self.delete(cx, inb, name),
            (_, [_]) => Err((Code::METHOD_NOT_ALLOWED, "an entity supports GET, PUT, POST and DELETE".into())),
            (Code::GET, [name, "profile"]) => respond(cx, self.read_profile(name, &inb.request)),
            (Code::PUT, [name, "profile"]) => self.update(cx, inb, name, true),
            (Code::POST, [name, "profile"]) => self.update(cx, inb, name, false),
            (_, [_, "profile"]) => Err((Code::METHOD_NOT_ALLOWED, "a profile supports GET, PUT and POST".into())),
            _ => Err((Code::NOT_FOUND, format!("no resource /em/{}", parts.join("/")))),
        }
    }
}

fn verb(a: Action) -> &'static str {
    match a {
        Action::Create { .. } => "created",
        Action::Update => "updated",
        Action::Delete => "deleted",
        Action::Recover => "recovered",
    }
}

/// Combines a read job's replies. `Err` names members with non-numeric values under an arithmetic op.
fn build_use_result(job: &Job) -> Result<UseResult, String> {
    let done = || {
        job.items.iter().zip(&job.slots).filter_map(|(it, s)| match s {
            Slot::Done(r) => Some((it, r)),
            _ => None,
        })
    };
    let replies = done().filter(|(_, r)| r.ok()).count();
    let success = replies >= job.enr;
    let mut numbers = Vec::new();
    if success && job.op.is_arithmetic() {
        numbers.reserve(replies);
        let mut non_numeric = Vec::new();
        for (it, r) in done().filter(|(_, r)| r.ok()) {
            match output::single_number(&r.readings) {
                Some(v) => numbers.push(v),
                None => non_numeric.push(it.label.as_str()),
            }
        }
        if !non_numeric.is_empty() {
            return Err(format!(
                "eo={} needs numeric values, but {} answered with non-numeric representations",
                job.op,
                non_numeric.join(", ")
            ));
        }
    }
    let errors: Vec<(String, String)> =
        done().filter(|(_, r)| !r.ok()).map(|(it, r)| (it.label.clone(), r.describe())).collect();
    let aggregate = match job.op {
        _ if !success => None,
        Op::Lst => None,
        Op::Count => Some(replies as f64),
        op => output::aggregate(op, &numbers),
    };
    // Values are listed for `lst` and for a partial answer (what did arrive).
    let mut values = Vec::new();
    if aggregate.is_none() {
        for (it, r) in done().filter(|(_, r)| r.ok()) {
            for rd in &r.readings {
                let mut rd = rd.clone();
                rd.name.insert(0, it.label.clone());
                values.push(rd);
            }
        }
    }
    Ok(UseResult {
        entity: job.entity.clone(),
        op: job.op,
        enr: job.enr,
        members: job.slots.len(),
        replies,
        aggregate,
        values,
        errors,
    })
}

impl Service for EntityManager {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        if let Err((code, msg)) = self.route(cx, &req) {
            debug!(%code, msg = %msg, "request refused");
            cx.respond(req.id, Response::error(code, msg));
        }
        self.pump(cx);
    }

    fn handle_response(&mut self, cx: &mut Context<'_>, rid: RequestId, outcome: Outcome) {
        if let Some((key, i)) = self.watch_requests.get(&rid).cloned() {
            self.watch_update(cx, &key, i, rid, &outcome);
        }
        let Some(&(jid, slot)) = self.requests.get(&rid) else {
            if cx.endpoint().is_active(rid) && !self.watch_requests.contains_key(&rid) {
                cx.cancel(rid); // an observation nobody wants any more: its next notification gets RST
            }
            self.pump(cx);
            return;
        };
        match slot {
            Some(i) => {
                self.requests.remove(&rid);
                let res = match outcome {
                    Outcome::Response { response, .. } => {
                        // Validation falls back to /.well-known/core for resources that refuse GET.
                        let retry = self.jobs.get(&jid).is_some_and(|j| {
                            matches!(j.kind, Kind::Validate)
                                && response.code == Code::METHOD_NOT_ALLOWED
                                && !j.wkc_tried.get(i).copied().unwrap_or(true)
                        });
                        if retry {
                            if let Some(j) = self.jobs.get_mut(&jid) {
                                j.wkc_tried[i] = true;
                            }
                            self.send_slot(cx, jid, i);
                            self.drive(cx, jid);
                            self.pump(cx);
                            return;
                        }
                        member_result(self.parses(jid), &response)
                    }
                    Outcome::Failed(e) => Res::failed(e.to_string()),
                    Outcome::MulticastDone | Outcome::Pong { .. } => Res::failed("no response"),
                };
                self.set_slot(jid, i, Slot::Done(res));
            }
            None => match outcome {
                Outcome::Response { from, response } => {
                    let idx = self.jobs.get(&jid).and_then(|j| {
                        j.items.iter().enumerate().position(|(k, it)| {
                            matches!(&it.target, Target::Remote { addr, .. } if addr.ip() == from.ip())
                                && matches!(j.slots[k], Slot::Waiting)
                        })
                    });
                    match idx {
                        Some(i) => {
                            let res = member_result(self.parses(jid), &response);
                            self.set_slot(jid, i, Slot::Done(res));
                        }
                        None => debug!(%from, "multicast reply from a non-member or a duplicate; ignored"),
                    }
                }
                _ => {
                    self.requests.remove(&rid);
                    if let Some(j) = self.jobs.get_mut(&jid) {
                        j.mc_done = true;
                    }
                }
            },
        }
        self.drive(cx, jid);
        self.pump(cx);
    }

    fn handle_timeout(&mut self, cx: &mut Context<'_>) {
        for stored in std::mem::take(&mut self.recovery) {
            self.recover(cx, stored);
        }
        let now = cx.now();
        let due: Vec<JobId> = self.timers.iter().take_while(|(t, _)| *t <= now).map(|(_, j)| *j).collect();
        for id in due {
            if let Some(job) = self.jobs.get_mut(&id) {
                if let Some(t) = job.timer.take() {
                    self.timers.remove(&(t, id));
                }
                self.drive(cx, id);
            } else {
                self.timers.retain(|(_, j)| *j != id);
            }
        }
        self.pump(cx);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        if !self.recovery.is_empty() {
            return Some(Instant::ZERO); // at once: the driver's first wake-up
        }
        self.timers.first().map(|(t, _)| *t)
    }

    fn links(&self) -> Vec<ResourceLink> {
        let mut v = vec![ResourceLink::new("").attr("ct", "40").attr("title", "Entity Manager")];
        for e in self.entities.values() {
            let link =
                ResourceLink::new(&e.stored.name).attr("rt", "core.entity").attr("ect", e.stored.profile.ect.as_str());
            v.push(if self.observable(&e.stored.name) { link.flag("obs") } else { link });
        }
        v
    }
}

/// A member's response as a slot result; `parse`: read its value (reads and validation).
fn member_result(parse: bool, response: &Response) -> Res {
    let readings = if parse && response.code.is_success() {
        output::parse_reply(response.options.content_format(), &response.payload)
    } else {
        Vec::new()
    };
    let text =
        if response.code.is_success() { String::new() } else { output::code_text(response.code, &response.payload) };
    Res { code: Some(response.code), readings, text }
}
