//! `coaps+tcp://`: CoAP over TLS (RFC 8323 §9), with rustls on its `ring` provider around the connections
//! of the `tcp` module.
//!
//! Owns: the TLS settings made from PEM files ([`TlsClientConfig`], [`TlsServerConfig`]: TLS 1.2 and 1.3,
//! ALPN "coap" as RFC 8323 §8.2 registers it, the server verified by its name or IP address as the URI gives
//! it, client certificates required and verified when the server has a CA for them), the handshake of
//! each connection (a server's bounded: [`HANDSHAKE_TIMEOUT`] each, and [`Handshakes`]: at most
//! [`MAX_HANDSHAKES`] under way, and per address as many as its connections leave room for), and the
//! words of a failed handshake for the client (`TlsFailures`, so that its error says why: unknown CA,
//! name mismatch, no certificate). Never frames CoAP: after the handshake the bytes are corral-proto's
//! [`TcpEndpoint`](corral_proto::TcpEndpoint)'s, CSM and all, exactly as over plain TCP.
//!
//! # Handshakes are bounded per address (issue 41 item 2)
//! A handshake holds a socket and a task before the CoAP endpoint (and its per-address limit) hears of the
//! connection, so the limit is applied here too: an address's handshakes under way count toward
//! [`TcpConfig::max_connections_per_address`](corral_proto::TcpConfig) with its established TLS
//! connections, and a new connection from an address at its limit closes that address's *oldest* pending
//! handshake. When the table is full, the newcomer still gets in: the oldest pending handshake of the
//! address holding the most gives way. So one address that keeps connections silent or trickling a
//! ClientHello (a slowloris) churns through its own share and cannot refuse another address's client.
//! Not protected against: many addresses (a botnet, or an IPv6 prefix) each holding a few; a client that
//! takes longer than the attacker's rate of new connections to finish its handshake may then be pushed
//! out, as with any oldest-first table.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{AlertDescription, CertificateError, RootCertStore};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::AbortHandle;

/// The ALPN protocol name of CoAP over TLS (RFC 8323 §8.2).
pub const ALPN: &[u8] = b"coap";
/// How long a server waits for an accepted connection's TLS handshake before closing it.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Server-side TLS handshakes under way at once: a flood of connections that never finish their
/// handshake holds no more than this many sockets and tasks ([`Handshakes`] says which one gives way).
pub const MAX_HANDSHAKES: usize = 256;

/// A server's TLS handshakes under way, and the connections they became, per address (see the module
/// docs). Shared by the accept loop, the handshake tasks and the connections' links.
///
/// The one accept loop admits a handshake, spawns its task and attaches it before it admits the next, so
/// every handshake that may be made to give way has its task to abort.
#[derive(Debug)]
pub(crate) struct Handshakes {
    table: Mutex<Table>,
    /// Handshakes and established TLS connections one address may have at once.
    per_address: usize,
}

#[derive(Debug, Default)]
struct Table {
    /// Handshakes under way, oldest first: their address and how to end them.
    pending: BTreeMap<u64, (IpAddr, Option<AbortHandle>)>,
    /// Per address: handshakes under way, TLS connections established.
    per_ip: HashMap<IpAddr, (usize, usize)>,
    next: u64,
}

impl Table {
    fn count(&mut self, ip: IpAddr) -> &mut (usize, usize) {
        self.per_ip.entry(ip).or_default()
    }

    fn forget_if_idle(&mut self, ip: IpAddr) {
        if self.per_ip.get(&ip) == Some(&(0, 0)) {
            self.per_ip.remove(&ip);
        }
    }

    /// Takes handshake `seq` out; its abort handle, if it was still there.
    fn take(&mut self, seq: u64) -> Option<Option<AbortHandle>> {
        let (ip, abort) = self.pending.remove(&seq)?;
        self.count(ip).0 -= 1;
        self.forget_if_idle(ip);
        Some(abort)
    }

    /// The oldest pending handshake of `ip`; without `ip`, of the address with the most pending.
    fn oldest(&self, ip: Option<IpAddr>) -> Option<u64> {
        let ip = ip.or_else(|| {
            let most = self.per_ip.values().map(|c| c.0).max()?;
            self.pending.values().map(|(a, _)| *a).find(|a| self.per_ip.get(a).is_some_and(|c| c.0 == most))
        })?;
        self.pending.iter().find(|(_, (a, _))| *a == ip).map(|(seq, _)| *seq)
    }
}

