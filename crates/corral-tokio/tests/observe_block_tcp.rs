//! Observe, block-wise transfer and CoAP over TCP through the async client and server on real loopback
//! sockets. The protocol itself is tested on virtual time in corral-proto; these tests check the runtime:
//! connections made once and reused, notifications streamed, observations deregistered when the stream
//! ends, large bodies moved both ways over both transports.
//!
//! No assertion is about timing: waits are for conditions, bounded only so that a bug fails instead of
//! hanging.

use corral_tokio::corral_proto::{Context, IncomingRequest, ResourceLink};
use corral_tokio::{Client, Code, ContentFormat, Error, Response, Server, ServerHandle, Service};
use std::net::Ipv4Addr;
use std::time::Duration;

/// `/obs`: observable, changes on PUT. `/renders`: how often `/obs` was rendered (registrations and
/// notifications). `/blob`: a body that PUT replaces and GET returns. `/big`: a fixed 40 kB body.
#[derive(Default)]
struct Resources {
    value: u32,
    renders: u32,
    blob: Vec<u8>,
}

fn big() -> Vec<u8> {
    (0..40_000u32).map(|i| (i * 7 + i / 251) as u8).collect()
}

impl Service for Resources {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        let path: Vec<String> = req.request.path_segments().map(|s| s.into_owned()).collect();
        let r = match (path.iter().map(String::as_str).collect::<Vec<_>>().as_slice(), req.request.method) {
            (["obs"], Code::GET) => {
                self.renders += 1;
                Response::content(ContentFormat::TEXT_PLAIN, self.value.to_string()).observable()
            }
            (["obs"], Code::PUT) => {
                self.value += 1;
                cx.changed("/obs");
                Response::new(Code::CHANGED)
            }
            (["renders"], Code::GET) => Response::content(ContentFormat::TEXT_PLAIN, self.renders.to_string()),
            (["blob"], Code::GET) => Response::content(ContentFormat::OCTET_STREAM, self.blob.clone()),
            (["blob"], Code::PUT) => {
                self.blob = req.request.payload.clone();
                Response::new(Code::CHANGED)
            }
            (["big"], Code::GET) => Response::content(ContentFormat::OCTET_STREAM, big()),
            _ => Response::error(Code::NOT_FOUND, "nothing here"),
        };
        cx.respond(req.id, r);
    }

    fn links(&self) -> Vec<ResourceLink> {
        vec![ResourceLink::new("obs").flag("obs")]
    }
}

async fn server() -> ServerHandle {
    let mut server = Server::builder().tcp(None).bind("127.0.0.1:0").await.expect("bind server");
    server.mount("", Resources::default());
    let handle = server.spawn().expect("spawn server");
    assert_eq!(handle.tcp_local_addr().map(|a| a.port()), Some(handle.local_addr().port()), "TCP on the UDP port");
    handle
}

async fn client() -> Client {
    Client::builder().timeout(Duration::from_secs(10)).bind((Ipv4Addr::LOCALHOST, 0)).await.expect("bind client")
}

fn uri(scheme: &str, s: &ServerHandle, path: &str) -> String {
    format!("{scheme}://127.0.0.1:{}/{path}", s.local_addr().port())
}

/// Waits (bounded) until `f` holds.
async fn eventually(what: &str, mut f: impl AsyncFnMut() -> bool) {
    for _ in 0..500 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("never happened: {what}");
}

#[tokio::test]
async fn tcp_requests_share_one_connection() {
    let s = server().await;
    let c = client().await;
    for _ in 0..3 {
        let r = c.put(&uri("coap+tcp", &s, "blob")).payload("x").await.expect("PUT over TCP");
        assert_eq!(r.code, Code::CHANGED);
    }
    let r = c.get(&uri("coap+tcp", &s, "blob")).await.unwrap();
    assert_eq!(r.payload, b"x");
    let stats = s.stats().await.unwrap();
    assert_eq!(stats.tcp_connections, 1, "one connection, reused");
    assert_eq!(stats.stats.datagrams_in, 0, "nothing went over UDP");
}

#[tokio::test]
async fn large_bodies_both_ways_over_udp_and_tcp() {
    let s = server().await;
    let c = client().await;
    let body: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    for scheme in ["coap", "coap+tcp"] {
        for block in [None, Some(64)] {
            let mut put = c.put(&uri(scheme, &s, "blob")).payload(body.clone());
            let mut get = c.get(&uri(scheme, &s, "blob"));
            if let Some(b) = block {
                put = put.block_size(b);
                get = get.block_size(b);
            }
            assert_eq!(put.await.expect("upload").code, Code::CHANGED, "{scheme} {block:?}");
            let r = get.await.expect("download");
            assert!(r.payload == body, "{scheme} {block:?}: {} bytes back", r.payload.len());
            assert!(r.options.block2().is_none(), "the client hands over the assembled body");
        }
        let r = c.get(&uri(scheme, &s, "big")).block_size(256).await.unwrap();
        assert_eq!(r.payload, big());
    }
    assert_eq!(s.stats().await.unwrap().table_sizes.uploads, 0, "no upload left half-assembled");
}

