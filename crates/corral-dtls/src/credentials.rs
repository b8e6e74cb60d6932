//! The PSK credential files of coaps://, read and checked: what a server accepts ([`PskKeys::load`]) and
//! the identity and key a node reaches each `coaps://` peer with ([`load_peer_psks`]). The PEM formats
//! of certificates and raw public keys are `x509.rs`'s and `rpk.rs`'s. Every error names the file and
//! the entry in it that is wrong ([`CredentialError`]), so the command line and a library user say the
//! same thing.
//!
//! - A **PSK file** maps identities to keys, a JSON object: `{"alice": "secretPSK", "bob": {"hex":
//!   "00ff…"}}` (a string is the key's bytes as written, as libcoap's `-k` takes them).
//! - A **peer PSK file** gives each peer, by its `coaps://ADDR[:PORT]` URI (an IP literal, no path), the
//!   identity and key to open sessions with: `{"coaps://10.0.0.5:5684": {"identity": "gw", "key":
//!   "secretPSK"}}` (the key also as `{"hex": "00ff"}`).
//!
//! Reading a file is the one I/O here; nothing in the layer calls it.

use crate::error::{read_text, CredentialError};
use crate::{DtlsConfig, PskKeys, Role};
use corral_proto::wire::uri::{Host, Scheme, Uri};
use std::net::SocketAddr;
use std::path::Path;

impl PskKeys {
    /// Reads a PSK file (see the module docs).
    pub fn load(path: &Path) -> Result<PskKeys, CredentialError> {
        PskKeys::from_json(&read_text(path)?).map_err(|e| e.in_file(path))
    }

    /// A PSK file's text (see the module docs).
    pub fn from_json(text: &str) -> Result<PskKeys, CredentialError> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| CredentialError::malformed(format!("not JSON: {e}")))?;
        let obj = v.as_object().ok_or(CredentialError::malformed("expected a JSON object {\"IDENTITY\": \"KEY\"}"))?;
        let mut keys = PskKeys::new();
        for (identity, key) in obj {
            keys.insert(identity.as_bytes(), key_of(identity, key)?);
        }
        if keys.is_empty() {
            return Err(CredentialError::malformed("no identity (expected {\"IDENTITY\": \"KEY\"})"));
        }
        Ok(keys)
    }
}

/// The shape of a peer PSK file, for its errors.
const PEER_SHAPE: &str = "{\"coaps://ADDR:PORT\": {\"identity\": \"ID\", \"key\": \"KEY\"}}";

/// Reads a peer PSK file (see the module docs): each peer's address and its client configuration.
pub fn load_peer_psks(path: &Path) -> Result<Vec<(SocketAddr, DtlsConfig)>, CredentialError> {
    peer_psks_from_json(&read_text(path)?).map_err(|e| e.in_file(path))
}

/// A peer PSK file's text (see the module docs).
pub fn peer_psks_from_json(text: &str) -> Result<Vec<(SocketAddr, DtlsConfig)>, CredentialError> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| CredentialError::malformed(format!("not JSON: {e}")))?;
    let obj = v.as_object().ok_or(CredentialError::malformed(format!("expected a JSON object {PEER_SHAPE}")))?;
    let mut peers = Vec::new();
    for (uri, entry) in obj {
        let addr = coaps_addr(uri)
            .ok_or_else(|| CredentialError::at(uri, "expected coaps://ADDR[:PORT] (an IP literal, no path)"))?;
        let identity = entry
            .get("identity")
            .and_then(|i| i.as_str())
            .filter(|i| !i.is_empty())
            .ok_or_else(|| CredentialError::at(uri, "expected {\"identity\": \"ID\", \"key\": \"KEY\"}"))?;
        let key = key_of(uri, entry.get("key").ok_or_else(|| CredentialError::at(uri, "no \"key\""))?)?;
        let role = Role::Client { identity: identity.as_bytes().to_vec(), key };
        peers.push((addr, DtlsConfig::new(role)));
    }
    if peers.is_empty() {
        return Err(CredentialError::malformed(format!("no peer (expected {PEER_SHAPE})")));
    }
    Ok(peers)
}

