//! Entities that follow a Resource Directory (issue 32): [`Follows`], one observation of an RD resource
//! lookup (`GET /rd-lookup/res?<fromRd>`, RFC 9176 §6, Observe=0) per entity whose profile has `fromRd`,
//! and the EM's behaviour on each result: the members that appeared are added and those that left are
//! removed through an update flow of its own (no client; a multicast entity's new members join its group
//! and the removed ones leave it, as in any update), and the entity's observers are told.
//!
//! The observation is a client exchange the EM issues through its [`Context`], as its member requests
//! are. A lost observation never loses the entity: a failure is retried with backoff ([`RETRY_FIRST`]
//! doubling to [`RETRY_MAX`]), and a result is taken afresh once it is older than its Max-Age (plus
//! [`REFRESH_SLACK`]), so a directory that restarted, or one that does not notify, is followed anyway.
//! A result larger than [`EmConfig::rd_max_members`] is cut (WARN, and a note shown with the profile).
//! Only the manager (or the only worker) follows; replicas take its table.
//!
//! `impl Follows` matches the follows against the table, registers the observations and takes their
//! results; applying a result to its entity is an update flow, so that step is `impl EntityManager`.
//!
//! Owns: the follow table, its observations and timers, and the notes. Must never: grow an entity past its
//! bound, change an entity while another flow runs on it (the result waits), or keep an observation whose
//! entity stopped following.

use super::owners::Owner;
use super::owners::Owners;
use super::{bad, Action, Entity, EntityManager, Flow, Stage};
use crate::profile::Profile;
use crate::store::StoredEntity;
use crate::uri;
use crate::uri::MemberUri;
use corral_proto::wire::{Code, ContentFormat, OptionNumber, OBSERVE_REGISTER};
use corral_proto::{Context, Duration, Instant, Outcome, Request, RequestId, SendParams};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::SocketAddr;
use tracing::{debug, info, warn};

/// The first retry after a failed lookup.
pub const RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest pause between retries.
pub const RETRY_MAX: Duration = Duration::from_secs(60);
/// A result is taken afresh this long after its Max-Age ran out without a notification.
pub const REFRESH_SLACK: Duration = Duration::from_secs(5);
/// The lookup resource of a directory named without a path (RFC 9176's usual `/rd-lookup/res`).
const LOOKUP_PATH: [&str; 2] = ["rd-lookup", "res"];

/// Where a follow looks: the directory's address, the lookup resource and the query.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Lookup {
    addr: SocketAddr,
    path: Vec<String>,
    query: String,
}

/// The observation of one entity's lookup.
#[derive(Debug)]
struct Follow {
    lookup: Option<Lookup>,
    /// The observation running, if any.
    rid: Option<RequestId>,
    /// When to register (again): at once, after a failure (backoff), or when the result went stale.
    wake: Option<Instant>,
    backoff: Duration,
    /// The latest result not yet applied (the entity was busy when it came).
    pending: Option<Vec<String>>,
    /// What shows with the profile: the result was cut, members were skipped, or the lookup fails.
    note: Option<String>,
}

/// The entities that follow a directory, by name.
#[derive(Debug, Default)]
pub(super) struct Follows {
    by_name: BTreeMap<String, Follow>,
    /// The entity table changed: the follows are matched against it at the next input.
    dirty: bool,
}

impl Follows {
    /// Entities changed (loaded, created, updated, deleted): match the follows against them.
    pub(super) fn touch(&mut self) {
        self.dirty = true;
    }

    pub(super) fn next_wake(&self) -> Option<Instant> {
        if self.dirty {
            return Some(Instant::ZERO);
        }
        self.by_name.values().filter_map(|f| f.wake).min()
    }

    /// The note shown with entity `name`'s profile, if any.
    pub(super) fn note(&self, name: &str) -> Option<&str> {
        self.by_name.get(name).and_then(|f| f.note.as_deref())
    }

    /// How many entities follow a directory.
    pub(super) fn len(&self) -> usize {
        self.by_name.len()
    }
}

