//! coaps:// on the command line: the client verbs' libcoap-style PSK flags (`-k KEY -u IDENTITY`),
//! certificate flags (`-c CERT -j KEY -C CA`, PEM files) and raw public key flags (`-M KEY --peer-key
//! KEYS`, RFC 7250), the server's `--dtls [ADDR:PORT]` with its PSK file (`--psk-file`) and/or
//! certificate (`--cert --key --ca`) or raw public key (`--rpk --peer-key`), the gateway's and the proxy's `--dtls`
//! (on their own port) and their peers' credentials (`--peer-psk-file`), and turning them into
//! corral-tokio's [`DtlsConfig`] and [`corral_tokio::DtlsMuxConfig`]. Owns the flags and the exit status
//! of a credential error (a file that cannot be read: 1; one that is wrong: 2, naming the flag); the
//! credential formats and their loaders are corral-dtls's (`PskKeys::load`, `load_peer_psks`,
//! `X509::load`, `Rpk::load`), as is the DTLS itself.

use crate::cli::exit::Failure;
use clap::Args;
use corral_dtls::{CredentialError, CredentialErrorKind};
use corral_tokio::{DtlsConfig, DtlsRole, PskKeys, Rpk, X509};
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The default port of coaps:// (RFC 7252 §6.2).
pub const COAPS_PORT: u16 = 5684;

/// A client verb's DTLS credentials (libcoap's flags).
#[derive(Args, Debug, Clone, Default)]
pub struct DtlsClientArgs {
    /// coaps://: the pre-shared key (libcoap's -k), as text; with -u. The handshake uses
    /// TLS_PSK_WITH_AES_128_CCM_8; a failed one exits 8 and says why.
    #[arg(short = 'k', long = "psk", value_name = "KEY", requires = "identity")]
    pub psk: Option<String>,
    /// coaps://: the PSK identity (libcoap's -u); with -k.
    #[arg(short = 'u', long = "identity", value_name = "IDENTITY", requires = "psk")]
    pub identity: Option<String>,
    /// coaps://: this client's X.509 certificate, PEM (libcoap's -c); with -j and -C. The handshake uses
    /// TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8 on P-256 (or another ECDHE_ECDSA suite the server prefers).
    #[arg(short = 'c', long = "cert", value_name = "CERT", requires_all = ["key", "ca"], conflicts_with = "psk")]
    pub cert: Option<PathBuf>,
    /// coaps://: the certificate's private key, PEM, P-256 (libcoap's -j); with -c.
    #[arg(short = 'j', long = "key", value_name = "KEY", requires = "cert")]
    pub key: Option<PathBuf>,
    /// coaps:// and coaps+tcp://: the CA certificate(s), PEM, that must have signed the server's
    /// certificate (libcoap's -C); with -c for coaps://, alone or with -c/-j for coaps+tcp://. A server
    /// certificate it did not sign fails the handshake (exit status 8).
    #[arg(short = 'C', long = "ca", value_name = "CA")]
    pub ca: Option<PathBuf>,
    /// coaps://: authenticate with a raw public key (RFC 7250; libcoap's -M): a PEM file with this
    /// client's P-256 EC PRIVATE KEY or PRIVATE KEY (its public key is derived); with --peer-key. The
    /// handshake uses TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8 (or another ECDHE_ECDSA suite the server
    /// prefers); the server knows this client by the ni:///sha-256;… URI of its public key.
    #[arg(short = 'M', long = "rpk", value_name = "KEY", requires = "peer_key", conflicts_with_all = ["psk", "cert"])]
    pub rpk: Option<PathBuf>,
    /// coaps:// with -M: the peer public keys trusted, a PEM file of PUBLIC KEY blocks (`openssl ec -in
    /// KEY -pubout` writes one). A peer with another key fails the handshake (exit status 8).
    #[arg(long = "peer-key", value_name = "KEYS", requires = "rpk")]
    pub peer_key: Option<PathBuf>,
}

