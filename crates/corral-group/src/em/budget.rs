//! The fan-out budget (see [`crate::policy`]): what a use costs, and the limits on an entity's cost and
//! on the store — behaviour of the entity table (`impl Table`). The quotas that uses hold while they run
//! are `quotas`.
//!
//! A use's *cost* is the member requests this gateway sends for it: one per remote member (a member
//! that is another gateway's entity counts one here; that gateway spends its share of the budget, passed
//! on with `budget=`), the cost of every nested local entity, and for a multicast entity one request (plus
//! one per member when it repairs by unicast). Costs are static — they follow from the member lists — so
//! they are checked when an entity is created or changed (for the entity and every entity that contains
//! it), and reserved against the quotas when a use starts. A use gives its reservation back as it goes:
//! each member request that ended (answered, failed, or made needless by a multicast answer) leaves the
//! hold at once, and whatever is left goes when the use ends — also when its entity changes or is deleted
//! meanwhile, which ends the use (issue 26: else a use paced by a long `delay` would hold its whole cost for days).

use super::{bad, EmConfig, Entity, EntityManager, Fail, Item, Table, Target};
use crate::profile::{Ect, Profile, Repair};
use corral_proto::wire::Code;
use corral_proto::Context;

/// What a use of an entity costs: requests sent here, and the members that are other gateways' entities
/// (which each receive a share of what is left of the budget).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Cost {
    pub(super) requests: u64,
    pub(super) remote_entities: u64,
    /// Levels of local nesting below the entity (0: no local members).
    pub(super) depth: usize,
}

/// Bytes of member URIs one entity may store (4.13 beyond).
pub(super) const MAX_ENTITY_BYTES: usize = 64 * 1024;

impl Table {
    /// The cost of a use of `name`, with `changed` standing in for that entity's members and profile
    /// (to judge a change before it is made).
    pub(super) fn cost_of(&self, config: &EmConfig, name: &str, changed: Option<(&str, &Profile, &[Item])>) -> Cost {
        self.cost_rec(config, name, changed, 0)
    }

    fn cost_rec(
        &self,
        config: &EmConfig,
        name: &str,
        changed: Option<(&str, &Profile, &[Item])>,
        level: usize,
    ) -> Cost {
        let (profile, items): (&Profile, &[Item]) = match changed {
            Some((n, p, i)) if n == name => (p, i),
            _ => match self.get(name) {
                Some(e) => (&e.stored.profile, &e.items),
                None => return Cost::default(),
            },
        };
        if level > config.max_depth {
            // Unreachable for a stored tree (acyclic, depth checked); bounds the recursion regardless.
            return Cost { requests: u64::MAX / 4, remote_entities: 0, depth: level };
        }
        if profile.ect == Ect::Multicast {
            let repair = if profile.repair == Repair::Unicast { items.len() as u64 } else { 0 };
            return Cost { requests: 1 + repair, remote_entities: 0, depth: 0 };
        }
        let mut c = Cost::default();
        for it in items {
            match &it.target {
                Target::Local(child) => {
                    let sub = self.cost_rec(config, child, changed, level + 1);
                    c.requests = c.requests.saturating_add(sub.requests);
                    c.remote_entities += sub.remote_entities;
                    c.depth = c.depth.max(sub.depth + 1);
                }
                Target::Remote { entity, .. } => {
                    c.requests += 1;
                    c.remote_entities += u64::from(*entity);
                }
            }
        }
        c
    }

