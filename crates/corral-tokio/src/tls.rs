//! `coaps+tcp://`: CoAP over TLS (RFC 8323 §9), with rustls on its `ring` provider around the connections
//! of the `tcp` module.
//!
//! Owns: the TLS settings made from PEM files ([`TlsClientConfig`], [`TlsServerConfig`]: TLS 1.2 and 1.3,
//! ALPN "coap" as RFC 8323 §8.2 registers it, the server verified by its name or IP address as the URI gives
//! it, client certificates required and verified when the server has a CA for them), the handshake of
//! each connection (a server's bounded: [`MAX_HANDSHAKES`] at once, [`HANDSHAKE_TIMEOUT`] each), and the
//! words of a failed handshake for the client (`TlsFailures`, so that its error says why: unknown CA,
//! name mismatch, no certificate). Never frames CoAP: after the handshake the bytes are corral-proto's
//! [`TcpEndpoint`](corral_proto::TcpEndpoint)'s, CSM and all, exactly as over plain TCP.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{AlertDescription, CertificateError, RootCertStore};
use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The ALPN protocol name of CoAP over TLS (RFC 8323 §8.2).
pub const ALPN: &[u8] = b"coap";
/// How long a server waits for an accepted connection's TLS handshake before closing it.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Server-side TLS handshakes under way at once; connections beyond it are closed at once (a flood of
/// connections that never finish their handshake holds no more than this many sockets and tasks).
pub const MAX_HANDSHAKES: usize = 256;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The certificates of a PEM text; `what` names the file in the error.
fn certificates(pem: &str, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{what} is not PEM: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{what} holds no certificate (-----BEGIN CERTIFICATE-----)"));
    }
    Ok(certs)
}

fn roots(pem: &str) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    for cert in certificates(pem, "the CA file")? {
        store.add(cert).map_err(|e| format!("the CA file holds a certificate that cannot be a CA: {e}"))?;
    }
    Ok(store)
}

fn private_key(pem: &str) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_slice(pem.as_bytes()).map_err(|e| format!("the key file holds no private key: {e}"))
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
    pub fn from_pem(ca_pem: &str, identity: Option<(&str, &str)>) -> Result<TlsClientConfig, String> {
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots(ca_pem)?);
        let mut config = match identity {
            Some((cert, key)) => builder
                .with_client_auth_cert(certificates(cert, "the certificate file")?, private_key(key)?)
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
    pub fn from_pem(cert_pem: &str, key_pem: &str, client_ca_pem: Option<&str>) -> Result<TlsServerConfig, String> {
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?;
        let builder = match client_ca_pem {
            Some(ca) => {
                let verifier =
                    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots(ca)?), provider())
                        .build()
                        .map_err(|e| format!("the CA file cannot verify clients: {e}"))?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let mut config = builder
            .with_single_cert(certificates(cert_pem, "the certificate file")?, private_key(key_pem)?)
            .map_err(unusable)?;
        config.alpn_protocols = vec![ALPN.to_vec()];
        Ok(TlsServerConfig(Arc::new(config)))
    }
}

/// Why rustls refused a certificate and its key, in words: its own text for a key that is not the
/// certificate's names the variant (`KeyMismatch`), which tells a user nothing.
fn unusable(e: rustls::Error) -> String {
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
    format!("the certificate and key cannot be used: {why}")
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
pub(crate) fn server_name(host: &crate::uri::Host) -> Result<ServerName<'static>, String> {
    match host {
        crate::uri::Host::Ip(ip) => Ok(ServerName::IpAddress((*ip).into())),
        crate::uri::Host::Name(name) => {
            ServerName::try_from(name.clone()).map_err(|_| format!("`{name}` is not a DNS name TLS can verify"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_that_are_not_pem_are_refused_with_what_is_wrong() {
        let e = TlsClientConfig::from_pem("not a certificate", None).unwrap_err();
        assert!(e.contains("CA file") && e.contains("no certificate"), "{e}");
        let e = TlsServerConfig::from_pem("", "", None).unwrap_err();
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