impl DtlsClientArgs {
    /// Whether these flags fit a URI of `scheme`: coaps:// needs -k/-u, and they mean nothing elsewhere.
    pub fn check(&self, scheme: corral_tokio::Scheme) -> Result<(), Failure> {
        use corral_tokio::Scheme;
        match scheme {
            Scheme::Coaps if self.psk.is_none() && self.cert.is_none() && self.rpk.is_none() => Err(Failure::usage(
                "coaps:// needs DTLS credentials: -k KEY -u IDENTITY (a pre-shared key), -c CERT -j KEY -C CA \
                     (a certificate) or -M KEY --peer-key KEYS (a raw public key)",
            )),
            Scheme::Coaps if self.cert.is_none() && self.ca.is_some() => {
                Err(Failure::usage("coaps:// takes -C CA with -c CERT -j KEY (DTLS with certificates)"))
            }
            Scheme::Coaps => self.x509().and_then(|_| self.raw_public_key()).map(|_| ()),
            // TLS's credentials are tls::client_config's to check: the caller builds the client with it.
            Scheme::CoapsTcp => Ok(()),
            _ if self.psk.is_some() || self.cert.is_some() || self.ca.is_some() || self.rpk.is_some() => {
                Err(Failure::usage(format!(
                    "-k/-u, -c/-j/-C and -M/--peer-key are credentials for coaps:// (and -c/-j/-C for \
                     coaps+tcp://) URIs, not {scheme}://"
                )))
            }
            _ => Ok(()),
        }
    }

    /// The client's DTLS configuration, if credentials were given ([`check`](Self::check) has said that
    /// the certificate files load).
    pub fn config(&self) -> Option<DtlsConfig> {
        if let Some(rpk) = self.raw_public_key().ok().flatten() {
            let mut config = DtlsConfig::new(DtlsRole::Client { identity: Vec::new(), key: Vec::new() });
            config.rpk = Some(Arc::new(rpk));
            return Some(config);
        }
        if let Some(x509) = self.x509().ok().flatten() {
            let mut config = DtlsConfig::new(DtlsRole::Client { identity: Vec::new(), key: Vec::new() });
            config.x509 = Some(Arc::new(x509));
            return Some(config);
        }
        let (identity, key) = (self.identity.as_ref()?, self.psk.as_ref()?);
        Some(DtlsConfig::new(DtlsRole::Client { identity: identity.as_bytes().to_vec(), key: key.as_bytes().to_vec() }))
    }

    /// The certificate, key and CA of -c/-j/-C, read.
    fn x509(&self) -> Result<Option<X509>, Failure> {
        let (Some(cert), Some(key), Some(ca)) = (&self.cert, &self.key, &self.ca) else { return Ok(None) };
        load_x509(("-c", cert), ("-j", key), ("-C", ca)).map(Some)
    }

    /// The raw public key of -M and the trusted keys of --peer-key, read.
    fn raw_public_key(&self) -> Result<Option<Rpk>, Failure> {
        let (Some(key), Some(peers)) = (&self.rpk, &self.peer_key) else { return Ok(None) };
        load_rpk(("-M", key), ("--peer-key", peers)).map(Some)
    }
}

/// A credential error as the command line says it, naming the flag of the file at fault (`files`: each
/// flag with its file; the first when the error names none): a file that cannot be read is an error of
/// its own (exit status 1), one that is wrong a usage error (2).
fn credential_failure(e: CredentialError, files: &[(&str, &Path)]) -> Failure {
    let at_fault = files.iter().find(|(_, p)| e.file.as_deref() == Some(*p)).or(files.first());
    let (flag, file) = at_fault.map_or(("", Path::new("")), |(f, p)| (*f, *p));
    match &e.kind {
        CredentialErrorKind::Read(io) => Failure::other(format!("cannot read {flag} {}: {io}", file.display())),
        _ => Failure::usage(format!("{flag} {e}")),
    }
}

/// Reads a raw public key file and the trusted peer keys, each given as (its flag, its path), or says
/// in one line which flag's file is wrong.
pub fn load_rpk(key: (&str, &Path), peers: (&str, &Path)) -> Result<Rpk, Failure> {
    Rpk::load(key.1, peers.1).map_err(|e| credential_failure(e, &[key, peers]))
}

/// Reads a certificate, its key and the CA file (PEM), each given as (its flag, its path), or says in
/// one line which flag's file is wrong.
pub fn load_x509(cert: (&str, &Path), key: (&str, &Path), ca: (&str, &Path)) -> Result<X509, Failure> {
    X509::load(cert.1, key.1, ca.1).map_err(|e| credential_failure(e, &[cert, key, ca]))
}

