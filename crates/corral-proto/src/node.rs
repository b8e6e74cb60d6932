//! A node: one endpoint plus the services mounted on it. The tokio runtime and the simulator drive nodes.
//!
//! The node routes each received request to the service mounted at the longest matching Uri-Path prefix,
//! answers 4.04 when none matches, serves `/.well-known/core` from the services' links, and hands every
//! outcome of a request back to the service that issued it. It adds no I/O and no clock to the endpoint's
//! contract: inputs are `handle_*`, outputs `poll_*`.

use crate::effect::{EffectDone, EffectId, EffectOp, EffectRunner};
use crate::endpoint::{Endpoint, Event, Transmit};
use crate::message::{IncomingRequest, RequestId};
use crate::rng::Rng;
use crate::service::{Context, Inbound, Layer, NodeCommand, Outcome, Owners, ResourceLink, Service};
use crate::tcp::{ConnId, TcpConfig, TcpEndpoint, TcpTransmit};
use crate::time::Instant;
use crate::transports::Transports;
use corral_wire::{Code, ContentFormat};
use std::any::Any;
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};

/// Refers to a service mounted on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ServiceHandle(usize);

struct Mount {
    prefix: Vec<String>,
    service: Box<dyn Service>,
    rng: Rng,
}

/// An endpoint and its services. See the module docs.
pub struct Node {
    /// The UDP and TCP endpoints; the node never picks between them itself.
    transports: Transports,
    mounts: Vec<Mount>,
    owners: Owners,
    commands: Vec<NodeCommand>,
    /// Resources whose observers must be notified (`Context::changed`).
    changes: Vec<(String, Option<bool>)>,
    /// Events for requests no service owns (issued directly on the endpoint by the driver).
    unowned: VecDeque<Event>,
    seed: u64,
    well_known_core: bool,
    /// The service that takes requests for a forward proxy (Proxy-Uri or Proxy-Scheme), if any.
    forward_proxy: Option<usize>,
    /// A layer between the message layer and the services (OSCORE), if any.
    layer: Option<Box<dyn Layer>>,
    /// The services' effects, made at the first effect or runner (see [`Effects`]).
    effects: Option<Box<crate::effect::Effects>>,
}

impl Node {
    pub fn new(endpoint: Endpoint) -> Node {
        let seed = endpoint.config().seed;
        Node {
            transports: Transports::beside(endpoint),
            mounts: Vec::new(),
            owners: Owners::with_hasher(foldhash::fast::FixedState::with_seed(seed)),
            commands: Vec::new(),
            changes: Vec::new(),
            unowned: VecDeque::new(),
            seed,
            well_known_core: true,
            forward_proxy: None,
            layer: None,
            effects: None,
        }
    }

    /// Mounts a service at a `/`-separated path prefix (`""` catches every path no other mount claims).
    pub fn mount<S: Service>(&mut self, prefix: &str, service: S) -> ServiceHandle {
        let prefix: Vec<String> = prefix.split('/').filter(|s| !s.is_empty()).map(str::to_string).collect();
        let index = self.mounts.len();
        let rng = Rng::stream(self.seed, 0x5e41_0000 + index as u64);
        self.mounts.push(Mount { prefix, service: Box::new(service), rng });
        ServiceHandle(index)
    }

    /// Makes a mounted service this node's forward proxy (RFC 7252 §5.7): every request carrying Proxy-Uri
    /// or Proxy-Scheme goes to it, whatever its Uri-Path. Without one, such requests are answered 5.05.
    pub fn set_forward_proxy(&mut self, h: ServiceHandle) {
        self.forward_proxy = (h.0 < self.mounts.len()).then_some(h.0);
    }

    /// Puts a [`Layer`] between the message layer and the services (OSCORE): every request passes it
    /// before routing and every response after the service.
    pub fn set_layer(&mut self, layer: Box<dyn Layer>) {
        self.layer = Some(layer);
    }

    /// Has `runner` do the services' effects (see [`crate::effect`]): after every input the node hands it
    /// what was started and delivers what it reports done, and its `poll_timeout` joins the node's.
    pub fn set_effect_runner(&mut self, runner: Box<dyn EffectRunner>) {
        self.effects.get_or_insert_with(Box::default).runner = Some(runner);
    }