#[tokio::test]
async fn observe_over_udp_streams_and_deregisters() {
    let s = server().await;
    let c = client().await;
    let mut obs = c.get(&uri("coap", &s, "obs")).observe().await.expect("register");
    let first = obs.next().await.expect("registration response").expect("no error");
    assert_eq!(first.payload, b"0");
    assert!(obs.is_registered());
    assert_eq!(s.stats().await.unwrap().table_sizes.observers, 1);
    for want in 1..=3u32 {
        c.put(&uri("coap", &s, "obs")).await.unwrap();
        let n = obs.next().await.expect("a notification").unwrap();
        assert_eq!(n.payload_text(), want.to_string());
        assert!(n.options.observe().is_some());
    }
    let last = obs.cancel().await.expect("deregistration answered");
    assert!(last.is_some_and(|r| r.options.observe().is_none()), "the final response carries no Observe");
    assert_eq!(s.stats().await.unwrap().table_sizes.observers, 0);

    // Dropping an established observation deregisters it too.
    let mut obs = c.get(&uri("coap", &s, "obs")).observe().await.unwrap();
    obs.next().await.unwrap().unwrap();
    assert_eq!(s.stats().await.unwrap().table_sizes.observers, 1);
    drop(obs);
    eventually("the dropped observation is deregistered", async || s.stats().await.unwrap().table_sizes.observers == 0)
        .await;
}

#[tokio::test]
async fn observe_over_tcp_streams_and_deregisters() {
    let s = server().await;
    let c = client().await;
    let renders =
        async || -> u32 { c.get(&uri("coap+tcp", &s, "renders")).await.unwrap().payload_text().parse().unwrap() };
    let mut obs = c.get(&uri("coap+tcp", &s, "obs")).observe().await.expect("register");
    assert_eq!(obs.next().await.unwrap().unwrap().payload, b"0");
    assert!(obs.is_registered());
    c.put(&uri("coap+tcp", &s, "obs")).await.unwrap();
    assert_eq!(obs.next().await.unwrap().unwrap().payload, b"1");
    assert!(obs.cancel().await.unwrap().is_some());
    // Requests on one connection are handled in order: once /renders answers after the PUT, the change
    // has been processed, and no observer was left to render a notification for.
    let before = renders().await;
    c.put(&uri("coap+tcp", &s, "obs")).await.unwrap();
    assert_eq!(renders().await, before, "no notification rendered after deregistration");
    assert_eq!(s.stats().await.unwrap().tcp_connections, 1);
}

#[tokio::test]
async fn observation_of_a_plain_resource_ends_after_one_response() {
    let s = server().await;
    let c = client().await;
    for scheme in ["coap", "coap+tcp"] {
        let mut obs = c.get(&uri(scheme, &s, "blob")).observe().await.unwrap();
        let r = obs.next().await.unwrap().unwrap();
        assert_eq!(r.code, Code::CONTENT);
        assert!(!obs.is_registered(), "{scheme}: not observable");
        assert!(obs.next().await.is_none(), "{scheme}: the stream ends");
    }
}

#[tokio::test]
async fn tcp_connection_refused_is_a_connect_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let c = client().await;
    let e = c.get(&format!("coap+tcp://127.0.0.1:{port}/x")).await.expect_err("nobody listens");
    assert!(matches!(e, Error::Connect { .. }), "{e:?}");
    assert!(e.to_string().contains(&port.to_string()), "{e}");
    let e = c.get("coaps://127.0.0.1/x").await.expect_err("no DTLS");
    assert!(matches!(e, Error::InvalidUri(_)), "{e:?}");
}

#[tokio::test]
async fn tcp_server_closing_fails_pending_requests() {
    // A "server" that accepts and closes at once: the request fails instead of hanging.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            drop(stream);
        }
    });
    let c = client().await;
    let e = c.get(&format!("coap+tcp://127.0.0.1:{port}/x")).await.expect_err("the connection closes");
    assert!(matches!(e, Error::ConnectionClosed), "{e:?}");
}

/// Whatever a TCP peer sends — bytes that are not CoAP, a first message that is not a CSM, a frame larger
/// than announced — only its own connection ends; the server keeps answering others.
#[tokio::test]
async fn tcp_garbage_closes_only_that_connection() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let s = server().await;
    let c = client().await;
    assert_eq!(c.get(&uri("coap+tcp", &s, "renders")).await.unwrap().code, Code::CONTENT);
    let garbage: [&[u8]; 3] = [
        &[0xff; 64],                           // reserved lengths and codes
        &[0x01, 0x01, 0xaa],                   // a GET before any CSM
        &[0xf0, 0x7f, 0xff, 0xff, 0xff, 0xe1], // a 2 GB frame
    ];
    for bytes in garbage {
        let mut raw = tokio::net::TcpStream::connect(("127.0.0.1", s.local_addr().port())).await.unwrap();
        raw.write_all(bytes).await.unwrap();
        let mut sink = Vec::new();
        // The server answers with its CSM (and an Abort) and closes: read_to_end returns.
        tokio::time::timeout(Duration::from_secs(10), raw.read_to_end(&mut sink))
            .await
            .expect("the server closes the connection")
            .ok();
    }
    let r = c.get(&uri("coap+tcp", &s, "renders")).await.expect("the first connection still works");
    assert_eq!(r.code, Code::CONTENT);
    eventually("the aborted connections are gone", async || s.stats().await.unwrap().tcp_connections == 1).await;
}

/// Async handlers answer requests that came over TCP as well as over UDP, slow ones included.
#[tokio::test]
async fn async_routes_answer_over_tcp() {
    let mut server = Server::builder().tcp(None).bind("127.0.0.1:0").await.expect("bind server");
    server.route("/slow/{n}", |req| async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        Response::content(ContentFormat::TEXT_PLAIN, format!("slow {}", req.param("n").unwrap_or("?")))
    });
    let s = server.spawn().expect("spawn server");
    let c = client().await;
    for scheme in ["coap+tcp", "coap"] {
        let r = c.get(&uri(scheme, &s, "slow/7")).await.expect("answered");
        assert_eq!(r.payload_text(), "slow 7", "{scheme}");
    }
}
