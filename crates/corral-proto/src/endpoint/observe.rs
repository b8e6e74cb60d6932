//! Observe (RFC 7641), the parts that do not depend on the transport.
//!
//! Server: [`Observers`] keeps registrations keyed by (endpoint, token) — a re-registration replaces —
//! indexed by resource path, with limits per resource and in total shared fairly (unverified observers
//! hold at most half and give way to verified ones), the 24-bit sequence numbers, the policy that decides
//! when a notification must be confirmable (at least every 24 h, RFC 7641 §4.5; every 30 s to an observer
//! that has not proved its address), and the observations the endpoint ended, for the services.
//! Rendering a notification is the application's ordinary GET handler run again; the endpoint sends it.
//!
//! Client: [`Freshness`] applies the rule of RFC 7641 §3.4 so that reordered notifications are dropped.

use super::Map;
use crate::message::Request;
use crate::time::{Duration, Instant};
use corral_wire::{observe_is_fresher, Token, OBSERVE_MODULUS};
use std::net::SocketAddr;

/// When notifications are sent as CON, and how many observers are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObservePolicy {
    /// A CON notification at least this often per observer (RFC 7641 §4.5: at least every 24 hours), so that
    /// an observer that went away is noticed and removed.
    pub max_con_interval: Duration,
    /// Also every n-th notification is CON (0: only by interval, or when the application asks).
    pub con_every: u32,
    pub max_observers: usize,
    pub max_observers_per_resource: usize,
    /// A CON notification at least this often to an observer that has not proved its address (RFC 7641
    /// §4.5), so that a registration in a spoofed victim's name ends within a minute or two (unacknowledged,
    /// it is dropped) instead of living 24 hours.
    pub unverified_con_interval: Duration,
}

impl Default for ObservePolicy {
    fn default() -> Self {
        ObservePolicy {
            max_con_interval: Duration::from_secs(24 * 3600),
            con_every: 0,
            max_observers: 1024,
            max_observers_per_resource: 256,
            unverified_con_interval: Duration::from_secs(30),
        }
    }
}

/// Identifies an observation on the server: the observer's address and token.
pub(crate) type ObserverKey = (SocketAddr, Token);

pub(crate) struct Observer {
    pub(crate) path: String,
    /// The registration request, replayed to the handler to render each notification.
    pub(crate) request: Request,
    seq: u32,
    last_con: Instant,
    sent: u32,
    /// The message ID of a CON notification still being retransmitted.
    pub(crate) pending: Option<corral_wire::MessageId>,
    /// The newest notification, rendered while `pending` was in flight (RFC 7641 §4.5.2): sent when that
    /// one is acknowledged, or in its place at its next retransmission. At most one per observer.
    queued: Option<(corral_wire::MessageId, Vec<u8>)>,
    /// The observer proved its address (it acknowledged or answered us, or returned an Echo value).
    verified: bool,
}

/// Why a registration was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Every slot is a verified observer's: the response goes out without Observe (RFC 7641 §4.1).
    Full,
    /// Observers that have not proved their address already hold their half of the slots: the registration
    /// is answered 4.01 with an Echo value (RFC 9175 §2.4), which a real client returns and a spoofer
    /// cannot, so spoofed registrations cannot starve real observers.
    Unverified,
}

/// Observations, fairly shared: verified observers first. Those that have not proved their address hold
/// at most half the slots (of a resource, and in total) and are the first to give way to a verified one.
/// Every observation the endpoint ends by itself (RST, unacknowledged or bounced notification,
/// deregistration, eviction, a closed connection) is remembered for [`Observers::pop_gone`], so that the
/// service that kept state per observer hears of it; [`Observers::remove_path`] (asked for by the
/// service) is not.
pub(crate) struct Observers {
    by_key: Map<ObserverKey, Observer>,
    by_path: Map<String, Vec<ObserverKey>>,
    gone: std::collections::VecDeque<(String, ObserverKey)>,
}

impl Observers {
    pub(crate) fn new(seed: u64) -> Observers {
        Observers { by_key: super::new_map(seed), by_path: super::new_map(seed), gone: Default::default() }
    }

