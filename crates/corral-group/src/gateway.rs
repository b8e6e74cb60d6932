//! The Entity Managers of one gateway: one, or — with several workers sharing a port — a manager that owns
//! the store and publishes its entity table, and replicas that serve uses from it (see `em::shards`).
//!
//! Owns: the topology of a gateway's workers — which of them is the manager, the one identity the
//! gateway shows in `via` lists, and the per-entity quota divided among the workers so that together
//! they keep the configured one. Must never: draw the gateway's identity itself (sans-IO: the driver
//! passes one, from a CSPRNG on real sockets), or know how the workers are driven.

use crate::em::{Directory, EmConfig, EntityManager};
use crate::store::{Snapshot, StoreError};

/// The Entity Managers of a gateway of `workers` workers (at least one), in worker order: worker 0 serves
/// what its store holds (`snapshot`, and it alone writes that store: the manager when there are several),
/// the others are its replicas.
/// `gateway_id` is asked for only when there are several workers.
pub fn entity_managers(
    mut config: EmConfig,
    snapshot: Snapshot,
    workers: u8,
    gateway_id: impl FnOnce() -> u32,
) -> Result<Vec<EntityManager>, StoreError> {
    if workers <= 1 {
        return Ok(vec![EntityManager::new(config, snapshot)?]);
    }
    // One identity in `via` lists for the whole gateway, and the per-entity quota shared by the workers.
    config.gateway_id = Some(gateway_id());
    config.budget.per_entity = config.budget.per_entity.div_ceil(usize::from(workers));
    let directory = Directory::new();
    let mut ems = vec![EntityManager::manager(config.clone(), snapshot, directory.clone())?];
    for worker in 1..workers {
        ems.push(EntityManager::replica(config.clone(), directory.clone(), worker)?);
    }
    Ok(ems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_workers_share_one_identity_and_the_per_entity_quota() {
        let config = EmConfig::default();
        let quota = config.budget.per_entity;
        let one = entity_managers(config.clone(), Snapshot::default(), 1, || unreachable!()).unwrap();
        assert_eq!(one.len(), 1);
        let four = entity_managers(config, Snapshot::default(), 4, || 0xdead_beef).unwrap();
        assert_eq!(four.len(), 4);
        for em in &four {
            assert_eq!(em.config().gateway_id, Some(0xdead_beef));
            assert_eq!(em.config().budget.per_entity, quota.div_ceil(4));
        }
    }
}
