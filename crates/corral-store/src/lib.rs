//! # corral-store
//!
//! The stores that do I/O for corral's sans-IO services, and the runners that do the services' writes off
//! the driver's thread.
//!
//! The Entity Manager never calls a store: it asks for its writes as effects
//! ([`corral_group::store`]) and waits, parked, for each to be done. This crate is where they are done:
//!
//! - [`SqliteStore`]: the Entity Manager's embedded database (one file, WAL, `synchronous=FULL`).
//! - [`StoreThread`]: an [`EffectRunner`](corral_proto::EffectRunner) that applies each operation on a
//!   thread of its own, in the order the service started them, so that an fsync never holds up the
//!   driver — uses, observations and other entities' changes go on while a write is on disk.
//!
//! Owns: schemas, migrations and the mapping of the services' state onto tables; the threads that do the
//! writes. Must never: decide anything the services decide (what to write, when to answer).
#![forbid(unsafe_code)]

pub mod em_sqlite;
mod thread;

pub use em_sqlite::SqliteStore;
pub use thread::StoreThread;

/// The Entity Manager's writes on `store`, on a thread of their own: the runner a gateway node takes
/// (`Node::set_effect_runner`).
pub fn em_store_thread<S: corral_group::Store>(mut store: S) -> std::io::Result<StoreThread> {
    StoreThread::spawn("corral-em-store", move |op| Box::new(corral_group::store::run_op(&mut store, op)))
}
