//! Management flows: creation, update, deletion and start-up recovery — validate → join → commit, with
//! rollback; every change is on disk before it is answered. A flow that writes waits for its write (see
//! `writes`) and goes on in [`EntityManager::write_done`]. The flows span the parts (the table, jobs,
//! groups, the store, watches), so they are `impl EntityManager`; what a flow keeps for itself — the
//! results it records, its writes, its answer — is `impl Flow`, and the profile a creation or update
//! asks for is a function of the request alone.

use super::groups::{remote_addrs, POOL_EXHAUSTED};
use super::jobs::{Job, Kind, Res, Slot};
use super::requests::{read_patch, report_accept};
use super::writes::{Next, Wait};
use super::{
    bad, valid_entity_name, verb, Action, EmConfig, EntityManager, Fail, Flow, Item, Stage, Table, Target,
    COUNTER_NAMES,
};
use crate::output::MemberReport;
use crate::profile::{Ect, Op, Profile, ProfilePatch};
use crate::store::{StoreError, StoredEntity, Write};
use crate::{output, uri};
use corral_proto::wire::{Code, ContentFormat, OptionNumber};
use corral_proto::{Context, Duration, IncomingRequest, Instant, Request, Response};
use serde_json::{json, Value as Json};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use tracing::{debug, info, warn};

impl EntityManager {
    /// Starts a flow's fan-out stage over `items`, once what must be on disk first is (see `writes`).
    pub(super) fn flow_job(&mut self, cx: &mut Context<'_>, mut flow: Box<Flow>, kind: Kind, items: Vec<Item>) {
        let mut writes = Vec::new();
        let mut journal = None;
        if let Kind::Join(g) | Kind::Leave(g) = kind {
            if flow.allocated.is_none() {
                // The group's journal entries are this flow's until it ends: no reconciliation settles them
                // or asks their members to leave meanwhile.
                flow.allocated = Some(g);
                self.groups.reserve(g);
            }
            // Journaled before the first request goes out: after a crash the EM knows whom to ask to leave.
            let addrs = remote_addrs(&items);
            writes.push(Write::JournalAdd(g, addrs.clone()));
            journal = Some((g, addrs));
        }
        let leaving = matches!(
            (flow.action, flow.stage),
            (Action::Update, Stage::LeavingRemoved) | (Action::Delete, Stage::LeavingAll)
        );
        let mut persisted = None;
        if leaving && !flow.persisted {
            // The change goes to the store before any member leaves, in the journal's transaction: a crash
            // from here on finds the new entity (or none), and the members still to leave are strays of the
            // journal, asked to leave at start-up — the stored entity never lists a member that already left
            // (issue 26 item 10).
            let (change, released) = flow.persist_writes(&self.config, cx.now());
            writes.extend(change);
            persisted = Some(released);
        }
        if writes.is_empty() {
            return self.start_flow_job(cx, flow, kind, items);
        }
        self.write(cx, writes, Wait::Flow { flow, next: Next::Job { kind, items, journal, persisted } });
    }

    /// A flow's fan-out stage over `items`, its writes done (see [`Jobs::start_flow`]).
    pub(super) fn start_flow_job(&mut self, cx: &mut Context<'_>, flow: Box<Flow>, kind: Kind, items: Vec<Item>) {
        let me = self.gateway_id(cx);
        self.with_jobs(cx, |jobs, j| jobs.start_flow(j, flow, kind, items, me));
    }

    pub(super) fn flow_step(&mut self, cx: &mut Context<'_>, job: Job) {
        if let Kind::Leave(g) = job.spec.kind {
            // Out for sure: left (2.02), or never a member (4.04).
            let out = job
                .slots
                .iter()
                .map(|s| matches!(s, Slot::Done(Res { code: Some(Code::DELETED | Code::NOT_FOUND), .. })));
            let gone: Vec<Item> = joined_of(&job.spec.items, &out.collect::<Vec<_>>());
            self.journal_settle(cx, g, &remote_addrs(&gone));
        }
        let Some(mut flow) = job.flow else { return };
        let results: Vec<(String, Res)> = job
            .spec
            .items
            .iter()
            .zip(job.slots)
            .map(|(it, s)| (it.label.clone(), if let Slot::Done(r) = s { r } else { Res::failed("not asked") }))
            .collect();
        match flow.stage {
            Stage::Validating => {
                if let Some(why) = flow.validated(&results, job.spec.op) {
                    let msg = format!("entity {} not {}: {why}", flow.name, verb(flow.action));
                    return self.flow_fail(cx, flow, bad(msg));
                }
                self.after_validation(cx, flow);
            }
            Stage::Joining => {
                if let Some(why) = flow.joined(&results) {
                    flow.failure = Some(bad(format!("entity {} not {}: {why}", flow.name, verb(flow.action))));
                    return self.rollback(cx, flow);
                }
                // Update: members that left the entity leave the group.
                let removed = self.entities.removed_items(&flow);
                if !removed.is_empty() {
                    flow.stage = Stage::LeavingRemoved;
                    let g = flow.new.as_ref().and_then(|e| e.group).or(flow.allocated);
                    if let Some(g) = g {
                        return self.flow_job(cx, flow, Kind::Leave(g), removed);
                    }
                }
                self.commit(cx, flow);
            }
            Stage::LeavingRemoved | Stage::LeavingAll => {
                flow.record("leave", &results);
                self.commit(cx, flow);
            }
            Stage::RollingBack => {
                flow.record("rollback leave", &results);
                let fail = flow.failure.take().unwrap_or_else(|| bad("failed"));
                self.flow_fail(cx, flow, fail);
            }
        }
    }