impl Handshakes {
    pub(crate) fn new(per_address: usize) -> Arc<Handshakes> {
        Arc::new(Handshakes { table: Mutex::new(Table::default()), per_address: per_address.max(1) })
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        // A panic elsewhere while holding the lock leaves counts that are still counts.
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes room for a handshake from `ip` (closing the pending ones that must give way, as the module
    /// docs say) and records it; attach its task with [`Pending::attach`]. Returns how many gave way.
    pub(crate) fn admit(self: &Arc<Self>, ip: IpAddr) -> (Pending, usize) {
        let mut victims = Vec::new();
        let seq = {
            let mut t = self.table();
            let (pending, established) = *t.count(ip);
            if pending > 0 && pending + established >= self.per_address {
                victims.extend(t.oldest(Some(ip)).and_then(|s| t.take(s)));
            }
            if t.pending.len() >= MAX_HANDSHAKES {
                victims.extend(t.oldest(None).and_then(|s| t.take(s)));
            }
            t.next += 1;
            let seq = t.next;
            t.pending.insert(seq, (ip, None));
            t.count(ip).0 += 1;
            seq
        };
        // Outside the lock: an aborted task's guard takes it when its future is dropped.
        for abort in victims.iter().flatten() {
            abort.abort();
        }
        (Pending { table: self.clone(), seq, ip }, victims.len())
    }

    /// The task making handshake `seq`, so that it can be made to give way (nothing if it already ended).
    pub(crate) fn attach(&self, seq: u64, task: AbortHandle) {
        if let Some((_, slot)) = self.table().pending.get_mut(&seq) {
            *slot = Some(task);
        }
    }

    /// Handshakes under way, and TLS connections established, from `ip`.
    #[cfg(test)]
    fn of(&self, ip: IpAddr) -> (usize, usize) {
        self.table().per_ip.get(&ip).copied().unwrap_or_default()
    }
}

/// A handshake under way; dropped (finished, failed, timed out or made to give way) it leaves the table.
pub(crate) struct Pending {
    table: Arc<Handshakes>,
    seq: u64,
    ip: IpAddr,
}

impl Pending {
    /// Its place in the table, for [`Handshakes::attach`].
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    /// The handshake succeeded: the connection counts for its address until the [`Established`] is dropped
    /// (with the connection's link).
    pub(crate) fn established(self) -> Established {
        let mut t = self.table.table();
        // Out of the pending (so that dropping `self` does nothing more), into the established.
        let _ = t.take(self.seq);
        t.count(self.ip).1 += 1;
        drop(t);
        Established { table: self.table.clone(), ip: self.ip }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        let _ = self.table.table().take(self.seq);
    }
}

/// An established TLS connection, counted for its address while its link lives.
pub(crate) struct Established {
    table: Arc<Handshakes>,
    ip: IpAddr,
}

impl Drop for Established {
    fn drop(&mut self) {
        let mut t = self.table.table();
        let c = t.count(self.ip);
        c.1 = c.1.saturating_sub(1);
        t.forget_if_idle(self.ip);
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Which of the PEM texts handed to [`TlsClientConfig::from_pem`] or [`TlsServerConfig::from_pem`] an error
/// is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PemFile {
    /// The CA that signs the peers' certificates.
    Ca,
    /// This side's certificate (chain).
    Certificate,
    /// This side's private key.
    Key,
}

impl fmt::Display for PemFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PemFile::Ca => "the CA file",
            PemFile::Certificate => "the certificate file",
            PemFile::Key => "the key file",
        })
    }
}

/// Why TLS settings could not be made from PEM texts. Malformed input (a text that is not what it should
/// be) is kept apart from credentials that parse but cannot serve (a CA that is not one, a key of
/// another certificate), and both from rustls refusing the settings themselves (not the files' fault).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TlsConfigError {
    /// The text is not PEM.
    NotPem { file: PemFile, why: String },
    /// The text is PEM but holds no certificate (`-----BEGIN CERTIFICATE-----`).
    NoCertificate { file: PemFile },
    /// The key text holds no private key.
    NoPrivateKey { why: String },
    /// A certificate of the CA text cannot be a trust anchor.
    NotACa { why: String },
    /// The CA text cannot verify client certificates.
    CannotVerifyClients { why: String },
    /// The certificate and the key parse but cannot be used together.
    Unusable { why: String },
    /// rustls refused the settings (its provider's protocol versions), whatever the files hold.
    Rustls(String),
}

