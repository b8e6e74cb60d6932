//! Driving a job: starting a use, pacing its member requests, the multicast request and its repair, the
//! answers of members, and finishing (see the module docs of [`super`] and of `em`).

use crate::em::jobs::{member_result, Job, JobCx, JobId, JobSpec, Jobs, Kind, Res, Sink, Slot};
use crate::em::owners::Owner;
use crate::em::quotas::Quotas;
use crate::em::stats::Asked;
use crate::em::{bad, EmConfig, Fail, Flow, Item, Target};
use crate::profile::{Ect, Emt, Op, Repair, UseOverrides, MAX_VIA};
use corral_proto::wire::{Code, ContentFormat, OptionNumber, OBSERVE_REGISTER};
use corral_proto::{Context, Duration, Instant, Outcome, Request, RequestId, SendParams};
use std::net::{IpAddr, SocketAddr};
use tracing::{debug, warn};

impl Jobs {
    /// `k` of job `id`'s own member requests ended (or will not be sent): they leave the hold of its
    /// top-level use on the quotas at once, so that a long use holds only what it may still send.
    pub(in crate::em) fn release_units(&mut self, quotas: &mut Quotas, id: JobId, k: u64) {
        let Some(job) = self.get_mut(&id) else { return };
        let k = k.min(job.units);
        if k == 0 {
            return;
        }
        job.units -= k;
        let root = job.root;
        let Some(mut hold) = self.get_mut(&root).and_then(|j| j.hold.take()) else { return };
        let k = usize::try_from(k).unwrap_or(usize::MAX).min(hold.amount);
        hold.amount -= k;
        quotas.give_back(hold.client, &hold.entity, k);
        if let Some(j) = self.get_mut(&root) {
            j.hold = Some(hold);
        }
    }