    /// The effect runner, to look into (a simulated store's contents, a crash).
    pub fn effect_runner_mut(&mut self) -> Option<&mut Box<dyn EffectRunner>> {
        self.effects.as_mut()?.runner.as_mut()
    }

    /// Takes the effect runner out (a simulated crash keeps the store and drops the node).
    pub fn take_effect_runner(&mut self) -> Option<Box<dyn EffectRunner>> {
        self.effects.as_mut()?.runner.take()
    }

    /// An effect a service started, for a driver without a runner to do (see [`crate::effect`]).
    #[must_use]
    pub fn poll_effect(&mut self) -> Option<(EffectId, EffectOp)> {
        self.effects.as_mut()?.queued.pop_front()
    }

    /// Effect `id` is done: its service gets `done`. An unknown id (delivered twice) is ignored.
    pub fn handle_effect_done(&mut self, now: Instant, id: EffectId, done: EffectDone) {
        self.deliver_effect(now, id, done);
        self.dispatch(now);
    }

    fn deliver_effect(&mut self, now: Instant, id: EffectId, done: EffectDone) {
        let Some(index) = self.effects.as_mut().and_then(|e| e.owners.remove(&id)) else {
            tracing::debug!(?id, "completion of an unknown effect");
            return;
        };
        let (service, mut cx) = self.parts(now, index);
        service.handle_effect(&mut cx, id, done);
    }

    /// Hands the runner what the services started and delivers what it has done, until neither is left
    /// (a completion may start more). Bounded like the change rounds of [`Node::dispatch`].
    fn run_effects(&mut self, now: Instant) {
        for _round in 0..64 {
            let Some((id, done)) = self.effects.as_mut().and_then(|e| e.run(now)) else { return };
            self.deliver_effect(now, id, done);
            self.dispatch_changes(now);
        }
        tracing::warn!("effects keep completing within one input; the rest wait for the next");
    }

    /// The layer, to look into (statistics) or change (keys).
    pub fn layer_mut(&mut self) -> Option<&mut Box<dyn Layer>> {
        self.layer.as_mut()
    }

    /// Whether the node answers `/.well-known/core` itself (default: yes, unless a service is mounted there).
    pub fn set_well_known_core(&mut self, enabled: bool) {
        self.well_known_core = enabled;
    }

    pub fn endpoint(&self) -> &Endpoint {
        self.transports.udp()
    }

    /// The UDP endpoint itself. A driver issues requests on it directly (their outcomes come back through
    /// [`Node::poll_event`], since no service owns them): corral-tokio's driver runs a bare client and a
    /// node alike through it, for requests, cancellations and deregistrations; tests use it to inject what
    /// a driver would (an ICMP error, a request without a service).
    pub fn endpoint_mut(&mut self) -> &mut Endpoint {
        self.transports.udp_mut()
    }

    /// The CoAP-over-TCP endpoint that serves this node's services to TCP connections.
    pub fn tcp(&self) -> &TcpEndpoint {
        self.transports.tcp()
    }

    /// The TCP endpoint, for a driver that answers TCP requests on behalf of async handlers (as
    /// [`Node::endpoint_mut`] does for UDP).
    pub fn tcp_mut(&mut self) -> &mut TcpEndpoint {
        self.transports.tcp_mut()
    }

    /// Both endpoints, for a driver that acts on an exchange by its id (cancel, deregister, respond)
    /// without asking which transport it is on.
    pub fn transports(&self) -> &Transports {
        &self.transports
    }

    pub fn transports_mut(&mut self) -> &mut Transports {
        &mut self.transports
    }

    /// An ICMP error for a datagram sent to `peer` (see [`Endpoint::handle_unreachable`]).
    pub fn handle_unreachable(&mut self, now: Instant, peer: SocketAddr, quoted: Option<&[u8]>) {
        self.transports.udp_mut().handle_unreachable(now, peer, quoted);
        self.dispatch(now);
    }

    /// Fails every unicast exchange with `peer` with `error` (see [`Endpoint::fail_peer`]: a failed DTLS
    /// handshake), and tells the services that were waiting.
    pub fn fail_peer(&mut self, now: Instant, peer: SocketAddr, error: crate::RequestError) {
        self.transports.udp_mut().fail_peer(now, peer, error);
        self.dispatch(now);
    }

