//! The directory's changes whose writes are in flight (see [`crate::store`]): each is parked under its
//! effect's id with the request that waits for it and what undoes it, until its completion comes back.
//!
//! Owns: the parked changes and the registrations they hold. A change is made in memory when its request
//! arrives (so that the directory's bounds and names are checked against every change, made or in flight)
//! and undone if its write fails; while its write is in flight, no other change may touch the same
//! registration (by id or by name): the undo restores what was there before, which a second change
//! would have built on. Such a request is answered 5.03 with Max-Age 1 — a write takes milliseconds, and a
//! device refreshes every few hours. Lookups may see a change while its write is in flight; its
//! observers are told once it is stored.
//!
//! Bounded: a registration holds at most one parked change and an expiry one more, so there are at most
//! twice the directory's registration bound.

use crate::directory::Registration;
use corral_proto::{EffectId, InboundId};
use std::collections::{HashMap, HashSet};

/// A change made in memory whose write is in flight, and what undoes it.
pub(crate) enum Change {
    /// A registration (full or simple): `before` is what had its name, if anything.
    Registered { before: Option<Registration>, id: String, simple: bool },
    /// An update; `visible`: the lookups' view of it changed.
    Updated { before: Registration, visible: bool },
    /// A removal by its owner.
    Removed(Registration),
    /// Registrations whose lifetime ended: nothing waits, nothing is undone (a row left behind is dropped
    /// as expired at the next start).
    Expired,
}

pub(crate) struct Parked {
    /// The request answered when the write is done (none for an expiry).
    pub(crate) inbound: Option<InboundId>,
    pub(crate) change: Change,
    keys: Vec<String>,
}

#[derive(Default)]
pub(crate) struct Writes {
    parked: HashMap<EffectId, Parked>,
    /// The ids and names of registrations with a change in flight.
    busy: HashSet<String>,
}

fn id_key(id: &str) -> String {
    format!("id {id}")
}

fn name_key(ep: &str, d: Option<&str>) -> String {
    format!("name {ep}\u{0}{}", d.unwrap_or("\u{0}"))
}

impl Writes {
    /// Whether a change of the registration `id`, or of the name `(ep, d)`, is in flight.
    pub(crate) fn busy(&self, id: Option<&str>, name: Option<(&str, Option<&str>)>) -> bool {
        id.is_some_and(|id| self.busy.contains(&id_key(id)))
            || name.is_some_and(|(ep, d)| self.busy.contains(&name_key(ep, d)))
    }

    /// Parks `change` under effect `id`; `holds` is the registration it changes (its id and name are
    /// busy until the change is unparked).
    pub(crate) fn park(
        &mut self,
        id: EffectId,
        inbound: Option<InboundId>,
        change: Change,
        holds: Option<&Registration>,
    ) {
        let keys = match holds {
            Some(r) => vec![id_key(&r.id), name_key(&r.ep, r.d.as_deref())],
            None => Vec::new(),
        };
        self.busy.extend(keys.iter().cloned());
        self.parked.insert(id, Parked { inbound, change, keys });
    }

    /// The change parked under effect `id`, its registration free again; `None` for an unknown id.
    pub(crate) fn unpark(&mut self, id: EffectId) -> Option<Parked> {
        let p = self.parked.remove(&id)?;
        for k in &p.keys {
            self.busy.remove(k);
        }
        Some(p)
    }

    /// How many writes are in flight.
    pub(crate) fn len(&self) -> usize {
        self.parked.len()
    }
}
