//! # corral-oscore
//!
//! OSCORE (RFC 8613): object security for CoAP that survives proxies. Sans-IO like the rest of corral —
//! no clock, no sockets, no global RNG; the RustCrypto crates do the cryptography (`aes` + `ccm` for
//! AES-CCM-16-64-128, `hkdf` + `sha2` for HKDF-SHA-256), nothing is hand-rolled but the few CBOR bytes of
//! the key derivation's `info` and the AAD.
//!
//! - [`SecurityContext::derive`]: Sender and Recipient Keys and the Common IV from a Master Secret (with or
//!   without Master Salt and ID Context, §3.2).
//! - [`SecurityContext::protect_request`] / [`SecurityContext::unprotect_request`] /
//!   [`SecurityContext::protect_response`] / [`SecurityContext::unprotect_response`]: the class E/U
//!   option split (§4.1), the nonce (§5.2), the AAD (§5.4), the OSCORE option (§6.1), the outer codes
//!   (§4.2), Observe (§4.1.3.5).
//! - [`ReplayWindow`] (§7.4) and a crash-safe Sender Sequence Number ([`SecurityContext::sequence_to_persist`],
//!   Appendix B.1.1): a restart never reuses a nonce; a server that lost its window refuses requests until
//!   freshness is proven with Echo (Appendix B.1.2, RFC 9175).
//! - [`store`]: security contexts in the context-directory format aiocoap uses (`settings.json`,
//!   `secret.json`, `sequence.json`), so both tools can be pointed at the same files; [`credentials`]:
//!   aiocoap's credentials file, which names a context directory for each URI pattern.
//! - [`group`]: Group OSCORE (group and pairwise mode) and the deterministic requests of
//!   draft-ietf-core-cacheable-oscore, which let a proxy aggregate and cache end-to-end protected requests.
//! - [`Error::response_code`]: the unprotected error answers of §8.2.
//! - Block-wise (§4.1.3.4): the endpoint cuts a protected message into outer blocks and reassembles them
//!   before OSCORE sees it (§4.1.3.4.2); a body larger than one protected message can hold (64 KiB,
//!   [`Aead::max_plaintext`]) goes in inner blocks, each protected on its own (§4.1.3.4.1): the client
//!   cuts its uploads ([`INNER_BLOCK`]), the server's [`OscoreLayer`] its large responses.

use corral_wire::cbor;
mod context;
pub mod credentials;
mod error;
pub mod group;
mod layer;
mod option;
mod protect;
mod replay;
pub mod served;
pub mod store;

pub use context::{Aead, CryptoOps, Kdf, Params, SecurityContext, K_SSN, K_SSN_MAX, MAX_SSN};
pub use error::Error;
pub use group::{GroupBinding, GroupContext, GroupParams, Mode};
pub use layer::{LayerStats, OscoreLayer};
pub use option::OscoreOption;
pub use protect::{request_kid, Plain, RequestBinding};
pub use replay::{Refusal, ReplayWindow};

/// The block size of the inner block-wise transfers (RFC 8613 §4.1.3.4.1) corral starts itself — a
/// client's upload, a server's response that one protected message cannot hold
/// ([`Aead::max_plaintext`]) — when the peer asked for none: small enough that each protected block fits
/// in one outer message of 1024 bytes of payload and is never cut again (outer block-wise, §4.1.3.4.2,
/// still carries the messages that are larger).
pub const INNER_BLOCK: usize = 512;
