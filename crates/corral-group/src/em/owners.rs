//! Who sent each request in flight: [`Owners`], one table from a request's id to its [`Owner`], the part
//! that handles its responses and notifications. A response finds its owner with one lookup, rather than
//! being offered to each part in turn (see `handle_response` in [`super`]).
//!
//! A watch's first round is one request with two owners: the use job that asks the member, and the watch
//! whose member observation that request registers ([`Owner::Job`] with `watch`). When the job lets the
//! request go, the observation stays the watch's; when the watch ends first, the request stays the job's.
//!
//! Owns: the request table. Must never: keep a request no part owns any more (each part gives its
//! requests back when they end or it cancels them, so the table is bounded by the requests in flight).

use super::HashMap;
use corral_proto::RequestId;

/// A use job's id (the jobs' own numbering; named here so that the table below the jobs need not know
/// them).
pub(super) type JobId = u64;

/// The part a request belongs to, with what that part needs to find its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Owner {
    /// Job `job`'s member request for `slot` (`None`: its multicast request); `watch`: the request also
    /// registers member `slot`'s observation for that watch (the watch's first round).
    Job { job: JobId, slot: Option<usize>, watch: Option<String> },
    /// A watch's member observation (the watch's key and the member's slot), the job that asked done.
    Watch { key: String, slot: usize },
    /// The observation of entity `name`'s directory lookup.
    Follow(String),
    /// The registration of entity `name`'s group in the directory.
    Announce(String),
    /// The removal of a group's registration from the directory (its answer is only logged).
    Unannounce,
}

/// The requests in flight, by id.
#[derive(Debug, Default)]
pub(super) struct Owners(HashMap<RequestId, Owner>);

impl Owners {
    /// The owner of `rid`, if a part still owns it.
    pub(super) fn get(&self, rid: RequestId) -> Option<&Owner> {
        self.0.get(&rid)
    }

    pub(super) fn insert(&mut self, rid: RequestId, owner: Owner) {
        self.0.insert(rid, owner);
    }

    pub(super) fn remove(&mut self, rid: RequestId) -> Option<Owner> {
        self.0.remove(&rid)
    }

    /// Whether `rid` registers a watch's member observation (it outlives the job that started it).
    pub(super) fn observes(&self, rid: RequestId) -> bool {
        matches!(self.0.get(&rid), Some(Owner::Job { watch: Some(_), .. } | Owner::Watch { .. }))
    }

    /// `rid` registers member `slot`'s observation for watch `key` from now on.
    pub(super) fn watch(&mut self, rid: RequestId, key: &str, slot: usize) {
        match self.0.get_mut(&rid) {
            Some(Owner::Job { watch, .. }) => *watch = Some(key.to_string()),
            _ => {
                self.0.insert(rid, Owner::Watch { key: key.to_string(), slot });
            }
        }
    }

    /// The job that sent `rid` lets it go: a watch's observation stays the watch's.
    pub(super) fn job_done_with(&mut self, rid: RequestId) {
        match self.0.remove(&rid) {
            Some(Owner::Job { slot: Some(slot), watch: Some(key), .. }) => {
                self.0.insert(rid, Owner::Watch { key, slot });
            }
            Some(other @ (Owner::Follow(_) | Owner::Announce(_) | Owner::Unannounce | Owner::Watch { .. })) => {
                self.0.insert(rid, other); // not the job's to give back
            }
            _ => {}
        }
    }

    /// The watch that observes through `rid` lets it go: a job's request stays the job's.
    pub(super) fn watch_done_with(&mut self, rid: RequestId) {
        match self.0.get_mut(&rid) {
            Some(Owner::Job { watch, .. }) => *watch = None,
            Some(Owner::Watch { .. }) => {
                self.0.remove(&rid);
            }
            _ => {}
        }
    }

    /// Takes job `id`'s multicast request(s) out of the table and returns them, for the caller to cancel.
    pub(super) fn take_multicast(&mut self, id: JobId) -> Vec<RequestId> {
        let mine: Vec<RequestId> = self
            .0
            .iter()
            .filter(|(_, o)| matches!(o, Owner::Job { job, slot: None, .. } if *job == id))
            .map(|(r, _)| *r)
            .collect();
        for rid in &mine {
            self.0.remove(rid);
        }
        mine
    }

    /// Requests in flight.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rid(n: usize) -> RequestId {
        crate::em::stats::tests::rids(n + 1)[n]
    }

    #[test]
    fn a_first_round_request_stays_the_watchs_when_the_job_lets_it_go_and_the_jobs_when_the_watch_ends() {
        let mut o = Owners::default();
        o.insert(rid(1), Owner::Job { job: 7, slot: Some(2), watch: None });
        assert!(!o.observes(rid(1)), "a plain member request observes nothing");
        o.watch(rid(1), "lamps", 2);
        assert!(o.observes(rid(1)));
        o.job_done_with(rid(1));
        assert_eq!(o.get(rid(1)), Some(&Owner::Watch { key: "lamps".into(), slot: 2 }));
        o.watch_done_with(rid(1));
        assert_eq!(o.len(), 0, "nobody owns it any more");

        o.insert(rid(2), Owner::Job { job: 7, slot: Some(0), watch: Some("lamps".into()) });
        o.watch_done_with(rid(2));
        assert_eq!(o.get(rid(2)), Some(&Owner::Job { job: 7, slot: Some(0), watch: None }));
        o.job_done_with(rid(2));
        assert_eq!(o.len(), 0);
    }

    #[test]
    fn a_jobs_multicast_requests_are_taken_and_no_other_request() {
        let mut o = Owners::default();
        o.insert(rid(1), Owner::Job { job: 7, slot: None, watch: None });
        o.insert(rid(2), Owner::Job { job: 7, slot: Some(0), watch: None });
        o.insert(rid(3), Owner::Job { job: 8, slot: None, watch: None });
        o.insert(rid(4), Owner::Follow("e1".into()));
        assert_eq!(o.take_multicast(7), vec![rid(1)]);
        assert_eq!(o.len(), 3);
        o.job_done_with(rid(4));
        assert_eq!(o.get(rid(4)), Some(&Owner::Follow("e1".into())), "a job gives back only its own");
    }
}
