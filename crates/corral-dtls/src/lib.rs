//! # corral-dtls
//!
//! DTLS 1.2 (RFC 6347), RFC 7252 §9's security binding for `coaps://`, as a sans-IO layer that sits between
//! a socket (or the simulated link) and corral-proto's message layer: ciphertext datagrams in with
//! [`DtlsLayer::handle_datagram`], plaintext CoAP out of [`DtlsLayer::poll_plaintext`]; plaintext in with
//! [`DtlsLayer::send`], records out of [`DtlsLayer::poll_transmit`]; [`DtlsLayer::poll_timeout`] /
//! [`DtlsLayer::handle_timeout`] for flight retransmission and idle sessions. It never reads a clock
//! (`now` is passed in, on corral's [`Instant`]) nor opens a socket.
//!
//! What this crate owns:
//! - **The stateless cookie exchange** (`cookie.rs`): a ClientHello without a valid cookie is answered
//!   with a 60-byte HelloVerifyRequest and forgotten; a session is made only for a ClientHello that
//!   returns a cookie bound to its source address, so a flood from spoofed addresses keeps no state
//!   ([`DtlsLayer::sessions`] stays 0, [`DtlsStats::cookies_sent`] counts it).
//! - **A bounded session table** keyed by peer address: at most [`DtlsConfig::max_sessions`]; a new peer
//!   in a full table evicts the least recently active session, a handshake before an established one
//!   (the endpoint's peer table keeps the same discipline: idle and unproven state goes first).
//! - **Connection IDs** (RFC 9146, [`DtlsConfig::connection_id`]): a server gives each session a random
//!   [`CID_LEN`]-byte CID derived from the layer's secret and indexes the table by it too; a record
//!   from an address without a session that carries a known CID is handed to that session, which moves
//!   to the new address only if the record authenticated and is newer than any before (RFC 9146 §6:
//!   never on an unauthenticated or replayed record, which is dropped and leaves the session as it
//!   was). A client offers an empty CID (it has one server address and wants no CID back).
//! - **Closing**: close_notify from the peer ends the session; a session idle for
//!   [`DtlsConfig::idle_timeout`] is closed with close_notify; a failed handshake ends the session, and a
//!   server tells the peer why with a fatal alert (no shared suite, bad Finished), except which PSK
//!   identities exist: an unknown identity is answered like a wrong key, with decrypt_error (RFC 4279 §2).
//! - **Why a handshake failed**, as a [`HandshakeFailure`] in [`DtlsEvent::Failed`] (`failure.rs`), so a
//!   client can say it in one line.
//! - **Whom to trust**: a peer's X.509 certificate is checked against the CAs (`x509.rs`), a peer's raw
//!   public key (RFC 7250) against the trusted keys (`rpk.rs`, which also says how a key is
//!   authenticated and why its identity is an RFC 6920 `ni:` URI); dimpl hands over the peer's leaf or
//!   key and trusts nothing itself.
//!
//! What it does not own: the handshake, the record layer, the replay window, retransmission of flights
//! and the cipher suites are dimpl's.
//!
//! ## The library: dimpl, patched (vendor/dimpl)
//!
//! Chosen after a spike against the pion-derived `rtc-dtls` and OpenSSL:
//! - **dimpl** is sans-IO in the same shape as corral (`handle_packet` / `poll_output` / `handle_timeout`,
//!   time passed in), has `forbid(unsafe_code)`, DTLS 1.2 and 1.3, `TLS_PSK_WITH_AES_128_CCM_8` (RFC 7252
//!   §9.1.3.1's mandatory PSK suite), a pure-Rust crypto provider (RustCrypto: no C build on a 2-core
//!   machine), the record replay window, flight retransmission, and refuses renegotiation. It lacked
//!   Connection ID (RFC 9146), `TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8` and raw public keys (RFC 7250): all
//!   three are corral's patches to it.
//! - **rtc-dtls** has both CCM_8 suites but brings ring (a C build), rustls, x509-parser and rkyv, draws
//!   its randomness from a global generator, and has no Connection ID either.
//! - **OpenSSL** is not sans-IO (BIO pairs), a C dependency, and has no Connection ID and no plan for it.
//!
//! dimpl's one gap for this layer's first duty was the cookie: its server instance keeps the cookie
//! exchange inside the per-peer instance (so a spoofed ClientHello would cost an instance) and binds the
//! cookie to the client random only, not to the address. corral does the exchange itself (`cookie.rs`),
//! and the patch (`vendor/dimpl/README.corral.md`) lets a fresh server instance accept the cookie-bearing
//! second ClientHello (message_seq 1).
//!
//! Connection ID is the second patch (the `connection_id` extension, `tls12_cid` records, RFC 9146 §5's
//! additional data, and a counter of authenticated records that tells this layer when a session may
//! move). It went into dimpl rather than a switch of library because no candidate has it for DTLS 1.2
//! in Rust (rtc-dtls and OpenSSL lack it too), because dimpl's record layer is one module with one
//! encrypt and one decrypt path (the patch is about 250 lines, each marked and listed in
//! `vendor/dimpl/README.corral.md`), and because everything else this layer relies on — sans-IO shape,
//! no C build, the cookie patch — would have to be redone on another library. The patch is checked
//! against an independent implementation (pion/dtls, through go-coap) in corral's interop tests.
//!
//! Raw public keys are the last patch (the two certificate type extensions, the SubjectPublicKeyInfo
//! form of the Certificate message, signatures checked with the bare key: about 200 lines, item 7 of
//! `vendor/dimpl/README.corral.md`), checked against libcoap's GnuTLS build both ways.
//!
//! ## Randomness and time
//!
//! The driver hands in a 256-bit secret (from the OS's CSPRNG on real sockets, from the seed in the
//! simulator and tests); everything random derives from it: the cookie key, the Connection IDs, and for
//! each session the key of dimpl's generator (ChaCha20, `corral patch` `Config::rng_key`), from which
//! dimpl draws the session's randoms, record nonces, timer jitter and ECDHE keys (ECDSA signatures are
//! deterministic, RFC 6979). So a secret from the OS keeps every value an attacker must not guess
//! unguessable, and a secret from a seed makes a simulated run repeat byte for byte. Time is corral's
//! [`Instant`], handed to dimpl as its own `dimpl::Instant` (`corral patch`: time since the same zero):
//! nothing here reads a clock.
//!
//! ## The secure node
//!
//! A socket that speaks DTLS is driven through one type, [`SecureNode`] (`node.rs`): a node (or bare
//! endpoint) behind a server layer, per-peer client layers and a client layer for any other peer, with
//! plain CoAP told apart by the first byte (RFC 7983) and one `poll_timeout`. The tokio driver, the
//! simulator and the load generator all drive it; none of them composes layers itself.
//!
//! ## Errors
//!
//! Grouped by whose fault (`error.rs`): credentials that do not load ([`CredentialError`], malformed
//! input: the credential formats are `credentials.rs`'s, `x509.rs`'s and `rpk.rs`'s), a configuration
//! that cannot run ([`ConfigError`], caller misuse), a handshake that fails ([`HandshakeFailure`], the
//! peer's doing, reported as an event).

