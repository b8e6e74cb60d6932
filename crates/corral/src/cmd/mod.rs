//! One file per verb of `corral`: its arguments (clap), the config it makes of them, what it starts or
//! sends, what it prints, and how it waits. What several verbs share is `crate::cli`'s; a command never
//! imports another command's helpers.

pub mod bench;
pub mod client;
pub mod device;
pub mod entity;
pub mod gateway;
pub mod lab;
pub mod link;
pub mod oscore;
pub mod proxy;
pub mod rd;
pub mod serve;
pub mod stream;
pub mod wait;
