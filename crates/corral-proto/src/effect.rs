//! Effects: work a service asks its driver to do outside the sans-IO core — a store write — whose
//! completion comes back as an input, the way a request's response does.
//!
//! A service calls [`Context::effect`](crate::Context::effect) with an operation of its own type and gets
//! an [`EffectId`]; when the work is done, its [`Service::handle_effect`](crate::Service::handle_effect) is
//! called with that id and the result, also of its own type (the node never looks inside either). A
//! service must not assume completions arrive in the order it started the effects, nor soon: it parks
//! whatever waits for one under its id. Until then the service goes on serving other inputs.
//!
//! Who does the work is an [`EffectRunner`] the driver installs on the node
//! ([`Node::set_effect_runner`](crate::Node::set_effect_runner)): a thread that writes a SQLite file, a task
//! that talks to PostgreSQL, or a simulated store on the virtual clock that may lose what it never
//! acknowledged. The node hands it every new effect after each input and delivers what it reports done;
//! its [`EffectRunner::poll_timeout`] joins the node's, so a driver wakes to collect completions with no
//! code of its own. Without a runner, effects wait in the node for [`Node::poll_effect`](crate::Node::poll_effect)
//! and come back through [`Node::handle_effect_done`](crate::Node::handle_effect_done): a test decides when
//! and in which order.
//!
//! Owns: the identity of effects and the runner contract. Must never: do the work itself, block, or read
//! a clock (a runner is told `now`).

use crate::time::Instant;
use std::any::Any;
use std::collections::VecDeque;

/// Names one effect of one node, for its completion to find the service that asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EffectId(pub u64);

/// What a service asks to be done: a value of the service's own type.
pub type EffectOp = Box<dyn Any + Send>;

/// What came of it: a value of the service's own type (its runner's result type).
pub type EffectDone = Box<dyn Any + Send>;

/// Does effects for a node. `start` and `poll_done` must not block: hand the work to a thread, a task or a
/// simulated queue, and report it when it is done.
pub trait EffectRunner: Send {
    /// Takes `op` (effect `id`) to do. A runner that cannot do an operation of this type reports that as
    /// its completion rather than dropping it: the service is waiting.
    fn start(&mut self, now: Instant, id: EffectId, op: EffectOp);
    /// An effect done by `now`, if any.
    fn poll_done(&mut self, now: Instant) -> Option<(EffectId, EffectDone)>;
    /// When to ask [`EffectRunner::poll_done`] again while effects are in flight: the moment a simulated
    /// completion is due, or a short interval for one that finishes on another thread. `None`: nothing in
    /// flight.
    fn poll_timeout(&self) -> Option<Instant>;
}

/// Does each effect at once when it starts, with a function, on the driver's thread: for work that does
/// no I/O — an in-memory store in tests and the simulator. A store that does I/O would block the driver
/// here; it runs on a thread of its own (corral-store's `StoreThread`).
pub struct InlineRunner {
    exec: Box<dyn FnMut(EffectOp) -> EffectDone + Send>,
    done: VecDeque<(EffectId, EffectDone)>,
}

impl InlineRunner {
    /// A runner that does each effect with `exec`.
    pub fn new(exec: impl FnMut(EffectOp) -> EffectDone + Send + 'static) -> InlineRunner {
        InlineRunner { exec: Box::new(exec), done: VecDeque::new() }
    }
}

impl EffectRunner for InlineRunner {
    fn start(&mut self, _now: Instant, id: EffectId, op: EffectOp) {
        let done = (self.exec)(op);
        self.done.push_back((id, done));
    }

    fn poll_done(&mut self, _now: Instant) -> Option<(EffectId, EffectDone)> {
        self.done.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        None // every completion is ready when its effect starts
    }
}

/// The effects the services started and no runner has taken yet, whose they are, and who does them (see
/// [`crate::effect`]). Boxed in the node and made at the first use: a node that never starts an effect
/// (most of a thousand simulated motes) pays one pointer for it.
#[derive(Default)]
pub(crate) struct Effects {
    next: u64,
    /// Who does the effects; none: the driver polls them itself.
    pub(crate) runner: Option<Box<dyn EffectRunner>>,
    /// Started, not yet handed to the runner (or, without one, to [`Node::poll_effect`]).
    pub(crate) queued: VecDeque<(EffectId, EffectOp)>,
    /// Effect → the mount that started it, until its completion is delivered.
    pub(crate) owners: std::collections::HashMap<EffectId, usize>,
}

impl Effects {
    pub(crate) fn start(&mut self, mount: usize, op: EffectOp) -> EffectId {
        self.next += 1;
        let id = EffectId(self.next);
        self.queued.push_back((id, op));
        self.owners.insert(id, mount);
        id
    }

    /// Hands the runner what was started and takes one completion it has, if any (none without a runner).
    pub(crate) fn run(&mut self, now: Instant) -> Option<(EffectId, EffectDone)> {
        let runner = self.runner.as_mut()?;
        while let Some((id, op)) = self.queued.pop_front() {
            runner.start(now, id, op);
        }
        runner.poll_done(now)
    }
}
