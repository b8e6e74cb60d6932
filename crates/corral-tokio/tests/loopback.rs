//! Client ↔ server over real loopback sockets: methods, CON and NON, separate responses, IPv4 and IPv6,
//! multicast on IPv4 loopback, timeouts, shutdown, and a flood that must leave the server's state bounded.
//!
//! Nothing here asserts on timing: slow handlers and short windows only decide *which* path the protocol
//! takes, and the assertions check that path's outcome.

use corral_tokio::corral_proto::{Context, Duration as CDuration, IncomingRequest, ResourceLink};
use corral_tokio::{
    Client, Code, ContentFormat, EndpointConfig, Error, Limits, OptionNumber, Response, Server, ServerHandle, Service,
    TransmissionParams,
};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

/// A server with async routes for every method and a slow one.
async fn demo_server(bind: &str, config: EndpointConfig) -> ServerHandle {
    let mut server = Server::builder()
        .endpoint_config(config)
        .multicast_interface_v4(Ipv4Addr::LOCALHOST)
        .bind(bind)
        .await
        .expect("bind server");
    server
        .route("/echo", |req| async move {
            let code = match req.method() {
                Code::GET => Code::CONTENT,
                Code::POST => Code::CREATED,
                Code::PUT => Code::CHANGED,
                Code::DELETE => Code::DELETED,
                _ => Code::METHOD_NOT_ALLOWED,
            };
            let body = format!("{} {} mc={} con={}", req.method(), req.payload_text(), req.multicast, req.confirmable);
            Response::new(code).with_content_format(ContentFormat::TEXT_PLAIN).with_payload(body)
        })
        .rt("test.echo")
        .title("Echo");
    server.route("/slow", |_req| async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Response::content(ContentFormat::TEXT_PLAIN, "finally")
    });
    server.route("/users/{id}", |req| async move {
        Response::content(ContentFormat::TEXT_PLAIN, format!("user {}", req.param("id").unwrap_or("?")))
    });
    server.route("/panic", |_req| async move { panic!("handler bug") }).hidden();
    server.mount("sans-io", Counter(0));
    server.spawn().expect("spawn server")
}

/// A sans-IO service: counts the requests it has seen.
struct Counter(u32);
impl Service for Counter {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        self.0 += 1;
        cx.respond(req.id, Response::content(ContentFormat::TEXT_PLAIN, self.0.to_string()));
    }
    fn links(&self) -> Vec<ResourceLink> {
        vec![ResourceLink::new("").attr("rt", "counter").attr("ct", "0")]
    }
}

fn fast_config() -> EndpointConfig {
    EndpointConfig {
        params: TransmissionParams {
            ack_timeout: CDuration::from_millis(200),
            default_leisure: CDuration::from_millis(50),
            ..TransmissionParams::default()
        },
        piggyback_window: Some(CDuration::from_millis(30)),
        ..EndpointConfig::default()
    }
}

fn uri(server: &ServerHandle, path: &str) -> String {
    let a = server.local_addr();
    let host = match a.ip() {
        IpAddr::V6(ip) if ip.is_unspecified() => "[::1]".to_string(),
        IpAddr::V4(ip) if ip.is_unspecified() => "127.0.0.1".to_string(),
        IpAddr::V6(ip) => format!("[{ip}]"),
        IpAddr::V4(ip) => ip.to_string(),
    };
    format!("coap://{host}:{}{path}", a.port())
}

