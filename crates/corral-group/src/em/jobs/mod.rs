//! Jobs: the fan-outs in progress (see the module docs of [`super`]) — what one job is, and [`Jobs`], the
//! table that owns them with their timers, the child results waiting for delivery and the count of client
//! operations.
//!
//! Owns: the job table and its timers, so that a job's state and its timer change together (its requests
//! in flight are entered in, and given back to, the EM's table of owners, `owners`), and the jobs' behaviour (`impl Jobs`, given a [`JobCx`]): `drive` starts uses and flow
//! stages, sends a job's member requests, paces and finishes it, and handles the answers; `answer`
//! combines the replies into a client's answer or a parent's slot. Must never: call a job from another (a
//! finished child's result waits in [`Jobs::push_ready`] until the current input is handled), or step a
//! management flow (a finished flow job waits in [`Jobs::take_finished_flow`] for the Entity Manager).

use super::quotas::{Client, Hold, Quotas};
use super::stats::EmStats;
use super::watch::Watches;
use super::{EmConfig, Flow, Item, Target};
use crate::em::owners::Owners;
use crate::em::Table;
use crate::output::Reading;
use crate::profile::Op;
use corral_proto::wire::{Code, ContentFormat};
use corral_proto::{Context, Duration, InboundId, Instant, RequestId};
use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::FixedState>;

mod answer;
mod drive;
pub(super) use answer::member_result;

/// What a job's behaviour borrows from the rest of the Entity Manager, passed into [`Jobs`]' methods as
/// quinn-proto's `Connection` passes its spaces and streams: the node's context, the configuration, the
/// entity table (a job reads its entities and notes which members answered, `Entity::unreachable`), the
/// quotas its uses hold, the counters, the watches whose member observations its requests register, and
/// the table of requests in flight, in which a job enters and gives back its own.
pub(super) struct JobCx<'a, 'c> {
    pub(super) cx: &'a mut Context<'c>,
    pub(super) config: &'a EmConfig,
    pub(super) entities: &'a mut Table,
    pub(super) quotas: &'a mut Quotas,
    pub(super) stats: &'a mut EmStats,
    pub(super) watches: &'a mut Watches,
    pub(super) owners: &'a mut Owners,
}

pub(super) use super::owners::JobId;

/// One member's result in a job.
#[derive(Debug, Clone)]
pub(super) struct Res {
    /// `None`: no response (timeout, reset, not sent, cut off).
    pub(super) code: Option<Code>,
    pub(super) readings: Vec<Reading>,
    pub(super) text: String,
    /// Asked and never answered in time (timed out, unreachable, no reply before the deadline or in the
    /// multicast window) — as opposed to not asked, not needed, or cut off: a use names these members.
    pub(super) silent: bool,
}

impl Res {
    /// No answer, and the member was not asked or not waited for (see [`Res::silent`]).
    pub(super) fn failed(text: impl Into<String>) -> Res {
        Res { code: None, readings: Vec::new(), text: text.into(), silent: false }
    }
    /// The member was asked and gave no answer in time.
    pub(super) fn silent(text: impl Into<String>) -> Res {
        Res { silent: true, ..Res::failed(text) }
    }
    /// The member answered `code` (`text`: the diagnostic, empty for a success).
    pub(super) fn answered(code: Code, readings: Vec<Reading>, text: String) -> Res {
        Res { code: Some(code), readings, text, silent: false }
    }
    pub(super) fn ok(&self) -> bool {
        self.code.is_some_and(|c| c.is_success())
    }
    /// The result as report text; formatted only when asked (the per-member fast path allocates none).
    pub(super) fn describe(&self) -> String {
        match (&self.code, self.text.is_empty()) {
            (_, false) => self.text.clone(),
            (Some(c), true) => format!("{c:#}"),
            (None, true) => "no response".into(),
        }
    }
}

#[derive(Debug)]
pub(super) enum Slot {
    Waiting,
    Requested(RequestId),
    Child(JobId),
    Done(Res),
}

