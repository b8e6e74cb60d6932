//! corral-dtls' errors, grouped by whose fault they are (as rustls groups its own):
//! - **malformed input**: credentials — a PSK file, a PEM certificate, key or CA, a raw public key —
//!   that are not what their format says, or a file that cannot be read ([`CredentialError`]);
//! - **caller misuse**: a [`crate::SecureConfig`] that cannot run ([`ConfigError`]);
//! - **peer misbehaviour** is no `Err` at all: a handshake that fails is an event
//!   ([`crate::DtlsEvent::Failed`] with its [`crate::HandshakeFailure`]), since the layer goes on
//!   serving every other peer.

use std::fmt;
use std::path::{Path, PathBuf};

/// Credentials that do not load: the file (when they were read from one), the field in it that is
/// wrong (a PSK identity, a peer's URI), and what is wrong. Its `Display` is one line:
/// `FILE: FIELD: what`.
#[derive(Debug)]
#[non_exhaustive]
pub struct CredentialError {
    /// The file, when the credentials were read from one.
    pub file: Option<PathBuf>,
    /// The entry of the file that is wrong (a PSK file's identity, a peer file's URI); `None`: the
    /// file as a whole, or a part its message names ("the key", "the CA file").
    pub field: Option<String>,
    pub kind: CredentialErrorKind,
}

/// What is wrong with credentials.
#[derive(Debug)]
#[non_exhaustive]
pub enum CredentialErrorKind {
    /// The file could not be read.
    Read(std::io::Error),
    /// The text is not what the format says, in words for one line.
    Malformed(String),
}

impl CredentialError {
    /// Malformed text, `why`, in no file (yet: see [`CredentialError::in_file`]).
    pub(crate) fn malformed(why: impl Into<String>) -> CredentialError {
        CredentialError { file: None, field: None, kind: CredentialErrorKind::Malformed(why.into()) }
    }

    /// Malformed text at `field`.
    pub(crate) fn at(field: &str, why: impl Into<String>) -> CredentialError {
        CredentialError { field: Some(field.to_string()), ..CredentialError::malformed(why) }
    }

    /// The error, said of `file`.
    pub(crate) fn in_file(self, file: &Path) -> CredentialError {
        CredentialError { file: Some(file.to_path_buf()), ..self }
    }

    /// Whether the file could not be read (the caller's environment), rather than said something wrong.
    pub fn is_read(&self) -> bool {
        matches!(self.kind, CredentialErrorKind::Read(_))
    }
}

impl fmt::Display for CredentialError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let CredentialErrorKind::Read(e) = &self.kind {
            return match &self.file {
                Some(file) => write!(f, "cannot read {}: {e}", file.display()),
                None => write!(f, "cannot read the credentials: {e}"),
            };
        }
        if let Some(file) = &self.file {
            write!(f, "{}: ", file.display())?;
        }
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        match &self.kind {
            CredentialErrorKind::Malformed(why) => f.write_str(why),
            CredentialErrorKind::Read(_) => Ok(()),
        }
    }
}

impl std::error::Error for CredentialError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            CredentialErrorKind::Read(e) => Some(e),
            CredentialErrorKind::Malformed(_) => None,
        }
    }
}

/// Reads `path` as text, or says which file could not be read.
pub(crate) fn read_text(path: &Path) -> Result<String, CredentialError> {
    std::fs::read_to_string(path).map_err(|e| CredentialError {
        file: Some(path.to_path_buf()),
        field: None,
        kind: CredentialErrorKind::Read(e),
    })
}

/// A [`crate::SecureConfig`] that cannot run: the caller's mistake, said with the setting at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// `server` holds a client's configuration.
    ServerNotServing,
    /// `client`, or the configuration of the peer at this address, holds a server's.
    ClientServing { peer: Option<std::net::SocketAddr> },
    /// `secure_port` asks for a port that carries no DTLS: the node has no layer.
    SecurePortWithoutDtls,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::ServerNotServing => write!(f, "the server's DTLS configuration has a client role"),
            ConfigError::ClientServing { peer: Some(p) } => {
                write!(f, "the DTLS configuration for peer {p} has a server role")
            }
            ConfigError::ClientServing { peer: None } => write!(f, "the client's DTLS configuration has a server role"),
            ConfigError::SecurePortWithoutDtls => {
                write!(f, "a port of its own for DTLS records, but no DTLS server, client or peer")
            }
        }
    }
}

impl std::error::Error for ConfigError {}
