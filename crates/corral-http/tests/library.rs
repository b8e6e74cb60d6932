//! A library user's window: a `corral_tokio::Server` of one's own with `/metrics`, through corral-http
//! alone (no `corral` binary), on real sockets.

use corral_http::{watch, Board, Bound, WindowConfig};
use corral_tokio::{Client, Code, ContentFormat, Response, Server};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `GET path` on the window, over a plain TCP connection; the whole answer.
async fn http_get(window: std::net::SocketAddr, path: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(window).await.expect("connect to the window");
    let req = format!("GET {path} HTTP/1.1\r\nHost: {window}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("send");
    let mut text = String::new();
    s.read_to_string(&mut text).await.expect("read");
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_of_ones_own_serves_its_counters_at_metrics() {
    let board = Board::new(1);
    let mut server = Server::bind("127.0.0.1:0").await.expect("bind the CoAP server");
    server.route("/hello", |_req| async move { Response::content(ContentFormat::TEXT_PLAIN, "hi") });
    let slot = board.slot(0);
    server.configure(move |node| watch::mount_probe(node, slot));
    let coap = server.local_addr();
    let _server = server.spawn().expect("spawn the server");
    let window = Bound::bind(
        WindowConfig::new("127.0.0.1:0".parse().expect("an address")),
        "serve",
        board,
        corral_http::this_machine(),
    )
    .expect("bind the window");
    let http = window.local_addr().expect("the window's address");
    window.spawn().await.expect("serve the window");

    let client = Client::bind("127.0.0.1:0").await.expect("a client");
    let r = client.get(&format!("coap://{coap}/hello")).await.expect("an answer");
    assert_eq!((r.code, r.payload_text().as_ref()), (Code::CONTENT, "hi"));
    // The node publishes every half second: wait for a snapshot with the request in it.
    let mut text = String::new();
    for _ in 0..100 {
        text = http_get(http, "/metrics").await;
        if text.contains("corral_coap_requests_received_total{worker=\"0\"} 1\n") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("content-type: application/openmetrics-text"), "{text}");
    assert!(text.contains("corral_coap_requests_received_total{worker=\"0\"} 1\n"), "{text}");
    assert!(text.contains("corral_up{worker=\"0\"} 1\n"), "{text}");
}
