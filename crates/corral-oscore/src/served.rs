//! What a server's [`crate::OscoreLayer`] holds: pairwise contexts (one per client) and group contexts
//! (one per group), behind one interface so the layer's Echo recovery, Observe and block-wise handling
//! serve both.

use crate::group::GroupBinding;
use crate::option::OscoreOption;
use crate::store::{ContextDir, GroupDir};
use crate::{Error, Plain, Refusal, RequestBinding};
use corral_wire::OptionNumber;

/// A context a server answers with. (Long-lived, one per client or group: the variants' sizes do not matter.)
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Served {
    Pairwise(ContextDir),
    Group(GroupDir),
}

/// What binds a response to its request, for either kind of context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Binding {
    Pairwise(RequestBinding),
    Group(GroupBinding),
}

/// What a request's OSCORE option says about who sent it.
pub(crate) struct Sender {
    pub kid: Vec<u8>,
    pub kid_context: Option<Vec<u8>>,
}

impl Sender {
    pub(crate) fn of(options: &corral_wire::Options) -> Result<Sender, Error> {
        let value = options.get(OptionNumber::OSCORE).ok_or(Error::NotOscore)?;
        let o = OscoreOption::decode(value)?;
        Ok(Sender { kid: o.kid.ok_or(Error::BadOption("a request needs a kid"))?, kid_context: o.kid_context })
    }
}

impl Served {
    /// Whether a request from `s` is for this context: a pairwise context by its Recipient ID (and ID
    /// Context, when the request names one); a group by its Group ID and a known member or the
    /// Deterministic Client.
    pub(crate) fn serves(&self, s: &Sender) -> bool {
        match self {
            Served::Pairwise(d) => {
                let p = d.context.params();
                p.recipient_id == s.kid && s.kid_context.as_ref().is_none_or(|k| Some(k) == p.id_context.as_ref())
            }
            Served::Group(g) => {
                s.kid_context.as_deref() == Some(&g.context.params().group_id[..]) && g.context.knows(&s.kid)
            }
        }
    }

    pub(crate) fn open_request(&mut self, outer: &Plain) -> Result<(Plain, Binding, Result<(), Refusal>), Error> {
        match self {
            Served::Pairwise(d) => d.context.open_request(outer).map(|(p, b, w)| (p, Binding::Pairwise(b), w)),
            Served::Group(g) => g.context.open_request(outer).map(|(p, b, w)| (p, Binding::Group(b), w)),
        }
    }

    pub(crate) fn replay_accept(&mut self, b: &Binding) {
        match (self, b) {
            (Served::Pairwise(d), Binding::Pairwise(b)) => d.context.replay_accept(b),
            (Served::Group(g), Binding::Group(b)) => g.context.replay_accept(b),
            _ => {}
        }
    }

    pub(crate) fn resynchronise(&mut self, b: &Binding) {
        match (self, b) {
            (Served::Pairwise(d), Binding::Pairwise(b)) => d.context.resynchronise(b),
            (Served::Group(g), Binding::Group(b)) => g.context.resynchronise(b),
            _ => {}
        }
    }

    /// Before the first request is accepted: see [`ContextDir::start_serving`].
    pub(crate) fn start_serving(&mut self) -> Result<(), Error> {
        match self {
            Served::Pairwise(d) => d.start_serving(),
            Served::Group(g) => g.start_serving(),
        }
    }

    /// Where the context lives (for messages).
    pub(crate) fn dir(&self) -> &std::path::Path {
        match self {
            Served::Pairwise(d) => &d.dir,
            Served::Group(g) => &g.dir,
        }
    }

    /// Persists a new sequence-number reservation when one is due (before a Partial IV of ours is used).
    pub(crate) fn reserve(&mut self) -> Result<(), Error> {
        match self {
            Served::Pairwise(d) => d.reserve(),
            Served::Group(g) => g.reserve(),
        }
    }

    /// The longest plaintext one protected message of this context holds ([`crate::Aead::max_plaintext`]).
    pub(crate) fn max_plaintext(&self) -> usize {
        match self {
            Served::Pairwise(d) => d.context.params().aead.max_plaintext(),
            Served::Group(g) => {
                let p = g.context.params();
                p.aead.max_plaintext().min(p.group_enc.max_plaintext())
            }
        }
    }

    /// Whether the response needs a Partial IV of the server's own whatever the layer decides (a
    /// deterministic request's nonce is every member's: never reused).
    pub(crate) fn needs_own_piv(b: &Binding) -> bool {
        matches!(b, Binding::Group(g) if g.mode == crate::group::Mode::Deterministic)
    }

    pub(crate) fn protect_response(&mut self, b: &Binding, plain: &Plain, own_piv: bool) -> Result<Plain, Error> {
        match (self, b) {
            (Served::Pairwise(d), Binding::Pairwise(b)) => d.context.protect_response(b, plain, own_piv),
            (Served::Group(g), Binding::Group(b)) => g.context.protect_response(b, plain, own_piv),
            _ => Err(Error::Internal("a binding of another kind of context")),
        }
    }
}
