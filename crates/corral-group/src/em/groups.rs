//! Multicast groups: [`Groups`], the state of the group addresses and memberships — crash-safe membership
//! (the journal and its reconciliation), the groups reserved by flows in progress, and the reuse rules of
//! group addresses (quarantine and a rate limit on allocation).
//!
//! Before the EM asks a member to join or leave a group, the pair (group, member) goes into the store's
//! journal; an entry leaves the journal when the membership is recorded by a committed entity or the
//! member confirmed it is out (2.02, or 4.04 "not a member"). Whatever is left after a crash, a failed
//! rollback or a silent member is a *stray* membership: the EM asks those members to leave at start-up
//! and again every [`RECONCILE_EVERY`] while any are left, and never allocates a group that still has one.
//! An entry an entity records whose removal was lost (a crash before it was durable, a store error) is
//! *unsettled*: the same reconciliation removes it again.
//! A released group also rests for `quarantine` before reuse, and allocation is rate limited, so that
//! create/delete cycles cannot run through the pool onto a device that missed its leave.
//!
//! `impl Groups` finds the strays, schedules their reconciliation and allocates addresses, given the
//! entity table; what writes the store (settling the journal, a release) or starts a flow (asking strays
//! to leave) is `impl EntityManager`.

use super::jobs::Kind;
use super::writes::Wait;
use super::{pool_key, Action, EmConfig, EntityManager, Flow, Item, Stage, Table, Target};
use crate::store::Write;
use crate::uri;
use corral_proto::wire::{Code, OptionNumber};
use corral_proto::{Context, Duration, Instant, Response};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::{IpAddr, SocketAddr};
use tracing::info;

/// How often strays are asked to leave again while any are left.
pub(super) const RECONCILE_EVERY: Duration = Duration::from_secs(300);

/// The group addresses and memberships the EM keeps track of (the entities' own groups are in the entity
/// table).
#[derive(Debug, Default)]
pub(super) struct Groups {
    /// Groups reserved by flows in progress.
    reserved: HashSet<IpAddr>,
    /// The membership journal, mirrored from the store.
    journal: BTreeSet<(IpAddr, SocketAddr)>,
    /// Journal entries whose removal is on its way to the store.
    settling: BTreeSet<(IpAddr, SocketAddr)>,
    /// Released groups and when (Unix ms): the quarantine.
    released: BTreeMap<IpAddr, u64>,
    /// When stray memberships are next asked to leave.
    next_reconcile: Option<Instant>,
    /// Pending records (of refused or unreadable multicast creations) whose removal from the store failed:
    /// removed again at the next reconciliation; their names stay busy until they are gone.
    unremoved: BTreeSet<String>,
    /// The allocation rate limiter: tokens left and when they were last counted.
    alloc_bucket: Option<(u32, Instant)>,
}

impl Groups {
    /// The state a store holds: its journal and release times. Strays left by a crash are asked to leave
    /// at the first wake-up.
    pub(super) fn load(journal: &[(IpAddr, SocketAddr)], released: &BTreeMap<IpAddr, u64>) -> Groups {
        Groups {
            reserved: HashSet::new(),
            journal: journal.iter().copied().collect(),
            settling: BTreeSet::new(),
            unremoved: BTreeSet::new(),
            released: released.clone(),
            next_reconcile: (!journal.is_empty()).then_some(Instant::ZERO),
            alloc_bucket: None,
        }
    }

    /// A flow holds `group` while it runs: it is neither allocated nor reconciled meanwhile.
    pub(super) fn reserve(&mut self, group: IpAddr) {
        self.reserved.insert(group);
    }

    pub(super) fn unreserve(&mut self, group: IpAddr) {
        self.reserved.remove(&group);
    }

    /// The journal entries of `addrs` in `group` are on disk.
    pub(super) fn noted(&mut self, group: IpAddr, addrs: &[SocketAddr]) {
        self.journal.extend(addrs.iter().map(|a| (group, *a)));
    }

    /// The removal of the journal entries of `addrs` in `group` is on its way to the store.
    pub(super) fn settling(&mut self, group: IpAddr, addrs: &[SocketAddr]) {
        self.settling.extend(addrs.iter().map(|a| (group, *a)));
    }

    /// The removal of the journal entries of `addrs` in `group` is done: `gone` from the store, or failed
    /// (they stay, and a reconciliation removes them again).
    pub(super) fn settled(&mut self, group: IpAddr, addrs: &[SocketAddr], gone: bool) {
        for a in addrs {
            self.settling.remove(&(group, *a));
            if gone {
                self.journal.remove(&(group, *a));
            }
        }
    }

    /// `group` was released at `at` (Unix ms): its quarantine starts.
    pub(super) fn released_at(&mut self, group: IpAddr, at: u64) {
        self.released.insert(group, at);
    }

