//! Several gateways on one store (issue 45): the change feed that brings the changes other gateways commit
//! into this one's entity table, and the table's side of taking changes made elsewhere — by another
//! gateway, or (for a replica) by this gateway's manager worker (`shards`).
//!
//! A store that several gateways share says so at load ([`Snapshot::feed`], the version it was read at).
//! The EM that makes changes (the only worker, or the manager) then keeps one [`ChangesSince`] effect in
//! flight, from the last version it saw: the runner completes it as soon as another gateway committed a
//! change — the store's wake-up (PostgreSQL's NOTIFY) only says "look", the changes are re-read — or after
//! at most [`crate::store::FEED_WAIT`] with none, and the EM asks again at once. So a change through
//! another gateway is in this one's table within a second, and its observers here are told (the watch
//! ends with the new entity, or 4.04). A gateway too far behind gets everything again
//! ([`Feed::Resync`]), and takes the difference. Uses never wait for the feed: they are served from the
//! table, as always.
//!
//! Names with a change of this gateway's own in progress are left alone while it runs: its commit decides
//! (create-only in the store: a name another gateway created first fails it with 4.12, see `flows`). Once
//! no such change is in progress, the feed reads again from before the batch it skipped them in, so the
//! table ends as the store is whichever way the change went (re-reading is harmless: entities come as they
//! are now, and those equal to the table's are left alone).
//!
//! Owns: the feed's state and the taking of changes. Must never: write the store, or block.

use super::{EntityManager, Part};
use crate::store::Feed::{Changed, Resync};
use crate::store::{Changes, ChangesSince, Snapshot, StoreError, StoredEntity};
use corral_proto::{Context, EffectDone, EffectId};
use tracing::{debug, info, warn};

/// The change feed: where it stands, and what it left alone because a change of this gateway's own was
/// in progress.
#[derive(Debug)]
pub(super) struct Feed {
    state: Feeding,
    /// Read again from this version once none of `skipped` is busy.
    again: Option<u64>,
    skipped: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Feeding {
    /// The store is this gateway's alone (or this EM is a replica): no feed.
    Off,
    /// To ask for the changes after this version at the end of this input.
    Due(u64),
    /// Asked, under this effect id, for the changes after this version.
    Waiting(EffectId, u64),
}

impl Feed {
    /// The feed of an EM loaded from `snapshot`.
    pub(super) fn of(snapshot: &Snapshot) -> Feed {
        Feed { state: snapshot.feed.map_or(Feeding::Off, Feeding::Due), again: None, skipped: Vec::new() }
    }

    pub(super) fn is_due(&self) -> bool {
        matches!(self.state, Feeding::Due(_))
    }
}

impl EntityManager {
    /// Keeps the change feed's read in flight (at the end of every input).
    pub(super) fn feed_ask(&mut self, cx: &mut Context<'_>) {
        let Feeding::Due(mut since) = self.feed.state else { return };
        if matches!(self.part, Part::Replica { .. }) {
            return;
        }
        if let Some(again) = self.feed.again.filter(|_| !self.feed.skipped.iter().any(|n| self.busy.contains(n))) {
            since = since.min(again);
            self.feed.again = None;
            self.feed.skipped.clear();
        }
        let id = cx.effect(Box::new(ChangesSince(since)));
        self.feed.state = Feeding::Waiting(id, since);
    }