    /// Replaces the TCP endpoint's configuration (before any connection).
    pub fn set_tcp_config(&mut self, config: TcpConfig) {
        *self.transports.tcp_mut() = TcpEndpoint::new(config);
    }

    pub fn handle_tcp_connected(&mut self, now: Instant, conn: ConnId, peer: SocketAddr) {
        self.transports.tcp_mut().handle_connected(now, conn, peer);
        self.dispatch(now);
    }

    pub fn handle_tcp_data(&mut self, now: Instant, conn: ConnId, data: &[u8]) {
        self.transports.tcp_mut().handle_data(now, conn, data);
        self.dispatch(now);
    }

    pub fn handle_tcp_closed(&mut self, now: Instant, conn: ConnId) {
        self.transports.tcp_mut().handle_closed(now, conn);
        self.dispatch(now);
    }

    /// A connection asked for with `poll_tcp_connect` cannot be made.
    pub fn handle_tcp_connect_failed(&mut self, now: Instant, dst: SocketAddr) {
        self.transports.tcp_mut().handle_connect_failed(now, dst);
        self.dispatch(now);
    }

    /// A server to connect to over TCP, for a service's [`Context::request_tcp`]; report the connection with
    /// `handle_tcp_connected` (peer = this address) or `handle_tcp_connect_failed`.
    #[must_use]
    pub fn poll_tcp_connect(&mut self) -> Option<SocketAddr> {
        self.transports.tcp_mut().poll_connect()
    }

    /// Bytes to write to a TCP connection.
    #[must_use]
    pub fn poll_tcp_transmit(&mut self) -> Option<TcpTransmit> {
        self.transports.tcp_mut().poll_transmit()
    }

    /// A TCP connection the driver must close.
    #[must_use]
    pub fn poll_tcp_close(&mut self) -> Option<ConnId> {
        self.transports.tcp_mut().poll_close()
    }

    pub fn service<S: Service>(&self, h: ServiceHandle) -> Option<&S> {
        let svc: &dyn Any = self.mounts.get(h.0)?.service.as_ref();
        svc.downcast_ref::<S>()
    }

    pub fn service_mut<S: Service>(&mut self, h: ServiceHandle) -> Option<&mut S> {
        let svc: &mut dyn Any = self.mounts.get_mut(h.0)?.service.as_mut();
        svc.downcast_mut::<S>()
    }

