//! Observed entities: watches over member observations (see the module docs of [`super`]), and
//! [`Watches`], the table that owns them with the member observations and the latest change notes, and
//! their behaviour (`impl Watches`: attaching a use, member notifications, ending). Whether an entity can
//! be observed, and under which key, is the entity's own (`impl Entity`).
//!
//! Owns: each watch's member observations (entered in `owners` as the watch's) and latest results. Must never: keep a watch whose entity
//! changed or went away, or one no member notifies any more.

use super::jobs::{member_result, Job, JobId, Jobs, Res, Slot};
use super::owners::Owners;
use super::{Entity, EntityManager, HashMap, Target};
use crate::profile::{Ect, Op, Profile};
use corral_proto::{Context, Instant, Outcome, RequestId, SendParams};
use std::sync::Arc;
use tracing::debug;

/// An observed entity: the member observations and each member's latest result (see the module docs).
#[derive(Debug)]
pub(super) struct Watch {
    pub(super) entity: String,
    /// The entity's path as its observers registered it (`/em/<name>`).
    pub(super) path: String,
    /// The member observations still running, by slot.
    pub(super) obs: Vec<Option<RequestId>>,
    /// Each member's latest result; `None` until it first answered or failed.
    pub(super) latest: Vec<Option<Res>>,
    /// The use job whose member requests registered the observations, while it runs.
    pub(super) job: Option<JobId>,
}

impl Watch {
    /// Every member has answered or failed: notifications can be rendered from the cache.
    fn ready(&self) -> bool {
        self.latest.iter().all(Option::is_some)
    }
}

/// The observed entities, by watch key (see [`EntityManager::watch_key`]).
#[derive(Debug, Default)]
pub(super) struct Watches {
    by_key: HashMap<String, Watch>,
    /// The latest updates: the entity, when, and what changed — the observers' renderings at that instant
    /// (the endpoint replays their registrations right after the change) carry it.
    notes: Vec<(String, Instant, Arc<[String]>)>,
}

impl Watches {
    pub(super) fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    pub(super) fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Removes watch `key` and gives its member observations back to `owners`; the caller deregisters
    /// them.
    fn remove(&mut self, owners: &mut Owners, key: &str) -> Option<Watch> {
        let w = self.by_key.remove(key)?;
        for rid in w.obs.iter().flatten() {
            owners.watch_done_with(*rid);
        }
        Some(w)
    }

    /// The keys of the watches of entity `name`.
    fn keys_of(&self, name: &str) -> Vec<String> {
        self.by_key.iter().filter(|(_, w)| w.entity == name).map(|(k, _)| k.clone()).collect()
    }

    /// What changed in entity `name` at `now`, if it was updated at that instant (see `note_change`).
    pub(super) fn note_for(&self, name: &str, now: Instant) -> Option<Arc<[String]>> {
        self.notes.iter().find(|(n, at, _)| n == name && *at == now).map(|(_, _, changes)| changes.clone())
    }
}

impl Entity {
    /// Whether a registration on this entity can be kept: a unicast entity of remote members only.
    pub(super) fn observable(&self) -> bool {
        self.stored.profile.ect == Ect::Unicast && self.items.iter().all(|i| matches!(i.target, Target::Remote { .. }))
    }

    /// The watch that serves this entity's observers with operation `op`. One per entity — the members'
    /// values do not depend on the operation — except for members that are other gateways' entities: they
    /// are asked for the operation's aggregate (avg of averages), so each arithmetic operation has its own.
    pub(super) fn watch_key(&self, op: Op) -> String {
        let name = &self.stored.name;
        let remote_entities = self.items.iter().any(|i| matches!(i.target, Target::Remote { entity: true, .. }));
        if remote_entities && op.is_arithmetic() {
            format!("{name}?eo={op}")
        } else {
            name.to_string()
        }
    }
}

impl Watches {
    /// Makes use job `id` of `entity` answer an Observe registration (or render a notification): from the watch's
    /// cache when it is ready; else by asking the members, with Observe=0 when there is no watch yet.
    pub(super) fn attach(&mut self, jobs: &mut Jobs, entity: &Entity, id: JobId, path: String) {
        let Some((n, op)) = jobs.get(&id).map(|j| (j.slots.len(), j.spec.op)) else { return };
        let (key, name) = (entity.watch_key(op), &entity.stored.name);
        let cached: Option<Vec<Res>> = self
            .by_key
            .get(&key)
            .filter(|w| w.ready() && w.job.is_none() && w.latest.len() == n)
            .map(|w| w.latest.iter().flatten().cloned().collect());
        let first = !self.by_key.contains_key(&key);
        let Some(job) = jobs.get_mut(&id) else { return };
        job.observable = true;
        if let Some(cached) = cached {
            job.next = n;
            for (i, res) in cached.into_iter().enumerate() {
                jobs.set_slot(id, i, Slot::Done(res));
            }
        } else if first {
            job.watch = Some(key.clone());
            let w = Watch { entity: name.to_string(), path, obs: vec![None; n], latest: vec![None; n], job: Some(id) };
            self.by_key.insert(key, w);
        }
        // Otherwise the first round is still running: this registration asks the members once more.
    }

