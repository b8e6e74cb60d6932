//! The Entity Manager (seed 000 §2.3, §4; `entity-manager.md`): a sans-IO service, mounted at `em`, that
//! turns groups of CoAP resources into entities.
//!
//! Owns: the entity table (an in-memory copy of the store, so a use request never touches the store), the
//! fan-outs in progress (jobs), the management flows (validate → join → commit, rollback, leave), and the
//! answers to clients. Acts only through [`Context`]: member requests with `cx.request`, answers with
//! `cx.respond`, store writes with `cx.effect` (see [`crate::store`]: a change is answered only once its
//! write is done); timers through `poll_timeout`. Must never: read a clock, block on the network or a
//! store, or panic on anything a client or member sends.
//!
//! # Rooms
//! This module holds the shared types (configuration, entities, flows), the [`Service`] entry points and
//! the routing. [`EntityManager`] groups its state in parts, and each part's behaviour is its own
//! methods (as quinn-proto's `Connection` passes `&mut self.spaces` into the spaces' methods): `jobs`
//! (`impl Jobs`: the fan-outs — starting, pacing, member answers, finishing, the answer — given a
//! `JobCx` with what they borrow: the context, the configuration, the entity table, the quotas, the
//! counters, the watches), `watch` (`impl Watches`: observed entities), `quotas` (`impl Quotas`: exchanges
//! held per client, entity and in total), `groups` (`impl Groups`: multicast addresses, the membership
//! journal, strays, the quarantine, allocation), `follow` (`impl Follows`: entities whose members follow
//! a Resource Directory lookup), `announce` (`impl Announces`: multicast entities' groups registered in
//! the gateway's directory), `shards` (`impl Part`: the only worker, the manager or a replica). The entity
//! table is a part too (`Table`): `members` (member URIs and the checks of a member list, with
//! `impl EmConfig` for what needs only the configuration), `budget` (what a use costs, the store's bytes),
//! `access` (roles, proof of address, what a reader may ask for) and `requests` (listing, profiles, and
//! the parsing of a request) add to it; `cluster` takes changes made elsewhere into it (the change feed of
//! a store several gateways share, and a replica's sync). A management flow's own bookkeeping (what it records of its
//! members' answers, its writes, its answer) is `impl Flow` in `flows`.
//!
//! What stays `impl EntityManager` is what spans the parts: the entry points and the routing here, the
//! management flows (`flows`: create, update, delete, recovery, reconciliation, which allocate groups,
//! write the store, run jobs and change the table), a use's start (`requests`), a follow's update
//! (`follow`) and a replica's sync (`shards`). A job never steps a flow itself: a finished flow job is
//! queued and continued right after the jobs call that finished it. A response finds the part that sent
//! its request with one lookup in `owners` (`Owners`: request id → `Owner`, the part and what it needs to
//! find its state), where each part enters its requests and gives them back. Every input ends in `after_input`:
//! finished children's results reach their parents, the follows and the directory registrations catch
//! up with the table.
//!
//! # Several workers
//! A gateway on N cores runs N Entity Managers on one port (corral-tokio's `steer` hands each worker the
//! answers to its own member requests). Worker 0 is the [`EntityManager::manager`]: the kernel gives it
//! every request but GET, so it alone makes changes, writes the store, allocates groups and recovers after
//! a crash, and after every committed change it publishes the entity table in a [`Directory`] before it
//! answers. The others are [`EntityManager::replica`]s: they serve reads, observations, listings and
//! profiles from that table, take a new one (one atomic load per input tells them) before handling
//! anything, end the watches of entities that changed as the manager does, and while they have observers
//! wake every [`SYNC_PERIOD`] to look. A replica that is sent a change anyway answers 5.00 naming itself.
//! Jobs, watches and quotas stay per worker; the store is single-writer.
//!
//! # Proof of address (issue 26, RFC 9175 §2.4)
//! Roles rest on source addresses (see [`crate::policy`]), which a blind spoofer can forge. With
//! [`EmConfig::challenge_unverified`], a source beyond loopback must prove it receives at its address before
//! the EM works for it: a use waits until the source has returned an Echo value once
//! ([`IncomingRequest::verified`]), and every change or actuation must itself carry the value its source
//! was just given ([`IncomingRequest::echoed`]) — a spoofer who knows or guesses the address and port of a
//! manager that proved itself earlier still gets a challenge, sent to that manager. Requests that OSCORE
//! unprotected (the gateway's layer marks them) and requests over TCP are proved already.
//!
//! # Quotas held by uses
//! A use reserves its cost against the quotas (see `budget` and `quotas`) and gives each member request
//! back when it ends; when its entity changes the use gives the rest back (and goes on with its members),
//! when its entity is deleted the use ends with what arrived. A client that may not manage may not ask for
//! a `delay` beyond [`MAX_READER_DELAY_MS`] or a `timeout` beyond MAX_TRANSMIT_WAIT, unless the profile
//! sets more. So no request holds the quotas longer than its members take to answer.
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

