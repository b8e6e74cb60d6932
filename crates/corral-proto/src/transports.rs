//! The transports of one node or client: the UDP [`Endpoint`] and the CoAP-over-TCP [`TcpEndpoint`] side by
//! side, and the one place that chooses between them.
//!
//! # What it owns
//! - The choice of transport for everything that names an exchange by id: answering, discarding,
//!   challenging and accepting a received request ([`InboundId`]); cancelling, deregistering and asking
//!   after a request this side sent ([`RequestId`]). Each id carries its [`Transport`]; the methods here
//!   read it once and hand the call to the endpoint that made the id, so that no code above (the node, a
//!   service's context, a driver, the proxy) branches on a transport.
//! - What spans both: notifications of a changed resource, observer counts, the events of both endpoints,
//!   the earliest wake-up of the two.
//!
//! # What it must never do
//! Hold protocol state of its own, or do for one transport what the other's endpoint does: what differs
//! between UDP and TCP (a message layer or none, an Echo challenge or a connection already proved) lives
//! in the two endpoints; this type only routes to them. Like them it reads no clock and does no I/O.
//!
//! A question that depends on the transport but is really about a capability ("is the source proved?",
//! "may one request be answered more than once?") is a method of the id named for the capability
//! ([`InboundId::can_respond_again`], [`RequestId::cancel_ends_observation`]), not a comparison of transports.

use crate::endpoint::{Endpoint, Event};
use crate::message::{InboundId, IncomingRequest, Request, RequestId, Response, Transport, UnknownExchange};
use crate::tcp::{TcpConfig, TcpEndpoint};
use crate::time::Instant;

/// The UDP endpoint and the TCP endpoint of one node or client. See the module docs.
pub struct Transports {
    udp: Endpoint,
    tcp: TcpEndpoint,
}

impl Transports {
    pub fn new(udp: Endpoint, tcp: TcpEndpoint) -> Transports {
        Transports { udp, tcp }
    }

    /// `udp` with a TCP endpoint configured from it: the same seeds, block-wise, Observe and
    /// known-option settings, the rest TCP's defaults (a node's TCP side).
    pub fn beside(udp: Endpoint) -> Transports {
        let config = udp.config();
        let tcp = TcpEndpoint::new(TcpConfig {
            seed: config.seed,
            secret_seed: config.secret_seed,
            block: config.block,
            observe: config.observe,
            extra_known_options: config.extra_known_options.clone(),
            ..TcpConfig::default()
        });
        Transports { udp, tcp }
    }

    pub fn udp(&self) -> &Endpoint {
        &self.udp
    }

    pub fn udp_mut(&mut self) -> &mut Endpoint {
        &mut self.udp
    }

    pub fn tcp(&self) -> &TcpEndpoint {
        &self.tcp
    }

    pub fn tcp_mut(&mut self) -> &mut TcpEndpoint {
        &mut self.tcp
    }

    /// Answers a received request on the transport it came over (see [`Endpoint::respond`],
    /// [`TcpEndpoint::respond`]). Inlined, as the next three: they are on every request's path, and a call
    /// frame of their own copies each `Response`/`Event` once more (+1.1 % instructions per request in
    /// `scripts/profile-serve.sh` without it).
    #[inline]
    pub fn respond(&mut self, now: Instant, id: InboundId, response: Response) -> Result<(), UnknownExchange> {
        match id.transport() {
            Transport::Udp => self.udp.respond(now, id, response),
            Transport::Tcp => self.tcp.respond(now, id, response),
        }
    }

    /// Ends a received request without answering it (see [`Endpoint::discard`]).
    pub fn discard(&mut self, id: InboundId) -> Result<(), UnknownExchange> {
        match id.transport() {
            Transport::Udp => self.udp.discard(id),
            Transport::Tcp => self.tcp.discard(id),
        }
    }

    /// Answers a request from a source that has not proved its address with 4.01 and an Echo value (see
    /// [`Endpoint::challenge`]). A TCP connection has proved its source already (its handshake did):
    /// nothing is sent, and the request stays open to be answered.
    pub fn challenge(&mut self, now: Instant, id: InboundId) -> Result<(), UnknownExchange> {
        match id.transport() {
            Transport::Udp => self.udp.challenge(now, id),
            Transport::Tcp => Ok(()),
        }
    }