/// The members a lookup result names: the targets of its links (absolute URIs, RFC 9176 §6), each once,
/// in the directory's order, at most `limit`; and a note when some were left out.
pub fn members_from_lookup(text: &str, limit: usize) -> Result<(Vec<String>, Option<String>), String> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut total = 0usize;
    for link in corral_proto::wire::link_format::parse(text) {
        let link = link.map_err(|e| format!("the lookup result is not link-format: {e}"))?;
        let target = link.target().trim().to_string();
        if !seen.insert(target.clone()) {
            continue;
        }
        total += 1;
        if out.len() < limit {
            out.push(target);
        }
    }
    let note = (total > out.len()).then(|| {
        format!("the directory lists {total} members; the first {limit} are followed (the entity's member limit)")
    });
    Ok((out, note))
}

impl Follows {
    /// Where entity `name`'s profile says to look, or why it cannot.
    fn lookup_of(profile: &Profile, default_rd: Option<SocketAddr>) -> Result<Option<Lookup>, String> {
        let Some(query) = profile.from_rd.clone() else { return Ok(None) };
        let (addr, path) = match &profile.rd {
            Some(text) => match uri::parse(text) {
                Ok(MemberUri::Coap { addr, path, .. }) => (addr, path),
                Ok(MemberUri::Relative { .. }) => return Err(format!("rd {text}: give coap://HOST[:PORT]")),
                Err(e) => return Err(format!("rd {text}: {e}")),
            },
            None => match default_rd {
                Some(addr) => (addr, Vec::new()),
                None => {
                    return Err("no directory: give rd (--rd coap://HOST:PORT), or run the gateway with --rd".into())
                }
            },
        };
        let path = if path.is_empty() { LOOKUP_PATH.iter().map(|s| s.to_string()).collect() } else { path };
        Ok(Some(Lookup { addr, path, query }))
    }

