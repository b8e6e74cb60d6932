//! What several commands share: verbosity, waiting for Ctrl-C, the server verbs' addresses and choices,
//! and the option groups and formats under this folder (exit codes, output, units, policy, TLS and DTLS
//! arguments, OSCORE credentials).
//!
//! Owns: nothing a single command owns. A command file (`cmd/<verb>.rs`) imports from here, never from
//! another command.

pub mod credentials;
pub mod dtls;
pub mod exit;
pub mod output;
pub mod policy;
pub mod server;
pub mod tls;
pub mod units;

use corral_tokio::Code;

/// `-v` and `-q`, as every command gets them.
#[derive(Debug, Clone, Copy)]
pub struct Verbosity {
    pub verbose: u8,
    pub quiet: bool,
}

/// A request method by name (`get`, `POST`, …), as `-m` takes it.
pub fn parse_method(s: &str) -> Result<Code, String> {
    Code::parse(s)
        .filter(|c| c.is_request())
        .ok_or_else(|| format!("`{s}` is not a method: use get, post, put, delete, fetch, patch or ipatch"))
}

/// Waits for Ctrl-C or SIGTERM: how `serve`, `gateway` and `device` are told to stop.
pub async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