    /// The Echo challenge a layer sends protected in place of an answer of about `len` bytes (see
    /// [`Endpoint::challenge_for`]). A TCP connection has proved its source already: none.
    pub fn challenge_for(&mut self, now: Instant, id: InboundId, len: usize) -> Option<Response> {
        match id.transport() {
            Transport::Udp => self.udp.challenge_for(now, id, len),
            Transport::Tcp => None,
        }
    }

    /// An Echo value a layer found inside protected request `id` (see [`Endpoint::prove_address`]). Over
    /// TCP there is nothing to prove.
    pub fn prove_address(&mut self, now: Instant, id: InboundId, echo: &[u8]) -> bool {
        match id.transport() {
            Transport::Udp => self.udp.prove_address(now, id, echo),
            Transport::Tcp => false,
        }
    }

    /// Sends the empty ACK of a received CON now, the response to follow separately (see
    /// [`Endpoint::accept`]). TCP has no ACKs: nothing to do.
    pub fn accept(&mut self, id: InboundId) -> Result<(), UnknownExchange> {
        match id.transport() {
            Transport::Udp => self.udp.accept(id),
            Transport::Tcp => Ok(()),
        }
    }

    /// A layer replaced a received observation's request by the one inside it (OSCORE): notifications
    /// are rendered from `inner` from now on.
    pub fn retarget_observation(&mut self, id: InboundId, inner: &Request) {
        match id.transport() {
            Transport::Udp => self.udp.retarget_observation(id, inner),
            Transport::Tcp => self.tcp.retarget_observation(id, inner),
        }
    }

    /// Abandons a request this side sent; no outcome will be delivered for it.
    pub fn cancel(&mut self, now: Instant, id: RequestId) {
        match id.transport() {
            Transport::Udp => self.udp.cancel(now, id),
            Transport::Tcp => self.tcp.cancel(now, id),
        }
    }

    /// Ends an observation this side registered (RFC 7641 §3.6), with `deregistration` as the GET with
    /// Observe=1 when the caller made one, else one made from the registration.
    pub fn deregister(&mut self, now: Instant, id: RequestId, deregistration: Option<Request>) {
        match (id.transport(), deregistration) {
            (Transport::Udp, None) => self.udp.deregister(now, id),
            (Transport::Udp, Some(r)) => self.udp.deregister_with(now, id, r),
            (Transport::Tcp, None) => self.tcp.deregister(now, id),
            (Transport::Tcp, Some(r)) => self.tcp.deregister_with(now, id, r),
        }
    }

    /// Whether the request is still in progress (a response or more notifications may come).
    pub fn is_active(&self, id: RequestId) -> bool {
        match id.transport() {
            Transport::Udp => self.udp.is_active(id),
            Transport::Tcp => self.tcp.is_active(id),
        }
    }

    /// The resource at `path` changed: the requests to render a notification for each of its observers,
    /// over UDP (CON or NON per `confirmable`, else the endpoint's policy) and over TCP.
    pub fn notify(&mut self, now: Instant, path: &str, confirmable: Option<bool>) -> Vec<IncomingRequest> {
        let mut requests = self.udp.notify(now, path, confirmable);
        requests.extend(self.tcp.notify(now, path));
        requests
    }

    /// How many observers `path` has, over UDP and TCP.
    pub fn observer_count(&self, path: &str) -> usize {
        self.udp.observer_count(path) + self.tcp.observer_count(path)
    }

    /// Forgets every observer of `path`, over UDP and TCP, without a last notification.
    pub fn drop_observers(&mut self, path: &str) -> usize {
        self.udp.drop_observers(path) + self.tcp.drop_observers(path)
    }

    #[inline]
    pub fn handle_timeout(&mut self, now: Instant) {
        self.udp.handle_timeout(now);
        self.tcp.handle_timeout(now);
    }

    /// The next event of either endpoint (UDP's first).
    #[must_use]
    #[inline]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.udp.poll_event().or_else(|| self.tcp.poll_event())
    }

    /// The earlier wake-up of the two endpoints.
    #[must_use]
    #[inline]
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.udp.poll_timeout(), self.tcp.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}
