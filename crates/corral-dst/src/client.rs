//! The honest client: a CoAP client service on a wired host that creates, replaces, deletes and uses
//! entities at random, and the model of what the gateway acknowledged, which the invariants hold the
//! gateway to.
//!
//! # What it owns
//! [`Client`] (the service: every request it sent and every outcome it got, by request id) and [`Model`]
//! (per entity name, the state the gateway last acknowledged and whether a change since is unresolved). It
//! draws its choices from the harness's seeded stream; it never checks anything itself (see `check`).

use corral_proto::wire::{Code, ContentFormat};
use corral_proto::{
    Context, IncomingRequest, Instant, Outcome, Request, RequestId, Response, Rng, SendParams, Service,
};
use serde_json::json;
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// The entity names the client works with: few, so that changes meet on the same names.
pub const NAMES: [&str; 5] = ["e0", "e1", "e2", "e3", "e4"];

/// An entity as the client asked for it: its members (URIs, in order) and whether it is multicast.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Want {
    pub er: Vec<String>,
    pub multicast: bool,
}

/// What a request was for.
#[derive(Debug, Clone)]
pub enum Sent {
    /// PUT /em/<name> with this profile.
    Put(String, Want),
    /// DELETE /em/<name>.
    Delete(String),
    /// GET /em/<name>?eo=<op>.
    Use(String),
}

/// The client service: sends what the harness tells it and keeps every outcome.
#[derive(Default)]
pub struct Client {
    pub sent: BTreeMap<RequestId, (Instant, Sent)>,
    /// Every outcome by request, in the order they came.
    pub outcomes: BTreeMap<RequestId, Vec<(Instant, Outcome)>>,
}

impl Service for Client {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        cx.respond(req.id, Response::error(Code::NOT_FOUND, "a client serves nothing"));
    }

    fn handle_response(&mut self, cx: &mut Context<'_>, id: RequestId, outcome: Outcome) {
        self.outcomes.entry(id).or_default().push((cx.now(), outcome));
    }
}

impl Client {
    /// Sends one random operation to the gateway at `gw` over members `devices` (their addresses); returns
    /// its id and, for a change, the entity's name.
    pub fn act(
        &mut self,
        cx: &mut Context<'_>,
        rng: &mut Rng,
        gw: SocketAddr,
        devices: &[SocketAddr],
    ) -> Option<(RequestId, Option<String>)> {
        let name = NAMES[rng.below(NAMES.len() as u64) as usize].to_string();
        let roll = rng.below(100);
        let (req, sent) = if roll < 40 {
            let want = random_want(rng, gw, devices);
            let doc = json!({
                "er": want.er,
                "ect": if want.multicast { "multicast" } else { "unicast" },
                "eo": ["avg", "min", "max", "lst"],
            });
            let req = Request::new(Code::PUT)
                .with_path(&format!("em/{name}"))
                .with_content_format(ContentFormat::JSON)
                .with_payload(doc.to_string());
            (req, Sent::Put(name, want))
        } else if roll < 55 {
            (Request::new(Code::DELETE).with_path(&format!("em/{name}")), Sent::Delete(name))
        } else {
            let op = ["avg", "min", "max", "lst"][rng.below(4) as usize];
            let req =
                Request::get(&format!("em/{name}")).with_query(&format!("eo={op}")).with_accept(ContentFormat::JSON);
            (req, Sent::Use(name))
        };
        // A client that cannot start a request (its own tables full) simply does not send it.
        let id = cx.request(gw, req, SendParams::default()).ok()?;
        let change = match &sent {
            Sent::Put(n, _) | Sent::Delete(n) => Some(n.clone()),
            Sent::Use(_) => None,
        };
        self.sent.insert(id, (cx.now(), sent));
        Some((id, change))
    }
}

fn random_want(rng: &mut Rng, gw: SocketAddr, devices: &[SocketAddr]) -> Want {
    let k = rng.range_inclusive(2, 6.min(devices.len() as u64)) as usize;
    let mut picked: Vec<usize> = Vec::with_capacity(k);
    while picked.len() < k {
        let i = rng.below(devices.len() as u64) as usize;
        if !picked.contains(&i) {
            picked.push(i);
        }
    }
    let mut er: Vec<String> =
        picked.iter().map(|&i| corral_group::uri::format_coap(devices[i], &["s".into(), "t".into()])).collect();
    // Nesting: now and then a member is another entity of the same gateway (loops included).
    if rng.chance(0.15) {
        let other = NAMES[rng.below(NAMES.len() as u64) as usize];
        er[0] = corral_group::uri::format_coap(gw, &["em".into(), other.into()]);
    }
    Want { er, multicast: rng.chance(0.4) }
}

/// Per entity name: what the gateway last acknowledged, and whether a change since is unresolved.
#[derive(Debug, Clone, Default)]
pub struct NameState {
    /// The acknowledged state: `None` absent.
    pub acked: Option<Want>,
    /// When it was acknowledged.
    pub acked_at: Instant,
    /// When the request that created the entity as acknowledged was sent: its members joined after.
    pub created_sent: Instant,
    /// Change requests sent and not finally answered.
    pub outstanding: u32,
    /// A change whose fate the client cannot know (it got no answer), or two changes in flight together
    /// (the gateway may have made them in either order, whatever the order of their answers): the gateway
    /// may hold either state until the next acknowledged change.
    pub uncertain: bool,
    /// Changes sent and answered on this name so far: a change during which it moved overlapped another.
    pub moves: u64,
}

/// What the client may hold the gateway to (see [`NameState`]).
#[derive(Debug, Clone, Default)]
pub struct Model {
    pub names: BTreeMap<String, NameState>,
}

impl Model {
    /// A change request left; returns its mark, for [`Model::answered`].
    pub fn sent(&mut self, name: &str) -> u64 {
        let st = self.names.entry(name.to_string()).or_default();
        st.outstanding += 1;
        st.moves += 1;
        st.moves
    }

    /// A change request sent at `t0` (with `mark`) got its final outcome at `at`.
    pub fn answered(&mut self, sent: &Sent, (t0, mark): (Instant, u64), outcome: &Outcome, at: Instant) {
        let (name, target) = match sent {
            Sent::Put(n, w) => (n, Some(w.clone())),
            Sent::Delete(n) => (n, None),
            Sent::Use(_) => return,
        };
        let st = self.names.entry(name.clone()).or_default();
        st.outstanding = st.outstanding.saturating_sub(1);
        let overlapped = st.moves != mark;
        st.moves += 1;
        let code = match outcome {
            Outcome::Response { response, .. } => response.code,
            _ => {
                st.uncertain = true;
                return;
            }
        };
        let done = matches!(sent, Sent::Put(..)) && (code == Code::CREATED || code == Code::CHANGED)
            || matches!(sent, Sent::Delete(_)) && (code == Code::DELETED || code == Code::NOT_FOUND);
        if done {
            if code == Code::CREATED {
                st.created_sent = t0;
            }
            st.acked = target;
            st.acked_at = at;
            st.uncertain = overlapped;
        }
        // Any other answer (4.xx, 5.xx) says the change was not made: the state stays what it was.
    }
}
