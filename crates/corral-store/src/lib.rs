//! # corral-store
//!
//! The stores that do I/O for corral's sans-IO services, and the runners that do the services' writes off
//! the driver's thread.
//!
//! The Entity Manager and the directory never call a store: they ask for their writes as effects
//! ([`corral_group::store`], [`corral_rd::store`]) and wait, parked, for each to be done. This crate is where they are done:
//!
//! - [`SqliteStore`]: the Entity Manager's embedded database (one file, WAL, `synchronous=FULL`).
//! - [`PgStore`]: the Entity Manager's store on a PostgreSQL server that several gateways can share
//!   (issue 45; the same writes, with the constraints that keep them true across gateways in the schema).
//! - [`RdSqliteStore`]: the Resource Directory's (corral-rd asks for its writes as effects too), and
//!   [`RdPgStore`] on PostgreSQL.
//! - [`PgTarget`]: where a PostgreSQL store connects (`--store postgres://…`, libpq's `PG*` variables,
//!   a password file), named in every message without the password.
//! - [`Stores`]: the stores of one node, whose operations one runner dispatches by type.
//! - [`StoreThread`]: an [`EffectRunner`](corral_proto::EffectRunner) that applies each operation on a
//!   thread of its own, in the order the service started them, so that an fsync never holds up the
//!   driver — uses, observations and other entities' changes go on while a write is on disk.
//!
//! Owns: schemas, migrations and the mapping of the services' state onto tables; the threads that do the
//! writes. Must never: decide anything the services decide (what to write, when to answer).
#![forbid(unsafe_code)]

pub mod em_postgres;
pub mod em_sqlite;
pub mod pg_target;
pub mod rd_postgres;
pub mod rd_sqlite;
pub mod testing;
mod thread;

pub use em_postgres::{PgFeed, PgStore};
pub use em_sqlite::SqliteStore;
pub use pg_target::PgTarget;
pub use rd_postgres::RdPgStore;
pub use rd_sqlite::RdSqliteStore;
pub use thread::StoreThread;

use corral_proto::{EffectDone, EffectOp};

/// The stores of one node's services — the Entity Manager's, the directory's, or both (`corral gateway
/// --rd`) — whose writes one runner does: each operation goes to the store of its type.
#[derive(Default)]
pub struct Stores {
    pub em: Option<Box<dyn corral_group::Store>>,
    pub rd: Option<Box<dyn corral_rd::Store>>,
    /// The change feed of a store several gateways share ([`PgStore::feed`]): its waits on a thread of
    /// their own.
    pub feed: Option<Box<dyn corral_group::ChangeFeed>>,
}

impl Stores {
    /// Does `op` on the store of its type. An operation whose store this node lacks is answered as a
    /// failed write (its request is answered 5.00), never dropped: its service is waiting.
    pub fn run(&mut self, op: EffectOp) -> EffectDone {
        if op.is::<corral_group::StoreOp>() {
            return match self.em.as_deref_mut() {
                Some(em) => Box::new(corral_group::store::run_op(em, op)),
                None => Box::new(corral_group::StoreDone(Err(corral_group::StoreError::Internal(
                    "no entity store on this node",
                )))),
            };
        }
        if op.is::<corral_rd::StoreOp>() {
            return match self.rd.as_deref_mut() {
                Some(rd) => corral_rd::store::run_op(rd, op),
                None => {
                    Box::new(corral_rd::StoreDone(Err(corral_rd::StoreError("no directory store on this node".into()))))
                }
            };
        }
        tracing::error!("an effect that is no store operation reached the store's thread");
        Box::new(())
    }

    /// These stores' writes on a thread of their own (and the feed's waits on another): the runner a node
    /// takes (`Node::set_effect_runner`).
    pub fn spawn(mut self) -> std::io::Result<StoreThread> {
        let side = self.feed.take().map(|mut feed| {
            let picks: fn(&EffectOp) -> bool = |op| op.is::<corral_group::ChangesSince>();
            let exec = move |op: EffectOp| -> EffectDone {
                let since = op.downcast::<corral_group::ChangesSince>().map(|c| c.0).unwrap_or(0);
                Box::new(corral_group::Changes(feed.changes_since(since, corral_group::store::FEED_WAIT)))
            };
            (picks, Box::new(exec) as Box<dyn FnMut(EffectOp) -> EffectDone + Send>)
        });
        StoreThread::spawn_with("corral-store", Box::new(move |op| self.run(op)), side)
    }
}

/// The Entity Manager's writes on `store`, on a thread of their own: the runner a gateway node takes
/// (`Node::set_effect_runner`).
pub fn em_store_thread<S: corral_group::Store>(store: S) -> std::io::Result<StoreThread> {
    Stores { em: Some(Box::new(store)), ..Stores::default() }.spawn()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_operation_goes_to_the_store_of_its_type_and_one_without_its_store_fails_in_words() {
        let mut both = Stores {
            em: Some(Box::new(corral_group::MemStore::new())),
            rd: Some(Box::new(corral_rd::MemStore::default())),
            feed: None,
        };
        let em = both.run(Box::new(corral_group::StoreOp(Vec::new())));
        assert!(em.downcast::<corral_group::StoreDone>().unwrap().0.is_ok());
        let rd = both.run(Box::new(corral_rd::StoreOp(vec![corral_rd::Write::Remove("x".into())])));
        assert_eq!(rd.downcast::<corral_rd::StoreDone>().unwrap().0, Ok(()));

        let mut em_only = Stores { em: Some(Box::new(corral_group::MemStore::new())), ..Stores::default() };
        let rd = em_only.run(Box::new(corral_rd::StoreOp(Vec::new())));
        let err = rd.downcast::<corral_rd::StoreDone>().unwrap().0.unwrap_err();
        assert!(err.to_string().contains("no directory store"), "{err}");
    }
}
