//! The example of `docs/library.md`, word for word between the `page:` markers (`crates/corral/tests/readme.rs`
//! checks that they agree), so that the page cannot show code that does not compile: `cargo test` builds
//! every example. It expects `corral device --bind [::1]:5683`-style resources; run it with
//! `cargo run --release -p corral-tokio --example library` against a server of your own.

use corral_tokio::corral_proto::{Context, IncomingRequest, Response, Service};
use corral_tokio::ContentFormat;

/// What the page calls `my_sans_io_service`: any `corral_proto::Service`; this one answers 21.5 to
/// every request under its mount point.
struct Sensors;

impl Service for Sensors {
    fn handle_request(&mut self, cx: &mut Context<'_>, request: IncomingRequest) {
        cx.respond(request.id, Response::content(ContentFormat::TEXT_PLAIN, "21.5"));
    }
}

#[rustfmt::skip] // the page's lines, as the page shows them
async fn page(my_sans_io_service: Sensors, image: Vec<u8>) -> Result<(), Box<dyn std::error::Error>> {
    // page: begin
    let client = corral_tokio::Client::bind("[::]:0").await?;
    let reading = client.get("coap://[::1]/s/t").await?;
    let ack = client.put("coap://[::1]/led").payload("on").content_format(ContentFormat::TEXT_PLAIN).non().await?;
    let fw = client.put("coap+tcp://[::1]/fw").payload(image).block_size(512).await?;   // Block1, over TCP
    let mut temp = client.get("coap://[::1]/temp").observe().await?;                     // RFC 7641
    while let Some(n) = temp.next().await { println!("{}", n?.payload_text()); }         // until it ends…
    temp.cancel().await?;                                                                // …or GET Observe=1

    let mut server = corral_tokio::Server::builder().tcp(None).bind("[::]:5683").await?;  // UDP and TCP
    server.mount("sensors", my_sans_io_service);                       // a corral_proto::Service
    server.route("/hello/{name}", |req| async move {
        Response::content(ContentFormat::TEXT_PLAIN, format!("hi {}", req.param("name").unwrap_or("?")))
    }).rt("greeting");
    let handle = server.spawn()?;
    handle.shutdown().await;

    // N servers on one port whose services send requests of their own (Linux): each endpoint gets its
    // shard of message IDs and tokens, and the kernel hands each one the answers to its requests;
    // Some(0): server 0 also gets every request but GET.
    let servers = corral_tokio::Server::builder().bind_shards("[::]:5683".parse()?, 4, Some(0))?;
    // page: end
    let _ = (reading, ack, fw, servers);
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    page(Sensors, vec![0; 4096]).await
}
