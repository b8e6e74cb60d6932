#![forbid(unsafe_code)]

pub mod output;
pub mod profile;
pub mod senml;
pub mod uri;

pub use profile::{Delay, Ect, Emt, Op, Profile};