#[tokio::test]
async fn methods_con_and_non_over_ipv4() {
    let server = demo_server("127.0.0.1:0", EndpointConfig::default()).await;
    let client = Client::bind("127.0.0.1:0").await.unwrap();
    let u = uri(&server, "/echo");
    let r = client.get(&u).await.unwrap();
    assert_eq!((r.code, r.payload_text().as_ref()), (Code::CONTENT, "GET  mc=false con=true"));
    let r = client.post(&u).payload("p").await.unwrap();
    assert_eq!((r.code, r.payload_text().as_ref()), (Code::CREATED, "POST p mc=false con=true"));
    let r = client.put(&u).payload("u").non().await.unwrap();
    assert_eq!((r.code, r.payload_text().as_ref()), (Code::CHANGED, "PUT u mc=false con=false"));
    let r = client.delete(&u).await.unwrap();
    assert_eq!(r.code, Code::DELETED);
    let r = client.get(&uri(&server, "/nothing/here")).await.unwrap();
    assert_eq!(r.code, Code::NOT_FOUND);
    let r = client.get(&uri(&server, "/users/42")).non().await.unwrap();
    assert_eq!(r.payload_text(), "user 42");
    let r = client.get(&uri(&server, "/sans-io")).await.unwrap();
    assert_eq!(r.payload_text(), "1");
    let r = client.get(&uri(&server, "/panic")).await.unwrap();
    assert_eq!(r.code, Code::INTERNAL_SERVER_ERROR);
    server.shutdown().await;
}

#[tokio::test]
async fn ipv6_and_dual_stack() {
    let server = demo_server("[::]:0", EndpointConfig::default()).await;
    let v6 = Client::bind("[::1]:0").await.unwrap();
    let r = v6.get(&uri(&server, "/echo")).await.unwrap();
    assert_eq!(r.code, Code::CONTENT);
    // The same dual-stack socket serves an IPv4 client.
    let v4 = Client::bind("127.0.0.1:0").await.unwrap();
    let r = v4.get(&format!("coap://127.0.0.1:{}/echo", server.local_addr().port())).await.unwrap();
    assert_eq!(r.code, Code::CONTENT);
    // A dual-stack client reaches IPv4 servers too.
    let dual = Client::bind("[::]:0").await.unwrap();
    let (from, r) =
        dual.get(&format!("coap://127.0.0.1:{}/echo", server.local_addr().port())).send_from().await.unwrap();
    assert_eq!(r.code, Code::CONTENT);
    assert_eq!(from, SocketAddr::from((Ipv4Addr::LOCALHOST, server.local_addr().port())), "addresses are canonical");
    // An IPv4-only client cannot reach an IPv6 server: a typed error, not a hang.
    assert!(matches!(v4.get("coap://[::1]:9/x").await, Err(Error::Unreachable(_))));
    server.shutdown().await;
}

#[tokio::test]
async fn slow_handler_gets_a_separate_response() {
    let server = demo_server("127.0.0.1:0", fast_config()).await;
    let client = Client::bind("127.0.0.1:0").await.unwrap();
    let r = client.get(&uri(&server, "/slow")).await.unwrap();
    assert_eq!(r.payload_text(), "finally");
    let stats = server.stats().await.unwrap().stats;
    // The empty ACK, then the response as a CON of its own.
    assert_eq!(stats.transmits, 2, "{stats:?}");
    // A NON request to a slow handler simply gets a NON response later.
    let r = client.get(&uri(&server, "/slow")).non().await.unwrap();
    assert_eq!(r.payload_text(), "finally");
    server.shutdown().await;
}

#[tokio::test]
async fn discovery_lists_routes_and_services() {
    let server = demo_server("127.0.0.1:0", EndpointConfig::default()).await;
    let client = Client::bind("127.0.0.1:0").await.unwrap();
    let r = client.get(&uri(&server, "/.well-known/core")).await.unwrap();
    assert_eq!(r.options.content_format(), Some(ContentFormat::LINK_FORMAT));
    let body = r.payload_text();
    assert!(body.contains("</echo>;rt=\"test.echo\";title=\"Echo\""), "{body}");
    assert!(body.contains("</sans-io>;rt=\"counter\";ct=0"), "{body}");
    assert!(!body.contains("panic") && !body.contains("{id}"), "{body}");
    let r = client.get(&uri(&server, "/.well-known/core?rt=count*")).await.unwrap();
    assert_eq!(r.payload_text(), "</sans-io>;rt=\"counter\";ct=0");
    server.shutdown().await;
}

