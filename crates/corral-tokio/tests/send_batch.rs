//! Batched sends (`CoapSocket::try_send_many`, one `sendmmsg` per run of datagrams with the same source):
//! every datagram arrives, in order, with the payload it was given and from the source address it asked
//! for on a wildcard-bound socket — including a run that changes source midway and a dual-stack socket
//! answering an IPv4 peer.

use corral_tokio::socket::{CoapSocket, OutDatagram, PreparedSocket, SocketOptions};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::Duration;

fn receiver(addr: &str) -> UdpSocket {
    let s = UdpSocket::bind(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    s
}

fn sender(addr: &str) -> CoapSocket {
    let addr: SocketAddr = addr.parse().unwrap();
    PreparedSocket::bind(addr, SocketOptions::default()).unwrap().into_tokio().unwrap()
}

/// Sends all of `datagrams`, as the driver does: whatever the kernel did not take goes in the next call.
fn send_all(socket: &CoapSocket, datagrams: &[OutDatagram<'_>]) {
    let mut sent = 0;
    while sent < datagrams.len() {
        sent += socket.try_send_many(&datagrams[sent..]).expect("loopback takes every datagram");
    }
}

fn received(rx: &UdpSocket, n: usize) -> Vec<(Vec<u8>, IpAddr)> {
    let mut buf = [0u8; 2048];
    (0..n)
        .map(|i| {
            let (len, from) = rx.recv_from(&mut buf).unwrap_or_else(|e| panic!("datagram {i} of {n} missing: {e}"));
            (buf[..len].to_vec(), from.ip())
        })
        .collect()
}

#[tokio::test]
async fn a_run_with_sources_arrives_whole_and_from_the_right_address() {
    let rx = receiver("127.0.0.1:0");
    let dst = rx.local_addr().unwrap();
    let tx = sender("0.0.0.0:0");
    let one: IpAddr = "127.0.0.1".parse().unwrap();
    let two: IpAddr = "127.0.0.2".parse().unwrap();
    let payloads: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 10 + i as usize]).collect();
    // 25 from 127.0.0.1 (more than one batch), then 15 from 127.0.0.2.
    let datagrams: Vec<OutDatagram<'_>> = payloads
        .iter()
        .enumerate()
        .map(|(i, p)| OutDatagram { dst, payload: p, src: Some(if i < 25 { one } else { two }) })
        .collect();
    send_all(&tx, &datagrams);
    let got = received(&rx, 40);
    for (i, (bytes, from)) in got.iter().enumerate() {
        assert_eq!(bytes, &payloads[i], "datagram {i}: payload");
        assert_eq!(*from, if i < 25 { one } else { two }, "datagram {i}: source address");
    }
}

#[tokio::test]
async fn a_dual_stack_socket_answers_ipv4_peers_from_the_ipv4_address() {
    let rx = receiver("127.0.0.1:0");
    let dst = rx.local_addr().unwrap();
    let tx = sender("[::]:0");
    // The endpoint names the request's destination as the kernel reported it on a dual-stack socket.
    let mapped: IpAddr = "::ffff:127.0.0.2".parse().unwrap();
    let payloads: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 4]).collect();
    let datagrams: Vec<OutDatagram<'_>> =
        payloads.iter().map(|p| OutDatagram { dst, payload: p, src: Some(mapped) }).collect();
    send_all(&tx, &datagrams);
    for (i, (bytes, from)) in received(&rx, 5).iter().enumerate() {
        assert_eq!(bytes, &payloads[i]);
        assert_eq!(*from, "127.0.0.2".parse::<IpAddr>().unwrap());
    }
}

#[tokio::test]
async fn a_socket_bound_to_one_address_ignores_the_source() {
    let rx = receiver("[::1]:0");
    let dst = rx.local_addr().unwrap();
    let tx = sender("[::1]:0");
    let payloads: Vec<Vec<u8>> = (0..20u8).map(|i| vec![i; 3]).collect();
    let datagrams: Vec<OutDatagram<'_>> =
        payloads.iter().map(|p| OutDatagram { dst, payload: p, src: Some("::1".parse().unwrap()) }).collect();
    send_all(&tx, &datagrams);
    assert_eq!(received(&rx, 20).into_iter().map(|(b, _)| b).collect::<Vec<_>>(), payloads);
}
