//! `--credentials FILE`: aiocoap's credentials file (corral-oscore's [`Credentials`], which reads it and
//! picks a URI's context directory), and the client's context as the client verbs' flags choose it
//! (`--deterministic`, `--pairwise-with`).

use crate::cli::exit::Failure;
pub use corral_oscore::credentials::Credentials;
use corral_oscore::served::Served;

/// The context a client sends with: a pairwise context; a group member's in group mode (signed requests,
/// to one server or a multicast group); or — with `deterministic` — a group member's sending deterministic
/// requests.
pub fn client_context(served: Served, deterministic: bool) -> Result<corral_tokio::oscore::ClientContext, Failure> {
    use corral_tokio::oscore::ClientContext;
    match (served, deterministic) {
        (Served::Pairwise(d), false) => Ok(ClientContext::Pairwise(d)),
        (Served::Group(g), false) => Ok(ClientContext::Group(g)),
        (Served::Group(g), true) => {
            if g.context.params().deterministic_id.is_none() {
                return Err(Failure::usage(format!(
                    "--deterministic: the group context {} has no deterministic-id_hex (its Deterministic Client)",
                    g.dir.display()
                )));
            }
            Ok(ClientContext::Deterministic(g))
        }
        (Served::Pairwise(d), true) => Err(Failure::usage(format!(
            "--deterministic needs a Group OSCORE context; {} is a pairwise one (corral oscore group makes a group)",
            d.dir.display()
        ))),
    }
}

/// The context of a group member sending in pairwise mode to the member whose Sender ID is `server_hex`.
pub fn pairwise_context(served: Served, server_hex: &str) -> Result<corral_tokio::oscore::ClientContext, Failure> {
    let hex = |id: &[u8]| id.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let Served::Group(g) = served else {
        return Err(Failure::usage(
            "--pairwise-with needs a Group OSCORE context (corral oscore group); this one is an RFC 8613 pair, \
             which is pairwise already",
        ));
    };
    let server = (0..server_hex.len())
        .step_by(2)
        .map(|i| server_hex.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
        .collect::<Option<Vec<u8>>>()
        .filter(|v| !v.is_empty() && server_hex.len() % 2 == 0)
        .ok_or_else(|| {
            Failure::usage(format!("--pairwise-with {server_hex}: give the member's Sender ID in hex, e.g. 00"))
        })?;
    if !g.context.params().members.contains_key(&server) {
        let known: Vec<String> = g.context.params().members.keys().map(|k| hex(k)).collect();
        return Err(Failure::usage(format!(
            "--pairwise-with {server_hex}: the group context {} has no member {}; its members are {}",
            g.dir.display(),
            hex(&server),
            known.join(", ")
        )));
    }
    Ok(corral_tokio::oscore::ClientContext::GroupPairwise { dir: g, server })
}
