//! `--http` and its options, the same on every verb that serves: the flags become corral-http's
//! [`WindowConfig`] (the token read from its file, this host's addresses and networks from its interfaces),
//! and the window's types are re-exported so that the commands name them `http::…`.
//!
//! Owns: the flags' text and their conversion. The window itself (routes, rules, bounds, metrics) is
//! corral-http's; nothing here serves.

use crate::exit::Failure;
use clap::Args;
use corral_group::policy::AccessPolicy;
use corral_group::Prefix;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

pub use corral_http::{
    on_this_machine, this_machine, watch, Board, Bound, EmNumbers, GatewaySide, ProxyNumbers, ProxySide, WindowConfig,
    WindowError,
};

/// `--http` and the options of its listener, the same on every verb that serves.
#[derive(Args, Debug, Default, Clone)]
pub struct HttpArgs {
    /// Also serve HTTP on ADDR:PORT (off unless given): /metrics (Prometheus text format), /healthz,
    /// /readyz; on the gateway also the admin API (/api, OpenAPI at /api/openapi.json) and the HTTP→CoAP
    /// cross-proxy (/hc/coap://HOST/PATH, /hc/coaps://… with --peer-psk-file's credentials). Who may use
    /// it: the gateway's --allow roles, applied to the HTTP client's address (read: GETs; actuate; manage:
    /// changes), this machine only elsewhere. Requests must name the listener (Host: ADDR:PORT, localhost on
    /// loopback, or a --http-host name); changes from a browser must come from its own pages (Origin).
    #[arg(long, value_name = "ADDR:PORT")]
    pub http: Option<SocketAddr>,
    /// With --http: the admin API (/api), the cross-proxy (/hc/) and the console's forms also need
    /// `Authorization: Bearer TOKEN`, TOKEN being the first line of FILE (the forms are then off: a browser
    /// form cannot send it).
    #[arg(long, value_name = "FILE", requires = "http")]
    pub http_token_file: Option<PathBuf>,
    /// With --http: a name the listener is reached by (repeatable), e.g. gw.example.net, or
    /// gw.example.net:8443 for that port only. A request whose Host is neither the listener's address nor
    /// such a name is refused (421): that is what keeps a web page on another domain that re-resolves to
    /// this machine (DNS rebinding) out.
    #[arg(long, value_name = "NAME[:PORT]", requires = "http", value_parser = corral_http::parse_host)]
    pub http_host: Vec<(String, Option<u16>)>,
    /// With --http on the gateway: addresses of this host the cross-proxy may send changes to (non-GET), and
    /// that HTTP clients from other hosts may reach through it (repeatable or comma-separated, still within
    /// --member-net and --member-port) [default: none: this host is no destination for a change, nor for
    /// a client from another host].
    #[arg(long, value_name = "PREFIX", requires = "http", value_delimiter = ',',
          value_parser = crate::policy_args::parse_prefix)]
    pub http_hc_this_host: Vec<Prefix>,
}

impl HttpArgs {
    /// The window's configuration if `--http` was given; `None` otherwise.
    pub fn config(&self) -> Result<Option<WindowConfig>, Failure> {
        let Some(listen) = self.http else { return Ok(None) };
        let token = match &self.http_token_file {
            None => None,
            Some(f) => {
                let text = std::fs::read_to_string(f)
                    .map_err(|e| Failure::other(format!("cannot read --http-token-file {}: {e}", f.display())))?;
                let t = text.lines().next().unwrap_or("").trim().to_string();
                if t.is_empty() {
                    return Err(Failure::usage(format!("--http-token-file {}: the first line is empty", f.display())));
                }
                Some(t)
            }
        };
        Ok(Some(WindowConfig {
            listen,
            token,
            host_names: self.http_host.clone(),
            this_machine: crate::policy_args::this_machine(),
            broadcasts: crate::policy_args::host_networks().iter().filter_map(Prefix::broadcast).collect(),
            hc_this_host: self.http_hc_this_host.clone(),
        }))
    }

    /// Binds the listener if `--http` was given; `None` otherwise.
    pub fn bind(&self, verb: &'static str, board: Arc<Board>, access: AccessPolicy) -> Result<Option<Bound>, Failure> {
        match self.config()? {
            None => Ok(None),
            Some(c) => Ok(Some(Bound::bind(c, verb, board, access)?)),
        }
    }
}

impl From<WindowError> for Failure {
    fn from(e: WindowError) -> Failure {
        match e {
            // The flag that named the address, as the command's other start-up failures name theirs.
            WindowError::Listen { addr, source } => {
                Failure::other(format!("cannot listen on {addr} (--http): {source}"))
            }
            e => Failure::other(e.to_string()),
        }
    }
}
