//! Raw public keys for coaps:// (RFC 7250; RFC 7252 §9.1.3.2's RawPublicKey mode): a side's P-256 key
//! pair, read from one PEM private key as libcoap's `-M` takes it (the public key is derived), and which
//! peers' keys it accepts; a peer's key checked against them; the peer's identity for
//! [`crate::DtlsEvent::Connected`].
//!
//! How a peer's key is authenticated: RFC 7250 §6 leaves it to out-of-band configuration, and RFC 7252
//! §9.1.3.2.1 has each device provisioned with the identities of the nodes it may talk to. So a key
//! is accepted when it is one of the trusted keys ([`PeerKeys::Trusted`]); [`PeerKeys::Any`] accepts
//! every key — libcoap's behaviour, which hands the key to a callback that its tools always accept — for
//! an embedder that decides on the identity afterwards: the key is then reported (its identity in the
//! event, and the layer logs it at INFO), never accepted silently. corral's command line offers only
//! trusted keys (`--peer-key`).
//!
//! The identity of a key is RFC 6920's `ni:///sha-256;…` URI of the SHA-256 of its DER
//! SubjectPublicKeyInfo (RFC 7252 §9.1.3.2.1 names this form for RawPublicKey identities): stable,
//! printable, and what a gateway's access roles can name. Never panics on input.

use crate::error::{read_text, CredentialError};
use base64ct::{Base64UrlUnpadded, Encoding};
use p256::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePublicKey};
use sha2::{Digest, Sha256};
use std::path::Path;

/// This side's raw public key and private key, and the peers' keys it accepts. Its `Debug` shows the
/// key's identity, never the private key.
#[derive(Clone)]
pub struct Rpk {
    /// This side's public key: the DER SubjectPublicKeyInfo its Certificate message carries.
    pub public_key: Vec<u8>,
    /// The private key (DER, PKCS#8 or SEC1), on P-256.
    pub key: Vec<u8>,
    /// Which peers' keys are accepted.
    pub peers: PeerKeys,
}

impl std::fmt::Debug for Rpk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rpk").field("identity", &self.identity()).field("peers", &self.peers).finish_non_exhaustive()
    }
}

/// The peers' keys a side accepts.
#[derive(Clone, PartialEq, Eq)]
pub enum PeerKeys {
    /// Only these keys (DER SubjectPublicKeyInfo, P-256, as [`PeerKeys::from_pem`] normalises them).
    Trusted(Vec<Vec<u8>>),
    /// Every key, reported by its identity (the user asked for it).
    Any,
}

impl std::fmt::Debug for PeerKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PeerKeys::Trusted(keys) => f.debug_list().entries(keys.iter().map(|k| ni_uri(k))).finish(),
            PeerKeys::Any => f.write_str("Any"),
        }
    }
}

impl Rpk {
    /// Reads this side's key from a PEM file and the trusted keys from another (see [`Rpk::from_pem`]
    /// and [`PeerKeys::from_pem`]); the error names the file that cannot be read or is wrong.
    pub fn load(key: &Path, peers: &Path) -> Result<Rpk, CredentialError> {
        let trusted = PeerKeys::load(peers)?;
        Rpk::from_pem(&read_text(key)?, trusted).map_err(|e| e.in_file(key))
    }

    /// From a PEM file holding an `EC PRIVATE KEY` (SEC1) or `PRIVATE KEY` (PKCS#8) on P-256, as libcoap's
    /// `-M` takes it (other blocks, such as a `PUBLIC KEY` or `EC PARAMETERS`, are skipped); `peers`:
    /// the keys it accepts. The error says what is wrong with the file.
    pub fn from_pem(key: &str, peers: PeerKeys) -> Result<Rpk, CredentialError> {
        let blocks = pem_blocks(key).map_err(CredentialError::malformed)?;
        let (label, der) = blocks
            .into_iter()
            .find(|(label, _)| matches!(label.as_str(), "EC PRIVATE KEY" | "PRIVATE KEY"))
            .ok_or(CredentialError::malformed("the file holds no PEM EC PRIVATE KEY or PRIVATE KEY"))?;
        let secret = if label == "EC PRIVATE KEY" {
            p256::SecretKey::from_sec1_der(&der)
                .map_err(|_| CredentialError::malformed("the EC PRIVATE KEY is not a P-256 key"))?
        } else {
            p256::SecretKey::from_pkcs8_der(&der)
                .map_err(|_| CredentialError::malformed("the PRIVATE KEY is not a P-256 EC key"))?
        };
        let public_key = spki_of(&secret.public_key()).map_err(CredentialError::malformed)?;
        Ok(Rpk { public_key, key: der, peers })
    }

