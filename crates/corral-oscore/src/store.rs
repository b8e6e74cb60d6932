//! Security contexts on disk (pairwise [`ContextDir`]s and Group OSCORE [`GroupDir`]s), in aiocoap's context-directory format, so that `corral` and aiocoap can use
//! the same files: `settings.json` (and optionally `secret.json`) with `sender-id_hex`, `recipient-id_hex`,
//! `secret_ascii` or `secret_hex`, optional `salt_*`, `id-context_hex`, `algorithm`, `kdf-hashfun`,
//! `window`; and `sequence.json` with `next-to-send`, written before a reserved sequence number is used
//! (atomically: a temporary file, fsync, rename, fsync of the directory).
//!
//! # The replay window across restarts (RFC 8613 Appendix B.1.2)
//!
//! A server may trust a replay window only if it knows every request the context ever accepted. corral
//! keeps no window on disk (`"received": "unknown"`, as aiocoap writes it); the only window it can trust
//! after a start is the one of a context that no server has ever used — empty, and right because nothing
//! was ever accepted. So a server calls [`ContextDir::start_serving`] (the [`crate::OscoreLayer`] does)
//! before it accepts a request: a directory without `sequence.json` is marked as served (the file is
//! written and made durable first), and one that has it — whoever wrote it, whatever it says — is a
//! context served before, whose windows are unknown: each peer's first request is answered with an Echo
//! challenge, and only the request that returns the value re-establishes the window. A request captured
//! before a crash and replayed after it never passes.
//!
//! Why not save the window instead: a saved window is consistent only if it was written after the last
//! request the previous process accepted and is invalidated before the next process accepts one. Writing
//! it per request costs an fsync per request (milliseconds against microseconds of cryptography); writing
//! it at exit, with a clean-shutdown marker removed at start, depends on every way of stopping running
//! the exit path, and SIGKILL, an OOM kill, a power cut or a second server started on the same directory
//! do not. What never trusting costs is one round trip per client after each restart, which corral's
//! client and aiocoap's meet by themselves.

use crate::context::{Aead, Kdf, Params, SecurityContext};
use crate::group::{GroupContext, GroupParams};
use crate::Error;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A security context backed by a directory.
#[derive(Debug)]
pub struct ContextDir {
    pub dir: PathBuf,
    pub context: SecurityContext,
}

fn bytes(data: &Map<String, Value>, key: &str) -> Result<Option<Vec<u8>>, Error> {
    if let Some(v) = data.get(&format!("{key}_hex")) {
        let s = v.as_str().ok_or_else(|| Error::Config(format!("{key}_hex: expected a string of hex digits")))?;
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        return hex_bytes(&s).map(Some).ok_or_else(|| Error::Config(format!("{key}_hex: {s:?} is not hex")));
    }
    if let Some(v) = data.get(&format!("{key}_ascii")) {
        let s = v.as_str().ok_or_else(|| Error::Config(format!("{key}_ascii: expected a string")))?;
        return Ok(Some(s.as_bytes().to_vec()));
    }
    Ok(None)
}

fn read_json(path: &Path) -> Result<Option<Map<String, Value>>, Error> {
    match std::fs::read_to_string(path) {
        Ok(text) => match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(m)) => Ok(Some(m)),
            Ok(_) => Err(Error::Config(format!("{}: expected a JSON object", path.display()))),
            Err(e) => Err(Error::Config(format!("{}: {e}", path.display()))),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::Config(format!("{}: {e}", path.display()))),
    }
}

/// `settings.json` and `secret.json` of a context directory, merged (a key in both is an error).
fn read_settings(dir: &Path) -> Result<Map<String, Value>, Error> {
    let mut data = Map::new();
    for file in ["secret.json", "settings.json"] {
        if let Some(m) = read_json(&dir.join(file))? {
            for (k, v) in m {
                if data.insert(k.clone(), v).is_some() {
                    return Err(Error::Config(format!("{}: {k} is in more than one file", dir.display())));
                }
            }
        }
    }
    if data.is_empty() {
        return Err(Error::Config(format!("{}: no settings.json (or secret.json) here", dir.display())));
    }
    Ok(data)
}

/// The persisted sequence number of a context directory, if it has one.
fn persisted_sequence(dir: &Path) -> Result<Option<u64>, Error> {
    match read_json(&dir.join("sequence.json"))? {
        None => Ok(None),
        Some(seq) => seq
            .get("next-to-send")
            .and_then(Value::as_u64)
            .map(Some)
            .ok_or_else(|| Error::Config(format!("{}/sequence.json: next-to-send is missing", dir.display()))),
    }
}

