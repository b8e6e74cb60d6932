//! A CoRE Resource Directory (RFC 9176) as a sans-IO service: devices register the resources they offer
//! (`POST /rd?ep=…` with link-format, or simple registration with an empty `POST /.well-known/rd`), refresh
//! before their lifetime ends and remove themselves; clients look them up by endpoint or by resource with
//! RFC 9176's filters and paging, and may observe a lookup to learn of registrations that come and go.
//!
//! # What it owns
//! [`directory`]: the registrations, their bounds, lifetimes, names (bound to the DTLS or OSCORE identity
//! they were registered with, else first come, first remembered: [`Policy`]) and lookups. [`service`]: the CoAP interface over corral-proto's `Service`. [`registrant`]: the device's side —
//! register, refresh, register again, leave. [`store`]: persistence in an
//! embedded SQLite file, so that a restarted directory still knows who registered.
//!
//! # What it must never do
//! Read a clock, open a socket or draw from a global random generator (`scripts/check-deps.sh`): time
//! comes in as `now`, locations from the driver's CSPRNG through `Context::secret_u64`, the store's wall
//! clock as a number the driver gives. Change state for a source that has not proved its address. Panic
//! on anything a client sends; keep state that grows without a bound.

pub mod directory;
pub mod registrant;
pub mod service;
pub mod store;

pub use directory::{
    footprint, network_of, Directory, Limits, Params, Policy, Query, RdError, Registration, Requester,
    DEFAULT_LIFETIME, NETWORK_SHARE, SOURCE_SHARE,
};
pub use registrant::{Registrant, RegistrantState};
pub use service::{identity_of, RdService, RdStats};
pub use store::{MemStore, SqliteStore, Store, StoreError, Stored};