mod access;
mod announce;
mod budget;
mod cluster;
mod flows;
mod follow;
mod groups;
mod jobs;
mod members;
mod owners;
mod quotas;
mod requests;
mod shards;
mod stats;
mod watch;
mod writes;
use announce::Announces;
pub use announce::{GROUP_ENDPOINT_TYPE, GROUP_LIFETIME};
use cluster::Feed;
use follow::Follows;
pub use follow::{members_from_lookup, REFRESH_SLACK, RETRY_FIRST, RETRY_MAX};
use groups::Groups;
use jobs::{JobCx, JobId, Jobs};
use owners::{Owner, Owners};
use quotas::Quotas;
use requests::is_profile_document;
use shards::Part;
pub use shards::{Directory, SYNC_PERIOD};
pub use stats::{EmStats, EntityMember, Latency, MemberStats, LATENCY_BOUNDS_US};
use watch::Watches;
use writes::Writes;

use crate::output::MemberReport;
use crate::policy::{AccessPolicy, Budget, MemberPolicy};
use crate::pool::AddressPool;
use crate::store::{Snapshot, StoreError, StoredEntity};
use corral_proto::wire::{Code, ContentFormat, OptionNumber};
use corral_proto::{
    Context, Duration, EffectDone, EffectId, InboundId, IncomingRequest, Instant, Outcome, RequestId, ResourceLink,
    Response, Service,
};
use std::collections::{BTreeMap, HashSet};

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
    /// Port of multicast use requests (and of `mcstURI`) when members listen for their group on another
    /// port than their unicast one. `None` (the default): the members' own port, which they must share.
    pub multicast_port: Option<u16>,
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
    /// Who may read, actuate and manage entities (see [`crate::policy`]). Default: everyone — the
    /// library's choice; `corral gateway` builds a safe one from its options.
    pub access: AccessPolicy,
    /// Where members may be. Default: any unicast address but the gateway itself.
    pub members: MemberPolicy,
    /// Fan-out budget per client request and exchange quotas per client, entity and in total.
    pub budget: Budget,
    /// How long a released multicast address rests before it may be allocated again, so that a
    /// bookmarked `mcstURI` or a device that missed its leave does not meet a new entity at once.
    pub quarantine: Duration,
    /// Multicast address allocations: at most `allocation_burst` at once, refilled one per
    /// `allocation_interval` (so that create/delete cycles cannot run through the pool).
    pub allocation_burst: u32,
    pub allocation_interval: Duration,
    /// Unix time (ms) at the driver's `Instant::ZERO`: the quarantine survives restarts in wall-clock
    /// terms. The driver passes it in; the EM never reads a clock.
    pub wall_clock_at_zero_ms: u64,
    /// Bytes of member URIs the store may hold over all entities; a change beyond it gets 5.03.
    pub max_store_bytes: usize,
    /// This gateway's identity in `via` lists (loop detection across gateways); `None`: drawn at the
    /// first use. The workers of one gateway share one.
    pub gateway_id: Option<u32>,
    /// Proof of address before work (RFC 9175 §2.4), for sources beyond loopback: a use (which sends
    /// member requests and holds the quotas) from a source that has not proved it receives at its
    /// address, and every change or actuation that does not carry the Echo value its source was just
    /// given, is answered 4.01 with an Echo value instead ([`Context::challenge`]); the client's
    /// repetition with the value is served (corral's and libcoap's clients repeat by themselves). A blind
    /// spoofer never sees the value, so it can neither change entities in a manager's name nor hold the
    /// quotas. Off in the library (the lab's clients would pay a round trip); `corral gateway` turns it
    /// on.
    pub challenge_unverified: bool,
    /// How long a validation, join or leave fan-out without a profile `timeout` waits for silent members
    /// after the last was asked; `None`: CoAP's own (MAX_TRANSMIT_WAIT, 93 s). `corral gateway` sets
    /// [`MANAGEMENT_WAIT`], so that a creation with an offline member answers within a client's patience.
    pub management_wait: Option<Duration>,
    /// The directory an entity with `fromRd` and no `rd` follows: the gateway's own (`corral gateway
    /// --rd`), or none (such an entity then says so in its profile).
    pub rd: Option<SocketAddr>,
    /// The most members a directory lookup gives an entity; a larger result is cut, with a WARN and a note
    /// in the profile (at most [`crate::profile::MAX_MEMBERS`]).
    pub rd_max_members: usize,
    /// The member addresses the driver reaches over DTLS (`coaps://`, with credentials it holds): a
    /// `coaps://` member elsewhere is refused (4.03), since the EM would otherwise send it plain CoAP.
    pub dtls_members: Vec<SocketAddr>,
}

