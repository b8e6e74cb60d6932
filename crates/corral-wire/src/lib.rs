//! # corral-wire
//!
//! CoAP wire formats, and nothing else: RFC 7252 messages, the option registry, codes and content formats,
//! Block/Observe option values, the cache key, URIs ⇄ options, RFC 8323 framing and RFC 6690 link-format, and the few CBOR items options are made of.
//!
//! This crate owns how bytes look. It must never do I/O, read a clock, draw a random number, or panic on
//! any input; decoding a message never allocates. Protocol behaviour (what to do with a message) lives in
//! `corral-proto`.
//!
//! Two ways to handle a message:
//! - [`Packet`]: a zero-copy view, validated once by [`Packet::new_checked`]; accessors never fail after that.
//! - [`Message`]: an owned message with a sorted [`Options`] list, for building and for convenience.
#![no_std]
extern crate alloc;

mod block;
pub mod cbor;
mod code;
mod content_format;
mod error;
pub mod link_format;
mod message;
mod option;
pub mod reply_from;
pub mod tcp;
pub mod uri;

pub use block::{observe_is_fresher, BlockValue, OBSERVE_DEREGISTER, OBSERVE_MODULUS, OBSERVE_REGISTER};
pub use code::Code;
pub use content_format::ContentFormat;
pub use error::Error;
pub use message::{write_cache_key, Message, MessageBuilder, MessageId, MessageType, Packet, Token};
pub use option::{
    check_critical, decode_options, decode_uint, encode_options, encode_uint, BadOption, OptionDef, OptionFormat,
    OptionIter, OptionNumber, OptionValue, Options, MAX_OPTION_LEN, REGISTRY,
};
pub use reply_from::{decode_reply_from, encode_reply_from};
pub use tcp::{FrameDecoder, TcpMessage, TcpPacket};
pub use uri::{Host, Scheme, Uri};
