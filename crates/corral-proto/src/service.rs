//! The `Service` contract: how sans-IO applications (servers, the Entity Manager, the proxy, simulated
//! devices) plug into a [`crate::Node`].
//!
//! A service receives requests routed to it, responses to the requests it issued, and timer wake-ups. It
//! acts only through its [`Context`]: answer, issue requests, cancel, ask the driver to join a multicast
//! group, draw random numbers from its own seeded stream. It never reads a clock (`cx.now()` is the
//! driver's time) and never touches a socket, so the tokio runtime and the simulator drive it unchanged.

use crate::endpoint::Endpoint;
use crate::message::{InboundId, IncomingRequest, Request, RequestError, RequestId, Response, SendParams, StartError};
use crate::rng::Rng;
use crate::time::Instant;
use crate::transports::Transports;
use corral_wire::Code;
use std::any::Any;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

/// The outcome of a request a service issued.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// A response. Final for a unicast request; one of possibly many for a multicast request.
    Response { from: SocketAddr, response: Response },
    /// No (further) response: timeout or reset.
    Failed(RequestError),
    /// The collection window of a multicast request closed.
    MulticastDone,
    /// A ping was answered.
    Pong { from: SocketAddr },
}

impl Outcome {
    /// The text of a 2.05 Content answer and how long it stays fresh (its Max-Age, 60 s unless given), or
    /// why there is none, naming the peer as `who` ("the directory answered 4.04 …"): what a service that
    /// follows a resource (an observed lookup) needs of each outcome.
    pub fn content_text(&self, who: &str) -> Result<(&str, crate::Duration), NoContent> {
        let reason = match self {
            Outcome::Response { response, .. } if response.code == corral_wire::Code::CONTENT => {
                let max_age = crate::Duration::from_secs(u64::from(response.options.max_age().unwrap_or(60)));
                match std::str::from_utf8(&response.payload) {
                    Ok(text) => return Ok((text, max_age)),
                    Err(_) => NoContentReason::NotUtf8,
                }
            }
            Outcome::Response { response, .. } => NoContentReason::Answered {
                code: response.code,
                diagnostic: String::from_utf8_lossy(&response.payload[..response.payload.len().min(120)]).into_owned(),
            },
            Outcome::Failed(e) => NoContentReason::Failed(*e),
            Outcome::MulticastDone | Outcome::Pong { .. } => NoContentReason::NoAnswer,
        };
        Err(NoContent { who: who.to_string(), reason })
    }
}

/// Why an [`Outcome`] holds no text to read ([`Outcome::content_text`]), with whom it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoContent {
    who: String,
    pub reason: NoContentReason,
}

impl NoContent {
    /// The peer as the caller named it.
    pub fn who(&self) -> &str {
        &self.who
    }
}

/// What the peer did instead of answering 2.05 Content with text.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NoContentReason {
    /// It answered 2.05, but the payload is not UTF-8 (malformed input).
    NotUtf8,
    /// It answered with another code; `diagnostic` is the start of its payload (at most 120 bytes).
    Answered { code: corral_wire::Code, diagnostic: String },
    /// The request ended without an answer.
    Failed(RequestError),
    /// No answer came (a multicast window closed, a ping's Pong).
    NoAnswer,
}

impl std::fmt::Display for NoContent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let who = &self.who;
        match &self.reason {
            NoContentReason::NotUtf8 => write!(f, "the answer of {who} is not UTF-8"),
            NoContentReason::Answered { code, diagnostic } => write!(f, "{who} answered {code} {diagnostic}"),
            NoContentReason::Failed(e) => write!(f, "{who} did not answer: {e}"),
            NoContentReason::NoAnswer => write!(f, "{who} did not answer"),
        }
    }
}

impl std::error::Error for NoContent {}

/// Something a service asks of the driver that the endpoint cannot do itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeCommand {
    /// Join a multicast group on the node's socket(s) (or the simulated network).
    JoinGroup(IpAddr),
    LeaveGroup(IpAddr),
}

/// A link to describe in `/.well-known/core`: a path relative to the service's mount point and its
/// RFC 6690 attributes (`rt`, `if`, `ct`, `obs`, `title`, …), values unquoted.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResourceLink {
    /// Path below the mount point, without a leading `/` (empty for the mount point itself).
    pub path: String,
    pub attributes: Vec<(String, Option<String>)>,
}