    /// An observation the endpoint ended, for the service's sake (see the type's docs).
    pub(crate) fn pop_gone(&mut self) -> Option<(String, ObserverKey)> {
        self.gone.pop_front()
    }

    /// The observer `peer` proved its address: its observations are verified ones from now on.
    pub(crate) fn verify_peer(&mut self, peer: SocketAddr) {
        for (_, o) in self.by_key.iter_mut().filter(|((a, _), _)| *a == peer) {
            o.verified = true;
        }
    }

    /// Whether the observer `key` has proved its address.
    pub(crate) fn is_verified(&self, key: &ObserverKey) -> bool {
        self.by_key.get(key).is_some_and(|o| o.verified)
    }

    pub(crate) fn len(&self) -> usize {
        self.by_key.len()
    }

    pub(crate) fn get(&self, key: &ObserverKey) -> Option<&Observer> {
        self.by_key.get(key)
    }

    pub(crate) fn count_for(&self, path: &str) -> usize {
        self.by_path.get(path).map_or(0, Vec::len)
    }

    /// Adds or replaces the observation `key`; returns the sequence number for the first response. A
    /// full table makes room by dropping its oldest unverified observation, for a verified newcomer (see
    /// the type's docs).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn register(
        &mut self,
        now: Instant,
        policy: &ObservePolicy,
        key: ObserverKey,
        path: &str,
        request: Request,
        seq_start: u32,
        verified: bool,
    ) -> Result<u32, Refused> {
        let replacing = self.by_key.get(&key).is_some_and(|o| o.path == path);
        if !replacing {
            self.remove(&key);
            let per_resource = policy.max_observers_per_resource;
            if !verified {
                let here = self.by_path.get(path).map_or(0, |l| l.iter().filter(|k| !self.is_verified(k)).count());
                let total = self.by_key.values().filter(|o| !o.verified).count();
                if here * 2 >= per_resource || total * 2 >= policy.max_observers {
                    return Err(Refused::Unverified);
                }
            }
            if self.count_for(path) >= per_resource {
                let oldest = self.by_path.get(path).and_then(|l| l.iter().find(|k| !self.is_verified(k)).copied());
                match oldest {
                    Some(k) if verified => self.evict(&k),
                    _ => return Err(Refused::Full),
                }
            }
            if self.by_key.len() >= policy.max_observers {
                let oldest = self
                    .by_path
                    .values()
                    .flat_map(|l| l.first().filter(|k| !self.is_verified(k)))
                    .min_by_key(|k| self.by_key.get(k).map(|o| o.last_con))
                    .copied();
                match oldest {
                    Some(k) if verified => self.evict(&k),
                    _ => return Err(Refused::Full),
                }
            }
            self.by_path.entry(path.to_string()).or_default().push(key);
        }
        let seq = seq_start % OBSERVE_MODULUS;
        let verified = verified || self.is_verified(&key);
        self.by_key.insert(
            key,
            Observer {
                path: path.to_string(),
                request,
                seq,
                last_con: now,
                sent: 0,
                pending: None,
                queued: None,
                verified,
            },
        );
        Ok(seq)
    }

    fn evict(&mut self, key: &ObserverKey) {
        tracing::debug!(peer = %key.0, "unverified observer dropped for a verified one");
        self.remove(key);
    }

    /// Ends the observation `key` (the endpoint's decision: see the type's docs).
    pub(crate) fn remove(&mut self, key: &ObserverKey) -> bool {
        let Some(o) = self.by_key.remove(key) else { return false };
        if let Some(list) = self.by_path.get_mut(&o.path) {
            list.retain(|k| k != key);
            if list.is_empty() {
                self.by_path.remove(&o.path);
            }
        }
        // Bounded by the table: at most one entry per observation that ever was, drained by the events.
        if self.gone.len() < 4096 {
            self.gone.push_back((o.path, *key));
        }
        true
    }

    /// Whether `peer` observes anything.
    pub(crate) fn has_peer(&self, peer: SocketAddr) -> bool {
        self.by_key.keys().any(|(a, _)| *a == peer)
    }

    /// Forgets every observation of one peer (RFC 8323 §7.4: a closed connection ends its observations).
    pub(crate) fn remove_peer(&mut self, peer: SocketAddr) -> usize {
        let keys: Vec<ObserverKey> = self.by_key.keys().filter(|(a, _)| *a == peer).copied().collect();
        keys.iter().filter(|k| self.remove(k)).count()
    }

    /// Forgets every observation of `path` without a last notification, as a server that reboots does.
    pub(crate) fn remove_path(&mut self, path: &str) -> usize {
        let keys = self.by_path.remove(path).unwrap_or_default();
        keys.iter().filter(|k| self.by_key.remove(k).is_some()).count()
    }

    /// Observers of `path`, in registration order.
    pub(crate) fn keys_for(&self, path: &str) -> Vec<ObserverKey> {
        self.by_path.get(path).cloned().unwrap_or_default()
    }

    /// Decides the type of the next notification: CON when asked, when the interval or the count says so.
    /// An observer that has not proved its address gets CON unless NON is asked for (its ACK is the proof,
    /// after which the reflection bound no longer holds its notifications back), and CON at least every
    /// [`ObservePolicy::unverified_con_interval`] whatever was asked.
    pub(crate) fn wants_con(
        &self,
        key: &ObserverKey,
        now: Instant,
        policy: &ObservePolicy,
        asked: Option<bool>,
    ) -> bool {
        let Some(o) = self.by_key.get(key) else { return false };
        let overdue = now.saturating_since(o.last_con) >= policy.unverified_con_interval;
        if !o.verified && (asked != Some(false) || overdue) {
            return true; // an observer that never proves its address does not stay
        }
        if let Some(a) = asked {
            return a;
        }
        now.saturating_since(o.last_con) >= policy.max_con_interval
            || (policy.con_every > 0 && (o.sent + 1) % policy.con_every == 0)
    }

    pub(crate) fn set_pending(&mut self, key: &ObserverKey, mid: Option<corral_wire::MessageId>) {
        if let Some(o) = self.by_key.get_mut(key) {
            o.pending = mid;
        }
    }

    /// Keeps `bytes` (a CON notification with message ID `mid`) until the one in flight is acknowledged or
    /// retransmitted; a newer one replaces it.
    pub(crate) fn queue(&mut self, key: &ObserverKey, mid: corral_wire::MessageId, bytes: Vec<u8>) {
        if let Some(o) = self.by_key.get_mut(key) {
            o.queued = Some((mid, bytes));
        }
    }

    /// The notification waiting behind the one in flight, if any.
    pub(crate) fn take_queued(&mut self, key: &ObserverKey) -> Option<(corral_wire::MessageId, Vec<u8>)> {
        self.by_key.get_mut(key)?.queued.take()
    }

    /// Advances the sequence number for a notification about to be sent and returns it.
    pub(crate) fn next_seq(&mut self, key: &ObserverKey, now: Instant, con: bool) -> Option<u32> {
        let o = self.by_key.get_mut(key)?;
        o.seq = (o.seq + 1) % OBSERVE_MODULUS;
        o.sent = o.sent.wrapping_add(1);
        if con {
            o.last_con = now;
        }
        Some(o.seq)
    }
}