impl fmt::Display for TlsConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsConfigError::NotPem { file, why } => write!(f, "{file} is not PEM: {why}"),
            TlsConfigError::NoCertificate { file } => {
                write!(f, "{file} holds no certificate (-----BEGIN CERTIFICATE-----)")
            }
            TlsConfigError::NoPrivateKey { why } => write!(f, "the key file holds no private key: {why}"),
            TlsConfigError::NotACa { why } => write!(f, "the CA file holds a certificate that cannot be a CA: {why}"),
            TlsConfigError::CannotVerifyClients { why } => write!(f, "the CA file cannot verify clients: {why}"),
            TlsConfigError::Unusable { why } => write!(f, "the certificate and key cannot be used: {why}"),
            TlsConfigError::Rustls(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for TlsConfigError {}

/// The certificates of a PEM text; `file` names it in the error.
fn certificates(pem: &str, file: PemFile) -> Result<Vec<CertificateDer<'static>>, TlsConfigError> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsConfigError::NotPem { file, why: e.to_string() })?;
    if certs.is_empty() {
        return Err(TlsConfigError::NoCertificate { file });
    }
    Ok(certs)
}

fn roots(pem: &str) -> Result<RootCertStore, TlsConfigError> {
    let mut store = RootCertStore::empty();
    for cert in certificates(pem, PemFile::Ca)? {
        store.add(cert).map_err(|e| TlsConfigError::NotACa { why: e.to_string() })?;
    }
    Ok(store)
}

fn private_key(pem: &str) -> Result<PrivateKeyDer<'static>, TlsConfigError> {
    PrivateKeyDer::from_pem_slice(pem.as_bytes()).map_err(|e| TlsConfigError::NoPrivateKey { why: e.to_string() })
}

/// A client's TLS settings for `coaps+tcp://` ([`crate::ClientBuilder::tls`]): the CA that must have signed
/// the server's certificate, and optionally this client's certificate.
#[derive(Clone)]
pub struct TlsClientConfig(pub(crate) Arc<rustls::ClientConfig>);

impl fmt::Debug for TlsClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TlsClientConfig")
    }
}

impl TlsClientConfig {
    /// Trusts servers whose certificate chain `ca_pem` signed (and that name the URI's host); presents
    /// `identity` — a certificate (chain) and its private key, PEM — when the server asks for one.
    pub fn from_pem(ca_pem: &str, identity: Option<(&str, &str)>) -> Result<TlsClientConfig, TlsConfigError> {
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsConfigError::Rustls(e.to_string()))?
            .with_root_certificates(roots(ca_pem)?);
        let mut config = match identity {
            Some((cert, key)) => builder
                .with_client_auth_cert(certificates(cert, PemFile::Certificate)?, private_key(key)?)
                .map_err(unusable)?,
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![ALPN.to_vec()];
        Ok(TlsClientConfig(Arc::new(config)))
    }
}

/// A server's TLS settings for `coaps+tcp://` ([`crate::Server::listen_tls`]): its certificate and key, and
/// optionally the CA whose certificates clients must present.
#[derive(Clone)]
pub struct TlsServerConfig(pub(crate) Arc<rustls::ServerConfig>);

impl fmt::Debug for TlsServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TlsServerConfig")
    }
}

impl TlsServerConfig {
    /// Serves with the certificate (chain) `cert_pem` and its key; with `client_ca_pem`, every client must
    /// present a certificate that CA signed, and a handshake without one fails.
    pub fn from_pem(
        cert_pem: &str,
        key_pem: &str,
        client_ca_pem: Option<&str>,
    ) -> Result<TlsServerConfig, TlsConfigError> {
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsConfigError::Rustls(e.to_string()))?;
        let builder = match client_ca_pem {
            Some(ca) => {
                let verifier =
                    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots(ca)?), provider())
                        .build()
                        .map_err(|e| TlsConfigError::CannotVerifyClients { why: e.to_string() })?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let mut config = builder
            .with_single_cert(certificates(cert_pem, PemFile::Certificate)?, private_key(key_pem)?)
            .map_err(unusable)?;
        config.alpn_protocols = vec![ALPN.to_vec()];
        Ok(TlsServerConfig(Arc::new(config)))
    }
}

