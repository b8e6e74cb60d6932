//! What library users and corral's programs run on the drivers: the async [`Client`](crate::Client)
//! (`client`) and [`Server`](crate::Server) (`server`), N servers on one port (`workers`: either
//! driver, as `corral serve --workers` and the gateway start them), a node that takes part in multicast
//! groups (`group_node`, each virtual device of `corral device`) and the closed-loop load generator
//! (`load`, `corral bench`).
//!
//! Owns: the async API over the driver (requests as futures, observations as streams, handlers as async
//! functions) and what each of these programs counts. Must never: implement protocol behaviour
//! (corral-proto) nor drive a machine itself (each runs `crate::driver`'s loop).

pub(crate) mod client;
pub mod group_node;
pub mod load;
pub(crate) mod server;
pub mod workers;
