//! Observations through the proxy (RFC 7641 §5): one upstream observation per cache key, however many
//! clients observe the resource through this proxy. Each upstream notification is stored and every
//! observer's notification rendered from it by the endpoint ([`Context::changed`] under the name the
//! endpoint registered the observer with, [`corral_proto::Request::resource_id`]). When the last observer
//! is gone the upstream observation is deregistered: at once when the endpoint drops it
//! ([`Service::observer_gone`](corral_proto::Service::observer_gone)), else at the next notification (an observer that simply went quiet).

use super::forward::{downstream_response, failure_response, upstream_request};
use super::{ProxyService, Waiter};
use crate::key::{cache_key, Key};
use crate::target::requested_uri;
use corral_proto::wire::uri::Uri;
use corral_proto::wire::{Code, OptionNumber};
use corral_proto::{Context, Duration, IncomingRequest, Instant, Outcome, RequestId, Response};
use std::collections::HashMap;

/// How many spellings of one resource (Proxy-Uri strings) an observation keeps observers under.
const MAX_NAMES: usize = 16;
/// How long the last response of an ended observation stays to render the observers' final notification.
const ENDED_LINGER: Duration = Duration::from_secs(5);

struct Observation {
    upstream: RequestId,
    /// The names observers are registered under at the endpoint.
    names: Vec<String>,
    /// The latest upstream response (without Observe), rendered for every notification.
    latest: Option<Response>,
    /// Registrations waiting for the first upstream response.
    first: Vec<(Waiter, String)>,
}

#[derive(Default)]
pub(super) struct Observations {
    by_key: HashMap<Key, Observation>,
    by_upstream: HashMap<RequestId, Key>,
    /// Observations that ended upstream: their last response, until the observers have been told.
    ended: HashMap<Key, (Response, Instant)>,
}

impl Observations {
    pub(super) fn owns(&self, id: RequestId) -> bool {
        self.by_upstream.contains_key(&id)
    }

    pub(super) fn len(&self) -> usize {
        self.by_key.len()
    }

    pub(super) fn expire(&mut self, now: Instant) {
        self.ended.retain(|_, (_, until)| *until > now);
    }

    pub(super) fn next_expiry(&self) -> Option<Instant> {
        self.ended.values().map(|(_, until)| *until).min()
    }

    fn remove(&mut self, key: &Key) -> Option<Observation> {
        let o = self.by_key.remove(key)?;
        self.by_upstream.remove(&o.upstream);
        Some(o)
    }
}

fn add_name(names: &mut Vec<String>, name: String) -> bool {
    if names.contains(&name) {
        return true;
    }
    if names.len() >= MAX_NAMES {
        return false;
    }
    names.push(name);
    true
}

impl ProxyService {
    /// A registration (GET or FETCH with Observe=0) for `target`.
    pub(super) fn observe(&mut self, cx: &mut Context<'_>, req: IncomingRequest, target: Uri, key: Key, hops: u8) {
        let name = req.request.resource_id();
        self.observations.ended.remove(&key);
        if let Some(o) = self.observations.by_key.get_mut(&key) {
            self.stats.aggregated += 1;
            match &o.latest {
                Some(latest) => {
                    let r = Waiter::of(&req).answer(latest);
                    let r = if add_name(&mut o.names, name) { r.observable() } else { r };
                    cx.respond(req.id, r);
                }
                None if o.first.len() >= self.config.max_waiters => {
                    self.overloaded(cx, req.id, "too many clients waiting for this resource");
                }
                None => o.first.push((Waiter::of(&req), name)),
            }
            return;
        }
        if self.observations.by_key.len() >= self.config.max_observations {
            return self.overloaded(cx, req.id, "too many observations");
        }
        let hop = match self.route(&target, false) {
            Ok(mut hops) => hops.remove(0),
            Err(r) => return self.refuse(cx, req.id, r),
        };
        let up = upstream_request(&req.request, &target, hop.send_host, hops, None);
        let Some(id) = self.send(cx, &hop, up) else {
            return self.overloaded(cx, req.id, "no upstream exchange available");
        };
        self.stats.misses += 1;
        self.stats.observations += 1;
        self.observations.by_upstream.insert(id, key.clone());
        let first = vec![(Waiter::of(&req), name)];
        self.observations.by_key.insert(key, Observation { upstream: id, names: Vec::new(), latest: None, first });
    }

    /// A response or notification of an upstream observation, or its end.
    pub(super) fn on_observation(&mut self, cx: &mut Context<'_>, id: RequestId, outcome: Outcome) {
        let Some(key) = self.observations.by_upstream.get(&id).cloned() else { return };
        let (response, observing) = match outcome {
            Outcome::Response { response, .. } => {
                let observing = response.code.is_success() && response.options.contains(OptionNumber::OBSERVE);
                (downstream_response(response, &self.config.name), observing)
            }
            Outcome::Failed(e) => (failure_response(e, "the server observed"), false),
            Outcome::MulticastDone | Outcome::Pong { .. } => return,
        };
        let Some(o) = self.observations.by_key.get_mut(&key) else { return };
        if o.latest.is_none() {
            // The answer to the registration.
            o.latest = Some(response.clone());
            let first = std::mem::take(&mut o.first);
            for (w, name) in first {
                let r = w.answer(&response);
                let r = if observing && add_name(&mut o.names, name) { r.observable() } else { r };
                cx.respond(w.id, r);
            }
            if !observing {
                self.observations.remove(&key);
                cx.cancel(id);
            }
            return;
        }
        self.stats.notifications += 1;
        o.latest = Some(response.clone());
        let observers: usize = o.names.iter().map(|n| cx.observer_count(n)).sum();
        if observing && observers == 0 {
            tracing::debug!("no observer left; ending the upstream observation");
            cx.deregister(id);
            self.observations.remove(&key);
            return;
        }
        let names = o.names.clone();
        if !observing {
            self.observations.remove(&key);
            self.observations.ended.insert(key, (response, cx.now() + ENDED_LINGER));
        }
        for name in names {
            cx.changed(&name);
        }
    }

    /// The endpoint dropped an observer registered under `name`: an observation with none left ends
    /// upstream now (RFC 7641 §3.6), so that the proxy neither holds its slot nor keeps the origin sending.
    pub(super) fn observer_left(&mut self, cx: &mut Context<'_>, name: &str) {
        let orphans: Vec<Key> = self
            .observations
            .by_key
            .iter()
            .filter(|(_, o)| o.first.is_empty() && o.names.iter().any(|n| n == name))
            .filter(|(_, o)| o.names.iter().all(|n| cx.observer_count(n) == 0))
            .map(|(k, _)| k.clone())
            .collect();
        for key in orphans {
            if let Some(o) = self.observations.remove(&key) {
                tracing::debug!(%name, "last observer gone; ending the upstream observation");
                cx.deregister(o.upstream);
            }
        }
    }

    /// The endpoint renders a notification for one observer: the latest upstream response.
    pub(super) fn render_notification(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        let latest = requested_uri(&req.request).ok().and_then(|target| {
            let key = cache_key(&req.request, &target);
            match self.observations.by_key.get(&key) {
                Some(o) => o.latest.as_ref().map(|r| Waiter::of(&req).answer(r).observable()),
                None => self.observations.ended.get(&key).map(|(r, _)| r.clone()),
            }
        });
        let r = latest.unwrap_or_else(|| Response::error(Code::SERVICE_UNAVAILABLE, "the observation ended upstream"));
        cx.respond(req.id, r);
    }
}
