//! # corral-group
//!
//! CoAP group communication as seed 000 builds it, as sans-IO services for a corral [`Node`]:
//!
//! - [`EntityManager`] (mount at `em`): entities — named groups of CoAP resources exposed as one resource —
//!   with profiles (`er emt ect enr eo delay timeout mcstURI`, and `repair` beyond the paper), operations
//!   (`lst avg min max sum count med`), unicast and multicast fan-out, nesting, validation, and persistence
//!   that survive restarts: its writes are effects a [`Store`] does (see [`store`]). The wire interface is `docs/entity-manager.md` (at the repository root).
//!   A gateway on several cores runs one [`EntityManager::manager`] and [`EntityManager::replica`]s that
//!   follow its [`Directory`] (see [`em`], "Several workers").
//! - [`entity_api`]: the Entity Manager's operations as a client asks them (typed requests, the listing),
//!   shared by `corral entity` and the gateway's admin API.
//! - [`McResource`] (mount at `mc`): the member-side multicast membership resource of seed 000 Table 4.
//! - [`policy`]: who may use the gateway, where members may be, and how much one request may cost.
//! - [`device`]: virtual sensors and actuators, the lab's constrained devices.
//! - [`store`]: what the EM writes ([`StoreOp`]), the [`Store`] trait and [`MemStore`]; the SQLite store
//!   and the runner that keeps its I/O off the driver's thread are corral-store's.
//! - [`senml`]: SenML (RFC 8428) JSON and CBOR. It lives here rather than in corral-wire *(decision)*: it
//!   needs serde and a CBOR codec, and only the Entity Manager produces it.
//!
//! Nothing here reads a clock, opens a socket, touches a file or draws randomness of its own.
//!
//! ## A gateway node
//! ```
//! use corral_group::{EmConfig, EntityManager, MemStore, Store, StoreRunner};
//! use corral_proto::{Endpoint, EndpointConfig, Node};
//! let gateway_addr = "127.0.0.1:5683".parse().unwrap();
//! let store = MemStore::new(); // a gateway's own: corral_store::SqliteStore on corral_store::em_store_thread
//! let config = EmConfig { local_addrs: vec![gateway_addr], ..EmConfig::default() };
//! let mut gateway = Node::new(Endpoint::new(EndpointConfig::with_seed(7)));
//! let snapshot = store.load().expect("read the entities");
//! let em = gateway.mount("em", EntityManager::new(config, snapshot).expect("load entities"));
//! gateway.set_effect_runner(Box::new(StoreRunner::new(store))); // does the EM's writes
//! // The driver (corral-tokio or the simulator) now feeds datagrams and timeouts to `gateway` and applies
//! // its `poll_command()`s; `gateway.service::<EntityManager>(em)` inspects the EM.
//! # let _ = em;
//! ```
//!
//! ## A device node
//! ```
//! use corral_group::device::{mount_device, DeviceConfig};
//! use corral_proto::{Endpoint, EndpointConfig, Node};
//! let mut device = Node::new(Endpoint::new(EndpointConfig::with_seed(42)));
//! let handles = mount_device(&mut device, DeviceConfig { mc_slots: Some(4), ..DeviceConfig::default() });
//! // /s/t /s/h /s/l, /a/shutter /a/light, /mc and /.well-known/core are now served. A POST /mc?act=add
//! // yields NodeCommand::JoinGroup(addr) from device.poll_command(), which the driver applies to its socket.
//! # let _ = handles;
//! ```
#![forbid(unsafe_code)]

pub mod device;
pub mod em;
pub mod entity_api;
pub mod gateway;
pub mod mc;
pub mod output;
pub mod policy;
pub mod pool;
pub mod profile;
pub mod senml;
pub mod store;
pub mod uri;

pub use em::{Directory, EmConfig, EntityManager};
pub use mc::McResource;
pub use policy::{AccessPolicy, Budget, ClientIdentity, MemberPolicy, Prefix, Role, UnknownRole};
pub use pool::AddressPool;
pub use profile::{Delay, Ect, Emt, Op, Profile};
pub use store::{
    ChangeFeed, Changes, ChangesSince, CorruptRow, Feed, MemStore, Snapshot, Store, StoreDone, StoreError, StoreOp,
    StoreRunner, StoredEntity, Write,
};

#[doc(no_inline)]
pub use corral_proto::Node;