impl ResourceLink {
    pub fn new(path: &str) -> ResourceLink {
        ResourceLink { path: path.trim_matches('/').to_string(), attributes: Vec::new() }
    }

    pub fn attr(mut self, name: &str, value: impl Into<String>) -> ResourceLink {
        self.attributes.push((name.to_string(), Some(value.into())));
        self
    }

    /// A valueless attribute such as `obs`.
    pub fn flag(mut self, name: &str) -> ResourceLink {
        self.attributes.push((name.to_string(), None));
        self
    }
}

/// A sans-IO application. All methods but `handle_request` have harmless defaults.
pub trait Service: Any {
    /// A request whose path falls under this service's mount point. Answer with `cx.respond` now or later.
    fn handle_request(&mut self, cx: &mut Context<'_>, request: IncomingRequest);

    /// The outcome of a request issued with `cx.request` or `cx.ping`.
    fn handle_response(&mut self, cx: &mut Context<'_>, id: RequestId, outcome: Outcome) {
        let _ = (cx, id, outcome);
    }

    /// The endpoint ended an observation of `path` that this service answered (see
    /// [`Event::ObserverGone`](crate::Event::ObserverGone)): forget whatever was kept for that observer.
    fn observer_gone(&mut self, cx: &mut Context<'_>, path: &str, peer: SocketAddr, token: corral_wire::Token) {
        let _ = (cx, path, peer, token);
    }

    /// An effect this service started with [`Context::effect`] is done: `done` is its runner's result
    /// (of the type the runner for this service's operations reports).
    fn handle_effect(&mut self, cx: &mut Context<'_>, id: crate::EffectId, done: crate::EffectDone) {
        let _ = (cx, done);
        tracing::warn!(?id, "an effect completed for a service that does not take effects");
    }

    /// Called when `poll_timeout` has passed (possibly spuriously).
    fn handle_timeout(&mut self, cx: &mut Context<'_>) {
        let _ = cx;
    }

    /// The next time this service wants `handle_timeout`.
    #[must_use]
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    /// Resources to list in `/.well-known/core`.
    fn links(&self) -> Vec<ResourceLink> {
        Vec::new()
    }
}

/// A layer between the message layer and the services: it sees every received request before it is
/// routed and every response before it is sent (OSCORE, RFC 8613, is one: it unprotects requests and
/// protects their responses). Set with [`crate::Node::set_layer`].
pub trait Layer {
    /// A request from the network (or an observer's registration replayed to render a notification).
    fn inbound(&mut self, now: Instant, request: IncomingRequest) -> Inbound;

    /// The response to `id` on its way out.
    fn outbound(&mut self, now: Instant, id: InboundId, response: Response) -> Response;

    /// The method of the request inside `id` if this layer protects its response (it unprotected the
    /// request; outside, every protected request is a POST or FETCH). The reflection bound's Echo
    /// challenge for such a request is then given to [`Layer::outbound`] in place of the response, so that
    /// it leaves protected (see [`crate::Endpoint::challenge_for`]); whether the request may be challenged
    /// at all is its inner method's (a safe one is repeated harmlessly). None by default.
    fn protects(&self, id: InboundId) -> Option<Code> {
        let _ = id;
        None
    }

    /// The Echo value the layer found inside request `id` (the one [`Layer::inbound`] just took) and did
    /// not use itself: the client's answer to a challenge sent through the layer, checked by the endpoint
    /// as the proof of its address ([`crate::Endpoint::prove_address`]). Asked once per request, right
    /// after `inbound`. None by default.
    fn address_proof(&mut self, id: InboundId) -> Option<Vec<u8>> {
        let _ = id;
        None
    }

    /// What the layer counted so far, for whoever watches the node (`/metrics`); none by default.
    fn counters(&self) -> Vec<LayerCounter> {
        Vec::new()
    }
}

/// One of a [`Layer`]'s counters: a name (snake case, without a unit or `_total`, e.g. `oscore_replays`),
/// what it counts, and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerCounter {
    pub name: &'static str,
    pub help: &'static str,
    pub value: u64,
}

