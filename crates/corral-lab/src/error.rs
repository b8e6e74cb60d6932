//! The lab's errors, one type per kind of fault: the scenario file ([`ScenarioError`], the user fixes the
//! file), a point that cannot run ([`RunError`]: its setup, the machine, or a bug in the lab), and a report
//! directory that cannot be written or read back ([`DataError`]). Each says what to fix in one line.
//!
//! # What it owns
//! The error types and their wording. It imports nothing from the rest of the crate, so every module can
//! return them.

use std::fmt;
use std::path::PathBuf;

/// A scenario file that cannot be used as written.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScenarioError {
    /// Not TOML, or not the scenario format (an unknown or misspelt field, a value of the wrong type):
    /// the TOML parser's words, which name the field and the line.
    Format(String),
    /// A value out of range, or values that contradict each other: what to fix, naming the field.
    Invalid(String),
}

impl ScenarioError {
    pub(crate) fn invalid(message: impl Into<String>) -> ScenarioError {
        ScenarioError::Invalid(message.into())
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScenarioError::Format(m) | ScenarioError::Invalid(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ScenarioError {}

/// Why a point did not run.
#[derive(Debug)]
#[non_exhaustive]
pub enum RunError {
    /// The point's setup does not resolve (the scenario's fault).
    Scenario(ScenarioError),
    /// A `[[sensitivity]]` variant of the scenario does not parse (the scenario's fault).
    Sensitivity { name: String, source: ScenarioError },
    /// No connected placement of a floor's nodes (the scenario's fault: a floor too sparse for its radius).
    Placement { nodes: usize, width: f64, height: f64, radius: f64 },
    /// A forwarder's FIB rule does not parse (the scenario's fault, for `[[proxy.rule]]`).
    Rule { at: String, reason: corral_proxy::BadPattern },
    /// The Entity Manager refused its configuration (a bug in the lab).
    EntityManager(corral_group::StoreError),
    /// The OSCORE contexts of a seed-001 deployment could not be derived (a bug in the lab).
    Security(corral_oscore::Error),
    /// The lab's DTLS certificates do not load (a bug in the lab).
    Credentials(String),
    /// A service the run reads its results from was gone at the end (a bug in the lab).
    Lost(&'static str),
    /// The machine cannot run an emulated point.
    Emulated(EmulatedError),
    /// A point of a sweep failed: which one, and why.
    Point { index: usize, label: String, source: Box<RunError> },
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Scenario(e) => e.fmt(f),
            RunError::Sensitivity { name, source } => write!(f, "sensitivity {name:?}: {source}"),
            RunError::Placement { nodes, width, height, radius } => {
                write!(f, "no connected placement of {nodes} nodes on a {width}×{height} m floor with range {radius} m")
            }
            RunError::Rule { at, reason } => write!(f, "proxy.rule at {at:?}: {reason}"),
            RunError::EntityManager(e) => e.fmt(f),
            RunError::Security(e) => e.fmt(f),
            RunError::Credentials(why) => write!(f, "the lab's DTLS credentials: {why}"),
            RunError::Lost(what) => write!(f, "{what} is gone"),
            RunError::Emulated(e) => e.fmt(f),
            RunError::Point { index, label, source } => write!(f, "point {index} ({label}): {source}"),
        }
    }
}

impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunError::Scenario(e) | RunError::Sensitivity { source: e, .. } => Some(e),
            RunError::EntityManager(e) => Some(e),
            RunError::Security(e) => Some(e),
            RunError::Emulated(e) => Some(e),
            RunError::Point { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

impl From<ScenarioError> for RunError {
    fn from(e: ScenarioError) -> RunError {
        RunError::Scenario(e)
    }
}

impl From<EmulatedError> for RunError {
    fn from(e: EmulatedError) -> RunError {
        RunError::Emulated(e)
    }
}

/// Why an emulated point (real programs over `corral link`) could not run: the machine's fault.
#[derive(Debug)]
#[non_exhaustive]
pub enum EmulatedError {
    /// The running program is not `corral`, whose `serve` and `get` the CoAP scheme runs (a test binary, say).
    NotCorral,
    /// The path of the running executable is unknown.
    Executable(std::io::Error),
    /// The point's scratch directory or file could not be written.
    Io { path: PathBuf, source: std::io::Error },
    /// The emulated link could not come up (usually: not root), or its server could not start.
    Link(corral_link::LinkError),
}

impl fmt::Display for EmulatedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EmulatedError::NotCorral => {
                f.write_str("emulated CoAP points run `corral serve` and `corral get`: run them with `corral lab run`")
            }
            EmulatedError::Executable(e) => write!(f, "cannot find the corral executable: {e}"),
            EmulatedError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            EmulatedError::Link(e) => write!(f, "the emulated link: {e}"),
        }
    }
}

impl std::error::Error for EmulatedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EmulatedError::Executable(e) | EmulatedError::Io { source: e, .. } => Some(e),
            EmulatedError::Link(e) => Some(e),
            _ => None,
        }
    }
}

/// A report directory that cannot be written, or read back (`corral lab merge`).
#[derive(Debug)]
#[non_exhaustive]
pub enum DataError {
    /// A file could not be read or written.
    Io { path: PathBuf, source: std::io::Error },
    /// A file does not read back: which file and what is wrong in it (text only ever shown to a person).
    Malformed { path: PathBuf, problem: String },
    /// The scenario file of a report directory does not parse.
    Scenario { path: PathBuf, source: ScenarioError },
    /// Shards that are not parts of one run (another scenario, seed or mode, or a point that differs).
    Mismatch(String),
    /// `merge` was given no directory.
    NoShards,
}

impl fmt::Display for DataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            DataError::Malformed { path, problem } => write!(f, "{}: {problem}", path.display()),
            DataError::Scenario { path, source } => write!(f, "{}: {source}", path.display()),
            DataError::Mismatch(m) => f.write_str(m),
            DataError::NoShards => f.write_str("no shard directories given"),
        }
    }
}

impl std::error::Error for DataError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DataError::Io { source, .. } => Some(source),
            DataError::Scenario { source, .. } => Some(source),
            _ => None,
        }
    }
}
