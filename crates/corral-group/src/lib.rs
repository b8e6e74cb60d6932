#![forbid(unsafe_code)]

pub mod device;
pub mod mc;
pub mod output;
pub mod pool;
pub mod profile;
pub mod senml;
pub mod sqlite;
pub mod store;
pub mod uri;

pub use mc::McResource;
pub use pool::AddressPool;
pub use profile::{Delay, Ect, Emt, Op, Profile};
pub use sqlite::SqliteStore;
pub use store::{MemStore, Snapshot, Store, StoreError, StoredEntity};