/// Why rustls refused a certificate and its key, in words: its own text for a key that is not the
/// certificate's names the variant (`KeyMismatch`), which tells a user nothing.
fn unusable(e: rustls::Error) -> TlsConfigError {
    let why = match e {
        rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
            "the private key does not belong to the certificate (a key of another pair?)".to_string()
        }
        rustls::Error::InconsistentKeys(_) => {
            "the private key's public half cannot be derived to check it against the certificate".to_string()
        }
        rustls::Error::General(why) => why,
        e => e.to_string(),
    };
    TlsConfigError::Unusable { why }
}

/// What a client's connection task needs for TLS: its connector and where to say why a handshake failed.
#[derive(Clone)]
pub(crate) struct TlsConnect {
    pub connector: tokio_rustls::TlsConnector,
    pub failures: Arc<TlsFailures>,
}

impl TlsConnect {
    pub(crate) fn new(config: &TlsClientConfig) -> TlsConnect {
        TlsConnect { connector: config.0.clone().into(), failures: Arc::default() }
    }
}

/// Why the last TLS handshake with each server failed, shared between a client's connection tasks and its
/// request futures (a TLS 1.3 server refuses a client's certificate after the client has finished its
/// side of the handshake: that alert arrives as the connection's first read, and fails the request).
#[derive(Debug, Default)]
pub(crate) struct TlsFailures(Mutex<HashMap<SocketAddr, String>>);

/// Failures remembered at once; more are not recorded (a client talks to a few servers).
const MAX_FAILURES: usize = 64;

impl TlsFailures {
    pub(crate) fn record(&self, server: SocketAddr, reason: String) {
        if let Ok(mut m) = self.0.lock() {
            if m.len() < MAX_FAILURES || m.contains_key(&server) {
                m.insert(server, reason);
            }
        }
    }

    pub(crate) fn forget(&self, server: SocketAddr) {
        if let Ok(mut m) = self.0.lock() {
            m.remove(&server);
        }
    }

    /// Why the last handshake with `server` failed, if it did.
    pub(crate) fn get(&self, server: SocketAddr) -> Option<String> {
        self.0.lock().ok().and_then(|m| m.get(&server).cloned())
    }
}

/// The rustls error inside an I/O error of a TLS stream, if it is one.
pub(crate) fn tls_error(e: &std::io::Error) -> Option<&rustls::Error> {
    e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>())
}

/// A failed handshake in the client's words: what went wrong and which flag to check.
pub(crate) fn describe(e: &rustls::Error, name: &ServerName<'_>) -> String {
    use rustls::Error as E;
    match e {
        // A CA of the issuer's name whose key did not sign it is as unknown as a CA of another name.
        E::InvalidCertificate(CertificateError::UnknownIssuer | CertificateError::BadSignature) => {
            "unknown CA: the server's certificate is not signed by the CA given (check -C)".into()
        }
        E::InvalidCertificate(CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. }) => {
            format!("name mismatch: the server's certificate does not name {}", name.to_str())
        }
        E::InvalidCertificate(
            CertificateError::Expired
            | CertificateError::ExpiredContext { .. }
            | CertificateError::NotValidYet
            | CertificateError::NotValidYetContext { .. },
        ) => "the server's certificate is expired or not valid yet".into(),
        E::InvalidCertificate(why) => format!("the server's certificate was refused: {why:?}"),
        E::AlertReceived(AlertDescription::CertificateRequired) => {
            "no certificate: the server requires a client certificate (-c CERT -j KEY)".into()
        }
        E::AlertReceived(AlertDescription::UnknownCA | AlertDescription::BadCertificate) => {
            "the server refused this client's certificate (not signed by a CA it trusts)".into()
        }
        E::AlertReceived(AlertDescription::HandshakeFailure) => {
            "the server ended the handshake (no shared cipher suite, or it wants a client certificate)".into()
        }
        E::AlertReceived(AlertDescription::NoApplicationProtocol) | E::NoApplicationProtocol => {
            "the server does not speak CoAP over TLS (ALPN \"coap\" refused)".into()
        }
        E::AlertReceived(d) => format!("the server sent fatal alert {d:?}"),
        other => other.to_string(),
    }
}