/// `corral serve`'s DTLS flags.
#[derive(Args, Debug, Clone, Default)]
pub struct DtlsServeArgs {
    /// Also serve coaps:// (CoAP over DTLS 1.2) on ADDR:PORT; without it on the UDP address with port
    /// 5684. Needs --psk-file (PSK, TLS_PSK_WITH_AES_128_CCM_8), --cert/--key/--ca (X.509,
    /// TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8) or --rpk/--peer-key (raw public keys, RFC 7250, the same
    /// suite); --psk-file also with either of the other two.
    #[arg(long, value_name = "ADDR:PORT", num_args = 0..=1, default_missing_value = "")]
    pub dtls: Option<String>,
    /// The PSK identities and keys coaps:// clients may use: a JSON object
    /// {"IDENTITY": "KEY", "IDENTITY2": {"hex": "00ff"}}.
    #[arg(long, value_name = "FILE", requires = "dtls")]
    pub psk_file: Option<PathBuf>,
    /// coaps:// (--dtls) and coaps+tcp:// (--tls): the server's X.509 certificate, PEM (libcoap's -c);
    /// with --key, and for --dtls with --ca. Clients must present a certificate signed by --ca; the
    /// subject of theirs names them.
    #[arg(long = "cert", value_name = "CERT", requires = "server_key")]
    pub server_cert: Option<PathBuf>,
    /// coaps://: the certificate's private key, PEM, P-256 (libcoap's -j).
    #[arg(long = "key", value_name = "KEY", requires = "server_cert")]
    pub server_key: Option<PathBuf>,
    /// coaps://: the CA certificate(s), PEM, that must have signed a client's certificate (libcoap's -C).
    #[arg(long = "ca", value_name = "CA", requires = "server_cert")]
    pub server_ca: Option<PathBuf>,
    /// coaps://: authenticate with a raw public key (RFC 7250; libcoap's -M): a PEM file with the
    /// server's P-256 EC PRIVATE KEY or PRIVATE KEY; with --peer-key. Clients must present one of
    /// those keys; the ni:///sha-256;… URI of theirs names them.
    #[arg(long = "rpk", value_name = "KEY", requires_all = ["dtls", "server_peer_key"], conflicts_with = "server_cert")]
    pub server_rpk: Option<PathBuf>,
    /// coaps:// with --rpk: the client public keys accepted, a PEM file of PUBLIC KEY blocks (`openssl
    /// ec -in KEY -pubout` writes one). A client with another key is refused (bad_certificate).
    #[arg(long = "peer-key", value_name = "KEYS", requires = "server_rpk")]
    pub server_peer_key: Option<PathBuf>,
}

impl DtlsServeArgs {
    /// Where to serve coaps:// (given the plain UDP address) and with which configuration; `None` without
    /// --dtls.
    pub fn server(&self, udp: SocketAddr) -> Result<Option<(SocketAddr, DtlsConfig)>, Failure> {
        let Some(at) = &self.dtls else { return Ok(None) };
        let addr = flag_addr("--dtls", at, udp, COAPS_PORT)?;
        let x509 = match (&self.server_cert, &self.server_key, &self.server_ca) {
            (Some(c), Some(k), Some(ca)) => Some(Arc::new(load_x509(("--cert", c), ("--key", k), ("--ca", ca))?)),
            (Some(_), _, None) => {
                return Err(Failure::usage("--dtls with --cert needs --ca CA (DTLS with certificates)"))
            }
            _ => None,
        };
        let rpk = match (&self.server_rpk, &self.server_peer_key) {
            (Some(k), Some(p)) => Some(Arc::new(load_rpk(("--rpk", k), ("--peer-key", p))?)),
            _ => None,
        };
        let keys = match self.psk_file.as_deref() {
            Some(file) => load_psk_file(file)?,
            None if x509.is_some() || rpk.is_some() => PskKeys::new(),
            None => {
                return Err(Failure::usage(
                    "--dtls needs --psk-file FILE, --cert CERT --key KEY --ca CA, or --rpk KEY --peer-key KEYS",
                ))
            }
        };
        let mut config = DtlsConfig::new(DtlsRole::Server(Arc::new(keys)));
        config.x509 = x509;
        config.rpk = rpk;
        Ok(Some((addr, config)))
    }
}

