//! `corral oscore new`: a fresh pair of OSCORE security contexts (RFC 8613) and a credentials file for each
//! side, in aiocoap's formats, so that a protected request is three commands away. `corral oscore group`:
//! the same for a Group OSCORE group (a server and N clients, with a Deterministic Client), as a Group
//! Manager would provision it.

use crate::cli::exit::Failure;
use clap::{Args, Subcommand};
use corral_oscore::group::{ccs_for, GroupParams};
use corral_oscore::store::{ContextDir, GroupDir};
use corral_oscore::Params;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

pub const AFTER_HELP: &str = "\
Writes DIR/client/ and DIR/server/ (settings.json: IDs and a random 32-byte Master Secret; each \
side's sequence.json appears as it sends), DIR/client.json (the client's credentials for URIs \
under --server) and DIR/server.json (the server's). aiocoap reads the same files (aiocoap-client \
--credentials). Keep DIR private: whoever reads a settings.json can speak for that side.

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
    /// Create a Group OSCORE group: servers, clients and a Deterministic Client, with credentials files.
    #[command(after_help = GROUP_AFTER_HELP)]
    Group(GroupArgs),
}

pub const GROUP_AFTER_HELP: &str = "\
Writes DIR/server/ (or DIR/server1/ … with --servers N) and DIR/client1/ … DIR/clientN/ \
(settings.json: the Group ID, Sender IDs, the other members' credentials; secret.json, readable by \
its owner only: the Master Secret and the member's Ed25519 private key), and DIR/server.json, \
DIR/client1.json … (credentials files; each client's covers every URI under each --server).

A client sends with its credentials file:
- in group mode (the default): the request is signed, every member can \
verify it, and each server's answer is signed too; the one way to protect a request to a \
multicast group (each answer is verified on its own, and one that does not verify is reported \
and left out);
- with --deterministic (GET and FETCH; draft-ietf-core-cacheable-oscore): \
identical bytes for the same request from every member, so a proxy in between aggregates and \
caches them, and the server's signed answer verifies at each.

Examples:
  corral oscore group --server coap://127.0.0.1:5701 --clients 2 --dir group
  corral serve --bind 127.0.0.1:5701 --credentials group/server.json &
  corral proxy --bind 127.0.0.1:5700 &
  corral get coap://127.0.0.1:5701/hello -P coap://127.0.0.1:5700 \\
      --credentials group/client1.json --deterministic
  corral get coap://127.0.0.1:5701/hello -P coap://127.0.0.1:5700 \\
      --credentials group/client2.json --deterministic

  corral oscore group --server coap://239.255.0.1:5702 --servers 2 \\
      --clients 1 --dir mgroup
  corral serve --bind 0.0.0.0:5702 --join 239.255.0.1 \\
      --credentials mgroup/server1.json &
  corral serve --bind 0.0.0.0:5702 --join 239.255.0.1 \\
      --credentials mgroup/server2.json &
  corral get coap://239.255.0.1:5702/hello \\
      --credentials mgroup/client1.json     # two signed answers";

#[derive(Args, Debug)]
pub struct GroupArgs {
    /// Where the clients will send: their credentials cover every URI under it. Repeat it for several
    /// (each server's own address, and the multicast group's, e.g. coap://239.255.0.1:5683).
    #[arg(long, value_name = "URI", required = true)]
    pub server: Vec<String>,
    /// How many servers (members that answer): DIR/server.json for one, DIR/server1.json … for more.
    #[arg(long, value_name = "N", default_value = "1", value_parser = clap::value_parser!(u8).range(1..=50))]
    pub servers: u8,
    /// How many clients (members that ask).
    #[arg(long, value_name = "N", default_value = "2", value_parser = clap::value_parser!(u8).range(1..=100))]
    pub clients: u8,
    /// Where to write the contexts and credentials files (created; must not hold contexts already).
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
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

fn random(n: usize, what: &str) -> Result<Vec<u8>, Failure> {
    let mut out = vec![0u8; n];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut out))
        .map_err(|e| Failure::other(format!("cannot read /dev/urandom for the {what}: {e}")))?;
    Ok(out)
}