    /// When stray memberships are next asked to leave.
    pub(super) fn next_reconcile(&self) -> Option<Instant> {
        self.next_reconcile
    }

    pub(super) fn reconcile_due(&self, now: Instant) -> bool {
        self.next_reconcile.is_some_and(|t| t <= now)
    }

    /// Takes one allocation from the rate limiter (a token bucket of `burst` refilled one per `every`), or
    /// says how long until the next.
    pub(super) fn allocation_token(&mut self, now: Instant, every: Duration, burst: u32) -> Result<(), Duration> {
        let (tokens, since) = self.alloc_bucket.unwrap_or((burst, now));
        let (tokens, since) = if every.is_zero() {
            (burst, now)
        } else {
            let n = now.saturating_since(since).as_micros() / every.as_micros();
            let tokens = tokens.saturating_add(u32::try_from(n).unwrap_or(u32::MAX)).min(burst);
            (tokens, if tokens == burst { now } else { since + every.saturating_mul(n) })
        };
        if tokens == 0 {
            self.alloc_bucket = Some((0, since));
            return Err((since + every).saturating_since(now));
        }
        self.alloc_bucket = Some((tokens - 1, since));
        Ok(())
    }

    /// Journal entries no committed entity records and no flow in progress owns: memberships to undo.
    pub(super) fn strays(&self, entities: &Table) -> BTreeMap<IpAddr, Vec<SocketAddr>> {
        self.journal_entries(entities, false)
    }

    /// Journal entries a committed entity records, which no flow in progress owns and whose removal is
    /// not on its way: a removal lost to a crash or a store error, to write again.
    pub(super) fn unsettled(&self, entities: &Table) -> BTreeMap<IpAddr, Vec<SocketAddr>> {
        self.journal_entries(entities, true)
    }

    /// The journal entries outside groups reserved by flows, by group: those an entity records (and whose
    /// removal is not on its way), or those none records.
    fn journal_entries(&self, entities: &Table, recorded_ones: bool) -> BTreeMap<IpAddr, Vec<SocketAddr>> {
        let mut recorded: HashSet<(IpAddr, SocketAddr)> = HashSet::new();
        for e in entities.values() {
            let Some(g) = e.stored.group else { continue };
            for (it, joined) in e.items.iter().zip(&e.stored.joined) {
                if let (Target::Remote { addr, .. }, true) = (&it.target, joined) {
                    recorded.insert((g, *addr));
                }
            }
        }
        let mut out: BTreeMap<IpAddr, Vec<SocketAddr>> = BTreeMap::new();
        for entry @ (g, a) in &self.journal {
            let wanted = if recorded_ones {
                recorded.contains(entry) && !self.settling.contains(entry)
            } else {
                !recorded.contains(entry)
            };
            if wanted && !self.reserved.contains(g) {
                out.entry(*g).or_default().push(*a);
            }
        }
        out
    }

    /// Schedules the next reconciliation if strays, unsettled entries or unremoved pending records are left.
    pub(super) fn schedule_reconcile(&mut self, now: Instant, entities: &Table) {
        let left =
            !self.unremoved.is_empty() || !(self.strays(entities).is_empty() && self.unsettled(entities).is_empty());
        if self.next_reconcile.is_none() && left {
            self.next_reconcile = Some(now + RECONCILE_EVERY);
        }
    }

    /// The removal of `name`'s pending record failed: the next reconciliation removes it again.
    pub(super) fn pending_record_left(&mut self, name: String) {
        self.unremoved.insert(name);
    }

    /// The groups that may not be allocated now: in use, reserved by a flow, with a stray member, or
    /// quarantined since their release.
    pub(super) fn unallocatable(&self, config: &EmConfig, entities: &Table, now: Instant) -> HashSet<IpAddr> {
        let wall = config.wall_ms(now);
        let q = config.quarantine.as_millis();
        entities
            .values()
            .filter_map(|e| e.stored.group)
            .chain(self.reserved.iter().copied())
            .chain(self.journal.iter().map(|(g, _)| *g))
            .chain(self.released.iter().filter(|(_, at)| wall < at.saturating_add(q)).map(|(g, _)| *g))
            .collect()
    }
}

impl EmConfig {
    /// Wall-clock milliseconds now (see [`EmConfig::wall_clock_at_zero_ms`]).
    pub(super) fn wall_ms(&self, now: Instant) -> u64 {
        self.wall_clock_at_zero_ms.saturating_add(now.as_millis())
    }
}

impl EntityManager {
    /// The membership of `addrs` in `group` is settled (recorded by an entity, or confirmed left): their
    /// journal entries go, from memory once they are gone from the store (see `writes`).
    pub(super) fn journal_settle(&mut self, cx: &mut Context<'_>, group: IpAddr, addrs: &[SocketAddr]) {
        if addrs.is_empty() {
            return;
        }
        self.groups.settling(group, addrs);
        self.write(cx, vec![Write::JournalRemove(group, addrs.to_vec())], Wait::Settled(group, addrs.to_vec()));
    }