mod cookie;
mod credentials;
mod error;
mod failure;
mod node;
mod rpk;
mod x509;

use corral_proto::{Duration, Instant, Transmit};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use tracing::{debug, info, trace, warn};

pub use credentials::{load_peer_psks, peer_psks_from_json};
pub use dimpl;
pub use error::{ConfigError, CredentialError, CredentialErrorKind};
pub use failure::HandshakeFailure;
pub use node::{is_dtls, DtlsNumbers, Plaintext, Port, SecureConfig, SecureEvent, SecureNode};
pub use rpk::{ni_uri, PeerKeys, Rpk};
pub use x509::X509;

/// PSK identities and their keys (a server's credentials). Its `Debug` shows the identities, never a key.
#[derive(Clone, Default)]
pub struct PskKeys {
    keys: HashMap<Vec<u8>, Vec<u8>>,
}

impl std::fmt::Debug for PskKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<String> = self.keys.keys().map(|i| String::from_utf8_lossy(i).into_owned()).collect();
        f.debug_struct("PskKeys").field("identities", &ids).finish_non_exhaustive()
    }
}

impl PskKeys {
    pub fn new() -> PskKeys {
        PskKeys::default()
    }

    pub fn insert(&mut self, identity: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) {
        self.keys.insert(identity.into(), key.into());
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// Which side of the handshakes this layer takes, and with which credentials. Its `Debug` shows no key.
#[derive(Clone)]
pub enum Role {
    /// Accepts sessions from peers that know one of these PSK identities.
    Server(Arc<PskKeys>),
    /// Opens a session to each peer it sends to, with this PSK identity and key (libcoap's `-u` / `-k`).
    Client { identity: Vec<u8>, key: Vec<u8> },
}

impl std::fmt::Debug for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Role::Server(keys) => f.debug_tuple("Server").field(keys).finish(),
            Role::Client { identity, .. } => {
                f.debug_struct("Client").field("identity", &String::from_utf8_lossy(identity)).finish_non_exhaustive()
            }
        }
    }
}

/// How a [`DtlsLayer`] behaves.
#[derive(Debug, Clone)]
pub struct DtlsConfig {
    pub role: Role,
    /// Sessions kept at once (handshakes included); a new one evicts the least recently active.
    pub max_sessions: usize,
    /// A session with no record either way for this long is closed (close_notify).
    pub idle_timeout: Duration,
    /// A handshake not done in this long fails.
    pub handshake_timeout: Duration,
    /// The largest datagram the layer sends (flights are fragmented to fit).
    pub mtu: usize,
    /// Plaintext datagrams a client queues for a peer while its handshake runs; more are dropped (the
    /// message layer retransmits).
    pub max_queued: usize,
    /// Negotiate Connection IDs (RFC 9146): a server gives each session a random
    /// [`CID_LEN`]-byte CID when the client offers the extension, and follows a session to a new
    /// address; a client offers an empty CID (it sends the server's, and wants none back). On by
    /// default; a peer without the extension is unaffected.
    pub connection_id: bool,
    /// X.509 (RFC 7252 §9.1.3.3): this side's certificate and key, and the CAs a peer's certificate
    /// must be signed by. A server with it also accepts certificate handshakes
    /// (`TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8` first) and requires a client certificate in them; a client
    /// with it authenticates by certificate only (its PSK identity and key are not used). The peer's
    /// subject is [`DtlsEvent::Connected`]'s identity.
    pub x509: Option<Arc<X509>>,
    /// Raw public keys (RFC 7250, RFC 7252 §9.1.3.2): this side's key pair and the peers' keys it
    /// accepts, on the certificate suites (`TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8` and the others dimpl
    /// has). Takes the place of [`x509`](Self::x509) (a side authenticates one way); a server with it
    /// requires the client's key too, and a peer that does not negotiate raw public keys is refused.
    /// The peer's `ni:` identity ([`ni_uri`]) is [`DtlsEvent::Connected`]'s identity.
    pub rpk: Option<Arc<Rpk>>,
}