/// The banner's coaps:// line (printed with the plain banner, also with --json: on stdout after it)
/// naming the modes served (`PSK`, `X.509`, `RPK`, `PSK, X.509`, `PSK, RPK`).
pub fn announce_as(at: Option<SocketAddr>, modes: &str) {
    if let Some(at) = at {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "corral serve: coaps:// (DTLS 1.2, {modes}) on {at}");
        let _ = out.flush();
    }
}

impl DtlsServeArgs {
    /// The modes these flags serve, as the banner names them.
    pub fn modes(&self) -> &'static str {
        match (self.psk_file.is_some(), self.server_cert.is_some(), self.server_rpk.is_some()) {
            (true, true, _) => "PSK, X.509",
            (false, true, _) => "X.509",
            (true, false, true) => "PSK, RPK",
            (false, false, true) => "RPK",
            _ => "PSK",
        }
    }
}

/// Reads the PSK file of `--psk-file` (its format: corral-dtls's `credentials.rs`).
pub fn load_psk_file(path: &Path) -> Result<PskKeys, Failure> {
    PskKeys::load(path).map_err(|e| credential_failure(e, &[("--psk-file", path)]))
}

/// `corral gateway`'s and `corral proxy`'s DTLS flags: coaps:// clients on the service's own socket, and
/// the credentials it reaches coaps:// peers with.
#[derive(Args, Debug, Clone, Default)]
pub struct DtlsNodeArgs {
    /// Also accept coaps:// clients (DTLS 1.2, PSK, TLS_PSK_WITH_AES_128_CCM_8) on this service's own UDP
    /// port: each datagram's first byte tells DTLS from CoAP (RFC 7983), so coap:// and coaps:// share
    /// the port. Needs --psk-file; runs one worker on the tokio driver.
    #[arg(long, requires = "psk_file")]
    pub dtls: bool,
    /// The PSK identities and keys coaps:// clients may use: a JSON object
    /// {"IDENTITY": "KEY", "IDENTITY2": {"hex": "00ff"}}.
    #[arg(long, value_name = "FILE", requires = "dtls")]
    pub psk_file: Option<PathBuf>,
    /// Reach coaps:// peers (members, next hops) with these credentials, one PSK identity and key per
    /// peer (libcoap's -u/-k per host): a JSON object {"coaps://10.0.0.5:5684": {"identity": "gw", "key":
    /// "secretPSK"}} (the key also as {"hex": "00ff"}). Every datagram to a listed peer goes over DTLS,
    /// and plain CoAP from it is dropped.
    #[arg(long, value_name = "FILE")]
    pub peer_psk_file: Option<PathBuf>,
}

impl DtlsNodeArgs {
    /// What the service's socket speaks DTLS with; `None` without these flags.
    pub fn mux(&self) -> Result<Option<corral_tokio::DtlsMuxConfig>, Failure> {
        let server = match (&self.psk_file, self.dtls) {
            (Some(file), true) => Some(DtlsConfig::new(DtlsRole::Server(Arc::new(load_psk_file(file)?)))),
            _ => None,
        };
        let peers = match &self.peer_psk_file {
            Some(file) => load_peer_file(file)?,
            None => Vec::new(),
        };
        let mux = corral_tokio::DtlsMuxConfig { server, peers, watch: None };
        Ok((!mux.is_empty()).then_some(mux))
    }
}

/// Reads the peer credentials file of `--peer-psk-file` (its format: corral-dtls's `credentials.rs`).
pub fn load_peer_file(path: &Path) -> Result<Vec<(SocketAddr, DtlsConfig)>, Failure> {
    corral_dtls::load_peer_psks(path).map_err(|e| credential_failure(e, &[("--peer-psk-file", path)]))
}

/// The address of a flag `--NAME [ADDR:PORT]` that serves on a port of its own (`--dtls`, `--tls`): `at`,
/// or without it (`""`) the UDP address with `default_port`.
pub(crate) fn flag_addr(flag: &str, at: &str, udp: SocketAddr, default_port: u16) -> Result<SocketAddr, Failure> {
    if at.is_empty() {
        return Ok(SocketAddr::new(udp.ip(), default_port));
    }
    at.parse().map_err(|_| {
        Failure::usage(format!(
            "`{at}` is not ADDR:PORT for {flag} (e.g. [::]:{default_port} or 127.0.0.1:{default_port})"
        ))
    })
}
