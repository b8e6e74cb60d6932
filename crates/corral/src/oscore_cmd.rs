//! `corral oscore new`: a fresh pair of OSCORE security contexts (RFC 8613) and a credentials file for each
//! side, in aiocoap's formats, so that a protected request is three commands away.

use crate::exit::Failure;
use clap::{Args, Subcommand};
use corral_oscore::store::ContextDir;
use corral_oscore::Params;
use std::io::Read;
use std::path::{Path, PathBuf};

pub const AFTER_HELP: &str = "\
Writes DIR/client/ and DIR/server/ (settings.json: IDs and a random 32-byte Master Secret; each side's
sequence.json appears as it sends), DIR/client.json (the client's credentials for URIs under --server)
and DIR/server.json (the server's). aiocoap reads the same files (aiocoap-client --credentials).
Keep DIR private: whoever reads a settings.json can speak for that side.

Example:
  corral oscore new --server coap://127.0.0.1:5701 --dir keys
  corral serve --bind 127.0.0.1:5701 --credentials keys/server.json &
  corral get coap://127.0.0.1:5701/hello --credentials keys/client.json";

#[derive(Args, Debug)]
pub struct OscoreArgs {
    #[command(subcommand)]
    pub command: OscoreCommand,
}

#[derive(Subcommand, Debug)]
pub enum OscoreCommand {
    /// Create a client/server pair of security contexts and their credentials files.
    #[command(after_help = AFTER_HELP)]
    New(NewArgs),
}

#[derive(Args, Debug)]
pub struct NewArgs {
    /// The server the client will talk to: its credentials cover every URI under it.
    #[arg(long, value_name = "URI")]
    pub server: String,
    /// Where to write the contexts and credentials files (created; must not hold contexts already).
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// The client's Sender ID in hex (the server's Recipient ID).
    #[arg(long, value_name = "HEX", default_value = "01")]
    pub client_id: String,
    /// The server's Sender ID in hex.
    #[arg(long, value_name = "HEX", default_value = "02")]
    pub server_id: String,
}

fn hex(s: &str, what: &str) -> Result<Vec<u8>, Failure> {
    let bad = || Failure::usage(format!("--{what} {s:?}: give up to 7 bytes in hex, e.g. 01"));
    if s.len() % 2 != 0 || s.len() > 14 {
        return Err(bad());
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|_| bad())).collect()
}

fn write_json(path: &Path, v: &serde_json::Value) -> Result<(), Failure> {
    std::fs::write(path, serde_json::to_string_pretty(v).unwrap_or_default())
        .map_err(|e| Failure::other(format!("cannot write {}: {e}", path.display())))
}

pub fn run(args: OscoreArgs) -> Result<(), Failure> {
    let OscoreCommand::New(a) = args.command;
    let uri = corral_tokio::parse_uri(&a.server).map_err(|e| Failure::usage(format!("--server: {e}")))?;
    let (client_id, server_id) = (hex(&a.client_id, "client-id")?, hex(&a.server_id, "server-id")?);
    if client_id == server_id {
        return Err(Failure::usage("--client-id and --server-id must differ"));
    }
    for side in ["client", "server"] {
        if a.dir.join(side).join("settings.json").exists() {
            return Err(Failure::usage(format!(
                "{} already holds a {side} context; pick another --dir (reusing keys with a new sequence would reuse nonces)",
                a.dir.display()
            )));
        }
    }
    let mut secret = vec![0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut secret))
        .map_err(|e| Failure::other(format!("cannot read /dev/urandom for the Master Secret: {e}")))?;
    let dir = std::path::absolute(&a.dir).unwrap_or(a.dir.clone());
    let oscore = |e: corral_oscore::Error| Failure::other(e.to_string());
    ContextDir::create(&dir.join("client"), &Params::new(&secret, &client_id, &server_id)).map_err(oscore)?;
    ContextDir::create(&dir.join("server"), &Params::new(&secret, &server_id, &client_id)).map_err(oscore)?;
    let base = uri.to_string();
    let pattern = format!("{}/*", base.trim_end_matches('/'));
    let client_dir = format!("{}/", dir.join("client").display());
    let server_dir = format!("{}/", dir.join("server").display());
    write_json(
        &dir.join("client.json"),
        &serde_json::json!({ pattern.clone(): { "oscore": { "basedir": client_dir } } }),
    )?;
    write_json(&dir.join("server.json"), &serde_json::json!({ ":client": { "oscore": { "basedir": server_dir } } }))?;
    say!(
        "wrote {0}/client.json (for {pattern}) and {0}/server.json; the contexts are in {0}/client/ and {0}/server/",
        dir.display()
    );
    Ok(())
}