fn persist_sequence(dir: &Path, next: Option<u64>) -> Result<(), Error> {
    if let Some(next) = next {
        let v = serde_json::json!({ "next-to-send": next, "received": "unknown" });
        write_atomically(&dir.join("sequence.json"), &v)?;
    }
    Ok(())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Whether the context directory holds a group context (its settings name a group).
pub fn is_group_dir(dir: &Path) -> bool {
    read_settings(dir).is_ok_and(|d| d.contains_key("group-id_hex") || d.contains_key("members"))
}

impl ContextDir {
    /// Loads the context in `dir`; continues from the persisted sequence number if there is one.
    pub fn load(dir: &Path) -> Result<ContextDir, Error> {
        let data = read_settings(dir)?;
        let need = |key: &str| -> Result<Vec<u8>, Error> {
            bytes(&data, key)?
                .ok_or_else(|| Error::Config(format!("{}: {key}_hex (or _ascii) is missing", dir.display())))
        };
        let aead = match data.get("algorithm") {
            None => Aead::AesCcm16_64_128,
            Some(v) => Aead::from_cose(v)
                .ok_or_else(|| Error::Config(format!("algorithm {v}: only AES-CCM-16-64-128 (10)")))?,
        };
        let kdf = match data.get("kdf-hashfun").and_then(Value::as_str) {
            None | Some("sha256") => Kdf::HkdfSha256,
            Some(other) => return Err(Error::Config(format!("kdf-hashfun {other:?}: only sha256"))),
        };
        let params = Params {
            master_secret: need("secret")?,
            master_salt: bytes(&data, "salt")?.unwrap_or_default(),
            sender_id: need("sender-id")?,
            recipient_id: need("recipient-id")?,
            id_context: bytes(&data, "id-context")?,
            aead,
            kdf,
            replay_window: data.get("window").and_then(Value::as_u64).map_or(32, |w| w as usize),
        };
        let mut context = SecurityContext::derive(params)?;
        if let Some(next) = persisted_sequence(dir)? {
            context.restore(next);
        }
        Ok(ContextDir { dir: dir.to_path_buf(), context })
    }

    /// Writes a new context directory (`corral oscore new`-style set-up and tests).
    pub fn create(dir: &Path, params: &Params) -> Result<(), Error> {
        std::fs::create_dir_all(dir).map_err(|e| Error::Config(format!("{}: {e}", dir.display())))?;
        let mut m = Map::new();
        m.insert("sender-id_hex".into(), Value::String(hex(&params.sender_id)));
        m.insert("recipient-id_hex".into(), Value::String(hex(&params.recipient_id)));
        m.insert("secret_hex".into(), Value::String(hex(&params.master_secret)));
        if !params.master_salt.is_empty() {
            m.insert("salt_hex".into(), Value::String(hex(&params.master_salt)));
        }
        if let Some(c) = &params.id_context {
            m.insert("id-context_hex".into(), Value::String(hex(c)));
        }
        write_atomically(&dir.join("settings.json"), &Value::Object(m))
    }

    /// Call before sending each protected message: persists a new reservation when the last one is used
    /// up. A failure to write means the message must not be sent (its nonce could come back after a crash).
    pub fn reserve(&mut self) -> Result<(), Error> {
        persist_sequence(&self.dir, self.context.sequence_to_persist())
    }

    /// Call when a server starts to use the context, before it accepts any request (see the module docs):
    /// marks a context never served before as served, or forgets the replay window of one that was. An
    /// `Err` (the mark cannot be written) leaves the window forgotten too: never trusted by mistake.
    pub fn start_serving(&mut self) -> Result<(), Error> {
        let marked = mark_served(&self.dir, self.context.sender_sequence_number());
        if !matches!(marked, Ok(true)) {
            self.context.lose_replay_window();
        }
        marked.map(drop)
    }
}

/// Writes `sequence.json` (durably) if the directory has none: `Ok(true)` for a context never served
/// before, `Ok(false)` for one that was.
fn mark_served(dir: &Path, next: u64) -> Result<bool, Error> {
    if persisted_sequence(dir)?.is_some() {
        return Ok(false);
    }
    persist_sequence(dir, Some(next))?;
    Ok(true)
}

/// A group context backed by a directory: what a Group Manager would provide, in `settings.json` (and
/// `secret.json`): `group-id_hex`, `secret_hex` (or `_ascii`), optional `salt_hex`, `sender-id_hex`,
/// `private-key_hex` (the member's 32-byte Ed25519 seed; keep it in `secret.json`), `members` (an object
/// from each other member's Sender ID in hex to its credential in hex, the CCS of
/// [`crate::group::ccs_for`]), optional `deterministic-id_hex` (the Deterministic Client),
/// `gm-cred_hex`, `window`. `sequence.json` as for [`ContextDir`].
#[derive(Debug)]
pub struct GroupDir {
    pub dir: PathBuf,
    pub context: GroupContext,
}

impl GroupDir {
    pub fn load(dir: &Path) -> Result<GroupDir, Error> {
        let data = read_settings(dir)?;
        let at = |what: String| Error::Config(format!("{}: {what}", dir.display()));
        let need = |key: &str| -> Result<Vec<u8>, Error> {
            bytes(&data, key)?.ok_or_else(|| at(format!("{key}_hex (or _ascii) is missing")))
        };
        for alg in ["algorithm", "group-encryption-algorithm"] {
            if let Some(v) = data.get(alg) {
                Aead::from_cose(v).ok_or_else(|| at(format!("{alg} {v}: only AES-CCM-16-64-128 (10)")))?;
            }
        }
        let private_key: [u8; 32] = need("private-key")?
            .try_into()
            .map_err(|_| at("private-key_hex: an Ed25519 private key is 32 bytes".into()))?;
        let mut members = BTreeMap::new();
        let listed = data
            .get("members")
            .and_then(Value::as_object)
            .ok_or_else(|| at("members: expected an object from Sender IDs (hex) to credentials (hex)".into()))?;
        for (id, cred) in listed {
            let id = hex_bytes(id).ok_or_else(|| at(format!("members: the Sender ID {id:?} is not hex")))?;
            let cred = cred
                .as_str()
                .and_then(hex_bytes)
                .ok_or_else(|| at(format!("members: the credential of {} is not a hex string", hex(&id))))?;
            members.insert(id, cred);
        }
        let base = GroupParams::new(need("secret")?, need("group-id")?, need("sender-id")?, private_key, members);
        let params = GroupParams {
            master_salt: bytes(&data, "salt")?.unwrap_or_default(),
            deterministic_id: bytes(&data, "deterministic-id")?,
            gm_cred: bytes(&data, "gm-cred")?,
            replay_window: data.get("window").and_then(Value::as_u64).map_or(base.replay_window, |w| w as usize),
            ..base
        };
        let mut context = GroupContext::derive(params).map_err(|e| at(e.to_string()))?;
        if let Some(next) = persisted_sequence(dir)? {
            context.restore(next);
        }
        Ok(GroupDir { dir: dir.to_path_buf(), context })
    }

    /// Writes a member's group context directory (the public part to `settings.json`, the Master Secret
    /// and private key to `secret.json`).
    pub fn create(dir: &Path, params: &GroupParams) -> Result<(), Error> {
        std::fs::create_dir_all(dir).map_err(|e| Error::Config(format!("{}: {e}", dir.display())))?;
        let mut m = Map::new();
        m.insert("group-id_hex".into(), Value::String(hex(&params.group_id)));
        m.insert("sender-id_hex".into(), Value::String(hex(&params.sender_id)));
        if !params.master_salt.is_empty() {
            m.insert("salt_hex".into(), Value::String(hex(&params.master_salt)));
        }
        if let Some(d) = &params.deterministic_id {
            m.insert("deterministic-id_hex".into(), Value::String(hex(d)));
        }
        if let Some(c) = &params.gm_cred {
            m.insert("gm-cred_hex".into(), Value::String(hex(c)));
        }
        let members = params.members.iter().map(|(id, c)| (hex(id), Value::String(hex(c)))).collect();
        m.insert("members".into(), Value::Object(members));
        write_atomically(&dir.join("settings.json"), &Value::Object(m))?;
        let secret = serde_json::json!({
            "secret_hex": hex(&params.master_secret),
            "private-key_hex": hex(&params.private_key),
        });
        write_atomically(&dir.join("secret.json"), &secret)
    }

    /// As [`ContextDir::reserve`].
    pub fn reserve(&mut self) -> Result<(), Error> {
        persist_sequence(&self.dir, self.context.sequence_to_persist())
    }

    /// As [`ContextDir::start_serving`], for every member's replay window.
    pub fn start_serving(&mut self) -> Result<(), Error> {
        let marked = mark_served(&self.dir, self.context.sender_sequence_number());
        if !matches!(marked, Ok(true)) {
            self.context.lose_replay_windows();
        }
        marked.map(drop)
    }
}

fn hex_bytes(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 || !s.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok()).collect()
}