/// A response on its way out through `layer`: the reflection bound's Echo challenge in its place when the
/// layer protects it and it would not fit what an unverified source may be sent (see [`Layer::protects`]).
pub(crate) fn through_layer(
    layer: &mut dyn Layer,
    transports: &mut Transports,
    now: Instant,
    id: InboundId,
    response: Response,
) -> Response {
    let challenge = match layer.protects(id) {
        Some(method @ (Code::GET | Code::FETCH)) => {
            // The response with its options, and what protecting it adds (the OSCORE option, the tag, the
            // outer code): enough that an answer this check lets through is not replaced after all.
            let len = response.payload.len() + response.options.iter().map(|(_, v)| v.len() + 3).sum::<usize>() + 32;
            tracing::trace!(?id, %method, len, "protected answer: within the reflection bound?");
            transports.challenge_for(now, id, len)
        }
        _ => None,
    };
    layer.outbound(now, id, challenge.unwrap_or(response))
}

/// What a [`Layer`] makes of a received request.
#[derive(Debug)]
pub enum Inbound {
    /// Route it as it is.
    Pass(IncomingRequest),
    /// Route this request instead (the one inside the one received); an Observe registration follows it.
    Replaced(IncomingRequest),
    /// Answer at once with this response (it still passes [`Layer::outbound`]).
    Answer(InboundId, Response),
}

pub(crate) type Owners = HashMap<RequestId, usize, foldhash::fast::FixedState>;

/// What a service may do while handling an input.
pub struct Context<'a> {
    pub(crate) now: Instant,
    pub(crate) transports: &'a mut Transports,
    pub(crate) owners: &'a mut Owners,
    pub(crate) commands: &'a mut Vec<NodeCommand>,
    pub(crate) changes: &'a mut Vec<(String, Option<bool>)>,
    pub(crate) rng: &'a mut Rng,
    pub(crate) me: usize,
    pub(crate) mount_depth: usize,
    pub(crate) layer: Option<&'a mut Box<dyn Layer>>,
    pub(crate) effects: &'a mut Option<Box<crate::effect::Effects>>,
}

