//! Multicast groups: [`Groups`], the state of the group addresses and memberships — crash-safe membership
//! (the journal and its reconciliation), the groups reserved by flows in progress, and the reuse rules of
//! group addresses (quarantine and a rate limit on allocation).
//!
//! Before the EM asks a member to join or leave a group, the pair (group, member) goes into the store's
//! journal; an entry leaves the journal when the membership is recorded by a committed entity or the
//! member confirmed it is out (2.02, or 4.04 "not a member"). Whatever is left after a crash, a failed
//! rollback or a silent member is a *stray* membership: the EM asks those members to leave at start-up
//! and again every [`RECONCILE_EVERY`] while any are left, and never allocates a group that still has one.
//! A released group also rests for `quarantine` before reuse, and allocation is rate limited, so that
//! create/delete cycles cannot run through the pool onto a device that missed its leave.

use super::*;

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
    /// Released groups and when (Unix ms): the quarantine.
    released: BTreeMap<IpAddr, u64>,
    /// When stray memberships are next asked to leave.
    next_reconcile: Option<Instant>,
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

    /// The journal entries of `addrs` in `group` are gone from the store.
    pub(super) fn settled(&mut self, group: IpAddr, addrs: &[SocketAddr]) {
        for a in addrs {
            self.journal.remove(&(group, *a));
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
    fn allocation_token(&mut self, now: Instant, every: Duration, burst: u32) -> Result<(), Duration> {
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
}

impl EntityManager {
    /// The membership of `addrs` in `group` is settled (recorded by an entity, or confirmed left): their
    /// journal entries go, from memory once they are gone from the store (see `writes`).
    pub(super) fn journal_settle(&mut self, cx: &mut Context<'_>, group: IpAddr, addrs: &[SocketAddr]) {
        if addrs.is_empty() {
            return;
        }
        self.write(cx, vec![Write::JournalRemove(group, addrs.to_vec())], Wait::Settled(group, addrs.to_vec()));
    }

    /// Journal entries no committed entity records and no flow in progress owns: memberships to undo.
    pub(super) fn strays(&self) -> BTreeMap<IpAddr, Vec<SocketAddr>> {
        let mut recorded: HashSet<(IpAddr, SocketAddr)> = HashSet::new();
        for e in self.entities.values() {
            let Some(g) = e.stored.group else { continue };
            for (it, joined) in e.items.iter().zip(&e.stored.joined) {
                if let (Target::Remote { addr, .. }, true) = (&it.target, joined) {
                    recorded.insert((g, *addr));
                }
            }
        }
        let mut out: BTreeMap<IpAddr, Vec<SocketAddr>> = BTreeMap::new();
        for (g, a) in &self.groups.journal {
            if !recorded.contains(&(*g, *a)) && !self.groups.reserved.contains(g) {
                out.entry(*g).or_default().push(*a);
            }
        }
        out
    }

    /// Asks every stray member to leave its group (one flow per group), unless a reconciliation runs.
    pub(super) fn reconcile(&mut self, cx: &mut Context<'_>) {
        self.groups.next_reconcile = None;
        if self.busy.iter().any(|n| n.starts_with(RECONCILE_PREFIX)) {
            return;
        }
        let strays = self.strays();
        for (g, addrs) in strays {
            let name = format!("{RECONCILE_PREFIX}{g}");
            info!(group = %g, members = addrs.len(), "asking stray members to leave");
            let items: Vec<Item> =
                addrs.iter().map(|a| Item { label: uri::format_coap(*a, &[]), target: remote_target(*a) }).collect();
            self.busy.insert(name.clone());
            self.groups.reserve(g);
            let mut flow =
                Flow::new(Action::Reconcile, name, None, None, None, None, items.clone().into(), Stage::LeavingAll);
            flow.allocated = Some(g);
            self.flow_job(cx, flow, Kind::Leave(g), items);
        }
    }

    /// Schedules the next reconciliation if strays are left.
    pub(super) fn schedule_reconcile(&mut self, now: Instant) {
        if self.groups.next_reconcile.is_none() && !self.strays().is_empty() {
            self.groups.next_reconcile = Some(now + RECONCILE_EVERY);
        }
    }

    /// Wall-clock milliseconds now (see [`EmConfig::wall_clock_at_zero_ms`]).
    pub(super) fn wall_ms(&self, now: Instant) -> u64 {
        self.config.wall_clock_at_zero_ms.saturating_add(now.as_millis())
    }

    /// Records that `group` is free again: it rests in quarantine from now on (in memory at once; a store
    /// that fails to record it leaves it quarantined in memory only).
    pub(super) fn release_group(&mut self, cx: &mut Context<'_>, group: IpAddr) {
        if self.entities.values().any(|e| e.stored.group == Some(group)) {
            return;
        }
        let at = self.wall_ms(cx.now());
        let what = "release time not stored; the group is quarantined in memory only";
        self.write(cx, vec![Write::ReleaseGroup(group, at)], Wait::Detached(what));
        self.groups.released_at(group, at);
    }

    /// The groups that may not be allocated now: in use, reserved by a flow, with a stray member, or
    /// quarantined since their release.
    pub(super) fn unallocatable(&self, now: Instant) -> HashSet<IpAddr> {
        let wall = self.wall_ms(now);
        let q = self.config.quarantine.as_millis();
        self.entities
            .values()
            .filter_map(|e| e.stored.group)
            .chain(self.groups.reserved.iter().copied())
            .chain(self.groups.journal.iter().map(|(g, _)| *g))
            .chain(self.groups.released.iter().filter(|(_, at)| wall < at.saturating_add(q)).map(|(g, _)| *g))
            .collect()
    }

    /// Takes one allocation from the rate limiter, or says how long until the next.
    pub(super) fn allocation_token(&mut self, now: Instant) -> Result<(), Duration> {
        self.groups.allocation_token(now, self.config.allocation_interval, self.config.allocation_burst.max(1))
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