fn write_atomically(path: &Path, v: &Value) -> Result<(), Error> {
    let tmp = path.with_extension("json.tmp");
    let io = |e: std::io::Error| Error::Config(format!("{}: {e}", path.display()));
    // Owner-only: these files hold Master Secrets and private keys.
    let mut f = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp).map_err(io)?
    };
    f.write_all(v.to_string().as_bytes()).map_err(io)?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)?;
    // The rename itself must survive a power cut: a lost sequence.json would reuse nonces and read as a
    // context never served.
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("corral-oscore-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn only_a_context_never_served_starts_with_a_known_window() {
        let dir = scratch("served");
        ContextDir::create(&dir, &Params::new(b"0123456789abcdef", b"c", b"s")).unwrap();
        let mut first = ContextDir::load(&dir).unwrap();
        first.start_serving().unwrap();
        assert!(first.context.replay_window_known(), "never served: nothing was ever accepted");
        assert!(dir.join("sequence.json").exists(), "marked before any request is accepted");
        // The next start (after a clean exit or a crash alike), whatever sequence.json says.
        for next in [0, 1 << 20] {
            persist_sequence(&dir, Some(next)).unwrap();
            let mut again = ContextDir::load(&dir).unwrap();
            again.start_serving().unwrap();
            assert!(!again.context.replay_window_known(), "next-to-send {next}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
