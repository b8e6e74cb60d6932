//! The exchange quotas (see [`crate::policy::Budget`]): the member exchanges that uses in progress hold,
//! per client, per client address, per entity and in total, and the [`Hold`] each use keeps until it
//! gives its share back. A use reserves through `impl Quotas`, given the budget, the jobs (for when to
//! retry) and the counters.
//!
//! A client is its endpoint (address and port) when its source address is verified (it proved it, it is
//! on loopback or in a verified network, or it came over coaps://): several applications on one host, or
//! behind one NAT, each get their own quota, and all of them together the per-address ceiling. An
//! unverified source is its address alone — a spoofer who varies the port gets no more.
//!
//! Owns: the counters of held exchanges. Must never: let a counter outlive its holds (a counter that
//! reaches zero is forgotten, so a flood of clients leaves no state behind) or go below zero.

use super::stats::EmStats;
use super::HashMap;
use crate::policy::Budget;
use corral_proto::wire::{Code, OptionNumber};
use corral_proto::{Instant, Response};
use std::net::{IpAddr, SocketAddr};
use tracing::warn;

/// A use's hold on the quotas, released when its top-level job ends.
#[derive(Debug, Clone)]
pub(super) struct Hold {
    pub(super) client: Client,
    pub(super) entity: String,
    pub(super) amount: usize,
}

/// Whom a quota counts: a verified client's endpoint, or an unverified source's address (port 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Client(SocketAddr);

impl Client {
    /// The client that sent from `from`: its endpoint if `verified`, else its address.
    pub(super) fn new(from: SocketAddr, verified: bool) -> Client {
        let ip = crate::policy::canonical(from.ip());
        Client(SocketAddr::new(ip, if verified { from.port() } else { 0 }))
    }

    fn ip(self) -> IpAddr {
        self.0.ip()
    }
}

impl std::fmt::Display for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.port() {
            0 => self.0.ip().fmt(f),
            _ => self.0.fmt(f),
        }
    }
}

/// Member exchanges held by uses in progress, per client, per client address, per entity and in total.
#[derive(Debug, Default)]
pub(super) struct Quotas {
    by_client: HashMap<Client, usize>,
    by_address: HashMap<IpAddr, usize>,
    by_entity: HashMap<String, usize>,
    total: usize,
}

/// `map[key] += amount`.
fn add<K: std::hash::Hash + Eq>(map: &mut HashMap<K, usize>, key: K, amount: usize) {
    *map.entry(key).or_default() += amount;
}

/// `map[key] -= amount`, forgetting a counter that reaches zero.
fn sub<K: std::hash::Hash + Eq + std::borrow::Borrow<Q>, Q: std::hash::Hash + Eq + ?Sized>(
    map: &mut HashMap<K, usize>,
    key: &Q,
    amount: usize,
) {
    if let Some(v) = map.get_mut(key) {
        *v = v.saturating_sub(amount);
        if *v == 0 {
            map.remove(key);
        }
    }
}

impl Quotas {
    /// Why `amount` more exchanges for `client`'s use of `entity` would break `budget`, if they would. One
    /// use is always allowed to run alone (a quota smaller than an entity's cost must not make it
    /// unusable).
    fn refusal(&self, budget: &Budget, client: Client, entity: &str, amount: usize) -> Option<String> {
        let by_client = self.by_client.get(&client).copied().unwrap_or(0);
        let by_address = self.by_address.get(&client.ip()).copied().unwrap_or(0);
        let by_entity = self.by_entity.get(entity).copied().unwrap_or(0);
        if by_client > 0 && by_client + amount > budget.per_client {
            Some(format!("{client} has {by_client} member requests in progress (at most {})", budget.per_client))
        } else if by_address > 0 && by_address + amount > budget.per_address {
            Some(format!(
                "clients at {} have {by_address} member requests in progress (at most {})",
                client.ip(),
                budget.per_address
            ))
        } else if by_entity > 0 && by_entity + amount > budget.per_entity {
            Some(format!("entity {entity} has {by_entity} member requests in progress (at most {})", budget.per_entity))
        } else if self.total > 0 && self.total + amount > budget.uses_total {
            Some(format!("{} member requests in progress (at most {})", self.total, budget.uses_total))
        } else {
            None
        }
    }