/// The client's view of one observation: the freshest notification so far (RFC 7641 §3.4).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Freshness {
    last: Option<(u32, Instant)>,
}

impl Freshness {
    /// Whether a notification with `seq` arriving at `now` is newer than every one before; if so it becomes
    /// the reference. Over TCP (no reordering) the caller skips the check.
    pub(crate) fn accept(&mut self, seq: u32, now: Instant) -> bool {
        let fresh = match self.last {
            None => true,
            Some((v1, t1)) => observe_is_fresher(v1, t1.as_secs(), seq, now.as_secs()),
        };
        if fresh {
            self.last = Some((seq, now));
        }
        fresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u8) -> ObserverKey {
        (format!("10.0.0.{i}:5683").parse().unwrap(), Token::new(&[i]).unwrap())
    }

    #[test]
    fn register_replace_limits() {
        let mut o = Observers::new(1);
        let p = ObservePolicy { max_observers: 2, max_observers_per_resource: 1, ..ObservePolicy::default() };
        assert!(o.register(Instant::ZERO, &p, key(1), "/a", Request::get("a"), 5, true).is_ok());
        // Same key, same path: replaced, not duplicated.
        assert!(o.register(Instant::ZERO, &p, key(1), "/a", Request::get("a"), 9, true).is_ok());
        assert_eq!(o.len(), 1);
        assert_eq!(o.register(Instant::ZERO, &p, key(2), "/a", Request::get("a"), 0, true), Err(Refused::Full));
        assert!(o.register(Instant::ZERO, &p, key(2), "/b", Request::get("b"), 0, true).is_ok());
        assert_eq!(o.register(Instant::ZERO, &p, key(3), "/c", Request::get("c"), 0, true), Err(Refused::Full));
        assert!(o.remove(&key(1)));
        assert_eq!(o.keys_for("/a"), vec![]);
        assert_eq!(o.next_seq(&key(2), Instant::ZERO, false), Some(1));
    }

