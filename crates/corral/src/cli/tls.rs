//! coaps+tcp:// (CoAP over TLS, RFC 8323 §9) on the command line: the client verbs' `-C CA` (and `-c CERT
//! -j KEY` for a client certificate), which are the flags coaps:// takes for X.509 (libcoap's meanings),
//! and `corral serve --tls [ADDR:PORT]` with `--cert --key` (and `--ca` to require client certificates).
//! Owns turning these PEM files into corral-tokio's [`TlsClientConfig`] / [`TlsServerConfig`] and the
//! one-line errors about them; TLS itself is rustls's, driven by corral-tokio's `tls` module.

use crate::cli::dtls::DtlsClientArgs;
use crate::cli::exit::Failure;
use clap::Args;
use corral_tokio::{TlsClientConfig, TlsServerConfig};
use std::net::SocketAddr;
use std::path::Path;

/// The default port of coaps+tcp:// (RFC 8323 §8.2).
pub const COAPS_TCP_PORT: u16 = 5684;

fn read(path: &Path) -> Result<String, Failure> {
    std::fs::read_to_string(path).map_err(|e| Failure::other(format!("cannot read {}: {e}", path.display())))
}

/// A client's TLS settings from `-C CA` and optionally `-c CERT -j KEY`; a usage error says what is missing
/// or wrong (a PSK, which TLS is not given here, or files that are not PEM).
pub fn client_config(args: &DtlsClientArgs) -> Result<TlsClientConfig, Failure> {
    if args.psk.is_some() {
        return Err(Failure::usage(
            "coaps+tcp:// (TLS) takes certificates, not a pre-shared key: -C CA (and -c CERT -j KEY for a client \
             certificate) instead of -k/-u",
        ));
    }
    if args.rpk.is_some() {
        return Err(Failure::usage(
            "coaps+tcp:// (TLS) takes certificates, not a raw public key: -C CA (and -c CERT -j KEY for a client \
             certificate) instead of -M/--peer-key",
        ));
    }
    let Some(ca) = &args.ca else {
        return Err(Failure::usage(
            "coaps+tcp:// needs -C CA: the CA certificate (PEM) that signed the server's certificate (and -c CERT \
             -j KEY if the server asks for a client certificate)",
        ));
    };
    let identity = match (&args.cert, &args.key) {
        (Some(cert), Some(key)) => Some((read(cert)?, read(key)?)),
        _ => None,
    };
    let files = [Some(ca), args.cert.as_ref(), args.key.as_ref()];
    let named = files.iter().flatten().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
    TlsClientConfig::from_pem(&read(ca)?, identity.as_ref().map(|(c, k)| (c.as_str(), k.as_str())))
        .map_err(|why| Failure::usage(format!("{why} ({named})")))
}

/// `corral serve`'s `--tls`: its certificate flags are `--cert --key --ca`, shared with `--dtls`.
#[derive(Args, Debug, Clone, Default)]
pub struct TlsServeArgs {
    /// Also serve coaps+tcp:// (CoAP over TLS 1.2/1.3, RFC 8323, ALPN "coap") on ADDR:PORT; without it on
    /// the UDP address with port 5684. Needs --cert and --key; with --ca, clients must present a
    /// certificate that CA signed. The same resources, connection limits and idle timeout as --tcp.
    #[arg(long, value_name = "ADDR:PORT", num_args = 0..=1, default_missing_value = "")]
    pub tls: Option<String>,
}

impl TlsServeArgs {
    /// Where to serve coaps+tcp:// (given the plain UDP address) and with which settings; `None` without
    /// --tls.
    pub fn server(
        &self,
        udp: SocketAddr,
        (cert, key, ca): (Option<&Path>, Option<&Path>, Option<&Path>),
    ) -> Result<Option<(SocketAddr, TlsServerConfig)>, Failure> {
        let Some(at) = &self.tls else { return Ok(None) };
        let addr = crate::cli::dtls::flag_addr("--tls", at, udp, COAPS_TCP_PORT)?;
        let (Some(cert), Some(key)) = (cert, key) else {
            return Err(Failure::usage(
                "--tls needs --cert CERT --key KEY (PEM; and --ca CA to require client certificates)",
            ));
        };
        let client_ca = ca.map(read).transpose()?;
        let named = [Some(cert), Some(key), ca].iter().flatten().map(|p| p.display().to_string()).collect::<Vec<_>>();
        let config = TlsServerConfig::from_pem(&read(cert)?, &read(key)?, client_ca.as_deref())
            .map_err(|why| Failure::usage(format!("{why} ({})", named.join(", "))))?;
        Ok(Some((addr, config)))
    }
}

/// The banner's coaps+tcp:// line (printed after the plain banner, also with --json).
pub fn announce(at: Option<SocketAddr>, client_certificates: bool) {
    use std::io::Write;
    if let Some(at) = at {
        let clients = if client_certificates { "client certificates required" } else { "no client certificates" };
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "corral serve: coaps+tcp:// (TLS, {clients}) on {at}");
        let _ = out.flush();
    }
}