    /// A change of `name` to `profile`/`items` keeps it and every entity that contains it within the
    /// fan-out budget and the nesting depth. 4.03 names the entity and the numbers.
    pub(super) fn check_budget(
        &self,
        config: &EmConfig,
        name: &str,
        profile: &Profile,
        items: &[Item],
    ) -> Result<(), Fail> {
        let changed = Some((name, profile, items));
        let mut affected = vec![name.to_string()];
        let mut i = 0;
        while i < affected.len() {
            let cur = affected[i].clone();
            for e in self.values() {
                if e.local_members().any(|m| m == cur) && !affected.contains(&e.stored.name) {
                    affected.push(e.stored.name.clone());
                }
            }
            i += 1;
        }
        let limit = u64::from(config.budget.datagrams);
        for ent in &affected {
            let c = self.cost_of(config, ent, changed);
            if c.depth >= config.max_depth {
                return Err(bad(format!(
                    "entity {ent} would nest {} levels of entities; at most {} are allowed",
                    c.depth + 1,
                    config.max_depth
                )));
            }
            let needed = c.requests + c.remote_entities; // each other gateway must be able to ask one member
            if needed > limit {
                let whose = if ent == name { String::new() } else { format!(" (it contains {name})") };
                return Err((
                    Code::FORBIDDEN,
                    format!(
                        "a use of entity {ent}{whose} would send {} member requests{}; the gateway's fan-out budget is {limit} per client request",
                        c.requests,
                        if c.remote_entities > 0 { format!(" and ask {} other gateways", c.remote_entities) } else { String::new() }
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The store's byte budget: one entity's member list at most [`MAX_ENTITY_BYTES`] (4.13), all entities
    /// together at most `max_store_bytes` (5.03), so that one client cannot fill the disk and the memory
    /// with long member lists.
    pub(super) fn check_store(&self, config: &EmConfig, name: &str, profile: &Profile) -> Result<(), Fail> {
        let bytes = |p: &Profile| p.er.iter().map(|m| m.len() + 16).sum::<usize>();
        let mine = bytes(profile) + name.len();
        if mine > MAX_ENTITY_BYTES {
            return Err((
                Code::REQUEST_ENTITY_TOO_LARGE,
                format!("entity {name}: its member list takes {mine} bytes; at most {MAX_ENTITY_BYTES} are stored per entity"),
            ));
        }
        let others: usize = self
            .values()
            .filter(|e| e.stored.name != name)
            .map(|e| bytes(&e.stored.profile) + e.stored.name.len())
            .sum();
        if others + mine > config.max_store_bytes {
            return Err((
                Code::SERVICE_UNAVAILABLE,
                format!(
                    "entity {name} not stored: the entities take {others} bytes and the store holds at most {} (delete entities first)",
                    config.max_store_bytes
                ),
            ));
        }
        Ok(())
    }
}

impl Table {
    /// An entity a use may ask: it exists and has members (one that follows a directory may have none yet).
    pub(super) fn with_members(&self, name: &str) -> Result<&Entity, Fail> {
        let Some(e) = self.get(name) else {
            return Err((Code::NOT_FOUND, format!("no entity {name}")));
        };
        if e.items.is_empty() {
            let q = e.stored.profile.from_rd.as_deref().unwrap_or("");
            return Err((
                Code::SERVICE_UNAVAILABLE,
                format!("entity {name} has no members yet: no resource in the directory matches {q}"),
            ));
        }
        Ok(e)
    }

    /// What a use of `name` costs against the fan-out budget — this gateway's own, or the smaller share
    /// (`asked`) a parent gateway passed down: its member requests, and the budget each member that is
    /// another gateway's entity may spend. 4.03 when the budget does not cover the requests.
    pub(super) fn use_cost(&self, config: &EmConfig, name: &str, asked: Option<u32>) -> Result<(u64, u32), Fail> {
        let budget = u64::from(asked.map_or(config.budget.datagrams, |b| b.min(config.budget.datagrams)));
        let cost = self.cost_of(config, name, None);
        if cost.requests > budget {
            return Err((
                Code::FORBIDDEN,
                format!(
                    "a use of entity {name} sends {} member requests; this request may cause at most {budget}",
                    cost.requests
                ),
            ));
        }
        let share = (budget - cost.requests)
            .checked_div(cost.remote_entities)
            .map_or(0, |s| u32::try_from(s).unwrap_or(u32::MAX));
        Ok((cost.requests, share))
    }
}

impl EntityManager {
    /// This gateway's identity in `via` lists: drawn once from the node's seeded stream.
    pub(super) fn gateway_id(&mut self, cx: &mut Context<'_>) -> u32 {
        *self.gateway_id.get_or_insert_with(|| cx.rng().next_u32())
    }
}
