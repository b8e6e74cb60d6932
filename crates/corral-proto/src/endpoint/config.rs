//! What an endpoint is configured with: transmission parameters, table limits, the reflection bound,
//! block-wise and Observe settings, and its shard of a shared port.

use super::{BlockConfig, ObservePolicy};
use crate::params::TransmissionParams;
use crate::prefix::Prefix;
use crate::time::Duration;
use corral_wire::OptionNumber;
use std::net::IpAddr;

/// Limits on every table the endpoint keeps, so that no peer can make it grow without bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Peers with per-peer state (message IDs, duplicate detection, NSTART queue). When full, the least
    /// recently active peer without pending exchanges is forgotten; if none can be, new peers get 5.03.
    pub max_peers: usize,
    /// Duplicate-detection entries remembered per peer (the most recent message IDs). A client that obeys
    /// NSTART has one CON outstanding, so a few entries cover its retransmissions.
    pub dedup_per_peer: usize,
    /// Concurrent requests this endpoint sends (queued ones included); beyond it `request` fails.
    pub max_client_exchanges: usize,
    /// Requests queued behind NSTART for one peer; beyond it `request` fails.
    pub max_queued_per_peer: usize,
    /// Received requests awaiting the application's response. When full, the oldest request of an
    /// unverified peer makes room (see `endpoint::peers`); if every one is a verified peer's, 5.03.
    pub max_inbound_exchanges: usize,
    /// Received requests of one peer awaiting the application's response; beyond it that peer gets 5.03.
    pub max_inbound_per_peer: usize,
    /// Responses to multicast requests waiting for their leisure; beyond it the response is dropped.
    pub max_delayed: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_peers: 8192,
            dedup_per_peer: 16,
            max_client_exchanges: 4096,
            max_queued_per_peer: 256,
            max_inbound_exchanges: 4096,
            max_inbound_per_peer: 64,
            max_delayed: 4096,
        }
    }
}

/// Configuration of an [`Endpoint`](super::Endpoint).
#[derive(Debug, Clone)]
pub struct EndpointConfig {
    pub params: TransmissionParams,
    /// Seeds the random choices that need not be secret: back-off jitter, leisure, Observe sequence starts
    /// (see [`crate::Rng`]).
    pub seed: u64,
    /// The 256-bit key of the generator of every value an attacker must not predict: tokens, first
    /// message IDs, Echo values, Request-Tags (see [`crate::SecretRng`]). Drivers on real sockets set it
    /// from the operating system (`corral_tokio::os_seeded`). `None`: derived from `seed`, so that the
    /// simulator and tests repeat — predictable to anyone who knows the seed, so never on a network.
    pub secret_seed: Option<[u8; 32]>,
    /// Length of generated tokens, 1 to 8 bytes (one more on a shard of a shared port, whose first byte
    /// carries the shard's index: RFC 7252 §5.3.1 asks for at least 32 random bits from a client on the
    /// Internet).
    pub token_len: u8,
    /// How long a received CON waits for the application's response before an empty ACK is sent and the
    /// response goes separately (RFC 7252 §5.2.2). Default: ACK_TIMEOUT / 2, well before the client's
    /// first retransmission.
    pub piggyback_window: Option<Duration>,
    /// How long a NON request waits for its response. Default: MAX_TRANSMIT_WAIT.
    pub non_timeout: Option<Duration>,
    /// How long a request waits for its separate response after the empty ACK. Default: EXCHANGE_LIFETIME.
    pub separate_timeout: Option<Duration>,
    /// How long responses to a multicast request are collected. Default: DEFAULT_LEISURE + ACK_TIMEOUT.
    pub multicast_window: Option<Duration>,
    /// Max-Age of the 5.03 sent when a limit is hit.
    pub overload_max_age: u32,
    /// Critical options the application understands beyond corral-wire's registry.
    pub extra_known_options: Vec<OptionNumber>,
    pub limits: Limits,
    /// Block-wise transfer settings (RFC 7959), both as client and as server.
    pub block: BlockConfig,
    /// Observe settings (RFC 7641) for this endpoint as a server.
    pub observe: ObservePolicy,
    /// The reflection bound for every answer to an unverified source (RFC 7252 §11.3, RFC 9175 §2.4; see
    /// [`AmplificationLimit`]); `None`: off.
    pub amplification: Option<AmplificationLimit>,
    /// Networks whose sources cannot be spoofed (BCP 38 source-address validation on the way in, e.g. a
    /// LAN behind filtering routers): a peer there counts as verified from its first datagram — its
    /// answers are not held to the reflection bound, and the application sees its requests as
    /// [`IncomingRequest::verified`](crate::IncomingRequest::verified) (no Echo round trip to prove its address). Which peers, requests,
    /// observations and uploads give way under a flood still goes by what a peer has proved. Loopback (`127.0.0.0/8`, `::1`) is always verified besides these: the kernel drops a datagram
    /// with a loopback source that arrives on any other interface (a "martian"; IPv4 unless an interface
    /// sets `route_localnet`, IPv6 always, RFC 4291 §2.5.3), so no host but this one can send one.
    /// What this trusts: that nobody outside the network can send with a source address inside it.
    pub verified_nets: Vec<Prefix>,
    /// The slice of message IDs and tokens this endpoint uses when it shares its port with others
    /// (see [`crate::Shard`]). Default: alone.
    pub shard: crate::Shard,
}

