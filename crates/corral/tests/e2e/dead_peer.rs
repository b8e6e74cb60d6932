//! Issue 27 item 1 on real sockets: a dead peer is not a slow one. The ICMP port-unreachable the kernel
//! reports for a datagram to a port where nothing listens (read from the socket's error queue,
//! IP_RECVERR / IPV6_RECVERR) ends what that datagram carried at once, on the tokio driver (the client,
//! the proxy) and on the blocking driver (`corral serve`'s workers).

use crate::common;

use common::*;
use corral_proto::wire::{Code, Message, MessageId, MessageType, OptionNumber, Token};
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// A UDP port on `host` where nothing listens (bound a moment ago, then closed).
fn dead_port(host: &str) -> SocketAddr {
    UdpSocket::bind(format!("{host}:0")).unwrap().local_addr().unwrap()
}

#[test]
fn a_request_to_a_port_where_nothing_listens_fails_at_once_naming_the_address() {
    for host in ["127.0.0.1", "[::1]"] {
        let dst = dead_port(host);
        let started = Instant::now();
        let o = corral(&["get", &format!("coap://{dst}/x"), "-B", "15"]);
        println!("{dst}: error after {:.3} s", started.elapsed().as_secs_f64());
        assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
        let line = stderr(&o);
        assert!(line.contains(&format!("{dst} refused the request (port unreachable)")), "{line}");
        assert_eq!(line.trim().lines().count(), 1, "one line: {line}");
    }
}

#[test]
fn the_proxy_answers_bad_gateway_when_the_origin_does_not_listen() {
    let (_p, j) = spawn_json(std::process::Command::new(CORRAL).args([
        "proxy",
        "--bind",
        "127.0.0.1:0",
        "--json",
        "--upstream-timeout",
        "8",
    ]));
    let proxy = j["proxy_uri"].as_str().unwrap().to_string();
    let origin = dead_port("127.0.0.1");
    let started = Instant::now();
    let o = corral(&["get", &format!("coap://{origin}/x"), "-P", &proxy, "-B", "15"]);
    println!("5.02 after {:.3} s", started.elapsed().as_secs_f64());
    assert!(stderr(&o).contains("5.02"), "a 5.02 from the proxy, not its 5.04 after 8 s: {}", stderr(&o));
}

/// The blocking driver: an observer of `corral serve` whose socket closed is forgotten at its next
/// notification (its port-unreachable), not after the notification's retransmissions.
#[test]
fn an_observer_that_went_away_is_forgotten_at_its_next_notification() {
    let s = corral_serve("127.0.0.1", &["-q", "--obs-period", "1"]);
    let dst: SocketAddr = format!("127.0.0.1:{}", s.port).parse().unwrap();
    let observer = UdpSocket::bind("127.0.0.1:0").unwrap();
    observer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut reg = Message::new(MessageType::Con, Code::GET, MessageId(1), Token::new(&[7, 7, 7, 7]).unwrap());
    reg.options.set_path("/obs");
    reg.options.set_uint(OptionNumber::OBSERVE, 0);
    observer.send_to(&reg.encode(), dst).unwrap();
    let mut buf = [0u8; 1500];
    let (n, _) = observer.recv_from(&mut buf).expect("the registration's answer");
    let answer = Message::parse(&buf[..n]).unwrap();
    assert!(answer.options.observe().is_some(), "registered: {answer:?}");
    // Acknowledge the first CON notification (the observer is alive), then go away.
    let (n, _) = observer.recv_from(&mut buf).expect("a notification");
    let first = Message::parse(&buf[..n]).unwrap();
    if first.mtype == MessageType::Con {
        observer.send_to(&Message::empty(MessageType::Ack, first.mid).encode(), dst).unwrap();
    }
    drop(observer);
    // The next notification (within a second) bounces; the retransmissions would take 45 s and more.
    std::thread::sleep(Duration::from_millis(2500));
    let coap = Coap::new();
    let r = coap.request(Code::POST, &format!("coap://{dst}/obs-reset"), None, None);
    assert!(r.payload_text().contains(" 0 observer"), "the observer is gone: {}", r.payload_text());
}