/// `-q`: the files are written without a word (errors only).
pub fn run(args: OscoreArgs, quiet: bool) -> Result<(), Failure> {
    let a = match args.command {
        OscoreCommand::New(a) => a,
        OscoreCommand::Group(g) => return group(g, quiet),
    };
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
    let secret = random(32, "Master Secret")?;
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
    if !quiet {
        say!(
            "wrote {0}/client.json (for {pattern}) and {0}/server.json; the contexts are in {0}/client/ and {0}/server/",
            dir.display()
        );
    }
    Ok(())
}

fn group(a: GroupArgs, quiet: bool) -> Result<(), Failure> {
    let uris = a
        .server
        .iter()
        .map(|u| corral_tokio::parse_uri(u).map_err(|e| Failure::usage(format!("--server {u}: {e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let dir = std::path::absolute(&a.dir).unwrap_or(a.dir.clone());
    let servers: Vec<String> = match a.servers {
        1 => vec!["server".to_string()],
        n => (1..=n).map(|i| format!("server{i}")).collect(),
    };
    let names: Vec<String> = servers.iter().cloned().chain((1..=a.clients).map(|i| format!("client{i}"))).collect();
    if let Some(n) = names.iter().find(|n| dir.join(n).join("settings.json").exists()) {
        return Err(Failure::usage(format!(
            "{} already holds a {n} context; pick another --dir (reusing keys with a new sequence would reuse nonces)",
            dir.display()
        )));
    }
    let secret = random(32, "Master Secret")?;
    let group_id = random(4, "Group ID")?;
    // Sender IDs: the servers 0x00…, then the clients; the Deterministic Client 0xdc (as the draft's
    // examples), which no member may have: at most 150 members keeps them apart.
    let ids: Vec<Vec<u8>> = (0..names.len()).map(|i| vec![i as u8]).collect();
    let mut keys = Vec::new();
    let mut creds = BTreeMap::new();
    for id in &ids {
        let key: [u8; 32] = random(32, "Ed25519 key")?.try_into().unwrap_or([0; 32]);
        let public = corral_oscore::group::public_key_of_seed(&key);
        creds.insert(id.clone(), ccs_for(&public));
        keys.push(key);
    }
    let oscore = |e: corral_oscore::Error| Failure::other(e.to_string());
    for ((name, id), key) in names.iter().zip(&ids).zip(&keys) {
        let mut members = creds.clone();
        members.remove(id);
        let params = GroupParams {
            deterministic_id: Some(vec![0xdc]),
            ..GroupParams::new(secret.clone(), group_id.clone(), id.clone(), *key, members)
        };
        GroupDir::create(&dir.join(name), &params).map_err(oscore)?;
        let basedir = format!("{}/", dir.join(name).display());
        let entry = if servers.contains(name) {
            serde_json::json!({ ":group": { "oscore": { "basedir": basedir } } })
        } else {
            let entries: serde_json::Map<String, serde_json::Value> = uris
                .iter()
                .map(|uri| {
                    let pattern = format!("{}/*", uri.to_string().trim_end_matches('/'));
                    (pattern, serde_json::json!({ "oscore": { "basedir": basedir } }))
                })
                .collect();
            serde_json::Value::Object(entries)
        };
        write_json(&dir.join(format!("{name}.json")), &entry)?;
    }
    let clients = match a.clients {
        1 => "client1.json".to_string(),
        n => format!("client1.json … client{n}.json"),
    };
    if quiet {
        return Ok(());
    }
    say!(
        "wrote the group {} in {}: {}.json and {clients} (contexts in the folders beside them)",
        group_id.iter().map(|b| format!("{b:02x}")).collect::<String>(),
        dir.display(),
        servers.join(".json, "),
    );
    Ok(())
}
