//! OSCORE for the client: a security context shared by requests, and the two steps around sending —
//! protect the request, verify the response. [`crate::RequestBuilder::oscore`] uses them; so can a load
//! generator that drives endpoints itself (`corral bench --credentials`).
//!
//! Four ways to send: with a pairwise RFC 8613 context; as a Group OSCORE member in group mode (the
//! request signed, so that every member of the group can verify it — the one way to protect a multicast
//! request, whose every answer is verified on its own); as a member in pairwise mode, to one other member
//! (keys derived from the two members' credentials, no signature); and as a member sending deterministic
//! requests
//! (draft-ietf-core-cacheable-oscore): every member of the group sends the same bytes for the same GET, so a
//! proxy can aggregate and cache them, and the signed response verifies at each.

use crate::error::{Error, OscoreError};
use corral_oscore::store::{ContextDir, GroupDir};
use corral_proto::wire::OptionNumber;
use corral_proto::{Request, Response};

/// A client's security context. (Long-lived and shared: the variants' sizes do not matter.)
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum ClientContext {
    Pairwise(ContextDir),
    /// A group member sending requests in group mode (signed), to one server or to a multicast group.
    Group(GroupDir),
    /// A group member sending requests in pairwise mode to the member whose Sender ID is `server` (keys
    /// derived from both members' Ed25519 credentials; no signature).
    GroupPairwise {
        dir: GroupDir,
        server: Vec<u8>,
    },
    /// A group member sending deterministic requests.
    Deterministic(GroupDir),
}

impl ClientContext {
    /// Whether a multicast request can be protected with it: only in group mode (a pairwise key, or a
    /// deterministic request's, is for one server).
    pub fn protects_multicast(&self) -> bool {
        matches!(self, ClientContext::Group(_))
    }
}

impl From<ContextDir> for ClientContext {
    fn from(d: ContextDir) -> ClientContext {
        ClientContext::Pairwise(d)
    }
}

/// What binds a response to the protected request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Binding {
    Pairwise(corral_oscore::RequestBinding),
    Group(corral_oscore::GroupBinding),
}

/// An OSCORE security context several requests share (its sequence number and its file).
pub type SharedContext = std::sync::Arc<std::sync::Mutex<ClientContext>>;

/// A shared context from a context directory.
pub fn shared(ctx: impl Into<ClientContext>) -> SharedContext {
    std::sync::Arc::new(std::sync::Mutex::new(ctx.into()))
}

fn lock(ctx: &SharedContext) -> Result<std::sync::MutexGuard<'_, ClientContext>, Error> {
    ctx.lock().map_err(|_| Error::Oscore(OscoreError::Poisoned))
}

/// Protects `plain` with the shared context, persisting a sequence number reservation first.
pub fn protect(ctx: &SharedContext, plain: &Request) -> Result<(Request, Binding), Error> {
    let p = corral_oscore::Plain { code: plain.method, options: plain.options.clone(), payload: plain.payload.clone() };
    let (outer, binding) = match &mut *lock(ctx)? {
        ClientContext::Pairwise(dir) => {
            dir.reserve()?;
            let send_kid_context = dir.context.params().id_context.is_some();
            let (outer, b) = dir.context.protect_request(&p, send_kid_context)?;
            (outer, Binding::Pairwise(b))
        }
        ClientContext::Group(dir) => {
            dir.reserve()?;
            let (outer, b) = dir.context.protect_group_request(&p)?;
            (outer, Binding::Group(b))
        }
        ClientContext::GroupPairwise { dir, server } => {
            dir.reserve()?;
            let (outer, b) = dir.context.protect_pairwise_request(&p, server)?;
            (outer, Binding::Group(b))
        }
        ClientContext::Deterministic(dir) => {
            // Partial IV 0 always: nothing to reserve.
            let (outer, b) = dir.context.protect_deterministic(&p)?;
            (outer, Binding::Group(b))
        }
    };
    Ok((Request { method: outer.code, options: outer.options, payload: outer.payload }, binding))
}

/// Verifies a response to the request `binding` describes; an unprotected one is the server's refusal.
pub fn verify(ctx: &SharedContext, binding: &Binding, response: Response) -> Result<(Response, Option<u64>), Error> {
    if !response.options.contains(OptionNumber::OSCORE) {
        let diagnostic = response.payload_text().into_owned();
        return Err(Error::Oscore(OscoreError::Unprotected { code: response.code, diagnostic }));
    }
    let outer = corral_oscore::Plain { code: response.code, options: response.options, payload: response.payload };
    let (inner, number) = match (&mut *lock(ctx)?, binding) {
        (ClientContext::Pairwise(dir), Binding::Pairwise(b)) => dir.context.unprotect_response(b, &outer),
        (
            ClientContext::Group(dir) | ClientContext::GroupPairwise { dir, .. } | ClientContext::Deterministic(dir),
            Binding::Group(b),
        ) => dir.context.unprotect_response(b, &outer),
        _ => return Err(Error::Oscore(OscoreError::WrongBinding)),
    }?;
    Ok((Response { code: inner.code, options: inner.options, payload: inner.payload }, number))
}