    /// Runs `f` on a service with a context, as if the service had an input: the way a driver makes a
    /// client service start a request. Outputs are dispatched afterwards.
    pub fn with_service<S: Service, R>(
        &mut self,
        now: Instant,
        h: ServiceHandle,
        f: impl FnOnce(&mut S, &mut Context<'_>) -> R,
    ) -> Option<R> {
        if h.0 >= self.mounts.len() {
            return None;
        }
        let (service, mut cx) = self.parts(now, h.0);
        let svc: &mut dyn Any = service;
        let svc = svc.downcast_mut::<S>()?;
        let r = f(svc, &mut cx);
        self.dispatch(now);
        Some(r)
    }

    pub fn handle_datagram(&mut self, now: Instant, from: SocketAddr, dst_ip: Option<IpAddr>, data: &[u8]) {
        self.transports.udp_mut().handle_datagram(now, from, dst_ip, data);
        self.dispatch(now);
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        self.transports.handle_timeout(now);
        self.dispatch(now);
        for i in 0..self.mounts.len() {
            if self.mounts[i].service.poll_timeout().is_some_and(|t| t <= now) {
                let (service, mut cx) = self.parts(now, i);
                service.handle_timeout(&mut cx);
            }
        }
        self.dispatch(now);
    }

    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transports.udp_mut().poll_transmit()
    }

    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let services = self.mounts.iter().filter_map(|m| m.service.poll_timeout()).min();
        let effects = self.effects.as_ref().and_then(|e| e.runner.as_ref()?.poll_timeout());
        [self.transports.poll_timeout(), services, effects].into_iter().flatten().min()
    }

    /// Multicast joins and leaves the services asked for; the driver applies them.
    #[must_use]
    pub fn poll_command(&mut self) -> Option<NodeCommand> {
        if self.commands.is_empty() {
            None
        } else {
            Some(self.commands.remove(0))
        }
    }

    /// Events about requests the driver issued directly on the endpoint.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.unowned.pop_front()
    }

    /// The service at `index` and a context for it, borrowing the node's other parts.
    fn parts(&mut self, now: Instant, index: usize) -> (&mut dyn Service, Context<'_>) {
        let mount = &mut self.mounts[index];
        let cx = Context {
            now,
            transports: &mut self.transports,
            owners: &mut self.owners,
            commands: &mut self.commands,
            changes: &mut self.changes,
            rng: &mut mount.rng,
            me: index,
            mount_depth: mount.prefix.len(),
            layer: self.layer.as_mut(),
            effects: &mut self.effects,
        };
        (mount.service.as_mut(), cx)
    }

    /// Delivers every pending endpoint event to its service, renders the notifications of changed
    /// resources, and runs the effects the services started (see [`Node::run_effects`]).
    fn dispatch(&mut self, now: Instant) {
        self.dispatch_changes(now);
        if self.effects.as_ref().is_some_and(|e| e.runner.is_some()) {
            self.run_effects(now);
        }
    }

    /// Delivers every pending endpoint event to its service, and renders the notifications of changed
    /// resources. A handler that reports a change while rendering would loop; rounds are capped.
    fn dispatch_changes(&mut self, now: Instant) {
        for _round in 0..8 {
            self.dispatch_events(now);
            if self.changes.is_empty() {
                return;
            }
            let changes = std::mem::take(&mut self.changes);
            for (path, confirmable) in changes {
                for req in self.transports.notify(now, &path, confirmable) {
                    self.route(now, req);
                }
            }
        }
        if !self.changes.is_empty() {
            tracing::warn!("resource changes keep arriving while notifications render; deferring the rest");
        }
    }

    fn dispatch_events(&mut self, now: Instant) {
        while let Some(event) = self.transports.poll_event() {
            let (id, outcome) = match event {
                Event::Request(req) => {
                    self.route(now, req);
                    continue;
                }
                Event::Response { id, from, response } => (id, Outcome::Response { from, response }),
                Event::Failed { id, error } => (id, Outcome::Failed(error)),
                Event::MulticastDone { id } => (id, Outcome::MulticastDone),
                Event::Pong { id, from } => (id, Outcome::Pong { from }),
                Event::ObserverGone { path, peer, token } => {
                    self.observer_gone(now, &path, peer, token);
                    continue;
                }
            };
            self.deliver(now, id, outcome);
        }
    }

    fn deliver(&mut self, now: Instant, id: RequestId, outcome: Outcome) {
        let Some(&index) = self.owners.get(&id) else {
            self.unowned.push_back(match outcome {
                Outcome::Response { from, response } => Event::Response { id, from, response },
                Outcome::Failed(error) => Event::Failed { id, error },
                Outcome::MulticastDone => Event::MulticastDone { id },
                Outcome::Pong { from } => Event::Pong { id, from },
            });
            return;
        };
        if !self.transports.is_active(id) {
            self.owners.remove(&id);
        }
        let (service, mut cx) = self.parts(now, index);
        service.handle_response(&mut cx, id, outcome);
    }

    fn route(&mut self, now: Instant, req: IncomingRequest) {
        let Some(layer) = self.layer.as_mut() else { return self.route_inner(now, req) };
        let id = req.id;
        let inbound = layer.inbound(now, req);
        // The client's answer to a challenge sent through the layer proves its address before anything is
        // answered (see `Layer::protects`).
        let proved = layer.address_proof(id).is_some_and(|echo| self.transports.prove_address(now, id, &echo));
        let req = match inbound {
            Inbound::Pass(req) => req,
            Inbound::Replaced(mut req) => {
                self.transports.retarget_observation(req.id, &req.request);
                if proved {
                    (req.verified, req.echoed) = (true, true);
                }
                req
            }
            Inbound::Answer(id, response) => {
                let _ = self.respond(now, id, response);
                return;
            }
        };
        self.route_inner(now, req);
    }

    fn route_inner(&mut self, now: Instant, req: IncomingRequest) {
        if req.request.is_proxied() {
            if let Some(index) = self.forward_proxy {
                let (service, mut cx) = self.parts(now, index);
                service.handle_request(&mut cx, req);
                return;
            }
            // RFC 7252 §5.7.2: a request for a proxy, to an endpoint that is not one.
            let r = crate::Response::error(Code::PROXYING_NOT_SUPPORTED, "this endpoint is not a forward proxy");
            let _ = self.respond(now, req.id, r);
            return;
        }
        let segments: Vec<std::borrow::Cow<'_, str>> = req.request.path_segments().collect();
        let best = self.mount_for(&segments);
        let is_wkc = segments.len() == 2 && segments[0] == ".well-known" && segments[1] == "core";
        let wkc_mounted = best.is_some_and(|i| self.mounts[i].prefix.len() == 2);
        if is_wkc && self.well_known_core && !wkc_mounted {
            drop(segments);
            self.serve_well_known_core(now, req);
            return;
        }
        drop(segments);
        let Some(index) = best else {
            let path = req.request.options.path();
            let _ =
                self.respond(now, req.id, crate::Response::error(Code::NOT_FOUND, format!("no resource at {path}")));
            return;
        };
        let (service, mut cx) = self.parts(now, index);
        service.handle_request(&mut cx, req);
    }

    /// The service mounted at the longest prefix of `segments`.
    fn mount_for<S: AsRef<str>>(&self, segments: &[S]) -> Option<usize> {
        self.mounts
            .iter()
            .enumerate()
            .filter(|(_, m)| {
                m.prefix.len() <= segments.len() && m.prefix.iter().zip(segments).all(|(a, b)| a == b.as_ref())
            })
            .max_by_key(|(i, m)| (m.prefix.len(), usize::MAX - i))
            .map(|(i, _)| i)
    }

    /// The endpoint ended an observation of `path` (a resource path, or a proxied resource's absolute URI):
    /// the service that serves it hears of it.
    fn observer_gone(&mut self, now: Instant, path: &str, peer: SocketAddr, token: corral_wire::Token) {
        let index = if path.contains("://") {
            self.forward_proxy
        } else {
            let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
            self.mount_for(&segments)
        };
        if let Some(index) = index {
            let (service, mut cx) = self.parts(now, index);
            service.observer_gone(&mut cx, path, peer, token);
        }
    }

    /// Every link of every service, with paths made absolute.
    pub fn links(&self) -> Vec<ResourceLink> {
        let mut out = Vec::new();
        for m in &self.mounts {
            for mut link in m.service.links() {
                let mut path = m.prefix.join("/");
                if !link.path.is_empty() {
                    if !path.is_empty() {
                        path.push('/');
                    }
                    path.push_str(&link.path);
                }
                link.path = path;
                out.push(link);
            }
        }
        out
    }

    fn serve_well_known_core(&mut self, now: Instant, req: IncomingRequest) {
        let response = if req.request.method != Code::GET {
            crate::Response::error(Code::METHOD_NOT_ALLOWED, "/.well-known/core only supports GET")
        } else {
            let filter = req.request.options.query_pairs().next().map(|(k, v)| (k.to_string(), v.to_string()));
            let body = crate::links::render(&self.links(), filter.as_ref().map(|(k, v)| (k.as_str(), v.as_str())));
            if body.is_empty() && req.multicast {
                // RFC 6690 §4.1: a filtered multicast discovery with no match is not answered.
                crate::Response::error(Code::NOT_FOUND, "no matching links")
            } else {
                crate::Response::content(ContentFormat::LINK_FORMAT, body)
            }
        };
        let _ = self.respond(now, req.id, response);
    }

    /// Answers a received request on whichever transport it came, through the layer if there is one: the
    /// way a driver answers for a handler that runs outside the node (corral-tokio's async routes).
    pub fn respond(
        &mut self,
        now: Instant,
        id: crate::InboundId,
        response: crate::Response,
    ) -> Result<(), crate::UnknownExchange> {
        let response = match self.layer.as_mut() {
            Some(layer) => crate::service::through_layer(layer.as_mut(), &mut self.transports, now, id, response),
            None => response,
        };
        self.transports.respond(now, id, response)
    }
}
