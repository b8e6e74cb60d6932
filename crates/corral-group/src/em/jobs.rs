//! Jobs: the fan-outs (see the module docs of [`super`]) — pacing, the multicast request, repair, the
//! member requests, and combining the replies into one answer.

use super::*;

impl EntityManager {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new_job(
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
                hold: None,
                share: 0,
                via: Vec::new(),
                root: id,
                units: 0,
                cut: None,
                short_window: false,
                note: None,
                silent_text: None,
            },
        );
        id
    }

    /// `k` of job `id`'s own member requests ended (or will not be sent): they leave the hold of its
    /// top-level use on the quotas at once, so that a long use holds only what it may still send.
    pub(super) fn release_units(&mut self, id: JobId, k: u64) {
        let Some(job) = self.jobs.get_mut(&id) else { return };
        let k = k.min(job.units);
        if k == 0 {
            return;
        }
        job.units -= k;
        let root = job.root;
        let Some(mut hold) = self.jobs.get_mut(&root).and_then(|j| j.hold.take()) else { return };
        let k = usize::try_from(k).unwrap_or(usize::MAX).min(hold.amount);
        hold.amount -= k;
        self.unhold(hold.client, &hold.entity, k);
        if let Some(j) = self.jobs.get_mut(&root) {
            j.hold = Some(hold);
        }
    }

    /// Entity `name` changed or went away: the uses of it in progress give their hold on the quotas
    /// back (a use paced by a long delay must not keep the new entity locked), and with `end` (the entity
    /// was deleted) they also end now — each answers with what arrived, the members still open marked with
    /// `why`. After an update they go on with the members they started with.
    pub(super) fn end_jobs_of(&mut self, cx: &mut Context<'_>, name: &str, end: Option<&'static str>) {
        let ids: Vec<JobId> = self
            .jobs
            .iter()
            .filter(|(_, j)| j.entity == name && matches!(j.kind, Kind::Read | Kind::Actuate { .. }))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.release_units(id, u64::MAX);
            if let Some(hold) = self.jobs.get_mut(&id).and_then(|j| j.hold.take()) {
                self.release(hold);
            }
            if let (Some(why), Some(j)) = (end, self.jobs.get_mut(&id)) {
                j.cut = Some(why);
                debug!(entity = %name, job = id, why, "use cut short");
                self.drive(cx, id);
            }
        }
    }

    /// When a fan-out without a `timeout` gives up on silent members *(decision)*: every member asked (the
    /// pacing, after the multicast window if there is one) plus one MAX_TRANSMIT_WAIT (93 s by default). A
    /// member exchange ends by itself within MAX_TRANSMIT_WAIT of its first transmission, but one that waited
    /// in the NSTART=1 queue behind a silent member's (several uses of one entity, one member down) could
    /// otherwise keep the answer past the client's own EXCHANGE_LIFETIME (247 s), and the client would never
    /// see it. The answer then carries what arrived.
    pub(super) fn default_deadline(&self, cx: &Context<'_>, n: usize, delay: Duration, multicast: bool) -> Instant {
        let window =
            if multicast { self.config.multicast_leisure + self.config.multicast_slack } else { Duration::ZERO };
        let mtw = cx.endpoint().config().params.max_transmit_wait();
        cx.now() + window + delay.saturating_mul(n as u64) + mtw
    }

    /// Starts a use (read or actuation) of an entity. Errors are answered by the caller.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn start_use(
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
        // What this job sends itself (as the budget counts it): a multicast request and the repair it may
        // need, or one request per remote member.
        let units = if multicast {
            1 + if p.repair == Repair::Unicast { n as u64 } else { 0 }
        } else {
            items.iter().filter(|i| matches!(i.target, Target::Remote { .. })).count() as u64
        };
        let window = self.config.multicast_leisure + self.config.multicast_slack;
        let short_window = multicast && timeout.is_some_and(|ms| Duration::from_millis(ms) < window);
        let root = match sink {
            Sink::Parent { job, .. } => self.jobs.get(&job).map(|j| j.root),
            _ => None,
        };
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
        if let Some(job) = self.jobs.get_mut(&id) {
            job.units = units;
            job.short_window = short_window;
            job.root = root.unwrap_or(id);
        }
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
    pub(super) fn start_multicast(&mut self, cx: &mut Context<'_>, id: JobId, group: Option<IpAddr>) {
        let window = self.config.multicast_leisure + self.config.multicast_slack;
        let override_port = self.config.multicast_port;
        let Some(job) = self.jobs.get_mut(&id) else { return };
        job.multicast = true;
        job.next = job.slots.len();
        let (Some(group), Some(first)) = (group, job.items.first()) else {
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
    pub(super) fn member_request(&self, job: &Job, i: usize, target: &Target) -> Option<(SocketAddr, Request, bool)> {
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

    pub(super) fn send_slot(&mut self, cx: &mut Context<'_>, id: JobId, i: usize) {
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
                let (share, via) = (job.share, job.via.clone());
                let child = child.clone();
                match self.start_use(cx, &child, Sink::Parent { job: id, slot: i }, &o, kind, hop, depth) {
                    Ok(cid) => {
                        if let Some(c) = self.jobs.get_mut(&cid) {
                            (c.share, c.via) = (share, via);
                        }
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
                } else if *entity && job.share == 0 {
                    Slot::Done(Res::failed("not asked: the fan-out budget leaves nothing for another gateway's entity"))
                } else if *entity && job.via.len() >= MAX_VIA {
                    Slot::Done(Res::failed(format!(
                        "{:#}: the request passed {MAX_VIA} gateways",
                        Code::HOP_LIMIT_REACHED
                    )))
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

    pub(super) fn set_slot(&mut self, id: JobId, i: usize, slot: Slot) {
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
    pub(super) fn drive(&mut self, cx: &mut Context<'_>, id: JobId) {
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
    pub(super) fn start_repair(&mut self, cx: &mut Context<'_>, id: JobId) {
        let mine: Vec<RequestId> =
            self.requests.iter().filter(|(_, (j, s))| *j == id && s.is_none()).map(|(r, _)| *r).collect();
        for rid in mine {
            cx.cancel(rid);
            self.requests.remove(&rid);
        }
        let Some(job) = self.jobs.get(&id) else { return };
        let silent = job.slots.iter().filter(|s| matches!(s, Slot::Waiting)).count();
        // The multicast request is over, and members that answered it are not asked again.
        let done = job.units.saturating_sub(silent as u64);
        self.release_units(id, done);
        let Some(job) = self.jobs.get_mut(&id) else { return };
        debug!(entity = %job.entity, job = id, silent, "multicast window closed; asking the silent members by unicast");
        job.repair = false;
        job.multicast = false;
        job.mc_done = true;
        job.confirmable = true;
        job.next = 0;
        job.next_at = cx.now();
    }

    /// Delivers queued child results to their parents until nothing is left.
    pub(super) fn pump(&mut self, cx: &mut Context<'_>) {
        while let Some((parent, slot, res)) = self.ready.pop() {
            let live = self.jobs.get(&parent).is_some_and(|j| matches!(j.slots.get(slot), Some(Slot::Child(_))));
            if live {
                self.set_slot(parent, slot, Slot::Done(res));
                self.drive(cx, parent);
            }
        }
    }

    /// Abandons a job and everything it started (no answer is sent).
    pub(super) fn cancel_job(&mut self, cx: &mut Context<'_>, id: JobId) {
        self.release_units(id, u64::MAX);
        let Some(mut job) = self.jobs.remove(&id) else { return };
        if let Some(h) = job.hold.take() {
            self.release(h);
        }
        if let Some(t) = job.timer.take() {
            self.timers.remove(&(t, id));
        }
        self.release_outstanding(cx, id, &mut job, "cancelled");
    }

    /// Cancels the requests and child jobs still running for job `id`, marking their slots done with `why`.
    pub(super) fn release_outstanding(&mut self, cx: &mut Context<'_>, id: JobId, job: &mut Job, why: &str) {
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
                Slot::Waiting => {
                    let text = if job.multicast || job.cut.is_some() { why } else { "not asked" };
                    *slot = Slot::Done(Res::failed(text))
                }
                done @ Slot::Done(_) => *slot = done,
            }
        }
    }

    pub(super) fn finish(&mut self, cx: &mut Context<'_>, id: JobId) {
        self.release_units(id, u64::MAX);
        self.note_silent(cx.now(), id);
        let Some(mut job) = self.jobs.remove(&id) else { return };
        if let Some(h) = job.hold.take() {
            self.release(h);
        }
        if job.watch.is_some() {
            self.watch_unasked(cx, id, &job);
        }
        if let Some(key) = &job.watch {
            self.watch_job_done(id, key);
        }
        if let Some(t) = job.timer.take() {
            self.timers.remove(&(t, id));
        }
        let timed_out = job.timed_out || job.cut.is_some() || job.deadline.is_some_and(|d| cx.now() >= d);
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
        self.release_outstanding(cx, id, &mut job, why);
        match job.kind {
            Kind::Read | Kind::Actuate { .. } => self.finish_use(cx, job, timed_out),
            _ => self.flow_step(cx, job),
        }
    }

    /// A finishing job's members that stayed silent until its timeout (or through its multicast window)
    /// are noted as unreachable (see `note_reach`).
    fn note_silent(&mut self, now: Instant, id: JobId) {
        let Some(job) = self.jobs.get(&id) else { return };
        if job.cut.is_some() || matches!(job.kind, Kind::Join(_) | Kind::Leave(_)) {
            return;
        }
        let timed_out = job.timed_out || job.deadline.is_some_and(|d| now >= d);
        let (why, silent): (&str, Vec<usize>) = if job.multicast && !(job.stop_at_enr && job.ok >= job.enr) {
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
            self.note_reach(id, i, Some(why.to_string()));
        }
    }

    pub(super) fn finish_use(&mut self, cx: &mut Context<'_>, job: Job, timed_out: bool) {
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
                        // Not enough replies: JSON and CBOR carry the errors in the document; text and SenML
                        // cannot, so those get a diagnostic payload (RFC 7252 §5.5.2) naming each failure.
                        let structured = matches!(accept.0, 50 | 60);
                        let resp = if code == Code::CONTENT || structured {
                            Response::new(code).with_content_format(accept).with_payload(r.render(accept))
                        } else {
                            Response::new(code).with_payload(r.diagnostic(code))
                        };
                        let resp = if job.observable && code == Code::CONTENT { resp.observable() } else { resp };
                        cx.respond(id, resp);
                        return;
                    }
                    let text = if code == Code::CONTENT {
                        format!("{code:#} ({} of {} replies)", r.replies, r.members)
                    } else {
                        r.diagnostic(code).replace('\n', "; ")
                    };
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

    pub(super) fn client_done(&mut self) {
        self.client_jobs = self.client_jobs.saturating_sub(1);
    }
}

/// Combines a read job's replies. `Err` names members with non-numeric values under an arithmetic op.
pub(super) fn build_use_result(job: &Job) -> Result<UseResult, String> {
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
        op => output::aggregate(op, &numbers).map(|v| output::round_to_members(v, &numbers)),
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
        changed: job.note.as_deref().map(<[String]>::to_vec).unwrap_or_default(),
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

/// A member's response as a slot result; `parse`: read its value (reads and validation).
pub(super) fn member_result(parse: bool, response: &Response) -> Res {
    let readings = if parse && response.code.is_success() {
        output::parse_reply(response.options.content_format(), &response.payload)
    } else {
        Vec::new()
    };
    let text =
        if response.code.is_success() { String::new() } else { output::code_text(response.code, &response.payload) };
    Res { code: Some(response.code), readings, text }
}
