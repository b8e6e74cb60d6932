//! The lab's client: a sans-IO service on the wired host that asks over CoAP — one request at a time, a
//! batch at once, or an observation — and remembers when each was sent and answered. Seed 000's response
//! time is "the time between the moment the client issues the request to the EM until it gets back the
//! response".
//!
//! Owns only the bookkeeping of its outstanding requests; never reads a clock (time is `cx.now()`).

use corral_proto::wire::Code;
use corral_proto::{
    Context, Duration, IncomingRequest, Instant, Outcome, Request, RequestId, Response, SendParams, Service,
};
use std::net::SocketAddr;

/// How one request ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    pub sent: Instant,
    pub answered: Instant,
    /// `None`: no response (the client's exchange failed).
    pub code: Option<Code>,
    pub payload: Vec<u8>,
}

impl Exchange {
    pub fn response_time(&self) -> Duration {
        self.answered - self.sent
    }
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct LabClient {
    pending: Option<(RequestId, Instant)>,
    last: Option<Exchange>,
    /// An observation (RFC 7641) and every response it brought, with its arrival time.
    observation: Option<RequestId>,
    notifications: Vec<(Instant, Response)>,
    /// Requests sent together ([`LabClient::send_all`]) and how each ended.
    batch: Vec<(RequestId, Instant)>,
    batch_done: Vec<Exchange>,
}

impl LabClient {
    pub fn new() -> LabClient {
        LabClient::default()
    }

    /// Sends `request` to `dst` as a CON (the client's own wired hop is reliable anyway).
    pub fn send(&mut self, cx: &mut Context<'_>, dst: SocketAddr, request: Request) {
        self.last = None;
        let now = cx.now();
        match cx.request(dst, request, SendParams::default()) {
            Ok(id) => self.pending = Some((id, now)),
            Err(_) => self.last = Some(Exchange { sent: now, answered: now, code: None, payload: Vec::new() }),
        }
    }

    /// Sends every request at once, as that many independent consumers would (each its own exchange and
    /// token); [`LabClient::batch_results`] has them once all ended.
    pub fn send_all(&mut self, cx: &mut Context<'_>, dst: SocketAddr, requests: Vec<Request>) {
        self.batch.clear();
        self.batch_done.clear();
        let now = cx.now();
        for r in requests {
            match cx.request(dst, r, SendParams::default()) {
                Ok(id) => self.batch.push((id, now)),
                Err(_) => self.batch_done.push(Exchange { sent: now, answered: now, code: None, payload: Vec::new() }),
            }
        }
    }

    /// Every outcome of the last [`LabClient::send_all`], once none is outstanding.
    pub fn batch_results(&self) -> Option<&[Exchange]> {
        self.batch.is_empty().then_some(self.batch_done.as_slice())
    }

    /// The outcome of the last request, once it ended.
    pub fn result(&self) -> Option<&Exchange> {
        self.last.as_ref()
    }

    pub fn busy(&self) -> bool {
        self.pending.is_some()
    }

    /// Registers an observation with `request` (which carries Observe=0); its first response and every
    /// notification are kept in [`LabClient::notifications`].
    pub fn observe(&mut self, cx: &mut Context<'_>, dst: SocketAddr, request: Request) -> bool {
        self.notifications.clear();
        match cx.request(dst, request, SendParams::default()) {
            Ok(id) => {
                self.observation = Some(id);
                true
            }
            Err(_) => false,
        }
    }

    pub fn notifications(&self) -> &[(Instant, Response)] {
        &self.notifications
    }
}

impl Service for LabClient {
    fn handle_request(&mut self, cx: &mut Context<'_>, request: IncomingRequest) {
        cx.respond(request.id, Response::error(Code::NOT_FOUND, "the lab client serves nothing"));
    }

    fn handle_response(&mut self, cx: &mut Context<'_>, id: RequestId, outcome: Outcome) {
        if self.observation == Some(id) {
            if let Outcome::Response { response, .. } = outcome {
                self.notifications.push((cx.now(), response));
            }
            return;
        }
        if let Some(i) = self.batch.iter().position(|(b, _)| *b == id) {
            let (_, sent) = self.batch.swap_remove(i);
            let answered = cx.now();
            self.batch_done.push(match outcome {
                Outcome::Response { response, .. } => {
                    Exchange { sent, answered, code: Some(response.code), payload: response.payload }
                }
                _ => Exchange { sent, answered, code: None, payload: Vec::new() },
            });
            return;
        }
        let Some((pid, sent)) = self.pending else { return };
        if pid != id {
            return;
        }
        self.pending = None;
        let answered = cx.now();
        self.last = Some(match outcome {
            Outcome::Response { response, .. } => {
                Exchange { sent, answered, code: Some(response.code), payload: response.payload }
            }
            _ => Exchange { sent, answered, code: None, payload: Vec::new() },
        });
    }
}