    /// Removes again the pending records and journal entries whose removal was lost, and asks every stray
    /// member to leave its group (one flow per group), unless a reconciliation runs.
    pub(super) fn reconcile(&mut self, cx: &mut Context<'_>) {
        self.groups.next_reconcile = None;
        for name in std::mem::take(&mut self.groups.unremoved) {
            info!(entity = %name, "removing a pending record again");
            self.remove_pending_record(cx, name);
        }
        for (g, addrs) in self.groups.unsettled(&self.entities) {
            info!(group = %g, members = addrs.len(), "removing journal entries of recorded memberships again");
            self.journal_settle(cx, g, &addrs);
        }
        if self.busy.iter().any(|n| n.starts_with(RECONCILE_PREFIX)) {
            return;
        }
        let strays = self.groups.strays(&self.entities);
        for (g, addrs) in strays {
            let holder = self.entities.values().find(|e| e.stored.group == Some(g)).map(|e| e.stored.name.clone());
            if holder.as_ref().is_some_and(|h| self.busy.contains(h)) {
                continue; // the change in progress schedules the next reconciliation when it ends
            }
            let name = format!("{RECONCILE_PREFIX}{g}");
            info!(group = %g, members = addrs.len(), "asking stray members to leave");
            let items: Vec<Item> =
                addrs.iter().map(|a| Item { label: uri::format_coap(*a, &[]), target: remote_target(*a) }).collect();
            self.busy.insert(name.clone());
            self.busy.extend(holder.clone());
            self.groups.reserve(g);
            let mut flow =
                Flow::new(Action::Reconcile, name, None, None, None, None, items.clone().into(), Stage::LeavingAll);
            flow.allocated = Some(g);
            flow.holder = holder;
            self.flow_job(cx, flow, Kind::Leave(g), items);
        }
    }

    /// Records that `group` is free again: it rests in quarantine from now on (in memory at once; a store
    /// that fails to record it leaves it quarantined in memory only).
    pub(super) fn release_group(&mut self, cx: &mut Context<'_>, group: IpAddr) {
        if self.entities.values().any(|e| e.stored.group == Some(group)) {
            return;
        }
        let at = self.config.wall_ms(cx.now());
        let what = "release time not stored; the group is quarantined in memory only";
        self.write(cx, vec![Write::ReleaseGroup(group, at)], Wait::Detached(what));
        self.groups.released_at(group, at);
    }
}

/// The prefix of the internal names of reconciliation flows (not a valid entity name: no clash).
pub(super) const RECONCILE_PREFIX: &str = "#reconcile ";

fn remote_target(addr: SocketAddr) -> Target {
    Target::Remote { addr, path: Vec::new(), query: Vec::new(), entity: false }
}

pub(super) fn remote_addrs(items: &[Item]) -> Vec<SocketAddr> {
    items
        .iter()
        .filter_map(|i| match &i.target {
            Target::Remote { addr, .. } => Some(*addr),
            Target::Local(_) => None,
        })
        .collect()
}

/// Why a multicast creation finds no address (5.03).
pub(super) const POOL_EXHAUSTED: &str = "multicast address pool exhausted (addresses in use, quarantined after release, or with members that have not confirmed leaving)";

impl Groups {
    /// Allocates a group address for entity `name` (`v4`: its members are IPv4) from the pool after the
    /// cursor in `counters`: the address, the cursor's counter and its new value. `Ok(None)`: the pool has
    /// no free address; `Err`: the allocation rate limit, 5.03 with Max-Age.
    pub(super) fn allocate(
        &mut self,
        (config, entities, counters): (&EmConfig, &Table, &BTreeMap<String, u64>),
        now: Instant,
        name: &str,
        v4: bool,
    ) -> Result<Option<(IpAddr, &'static str, u64)>, Response> {
        let pool = if v4 { config.pool_v4 } else { config.pool_v6 };
        let key = pool_key(&pool.base);
        if let Err(wait) = self.allocation_token(now, config.allocation_interval, config.allocation_burst.max(1)) {
            let mut r = Response::error(
                Code::SERVICE_UNAVAILABLE,
                format!("entity {} not created: multicast addresses are allocated at most {} at once and one per {} s; try again in {} s", name, config.allocation_burst, config.allocation_interval.as_secs(), wait.as_secs() + 1),
            );
            r.options.set_uint(OptionNumber::MAX_AGE, wait.as_secs() + 1);
            return Err(r);
        }
        let mut cursor = counters.get(key).copied().unwrap_or(0);
        let blocked = self.unallocatable(config, entities, now);
        Ok(pool.allocate(&mut cursor, |a| blocked.contains(&a)).map(|g| (g, key, cursor)))
    }
}