/// How long `corral gateway`'s management fan-outs wait for silent members (see
/// [`EmConfig::management_wait`]): well inside the 30 s a `corral entity` command waits by default.
pub const MANAGEMENT_WAIT: Duration = Duration::from_secs(20);

/// The longest `delay` (ms) a client that may not manage entities may ask for in a use's query, unless the
/// entity's profile sets more: a use holds its member requests against the quotas while it is paced, so a
/// reader's `?delay=86400000` would hold them for days.
pub const MAX_READER_DELAY_MS: u64 = 1000;

/// The fewest members that must answer a use (2.xx) for it to answer 2.05 *(decision)*. A use answers as
/// soon as `enr` members answered; when fewer did by the time it gives up (the entity's `timeout`, the
/// multicast window, or every member answered or failed), it answers with the value over those that
/// did, naming the members that stayed silent or failed — one silent member does not spoil the group
/// (seed 000 §2.3: `enr` makes "the group tolerant to failures"). With none, there is no value to give:
/// 5.04 (a member stayed silent) or 5.02 (every member answered with an error).
pub const MIN_REPLIES: usize = 1;

impl Default for EmConfig {
    fn default() -> Self {
        EmConfig {
            local_addrs: Vec::new(),
            pool_v6: AddressPool::default_v6(),
            pool_v4: AddressPool::default_v4(),
            multicast_port: None,
            multicast_leisure: Duration::from_secs(5),
            multicast_slack: Duration::from_secs(1),
            response_size: 80,
            rate: 1000,
            mc_path: crate::mc::PATH.into(),
            hop_limit: 16,
            max_entities: 4096,
            max_jobs: 4096,
            max_depth: 16,
            access: AccessPolicy::open(),
            members: MemberPolicy::default(),
            budget: Budget::default(),
            quarantine: Duration::from_secs(600),
            allocation_burst: 16,
            allocation_interval: Duration::from_secs(6),
            wall_clock_at_zero_ms: 0,
            max_store_bytes: 8 << 20,
            gateway_id: None,
            challenge_unverified: false,
            management_wait: None,
            rd: None,
            rd_max_members: crate::profile::MAX_MEMBERS,
            dtls_members: Vec::new(),
        }
    }
}

/// How to reach one member.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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
    /// Why the entity breaks the member policy, if it does: an entity stored before the policy tightened
    /// loads, but its uses are refused with this reason until it is updated or deleted.
    violation: Option<String>,
    /// Members (labels) that did not answer their last request, and why (no response, unreachable):
    /// shown with the profile. Kept in memory by this worker, not stored.
    unreachable: BTreeMap<String, String>,
}

impl Entity {
    fn new(stored: StoredEntity, items: Arc<[Item]>, violation: Option<String>) -> Entity {
        Entity { stored, items, violation, unreachable: BTreeMap::new() }
    }

    fn local_members(&self) -> impl Iterator<Item = &str> {
        self.items.iter().filter_map(|i| match &i.target {
            Target::Local(n) => Some(n.as_str()),
            _ => None,
        })
    }
}

/// The entity table: every entity this worker serves, by name, with the behaviour that reads the table as
/// a whole — the checks of a new member list (`members`), what a use costs and what the store holds
/// (`budget`), the role a request needs (`access`). It dereferences to its map.
#[derive(Debug, Default)]
struct Table(BTreeMap<String, Entity>);