    pub(super) fn after_validation(&mut self, cx: &mut Context<'_>, mut flow: Box<Flow>) {
        let Some(new) = flow.new.as_mut() else { return self.commit(cx, flow) };
        if new.profile.ect != Ect::Multicast {
            return self.commit(cx, flow);
        }
        if new.group.is_none() && flow.items.is_empty() {
            // An entity that follows a directory nobody matches yet: its group comes with its first members.
            return self.commit(cx, flow);
        }
        // Multicast: a group (kept on update), the mcstURI, then joins of members not yet joined.
        let mut writes = Vec::new();
        let group = match new.group {
            Some(g) => g,
            None => {
                let v4 = flow.items.iter().any(|i| matches!(i.target, Target::Remote { addr, .. } if addr.is_ipv4()));
                let (g, key, cursor) = match self.groups.allocate(
                    (&self.config, &self.entities, &self.counters),
                    cx.now(),
                    &flow.name,
                    v4,
                ) {
                    Ok(Some(allocated)) => allocated,
                    Ok(None) => return self.flow_fail(cx, flow, (Code::SERVICE_UNAVAILABLE, POOL_EXHAUSTED.into())),
                    Err(refusal) => return self.flow_fail_with(cx, flow, refusal),
                };
                // The cursor goes to the store before the address is used anywhere: never reused, even after
                // a crash. It moves in memory now, and the group is reserved, so that no other creation takes
                // the address while the write is on its way.
                self.counters.insert(key.to_string(), cursor);
                self.groups.reserve(g);
                flow.allocated = Some(g);
                writes.push(Write::SetCounter(key.to_string(), cursor));
                g
            }
        };
        let pending = flow.old.is_none() && !flow.pending_saved;
        if pending {
            // Before any member joins: a crash from here on is undone at the next start-up.
            let record = StoredEntity {
                group: Some(group),
                joined: vec![false; new.profile.er.len()],
                pending: true,
                ..new.clone()
            };
            // Create-only: a name another gateway sharing the store created meanwhile fails the write.
            writes.push(Write::CreateEntity(record));
        }
        if writes.is_empty() {
            return self.after_allocation(cx, flow, group);
        }
        self.write(cx, writes, Wait::Flow { flow, next: Next::Allocated { group, pending } });
    }

    /// A multicast flow's group is settled (and on disk): the mcstURI, then joins of the members not yet
    /// joined.
    pub(super) fn after_allocation(&mut self, cx: &mut Context<'_>, mut flow: Box<Flow>, group: IpAddr) {
        if flow.new.is_none() {
            return;
        }
        let to_join = flow.grouped(group, self.config.multicast_port);
        flow.stage = Stage::Joining;
        if to_join.is_empty() {
            // Nothing to join; go on as if the joins were done (leaves of removed members follow).
            let removed = self.entities.removed_items(&flow);
            if !removed.is_empty() {
                flow.stage = Stage::LeavingRemoved;
                return self.flow_job(cx, flow, Kind::Leave(group), removed);
            }
            return self.commit(cx, flow);
        }
        flow.join_asked = to_join.iter().map(|i| i.label.clone()).collect();
        self.flow_job(cx, flow, Kind::Join(group), to_join);
    }