    /// Entity `name` changed or went away: the uses of it in progress give their hold on the quotas
    /// back (a use paced by a long delay must not keep the new entity locked), and with `end` (the entity
    /// was deleted) they also end now — each answers with what arrived, the members still open marked with
    /// `why`. After an update they go on with the members they started with.
    pub(in crate::em) fn end_jobs_of(&mut self, j: &mut JobCx<'_, '_>, name: &str, end: Option<&'static str>) {
        let ids: Vec<JobId> = self
            .iter()
            .filter(|(_, job)| job.spec.entity == name && matches!(job.spec.kind, Kind::Read | Kind::Actuate { .. }))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.release_units(j.quotas, id, u64::MAX);
            if let Some(hold) = self.get_mut(&id).and_then(|job| job.hold.take()) {
                j.quotas.release(hold);
            }
            if let (Some(why), Some(job)) = (end, self.get_mut(&id)) {
                job.cut = Some(why);
                debug!(entity = %name, job = id, why, "use cut short");
                self.drive(j, id);
            }
        }
    }

    /// Starts a use (read or actuation) of an entity. Errors are answered by the caller.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::em) fn start_use(
        &mut self,
        j: &mut JobCx<'_, '_>,
        name: &str,
        sink: Sink,
        o: &UseOverrides,
        kind: Kind,
        hop_limit: u8,
        depth: usize,
    ) -> Result<JobId, Fail> {
        let Some(ent) = j.entities.get(name) else {
            return Err((Code::NOT_FOUND, format!("no entity {name}")));
        };
        if depth > j.config.max_depth {
            return Err((
                Code::INTERNAL_SERVER_ERROR,
                format!("entity {name}: nesting deeper than {}", j.config.max_depth),
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
        let delay = o.delay.unwrap_or(p.delay).resolve(n, j.config.response_size, j.config.rate);
        let timeout = o.timeout.or(p.timeout);
        let now = j.cx.now();
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
            None => Some(default_deadline(j.config, j.cx, n, Duration::from(delay), multicast)),
        };
        let group = ent.stored.group;
        let items = ent.items.clone();
        let (enr, stop) = if actuate { (n, false) } else { (enr, true) };
        // What this job sends itself (as the budget counts it): a multicast request and the repair it may
        // need, or one request per remote member.
        let units = if multicast {
            1 + if p.repair == Repair::Unicast { n as u64 } else { 0 }
        } else {
            items.iter().filter(|i| matches!(i.target, Target::Remote { .. })).count() as u64
        };
        let window = j.config.multicast_leisure + j.config.multicast_slack;
        let short_window = multicast && timeout.is_some_and(|ms| Duration::from_millis(ms) < window);
        let root = match sink {
            Sink::Parent { job, .. } => self.get(&job).map(|j| j.root),
            _ => None,
        };
        let id = self.insert(
            now,
            JobSpec {
                kind,
                entity: name.to_string(),
                sink,
                items,
                op,
                confirmable: emt == Emt::Con,
                delay: Duration::from(delay),
                enr,
                stop_at_enr: stop,
                deadline,
                hop_limit,
                depth,
            },
        );
        if let Some(job) = self.get_mut(&id) {
            job.units = units;
            job.short_window = short_window;
            job.root = root.unwrap_or(id);
        }
        if multicast {
            if let Some(job) = self.get_mut(&id) {
                // Only requests that may be repeated: a member whose answer to the multicast request was lost
                // may have acted on it, and a second POST (e.g. `toggle`) would act twice (RFC 7252 §5.1).
                job.repair = repair
                    && match &job.spec.kind {
                        Kind::Read => true,
                        Kind::Actuate { method, .. } => matches!(*method, Code::PUT | Code::DELETE),
                        _ => false,
                    };
            }
            self.start_multicast(j, id, group);
        }
        Ok(id)
    }

    /// The one NON multicast request of a multicast entity's use.
    pub(in crate::em) fn start_multicast(&mut self, j: &mut JobCx<'_, '_>, id: JobId, group: Option<IpAddr>) {
        let window = j.config.multicast_leisure + j.config.multicast_slack;
        let override_port = j.config.multicast_port;
        let Some(job) = self.get_mut(&id) else { return };
        job.multicast = true;
        job.next = job.slots.len();
        let (Some(group), Some(first)) = (group, job.spec.items.first()) else {
            job.timed_out = true;
            return;
        };
        let Target::Remote { addr, path, query, .. } = &first.target else {
            job.timed_out = true;
            return;
        };
        let port = override_port.unwrap_or(addr.port());
        let mut req = Request::new(Code::GET);
        for s in path {
            req.options.push_str(OptionNumber::URI_PATH, s);
        }
        for q in query {
            req.options.push_str(OptionNumber::URI_QUERY, q);
        }
        if let Kind::Actuate { method, payload, cf } = &job.spec.kind {
            req.method = *method;
            req.payload = payload.clone();
            if let Some(cf) = cf {
                req = req.with_content_format(*cf);
            }
        }
        let asked: Vec<Asked> = (0..job.spec.items.len()).filter_map(|i| asked(job, i)).collect();
        let params = SendParams { confirmable: false, multicast_window: Some(window), ..SendParams::default() };
        match j.cx.request(SocketAddr::new(group, port), req, params) {
            Ok(rid) => {
                j.stats.group_sent(rid, &asked, j.cx.now());
                j.owners.insert(rid, Owner::Job { job: id, slot: None, watch: None });
            }
            Err(e) => {
                warn!(error = %e, "multicast request not sent");
                job.mc_done = true;
            }
        }
    }

    pub(in crate::em) fn send_slot(&mut self, j: &mut JobCx<'_, '_>, id: JobId, i: usize) {
        let Some(job) = self.get(&id) else { return };
        let items = job.spec.items.clone();
        let target = &items[i].target;
        let slot = match target {
            Target::Local(child) => {
                let kind = match &job.spec.kind {
                    Kind::Actuate { .. } => job.spec.kind.clone(),
                    _ => Kind::Read,
                };
                // Arithmetic operations ask the child for its aggregate (avg of averages); `lst` and `count`
                // take the child's own default.
                let o = UseOverrides { eo: Some(job.spec.op).filter(|o| o.is_arithmetic()), ..UseOverrides::default() };
                let (hop, depth) = (job.spec.hop_limit, job.spec.depth + 1);
                let (share, via) = (job.share, job.via.clone());
                let child = child.clone();
                match self.start_use(j, &child, Sink::Parent { job: id, slot: i }, &o, kind, hop, depth) {
                    Ok(cid) => {
                        if let Some(c) = self.get_mut(&cid) {
                            (c.share, c.via) = (share, via);
                        }
                        self.drive(j, cid);
                        Slot::Child(cid)
                    }
                    Err((code, msg)) => Slot::Done(Res::answered(code, Vec::new(), format!("{code:#}: {msg}"))),
                }
            }
            Target::Remote { entity, .. } => {
                if *entity && job.spec.hop_limit <= 1 {
                    Slot::Done(Res::failed(format!("{:#}: not forwarded", Code::HOP_LIMIT_REACHED)))
                } else if *entity && job.share == 0 {
                    Slot::Done(Res::failed("not asked: the fan-out budget leaves nothing for another gateway's entity"))
                } else if *entity && job.via.len() >= MAX_VIA {
                    Slot::Done(Res::failed(format!(
                        "{:#}: the request passed {MAX_VIA} gateways",
                        Code::HOP_LIMIT_REACHED
                    )))
                } else {
                    let Some((addr, req, confirmable)) = job.member_request(i, target, &j.config.mc_path) else {
                        return;
                    };
                    let watch = job.watch.clone();
                    let to = asked(job, i);
                    match j.cx.request(addr, req, SendParams { confirmable, ..SendParams::default() }) {
                        Ok(rid) => {
                            if let Some(to) = to {
                                j.stats.sent(rid, to, j.cx.now());
                            }
                            j.owners.insert(rid, Owner::Job { job: id, slot: Some(i), watch: None });
                            if let Some(key) = watch {
                                j.watches.track(j.owners, id, &key, i, rid);
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

    /// Starts the fan-out stage of management flow `flow` over `items`: paced by the entity's delay, every
    /// member asked by CON, until its timeout or the gateway's wait for members; `me`: this gateway's
    /// identity, the start of the `via` list its requests to other gateways' entities carry.
    pub(in crate::em) fn start_flow(
        &mut self,
        j: &mut JobCx<'_, '_>,
        flow: Box<Flow>,
        kind: Kind,
        items: Vec<Item>,
        me: u32,
    ) {
        let profile = flow.new.as_ref().or(flow.old.as_ref()).map(|e| e.profile.clone()).unwrap_or_default();
        let n = items.len();
        let delay = profile.delay.resolve(n, j.config.response_size, j.config.rate);
        let now = j.cx.now();
        let deadline = match (profile.timeout, j.config.management_wait) {
            (Some(ms), _) => now + Duration::from_millis(ms),
            (None, Some(wait)) => now + Duration::from(delay).saturating_mul(n as u64) + wait,
            (None, None) => default_deadline(j.config, j.cx, n, Duration::from(delay), false),
        };
        let op = profile.default_op();
        let name = flow.name.clone();
        // Validation of members that are other gateways' entities spends the budget as a use would: what
        // is left after this entity's own requests, shared among those members.
        let cost = j.entities.cost_of(j.config, &name, Some((&name, &profile, &items)));
        let left = u64::from(j.config.budget.datagrams).saturating_sub(cost.requests);
        let share = left.checked_div(cost.remote_entities).map_or(0, |s| u32::try_from(s).unwrap_or(u32::MAX));
        let spec = JobSpec {
            kind,
            entity: name,
            sink: Sink::Flow,
            items: items.into(),
            op,
            confirmable: true,
            delay: Duration::from(delay),
            enr: n,
            stop_at_enr: false,
            deadline: Some(deadline),
            hop_limit: j.config.hop_limit,
            depth: 0,
        };
        let id = self.insert(now, spec);
        let silent_text = match (profile.timeout, j.config.management_wait) {
            (None, Some(wait)) => {
                Some(format!("no response within {} s (the gateway's wait for members)", wait.as_secs()))
            }
            _ => None,
        };
        if let Some(job) = self.get_mut(&id) {
            job.share = share;
            job.via = vec![me];
            job.flow = Some(flow);
            job.silent_text = silent_text;
        }
        self.drive(j, id);
    }

    /// Sends what is due, finishes the job if it is complete, re-arms its timer.
    pub(in crate::em) fn drive(&mut self, j: &mut JobCx<'_, '_>, id: JobId) {
        let now = j.cx.now();
        loop {
            let Some(job) = self.get(&id) else { return };
            if job.complete(now) {
                if job.needs_repair(now) {
                    self.start_repair(j, id);
                    continue;
                }
                self.finish(j, id);
                return;
            }
            let enough = job.spec.stop_at_enr && job.ok >= job.spec.enr;
            if !job.multicast && job.next < job.slots.len() && job.next_at <= now && !enough {
                let i = job.next;
                let job = self.get_mut(&id).expect("job exists: checked above");
                job.next += 1;
                if !matches!(job.slots[i], Slot::Waiting) {
                    continue; // answered the multicast request: a repair skips it, without a delay
                }
                job.next_at = if job.spec.delay.is_zero() { now } else { job.next_at + job.spec.delay };
                self.send_slot(j, id, i);
                continue;
            }
            break;
        }
        self.rearm(id);
    }

    /// A member request of a job answered, failed or (a multicast request) ended: the member's slot takes
    /// the result, and the job goes on. `false`: `rid` is no job's request.
    pub(in crate::em) fn member_response(
        &mut self,
        j: &mut JobCx<'_, '_>,
        rid: RequestId,
        (jid, slot): (JobId, Option<usize>),
        outcome: Outcome,
    ) {
        match slot {
            Some(i) => {
                j.owners.job_done_with(rid);
                j.stats.ended(rid, matches!(outcome, Outcome::Response { .. }), j.cx.now());
                let res = match outcome {
                    Outcome::Response { response, .. } => {
                        // Validation falls back to /.well-known/core for resources that refuse GET.
                        let retry = self.get(&jid).is_some_and(|j| {
                            matches!(j.spec.kind, Kind::Validate)
                                && response.code == Code::METHOD_NOT_ALLOWED
                                && !j.wkc_tried.get(i).copied().unwrap_or(true)
                        });
                        if retry {
                            if let Some(j) = self.get_mut(&jid) {
                                j.wkc_tried[i] = true;
                            }
                            self.send_slot(j, jid, i);
                            self.drive(j, jid);
                            return;
                        }
                        self.note_reach(j, jid, i, None);
                        member_result(self.parses(jid), &response)
                    }
                    Outcome::Failed(e) => {
                        // An ICMP error (RequestError::Unreachable) ends the exchange at once: the use
                        // answers without waiting for the member, its reason in the diagnostic.
                        self.note_reach(j, jid, i, Some(e.to_string()));
                        Res::silent(e.to_string())
                    }
                    Outcome::MulticastDone | Outcome::Pong { .. } => Res::silent("no response"),
                };
                self.release_units(j.quotas, jid, 1);
                self.set_slot(jid, i, Slot::Done(res));
            }
            None => match outcome {
                Outcome::Response { from, response } => match self.multicast_slot(jid, from) {
                    Some(i) => {
                        if let Some(to) = self.get(&jid).and_then(|j| asked(j, i)) {
                            j.stats.group_answered(rid, &to, j.cx.now());
                        }
                        let res = member_result(self.parses(jid), &response);
                        self.set_slot(jid, i, Slot::Done(res));
                    }
                    None => debug!(%from, "multicast reply from a non-member or a duplicate; ignored"),
                },
                _ => {
                    j.owners.job_done_with(rid);
                    j.stats.forget(rid);
                    if let Some(j) = self.get_mut(&jid) {
                        j.mc_done = true;
                    }
                }
            },
        }
        self.drive(j, jid);
    }

    /// `repair=unicast`: the multicast window closed with members silent. The multicast request ends and
    /// the job goes on as a unicast use of the silent members only, by CON, paced by the entity's delay.
    pub(in crate::em) fn start_repair(&mut self, j: &mut JobCx<'_, '_>, id: JobId) {
        for rid in j.owners.take_multicast(id) {
            j.cx.cancel(rid);
            j.stats.forget(rid);
        }
        let Some(job) = self.get(&id) else { return };
        let silent = job.slots.iter().filter(|s| matches!(s, Slot::Waiting)).count();
        // The multicast request is over, and members that answered it are not asked again.
        let done = job.units.saturating_sub(silent as u64);
        self.release_units(j.quotas, id, done);
        let Some(job) = self.get_mut(&id) else { return };
        debug!(entity = %job.spec.entity, job = id, silent, "multicast window closed; asking the silent members by unicast");
        job.repair = false;
        job.multicast = false;
        job.mc_done = true;
        job.confirmable = true;
        job.next = 0;
        job.next_at = j.cx.now();
    }

    /// Delivers a queued child result (see [`Jobs::pop_ready`]) to its parent, if the parent still waits.
    pub(in crate::em) fn deliver(&mut self, j: &mut JobCx<'_, '_>, (parent, slot, res): (JobId, usize, Res)) {
        let live = self.get(&parent).is_some_and(|p| matches!(p.slots.get(slot), Some(Slot::Child(_))));
        if live {
            self.set_slot(parent, slot, Slot::Done(res));
            self.drive(j, parent);
        }
    }

    /// Abandons a job and everything it started (no answer is sent).
    pub(in crate::em) fn cancel_job(&mut self, j: &mut JobCx<'_, '_>, id: JobId) {
        self.release_units(j.quotas, id, u64::MAX);
        let Some(mut job) = self.remove(&id) else { return };
        if let Some(h) = job.hold.take() {
            j.quotas.release(h);
        }
        self.disarm(id, &mut job);
        self.release_outstanding(j, id, &mut job, ("cancelled", false));
    }

    /// Cancels the requests and child jobs still running for job `id`, marking their slots done with `why`;
    /// `silent`: those members were waited for until the job's deadline or window (see [`Res::silent`]),
    /// rather than not needed or cut off.
    pub(in crate::em) fn release_outstanding(
        &mut self,
        j: &mut JobCx<'_, '_>,
        id: JobId,
        job: &mut Job,
        (why, silent): (&str, bool),
    ) {
        let gave_up = |text: &str| if silent { Res::silent(text) } else { Res::failed(text) };
        if job.multicast {
            for rid in j.owners.take_multicast(id) {
                j.cx.cancel(rid);
                j.stats.forget(rid);
            }
            job.mc_done = true;
        }
        for slot in job.slots.iter_mut() {
            match std::mem::replace(slot, Slot::Waiting) {
                Slot::Requested(rid) => {
                    // A member observation of a watch goes on after the job that started it.
                    if !j.owners.observes(rid) {
                        j.cx.cancel(rid);
                    }
                    j.owners.job_done_with(rid);
                    j.stats.forget(rid);
                    *slot = Slot::Done(gave_up(why));
                }
                Slot::Child(cid) => {
                    self.cancel_job(j, cid);
                    *slot = Slot::Done(gave_up(why));
                }
                // Asked by the multicast request, or (unicast) never asked: paced past the deadline.
                Slot::Waiting if job.multicast || job.cut.is_some() => *slot = Slot::Done(gave_up(why)),
                Slot::Waiting => *slot = Slot::Done(Res::failed("not asked")),
                done @ Slot::Done(_) => *slot = done,
            }
        }
    }

    pub(in crate::em) fn finish(&mut self, j: &mut JobCx<'_, '_>, id: JobId) {
        self.release_units(j.quotas, id, u64::MAX);
        self.note_silent(j, id);
        let Some(mut job) = self.remove(&id) else { return };
        if let Some(h) = job.hold.take() {
            j.quotas.release(h);
        }
        if job.watch.is_some() {
            j.watches.unasked(j.cx, j.owners, &j.config.mc_path, id, &job);
        }
        if let Some(key) = &job.watch {
            j.watches.job_done(id, key);
        }
        self.disarm(id, &mut job);
        let timed_out = job.timed_out || job.cut.is_some() || job.spec.deadline.is_some_and(|d| j.cx.now() >= d);
        let silent_text = job.silent_text.take();
        let why = if let Some(cut) = job.cut {
            cut
        } else if timed_out && job.short_window {
            "no reply before the request's timeout, which is shorter than the members' multicast leisure (leave \
             timeout unset, or set it beyond the leisure, to hear every member)"
        } else if timed_out {
            silent_text.as_deref().unwrap_or("no reply before the entity timeout")
        } else if job.multicast {
            "no reply in the multicast window"
        } else {
            "not needed (enough replies)"
        };
        let enough = job.spec.stop_at_enr && job.ok >= job.spec.enr;
        let silent = job.cut.is_none() && (timed_out || job.multicast) && !enough;
        self.release_outstanding(j, id, &mut job, (why, silent));
        match job.spec.kind {
            Kind::Read | Kind::Actuate { .. } => self.finish_use(j, job, timed_out),
            _ => self.finished_flows.push(job),
        }
    }

    /// A finishing job's members that stayed silent until its timeout (or through its multicast window)
    /// are noted as unreachable (see `note_reach`).
    fn note_silent(&mut self, j: &mut JobCx<'_, '_>, id: JobId) {
        let now = j.cx.now();
        let Some(job) = self.get(&id) else { return };
        if job.cut.is_some() || matches!(job.spec.kind, Kind::Join(_) | Kind::Leave(_)) {
            return;
        }
        let timed_out = job.timed_out || job.spec.deadline.is_some_and(|d| now >= d);
        let (why, silent): (&str, Vec<usize>) = if job.multicast && !(job.spec.stop_at_enr && job.ok >= job.spec.enr) {
            (
                "no reply in the multicast window",
                (0..job.slots.len()).filter(|&i| matches!(job.slots[i], Slot::Waiting)).collect(),
            )
        } else if timed_out {
            (
                "no response before the timeout",
                (0..job.slots.len()).filter(|&i| matches!(job.slots[i], Slot::Requested(_))).collect(),
            )
        } else {
            return;
        };
        for i in silent {
            self.note_reach(j, id, i, Some(why.to_string()));
        }
    }

    /// Records whether member `i` of job `id` answered its last request (`failure`: why not), for the
    /// entity's profile to show (see `Entity::unreachable`). Only members of the entity as it is now.
    fn note_reach(&self, j: &mut JobCx<'_, '_>, id: JobId, i: usize, failure: Option<String>) {
        let Some(job) = self.get(&id) else { return };
        let Some(item) = job.spec.items.get(i).filter(|it| matches!(it.target, Target::Remote { .. })) else { return };
        let Some(e) = j.entities.get_mut(&job.spec.entity) else { return };
        match failure {
            None => {
                if !e.unreachable.is_empty() {
                    e.unreachable.remove(&item.label);
                }
            }
            Some(why) => {
                if e.items.iter().any(|it| it.label == item.label) {
                    e.unreachable.insert(item.label.clone(), why);
                }
            }
        }
    }

    /// Whether job `id` reads its members' values (reads and validation do; actuation and joins do not).
    fn parses(&self, id: JobId) -> bool {
        self.get(&id).is_some_and(|j| matches!(j.spec.kind, Kind::Read | Kind::Validate))
    }
}

impl Job {
    /// The request to send to a remote member for a job.
    pub(in crate::em) fn member_request(
        &self,
        i: usize,
        target: &Target,
        mc_path: &str,
    ) -> Option<(SocketAddr, Request, bool)> {
        let job = self;
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
                // Its share of the client's fan-out budget, and the gateways the request passed (loops).
                req.options.push_str(OptionNumber::URI_QUERY, &format!("budget={}", job.share));
                if !job.via.is_empty() {
                    let via: Vec<String> = job.via.iter().map(|g| format!("{g:08x}")).collect();
                    req.options.push_str(OptionNumber::URI_QUERY, &format!("via={}", via.join(".")));
                }
                req.options.set_uint(OptionNumber::ACCEPT, u64::from(ContentFormat::SENML_CBOR.0));
                req.options.set_uint(OptionNumber::HOP_LIMIT, u64::from(job.spec.hop_limit.saturating_sub(1).max(1)));
            }
        };
        let confirmable = match &job.spec.kind {
            Kind::Read => {
                resource(&mut req);
                ask_entity(&mut req, Some(job.spec.op));
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
                    req.options
                        .set_uint(OptionNumber::HOP_LIMIT, u64::from(job.spec.hop_limit.saturating_sub(1).max(1)));
                }
                job.confirmable
            }
            Kind::Validate => {
                if job.wkc_tried.get(i).copied().unwrap_or(false) {
                    req = req.with_path(".well-known/core").with_query(&format!("href=/{}", path.join("/")));
                } else {
                    resource(&mut req);
                    ask_entity(&mut req, Some(job.spec.op));
                }
                true
            }
            Kind::Join(g) | Kind::Leave(g) => {
                let act = if matches!(job.spec.kind, Kind::Join(_)) { "act=add" } else { "act=del" };
                req = Request::new(Code::POST).with_path(mc_path).with_query(act).with_payload(match g {
                    IpAddr::V4(a) => a.octets().to_vec(),
                    IpAddr::V6(a) => a.octets().to_vec(),
                });
                true
            }
        };
        Some((*addr, req, confirmable))
    }
}

/// When a fan-out without a `timeout` gives up on silent members *(decision)*: every member asked (the
/// pacing, after the multicast window if there is one) plus one MAX_TRANSMIT_WAIT (93 s by default). A
/// member exchange ends by itself within MAX_TRANSMIT_WAIT of its first transmission, but one that waited
/// in the NSTART=1 queue behind a silent member's (several uses of one entity, one member down) could
/// otherwise keep the answer past the client's own EXCHANGE_LIFETIME (247 s), and the client would never
/// see it. The answer then carries what arrived.
fn default_deadline(config: &EmConfig, cx: &Context<'_>, n: usize, delay: Duration, multicast: bool) -> Instant {
    let window = if multicast { config.multicast_leisure + config.multicast_slack } else { Duration::ZERO };
    let mtw = cx.endpoint().config().params.max_transmit_wait();
    cx.now() + window + delay.saturating_mul(n as u64) + mtw
}

/// Member `i` of `job` as the counters name it: its address, the entity and the member's URI (`None` for
/// an entity of this gateway, which is no member exchange).
fn asked(job: &Job, i: usize) -> Option<Asked> {
    let item = job.spec.items.get(i)?;
    let Target::Remote { addr, .. } = &item.target else { return None };
    Some(Asked { addr: *addr, member: (job.spec.entity.clone(), item.label.clone()) })
}