/// The address of a `coaps://ADDR[:PORT]` URI with an IP literal and no path or query (IPv4-mapped
/// IPv6 written as IPv4, as datagrams from it arrive).
fn coaps_addr(uri: &str) -> Option<SocketAddr> {
    let u = Uri::parse(uri.trim()).ok()?;
    match (u.scheme, u.host) {
        (Scheme::Coaps, Host::Ip(ip)) if u.path.is_empty() && u.query.is_empty() => {
            Some(SocketAddr::new(corral_proto::canonical(ip), u.port))
        }
        _ => None,
    }
}

/// A key as a credentials file writes it: `"KEY"` (its bytes as written) or `{"hex": "00ff…"}`; `field`
/// names its entry in the error.
fn key_of(field: &str, key: &serde_json::Value) -> Result<Vec<u8>, CredentialError> {
    let shape = || CredentialError::at(field, "expected \"KEY\" or {\"hex\": \"…\"}");
    let key = match key {
        serde_json::Value::String(s) => s.as_bytes().to_vec(),
        serde_json::Value::Object(o) => {
            let hex = o.get("hex").and_then(|h| h.as_str()).ok_or_else(shape)?;
            from_hex(hex).ok_or_else(|| CredentialError::at(field, format!("`{hex}` is not hex")))?
        }
        _ => return Err(shape()),
    };
    if key.is_empty() {
        return Err(CredentialError::at(field, "the key is empty"));
    }
    Ok(key)
}

fn from_hex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(r: Result<impl std::fmt::Debug, CredentialError>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn a_psk_file_maps_identities_to_text_or_hex_keys() {
        let keys = PskKeys::from_json(r#"{"alice": "secretPSK", "bob": {"hex": "00ff"}}"#).unwrap();
        assert_eq!(keys.len(), 2);
        assert!(err(PskKeys::from_json("{}")).contains("no identity"));
        assert_eq!(err(PskKeys::from_json(r#"{"a": {"hex": "0g"}}"#)), "a: `0g` is not hex");
        assert_eq!(err(PskKeys::from_json(r#"{"a": ""}"#)), "a: the key is empty");
        assert!(err(PskKeys::from_json("[1]")).contains("JSON object"));
    }

    #[test]
    fn a_peer_file_gives_each_coaps_peer_an_identity_and_key() {
        let peers = peer_psks_from_json(
            r#"{"coaps://127.0.0.1:5699": {"identity": "gw", "key": "k"}, "coaps://[::1]": {"identity": "g", "key": {"hex": "00"}}}"#,
        )
        .unwrap();
        let addrs: Vec<SocketAddr> = peers.iter().map(|(a, _)| *a).collect();
        assert!(addrs.contains(&"127.0.0.1:5699".parse().unwrap()) && addrs.contains(&"[::1]:5684".parse().unwrap()));
        assert!(err(peer_psks_from_json(r#"{"coap://127.0.0.1": {"identity": "g", "key": "k"}}"#)).contains("coaps://"));
        assert!(
            err(peer_psks_from_json(r#"{"coaps://127.0.0.1/s": {"identity": "g", "key": "k"}}"#)).contains("no path")
        );
        assert!(err(peer_psks_from_json(r#"{"coaps://127.0.0.1": {"key": "k"}}"#)).contains("identity"));
        assert!(err(peer_psks_from_json(r#"{"coaps://127.0.0.1": {"identity": "g", "key": ""}}"#)).contains("empty"));
        assert!(err(peer_psks_from_json("{}")).contains("no peer"));
    }

    #[test]
    fn an_ipv4_mapped_peer_is_keyed_by_its_ipv4_address() {
        let peers = peer_psks_from_json(r#"{"coaps://[::ffff:10.0.0.5]:5700": {"identity": "g", "key": "k"}}"#);
        assert_eq!(peers.unwrap()[0].0, "10.0.0.5:5700".parse::<SocketAddr>().unwrap());
    }

    #[test]
    fn errors_name_the_file_and_the_entry() {
        let dir = std::env::temp_dir().join(format!("corral-dtls-cred-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("psk.json");
        std::fs::write(&file, r#"{"alice": {"hex": "zz"}}"#).unwrap();
        let e = PskKeys::load(&file).unwrap_err();
        assert!(!e.is_read());
        assert_eq!(e.to_string(), format!("{}: alice: `zz` is not hex", file.display()));
        let missing = dir.join("missing.json");
        let e = load_peer_psks(&missing).unwrap_err();
        assert!(e.is_read() && e.to_string().starts_with(&format!("cannot read {}: ", missing.display())), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