/// The name a server's certificate must carry for a URI's host (RFC 8323 §9.1: as for https).
pub(crate) fn server_name(host: &crate::net::uri::Host) -> Result<ServerName<'static>, String> {
    match host {
        crate::net::uri::Host::Ip(ip) => Ok(ServerName::IpAddress((*ip).into())),
        crate::net::uri::Host::Name(name) => {
            ServerName::try_from(name.clone()).map_err(|_| format!("`{name}` is not a DNS name TLS can verify"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_that_are_not_pem_are_refused_with_what_is_wrong() {
        let err = TlsClientConfig::from_pem("not a certificate", None).unwrap_err();
        assert_eq!(err, TlsConfigError::NoCertificate { file: PemFile::Ca });
        let e = err.to_string();
        assert!(e.contains("CA file") && e.contains("no certificate"), "{e}");
        let err = TlsServerConfig::from_pem("", "", None).unwrap_err();
        assert_eq!(err, TlsConfigError::NoCertificate { file: PemFile::Certificate });
        let e = err.to_string();
        assert!(e.contains("certificate file"), "{e}");
    }

    #[test]
    fn the_clients_words_name_the_flag_to_check() {
        let ip = ServerName::IpAddress(std::net::IpAddr::from([127, 0, 0, 1]).into());
        let unknown = rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer);
        assert!(describe(&unknown, &ip).contains("unknown CA"));
        let name = ServerName::try_from("localhost").unwrap();
        let mismatch = rustls::Error::InvalidCertificate(CertificateError::NotValidForName);
        assert!(describe(&mismatch, &name).contains("does not name localhost"));
        let required = rustls::Error::AlertReceived(AlertDescription::CertificateRequired);
        assert!(describe(&required, &ip).contains("-c CERT -j KEY"));
    }

    #[test]
    fn an_address_at_its_limit_closes_its_own_oldest_handshake_and_a_full_table_the_busiest_addresss() {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let _guard = rt.enter();
        let (a, b, c): (IpAddr, IpAddr, IpAddr) = ([10, 0, 0, 1].into(), [10, 0, 0, 2].into(), [10, 0, 0, 3].into());
        let admit = |h: &Arc<Handshakes>, ip: IpAddr| {
            let (p, closed) = h.admit(ip);
            h.attach(p.seq(), tokio::spawn(std::future::pending::<()>()).abort_handle());
            (p, closed)
        };
        let h = Handshakes::new(4);
        let mut from_a: Vec<Pending> = Vec::new();
        for _ in 0..4 {
            from_a.push(admit(&h, a).0);
        }
        let (p, closed) = admit(&h, a);
        from_a.push(p);
        assert_eq!((closed, h.of(a)), (1, (4, 0)), "a fifth from a: its oldest gave way");
        // Established connections count too: with three of b's up, b has room for one handshake.
        let up: Vec<Established> = (0..3).map(|_| admit(&h, b).0.established()).collect();
        let (_first, closed) = admit(&h, b);
        assert_eq!(closed, 0);
        let (_second, closed) = admit(&h, b);
        assert_eq!((closed, h.of(b)), (1, (1, 3)), "b's pending one gave way");
        drop(up);
        assert_eq!(h.of(b), (1, 0), "connections gone, uncounted");
        drop(from_a);
        assert_eq!(h.of(a), (0, 0), "handshakes ended leave the table");

        // A full table: the newcomer gets in, the address holding the most gives its oldest.
        let h = Handshakes::new(usize::MAX);
        let held: Vec<Pending> = (0..MAX_HANDSHAKES).map(|i| admit(&h, if i < 200 { a } else { b }).0).collect();
        let (_c, closed) = admit(&h, c);
        assert_eq!((closed, h.of(a), h.of(b), h.of(c)), (1, (199, 0), (56, 0), (1, 0)));
        drop(held);
    }

    #[test]
    fn failures_are_bounded_and_forgotten() {
        let f = TlsFailures::default();
        for port in 0..200u16 {
            f.record(SocketAddr::from(([127, 0, 0, 1], port)), "x".into());
        }
        assert_eq!(f.0.lock().unwrap().len(), MAX_FAILURES);
        let a = SocketAddr::from(([127, 0, 0, 1], 1));
        assert!(f.get(a).is_some());
        f.forget(a);
        assert!(f.get(a).is_none());
    }
}
