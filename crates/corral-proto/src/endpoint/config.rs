//! What an endpoint is configured with: transmission parameters, table limits, the reflection bound,
//! block-wise and Observe settings, and its shard of a shared port.

use super::*;

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

/// Configuration of an [`Endpoint`].
#[derive(Debug, Clone)]
pub struct EndpointConfig {
    pub params: TransmissionParams,
    /// Seeds every random choice: message IDs, tokens, back-off jitter, leisure.
    pub seed: u64,
    /// Length of generated tokens, 1 to 8 bytes.
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
    /// The reflection bound for NON requests from unverified sources (RFC 7252 §11.3, RFC 9175 §2.4);
    /// `None`: off.
    pub amplification: Option<AmplificationLimit>,
    /// The slice of message IDs and tokens this endpoint uses when it shares its port with others
    /// (see [`crate::Shard`]). Default: alone.
    pub shard: crate::Shard,
}

/// How large an answer to a NON request from an unverified source may be: at most `factor` times the
/// request, and never less than `floor` bytes. A larger answer is replaced by 4.01 Unauthorized with an
/// Echo option (RFC 9175 §2.4); a client that repeats the request with that Echo has shown it receives
/// at its address and gets the answer. Multicast requests are not bounded here (their answers go out
/// after leisure, one per member; RFC 7252 §8.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmplificationLimit {
    pub factor: usize,
    pub floor: usize,
    /// How long an Echo value stays good.
    pub echo_lifetime: Duration,
}

impl Default for AmplificationLimit {
    fn default() -> Self {
        AmplificationLimit { factor: 3, floor: 64, echo_lifetime: Duration::from_secs(60) }
    }
}

impl Default for EndpointConfig {
    fn default() -> Self {
        EndpointConfig {
            params: TransmissionParams::default(),
            seed: 0,
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
            shard: crate::Shard::ALONE,
        }
    }
}

impl EndpointConfig {
    pub fn with_seed(seed: u64) -> EndpointConfig {
        EndpointConfig { seed, ..EndpointConfig::default() }
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