#[derive(Debug, Clone)]
pub(super) enum Kind {
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
pub(super) enum Sink {
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

/// A fan-out in progress: what it was asked to do ([`JobSpec`], fixed for its life) and the state it
/// changes as its members answer.
#[derive(Debug)]
pub(super) struct Job {
    pub(super) spec: JobSpec,
    pub(super) flow: Option<Box<Flow>>,
    /// Member requests go as CON: the spec's message type, until a unicast repair asks by CON.
    pub(super) confirmable: bool,
    pub(super) next: usize,
    pub(super) next_at: Instant,
    pub(super) slots: Vec<Slot>,
    pub(super) wkc_tried: Vec<bool>,
    pub(super) ok: usize,
    pub(super) done: usize,
    pub(super) multicast: bool,
    pub(super) mc_done: bool,
    pub(super) timed_out: bool,
    pub(super) timer: Option<Instant>,
    /// The client's answer registers it as an observer (Observe=0 on an observable entity).
    pub(super) observable: bool,
    /// Member requests register observations for this watch (its key; see the module docs).
    pub(super) watch: Option<String>,
    /// A multicast use whose silent members are asked again by unicast CON when the window closes
    /// (`repair=unicast`); cleared when the repair starts.
    pub(super) repair: bool,
    /// The top-level use's hold on the exchange quotas, released when it ends.
    pub(super) hold: Option<Hold>,
    /// The budget each member that is another gateway's entity may spend (`budget=`); 0: none is asked.
    pub(super) share: u32,
    /// Gateways this request passed, this one last (`via=`).
    pub(super) via: Vec<u32>,
    /// The top-level job whose hold on the quotas covers this one (itself, unless nested).
    pub(super) root: JobId,
    /// This job's own member requests (not its children's) still counted in the root's hold: each is
    /// released when it ends, so that a use holds only what it still may send (see `budget`).
    pub(super) units: u64,
    /// The use was cut short (its entity changed or was deleted): the reason, given to the slots still
    /// open.
    pub(super) cut: Option<&'static str>,
    /// A multicast use whose `timeout` is shorter than the multicast window: silent members are named
    /// with the hint.
    pub(super) short_window: bool,
    /// What changed in the entity, told to its observers in the first rendering after an update.
    pub(super) note: Option<Arc<[String]>>,
    /// How the members still silent at the deadline are described, when not by the entity's timeout.
    pub(super) silent_text: Option<String>,
}

impl Job {
    pub(super) fn complete(&self, now: Instant) -> bool {
        if self.timed_out || self.cut.is_some() || self.spec.deadline.is_some_and(|d| now >= d) {
            return true;
        }
        if self.spec.stop_at_enr && self.ok >= self.spec.enr {
            return true;
        }
        if self.multicast {
            return self.mc_done || self.done == self.slots.len();
        }
        self.next == self.slots.len() && self.done == self.slots.len()
    }

    /// The multicast window closed with members silent and the use asks them again by unicast.
    pub(super) fn needs_repair(&self, now: Instant) -> bool {
        self.repair
            && self.multicast
            && !self.timed_out
            && self.cut.is_none()
            && self.spec.deadline.is_none_or(|d| now < d)
            && !(self.spec.stop_at_enr && self.ok >= self.spec.enr)
            && self.slots.iter().any(|s| matches!(s, Slot::Waiting))
    }