    /// This side's identity, the `ni:` URI of its public key (what the peer's logs and roles name).
    pub fn identity(&self) -> String {
        ni_uri(&self.public_key)
    }
}

impl PeerKeys {
    /// Reads the trusted keys from a PEM file (see [`PeerKeys::from_pem`]).
    pub fn load(path: &Path) -> Result<PeerKeys, CredentialError> {
        PeerKeys::from_pem(&read_text(path)?).map_err(|e| e.in_file(path))
    }

    /// The trusted keys of a PEM file: one or more `PUBLIC KEY` blocks on P-256 (`openssl ec -pubout`
    /// writes one); the error names what is wrong.
    pub fn from_pem(text: &str) -> Result<PeerKeys, CredentialError> {
        let mut keys = Vec::new();
        for (label, der) in pem_blocks(text).map_err(CredentialError::malformed)? {
            if label != "PUBLIC KEY" {
                return Err(CredentialError::malformed(format!("expected PEM PUBLIC KEY blocks, not {label}")));
            }
            let key = p256::PublicKey::from_public_key_der(&der)
                .map_err(|_| CredentialError::malformed("a PUBLIC KEY is not a P-256 key"))?;
            keys.push(spki_of(&key).map_err(CredentialError::malformed)?);
        }
        if keys.is_empty() {
            return Err(CredentialError::malformed("the file holds no PEM PUBLIC KEY"));
        }
        Ok(PeerKeys::Trusted(keys))
    }
}

/// The DER SubjectPublicKeyInfo of `key` (uncompressed point), the one form keys are compared in.
fn spki_of(key: &p256::PublicKey) -> Result<Vec<u8>, String> {
    key.to_public_key_der().map(|d| d.into_vec()).map_err(|e| format!("cannot encode the public key: {e}"))
}

/// RFC 6920's `ni:///sha-256;…` URI of `spki` (a DER SubjectPublicKeyInfo): the SHA-256 of its bytes,
/// base64url without padding.
pub fn ni_uri(spki: &[u8]) -> String {
    format!("ni:///sha-256;{}", Base64UrlUnpadded::encode_string(&Sha256::digest(spki)))
}

/// Checks the peer's key `spki` (the SubjectPublicKeyInfo its Certificate message carried) against
/// `peers`: its identity when accepted, or why not, in words for one line.
pub(crate) fn verify(peers: &PeerKeys, spki: &[u8]) -> Result<String, String> {
    let key = p256::PublicKey::from_public_key_der(spki)
        .map_err(|_| format!("the peer's raw public key ({}) is not a P-256 key", ni_uri(spki)))?;
    let spki = spki_of(&key)?;
    let identity = ni_uri(&spki);
    match peers {
        PeerKeys::Any => Ok(identity),
        PeerKeys::Trusted(keys) if keys.contains(&spki) => Ok(identity),
        PeerKeys::Trusted(_) => Err(format!("the peer's raw public key {identity} is not a trusted key")),
    }
}

/// The blocks of a PEM text, as (label, DER), in order; an error if a block does not decode.
fn pem_blocks(text: &str) -> Result<Vec<(String, Vec<u8>)>, String> {
    const BEGIN: &str = "-----BEGIN ";
    const END: &str = "-----END ";
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(BEGIN) {
        let block = &rest[start..];
        let end = block.find(END).ok_or("a PEM block has no END line")?;
        let close = block[end + END.len()..].find("-----").ok_or("a PEM END line is not closed")?;
        let len = end + END.len() + close + "-----".len();
        let (label, der) = pem_rfc7468::decode_vec(&block.as_bytes()[..len])
            .map_err(|_| "a PEM block does not decode (is the file PEM?)".to_string())?;
        blocks.push((label.to_string(), der));
        rest = &block[len..];
    }
    if blocks.is_empty() {
        return Err("the file is not PEM (no -----BEGIN line)".into());
    }
    Ok(blocks)
}
