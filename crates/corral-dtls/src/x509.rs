//! X.509 certificates for coaps:// (RFC 7252 §9.1.3.3): a side's certificate and P-256 key and the CAs
//! it trusts, read from PEM; a peer's certificate checked against those CAs; the peer's identity (its
//! subject) for the layer's [`crate::DtlsEvent::Connected`].
//!
//! What is checked: the peer's leaf certificate is signed (ECDSA with SHA-256 or SHA-384) by a CA of the
//! list whose subject is the leaf's issuer — one level, as a device CA issues device certificates
//! directly. Not checked (yet): validity dates (the layer reads no wall clock), intermediate CAs (dimpl
//! hands over the leaf only), revocation, and the peer's name against the URI's host. The signature
//! check itself is dimpl's (its crypto provider's `SignatureVerifier`). Never panics on input.

use crate::error::{read_text, CredentialError};
use der::{Decode, Encode};
use std::path::Path;
use x509_cert::Certificate;

/// A side's certificate and key, and the CAs a peer's certificate must be signed by. Its `Debug` shows
/// no key.
#[derive(Clone)]
pub struct X509 {
    /// This side's certificate (DER).
    pub certificate: Vec<u8>,
    /// Its private key (DER, PKCS#8 or SEC1), on P-256.
    pub key: Vec<u8>,
    /// The trusted CAs' certificates (DER).
    pub ca: Vec<Vec<u8>>,
}

impl std::fmt::Debug for X509 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let subject = subject_of(&self.certificate).unwrap_or_default();
        f.debug_struct("X509").field("subject", &subject).field("cas", &self.ca.len()).finish_non_exhaustive()
    }
}

/// The three parts of [`X509`]'s PEM, in [`X509::load`]'s order (an error names the file of its part).
#[derive(Clone, Copy)]
enum Part {
    Certificate = 0,
    Key = 1,
    Ca = 2,
}

impl X509 {
    /// Reads a certificate, its private key and the CA certificates from PEM files (see
    /// [`X509::from_pem`]); the error names the file that cannot be read or is wrong.
    pub fn load(certificate: &Path, key: &Path, ca: &Path) -> Result<X509, CredentialError> {
        let files = [certificate, key, ca];
        let [c, k, a] = [read_text(certificate)?, read_text(key)?, read_text(ca)?];
        X509::parse(&c, &k, &a).map_err(|(part, why)| CredentialError::malformed(why).in_file(files[part as usize]))
    }

    /// From PEM text: a certificate (the first of the file is this side's), its private key (`EC PRIVATE
    /// KEY` or `PRIVATE KEY`), and one or more CA certificates. The error says which part is wrong.
    pub fn from_pem(certificate: &str, key: &str, ca: &str) -> Result<X509, CredentialError> {
        X509::parse(certificate, key, ca).map_err(|(_, why)| CredentialError::malformed(why))
    }

    fn parse(certificate: &str, key: &str, ca: &str) -> Result<X509, (Part, String)> {
        let cert_err = |why: String| (Part::Certificate, why);
        let certificate = Certificate::load_pem_chain(certificate.as_bytes())
            .ok()
            .and_then(|c| c.into_iter().next())
            .ok_or_else(|| cert_err("the certificate is not a PEM X.509 certificate".into()))?
            .to_der()
            .map_err(|e| cert_err(format!("the certificate: {e}")))?;
        let (label, key) = pem_rfc7468::decode_vec(key.trim().as_bytes())
            .map_err(|_| (Part::Key, "the key is not a PEM private key".to_string()))?;
        if !matches!(label, "EC PRIVATE KEY" | "PRIVATE KEY") {
            return Err((Part::Key, format!("the key is a PEM {label}, not an EC PRIVATE KEY or PRIVATE KEY")));
        }
        let no_ca = || (Part::Ca, "the CA file holds no PEM X.509 certificate".to_string());
        let ca: Vec<Vec<u8>> = Certificate::load_pem_chain(ca.as_bytes())
            .map_err(|_| no_ca())?
            .iter()
            .filter_map(|c| c.to_der().ok())
            .collect();
        if ca.is_empty() {
            return Err(no_ca());
        }
        Ok(X509 { certificate, key, ca })
    }

    /// This side's subject, as RFC 4514 text.
    pub fn subject(&self) -> String {
        subject_of(&self.certificate).unwrap_or_default()
    }
}

fn subject_of(der: &[u8]) -> Option<String> {
    Certificate::from_der(der).ok().map(|c| c.tbs_certificate().subject().to_string())
}

const ECDSA_SHA256: &str = "1.2.840.10045.4.3.2";
const ECDSA_SHA384: &str = "1.2.840.10045.4.3.3";

/// Checks `leaf` (DER) against `cas`: its subject when a CA whose subject is its issuer signed it, or
/// why not, in words for one line.
pub(crate) fn verify(cas: &[Vec<u8>], leaf: &[u8], provider: &dimpl::crypto::CryptoProvider) -> Result<String, String> {
    use dimpl::crypto::{HashAlgorithm, SignatureAlgorithm};
    let cert = Certificate::from_der(leaf).map_err(|_| "the peer's certificate does not parse".to_string())?;
    let tbs = cert.tbs_certificate();
    let subject = tbs.subject().to_string();
    let hash = match cert.signature_algorithm().oid.to_string().as_str() {
        ECDSA_SHA256 => HashAlgorithm::SHA256,
        ECDSA_SHA384 => HashAlgorithm::SHA384,
        oid => return Err(format!("the peer's certificate ({subject}) is signed with {oid}, not ECDSA")),
    };
    let signed = tbs.to_der().map_err(|_| "the peer's certificate does not parse".to_string())?;
    let signature = cert.signature().as_bytes().ok_or("the peer's certificate has no signature")?;
    let issuer = tbs.issuer().to_string();
    for ca in cas {
        let Ok(ca_cert) = Certificate::from_der(ca) else { continue };
        if ca_cert.tbs_certificate().subject().to_string() != issuer {
            continue;
        }
        let ok =
            provider.signature_verification.verify_signature(ca, &signed, signature, hash, SignatureAlgorithm::ECDSA);
        if ok.is_ok() {
            return Ok(subject);
        }
    }
    Err(format!("the peer's certificate ({subject}, issued by {issuer}) is not signed by a trusted CA"))
}
