//! The exchange quotas (see [`crate::policy::Budget`]): the member exchanges that uses in progress hold,
//! per client, per entity and in total, and the [`Hold`] each use keeps until it gives its share back.
//!
//! Owns: the counters of held exchanges. Must never: let a counter outlive its holds (a counter that
//! reaches zero is forgotten, so a flood of clients leaves no state behind) or go below zero.

use super::*;

/// A use's hold on the quotas, released when its top-level job ends.
#[derive(Debug, Clone)]
pub(super) struct Hold {
    pub(super) client: IpAddr,
    pub(super) entity: String,
    pub(super) amount: usize,
}

/// Member exchanges held by uses in progress, per client, per entity and in total.
#[derive(Debug, Default)]
pub(super) struct Quotas {
    by_client: HashMap<IpAddr, usize>,
    by_entity: HashMap<String, usize>,
    total: usize,
}

impl Quotas {
    /// Why `amount` more exchanges for `client`'s use of `entity` would break `budget`, if they would. One
    /// use is always allowed to run alone (a quota smaller than an entity's cost must not make it
    /// unusable).
    fn refusal(&self, budget: &Budget, client: IpAddr, entity: &str, amount: usize) -> Option<String> {
        let by_client = self.by_client.get(&client).copied().unwrap_or(0);
        let by_entity = self.by_entity.get(entity).copied().unwrap_or(0);
        if by_client > 0 && by_client + amount > budget.per_client {
            Some(format!("{client} has {by_client} member requests in progress (at most {})", budget.per_client))
        } else if by_entity > 0 && by_entity + amount > budget.per_entity {
            Some(format!("entity {entity} has {by_entity} member requests in progress (at most {})", budget.per_entity))
        } else if self.total > 0 && self.total + amount > budget.uses_total {
            Some(format!("{} member requests in progress (at most {})", self.total, budget.uses_total))
        } else {
            None
        }
    }

    /// Holds `amount` exchanges for `client`'s use of `entity`.
    fn take(&mut self, client: IpAddr, entity: &str, amount: usize) -> Hold {
        *self.by_client.entry(client).or_default() += amount;
        *self.by_entity.entry(entity.to_string()).or_default() += amount;
        self.total += amount;
        Hold { client, entity: entity.to_string(), amount }
    }

    /// Gives a whole hold back.
    pub(super) fn release(&mut self, hold: Hold) {
        self.give_back(hold.client, &hold.entity, hold.amount);
    }

    /// Gives `amount` member exchanges of `client`'s use of `entity` back.
    pub(super) fn give_back(&mut self, client: IpAddr, entity: &str, amount: usize) {
        if let Some(v) = self.by_client.get_mut(&client) {
            *v = v.saturating_sub(amount);
            if *v == 0 {
                self.by_client.remove(&client);
            }
        }
        if let Some(v) = self.by_entity.get_mut(entity) {
            *v = v.saturating_sub(amount);
            if *v == 0 {
                self.by_entity.remove(entity);
            }
        }
        self.total = self.total.saturating_sub(amount);
    }
}

impl EntityManager {
    /// Reserves `amount` member exchanges for a use by `client` of `entity` (see [`Quotas::refusal`]).
    /// `Err`: 5.03 with Max-Age and the reason.
    pub(super) fn reserve(
        &mut self,
        now: Instant,
        client: IpAddr,
        entity: &str,
        amount: usize,
    ) -> Result<Hold, Response> {
        if let Some(why) = self.quotas.refusal(&self.config.budget, client, entity, amount) {
            // Retry when the oldest use of this entity or client gives up at the latest.
            let soonest = self
                .jobs
                .values()
                .filter(|j| j.hold.as_ref().is_some_and(|h| h.client == client || h.entity == entity))
                .filter_map(|j| j.spec.deadline)
                .min();
            let secs = soonest.map(|d| d.saturating_since(now).as_secs() + 1).unwrap_or(10).clamp(1, 300);
            self.stats.quota_refusals += 1;
            warn!(%client, entity, "exchange quota reached: use refused");
            let mut r = Response::error(Code::SERVICE_UNAVAILABLE, format!("try again later: {why}"));
            r.options.set_uint(OptionNumber::MAX_AGE, secs);
            return Err(r);
        }
        Ok(self.quotas.take(client, entity, amount))
    }
}