    /// Holds `amount` exchanges for `client`'s use of `entity`.
    fn take(&mut self, client: Client, entity: &str, amount: usize) -> Hold {
        add(&mut self.by_client, client, amount);
        add(&mut self.by_address, client.ip(), amount);
        add(&mut self.by_entity, entity.to_string(), amount);
        self.total += amount;
        Hold { client, entity: entity.to_string(), amount }
    }

    /// Gives a whole hold back.
    pub(super) fn release(&mut self, hold: Hold) {
        self.give_back(hold.client, &hold.entity, hold.amount);
    }

    /// Gives `amount` member exchanges of `client`'s use of `entity` back.
    pub(super) fn give_back(&mut self, client: Client, entity: &str, amount: usize) {
        sub(&mut self.by_client, &client, amount);
        sub(&mut self.by_address, &client.ip(), amount);
        sub(&mut self.by_entity, entity, amount);
        self.total = self.total.saturating_sub(amount);
    }
}

impl Quotas {
    /// Reserves `amount` member exchanges for a use by `client` of `entity` (see [`Quotas::refusal`]).
    /// `Err`: 5.03 with Max-Age (`soonest`: when the oldest use in the way gives up at the latest, which the
    /// jobs know) and the reason; a refusal is counted in `stats`.
    pub(super) fn reserve(
        &mut self,
        (budget, stats): (&Budget, &mut EmStats),
        now: Instant,
        client: Client,
        entity: &str,
        amount: usize,
        soonest: impl FnOnce() -> Option<Instant>,
    ) -> Result<Hold, Response> {
        if let Some(why) = self.refusal(budget, client, entity, amount) {
            // Retry when the oldest use of this entity or client gives up at the latest.
            let soonest = soonest();
            let secs = soonest.map(|d| d.saturating_since(now).as_secs() + 1).unwrap_or(10).clamp(1, 300);
            stats.quota_refusals += 1;
            warn!(%client, entity, "exchange quota reached: use refused");
            let mut r = Response::error(Code::SERVICE_UNAVAILABLE, format!("try again later: {why}"));
            r.options.set_uint(OptionNumber::MAX_AGE, secs);
            return Err(r);
        }
        Ok(self.take(client, entity, amount))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(port: u16) -> SocketAddr {
        SocketAddr::from(([192, 0, 2, 7], port))
    }

    #[test]
    fn verified_clients_of_one_address_each_have_a_quota_up_to_the_address_ceiling() {
        let budget = Budget::default();
        let mut q = Quotas::default();
        // Four verified clients on one host take their whole share each: the address's ceiling.
        for port in 1..=4 {
            let c = Client::new(at(port), true);
            assert_eq!(q.refusal(&budget, c, &format!("e{port}"), budget.per_client), None, "client {port}");
            q.take(c, &format!("e{port}"), budget.per_client);
        }
        let fifth = Client::new(at(5), true);
        let why = q.refusal(&budget, fifth, "e5", 1).expect("the address's ceiling");
        assert!(why.contains("clients at 192.0.2.7"), "{why}");
        // An unverified source is its address, whatever the port: varying it buys nothing.
        let mut q = Quotas::default();
        q.take(Client::new(at(1), false), "e", budget.per_client);
        assert!(q.refusal(&budget, Client::new(at(2), false), "f", 1).is_some());
        // Given back, every counter is forgotten.
        q.give_back(Client::new(at(9), false), "e", budget.per_client);
        assert!(q.by_client.is_empty() && q.by_address.is_empty() && q.by_entity.is_empty() && q.total == 0);
    }
}
