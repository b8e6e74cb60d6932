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