impl DtlsConfig {
    pub fn new(role: Role) -> DtlsConfig {
        DtlsConfig {
            role,
            max_sessions: 1024,
            idle_timeout: Duration::from_secs(300),
            handshake_timeout: Duration::from_secs(30),
            mtu: 1280,
            max_queued: 16,
            connection_id: true,
            x509: None,
            rpk: None,
        }
    }
}

/// What happened to a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DtlsEvent {
    /// The handshake with `peer` is done; `identity` is the PSK identity it proved, the subject of its
    /// certificate (RFC 4514 text), or the `ni:` URI of its raw public key.
    Connected { peer: SocketAddr, identity: Option<Vec<u8>> },
    /// The handshake with `peer` failed.
    Failed { peer: SocketAddr, reason: HandshakeFailure },
    /// The session with `peer` ended (close_notify either way, idle, evicted, or a fatal error after the
    /// handshake).
    Closed { peer: SocketAddr },
    /// The session with `from` follows its peer to `to` by Connection ID (RFC 9146 §6): `from` has no
    /// session any more.
    Moved { from: SocketAddr, to: SocketAddr },
}

/// The layer's counters ([`DtlsLayer::stats`]), for tests and for whoever watches the node (`/metrics`):
/// plain numbers, never a metrics dependency.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DtlsStats {
    /// HelloVerifyRequests sent (ClientHellos without a valid cookie, answered without state).
    pub cookies_sent: u64,
    pub handshakes_done: u64,
    pub handshakes_failed: u64,
    /// The failed handshakes by reason (they sum to `handshakes_failed`).
    pub failures: FailureCounts,
    /// Sessions closed for idleness or evicted from a full table.
    pub idle_closed: u64,
    pub evicted: u64,
    /// Datagrams from peers without a session that were not ClientHellos, dropped (records with a
    /// known Connection ID from a new address that did not authenticate among them).
    pub dropped: u64,
    /// Of `dropped`, those from a peer without a session and without a known Connection ID (a record
    /// with one is the session's to judge, and counted in `records`).
    pub no_session: u64,
    /// Records the sessions discarded silently, by reason (dimpl's count, sessions that ended included).
    pub records: dimpl::Discarded,
    /// Sessions that followed their peer to a new address by Connection ID (RFC 9146 §6).
    pub moved: u64,
    /// Handshake flights sent again when dimpl's retransmission timer fired (each timer that produced
    /// records counts once, however many datagrams the flight took).
    pub flights_retransmitted: u64,
}

impl DtlsStats {
    /// The counters as metrics (`docs/metrics.md`, "DTLS"), failures and drops labelled `reason`.
    pub fn describe(&self, out: &mut corral_proto::MetricSink<'_>) {
        let c = corral_proto::Metric::counter;
        out(c(
            "dtls_cookies_sent",
            "HelloVerifyRequests sent: ClientHellos without a valid cookie, answered without keeping state",
            self.cookies_sent,
        ));
        out(c("dtls_handshakes_completed", "DTLS handshakes completed", self.handshakes_done));
        for (reason, v) in self.failures_by_reason() {
            out(c("dtls_handshakes_failed", "DTLS handshakes failed, by reason", v).labelled(&[("reason", reason)]));
        }
        for (reason, v) in self.drops_by_reason() {
            let m = c("dtls_records_dropped", "DTLS records and datagrams dropped without an answer, by reason", v);
            out(m.labelled(&[("reason", reason)]));
        }
        out(c("dtls_sessions_evicted", "DTLS sessions evicted from a full session table", self.evicted));
        out(c("dtls_sessions_idle_closed", "DTLS sessions closed after their idle timeout", self.idle_closed));
        out(c(
            "dtls_sessions_moved",
            "DTLS sessions that followed their peer to a new address by Connection ID",
            self.moved,
        ));
    }
}

/// Failed handshakes by [`HandshakeFailure`] (an untrusted certificate, and a raw public key untrusted,
/// refused or not negotiated, count as a bad certificate; an alert or anything else as `other`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FailureCounts {
    pub unknown_identity: u64,
    pub bad_key: u64,
    pub no_shared_suite: u64,
    pub bad_certificate: u64,
    pub timeout: u64,
    pub other: u64,
}

impl FailureCounts {
    fn count(&mut self, reason: &HandshakeFailure) {
        let n = match reason {
            HandshakeFailure::UnknownIdentity => &mut self.unknown_identity,
            HandshakeFailure::BadKey => &mut self.bad_key,
            HandshakeFailure::NoSharedSuite => &mut self.no_shared_suite,
            HandshakeFailure::BadCertificate
            | HandshakeFailure::UntrustedCertificate(_)
            | HandshakeFailure::UntrustedKey(_)
            | HandshakeFailure::RefusedKey
            | HandshakeFailure::NoRawPublicKey => &mut self.bad_certificate,
            HandshakeFailure::Timeout => &mut self.timeout,
            HandshakeFailure::Alert(_) | HandshakeFailure::Other(_) => &mut self.other,
        };
        *n += 1;
    }
}