#[tokio::test]
async fn multicast_request_on_ipv4_loopback() {
    let group: IpAddr = "239.255.77.1".parse().unwrap();
    let server = demo_server("0.0.0.0:0", fast_config()).await;
    server.set_group(group, true).await.expect("join the group on loopback");
    let client = Client::builder().multicast_interface_v4(Ipv4Addr::LOCALHOST).bind("0.0.0.0:0").await.unwrap();
    let port = server.local_addr().port();
    let responses = client
        .get(&format!("coap://{group}:{port}/echo"))
        .multicast_window(Duration::from_millis(800))
        .multicast()
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(responses.len(), 1, "{responses:?}");
    let (from, r) = &responses[0];
    assert_eq!(from.port(), port);
    assert_eq!(r.payload_text(), "GET  mc=true con=false", "the server saw the request as multicast");
    // Errors are not answered to multicast requests (RFC 7252 §8.2).
    let none = client
        .get(&format!("coap://{group}:{port}/no-such-resource"))
        .multicast_window(Duration::from_millis(300))
        .multicast()
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert!(none.is_empty(), "{none:?}");
    server.set_group(group, false).await.unwrap();
    server.shutdown().await;
}

/// Nothing listens: on Linux the ICMP port unreachable fails the request at once (the driver reads the
/// socket's error queue); elsewhere it times out.
fn no_listener(r: &Result<corral_tokio::Response, Error>) -> bool {
    if cfg!(target_os = "linux") {
        matches!(r, Err(Error::Refused(_)))
    } else {
        matches!(r, Err(Error::Timeout))
    }
}

#[tokio::test]
async fn nobody_listening_fails_the_request() {
    let port = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let client = Client::bind("127.0.0.1:0").await.unwrap();
    let r = client.get(&format!("coap://127.0.0.1:{port}/x")).timeout(Duration::from_millis(300)).await;
    assert!(no_listener(&r), "{r:?}");
    let r = client.get(&format!("coap://127.0.0.1:{port}/x")).non().timeout(Duration::from_millis(100)).await;
    assert!(no_listener(&r), "{r:?}");
    // The timed-out exchanges are gone; nothing is left queued behind NSTART.
    let stats = client.stats().await.unwrap();
    assert_eq!(stats.table_sizes.client_exchanges, 0, "{stats:?}");
}

#[tokio::test]
async fn malformed_uris_are_typed_errors() {
    let client = Client::bind("127.0.0.1:0").await.unwrap();
    for bad in ["http://x/", "coap://", "coap://[::1/x", "not a uri"] {
        assert!(matches!(client.get(bad).await, Err(Error::InvalidUri(_))), "{bad}");
    }
}

#[tokio::test]
async fn dropped_request_is_cancelled() {
    let server = demo_server("127.0.0.1:0", EndpointConfig::default()).await;
    let client = Client::bind("127.0.0.1:0").await.unwrap();
    // Give up on a slow request; the next one to the same server must not wait behind it (NSTART = 1).
    let slow = client.get(&uri(&server, "/slow"));
    assert!(tokio::time::timeout(Duration::from_millis(20), slow.send()).await.is_err());
    let r = client.get(&uri(&server, "/echo")).await.unwrap();
    assert_eq!(r.code, Code::CONTENT);
    server.shutdown().await;
}

#[tokio::test]
async fn shutdown_stops_answering() {
    let server = demo_server("127.0.0.1:0", EndpointConfig::default()).await;
    let u = uri(&server, "/echo");
    let client = Client::bind("127.0.0.1:0").await.unwrap();
    assert_eq!(client.get(&u).await.unwrap().code, Code::CONTENT);
    server.shutdown().await;
    let r = client.get(&u).non().timeout(Duration::from_millis(200)).await;
    assert!(no_listener(&r), "{r:?}");
}

