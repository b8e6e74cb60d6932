//! # corral-stream
//!
//! CoAP-SC, the streaming control of seed 003 (Jung, Gohar, Koh, 2020), as two sans-IO services on
//! corral-proto — a [`StreamSender`] on the sensor and a [`StreamReceiver`] on the collector — plus the two
//! baselines the paper compares it with, run by the same sender so that all three are measured the same
//! way:
//!
//! - **CoAP-SC** ([`Scheme::Sc`]): each reading is a NON PUT carrying the CoAP-SC option (number 100:
//!   the sequence number SN and the acknowledgement number AN, 4 bytes each, Fig. 15). The sender keeps at
//!   most `buffer` unacknowledged readings and blocks when they fill it. The receiver advances AN over
//!   in-order readings, asks for each missing SN as soon as a later one reveals the gap (Figs. 11–12),
//!   and acknowledges when the sender's buffer is 1/3 full (once) and 2/3 full (every reading), using the
//!   SN and AN the readings carry (Figs. 13–14). Control messages are NON PUTs from the receiver to the
//!   sender's `/control/<stream>`, both ways with No-Response 26: nothing answers them.
//! - **CoAP over UDP** ([`Scheme::Udp`]): each reading a CON PUT, at most `buffer` outstanding.
//! - **CoAP over TCP** ([`Scheme::Tcp`]): each reading a PUT on one RFC 8323 connection, at most `buffer`
//!   outstanding.
//!
//! Initialisation follows Fig. 10: a POST to `/stream` with the sender's buffer size creates the stream
//! (2.01 with Location-Path `stream/<id>`), a GET on it with SN = AN = 0 starts it; a DELETE ends it.
//! Beyond the paper, the receiver creates a stream only for a sender that proved its address (an Echo
//! round trip, RFC 9175), names it with a random id, and serves it to that address alone (see the
//! receiver's docs); the sender gives up when the receiver stays silent ([`StreamConfig::give_up`]).
//!
//! ## Where the paper is silent, and what corral chose
//! - The paper's traces put SN/AN in the path (`/stream/39/36`) as well as in the option; corral carries
//!   them in the option only and keeps the path the stream's Location.
//! - A control message with SN = AN is a flow-control acknowledgement; with SN > AN it asks for reading SN
//!   (one message per missing reading, as the traces show).
//! - Tail loss (the last readings lost, nothing after them to reveal the gap): the receiver sends its AN
//!   after [`StreamConfig::rto`] without data, asking for the reading after its AN; the sender, once it
//!   has sent everything, resends the oldest unacknowledged reading after 2 × `rto` without progress
//!   (doubling, at most [`StreamConfig::max_retries`] times) as a backstop.
//! - The metrics, at the sender: NRP = readings sent more than once (for the baselines: the endpoint's
//!   CoAP retransmissions of them; over TCP the transport's own retransmissions are not CoAP's and are
//!   counted by the simulator when it runs TCP); TBT = total time the buffer was full while a reading was
//!   waiting; TTD = first reading generated to last reading acknowledged; per-reading delay = generated
//!   to acknowledged.

mod option;
mod receiver;
mod sender;

pub use option::{ScOption, SC_OPTION};
pub use receiver::{ReceiverStats, StreamReceiver, MAX_PER_ADDRESS, MAX_STREAMS, RECLAIM_AFTER};
pub use sender::{Metrics, Scheme, StreamConfig, StreamSender};
