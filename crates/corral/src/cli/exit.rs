//! Exit codes: one per kind of failure, documented in `--help` and `docs/client.md`. Usage errors use 2, which is
//! also what clap exits with for bad arguments, so the two never disagree.

use corral_tokio::Code;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCode {
    Other = 1,
    Usage = 2,
    Timeout = 3,
    ClientError = 4,
    ServerError = 5,
    /// A block-wise transfer broke off (stalled, or the peer sent inconsistent blocks); no body was written.
    Transfer = 6,
    /// OSCORE: the response did not verify, or the server refused the protected request (wrong key,
    /// unknown kid, replay).
    Security = 7,
    /// coaps://: the DTLS handshake failed (unknown identity, keys that do not match, no shared suite, no
    /// answer to the handshake).
    Handshake = 8,
    /// `corral gateway`/`corral rd --store postgres://…`: the store cannot be reached at start, or holds a
    /// schema newer than this corral. The message names it by URL, without the password, and says why.
    Store = 9,
    /// Ctrl-C or SIGTERM stopped the command after it kept what was done (a summary printed, an
    /// observation deregistered): 128 + SIGINT, as a shell reports a command Ctrl-C ended.
    Interrupted = 130,
}

/// Why a command failed: the exit code and the one-line message printed after `error: `.
#[derive(Debug)]
pub struct Failure {
    pub code: ExitCode,
    pub message: String,
    /// Another program's exit status to pass through instead of `code` (`corral link run`).
    passed_through: Option<i32>,
}

/// A program of corral-gateway that could not start: settings that cannot go together are a usage error.
impl From<corral_gateway::Error> for Failure {
    fn from(e: corral_gateway::Error) -> Failure {
        match e {
            corral_gateway::Error::Config(m) => Failure::usage(m),
            corral_gateway::Error::Store(m) => Failure::new(ExitCode::Store, m),
            e => Failure::other(e.to_string()),
        }
    }
}

/// A credentials file (`--credentials`) that cannot be used: its content is a usage error.
impl From<corral_oscore::credentials::CredentialsError> for Failure {
    fn from(e: corral_oscore::credentials::CredentialsError) -> Failure {
        match e.is_content() {
            true => Failure::usage(e.to_string()),
            false => Failure::other(e.to_string()),
        }
    }
}

impl Failure {
    pub fn new(code: ExitCode, message: impl Into<String>) -> Failure {
        Failure { code, message: message.into(), passed_through: None }
    }

    pub fn usage(message: impl Into<String>) -> Failure {
        Failure::new(ExitCode::Usage, message)
    }

    pub fn other(message: impl Into<String>) -> Failure {
        Failure::new(ExitCode::Other, message)
    }

    /// Ctrl-C (or SIGTERM) ended the command; `message` says what was kept.
    pub fn interrupted(message: impl Into<String>) -> Failure {
        Failure::new(ExitCode::Interrupted, message)
    }

    /// An error response: `4.04 Not Found: <diagnostic payload>`. A diagnostic that already starts with
    /// the code (the Entity Manager's do: `5.02 Bad Gateway: 1 of 3 members changed`) is not prefixed again.
    pub fn from_response(code: Code, diagnostic: &[u8]) -> Failure {
        let exit = if code.is_client_error() { ExitCode::ClientError } else { ExitCode::ServerError };
        let diag = String::from_utf8_lossy(diagnostic);
        let diag: String = diag.trim().chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
        let (full, short) = (format!("{code:#}"), code.to_string());
        let rest = diag
            .strip_prefix(&full)
            .or_else(|| diag.strip_prefix(&short).filter(|r| !r.starts_with(|c: char| c.is_ascii_digit())))
            .map(|r| r.trim_start_matches(|c: char| c == ':' || c.is_whitespace()))
            .unwrap_or(&diag);
        let message = if rest.is_empty() { full } else { format!("{full}: {rest}") };
        Failure::new(exit, message)
    }

    pub fn from_client(e: corral_tokio::Error, timeout_secs: f64) -> Failure {
        use corral_tokio::Error as E;
        let timeout = crate::cli::units::show_secs(timeout_secs);
        match e {
            E::InvalidUri(u) => Failure::usage(u.to_string()),
            E::Timeout => Failure::new(ExitCode::Timeout, format!("no response within {timeout} (timeout)")),
            E::Unreachable(a) => Failure::new(ExitCode::Timeout, format!("{a} is unreachable from this socket")),
            E::Refused(_) | E::NoRoute(_) => Failure::new(ExitCode::Timeout, e.to_string()),
            E::Resolve { .. } => Failure::new(ExitCode::Timeout, e.to_string()),
            E::Reset => Failure::other("the server rejected the request (RST)"),
            E::Transfer(why) if why.starts_with("stalled") => Failure::new(
                ExitCode::Transfer,
                format!("block-wise transfer failed: {why} (-B {timeout}; large transfers may need more)"),
            ),
            E::Transfer(why) => Failure::new(ExitCode::Transfer, format!("block-wise transfer failed: {why}")),
            E::Connect { .. } | E::ConnectionClosed => Failure::new(ExitCode::Timeout, e.to_string()),
            E::Oscore(_) => Failure::new(ExitCode::Security, e.to_string()),
            E::Dtls { .. } | E::Tls { .. } => Failure::new(ExitCode::Handshake, e.to_string()),
            other => Failure::other(other.to_string()),
        }
    }

    /// Another program's exit status, passed through as this command's (`corral link run` exits with its
    /// client's); the message may be empty (nothing printed).
    pub fn passing_through(status: i32, message: impl Into<String>) -> Failure {
        Failure { code: ExitCode::Other, message: message.into(), passed_through: Some(status) }
    }

    /// The process's exit status.
    pub fn exit_status(&self) -> i32 {
        self.passed_through.unwrap_or(self.code as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_response_never_repeats_its_prefix() {
        let f = Failure::from_response(Code::BAD_GATEWAY, b"5.02 Bad Gateway: 1 of 3 members changed");
        assert_eq!(f.message, "5.02 Bad Gateway: 1 of 3 members changed");
        assert_eq!(f.code, ExitCode::ServerError);
        let f = Failure::from_response(Code::GATEWAY_TIMEOUT, b"5.04: 2 of 4 members answered");
        assert_eq!(f.message, "5.04 Gateway Timeout: 2 of 4 members answered");
        let f = Failure::from_response(Code::NOT_FOUND, b"no resource at /nope");
        assert_eq!(f.message, "4.04 Not Found: no resource at /nope");
        // A diagnostic that merely starts with digits keeps them.
        let f = Failure::from_response(Code::BAD_REQUEST, b"4.000 is not a number of members");
        assert_eq!(f.message, "4.00 Bad Request: 4.000 is not a number of members");
        assert_eq!(Failure::from_response(Code::NOT_FOUND, b"  ").message, "4.04 Not Found");
    }

    #[test]
    fn a_passed_through_status_is_the_exit_status() {
        assert_eq!(Failure::passing_through(42, "").exit_status(), 42);
        assert_eq!(Failure::usage("x").exit_status(), 2);
    }
}