    /// Asks the members that joined in this flow to leave again, then fails.
    pub(super) fn rollback(&mut self, cx: &mut Context<'_>, mut flow: Box<Flow>) {
        let group = flow.new.as_ref().and_then(|e| e.group);
        let items: Vec<Item> = flow.items.iter().filter(|i| flow.join_asked.contains(&i.label)).cloned().collect();
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

    /// Fails a flow with a prepared response (one that carries options, e.g. Max-Age).
    pub(super) fn flow_fail_with(&mut self, cx: &mut Context<'_>, mut flow: Box<Flow>, resp: Response) {
        let client = flow.client.take();
        let msg = String::from_utf8_lossy(&resp.payload).into_owned();
        self.flow_fail(cx, flow, (resp.code, msg));
        if let Some(c) = client {
            self.jobs.client_done();
            cx.respond(c, resp);
        }
    }

    pub(super) fn flow_fail(&mut self, cx: &mut Context<'_>, flow: Box<Flow>, (code, msg): Fail) {
        info!(entity = %flow.name, %code, msg = %msg, "entity change refused");
        if matches!(flow.action, Action::Create { .. }) && !self.entities.contains_key(&flow.name) {
            // The refused creation's validation counted its members: no entity shows them.
            self.stats.forget_entity(&flow.name);
        }
        if flow.pending_saved {
            // The name stays busy until the record is gone (retried at each reconciliation while the store
            // refuses it).
            self.remove_pending_record(cx, flow.name.clone());
        } else {
            self.busy.remove(&flow.name);
        }
        if let Some(holder) = &flow.holder {
            self.busy.remove(holder);
        }
        if let Some(g) = flow.allocated {
            self.groups.unreserve(g);
            if flow.action != Action::Reconcile {
                // Members may have joined before the failure: the group rests before any reuse.
                self.release_group(cx, g);
            }
        }
        self.groups.schedule_reconcile(cx.now(), &self.entities);
        let Some(client) = flow.client else {
            if flow.action == Action::Update {
                self.follows.failed(cx.now(), &flow.name, &msg);
            }
            return;
        };
        self.jobs.client_done();
        let head = json!({ "message": msg });
        let mut payload = output::render_reports(&head, &flow.reports, ContentFormat::TEXT_PLAIN);
        payload.truncate(8 * 1024);
        cx.respond(client, Response::new(code).with_payload(payload));
    }

    /// Writes the flow's result to the store; once it is done ([`EntityManager::committed`]) the in-memory
    /// copy changes and the client is answered.
    pub(super) fn commit(&mut self, cx: &mut Context<'_>, flow: Box<Flow>) {
        let Some((writes, names_seq)) = flow.commit_writes(self.counters.get(COUNTER_NAMES).copied()) else {
            return self.commit_failed(cx, flow, StoreError::Internal("nothing to save"));
        };
        if writes.is_empty() {
            return self.committed(cx, flow);
        }
        self.write(cx, writes, Wait::Flow { flow, next: Next::Committed { names_seq } });
    }

    /// The flow's result could not be written: nothing changes; the joins of this flow are rolled back.
    fn commit_failed(&mut self, cx: &mut Context<'_>, mut flow: Box<Flow>, e: StoreError) {
        warn!(entity = %flow.name, error = %e, "store write failed");
        if flow.action == Action::Recover {
            self.busy.remove(&flow.name);
            if let Some(g) = flow.allocated {
                self.groups.unreserve(g);
            }
            return; // still pending in the store: retried at the next start-up
        }
        flow.failure = Some((store_failure(&e), format!("entity {} unchanged: {e}", flow.name)));
        self.rollback(cx, flow)
    }

    /// The flow's result is on disk: the in-memory copy changes, the client is answered.
    pub(super) fn committed(&mut self, cx: &mut Context<'_>, mut flow: Box<Flow>) {
        self.busy.remove(&flow.name);
        if let Some(holder) = &flow.holder {
            self.busy.remove(holder);
        }
        if let Some(g) = flow.allocated {
            self.groups.unreserve(g);
        }
        let now = cx.now();
        match (flow.action, &flow.new) {
            (Action::Delete | Action::Recover, _) => {
                let gone = self.entities.remove(&flow.name);
                self.stats.forget_entity(&flow.name);
                let group = gone.and_then(|e| e.stored.group).or(flow.old.as_ref().and_then(|o| o.group));
                if let Some(g) = group {
                    self.release_group(cx, g);
                }
                self.write(cx, vec![Write::Compact], Wait::Detached("store not compacted"));
            }
            (Action::Reconcile, _) => {}
            (_, Some(new)) => {
                // The entity records its joined members from now on.
                if let Some(g) = new.group {
                    let joined: Vec<Item> = joined_of(&flow.items, &new.joined);
                    self.journal_settle(cx, g, &remote_addrs(&joined));
                }
            }
            (_, None) => {}
        }
        self.follows.touch();
        self.announces.touch();
        // A creation or update installs its entity, whoever asked for it.
        let installed = match flow.action {
            Action::Create { .. } | Action::Update => {
                let Some(new) = flow.new.take() else { return };
                if let (Action::Update, Some(old)) = (flow.action, &flow.old) {
                    self.watches.note_change(now, &flow.name, &old.profile, &new.profile);
                }
                Some(self.entities.install(&mut flow, new))
            }
            _ => None,
        };
        // Strays are counted against the table as it is now: an update's removed members whose leaves
        // failed are strays only once the new entity no longer records them.
        self.groups.schedule_reconcile(now, &self.entities);
        let Some(client) = flow.client else {
            match flow.action {
                Action::Reconcile => debug!(flow = %flow.name, "stray memberships asked to leave"),
                Action::Update => {
                    // The EM's own update (the entity follows a directory): its observers are told.
                    info!(entity = %flow.name, "entity change committed");
                    self.part.publish(&self.entities);
                    self.with_jobs(cx, |jobs, j| jobs.end_jobs_of(j, &flow.name, None));
                    if !self.watches.end_of(cx, &mut self.owners, &flow.name) {
                        cx.changed(&format!("/em/{}", flow.name));
                    }
                }
                _ => info!(entity = %flow.name, "interrupted multicast creation undone"),
            }
            return;
        };
        self.jobs.client_done();
        let resp = flow.answer(installed);
        let code = resp.code;
        info!(entity = %flow.name, %code, "entity change committed");
        self.part.publish(&self.entities);
        let end = (code == Code::DELETED).then_some("not finished: the entity was deleted meanwhile");
        self.with_jobs(cx, |jobs, j| jobs.end_jobs_of(j, &flow.name, end));
        self.watches.end_of(cx, &mut self.owners, &flow.name);
        cx.respond(client, resp);
    }

    /// Removes `name`'s pending record from the store; the name is busy until it is gone (see
    /// [`Wait::PendingRemoved`]).
    pub(super) fn remove_pending_record(&mut self, cx: &mut Context<'_>, name: String) {
        self.busy.insert(name.clone());
        self.write(cx, vec![Write::DeleteEntity(name.clone())], Wait::PendingRemoved(name));
    }

    /// Undoes a multicast creation a crash interrupted: every member is asked to leave (those that never
    /// joined answer 4.04), then the pending record is removed. The name stays busy meanwhile.
    pub(super) fn recover(&mut self, cx: &mut Context<'_>, stored: StoredEntity) {
        let items = match self.config.resolve_items(&stored.profile.er) {
            Ok(items) => items,
            Err((_, why)) => {
                warn!(entity = %stored.name, why = %why, "pending record unreadable; removing it");
                self.remove_pending_record(cx, stored.name);
                return;
            }
        };
        let name = stored.name.clone();
        let group = stored.group;
        if let Some(g) = group {
            self.groups.reserve(g);
        }
        let mut flow =
            Flow::new(Action::Recover, name, None, None, Some(stored), None, items.clone().into(), Stage::LeavingAll);
        flow.pending_saved = true;
        flow.allocated = group;
        match group {
            Some(g) => self.flow_job(cx, flow, Kind::Leave(g), items),
            None => self.commit(cx, flow),
        }
    }

    pub(super) fn create(
        &mut self,
        cx: &mut Context<'_>,
        inb: &IncomingRequest,
        name: Option<&str>,
    ) -> Result<(), Fail> {
        self.part.may_change()?;
        let req = &inb.request;
        let accept = report_accept(req)?;
        let patch = read_patch(req)?;
        let (name, generated) = match name {
            Some(n) => (n.to_string(), false),
            None => (self.entities.fresh_name(self.counters.get(COUNTER_NAMES).copied(), &self.busy), true),
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
        let profile = created_profile(&patch)?;
        self.config.check_window(&profile)?;
        let items = self.entities.admit(&self.config, &mut self.stats, &name, &profile)?;
        let allow_offline = allow_offline(req, &profile)?;
        let new = StoredEntity { name: name.clone(), profile, group: None, joined: Vec::new(), pending: false };
        let action = Action::Create { generated };
        let mut flow = Flow::new(
            action,
            name.clone(),
            Some(inb.id),
            accept,
            None,
            Some(new),
            items.clone().into(),
            Stage::Validating,
        );
        flow.reports = items.iter().map(|i| MemberReport { member: i.label.clone(), steps: Vec::new() }).collect();
        flow.allow_offline = allow_offline;
        info!(entity = %name, members = items.len(), "creating entity");
        self.busy.insert(name);
        self.jobs.client_started();
        if flow.new.as_ref().is_some_and(|n| n.profile.from_rd.is_some()) {
            // Its members come from the directory once it is created (see `follow`).
            self.after_validation(cx, flow);
        } else {
            self.flow_job(cx, flow, Kind::Validate, items);
        }
        Ok(())
    }

    pub(super) fn update(
        &mut self,
        cx: &mut Context<'_>,
        inb: &IncomingRequest,
        name: &str,
        whole: bool,
    ) -> Result<(), Fail> {
        self.part.may_change()?;
        let req = &inb.request;
        let Some(ent) = self.entities.get(name) else {
            return Err((Code::NOT_FOUND, format!("no entity {name}")));
        };
        if self.busy.contains(name) {
            return Err((Code::CONFLICT, format!("entity {name}: another change is in progress")));
        }
        let accept = report_accept(req)?;
        let patch = read_patch(req)?;
        let old = ent.stored.clone();
        let profile = updated_profile(&old, &patch, whole)?;
        self.config.check_window(&profile)?;
        let allow_offline = allow_offline(req, &profile)?;
        let items = self.entities.admit(&self.config, &mut self.stats, name, &profile)?;
        let same_members = {
            let a: BTreeSet<&String> = old.profile.er.iter().collect();
            let b: BTreeSet<&String> = profile.er.iter().collect();
            a == b
        };
        let joined = joined_kept(&old, &profile.er);
        let new = StoredEntity { name: name.to_string(), profile, group: old.group, joined, pending: false };
        let items_arc: Arc<[Item]> = items.clone().into();
        let mut flow = Flow::new(
            Action::Update,
            name.to_string(),
            Some(inb.id),
            accept,
            Some(old),
            Some(new),
            items_arc,
            Stage::Validating,
        );
        flow.allow_offline = allow_offline;
        flow.offline = self.entities.unreachable_kept(name, &items);
        self.busy.insert(name.to_string());
        self.jobs.client_started();
        if same_members {
            self.commit(cx, flow);
        } else {
            self.flow_job(cx, flow, Kind::Validate, items);
        }
        Ok(())
    }

    /// A store write a flow waited for is done (see `writes`): the flow goes on, or fails with what the
    /// store said.
    pub(super) fn write_done(&mut self, cx: &mut Context<'_>, wait: Wait, result: Result<(), StoreError>) {
        match (wait, result) {
            (Wait::Detached(what), Err(e)) => warn!(error = %e, "{what}"),
            (Wait::Detached(_), Ok(())) => {}
            (Wait::PendingRemoved(name), Ok(())) => {
                self.busy.remove(&name);
            }
            (Wait::PendingRemoved(name), Err(e)) => {
                warn!(entity = %name, error = %e, "could not remove the pending record; trying again later");
                self.groups.pending_record_left(name);
                self.groups.schedule_reconcile(cx.now(), &self.entities);
            }
            (Wait::Settled(group, addrs), Ok(())) => self.groups.settled(group, &addrs, true),
            // Kept in memory too: the next reconciliation removes it again (or asks a stray again).
            (Wait::Settled(group, addrs), Err(e)) => {
                warn!(%group, error = %e, "journal entry not removed");
                self.groups.settled(group, &addrs, false);
                self.groups.schedule_reconcile(cx.now(), &self.entities);
            }
            (Wait::Flow { mut flow, next: Next::Job { kind, items, journal, persisted } }, Ok(())) => {
                if let Some((g, addrs)) = journal {
                    self.groups.noted(g, &addrs);
                }
                if let Some(released) = persisted {
                    flow.persisted = true;
                    if let Some((g, at)) = released {
                        self.groups.released_at(g, at);
                    }
                }
                self.start_flow_job(cx, flow, kind, items);
            }
            (Wait::Flow { mut flow, next: Next::Job { persisted, .. } }, Err(e)) => {
                if persisted.is_none() {
                    let msg = format!("entity {} not {}: {e}", flow.name, verb(flow.action));
                    return self.flow_fail(cx, flow, (Code::INTERNAL_SERVER_ERROR, msg));
                }
                let fail = (Code::INTERNAL_SERVER_ERROR, format!("entity {} unchanged: {e}", flow.name));
                if flow.action == Action::Update {
                    flow.failure = Some(fail);
                    return self.rollback(cx, flow);
                }
                self.flow_fail(cx, flow, fail);
            }
            (Wait::Flow { mut flow, next: Next::Allocated { group, pending } }, Ok(())) => {
                flow.pending_saved |= pending;
                self.after_allocation(cx, flow, group);
            }
            (Wait::Flow { mut flow, next: Next::Allocated { group, .. } }, Err(e)) => {
                // The address was never used: it is free again (its cursor stays ahead, which only skips it).
                if flow.allocated == Some(group) {
                    flow.allocated = None;
                    self.groups.unreserve(group);
                }
                let msg = format!("entity {} not {}: {e}", flow.name, verb(flow.action));
                self.flow_fail(cx, flow, (store_failure(&e), msg));
            }
            (Wait::Flow { flow, next: Next::Committed { names_seq } }, Ok(())) => {
                if let Some(seq) = names_seq {
                    self.counters.insert(COUNTER_NAMES.into(), seq);
                }
                self.committed(cx, flow);
            }
            (Wait::Flow { flow, next: Next::Committed { .. } }, Err(e)) => self.commit_failed(cx, flow, e),
        }
    }

    pub(super) fn delete(&mut self, cx: &mut Context<'_>, inb: &IncomingRequest, name: &str) -> Result<(), Fail> {
        self.part.may_change()?;
        let Some(ent) = self.entities.get(name) else {
            return Err((Code::NOT_FOUND, format!("no entity {name}")));
        };
        if self.busy.contains(name) {
            return Err((Code::CONFLICT, format!("entity {name}: another change is in progress")));
        }
        let parents = self.entities.parents_of(name);
        if !parents.is_empty() {
            return Err((
                Code::CONFLICT,
                format!("entity {name} is a member of {}; remove it there first", parents.join(", ")),
            ));
        }
        let accept = report_accept(&inb.request)?;
        let old = ent.stored.clone();
        let items = ent.items.clone();
        let leave = ent.joined_items();
        let group = old.group;
        let flow = Flow::new(
            Action::Delete,
            name.to_string(),
            Some(inb.id),
            accept,
            Some(old),
            None,
            items,
            Stage::LeavingAll,
        );
        self.busy.insert(name.to_string());
        self.jobs.client_started();
        match group {
            Some(g) if !leave.is_empty() => self.flow_job(cx, flow, Kind::Leave(g), leave),
            _ => self.commit(cx, flow),
        }
        Ok(())
    }
}

impl EmConfig {
    /// A multicast entity's `timeout` must cover its window (the members' leisure and the slack), or the
    /// members that answer late are lost without a word: 4.00 says what to set.
    pub(super) fn check_window(&self, profile: &Profile) -> Result<(), Fail> {
        let window = self.multicast_leisure + self.multicast_slack;
        match profile.timeout {
            Some(ms) if profile.ect == Ect::Multicast && Duration::from_millis(ms) < window => Err(bad(format!(
                "timeout={ms} ms is shorter than the multicast window ({} ms: the members' leisure of {} ms plus \
                 {} ms): members answering later would be lost; set timeout to at least {} ms, or leave it unset",
                window.as_millis(),
                self.multicast_leisure.as_millis(),
                self.multicast_slack.as_millis(),
                window.as_millis()
            ))),
            _ => Ok(()),
        }
    }
}

impl Table {
    /// What is known of entity `name`'s members that stay among `items`: those that did not answer.
    pub(super) fn unreachable_kept(&self, name: &str, items: &[Item]) -> BTreeMap<String, String> {
        let Some(e) = self.get(name) else { return BTreeMap::new() };
        e.unreachable
            .iter()
            .filter(|(m, _)| items.iter().any(|i| &i.label == *m))
            .map(|(m, w)| (m.clone(), w.clone()))
            .collect()
    }
}

/// Per member of `er`: whether it joined `old`'s group already (members that stay keep their membership).
/// How a change whose write failed is answered: a name that another gateway sharing the store created
/// first is 4.12, as a creation of a name this gateway knows is (create-only across the cluster); a
/// multicast group another gateway's entity took meanwhile is 5.03 (try again: a new address is drawn);
/// any other failure 5.00.
fn store_failure(e: &StoreError) -> Code {
    match e {
        StoreError::Exists(_) => Code::PRECONDITION_FAILED,
        StoreError::Conflict(_) => Code::SERVICE_UNAVAILABLE,
        _ => Code::INTERNAL_SERVER_ERROR,
    }
}

pub(super) fn joined_kept(old: &StoredEntity, er: &[String]) -> Vec<bool> {
    er.iter()
        .map(|m| old.profile.er.iter().position(|o| o == m).and_then(|i| old.joined.get(i).copied()).unwrap_or(false))
        .collect()
}

/// Whether a creation or update lets members in that do not answer validation (`?offline=allow`, the
/// CLI's `--allow-offline`). Unicast entities only: a multicast member must join its group now.
pub(super) fn allow_offline(req: &Request, profile: &Profile) -> Result<bool, Fail> {
    let allow = match req.options.query_pairs().find(|(k, _)| *k == "offline").map(|(_, v)| v) {
        None => false,
        Some("allow") => true,
        Some(other) => return Err(bad(format!("offline={other:?}: the only value is allow"))),
    };
    if allow && profile.ect == Ect::Multicast {
        return Err(bad(
            "offline=allow applies to unicast entities: a multicast entity's members must join its group when it is created",
        ));
    }
    Ok(allow)
}

impl Flow {
    /// What committing this flow writes, with the new value of the names' counter (after `names_seq`, the
    /// last name the EM gave) when it names the entity. `None`: nothing to save (no new entity).
    fn commit_writes(&self, names_seq: Option<u64>) -> Option<(Vec<Write>, Option<u64>)> {
        Some(match (&self.action, &self.new) {
            _ if self.persisted => (Vec::new(), None),
            (Action::Reconcile, _) => (Vec::new(), None),
            (Action::Delete | Action::Recover, _) => (vec![Write::DeleteEntity(self.name.clone())], None),
            // A creation is create-only in the store (unless its pending record made the row already): a
            // gateway sharing the store that created the name first wins (`store_failure`).
            (Action::Create { generated }, Some(new)) => {
                let save =
                    if self.pending_saved { Write::SaveEntity(new.clone()) } else { Write::CreateEntity(new.clone()) };
                if !generated {
                    return Some((vec![save], None));
                }
                let seq = names_seq.unwrap_or(0) + 1;
                (vec![Write::SetCounter(COUNTER_NAMES.into(), seq), save], Some(seq))
            }
            (_, Some(new)) => (vec![Write::SaveEntity(new.clone())], None),
            (_, None) => return None,
        })
    }

    /// A multicast flow's group is `group`: the entity's `mcstURI` (`multicast_port`, or the members' own
    /// port) and its members' memberships (those that joined before keep theirs). Returns the members
    /// still to join.
    fn grouped(&mut self, group: IpAddr, multicast_port: Option<u16>) -> Vec<Item> {
        let Some(new) = self.new.as_mut() else { return Vec::new() };
        new.group = Some(group);
        let path = match self.items.first().map(|i| &i.target) {
            Some(Target::Remote { addr, path, query, .. }) => {
                let port = multicast_port.unwrap_or(addr.port());
                let mut s = uri::format_coap(SocketAddr::new(group, port), path);
                if !query.is_empty() {
                    s.push('?');
                    s.push_str(&query.join("&"));
                }
                s
            }
            _ => String::new(),
        };
        if !path.is_empty() {
            new.profile.mcst_uri = Some(path);
        }
        // Members already joined (update) keep their membership.
        let old_joined: HashSet<String> = self
            .old
            .as_ref()
            .map(|o| o.profile.er.iter().zip(&o.joined).filter(|(_, j)| **j).map(|(m, _)| m.clone()).collect())
            .unwrap_or_default();
        let to_join: Vec<Item> = self.items.iter().filter(|i| !old_joined.contains(&i.label)).cloned().collect();
        new.joined = new.profile.er.iter().map(|m| old_joined.contains(m)).collect();
        to_join
    }

    /// Records validation's `results` in the reports (accepting silent members with `allow_offline`,
    /// checking values are numeric under an arithmetic `op`); the first member that fails, if one does.
    fn validated(&mut self, results: &[(String, Res)], op: Op) -> Option<String> {
        let arithmetic = op.is_arithmetic();
        let mut first_bad: Option<String> = None;
        for (label, r) in results {
            let mut text = r.describe();
            let mut good = r.ok();
            if good {
                self.offline.remove(label);
            }
            if !good && r.code.is_none() && self.allow_offline {
                // No answer at all (silent, unreachable): accepted, and shown as such.
                self.offline.insert(label.clone(), text.clone());
                text = format!("{text}; accepted offline (allow-offline)");
                good = true;
            } else if good && arithmetic {
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
                    text = format!("{text}, but not numeric ({shown}) as eo={} requires", op);
                }
            }
            self.report(label).steps.push(("validate".into(), text.clone()));
            if !good && first_bad.is_none() {
                first_bad = Some(format!("member {label}: {text}"));
            }
        }
        first_bad
    }

    /// Records the joins' `results`: the members that joined are marked in the new entity; the first that
    /// did not, if one did not.
    fn joined(&mut self, results: &[(String, Res)]) -> Option<String> {
        let mut first_bad = None;
        for (label, r) in results {
            self.report(label).steps.push(("join".into(), r.describe()));
            if r.ok() {
                self.joined_now.push(label.clone());
                if let Some(new) = self.new.as_mut() {
                    if let Some(k) = new.profile.er.iter().position(|m| m == label) {
                        new.joined[k] = true;
                    }
                }
            } else if first_bad.is_none() {
                first_bad = Some(format!("member {label}: join failed: {}", r.describe()));
            }
        }
        first_bad
    }

    /// Records the `results` of a fan-out `step` (a leave, a rollback's leave) in the reports.
    fn record(&mut self, step: &str, results: &[(String, Res)]) {
        for (label, r) in results {
            self.report(label).steps.push((step.into(), r.describe()));
        }
    }

    /// The writes of an update's new entity, or of a deletion, made before members are asked to leave (see
    /// `flow_job`), with the release of a deleted entity's group: its quarantine starts now.
    fn persist_writes(&self, config: &EmConfig, now: Instant) -> (Vec<Write>, Option<(IpAddr, u64)>) {
        match (self.action, &self.new) {
            (Action::Update, Some(new)) => (vec![Write::SaveEntity(new.clone())], None),
            (Action::Delete, _) => {
                let mut writes = vec![Write::DeleteEntity(self.name.clone())];
                let released = self.old.as_ref().and_then(|o| o.group).map(|g| (g, config.wall_ms(now)));
                if let Some((g, at)) = released {
                    writes.push(Write::ReleaseGroup(g, at));
                }
                (writes, released)
            }
            _ => (Vec::new(), None),
        }
    }

    /// The client's answer to this committed flow: 2.01 (with its location when the EM named the entity),
    /// 2.04 or 2.02, with the reports; `installed`: the profile of the entity it installed.
    fn answer(&self, installed: Option<Json>) -> Response {
        let accept = self.accept.unwrap_or(ContentFormat::JSON);
        let (code, head) = match (self.action, installed) {
            (Action::Delete | Action::Recover | Action::Reconcile, _) | (_, None) => {
                (Code::DELETED, json!({ "entity": self.name, "message": format!("entity {} deleted", self.name) }))
            }
            (action, Some(profile)) => {
                let code = if matches!(action, Action::Update) { Code::CHANGED } else { Code::CREATED };
                let msg = format!("entity {} {}", self.name, if code == Code::CREATED { "created" } else { "updated" });
                (
                    code,
                    json!({ "entity": self.name, "message": msg, "location": format!("/em/{}", self.name), "profile": profile }),
                )
            }
        };
        let mut resp = Response::new(code).with_content_format(accept).with_payload(output::render_reports(
            &head,
            &self.reports,
            accept,
        ));
        if self.action == (Action::Create { generated: true }) {
            resp = resp
                .with_option(OptionNumber::LOCATION_PATH, b"em")
                .with_option(OptionNumber::LOCATION_PATH, self.name.as_bytes());
        }
        resp
    }
}

impl Table {
    /// Old members no longer in the new member list (for multicast updates).
    pub(super) fn removed_items(&self, flow: &Flow) -> Vec<Item> {
        let (Some(old), Some(new)) = (&flow.old, &flow.new) else { return Vec::new() };
        let Some(ent) = self.get(&old.name) else { return Vec::new() };
        ent.items
            .iter()
            .enumerate()
            .filter(|(i, it)| !new.profile.er.contains(&it.label) && old.joined.get(*i).copied().unwrap_or(false))
            .map(|(_, it)| it.clone())
            .collect()
    }
}

/// The profile a creation asks for: `patch` over the defaults, with a member list or a directory lookup
/// (not both), and no `mcstURI` (the EM assigns it).
fn created_profile(patch: &ProfilePatch) -> Result<Profile, Fail> {
    if patch.mcst_uri.is_some() {
        return Err(bad("mcstURI is read-only: the EM assigns it"));
    }
    if patch.er.is_none() && patch.from_rd.is_none() {
        return Err(bad("er: the member list is missing (or fromRd: a directory lookup that gives it)"));
    }
    if patch.from_rd.is_some() && patch.er.as_ref().is_some_and(|er| !er.is_empty()) {
        return Err(bad("er and fromRd: an entity's members either are listed or follow the directory, not both"));
    }
    let mut profile = Profile::default();
    profile.apply(patch);
    profile.check().map_err(|e| bad(e.to_string()))?;
    Ok(profile)
}

/// The profile an update of `old` asks for: `patch` over the old profile, or over the defaults when the
/// client sends the `whole` profile (PUT). The type and `mcstURI` stay; members that follow a directory
/// are changed through the lookup.
fn updated_profile(old: &StoredEntity, patch: &ProfilePatch, whole: bool) -> Result<Profile, Fail> {
    let name = &old.name;
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
    let follows = patch.from_rd.as_ref().or(old.profile.from_rd.as_ref());
    if let (Some(q), Some(er)) = (follows, &patch.er) {
        if er != &old.profile.er {
            return Err(bad(format!(
                "er: the members of {name} follow the directory (fromRd={q}); change the lookup instead"
            )));
        }
    }
    let mut profile = if whole {
        if patch.er.is_none() {
            return Err(bad("er: a whole profile (PUT) needs the member list; POST changes single fields"));
        }
        Profile { ect: old.profile.ect, ..Profile::default() }
    } else {
        old.profile.clone()
    };
    profile.apply(patch);
    profile.mcst_uri = old.profile.mcst_uri.clone();
    profile.check().map_err(|e| bad(e.to_string()))?;
    Ok(profile)
}

/// The `items` whose flag in `flags` is set (members joined, or confirmed out).
fn joined_of(items: &[Item], flags: &[bool]) -> Vec<Item> {
    items.iter().zip(flags).filter(|(_, f)| **f).map(|(it, _)| it.clone()).collect()
}
