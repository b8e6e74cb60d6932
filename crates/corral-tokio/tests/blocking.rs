//! The blocking driver (`corral_tokio::blocking`) over real sockets: a node served by a thread asleep in
//! `recvmmsg` answers IPv4 and IPv6 clients of a dual-stack wildcard socket from the address each asked
//! (IP_PKTINFO both ways), sends a separate response when its service answers late (the node's timers
//! wake the thread), stops when told and finishes what it was answering.

#![cfg(target_os = "linux")]

use corral_tokio::blocking::{BlockingServer, BoundSocket};
use corral_tokio::corral_proto::{Context, Duration as CDuration, Endpoint, IncomingRequest, Instant, Node, Service};
use corral_tokio::socket::SocketOptions;
use corral_tokio::{Client, ContentFormat, EndpointConfig, Response, TransmissionParams};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Answers `now` at once and `late` 300 ms later, from the node's timer (a separate response).
struct Demo {
    pending: Vec<corral_tokio::corral_proto::InboundId>,
    due: Option<Instant>,
}

impl Service for Demo {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        if req.request.path_segments().last().is_some_and(|s| s == "late") {
            self.pending.push(req.id);
            self.due = Some(cx.now() + CDuration::from_millis(300));
        } else {
            cx.respond(req.id, Response::content(ContentFormat::TEXT_PLAIN, "now"));
        }
    }
    fn handle_timeout(&mut self, cx: &mut Context<'_>) {
        if self.due.is_some_and(|t| t <= cx.now()) {
            self.due = None;
            for id in self.pending.drain(..) {
                cx.respond(id, Response::content(ContentFormat::TEXT_PLAIN, "later"));
            }
        }
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.due
    }
}

fn start(bind: &str) -> (SocketAddr, Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let bound = BoundSocket::bind(bind.parse().unwrap(), SocketOptions::default()).expect("bind");
    let local = bound.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let thread = std::thread::spawn(move || {
        let config = EndpointConfig {
            params: TransmissionParams { ack_timeout: CDuration::from_millis(200), ..TransmissionParams::default() },
            piggyback_window: Some(CDuration::from_millis(50)),
            ..EndpointConfig::default()
        };
        let mut node = Node::new(Endpoint::new(config));
        node.mount("demo", Demo { pending: Vec::new(), due: None });
        BlockingServer::new(node, bound).run(&s, Duration::from_secs(1));
    });
    (local, stop, thread)
}

#[tokio::test]
async fn a_dual_stack_blocking_server_answers_both_families_now_and_later() {
    let (local, stop, thread) = start("[::]:0");
    let port = local.port();
    // IPv4 and IPv6 in turn, three times over, on purpose: a datagram's control messages must not be cut
    // short by the previous one's (an IPv4 datagram on a dual-stack socket carries two, an IPv6 one one;
    // the receive headers are kept from turn to turn). The destination 127.0.0.2 is not the kernel's
    // default source and ::1 is not an IPv4 one, so a lost destination shows as an answer from the wrong
    // address, which the client ignores, and the request times out.
    let clients = [("127.0.0.1:0", "127.0.0.1"), ("[::1]:0", "[::1]"), ("127.0.0.2:0", "127.0.0.2")];
    for round in 0..3 {
        for (client_bind, host) in clients {
            // Well within the 2 s before a retransmission, which would hide a lost answer.
            let client = Client::builder().timeout(Duration::from_millis(1500)).bind(client_bind).await.unwrap();
            // The client matches answers by their source: a wrong one would time out.
            let r = client
                .get(&format!("coap://{host}:{port}/demo/now"))
                .await
                .unwrap_or_else(|e| panic!("round {round}, {host}: {e}"));
            assert_eq!(r.payload_text(), "now", "{host}");
            if round == 0 {
                let r = client
                    .get(&format!("coap://{host}:{port}/demo/late"))
                    .await
                    .unwrap_or_else(|e| panic!("{host} late: {e}"));
                assert_eq!(r.payload_text(), "later", "{host}: a separate response after the timer");
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let t0 = std::time::Instant::now();
    thread.join().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5), "the thread noticed the stop");
}

/// An IPv4 wildcard socket keeps its receive headers from turn to turn (see `BlockingServer::receive`):
/// the destination of every datagram must still come through, so that each answer leaves from the address
/// its request went to (127.0.0.2 is not the kernel's default source: a lost destination shows as an
/// answer from 127.0.0.1, which the client ignores, and the request times out).
#[tokio::test]
async fn a_wildcard_blocking_server_answers_from_each_requests_destination_turn_after_turn() {
    let (local, stop, thread) = start("0.0.0.0:0");
    // Well within the 2 s before a retransmission, which would hide a lost answer.
    let a = Client::builder().timeout(Duration::from_millis(1500)).bind("127.0.0.1:0").await.unwrap();
    let b = Client::builder().timeout(Duration::from_millis(1500)).bind("127.0.0.1:0").await.unwrap();
    for i in 0..30 {
        for (client, host) in [(&a, "127.0.0.1"), (&b, "127.0.0.2")] {
            let uri = format!("coap://{host}:{}/demo/now", local.port());
            let r = client.get(&uri).await.unwrap_or_else(|e| panic!("{host} request {i}: {e}"));
            assert_eq!(r.payload_text(), "now");
        }
    }
    stop.store(true, Ordering::Relaxed);
    thread.join().unwrap();
}

/// A socket bound to one address, IPv4 and IPv6: many requests from several clients, answered at once and
/// late, all come back right (batches of receive and send headers on one socket, turn after turn).
#[tokio::test]
async fn a_blocking_server_on_one_address_answers_many_clients() {
    for bind in ["127.0.0.1:0", "[::1]:0"] {
        let (local, stop, thread) = start(bind);
        let host = if local.is_ipv4() { "127.0.0.1".to_string() } else { "[::1]".to_string() };
        let client_bind = if local.is_ipv4() { "127.0.0.1:0" } else { "[::1]:0" };
        for c in 0..4 {
            let client = Client::bind(client_bind).await.unwrap();
            for i in 0..25 {
                let uri = format!("coap://{host}:{}/demo/now", local.port());
                let r = client.get(&uri).await.unwrap_or_else(|e| panic!("{bind} client {c} request {i}: {e}"));
                assert_eq!(r.payload_text(), "now");
            }
            let r = client.get(&format!("coap://{host}:{}/demo/late", local.port())).await.unwrap();
            assert_eq!(r.payload_text(), "later", "{bind}: a separate response after the timer");
        }
        stop.store(true, Ordering::Relaxed);
        thread.join().unwrap();
    }
}