    pub(super) fn wake_at(&self) -> Option<Instant> {
        let send = (self.next < self.slots.len() && !self.multicast).then_some(self.next_at);
        match (send, self.spec.deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// What a new job does and how: the arguments of [`Jobs::insert`]. Everything else a job holds starts
/// empty (no slot asked, no hold, no watch) and is set by its starter.
#[derive(Debug)]
pub(super) struct JobSpec {
    pub(super) kind: Kind,
    pub(super) entity: String,
    pub(super) sink: Sink,
    pub(super) items: Arc<[Item]>,
    pub(super) op: Op,
    /// The message type asked for (`emt=con`); a unicast repair asks by CON regardless ([`Job::confirmable`]).
    pub(super) confirmable: bool,
    /// Pacing between member requests.
    pub(super) delay: Duration,
    /// Replies needed; with `stop_at_enr`, the job ends as soon as it has them.
    pub(super) enr: usize,
    pub(super) stop_at_enr: bool,
    pub(super) deadline: Option<Instant>,
    pub(super) hop_limit: u8,
    /// Nesting level (0: asked by a client or a flow).
    pub(super) depth: usize,
}

/// The fan-outs in progress, with their member requests, timers and queued child results.
#[derive(Debug)]
pub(super) struct Jobs {
    table: HashMap<JobId, Job>,
    next_id: JobId,
    /// Each job's next wake-up (`Job::timer`), in time order.
    timers: BTreeSet<(Instant, JobId)>,
    /// Results of finished child jobs, to deliver to their parents after the current input.
    ready: Vec<(JobId, usize, Res)>,
    /// Client operations in progress (uses and management requests), bounded by `max_jobs`.
    clients: usize,
    /// Finished jobs of management flows, for the Entity Manager to continue their flows (a flow spans
    /// the parts, so a job never steps it itself).
    finished_flows: Vec<Job>,
}

impl Jobs {
    pub(super) fn new() -> Jobs {
        Jobs {
            table: HashMap::default(),
            next_id: 1,
            timers: BTreeSet::new(),
            ready: Vec::new(),
            clients: 0,
            finished_flows: Vec::new(),
        }
    }

    /// Adds a job that has asked nobody yet; its first request is due at `now`.
    pub(super) fn insert(&mut self, now: Instant, spec: JobSpec) -> JobId {
        let id = self.next_id;
        self.next_id += 1;
        let n = spec.items.len();
        let validate = matches!(spec.kind, Kind::Validate);
        self.table.insert(
            id,
            Job {
                flow: None,
                confirmable: spec.confirmable,
                next: 0,
                next_at: now,
                slots: (0..n).map(|_| Slot::Waiting).collect(),
                wkc_tried: if validate { vec![false; n] } else { Vec::new() },
                ok: 0,
                done: 0,
                multicast: false,
                mc_done: false,
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
                spec,
            },
        );
        id
    }

    pub(super) fn get(&self, id: &JobId) -> Option<&Job> {
        self.table.get(id)
    }

    pub(super) fn get_mut(&mut self, id: &JobId) -> Option<&mut Job> {
        self.table.get_mut(id)
    }

    /// Takes job `id` out of the table (its requests and timer stay until the caller forgets them).
    pub(super) fn remove(&mut self, id: &JobId) -> Option<Job> {
        self.table.remove(id)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&JobId, &Job)> {
        self.table.iter()
    }

    /// When the oldest use held by `client` or of `entity` gives up at the latest (a quota refusal's
    /// Max-Age).
    pub(super) fn soonest_deadline(&self, client: Client, entity: &str) -> Option<Instant> {
        self.values()
            .filter(|j| j.hold.as_ref().is_some_and(|h| h.client == client || h.entity == entity))
            .filter_map(|j| j.spec.deadline)
            .min()
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &Job> {
        self.table.values()
    }

    pub(super) fn len(&self) -> usize {
        self.table.len()
    }

    /// The slot of job `id` that a multicast reply from `from` answers: a member at that address that has
    /// not answered yet.
    pub(super) fn multicast_slot(&self, id: JobId, from: SocketAddr) -> Option<usize> {
        let j = self.table.get(&id)?;
        j.spec.items.iter().enumerate().position(|(k, it)| {
            matches!(&it.target, Target::Remote { addr, .. } if addr.ip() == from.ip())
                && matches!(j.slots[k], Slot::Waiting)
        })
    }

    /// Fills slot `i` of job `id`, counting a result once (a second multicast reply from a member is
    /// ignored).
    pub(super) fn set_slot(&mut self, id: JobId, i: usize, slot: Slot) {
        let Some(job) = self.table.get_mut(&id) else { return };
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

    /// Sets job `id`'s timer to its next wake-up ([`Job::wake_at`]).
    pub(super) fn rearm(&mut self, id: JobId) {
        let Some(job) = self.table.get_mut(&id) else { return };
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

    /// Removes `job`'s timer (the job is out of the table or about to be driven).
    pub(super) fn disarm(&mut self, id: JobId, job: &mut Job) {
        if let Some(t) = job.timer.take() {
            self.timers.remove(&(t, id));
        }
    }

    /// The jobs whose timers are due at `now`, earliest first.
    pub(super) fn due(&self, now: Instant) -> Vec<JobId> {
        self.timers.iter().take_while(|(t, _)| *t <= now).map(|(_, j)| *j).collect()
    }

    /// A due job's timer fired: removes it and says whether the job is still there to drive (the timers of
    /// a job that is gone are dropped).
    pub(super) fn fire(&mut self, id: JobId) -> bool {
        if let Some(job) = self.table.get_mut(&id) {
            if let Some(t) = job.timer.take() {
                self.timers.remove(&(t, id));
            }
            true
        } else {
            self.timers.retain(|(_, j)| *j != id);
            false
        }
    }

    /// The earliest timer.
    pub(super) fn next_wake(&self) -> Option<Instant> {
        self.timers.first().map(|(t, _)| *t)
    }

    /// Queues a finished child's result for slot `slot` of job `parent`.
    pub(super) fn push_ready(&mut self, parent: JobId, slot: usize, res: Res) {
        self.ready.push((parent, slot, res));
    }

    pub(super) fn pop_ready(&mut self) -> Option<(JobId, usize, Res)> {
        self.ready.pop()
    }

    /// A finished job of a management flow, for its flow's next step.
    pub(super) fn take_finished_flow(&mut self) -> Option<Job> {
        self.finished_flows.pop()
    }

    /// Client operations in progress.
    pub(super) fn clients(&self) -> usize {
        self.clients
    }

    pub(super) fn client_started(&mut self) {
        self.clients += 1;
    }

    pub(super) fn client_done(&mut self) {
        self.clients = self.clients.saturating_sub(1);
    }
}