    /// A member observation of watch `key` answered, notified, or ended.
    pub(super) fn update(
        &mut self,
        (cx, owners): (&mut Context<'_>, &mut Owners),
        key: &str,
        i: usize,
        rid: RequestId,
        outcome: &Outcome,
    ) {
        let res = match outcome {
            Outcome::Response { response, .. } => member_result(true, response),
            Outcome::Failed(e) => Res::silent(e.to_string()),
            Outcome::MulticastDone | Outcome::Pong { .. } => Res::silent("no response"),
        };
        let active = cx.endpoint().is_active(rid);
        if !active {
            owners.watch_done_with(rid);
        }
        let Some(w) = self.by_key.get_mut(key) else { return };
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
            self.end(cx, owners, key);
            return;
        }
        if w.ready() {
            cx.changed(&w.path);
        }
        if w.obs.iter().all(Option::is_none) {
            // No member notifies any more: the observers' next rendering starts a new watch.
            self.by_key.remove(key);
        }
    }

    /// A watch's first use answered before asking every member (`enr` reached, or its timeout): the members
    /// it never asked are registered now, all at once, so that the watch covers the whole entity.
    pub(super) fn unasked(&mut self, cx: &mut Context<'_>, owners: &mut Owners, mc_path: &str, id: JobId, job: &Job) {
        let Some(key) = job.watch.clone() else { return };
        for (i, item) in job.spec.items.iter().enumerate() {
            if !matches!(job.slots[i], Slot::Waiting) {
                continue;
            }
            let Some((addr, req, confirmable)) = job.member_request(i, &item.target, mc_path) else { continue };
            if let Ok(rid) = cx.request(addr, req, SendParams { confirmable, ..SendParams::default() }) {
                if !self.track(owners, id, &key, i, rid) {
                    cx.cancel(rid);
                    return;
                }
            }
        }
    }

    /// Records `rid` as member `i`'s observation in watch `key`, if that watch is still the one job `id`
    /// started (an entity changed meanwhile ends it, and a new watch may have taken the key).
    pub(super) fn track(&mut self, owners: &mut Owners, id: JobId, key: &str, i: usize, rid: RequestId) -> bool {
        let Some(slot) = self.by_key.get_mut(key).filter(|w| w.job == Some(id)).and_then(|w| w.obs.get_mut(i)) else {
            return false;
        };
        *slot = Some(rid);
        owners.watch(rid, key, i);
        true
    }

    /// The use job `id` that started watch `key` finished.
    pub(super) fn job_done(&mut self, id: JobId, key: &str) {
        let Some(w) = self.by_key.get_mut(key) else { return };
        if w.job == Some(id) {
            w.job = None;
            if w.obs.iter().all(Option::is_none) {
                self.by_key.remove(key); // no member is observable: nothing would ever refresh the cache
            }
        }
    }

    /// Ends watch `key`: every member observation is deregistered (RFC 7641 §3.6). Returns its path.
    pub(super) fn end(&mut self, cx: &mut Context<'_>, owners: &mut Owners, key: &str) -> Option<String> {
        let w = self.remove(owners, key)?;
        for rid in w.obs.into_iter().flatten() {
            cx.deregister(rid);
        }
        Some(w.path)
    }

    /// The entity `name` changed or went away: its watches end and its observers get a last rendering
    /// (the new entity, or 4.04). Returns whether it had any.
    pub(super) fn end_of(&mut self, cx: &mut Context<'_>, owners: &mut Owners, name: &str) -> bool {
        let keys = self.keys_of(name);
        let mut paths: Vec<String> = keys.iter().filter_map(|k| self.end(cx, owners, k)).collect();
        paths.dedup();
        let any = !paths.is_empty();
        for path in paths {
            cx.changed(&path);
        }
        any
    }

    /// Entity `name` changed from `old` to `new` at `now`: its observers' renderings at this instant say
    /// what changed (see `Job::note`). Notes of earlier instants are forgotten.
    pub(super) fn note_change(&mut self, now: Instant, name: &str, old: &Profile, new: &Profile) {
        self.notes.retain(|(_, at, _)| *at == now);
        let changes = new.changes_from(old);
        if !changes.is_empty() {
            self.notes.push((name.to_string(), now, changes.into()));
        }
    }
}

impl EntityManager {
    /// How many watches the EM keeps (one per observed entity; see `watch_key`).
    pub fn watched_entities(&self) -> usize {
        self.watches.len()
    }
}