impl DtlsStats {
    /// The failed handshakes as (reason, count), the reasons in snake case (a metric's label values).
    pub fn failures_by_reason(&self) -> [(&'static str, u64); 6] {
        let f = &self.failures;
        [
            ("unknown_identity", f.unknown_identity),
            ("bad_key", f.bad_key),
            ("no_shared_suite", f.no_shared_suite),
            ("bad_certificate", f.bad_certificate),
            ("timeout", f.timeout),
            ("other", f.other),
        ]
    }

    /// The records and datagrams dropped without an answer as (reason, count): dimpl's discards and
    /// the datagrams from peers without a session.
    pub fn drops_by_reason(&self) -> [(&'static str, u64); 5] {
        let r = &self.records;
        [
            ("garbage", r.garbage),
            ("bad_mac", r.bad_mac),
            ("replay", r.replay),
            ("unknown_epoch", r.unknown_epoch),
            ("no_session", self.no_session),
        ]
    }

    /// Adds `other`'s counts to these (the layers of one socket, summed).
    pub fn add(&mut self, other: &DtlsStats) {
        self.cookies_sent += other.cookies_sent;
        self.handshakes_done += other.handshakes_done;
        self.handshakes_failed += other.handshakes_failed;
        let (f, g) = (&mut self.failures, &other.failures);
        f.unknown_identity += g.unknown_identity;
        f.bad_key += g.bad_key;
        f.no_shared_suite += g.no_shared_suite;
        f.bad_certificate += g.bad_certificate;
        f.timeout += g.timeout;
        f.other += g.other;
        self.idle_closed += other.idle_closed;
        self.evicted += other.evicted;
        self.dropped += other.dropped;
        self.no_session += other.no_session;
        add_discarded(&mut self.records, &other.records);
        self.moved += other.moved;
        self.flights_retransmitted += other.flights_retransmitted;
    }
}

fn add_discarded(to: &mut dimpl::Discarded, d: &dimpl::Discarded) {
    to.garbage += d.garbage;
    to.bad_mac += d.bad_mac;
    to.replay += d.replay;
    to.unknown_epoch += d.unknown_epoch;
}

/// The length of the Connection IDs a server gives its sessions: 48 random bits, short for a
/// constrained link and long enough that a guessed one is also a forged record.
pub const CID_LEN: usize = 6;

/// RFC 9146 §4: the outer content type of a record with a Connection ID, which follows the record's
/// epoch and sequence number (11 bytes in).
const TLS12_CID: u8 = 25;
const CID_AT: usize = 11;

struct Session {
    dtls: dimpl::Dtls,
    connected: bool,
    /// The identity the peer's handshake named (server), shared with this session's PSK resolver.
    identity: Arc<Mutex<Option<Named>>>,
    last_active: Instant,
    /// dimpl's next timer.
    timer: Option<Instant>,
    /// Plaintext waiting for the handshake (client).
    queued: VecDeque<Vec<u8>>,
    /// The local address the peer reached (answers leave from it).
    local: Option<IpAddr>,
    lru: u64,
    /// The Connection ID a server gave this session (used when the client negotiated CIDs).
    cid: Option<Vec<u8>>,
}

/// The PSK identity a peer named, and whether the server knows it.
#[derive(Debug, Clone)]
struct Named {
    identity: Vec<u8>,
    known: bool,
}

/// Looks a PSK identity up and remembers which one the peer named (dimpl reports an unknown identity as
/// a Finished that does not decrypt, so the layer tells the two apart by this).
struct Resolver {
    keys: Arc<PskKeys>,
    seen: Arc<Mutex<Option<Named>>>,
}

impl dimpl::PskResolver for Resolver {
    fn resolve(&self, identity: &[u8]) -> Option<Vec<u8>> {
        let key = self.keys.keys.get(identity).cloned();
        if let Ok(mut seen) = self.seen.lock() {
            *seen = Some(Named { identity: identity.to_vec(), known: key.is_some() });
        }
        key
    }
}

/// A fixed key (a client's).
struct FixedKey(Vec<u8>);

impl dimpl::PskResolver for FixedKey {
    fn resolve(&self, _identity: &[u8]) -> Option<Vec<u8>> {
        Some(self.0.clone())
    }
}

/// The DTLS sessions of one socket. See the crate documentation.
pub struct DtlsLayer {
    config: DtlsConfig,
    secret: [u8; 32],
    seeds: u64,
    sessions: HashMap<SocketAddr, Session>,
    /// A server's sessions by their Connection ID (RFC 9146), as many as `sessions`.
    by_cid: HashMap<Vec<u8>, SocketAddr>,
    lru_clock: u64,
    transmits: VecDeque<Transmit>,
    plaintext: VecDeque<(SocketAddr, Vec<u8>)>,
    events: VecDeque<DtlsEvent>,
    stats: DtlsStats,
    buf: Vec<u8>,
    /// dimpl's crypto provider, whose signature check verifies peer certificates against the CAs.
    provider: dimpl::crypto::CryptoProvider,
    /// dimpl checked its crypto provider when this layer built its first session's configuration: the
    /// next sessions skip the check (a key pair per group, ~7 ms: most of a PSK handshake otherwise).
    provider_validated: bool,
}

impl DtlsLayer {
    /// A layer keyed by `secret`: from a CSPRNG on real sockets, from the seed in a simulation (see the
    /// crate docs: every random value of the layer and its sessions derives from it).
    pub fn new(config: DtlsConfig, secret: [u8; 32]) -> DtlsLayer {
        DtlsLayer {
            buf: vec![0; config.mtu.max(256)],
            config,
            secret,
            seeds: 0,
            sessions: HashMap::new(),
            by_cid: HashMap::new(),
            lru_clock: 0,
            transmits: VecDeque::new(),
            plaintext: VecDeque::new(),
            events: VecDeque::new(),
            stats: DtlsStats::default(),
            provider: dimpl::crypto::rust_crypto::default_provider(),
            provider_validated: false,
        }
    }

    pub fn is_server(&self) -> bool {
        matches!(self.config.role, Role::Server(_))
    }

    /// Sessions held (handshakes included).
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// Whether the session with `peer` has finished its handshake.
    pub fn is_connected(&self, peer: SocketAddr) -> bool {
        self.sessions.get(&peer).is_some_and(|s| s.connected)
    }

    /// Whether there is a session with `peer`, in its handshake or established.
    pub fn has_session(&self, peer: SocketAddr) -> bool {
        self.sessions.contains_key(&peer)
    }

    /// The counters so far; `records` sums the discards of the live sessions and of those that ended.
    pub fn stats(&self) -> DtlsStats {
        let mut stats = self.stats;
        for s in self.sessions.values() {
            add_discarded(&mut stats.records, &s.dtls.discarded());
        }
        stats
    }

    /// The Connection ID the session with `peer` negotiated (RFC 9146), this side's: the one the
    /// peer's records carry (empty: none). `None` without a session or without CIDs.
    pub fn connection_id(&self, peer: SocketAddr) -> Option<&[u8]> {
        self.sessions.get(&peer)?.dtls.connection_id()
    }

    /// 32 bytes derived from the layer's secret for `label`, fresh at each call.
    fn derive(&mut self, label: &[u8]) -> [u8; 32] {
        self.seeds += 1;
        derive_secret(&self.secret, label, self.seeds)
    }

    /// The key of one session's generator, from which dimpl draws all of the session's randomness
    /// (crate docs), derived from the layer's secret.
    fn next_rng_key(&mut self) -> [u8; 32] {
        self.derive(b"corral-dtls session rng")
    }

    /// A Connection ID no session holds, derived from the layer's secret (unpredictable on real
    /// sockets, reproducible under a seed).
    fn fresh_cid(&mut self) -> Vec<u8> {
        loop {
            let cid = self.derive(b"corral-dtls connection id")[..CID_LEN].to_vec();
            if !self.by_cid.contains_key(&cid) {
                return cid;
            }
        }
    }

    fn dimpl_config(
        &mut self,
        seen: &Arc<Mutex<Option<Named>>>,
        cid: Option<Vec<u8>>,
    ) -> Result<Arc<dimpl::Config>, dimpl::Error> {
        let rng_key = self.next_rng_key();
        let builder = dimpl::Config::builder()
            .mtu(self.config.mtu)
            .use_server_cookie(false)
            // A CoAP endpoint has no SRTP; pion's server refuses a use_srtp it cannot match.
            .offer_srtp(false)
            .provider_validated(self.provider_validated)
            .handshake_timeout(std::time::Duration::from_micros(self.config.handshake_timeout.as_micros()))
            .rng_key(rng_key)
            .raw_public_key(self.config.rpk.is_some());
        let builder = match cid {
            Some(cid) => builder.connection_id(cid),
            None => builder,
        };
        let no_keys = self.credentials().is_none();
        let builder = match &self.config.role {
            Role::Server(keys) if !keys.is_empty() || no_keys => {
                builder.with_psk_server(None, Arc::new(Resolver { keys: keys.clone(), seen: seen.clone() }))
            }
            Role::Client { identity, key } if no_keys => {
                builder.with_psk_client(identity.clone(), Arc::new(FixedKey(key.clone())))
            }
            _ => builder,
        };
        let config = builder.build().map(Arc::new)?;
        self.provider_validated = true;
        Ok(config)
    }

    /// This side's key pair for the certificate suites: its raw public key or its X.509 certificate.
    fn credentials(&self) -> Option<dimpl::DtlsCertificate> {
        match (&self.config.rpk, &self.config.x509) {
            (Some(r), _) => {
                Some(dimpl::DtlsCertificate { certificate: r.public_key.clone(), private_key: r.key.clone() })
            }
            (None, Some(x)) => {
                Some(dimpl::DtlsCertificate { certificate: x.certificate.clone(), private_key: x.key.clone() })
            }
            (None, None) => None,
        }
    }

    /// A new session with `peer`, evicting one from a full table first.
    /// `hello_verify_seq`: a server's, the record sequence number of its HelloVerifyRequest to `peer`.
    fn open(
        &mut self,
        now: Instant,
        peer: SocketAddr,
        local: Option<IpAddr>,
        hello_verify_seq: u64,
    ) -> Result<(), dimpl::Error> {
        if self.sessions.len() >= self.config.max_sessions.max(1) {
            self.evict(now);
        }
        let identity = Arc::new(Mutex::new(None));
        // A server's sessions each get their own CID; a client asks for none (RFC 9146 §3).
        let cid = match self.config.role {
            _ if !self.config.connection_id => None,
            Role::Server(_) => Some(self.fresh_cid()),
            Role::Client { .. } => Some(Vec::new()),
        };
        let config = self.dimpl_config(&identity, cid.clone())?;
        let mut dtls = match self.credentials() {
            Some(c) => dimpl::Dtls::new_12(config, c, to_dimpl(now)),
            None => dimpl::Dtls::new_12_psk(config, to_dimpl(now)),
        };
        match self.config.role {
            Role::Server(_) => dtls.expect_verified_cookie(hello_verify_seq),
            Role::Client { .. } => dtls.set_active(true),
        }
        // dimpl draws its random and (a client) sends its ClientHello on the first timeout.
        dtls.handle_timeout(to_dimpl(now))?;
        self.lru_clock += 1;
        let session = Session {
            dtls,
            connected: false,
            identity,
            last_active: now,
            timer: None,
            queued: VecDeque::new(),
            local,
            lru: self.lru_clock,
            cid: cid.filter(|c| !c.is_empty()),
        };
        self.insert(peer, session);
        Ok(())
    }

    /// Keeps `session` as the session with `peer`, findable by its Connection ID.
    fn insert(&mut self, peer: SocketAddr, session: Session) {
        if let Some(cid) = &session.cid {
            self.by_cid.insert(cid.clone(), peer);
        }
        self.sessions.insert(peer, session);
    }

    /// Takes the session with `peer` out of the table (and its Connection ID), to move it.
    fn remove(&mut self, peer: SocketAddr) -> Option<Session> {
        let session = self.sessions.remove(&peer)?;
        if let Some(cid) = &session.cid {
            self.by_cid.remove(cid);
        }
        Some(session)
    }

    /// Ends the session with `peer`: forgets it, keeping the count of the records it discarded.
    fn end(&mut self, peer: SocketAddr) -> Option<Session> {
        let session = self.remove(peer)?;
        add_discarded(&mut self.stats.records, &session.dtls.discarded());
        Some(session)
    }

    /// Forgets the least recently active session, a handshake before an established one.
    fn evict(&mut self, now: Instant) {
        let victim = self.sessions.iter().min_by_key(|(_, s)| (s.connected, s.lru)).map(|(peer, _)| *peer);
        if let Some(peer) = victim {
            warn!(%peer, max = self.config.max_sessions, "DTLS session table full: evicting the least recently active session");
            self.stats.evicted += 1;
            self.close(now, peer);
        }
    }

    /// Closes the session with `peer` with close_notify.
    fn close(&mut self, now: Instant, peer: SocketAddr) {
        if let Some(s) = self.sessions.get_mut(&peer) {
            if s.connected && s.dtls.close().is_ok() {
                self.drain(now, peer);
            }
        }
        if self.end(peer).is_some() {
            self.events.push_back(DtlsEvent::Closed { peer });
        }
    }

    /// A datagram from `peer`, which reached local address `local`.
    pub fn handle_datagram(&mut self, now: Instant, peer: SocketAddr, local: Option<IpAddr>, data: &[u8]) {
        if !self.sessions.contains_key(&peer) {
            if let Some(old) = self.session_by_cid(data) {
                self.handle_moved(now, old, peer, local, data);
                return;
            }
            if !self.accept(now, peer, local, data) {
                return;
            }
        }
        let Some(s) = self.sessions.get_mut(&peer) else { return };
        s.last_active = now;
        self.lru_clock += 1;
        s.lru = self.lru_clock;
        if local.is_some() {
            s.local = local;
        }
        let result = s.dtls.handle_packet(data);
        self.after(now, peer, result);
    }

    /// The address of the established session whose Connection ID the record at the start of `data`
    /// carries (a server's sessions; RFC 9146 §4).
    fn session_by_cid(&self, data: &[u8]) -> Option<SocketAddr> {
        if data.first() != Some(&TLS12_CID) {
            return None;
        }
        let peer = *self.by_cid.get(data.get(CID_AT..CID_AT + CID_LEN)?)?;
        self.sessions.get(&peer).filter(|s| s.connected).map(|_| peer)
    }

    /// A datagram from `peer` for the session with `old`, found by its Connection ID. The session moves
    /// to `peer` only if a record in it authenticated and is newer than any before (RFC 9146 §6);
    /// otherwise nothing changes: a record replayed or forged from another address neither moves nor
    /// ends the session.
    fn handle_moved(&mut self, now: Instant, old: SocketAddr, peer: SocketAddr, local: Option<IpAddr>, data: &[u8]) {
        let Some(s) = self.sessions.get_mut(&old) else { return };
        let before = s.dtls.newest_authenticated_record();
        let result = s.dtls.handle_packet(data);
        if s.dtls.newest_authenticated_record() <= before {
            trace!(%peer, session = %old, "record with a known Connection ID from another address did not authenticate: dropped");
            self.stats.dropped += 1;
            if result.is_ok() {
                self.drain(now, old);
            }
            return;
        }
        let Some(mut s) = self.remove(old) else { return };
        s.last_active = now;
        self.lru_clock += 1;
        s.lru = self.lru_clock;
        if local.is_some() {
            s.local = local;
        }
        self.insert(peer, s);
        debug!(from = %old, to = %peer, "DTLS session moved to a new address by its Connection ID");
        self.stats.moved += 1;
        self.events.push_back(DtlsEvent::Moved { from: old, to: peer });
        self.after(now, peer, result);
    }

    /// A datagram from a peer without a session: a ClientHello with a valid cookie opens one (true); one
    /// without is answered statelessly; anything else is dropped.
    fn accept(&mut self, now: Instant, peer: SocketAddr, local: Option<IpAddr>, data: &[u8]) -> bool {
        if !self.is_server() {
            trace!(%peer, "DTLS datagram from a peer without a session: dropped");
            self.stats.dropped += 1;
            self.stats.no_session += 1;
            return false;
        }
        let Some(hello) = cookie::client_hello(data) else {
            trace!(%peer, len = data.len(), "datagram from a peer without a DTLS session is no ClientHello: dropped");
            self.stats.dropped += 1;
            self.stats.no_session += 1;
            return false;
        };
        if !cookie::verify(&self.secret, peer, &hello) {
            trace!(%peer, "ClientHello without a valid cookie: HelloVerifyRequest");
            let payload = cookie::hello_verify_request(&self.secret, peer, &hello);
            self.stats.cookies_sent += 1;
            self.transmits.push_back(Transmit { dst: peer, payload, src: local });
            return false;
        }
        // The HelloVerifyRequest echoed the first ClientHello's record number, which is below this one's.
        let seq = hello.record_seq.iter().fold(0u64, |n, b| n << 8 | u64::from(*b));
        match self.open(now, peer, local, seq) {
            Ok(()) => {
                debug!(%peer, "DTLS handshake started");
                true
            }
            Err(e) => {
                warn!(%peer, error = %e, "cannot start a DTLS session");
                false
            }
        }
    }

    /// Drains dimpl's output for `peer` after a call that returned `result`, ending the session on an error.
    fn after(&mut self, now: Instant, peer: SocketAddr, result: Result<(), dimpl::Error>) {
        match result {
            Ok(()) => self.drain(now, peer),
            Err(e) => self.fail(now, peer, &e),
        }
    }

    fn fail(&mut self, now: Instant, peer: SocketAddr, e: &dimpl::Error) {
        self.drain(now, peer);
        let Some(s) = self.sessions.get(&peer) else { return };
        if s.connected {
            debug!(%peer, error = %e, "DTLS session ended");
            self.end(peer);
            self.events.push_back(DtlsEvent::Closed { peer });
            return;
        }
        let unknown = s.identity.lock().ok().and_then(|i| i.clone()).is_some_and(|n| !n.known);
        let reason = match HandshakeFailure::from_error(e, self.config.rpk.is_some()) {
            _ if unknown => HandshakeFailure::UnknownIdentity,
            // A server's record that does not decrypt during the handshake is the client's Finished under
            // another key.
            HandshakeFailure::Other(_) if matches!(e, dimpl::Error::CryptoError(_)) => HandshakeFailure::BadKey,
            r => r,
        };
        self.fail_with(peer, reason);
    }

    /// Ends the handshake with `peer` for `reason`: a server tells the peer why with a fatal alert, and
    /// so does a client that refuses the server's certificate or key.
    fn fail_with(&mut self, peer: SocketAddr, reason: HandshakeFailure) {
        let Some(s) = self.end(peer) else { return };
        info!(%peer, %reason, "DTLS handshake failed");
        self.stats.handshakes_failed += 1;
        self.stats.failures.count(&reason);
        let tell = self.is_server()
            || matches!(reason, HandshakeFailure::UntrustedCertificate(_) | HandshakeFailure::UntrustedKey(_));
        if tell && reason != HandshakeFailure::Timeout {
            let payload = cookie::fatal_alert(reason.alert());
            self.transmits.push_back(Transmit { dst: peer, payload, src: s.local });
        }
        self.events.push_back(DtlsEvent::Failed { peer, reason });
    }

    /// Moves everything dimpl has for `peer` out: records to send, plaintext, the next timer, the end of
    /// the handshake (which releases queued plaintext).
    fn drain(&mut self, now: Instant, peer: SocketAddr) {
        loop {
            let mut release = false;
            let mut closed = false;
            let mut untrusted = None;
            {
                let Some(s) = self.sessions.get_mut(&peer) else { return };
                loop {
                    match s.dtls.poll_output(&mut self.buf) {
                        // The peer's certificate or raw public key, before its handshake ends: trusted
                        // or the end of it.
                        dimpl::Output::PeerCert(der) => {
                            let checked = match (&self.config.rpk, &self.config.x509) {
                                (Some(r), _) => rpk::verify(&r.peers, der).map_err(HandshakeFailure::UntrustedKey),
                                (None, Some(x)) => x509::verify(&x.ca, der, &self.provider)
                                    .map_err(HandshakeFailure::UntrustedCertificate),
                                (None, None) => continue,
                            };
                            match checked {
                                Ok(identity) => {
                                    if self.config.rpk.as_ref().is_some_and(|r| r.peers == PeerKeys::Any) {
                                        info!(%peer, %identity, "DTLS peer's raw public key accepted without a check (any key)");
                                    }
                                    if let Ok(mut named) = s.identity.lock() {
                                        *named = Some(Named { identity: identity.into_bytes(), known: true });
                                    }
                                }
                                Err(why) => {
                                    untrusted = Some(why);
                                    break;
                                }
                            }
                        }
                        dimpl::Output::Packet(p) => {
                            self.transmits.push_back(Transmit { dst: peer, payload: p.to_vec(), src: s.local })
                        }
                        dimpl::Output::BufferTooSmall { needed } => {
                            let n = needed.max(self.buf.len() + 1);
                            self.buf.resize(n, 0);
                        }
                        dimpl::Output::Timeout(t) => {
                            s.timer = Some(from_dimpl(t));
                            break;
                        }
                        dimpl::Output::Connected => {
                            s.connected = true;
                            release = true;
                            let identity = s.identity.lock().ok().and_then(|i| i.clone()).map(|n| n.identity);
                            debug!(%peer, "DTLS handshake done");
                            self.stats.handshakes_done += 1;
                            self.events.push_back(DtlsEvent::Connected { peer, identity });
                        }
                        dimpl::Output::ApplicationData(d) => self.plaintext.push_back((peer, d.to_vec())),
                        dimpl::Output::CloseNotify => closed = true,
                        _ => {}
                    }
                }
            }
            if let Some(reason) = untrusted {
                self.fail_with(peer, reason);
                return;
            }
            if closed {
                debug!(%peer, "DTLS close_notify");
                self.end(peer);
                self.events.push_back(DtlsEvent::Closed { peer });
                return;
            }
            if !release {
                return;
            }
            if let Some(s) = self.sessions.get_mut(&peer) {
                let mut failed = None;
                while let Some(p) = s.queued.pop_front() {
                    if let Err(e) = s.dtls.send_application_data(&p) {
                        failed = Some(e);
                        break;
                    }
                }
                if let Some(e) = failed {
                    self.fail(now, peer, &e);
                    return;
                }
            }
        }
    }

    /// Sends `plaintext` to `peer` at `now`: at once on an established session; a client queues it
    /// behind a handshake it starts if there is none; a server drops it (only a peer opens a session to a
    /// server).
    pub fn send(&mut self, now: Instant, peer: SocketAddr, plaintext: &[u8]) {
        if !self.sessions.contains_key(&peer) {
            if self.is_server() {
                trace!(%peer, "no DTLS session with the peer: datagram dropped");
                return;
            }
            if let Err(e) = self.open(now, peer, None, 0) {
                warn!(%peer, error = %e, "cannot start a DTLS session");
                return;
            }
            debug!(%peer, "DTLS handshake started");
            self.drain(now, peer);
        }
        let max_queued = self.config.max_queued;
        let Some(s) = self.sessions.get_mut(&peer) else { return };
        if !s.connected {
            if s.queued.len() < max_queued {
                s.queued.push_back(plaintext.to_vec());
            }
            return;
        }
        s.last_active = now;
        let result = s.dtls.send_application_data(plaintext).map(|_| ());
        self.after(now, peer, result);
    }

    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// Plaintext received from a peer, for the message layer.
    pub fn poll_plaintext(&mut self) -> Option<(SocketAddr, Vec<u8>)> {
        self.plaintext.pop_front()
    }

    pub fn poll_event(&mut self) -> Option<DtlsEvent> {
        self.events.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) must next be called: the earliest of dimpl's timers
    /// and the idle deadlines.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let idle = self.config.idle_timeout;
        self.sessions.values().flat_map(|s| [s.timer, Some(s.last_active + idle)]).flatten().min()
    }

    /// Retransmits flights, fails handshakes that ran out of time and closes idle sessions.
    pub fn handle_timeout(&mut self, now: Instant) {
        let idle = self.config.idle_timeout;
        let mut due: Vec<(SocketAddr, bool)> = self
            .sessions
            .iter()
            .filter_map(|(peer, s)| {
                let is_idle = s.last_active + idle <= now;
                (is_idle || s.timer.is_some_and(|t| t <= now)).then_some((*peer, is_idle))
            })
            .collect();
        // In address order, not the table's: a simulated run sends the same datagrams in the same order.
        due.sort_unstable();
        for (peer, is_idle) in due {
            if is_idle {
                debug!(%peer, "DTLS session idle: closed");
                self.stats.idle_closed += 1;
                self.close(now, peer);
                continue;
            }
            if let Some(s) = self.sessions.get_mut(&peer) {
                let result = s.dtls.handle_timeout(to_dimpl(now));
                let before = self.transmits.len();
                self.after(now, peer, result);
                if self.transmits.len() > before && self.sessions.contains_key(&peer) {
                    self.stats.flights_retransmitted += 1;
                }
            }
        }
    }

    /// Closes every session with close_notify (a shutting-down driver calls this before its last flush).
    pub fn close_all(&mut self, now: Instant) {
        let mut peers: Vec<SocketAddr> = self.sessions.keys().copied().collect();
        peers.sort_unstable();
        for peer in peers {
            self.close(now, peer);
        }
    }
}

/// 32 bytes derived from `secret` for `label` and `n` (HMAC-SHA256): independent keys from one secret.
fn derive_secret(secret: &[u8; 32], label: &[u8], n: u64) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("HMAC takes any key");
    mac.update(label);
    mac.update(&n.to_be_bytes());
    mac.finalize().into_bytes().into()
}

/// corral's `now` as dimpl's `Instant`: the same time since the same zero.
fn to_dimpl(now: Instant) -> dimpl::Instant {
    dimpl::Instant::from_duration(std::time::Duration::from_micros(now.as_micros()))
}

/// dimpl's `t` on corral's clock, rounded up to the microsecond: a timer handled at the rounded instant
/// is due (rounded down, it would not be, and the driver would spin).
fn from_dimpl(t: dimpl::Instant) -> Instant {
    let nanos = t.since_zero().as_nanos();
    Instant::from_micros(u64::try_from(nanos.div_ceil(1000)).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests;