impl std::ops::Deref for Table {
    type Target = BTreeMap<String, Entity>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Table {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
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
    /// Stray memberships (journal entries no entity records) are undone: the members are asked to leave.
    Reconcile,
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
    /// Members (labels) that joined in this flow.
    joined_now: Vec<String>,
    /// Members (labels) asked to join in this flow: a rollback asks them all to leave (a join whose
    /// answer was lost may have happened).
    join_asked: Vec<String>,
    /// The group allocated by this flow, or whose members it asks to join or leave (kept reserved while it
    /// runs).
    allocated: Option<IpAddr>,
    /// A reconciliation's group belongs to this entity: its name is busy while the strays leave, so that
    /// no change of it asks a member to join while a leave to the same member is on its way.
    holder: Option<String>,
    failure: Option<(Code, String)>,
    /// The client allowed members that do not answer validation (`allow-offline`): they are accepted and
    /// listed in `offline` (unicast entities only).
    allow_offline: bool,
    /// Members accepted without an answer, and why they gave none.
    offline: BTreeMap<String, String>,
    /// The change is in the store already (written before members are asked to leave, so that a crash
    /// mid-leave finds the new state and the leaving members as strays in the journal): commit only
    /// answers.
    persisted: bool,
}

impl Flow {
    /// A flow of `action` on entity `name` in its first `stage`; the rest starts empty.
    #[allow(clippy::too_many_arguments)]
    fn new(
        action: Action,
        name: String,
        client: Option<InboundId>,
        accept: Option<ContentFormat>,
        old: Option<StoredEntity>,
        new: Option<StoredEntity>,
        items: Arc<[Item]>,
        stage: Stage,
    ) -> Box<Flow> {
        Box::new(Flow {
            action,
            client,
            pending_saved: false,
            accept,
            name,
            old,
            new,
            items,
            reports: Vec::new(),
            stage,
            joined_now: Vec::new(),
            join_asked: Vec::new(),
            allocated: None,
            holder: None,
            failure: None,
            allow_offline: false,
            offline: BTreeMap::new(),
            persisted: false,
        })
    }

