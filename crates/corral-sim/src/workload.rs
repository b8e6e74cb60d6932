//! Small sans-IO services for simulated workloads: a [`Responder`] (a device answering GETs) and a
//! [`GroupClient`] (one client issuing requests to N servers one after another, as seed 000's Entity
//! Manager does for a unicast group).
//!
//! # What it owns
//! Only application behaviour through the `corral_proto::Service` contract — no knowledge of the
//! simulator, so the same services run on corral-tokio. They never read a clock: time is `cx.now()`.

use corral_proto::wire::{Code, ContentFormat};
use corral_proto::{
    Context, Duration, IncomingRequest, Instant, Outcome, Request, RequestError, RequestId, Response, SendParams,
    Service,
};
use std::net::SocketAddr;

/// Answers every GET with a fixed payload (a sensor reading); other methods get 4.05.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Responder {
    pub payload: Vec<u8>,
    /// Requests answered so far.
    pub served: u64,
}

impl Responder {
    pub fn new(payload: impl Into<Vec<u8>>) -> Responder {
        Responder { payload: payload.into(), served: 0 }
    }
}

impl Service for Responder {
    fn handle_request(&mut self, cx: &mut Context<'_>, request: IncomingRequest) {
        self.served += 1;
        let response = if request.request.method == Code::GET {
            Response::content(ContentFormat::TEXT_PLAIN, self.payload.clone())
        } else {
            Response::error(Code::METHOD_NOT_ALLOWED, "GET only")
        };
        cx.respond(request.id, response);
    }
}

/// When the [`GroupClient`] sends its next request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pacing {
    /// After the previous request completed (response or failure).
    AfterResponse,
    /// A fixed delay after the previous request was *sent* (seed 000's "delay between requests"); zero sends
    /// them all at once (NSTART still applies per server).
    Interval(Duration),
}

/// The fate of one request of a [`GroupClient`] round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestOutcome {
    pub target: SocketAddr,
    pub sent: Instant,
    pub finished: Option<Instant>,
    /// The response code, or `None` for a failure.
    pub code: Option<Code>,
    pub error: Option<RequestError>,
}

/// Sends one request to each target in turn and collects the outcomes; one *round* per [`GroupClient::start`].
#[derive(Debug, Clone)]
pub struct GroupClient {
    pub targets: Vec<SocketAddr>,
    pub path: String,
    pub params: SendParams,
    pub pacing: Pacing,
    next: usize,
    started: Option<Instant>,
    wake: Option<Instant>,
    pending: Vec<(RequestId, usize)>,
    pub outcomes: Vec<RequestOutcome>,
}

impl GroupClient {
    pub fn new(targets: Vec<SocketAddr>, path: &str, pacing: Pacing) -> GroupClient {
        GroupClient {
            targets,
            path: path.to_string(),
            params: SendParams::default(),
            pacing,
            next: 0,
            started: None,
            wake: None,
            pending: Vec::new(),
            outcomes: Vec::new(),
        }
    }

    /// Starts a round (abandoning any unfinished one's bookkeeping).
    pub fn start(&mut self, cx: &mut Context<'_>) {
        for (id, _) in self.pending.drain(..) {
            cx.cancel(id);
        }
        self.started = Some(cx.now());
        self.next = 0;
        self.wake = None;
        self.outcomes.clear();
        self.send_next(cx);
    }

    fn send_next(&mut self, cx: &mut Context<'_>) {
        while self.next < self.targets.len() {
            let i = self.next;
            self.next += 1;
            let target = self.targets[i];
            self.outcomes.push(RequestOutcome { target, sent: cx.now(), finished: None, code: None, error: None });
            match cx.request(target, Request::get(&self.path), self.params) {
                Ok(id) => self.pending.push((id, i)),
                Err(_) => {
                    self.outcomes[i].finished = Some(cx.now());
                    self.outcomes[i].error = Some(RequestError::Timeout);
                }
            }
            match self.pacing {
                Pacing::Interval(d) if d.is_zero() => continue,
                Pacing::Interval(d) => {
                    if self.next < self.targets.len() {
                        self.wake = Some(cx.now() + d);
                    }
                    return;
                }
                Pacing::AfterResponse if self.outcomes[i].finished.is_some() => continue,
                Pacing::AfterResponse => return,
            }
        }
    }

    /// Whether every request of the round has finished.
    pub fn done(&self) -> bool {
        self.started.is_some()
            && self.next == self.targets.len()
            && self.outcomes.len() == self.targets.len()
            && self.outcomes.iter().all(|o| o.finished.is_some())
    }

    /// Time from the round's start to its last outcome, once done.
    pub fn response_time(&self) -> Option<Duration> {
        let start = self.started?;
        if !self.done() {
            return None;
        }
        self.outcomes.iter().filter_map(|o| o.finished).max().map(|end| end - start)
    }

    /// Targets that answered with a success code.
    pub fn successes(&self) -> usize {
        self.outcomes.iter().filter(|o| o.code.is_some_and(|c| c.is_success())).count()
    }
}

impl Service for GroupClient {
    fn handle_request(&mut self, cx: &mut Context<'_>, request: IncomingRequest) {
        cx.respond(request.id, Response::error(Code::NOT_FOUND, "a client serves nothing"));
    }

    fn handle_response(&mut self, cx: &mut Context<'_>, id: RequestId, outcome: Outcome) {
        let Some(pos) = self.pending.iter().position(|(p, _)| *p == id) else { return };
        let (_, i) = self.pending.swap_remove(pos);
        let o = &mut self.outcomes[i];
        o.finished = Some(cx.now());
        match outcome {
            Outcome::Response { response, .. } => o.code = Some(response.code),
            Outcome::Failed(e) => o.error = Some(e),
            Outcome::MulticastDone | Outcome::Pong { .. } => {}
        }
        if self.pacing == Pacing::AfterResponse {
            self.send_next(cx);
        }
    }

    fn handle_timeout(&mut self, cx: &mut Context<'_>) {
        if self.wake.is_some_and(|w| w <= cx.now()) {
            self.wake = None;
            self.send_next(cx);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.wake
    }
}