    #[test]
    fn con_at_least_every_interval() {
        let mut o = Observers::new(1);
        let p = ObservePolicy::default();
        o.register(Instant::ZERO, &p, key(1), "/a", Request::get("a"), 0, true).unwrap();
        assert!(!o.wants_con(&key(1), Instant::from_secs(3600), &p, None));
        assert!(o.wants_con(&key(1), Instant::from_secs(24 * 3600), &p, None));
        assert!(o.wants_con(&key(1), Instant::ZERO, &p, Some(true)));
    }

    #[test]
    fn unverified_observers_hold_half_the_slots_and_give_way_to_verified_ones() {
        let mut o = Observers::new(1);
        let p = ObservePolicy { max_observers_per_resource: 4, ..ObservePolicy::default() };
        let reg = |o: &mut Observers, i: u8, verified| {
            o.register(Instant::ZERO, &p, key(i), "/a", Request::get("a"), 0, verified)
        };
        assert!(reg(&mut o, 1, false).is_ok());
        assert!(reg(&mut o, 2, false).is_ok());
        assert_eq!(reg(&mut o, 3, false), Err(Refused::Unverified), "half the slots are unverified ones'");
        assert!(reg(&mut o, 4, true).is_ok());
        assert!(reg(&mut o, 5, true).is_ok());
        // Full: a verified newcomer takes the oldest unverified observer's slot; the endpoint tells.
        assert!(reg(&mut o, 6, true).is_ok());
        assert!(o.get(&key(1)).is_none() && o.get(&key(2)).is_some());
        assert_eq!(o.pop_gone(), Some(("/a".to_string(), key(1))));
        assert!(reg(&mut o, 7, true).is_ok());
        assert_eq!(reg(&mut o, 8, true), Err(Refused::Full), "every slot a verified observer's");
    }

    #[test]
    fn an_unverified_observer_gets_a_con_notification_now_and_then() {
        let mut o = Observers::new(1);
        let p = ObservePolicy::default();
        o.register(Instant::ZERO, &p, key(1), "/a", Request::get("a"), 0, false).unwrap();
        assert!(!o.wants_con(&key(1), Instant::from_secs(1), &p, Some(false)));
        assert!(o.wants_con(&key(1), Instant::from_secs(30), &p, Some(false)));
        o.verify_peer(key(1).0);
        assert!(!o.wants_con(&key(1), Instant::from_secs(30), &p, Some(false)));
    }

    #[test]
    fn freshness_drops_reordered() {
        let mut f = Freshness::default();
        assert!(f.accept(5, Instant::from_secs(1)));
        assert!(!f.accept(4, Instant::from_secs(2)));
        assert!(f.accept(6, Instant::from_secs(3)));
        assert!(f.accept(2, Instant::from_secs(200)), "more than 128 s later is fresh regardless");
    }
}