    /// Matches the follows against the entity table: a new or changed lookup is (re-)registered at once,
    /// the follow of an entity that is gone or follows no more ends.
    fn reconcile(
        &mut self,
        (cx, owners): (&mut Context<'_>, &mut Owners),
        entities: &BTreeMap<String, Entity>,
        default_rd: Option<SocketAddr>,
    ) {
        let now = cx.now();
        let mut wanted: BTreeMap<String, Result<Option<Lookup>, String>> = BTreeMap::new();
        for (name, e) in entities {
            if e.stored.profile.from_rd.is_some() {
                wanted.insert(name.clone(), Self::lookup_of(&e.stored.profile, default_rd));
            }
        }
        let gone: Vec<String> = self.by_name.keys().filter(|n| !wanted.contains_key(*n)).cloned().collect();
        for name in gone {
            if let Some(f) = self.by_name.remove(&name) {
                if let Some(rid) = f.rid {
                    owners.remove(rid);
                    cx.deregister(rid);
                }
                debug!(entity = %name, "entity no longer follows a directory");
            }
        }
        for (name, lookup) in wanted {
            let (lookup, note) = match lookup {
                Ok(l) => (l, None),
                Err(why) => (None, Some(why)),
            };
            if let Some(f) = self.by_name.get(&name) {
                if f.lookup == lookup {
                    continue;
                }
            }
            if let Some(old) = self.by_name.remove(&name) {
                if let Some(rid) = old.rid {
                    owners.remove(rid);
                    cx.deregister(rid);
                }
            }
            if let Some(why) = &note {
                warn!(entity = %name, why = %why, "entity cannot follow its directory");
            }
            let wake = lookup.is_some().then_some(now);
            let f = Follow { lookup, rid: None, wake, backoff: RETRY_FIRST, pending: None, note };
            self.by_name.insert(name, f);
        }
    }

    /// Registers the observations that are due (new, retried, or stale).
    fn due(&mut self, cx: &mut Context<'_>, owners: &mut Owners) {
        let now = cx.now();
        let due: Vec<String> =
            self.by_name.iter().filter(|(_, f)| f.wake.is_some_and(|w| w <= now)).map(|(n, _)| n.clone()).collect();
        for name in due {
            let Some(f) = self.by_name.get_mut(&name) else { continue };
            f.wake = None;
            if let Some(rid) = f.rid.take() {
                owners.remove(rid);
                cx.cancel(rid);
            }
            let Some(l) = f.lookup.clone() else { continue };
            let mut req = Request::new(Code::GET);
            for s in &l.path {
                req.options.push_str(OptionNumber::URI_PATH, s);
            }
            for q in l.query.split('&') {
                req.options.push_str(OptionNumber::URI_QUERY, q);
            }
            req.options.set_uint(OptionNumber::OBSERVE, u64::from(OBSERVE_REGISTER));
            req.options.set_uint(OptionNumber::ACCEPT, u64::from(ContentFormat::LINK_FORMAT.0));
            match cx.request(l.addr, req, SendParams::default()) {
                Ok(rid) => {
                    debug!(entity = %name, rd = %l.addr, query = %l.query, "observing the directory's lookup");
                    f.rid = Some(rid);
                    owners.insert(rid, Owner::Follow(name));
                }
                Err(e) => {
                    let why = format!("cannot ask the directory {}: {e}", l.addr);
                    self.retry(now, &name, why);
                }
            }
        }
    }

    /// The lookup of `name` failed: retried after the backoff, which doubles up to [`RETRY_MAX`].
    fn retry(&mut self, now: Instant, name: &str, why: String) {
        let Some(f) = self.by_name.get_mut(name) else { return };
        if f.note.as_deref() != Some(why.as_str()) {
            info!(entity = %name, why = %why, retry_in_s = f.backoff.as_secs(), "directory lookup failed; retrying");
        }
        f.note = Some(why);
        f.wake = Some(now + f.backoff);
        f.backoff = f.backoff.saturating_mul(2).min(RETRY_MAX);
    }

    /// A response or notification of the observation `rid` of entity `name`'s lookup; a result beyond
    /// `limit` members is cut.
    pub(super) fn response(
        &mut self,
        (cx, owners): (&mut Context<'_>, &mut Owners),
        (rid, name): (RequestId, String),
        outcome: &Outcome,
        limit: usize,
    ) {
        let now = cx.now();
        let active = cx.endpoint().is_active(rid);
        if !active {
            owners.remove(rid);
            if let Some(f) = self.by_name.get_mut(&name) {
                f.rid = f.rid.filter(|r| *r != rid);
            }
        }
        let result = outcome
            .content_text("the directory")
            .map_err(|e| e.to_string())
            .and_then(|(text, max_age)| members_from_lookup(text, limit).map(|r| (r, max_age)));
        match result {
            Ok(((members, cut), max_age)) => {
                let Some(f) = self.by_name.get_mut(&name) else { return };
                if let Some(note) = &cut {
                    if f.note.as_ref() != Some(note) {
                        warn!(entity = %name, limit, "directory lookup larger than the entity's member limit; cut");
                    }
                }
                f.note = cut;
                f.backoff = RETRY_FIRST;
                f.pending = Some(members);
                // Taken afresh once stale: a directory that restarted (and forgot its observers), or one
                // that does not notify, is followed all the same.
                f.wake = Some(now + max_age + REFRESH_SLACK);
            }
            Err(why) => {
                if active {
                    cx.cancel(rid);
                    owners.remove(rid);
                    if let Some(f) = self.by_name.get_mut(&name) {
                        f.rid = None;
                    }
                }
                self.retry(now, &name, why);
            }
        }
    }

    /// What follows an input: the follows are matched against a changed table (`replica`: this worker
    /// follows nothing, its manager does) and due observations are registered. Returns the results that
    /// wait, for entities no flow is changing (`busy`), for the Entity Manager to apply.
    pub(super) fn tick(
        &mut self,
        (cx, owners): (&mut Context<'_>, &mut Owners),
        entities: &BTreeMap<String, Entity>,
        (default_rd, replica): (Option<SocketAddr>, bool),
        busy: &HashSet<String>,
    ) -> Vec<(String, Vec<String>)> {
        if std::mem::take(&mut self.dirty) && !replica {
            self.reconcile((cx, owners), entities, default_rd);
        }
        if self.by_name.is_empty() {
            return Vec::new();
        }
        self.due(cx, owners);
        self.by_name
            .iter_mut()
            .filter(|(n, f)| f.pending.is_some() && !busy.contains(*n))
            .filter_map(|(n, f)| Some((n.clone(), f.pending.take()?)))
            .collect()
    }

    /// The note shown with entity `name`'s profile becomes `note`; `log` runs when it is new.
    pub(super) fn set_note(&mut self, name: &str, note: String, log: impl FnOnce()) {
        if let Some(f) = self.by_name.get_mut(name) {
            if f.note.as_ref() != Some(&note) {
                log();
            }
            f.note = Some(note);
        }
    }

    /// An update flow of a follow failed (a member did not join, the store refused): the lookup is taken
    /// again after the backoff, so the entity catches up.
    pub(super) fn failed(&mut self, now: Instant, name: &str, why: &str) {
        if self.by_name.contains_key(name) {
            self.retry(now, name, format!("the directory's members are not applied yet: {why}"));
        }
    }
}

impl EntityManager {
    /// Makes entity `name`'s members `members` (a lookup result): an update flow without a client when
    /// they differ. Members the EM cannot use (not an IP literal, outside the member policy) are skipped
    /// and named in the note.
    pub(super) fn follow_apply(&mut self, cx: &mut Context<'_>, name: &str, members: Vec<String>) {
        let Some(ent) = self.entities.get(name) else { return };
        let old = ent.stored.clone();
        let (items, skipped) = self.config.usable_members(members);
        let same = {
            let a: BTreeSet<&String> = old.profile.er.iter().collect();
            let b: BTreeSet<&String> = items.iter().map(|i| &i.label).collect();
            a == b
        };
        if !skipped.is_empty() {
            let note = format!("members of the directory not followed: {}", skipped.join(", "));
            let n = skipped.len();
            self.follows.set_note(
                name,
                note,
                || warn!(entity = %name, skipped = n, "directory members the EM cannot use"),
            );
        }
        if same {
            return;
        }
        let mut profile = old.profile.clone();
        profile.er = items.iter().map(|i| i.label.clone()).collect();
        if profile.enr.is_some_and(|n| n as usize > profile.er.len()) {
            // A fixed enr the directory's result no longer reaches: every member, until it does again.
            profile.enr = None;
        }
        let checks = profile
            .check()
            .map_err(|e| bad(e.to_string()))
            .and_then(|_| self.entities.check_members(&self.config, name, &profile, &items))
            .and_then(|_| self.entities.check_budget(&self.config, name, &profile, &items))
            .and_then(|_| self.entities.check_store(&self.config, name, &profile));
        if let Err((_, why)) = checks {
            warn!(entity = %name, why = %why, "directory lookup result not applied");
            self.follows.set_note(name, format!("the directory's members are not applied: {why}"), || ());
            return;
        }
        let joined = super::flows::joined_kept(&old, &profile.er);
        info!(entity = %name, members = items.len(), was = old.profile.er.len(), "members follow the directory");
        let new = StoredEntity { name: name.to_string(), profile, group: old.group, joined, pending: false };
        let mut flow = Flow::new(
            Action::Update,
            name.to_string(),
            None,
            None,
            Some(old),
            Some(new),
            items.into(),
            Stage::Validating,
        );
        // The directory vouches for its members: no validation round; those that do not answer show as
        // unreachable at their first use, as offline members do.
        flow.allow_offline = true;
        flow.offline = self.entities.unreachable_kept(name, &flow.items);
        self.busy.insert(name.to_string());
        self.after_validation(cx, flow);
    }

    /// How many entities follow a directory.
    pub fn following(&self) -> usize {
        self.follows.len()
    }
}

#[cfg(test)]
mod tests {
    use super::members_from_lookup;

    #[test]
    fn a_lookup_result_names_each_member_once_in_the_directorys_order() {
        let text = "<coap://127.0.0.2:5683/s/t>;rt=temperature;anchor=\"coap://127.0.0.2:5683\",\
                    <coap://127.0.0.3:5683/s/t>;rt=temperature,<coap://127.0.0.2:5683/s/t>;rt=temperature";
        let (m, note) = members_from_lookup(text, 10).unwrap();
        assert_eq!(m, vec!["coap://127.0.0.2:5683/s/t", "coap://127.0.0.3:5683/s/t"]);
        assert_eq!(note, None);
        assert_eq!(members_from_lookup("", 10).unwrap(), (Vec::new(), None), "nobody registered: no members");
    }

    #[test]
    fn a_lookup_result_past_the_member_limit_is_cut_with_a_note() {
        let text: Vec<String> = (1..=5).map(|i| format!("<coap://10.0.0.{i}/s/t>")).collect();
        let (m, note) = members_from_lookup(&text.join(","), 3).unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m[2], "coap://10.0.0.3/s/t");
        let note = note.expect("a cut result says so");
        assert!(note.contains("5 members") && note.contains("first 3"), "{note}");
    }

    #[test]
    fn a_lookup_result_that_is_not_link_format_is_an_error() {
        assert!(members_from_lookup("<coap://10.0.0.1/s", 3).is_err());
    }
}
