//! OSCORE (RFC 8613) through the async client and a server with the OSCORE layer, on real loopback
//! sockets: bodies larger than one protected message holds (AES-CCM's 64 KiB) both ways in inner blocks
//! (§4.1.3.4.1), over UDP and TCP; an observation cancelled with a newly protected deregistration that the
//! server accepts (§4.1.3.5, §7.4: the registration's Partial IV is spent). Interop with aiocoap:
//! crates/corral/tests/e2e/oscore.rs.
//!
//! No assertion is about timing: waits are for conditions, bounded only so that a bug fails instead of
//! hanging.

use corral_oscore::store::ContextDir;
use corral_oscore::{OscoreLayer, Params};
use corral_tokio::corral_proto::{Context, IncomingRequest, ResourceLink};
use corral_tokio::oscore::{shared, SharedContext};
use corral_tokio::{Client, Code, ContentFormat, Response, Server, ServerHandle, Service};
use std::net::Ipv4Addr;
use std::time::Duration;

/// `/obs`: observable, changes on PUT. `/blob`: a body that PUT replaces and GET returns.
#[derive(Default)]
struct Resources {
    value: u32,
    blob: Vec<u8>,
}

impl Service for Resources {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        let path: Vec<String> = req.request.path_segments().map(|s| s.into_owned()).collect();
        let r = match (path.iter().map(String::as_str).collect::<Vec<_>>().as_slice(), req.request.method) {
            (["obs"], Code::GET) => Response::content(ContentFormat::TEXT_PLAIN, self.value.to_string()).observable(),
            (["obs"], Code::PUT) => {
                self.value += 1;
                cx.changed("/obs");
                Response::new(Code::CHANGED)
            }
            (["blob"], Code::GET) => Response::content(ContentFormat::OCTET_STREAM, self.blob.clone()),
            (["blob"], Code::PUT) => {
                self.blob = req.request.payload.clone();
                Response::new(Code::CHANGED)
            }
            _ => Response::error(Code::NOT_FOUND, "nothing here"),
        };
        cx.respond(req.id, r);
    }

    fn links(&self) -> Vec<ResourceLink> {
        vec![ResourceLink::new("obs").flag("obs")]
    }
}

/// A server that requires OSCORE with the server's side of a fresh context pair, and the client's side.
async fn server(dir: &std::path::Path) -> (ServerHandle, SharedContext) {
    let secret = [0x5a; 16];
    ContextDir::create(&dir.join("server"), &Params::new(&secret, b"S", b"C")).unwrap();
    ContextDir::create(&dir.join("client"), &Params::new(&secret, b"C", b"S")).unwrap();
    let layer = OscoreLayer::new(vec![ContextDir::load(&dir.join("server")).unwrap()], true);
    let mut server = Server::builder().tcp(None).bind("127.0.0.1:0").await.expect("bind server");
    server.mount("", Resources::default());
    server.set_layer(layer);
    (server.spawn().expect("spawn server"), shared(ContextDir::load(&dir.join("client")).unwrap()))
}

async fn client() -> Client {
    Client::builder().timeout(Duration::from_secs(10)).bind((Ipv4Addr::LOCALHOST, 0)).await.expect("bind client")
}

fn uri(scheme: &str, s: &ServerHandle, path: &str) -> String {
    format!("{scheme}://127.0.0.1:{}/{path}", s.local_addr().port())
}

/// Issue 46: a 70,000-byte PUT failed in the client ("internal error in AEAD encryption", exit status 7)
/// and a 100 KB GET was answered with an unprotected 5.00. Both need inner blocks.
#[tokio::test]
async fn bodies_beyond_what_one_protected_message_holds_go_both_ways_in_inner_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let (s, ctx) = server(dir.path()).await;
    let c = client().await;
    for scheme in ["coap", "coap+tcp"] {
        for len in [70_000u32, 300_000] {
            let body: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
            let put = c.put(&uri(scheme, &s, "blob")).payload(body.clone()).oscore(ctx.clone()).await;
            assert_eq!(put.expect("a protected upload").code, Code::CHANGED, "{scheme} {len}");
            let r = c.get(&uri(scheme, &s, "blob")).oscore(ctx.clone()).await.expect("a protected download");
            assert_eq!(r.code, Code::CONTENT, "{scheme} {len}: {}", r.payload_text());
            assert!(r.payload == body, "{scheme} {len}: {} bytes back", r.payload.len());
            assert!(r.options.block2().is_none(), "the client hands over the assembled body");
        }
    }
    // A block a client asks for is served from the rendered body, each block protected on its own.
    let r = c.get(&uri("coap", &s, "blob")).oscore(ctx.clone()).block_size(256).await.unwrap();
    assert_eq!(r.payload.len(), 300_000);
}

/// Issue 46: the deregistration (GET with Observe=1, RFC 7641 §3.6) went out with the registration's
/// Partial IV and ciphertext, and corral's server (as aiocoap's) answered "4.01 Replay detected".
#[tokio::test]
async fn a_cancelled_protected_observation_is_answered_by_the_server_not_refused_as_a_replay() {
    let dir = tempfile::tempdir().unwrap();
    let (s, ctx) = server(dir.path()).await;
    let c = client().await;
    for scheme in ["coap", "coap+tcp"] {
        let mut obs = c.get(&uri(scheme, &s, "obs")).oscore(ctx.clone()).observe().await.expect("register");
        let first = obs.next().await.expect("a first response").expect("verified");
        assert!(first.options.observe().is_some() && obs.is_registered(), "{scheme}: {first:?}");
        c.put(&uri(scheme, &s, "obs")).oscore(ctx.clone()).await.expect("a change");
        obs.next().await.expect("a notification").expect("verified");
        // A GET that does not register reads the observable resource as any other (its response carried the
        // service's Observe mark inside, and the client refused it as not its own).
        let plain = c.get(&uri(scheme, &s, "obs")).oscore(ctx.clone()).await.expect("a protected GET");
        assert!(plain.code == Code::CONTENT && plain.options.observe().is_none(), "{scheme}: {plain:?}");
        let last = obs.cancel().await.expect("the deregistration is answered and verifies");
        let last = last.expect("an answer");
        assert_eq!(last.code, Code::CONTENT, "{scheme}: {} {}", last.code, last.payload_text());
        assert!(last.options.observe().is_none(), "{scheme}: the answer ends the observation");
        let observers = s.stats().await.unwrap().table_sizes.observers;
        assert_eq!(observers, 0, "{scheme}: the server forgot the observer");
    }
}
