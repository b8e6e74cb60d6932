//! A credentials file in aiocoap's format, so one file serves both tools: a JSON object whose keys are URI
//! patterns (`"coap://host/*"`: a trailing `*` matches any rest; `":name"` entries are for a server) and
//! whose values name an OSCORE context directory: `{"oscore": {"basedir": "DIR/"}}` (`contextfile` is
//! accepted as aiocoap's older name). A relative directory is taken relative to the credentials file. A
//! directory may hold a pairwise context or a Group OSCORE member's context (its settings name a group).
//!
//! Owns: reading the file and choosing the context directory for a URI. The directories themselves are
//! [`crate::store`]'s. Must never: decide what a failure means to a user (the caller's exit codes).

use crate::served::Served;
use crate::store::{is_group_dir, ContextDir, GroupDir};
use std::fmt;
use std::path::{Path, PathBuf};

/// A loaded credentials file: its URI patterns and the context directory of each.
#[derive(Debug, Clone)]
pub struct Credentials {
    file: PathBuf,
    entries: Vec<(String, PathBuf)>,
}

/// Why a credentials file or one of its contexts cannot be used. The file that could not be read and a
/// context that does not load are the system's or the directory's fault; the rest is the file's content
/// ([`CredentialsError::is_content`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum CredentialsError {
    /// The file could not be read.
    Read { file: PathBuf, error: std::io::Error },
    /// The file is not what the format says (the message names the file and what is wrong).
    Format(String),
    /// The file has no entry for a URI (the message names both).
    NoEntry(String),
    /// A context directory the file names does not load.
    Context { dir: PathBuf, error: crate::Error },
}

impl CredentialsError {
    /// Whether the file's content is at fault (a malformed file, a URI it does not cover), rather than the
    /// system or a context directory.
    pub fn is_content(&self) -> bool {
        matches!(self, CredentialsError::Format(_) | CredentialsError::NoEntry(_))
    }
}

impl fmt::Display for CredentialsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CredentialsError::Read { file, error } => {
                write!(f, "cannot read the credentials file {}: {error}", file.display())
            }
            CredentialsError::Format(m) | CredentialsError::NoEntry(m) => f.write_str(m),
            CredentialsError::Context { dir, error } => write!(f, "OSCORE context {}: {error}", dir.display()),
        }
    }
}

impl std::error::Error for CredentialsError {}

impl Credentials {
    pub fn load(path: &Path) -> Result<Credentials, CredentialsError> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| CredentialsError::Read { file: path.to_path_buf(), error })?;
        let format = |m: String| CredentialsError::Format(format!("{}: {m}", path.display()));
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| format(format!("not JSON: {e}")))?;
        let obj = v.as_object().ok_or_else(|| format("expected a JSON object".into()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut entries = Vec::new();
        for (pattern, entry) in obj {
            let Some(oscore) = entry.get("oscore") else { continue };
            let dir = oscore
                .get("basedir")
                .or_else(|| oscore.get("contextfile"))
                .and_then(|d| d.as_str())
                .ok_or_else(|| format(format!("{pattern}: oscore needs \"basedir\"")))?;
            let dir = Path::new(dir);
            entries.push((pattern.clone(), if dir.is_absolute() { dir.to_path_buf() } else { base.join(dir) }));
        }
        if entries.is_empty() {
            return Err(format(r#"no OSCORE entry ({"coap://host/*": {"oscore": {"basedir": "DIR"}}})"#.into()));
        }
        Ok(Credentials { file: path.to_path_buf(), entries })
    }

    /// The context directory for a request URI: an exact key, or the longest `prefix*` key that matches.
    pub fn for_uri(&self, uri: &str) -> Result<Served, CredentialsError> {
        let best = self
            .entries
            .iter()
            .filter(|(p, _)| match p.strip_suffix('*') {
                Some(prefix) => uri.starts_with(prefix),
                None => p == uri,
            })
            .max_by_key(|(p, _)| p.len());
        let (_, dir) = best.ok_or_else(|| {
            CredentialsError::NoEntry(format!(
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
    pub fn all(&self) -> Result<Vec<Served>, CredentialsError> {
        self.entries.iter().map(|(_, d)| load_dir(d)).collect()
    }
}

fn load_dir(dir: &Path) -> Result<Served, CredentialsError> {
    let failed = |error| CredentialsError::Context { dir: dir.to_path_buf(), error };
    if is_group_dir(dir) {
        GroupDir::load(dir).map(Served::Group).map_err(failed)
    } else {
        ContextDir::load(dir).map(Served::Pairwise).map_err(failed)
    }
}