impl<'a> Context<'a> {
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The counters of the node's [`Layer`] (OSCORE's), empty without one.
    pub fn layer_counters(&self) -> Vec<LayerCounter> {
        self.layer.as_ref().map(|l| l.counters()).unwrap_or_default()
    }

    /// Answers a request (see [`Endpoint::respond`]), over whichever transport it came. Answering twice or
    /// too late is logged and ignored.
    pub fn respond(&mut self, id: InboundId, response: Response) {
        let response = match self.layer.as_mut() {
            Some(layer) => through_layer(layer.as_mut(), self.transports, self.now, id, response),
            None => response,
        };
        if self.transports.respond(self.now, id, response).is_err() {
            tracing::debug!(?id, "response to an exchange that no longer exists");
        }
    }

    /// Sends one more response, a NON with `token`, to a UDP client already answered once (see
    /// [`Endpoint::respond_again`]): a proxy relaying a group's answers to one request.
    pub fn respond_again(&mut self, peer: SocketAddr, token: corral_wire::Token, response: Response) {
        self.transports.udp_mut().respond_again(self.now, peer, token, response);
    }

    /// Answers a request from a source that has not proved its address with 4.01 Unauthorized and an Echo
    /// value (RFC 9175 §2.4) instead of serving it; see [`Endpoint::challenge`]. Requests over TCP are
    /// always verified and need no challenge.
    pub fn challenge(&mut self, id: InboundId) {
        if self.transports.challenge(self.now, id).is_err() {
            tracing::debug!(?id, "challenge for an exchange that no longer exists");
        }
    }

    /// Ends a received request without answering it: it repeats one the service is already answering
    /// (see [`Endpoint::discard`]).
    pub fn discard(&mut self, id: InboundId) {
        let _ = self.transports.discard(id);
    }

    /// Sends the empty ACK now; the response will go separately (UDP only; TCP has no ACKs).
    pub fn accept(&mut self, id: InboundId) {
        let _ = self.transports.accept(id);
    }

    /// Issues a request over UDP; its outcome comes back through `handle_response`.
    pub fn request(&mut self, dst: SocketAddr, request: Request, params: SendParams) -> Result<RequestId, StartError> {
        let id = self.transports.udp_mut().request(self.now, dst, request, params)?;
        self.owners.insert(id, self.me);
        Ok(id)
    }

    pub fn ping(&mut self, dst: SocketAddr) -> Result<RequestId, StartError> {
        let id = self.transports.udp_mut().ping(self.now, dst)?;
        self.owners.insert(id, self.me);
        Ok(id)
    }

    /// Issues a request over CoAP over TCP (RFC 8323) to `dst`, on the connection this node has to it;
    /// if there is none the driver is asked to make one and the request waits for it (a connection that
    /// cannot be made fails the request with [`RequestError::ConnectionClosed`]). The outcome comes back
    /// through `handle_response`, as for [`Context::request`].
    pub fn request_tcp(
        &mut self,
        dst: SocketAddr,
        request: Request,
        params: SendParams,
    ) -> Result<RequestId, StartError> {
        let id = self.transports.tcp_mut().request_to(self.now, dst, request, params)?;
        self.owners.insert(id, self.me);
        Ok(id)
    }

    /// Abandons a request; no outcome will be delivered for it.
    pub fn cancel(&mut self, id: RequestId) {
        self.transports.cancel(self.now, id);
        self.owners.remove(&id);
    }

    /// Ends an observation this service registered (GET with Observe=1, RFC 7641 §3.6).
    pub fn deregister(&mut self, id: RequestId) {
        self.transports.deregister(self.now, id, None);
    }

    /// The resource at `path` (e.g. `"/s/t"`) changed: every observer gets a notification, rendered by
    /// running the resource's handler again. The type follows the endpoint's [`crate::ObservePolicy`].
    pub fn changed(&mut self, path: &str) {
        self.changes.push((normalize_path(path), None));
    }

    /// Like [`Context::changed`], forcing CON (`true`) or NON (`false`) notifications.
    pub fn changed_with(&mut self, path: &str, confirmable: bool) {
        self.changes.push((normalize_path(path), Some(confirmable)));
    }

    /// How many observers `path` has, over UDP and TCP: a resource nobody observes can stop watching
    /// whatever feeds its notifications.
    pub fn observer_count(&self, path: &str) -> usize {
        self.transports.observer_count(&normalize_path(path))
    }

    /// Forgets every observer of `path`, over UDP and TCP, without a last notification — a server
    /// reboot as far as they can tell (TD_COAP_OBS_04). Returns how many there were.
    pub fn drop_observers(&mut self, path: &str) -> usize {
        self.transports.drop_observers(&normalize_path(path))
    }

    pub fn join_group(&mut self, group: IpAddr) {
        self.commands.push(NodeCommand::JoinGroup(group));
    }

    pub fn leave_group(&mut self, group: IpAddr) {
        self.commands.push(NodeCommand::LeaveGroup(group));
    }

    /// Asks the driver to do `op` outside the sans-IO core (a store write): its result comes back through
    /// [`Service::handle_effect`] with the id returned here, later, and not necessarily in the order
    /// effects were started (see [`crate::effect`]).
    pub fn effect(&mut self, op: crate::EffectOp) -> crate::EffectId {
        self.effects.get_or_insert_with(Box::default).start(self.me, op)
    }

    /// This service's own random stream, seeded from the node's seed: for draws nobody gains by
    /// predicting (jitter, sampling). It is not a CSPRNG; a few outputs give its state away.
    pub fn rng(&mut self) -> &mut Rng {
        self.rng
    }

    /// A value an attacker must not guess (stream ids, resource names handed to one client, nonces): drawn
    /// from the endpoint's [`SecretRng`](crate::SecretRng), the ChaCha20 generator its tokens and Echo
    /// values come from — keyed from the OS on real sockets, from the seed in the simulator, so runs
    /// still repeat there. Use this, never [`Context::rng`], for anything a peer could exploit by
    /// predicting it.
    pub fn secret_u64(&mut self) -> u64 {
        self.transports.udp_mut().secret_u64()
    }

    /// Read access to the endpoint (configuration, statistics).
    pub fn endpoint(&self) -> &Endpoint {
        self.transports.udp()
    }

    /// How many leading Uri-Path segments the mount point consumed.
    pub fn mount_depth(&self) -> usize {
        self.mount_depth
    }

    /// The request's Uri-Path segments below this service's mount point.
    pub fn subpath(&self, request: &Request) -> Vec<String> {
        request.path_segments().skip(self.mount_depth).map(|s| s.into_owned()).collect()
    }
}

/// `"s/t/"` → `"/s/t"`: the form `Options::path` produces. An absolute URI (a resource behind a forward
/// proxy, see [`Request::resource_id`]) is kept as it is.
fn normalize_path(path: &str) -> String {
    if path.contains("://") {
        return path.to_string();
    }
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    format!("/{}", segs.join("/"))
}