    fn report(&mut self, label: &str) -> &mut MemberReport {
        if let Some(i) = self.reports.iter().position(|r| r.member == label) {
            return &mut self.reports[i];
        }
        self.reports.push(MemberReport { member: label.to_string(), steps: Vec::new() });
        let last = self.reports.len() - 1;
        &mut self.reports[last]
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
    /// Store writes in flight and what waits for each (see `writes`).
    writes: Writes,
    entities: Table,
    counters: BTreeMap<String, u64>,
    /// Names with a management flow in progress.
    busy: HashSet<String>,
    /// The fan-outs in progress (see `jobs`).
    jobs: Jobs,
    /// Observed entities (see `watch`).
    watches: Watches,
    /// Which part sent each request in flight (see `owners`).
    owners: Owners,
    /// Entities that follow a Resource Directory (see `follow`).
    follows: Follows,
    /// Multicast entities' groups registered in the directory (see `announce`).
    announces: Announces,
    /// Member exchanges held by uses in progress (see `quotas`).
    quotas: Quotas,
    /// Multicast group addresses and memberships (see `groups`).
    groups: Groups,
    /// Interrupted multicast creations found at start-up, undone at the first wake-up.
    recovery: Vec<StoredEntity>,
    /// This gateway's identity in `via` lists (drawn at the first use).
    gateway_id: Option<u32>,
    /// The only worker, or the manager or a replica of a sharded gateway (see `shards`).
    part: Part,
    /// What operators see (see `stats`).
    stats: EmStats,
    /// The change feed of a store several gateways share (see `cluster`).
    feed: Feed,
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
    /// An EM serving what `snapshot` holds (what its store's [`crate::Store::load`] gave the driver). Its
    /// writes go out as effects ([`crate::StoreOp`]): the node it is mounted on needs an effect runner on
    /// that store (see [`crate::store`]). Fails if the snapshot holds an invalid entity.
    pub fn new(config: EmConfig, snapshot: Snapshot) -> Result<EntityManager, StoreError> {
        let em = EntityManager::load(config, snapshot)?;
        info!(entities = em.entities.len(), "entity manager loaded");
        Ok(em)
    }

    /// [`EntityManager::new`] without the log line (a replica logs its own).
    fn load(config: EmConfig, snap: Snapshot) -> Result<EntityManager, StoreError> {
        config.pool_v6.check().map_err(StoreError::Config)?;
        config.pool_v4.check().map_err(StoreError::Config)?;
        let gateway_id = config.gateway_id;
        let feed = Feed::of(&snap);
        let (entities, recovery) = Table::load(&config, snap.entities)?;
        let mut em = EntityManager {
            config,
            writes: Writes::default(),
            busy: recovery.iter().map(|s| s.name.clone()).collect(),
            entities,
            counters: snap.counters,
            jobs: Jobs::new(),
            watches: Watches::default(),
            owners: Owners::default(),
            follows: Follows::default(),
            announces: Announces::default(),
            quotas: Quotas::default(),
            groups: Groups::load(&snap.journal, &snap.released),
            recovery,
            gateway_id,
            part: Part::Sole,
            stats: EmStats::default(),
            feed,
        };
        em.follows.touch();
        em.announces.touch();
        Ok(em)
    }

    pub fn config(&self) -> &EmConfig {
        &self.config
    }

    /// The counters of member exchanges and refusals (see [`EmStats`]).
    pub fn stats(&self) -> &EmStats {
        &self.stats
    }

    /// How many entities this worker serves.
    pub fn entity_count(&self) -> usize {
        self.entities.len()
    }

    /// Store writes started and not yet done.
    pub fn writes_in_flight(&self) -> usize {
        self.writes.len()
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

    /// Replaces the access policy (a configuration reload); requests in progress keep their answer.
    pub fn set_access(&mut self, access: AccessPolicy) {
        self.config.access = access;
    }

    fn route(&mut self, cx: &mut Context<'_>, inb: &IncomingRequest) -> Result<(), Fail> {
        let sub = cx.subpath(&inb.request);
        let m = inb.request.method;
        let parts: Vec<&str> = sub.iter().map(String::as_str).collect();
        let respond = |cx: &mut Context<'_>, r: Response| {
            cx.respond(inb.id, r);
            Ok(())
        };
        if inb.request.options.get_all(OptionNumber::URI_QUERY).any(|q| std::str::from_utf8(q).is_err()) {
            return Err(bad("a Uri-Query option is not UTF-8 text"));
        }
        let role = self.entities.authorise(&self.config.access, inb, m, &parts)?;
        if self.config.must_prove_address(inb, m, &parts) {
            cx.challenge(inb.id);
            return Ok(());
        }
        match (m, parts.as_slice()) {
            (Code::GET, []) => respond(cx, self.entities.list(&inb.request)),
            (Code::POST, []) => self.create(cx, inb, None),
            (_, []) => Err((Code::METHOD_NOT_ALLOWED, "/em supports GET (list) and POST (create)".into())),
            (Code::GET, [name]) => self.use_entity(cx, inb, name, false, role),
            (Code::PUT, [name]) if inb.request.options.contains(OptionNumber::IF_NONE_MATCH) => {
                // RFC 7252 §5.10.8.2: create only if absent.
                if self.entities.contains_key(*name) || self.busy.contains(*name) {
                    return Err((
                        Code::PRECONDITION_FAILED,
                        format!(
                            "entity {name} exists; change it with `corral entity update {name}` (POST \
                             /em/{name}/profile), or delete it first"
                        ),
                    ));
                }
                self.create(cx, inb, Some(name))
            }
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
                } else if is_profile_document(&inb.request) {
                    self.update(cx, inb, name, true)
                } else {
                    self.use_entity(cx, inb, name, true, role)
                }
            }
            (Code::POST, [name]) => self.use_entity(cx, inb, name, true, role),
            (Code::DELETE, [name]) => self.delete(cx, inb, name),
            (_, [_]) => Err((Code::METHOD_NOT_ALLOWED, "an entity supports GET, PUT, POST and DELETE".into())),
            (Code::GET, [name, "profile"]) => {
                respond(cx, self.entities.read_profile(name, &inb.request, self.follows.note(name)))
            }
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
        Action::Reconcile => "reconciled",
    }
}

impl EntityManager {
    /// Runs `f` on the jobs with what they borrow ([`JobCx`]), then continues the management flows whose
    /// jobs finished in it — in the order they finished, before anything else happens, as if the job had
    /// stepped its flow itself.
    fn with_jobs<R>(&mut self, cx: &mut Context<'_>, f: impl FnOnce(&mut Jobs, &mut JobCx<'_, '_>) -> R) -> R {
        let mut j = JobCx {
            cx,
            config: &self.config,
            entities: &mut self.entities,
            quotas: &mut self.quotas,
            stats: &mut self.stats,
            watches: &mut self.watches,
            owners: &mut self.owners,
        };
        let r = f(&mut self.jobs, &mut j);
        while let Some(job) = self.jobs.take_finished_flow() {
            self.flow_step(cx, job);
        }
        r
    }