/// The reflection bound for sources that have not proved their address (RFC 7252 §11.3, RFC 9175 §2.4),
/// like QUIC's before address validation. Every answer to such a peer — piggybacked, separate and NON
/// responses, their retransmissions, Observe notifications (CON and NON), replies resent for duplicates —
/// spends its size from two credits, in this order:
/// - the peer's own (IP address and port): `factor` times every byte received from it, less what it was
///   sent (saved up to 64 KiB);
/// - its IP address's first-answer bucket (whatever the port): `burst` bytes, refilled at `refill` bytes
///   per second up to `burst` again, so that a client without Echo support (the ETSI checker, aiocoap,
///   go-coap; each run from a new port) still gets its first large answers.
///
/// A response to a GET or FETCH that does not fit becomes 4.01 Unauthorized with an Echo option; a client
/// that repeats the request with that Echo has shown it receives at its address and is served from then
/// on. The response to an unsafe request (its handler has acted) is never replaced: it waits, remembered
/// for duplicates, until a retransmission of the request finds credit for it. A
/// retransmission or notification that does not fit is not sent. Empty ACKs and RSTs are never larger
/// than what they answer and are not counted. Multicast requests are not bounded here (their answers go
/// out after leisure, one per member; RFC 7252 §8.2).
///
/// Every first answer is also paid from one bucket **shared** by all addresses (`shared_burst`, refilled at
/// `shared_refill` bytes per second), so that spreading a flood over many addresses buys nothing.
///
/// **The bounds.** Over any span of `T` seconds, the CoAP bytes a flood of spoofed requests (from any
/// ports) makes one endpoint send as answers
/// - to one victim IP address are at most `factor × (bytes received from that address) + burst + refill × T`;
/// - to all unverified sources together (a carpet over a whole network, or over any number of networks)
///   are at most `factor × (bytes received from them) + shared_burst + shared_refill × T`.
///
/// The buckets live in a table of at most `addresses` entries; only a full bucket (the same as none) is
/// forgotten to make room, and while every bucket is refilling a new address gets none. A server with
/// several workers on one port (`--workers`) has one endpoint per worker: each has its own per-address
/// bound, and they split the shared allowance (each gets `1/N` of it, never less than one address's
/// bucket). Peers in [`EndpointConfig::verified_nets`] and on loopback are not bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmplificationLimit {
    /// Bytes of answer per byte received from the same peer.
    pub factor: usize,
    /// The first-answer bucket of each source IP address (bytes).
    pub burst: usize,
    /// What a bucket regains per second (bytes), up to `burst`.
    pub refill: usize,
    /// The first-answer bucket all addresses share (bytes): the most the endpoint sends to unverified
    /// sources together beyond `factor` times what they sent, at once.
    pub shared_burst: usize,
    /// What the shared bucket regains per second (bytes), up to `shared_burst`.
    pub shared_refill: usize,
    /// Addresses with a bucket that is not full (the table's bound).
    pub addresses: usize,
    /// How long an Echo value stays good.
    pub echo_lifetime: Duration,
}

impl Default for AmplificationLimit {
    fn default() -> Self {
        AmplificationLimit {
            factor: 3,
            burst: 2048,
            refill: 1024,
            // Four addresses' worth: a few Echo-less clients may start at once; a carpet of spoofed
            // requests over a /20 gets no more than four victims would.
            shared_burst: 8192,
            shared_refill: 4096,
            addresses: 4096,
            echo_lifetime: Duration::from_secs(60),
        }
    }
}

impl Default for EndpointConfig {
    fn default() -> Self {
        EndpointConfig {
            params: TransmissionParams::default(),
            seed: 0,
            secret_seed: None,
            token_len: 4,
            piggyback_window: None,
            non_timeout: None,
            separate_timeout: None,
            multicast_window: None,
            overload_max_age: 2,
            extra_known_options: Vec::new(),
            limits: Limits::default(),
            block: BlockConfig::default(),
            observe: ObservePolicy::default(),
            amplification: Some(AmplificationLimit::default()),
            verified_nets: Vec::new(),
            shard: crate::Shard::ALONE,
        }
    }
}

impl EndpointConfig {
    pub fn with_seed(seed: u64) -> EndpointConfig {
        EndpointConfig { seed, ..EndpointConfig::default() }
    }

    /// Whether a source at `ip` counts as verified from its first datagram: loopback, or in one of
    /// [`EndpointConfig::verified_nets`].
    pub fn verified_source(&self, ip: IpAddr) -> bool {
        crate::prefix::canonical(ip).is_loopback() || self.verified_nets.iter().any(|p| p.contains(ip))
    }

    pub(super) fn piggyback_window(&self) -> Duration {
        self.piggyback_window.unwrap_or(Duration::from_micros(self.params.ack_timeout.as_micros() / 2))
    }

    pub(super) fn non_timeout(&self) -> Duration {
        self.non_timeout.unwrap_or(self.params.max_transmit_wait())
    }

    pub(super) fn separate_timeout(&self) -> Duration {
        self.separate_timeout.unwrap_or(self.params.exchange_lifetime())
    }

    pub(super) fn multicast_window(&self) -> Duration {
        self.multicast_window.unwrap_or(self.params.default_leisure + self.params.ack_timeout)
    }
}
