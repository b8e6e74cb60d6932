//! `--credentials FILE`: aiocoap's credentials format, so one file serves both tools. A JSON object whose
//! keys are URI patterns (`"coap://host/*"`: a trailing `*` matches any rest; `":name"` entries are for a
//! server) and whose values name an OSCORE context directory: `{"oscore": {"basedir": "DIR/"}}`
//! (`contextfile` is accepted as aiocoap's older name). A relative directory is taken relative to the
//! credentials file. A directory may hold a pairwise context or a Group OSCORE member's context (its
//! settings name a group: `corral oscore group` writes them).

use crate::cli::exit::Failure;
use corral_oscore::served::Served;
use corral_oscore::store::{is_group_dir, ContextDir, GroupDir};
use std::path::{Path, PathBuf};

pub struct Credentials {
    file: PathBuf,
    entries: Vec<(String, PathBuf)>,
}

impl Credentials {
    pub fn load(path: &Path) -> Result<Credentials, Failure> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Failure::other(format!("cannot read the credentials file {}: {e}", path.display())))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| Failure::usage(format!("{}: not JSON: {e}", path.display())))?;
        let obj = v.as_object().ok_or_else(|| Failure::usage(format!("{}: expected a JSON object", path.display())))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut entries = Vec::new();
        for (pattern, entry) in obj {
            let Some(oscore) = entry.get("oscore") else { continue };
            let dir =
                oscore.get("basedir").or_else(|| oscore.get("contextfile")).and_then(|d| d.as_str()).ok_or_else(
                    || Failure::usage(format!("{}: {pattern}: oscore needs \"basedir\"", path.display())),
                )?;
            let dir = Path::new(dir);
            entries.push((pattern.clone(), if dir.is_absolute() { dir.to_path_buf() } else { base.join(dir) }));
        }
        if entries.is_empty() {
            return Err(Failure::usage(format!(
                "{}: no OSCORE entry ({{\"coap://host/*\": {{\"oscore\": {{\"basedir\": \"DIR\"}}}}}})",
                path.display()
            )));
        }
        Ok(Credentials { file: path.to_path_buf(), entries })
    }

    /// The context directory for a request URI: an exact key, or the longest `prefix*` key that matches.
    pub fn for_uri(&self, uri: &str) -> Result<Served, Failure> {
        let best = self
            .entries
            .iter()
            .filter(|(p, _)| match p.strip_suffix('*') {
                Some(prefix) => uri.starts_with(prefix),
                None => p == uri,
            })
            .max_by_key(|(p, _)| p.len());
        let (_, dir) = best.ok_or_else(|| {
            Failure::usage(format!(
                "{} has no OSCORE entry for {uri} (keys are URI patterns such as \"coap://host/*\")",
                self.file.display()
            ))
        })?;
        load_dir(dir)
    }

    /// The file's URI patterns (`coap://host:port/*`), in the file's order.
    pub fn patterns(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(p, _)| p.as_str())
    }

    /// Every context in the file (a server serves all of its clients and groups).
    pub fn all(&self) -> Result<Vec<Served>, Failure> {
        self.entries.iter().map(|(_, d)| load_dir(d)).collect()
    }
}

fn load_dir(dir: &Path) -> Result<Served, Failure> {
    let failed = |e: corral_oscore::Error| Failure::other(format!("OSCORE context {}: {e}", dir.display()));
    if is_group_dir(dir) {
        GroupDir::load(dir).map(Served::Group).map_err(failed)
    } else {
        ContextDir::load(dir).map(Served::Pairwise).map_err(failed)
    }
}

/// The context a client sends with: a pairwise context; a group member's in group mode (signed requests,
/// to one server or a multicast group); or — with `deterministic` — a group member's sending deterministic
/// requests.
pub fn client_context(served: Served, deterministic: bool) -> Result<corral_tokio::oscore::ClientContext, Failure> {
    use corral_tokio::oscore::ClientContext;
    match (served, deterministic) {
        (Served::Pairwise(d), false) => Ok(ClientContext::Pairwise(d)),
        (Served::Group(g), false) => Ok(ClientContext::Group(g)),
        (Served::Group(g), true) => {
            if g.context.params().deterministic_id.is_none() {
                return Err(Failure::usage(format!(
                    "--deterministic: the group context {} has no deterministic-id_hex (its Deterministic Client)",
                    g.dir.display()
                )));
            }
            Ok(ClientContext::Deterministic(g))
        }
        (Served::Pairwise(d), true) => Err(Failure::usage(format!(
            "--deterministic needs a Group OSCORE context; {} is a pairwise one (corral oscore group makes a group)",
            d.dir.display()
        ))),
    }
}

/// The context of a group member sending in pairwise mode to the member whose Sender ID is `server_hex`.
pub fn pairwise_context(served: Served, server_hex: &str) -> Result<corral_tokio::oscore::ClientContext, Failure> {
    let hex = |id: &[u8]| id.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let Served::Group(g) = served else {
        return Err(Failure::usage(
            "--pairwise-with needs a Group OSCORE context (corral oscore group); this one is an RFC 8613 pair, \
             which is pairwise already",
        ));
    };
    let server = (0..server_hex.len())
        .step_by(2)
        .map(|i| server_hex.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
        .collect::<Option<Vec<u8>>>()
        .filter(|v| !v.is_empty() && server_hex.len() % 2 == 0)
        .ok_or_else(|| {
            Failure::usage(format!("--pairwise-with {server_hex}: give the member's Sender ID in hex, e.g. 00"))
        })?;
    if !g.context.params().members.contains_key(&server) {
        let known: Vec<String> = g.context.params().members.keys().map(|k| hex(k)).collect();
        return Err(Failure::usage(format!(
            "--pairwise-with {server_hex}: the group context {} has no member {}; its members are {}",
            g.dir.display(),
            hex(&server),
            known.join(", ")
        )));
    }
    Ok(corral_tokio::oscore::ClientContext::GroupPairwise { dir: g, server })
}