    /// Sends what is due of job `id`, finishes it if it is complete (see [`Jobs::drive`]).
    fn drive(&mut self, cx: &mut Context<'_>, id: JobId) {
        self.with_jobs(cx, |jobs, j| jobs.drive(j, id));
    }

    /// What ends every input, whatever it was: finished children's results reach their parents, the
    /// follows and the directory registrations catch up with the entity table.
    fn after_input(&mut self, cx: &mut Context<'_>) {
        while let Some(ready) = self.jobs.pop_ready() {
            self.with_jobs(cx, |jobs, j| jobs.deliver(j, ready));
        }
        let replica = matches!(self.part, Part::Replica { .. });
        let follow = (self.config.rd, replica);
        for (name, members) in self.follows.tick((cx, &mut self.owners), &self.entities, follow, &self.busy) {
            self.follow_apply(cx, &name, members);
        }
        self.announces.tick((cx, &mut self.owners), self.config.rd.filter(|_| !replica), &self.entities);
        self.feed_ask(cx);
    }
}

impl Service for EntityManager {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        self.sync(cx);
        if let Err((code, msg)) = self.route(cx, &req) {
            debug!(%code, msg = %msg, "request refused");
            cx.respond(req.id, Response::error(code, msg));
        }
        self.after_input(cx);
    }

    fn handle_response(&mut self, cx: &mut Context<'_>, rid: RequestId, outcome: Outcome) {
        self.sync(cx);
        // One lookup finds the part that sent the request.
        match self.owners.get(rid).cloned() {
            Some(Owner::Job { job, slot, watch }) => {
                if let (Some(key), Some(i)) = (watch, slot) {
                    self.watches.update((cx, &mut self.owners), &key, i, rid, &outcome);
                }
                self.with_jobs(cx, |jobs, j| jobs.member_response(j, rid, (job, slot), outcome));
            }
            Some(Owner::Follow(name)) => {
                let limit = self.config.rd_max_members.clamp(1, crate::profile::MAX_MEMBERS);
                self.follows.response((cx, &mut self.owners), (rid, name), &outcome, limit);
            }
            Some(Owner::Announce(name)) => {
                self.owners.remove(rid);
                self.announces.response(cx, name, &outcome);
            }
            Some(Owner::Unannounce) => drop(self.owners.remove(rid)),
            owner => {
                if let Some(Owner::Watch { key, slot }) = owner {
                    self.watches.update((cx, &mut self.owners), &key, slot, rid, &outcome);
                }
                if cx.endpoint().is_active(rid) && !self.owners.observes(rid) {
                    cx.cancel(rid); // an observation nobody wants any more: its next notification gets RST
                }
            }
        }
        self.after_input(cx);
    }

    fn handle_effect(&mut self, cx: &mut Context<'_>, id: EffectId, done: EffectDone) {
        self.sync(cx);
        let Some(done) = self.feed_done(cx, id, done) else { return self.after_input(cx) };
        let result = match done.downcast::<crate::store::StoreDone>() {
            Ok(done) => done.0,
            Err(_) => Err(StoreError::Internal("a completion that is not the store's")),
        };
        match self.writes.take(id) {
            Some(wait) => self.write_done(cx, wait, result),
            None => warn!(?id, "completion of a store write nobody waits for"),
        }
        self.after_input(cx);
    }

    fn handle_timeout(&mut self, cx: &mut Context<'_>) {
        self.sync(cx);
        for stored in std::mem::take(&mut self.recovery) {
            self.recover(cx, stored);
        }
        let now = cx.now();
        if self.groups.reconcile_due(now) {
            self.reconcile(cx);
        }
        for id in self.jobs.due(now) {
            if self.jobs.fire(id) {
                self.drive(cx, id);
            }
        }
        self.after_input(cx);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        if !self.recovery.is_empty() || self.feed.is_due() {
            return Some(Instant::ZERO); // at once: the driver's first wake-up
        }
        [
            self.jobs.next_wake(),
            self.groups.next_reconcile(),
            self.part.sync_timeout(!self.watches.is_empty()),
            self.follows.next_wake(),
            self.announces.next_wake(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn links(&self) -> Vec<ResourceLink> {
        let mut v = vec![ResourceLink::new("").attr("ct", "40").attr("title", "Entity Manager")];
        for e in self.entities.values() {
            let link =
                ResourceLink::new(&e.stored.name).attr("rt", "core.entity").attr("ect", e.stored.profile.ect.as_str());
            v.push(if e.observable() { link.flag("obs") } else { link });
        }
        v
    }
}