    /// `done` if it is not the feed's completion; otherwise the changes it brings are taken.
    pub(super) fn feed_done(&mut self, cx: &mut Context<'_>, id: EffectId, done: EffectDone) -> Option<EffectDone> {
        let Feeding::Waiting(waiting, since) = self.feed.state else { return Some(done) };
        if waiting != id {
            return Some(done);
        }
        let result = match done.downcast::<Changes>() {
            Ok(changes) => changes.0,
            Err(_) => Err(StoreError::Internal("a completion of the change feed that is not Changes")),
        };
        self.feed.state = Feeding::Due(since);
        let skipped = match result {
            Ok(Changed { version, entities }) => {
                self.feed.state = Feeding::Due(version);
                debug!(version, changed = entities.len(), "changes through other gateways");
                self.take_changes(cx, entities)
            }
            Ok(Resync(snapshot)) => {
                info!(from = since, to = ?snapshot.feed, "too far behind the other gateways: reading everything again");
                self.feed.state = Feeding::Due(snapshot.feed.unwrap_or(since));
                let changes = self.entities.difference(snapshot.entities);
                self.take_changes(cx, changes)
            }
            // The runner waited before failing: asking again at once backs off by itself.
            Err(e) => {
                warn!(error = %e, "the change feed failed; asking again");
                Vec::new()
            }
        };
        if !skipped.is_empty() {
            self.feed.again = Some(self.feed.again.map_or(since, |a| a.min(since)));
            self.feed.skipped.extend(skipped);
        }
        None
    }

    /// Changes made elsewhere, into the table: entities added, replaced (`Some`) or gone (`None`). Uses in
    /// progress of a changed entity end with what they have; its observers get their last rendering (the
    /// new entity, or 4.04); a manager publishes the table to its replicas. Returns the names left alone
    /// because this gateway is changing them (see the module docs).
    pub(super) fn take_changes(
        &mut self,
        cx: &mut Context<'_>,
        changes: Vec<(String, Option<StoredEntity>)>,
    ) -> Vec<String> {
        let now = cx.now();
        let (mut changed, mut skipped) = (Vec::new(), Vec::new());
        for (name, stored) in changes {
            if self.busy.contains(&name) {
                skipped.push(name); // this gateway's own change of it decides
                continue;
            }
            match stored {
                None => {
                    if self.entities.remove(&name).is_none() {
                        continue;
                    }
                    self.stats.forget_entity(&name);
                    self.with_jobs(cx, |jobs, j| {
                        jobs.end_jobs_of(j, &name, Some("not finished: the entity was deleted meanwhile"))
                    });
                }
                // Another gateway's multicast creation in progress: the entity comes once it is committed.
                Some(stored) if stored.pending => continue,
                Some(stored) => {
                    if self.entities.get(&name).is_some_and(|e| e.stored == stored) {
                        continue;
                    }
                    if let Some(old) = self.entities.get(&name).map(|e| e.stored.profile.clone()) {
                        self.watches.note_change(now, &name, &old, &stored.profile);
                    }
                    match self.config.entity(stored) {
                        Ok(entity) => {
                            self.entities.insert(name.clone(), entity);
                        }
                        Err(why) => {
                            warn!(entity = %name, why = %why, "an entity changed elsewhere does not resolve here; left out");
                            self.entities.remove(&name);
                        }
                    }
                }
            }
            changed.push(name);
        }
        if changed.is_empty() {
            return skipped;
        }
        self.part.publish(&self.entities);
        self.follows.touch();
        self.announces.touch();
        for name in changed {
            self.with_jobs(cx, |jobs, j| jobs.end_jobs_of(j, &name, None));
            if !self.watches.end_of(cx, &mut self.owners, &name) {
                cx.changed(&format!("/em/{name}"));
            }
        }
        skipped
    }
}

impl super::Table {
    /// What turns this table into `entities`: every entity that differs or is new, and every one gone.
    pub(super) fn difference(&self, entities: Vec<StoredEntity>) -> Vec<(String, Option<StoredEntity>)> {
        let mut out: Vec<(String, Option<StoredEntity>)> =
            self.keys().filter(|n| !entities.iter().any(|e| &e.name == *n)).map(|n| (n.clone(), None)).collect();
        for e in entities {
            if !e.pending && self.get(&e.name).is_none_or(|mine| mine.stored != e) {
                out.push((e.name.clone(), Some(e)));
            }
        }
        out
    }
}
