//! A client waiting for a group's answers: what `group` (which collects the members' answers) and
//! `group_cache` (which serves cached ones) both hand it, so it sits below both.

use super::Waiter;
use corral_proto::{Context, InboundId, IncomingRequest, Instant, Response};
use std::net::SocketAddr;

pub(super) struct GroupWaiter {
    waiter: Waiter,
    /// Its Multicast-Timeout ends here (or the exchange's window, if earlier): later answers are not
    /// relayed to it.
    pub(super) until: Instant,
    /// It has had its first response (the later ones go separately).
    answered: bool,
    /// Members whose cached answer it gets at `flush` unless they answer first (`group_cache`).
    pub(super) held: Vec<SocketAddr>,
    pub(super) flush: Instant,
}

impl GroupWaiter {
    /// The client of `req`, collecting until `until`.
    pub(super) fn new(req: &IncomingRequest, until: Instant) -> GroupWaiter {
        GroupWaiter { waiter: Waiter::of(req), until, answered: false, held: Vec::new(), flush: until }
    }

    /// Sends it one answer: the first as the response to its request, the later ones separately.
    pub(super) fn relay(&mut self, cx: &mut Context<'_>, answer: &Response) {
        let r = self.waiter.answer(answer);
        if self.answered {
            cx.respond_again(self.waiter.from, self.waiter.token, r);
        } else {
            self.answered = true;
            cx.respond(self.waiter.id, r);
        }
    }

    /// Whether it has had a response yet.
    pub(super) fn answered(&self) -> bool {
        self.answered
    }

    /// Its request.
    pub(super) fn id(&self) -> InboundId {
        self.waiter.id
    }
}
