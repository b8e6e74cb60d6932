pub mod cookie;
pub mod key_share;
pub mod signature_algorithms;
pub mod supported_groups;
pub mod supported_versions;
pub mod use_srtp;
