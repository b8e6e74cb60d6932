//! `/obs`, `/obs-non` and `/obs-reset`: observable values for TD_COAP_OBS_01..10 — what changes them
//! (the period, PUT, DELETE) and how the end of an observation is told (4.04 after DELETE, 4.06 after a
//! change of Content-Format).

use super::*;

/// `/obs` or `/obs-non`: a value that changes every period, or that a PUT set until then.
#[derive(Default)]
pub(super) struct Observed {
    /// Set by PUT; `None` serves the change counter.
    value: Option<(Vec<u8>, ContentFormat)>,
    /// DELETE removed the resource until its observers were told (or the next change).
    deleted: bool,
    /// The Content-Format each current observer registered for.
    observers: BTreeMap<ObserverId, ContentFormat>,
    /// Observers whose next notification is this final error (4.04 after DELETE, 4.06 after a
    /// Content-Format change): it ends their observation.
    ending: BTreeMap<ObserverId, Code>,
}

impl Plugtest {
    /// GET of `/obs` or `/obs-non`: the current value, observable; or the error that ends this observer's
    /// observation.
    pub(super) fn get_observed(&mut self, non: bool, req: &IncomingRequest) -> Response {
        let (changes, max_age) = (self.changes, self.obs_max_age());
        let o = if non { &mut self.obs_non } else { &mut self.obs };
        let id = observer_id(req.from, req.token);
        if let Some(code) = o.ending.remove(&id) {
            o.observers.remove(&id);
            if o.ending.is_empty() {
                // Every observer has been told of the deletion: the resource is back for the next test
                // (TD_COAP_OBS_07 → 08), as it would be at the next change or PUT.
                o.deleted = false;
            }
            let why = if code == Code::NOT_FOUND {
                "the resource was deleted; observation ended"
            } else {
                "the resource changed its Content-Format; observation ended"
            };
            return Response::error(code, why);
        }
        if o.deleted {
            return Response::error(Code::NOT_FOUND, "deleted; back once the observers were told, or at the next PUT");
        }
        let (body, cf) =
            o.value.clone().unwrap_or_else(|| (changes.to_string().into_bytes(), ContentFormat::TEXT_PLAIN));
        if req.request.options.accept().is_some_and(|a| a != cf) {
            return Response::error(Code::NOT_ACCEPTABLE, format!("only {cf} is available"));
        }
        if req.request.options.observe() == Some(corral_proto::wire::OBSERVE_REGISTER) {
            if o.observers.len() >= MAX_REMEMBERED_OBSERVERS && !o.observers.contains_key(&id) {
                o.observers.pop_first();
            }
            o.observers.insert(id, cf);
        }
        Response::content(cf, body).with_max_age(max_age).observable()
    }

    /// PUT or DELETE of `/obs` or `/obs-non` (TD_COAP_OBS_07..09); observers hear of it at once.
    pub(super) fn change_observed(&mut self, cx: &mut Context<'_>, non: bool, req: &IncomingRequest) -> Response {
        let path = if non { "/obs-non" } else { "/obs" };
        let o = if non { &mut self.obs_non } else { &mut self.obs };
        let response = match req.request.method {
            Code::PUT => {
                let cf = req.request.options.content_format().unwrap_or(ContentFormat::TEXT_PLAIN);
                for (id, registered) in &o.observers {
                    if *registered != cf {
                        o.ending.insert(id.clone(), Code::NOT_ACCEPTABLE);
                    }
                }
                o.value = Some((req.request.payload.clone(), cf));
                o.deleted = false;
                Response::new(Code::CHANGED)
            }
            Code::DELETE => {
                for id in std::mem::take(&mut o.observers).into_keys() {
                    o.ending.insert(id, Code::NOT_FOUND);
                }
                o.value = None;
                // Back once every observer was told: at once when nobody observes it (an observer that
                // deregistered is not waited for), so the next test finds it.
                o.deleted = !o.ending.is_empty();
                Response::new(Code::DELETED)
            }
            m => return not_allowed(m),
        };
        cx.changed_with(path, !non);
        response
    }

    /// `/obs*` change: every observer gets the new value (CON for `/obs` and `/obs-large`, NON for
    /// `/obs-non`); a PUT value or a deletion lasts until now.
    pub(super) fn change(&mut self, cx: &mut Context<'_>) {
        self.changes += 1;
        for o in [&mut self.obs, &mut self.obs_non] {
            o.value = None;
            o.deleted = false;
            o.ending.clear();
        }
        cx.changed_with("/obs", true);
        cx.changed_with("/obs-non", false);
        cx.changed_with("/obs-large", true);
    }

    /// The endpoint ended an observation of `/obs` or `/obs-non` (the observer rejected a notification,
    /// did not acknowledge one, deregistered, went away): forget it here too, so that a deletion waits
    /// only for observers that are still there before `/obs` comes back (TD_COAP_OBS_08 after OBS_07).
    pub(super) fn forget_observer(&mut self, path: &str, peer: SocketAddr, token: Token) {
        let o = match path {
            "/obs" => &mut self.obs,
            "/obs-non" => &mut self.obs_non,
            _ => return,
        };
        let id = observer_id(peer, token);
        o.observers.remove(&id);
        if o.ending.remove(&id).is_some() && o.ending.is_empty() {
            o.deleted = false;
        }
    }

    /// `/obs-reset` (TD_COAP_OBS_04, a server reboot): every observer of `/obs*` is forgotten, by the
    /// endpoint and here, without a last notification. Returns how many there were.
    pub(super) fn reset_observers(&mut self, cx: &mut Context<'_>) -> usize {
        for o in [&mut self.obs, &mut self.obs_non] {
            o.observers.clear();
            o.ending.clear();
        }
        ["/obs", "/obs-non", "/obs-large"].iter().map(|p| cx.drop_observers(p)).sum()
    }
}