/// Malformed datagrams and requests from many source ports: the server's tables stay within their limits
/// and it still answers a valid request.
#[tokio::test]
async fn flood_leaves_state_bounded() {
    let limits = Limits { max_peers: 64, max_inbound_exchanges: 32, ..Limits::default() };
    let config = EndpointConfig { limits, ..EndpointConfig::default() };
    let mut server = Server::builder().endpoint_config(config).bind("127.0.0.1:0").await.unwrap();
    // Requests under /hole are never answered, so they pin inbound state until the limit says no.
    struct BlackHole;
    impl Service for BlackHole {
        fn handle_request(&mut self, _cx: &mut Context<'_>, _req: IncomingRequest) {}
    }
    server.mount("hole", BlackHole);
    server.route("/ok", |_req| async move { Response::content(ContentFormat::TEXT_PLAIN, "ok") });
    let server = server.spawn().unwrap();
    let dst = server.local_addr();
    let mut sent = 0u32;
    for batch in 0..10u16 {
        let sockets: Vec<std::net::UdpSocket> =
            (0..50).map(|_| std::net::UdpSocket::bind("127.0.0.1:0").expect("flood socket")).collect();
        for (i, s) in sockets.iter().enumerate() {
            let mid = batch * 100 + i as u16;
            let mut req = vec![0x40, 0x01, (mid >> 8) as u8, mid as u8, 0xb4, b'h', b'o', b'l', b'e'];
            s.send_to(&req, dst).unwrap();
            req[2] ^= 0xff; // another message ID: a second pending request from the same port
            s.send_to(&req, dst).unwrap();
            s.send_to(&[0x40, 0x01, 0x00], dst).unwrap(); // truncated header
            s.send_to(&[0x4f, 0x01, 0x00, 0x01], dst).unwrap(); // token length 15
            s.send_to(&[0x40, 0x01, 0x00, 0x02, 0xf0], dst).unwrap(); // reserved option delta
            sent += 5;
        }
        // Let the server read this batch before the sockets close.
        let _ = server.stats().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let client = Client::bind("127.0.0.1:0").await.unwrap();
    // The valid client finds a full inbound table; the oldest request of an unverified flood source
    // gives way, so it is answered at once.
    let r = client.get(&format!("coap://{dst}/ok")).timeout(Duration::from_secs(5)).await.unwrap();
    assert_eq!(r.code, Code::CONTENT, "{r:?}");
    let s = server.stats().await.unwrap();
    let t = s.table_sizes;
    assert!(t.peers <= limits.max_peers, "{s:?}");
    assert!(t.inbound_exchanges <= limits.max_inbound_exchanges, "{s:?}");
    assert!(t.dedup_entries <= limits.max_peers * limits.dedup_per_peer, "{s:?}");
    assert!(s.stats.malformed_in > 0 && s.stats.displaced > 0, "{s:?}");
    assert!(s.stats.datagrams_in <= u64::from(sent) + 1);
    server.shutdown_with_grace(Duration::ZERO).await;
}

#[tokio::test]
async fn options_token_and_accept_reach_the_handler() {
    let mut server = Server::bind("127.0.0.1:0").await.unwrap();
    server.route("/inspect", |req| async move {
        let q = req.query("x").unwrap_or("-").to_string();
        let accept = req.accept().map(|c| c.0.to_string()).unwrap_or_default();
        let raw = req.options().get(OptionNumber(65000)).map(|v| String::from_utf8_lossy(v).into_owned());
        Response::content(ContentFormat::TEXT_PLAIN, format!("q={q} accept={accept} raw={raw:?}"))
    });
    let server = server.spawn().unwrap();
    let client = Client::bind("127.0.0.1:0").await.unwrap();
    let r = client
        .get(&format!("coap://{}/inspect?x=1", server.local_addr()))
        .accept(ContentFormat::JSON)
        .option(OptionNumber(65000), "hi")
        .token(corral_tokio::Token::from_hex("beef").unwrap())
        .await
        .unwrap();
    assert_eq!(r.payload_text(), "q=1 accept=50 raw=Some(\"hi\")");
    server.shutdown().await;
}
