//! How many bytes corral's CoAP state takes per peer, per exchange and per observer — measured, not
//! estimated: a counting global allocator (`stats_alloc`) reads the live heap of a real
//! `corral_proto::Endpoint` before and after N peers, N exchanges or N observers, and the difference is
//! divided by N (inline struct sizes, map slots and the bounded buffers — a remembered reply, a
//! retransmission copy, a registration request — all included). Seed 002 (TinyCoAP) reports static pools
//! instead; `crates/corral-lab/docs/lab.md` puts both side by side. The test prints the table and checks
//! that each figure stays within a bound fixed here, so a change that makes per-peer state grow is seen.

use corral_proto::wire::{Code, ContentFormat, Message, MessageId, MessageType, OptionNumber, Token};
use corral_proto::{Endpoint, EndpointConfig, Event, Instant, Request, Response, SendParams};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::net::SocketAddr;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const N: usize = 2000;

fn peer(i: usize) -> SocketAddr {
    SocketAddr::new(format!("fd00::{:x}:{:x}", i / 0x10000 + 1, i % 0x10000).parse().unwrap(), 5683)
}

fn get(mid: u16, token: u32, observe: bool) -> Vec<u8> {
    let mut m = Message::new(MessageType::Con, Code::GET, MessageId(mid), Token::new(&token.to_be_bytes()).unwrap());
    if observe {
        m.options.push_uint(OptionNumber::OBSERVE, 0);
    }
    m.options.push_str(OptionNumber::URI_PATH, "test");
    m.encode()
}

/// Live heap bytes now.
fn live(r: &Region<System>) -> i64 {
    let c = r.change();
    c.bytes_allocated as i64 - c.bytes_deallocated as i64 + c.bytes_reallocated as i64
}

/// Answers every pending request with a 50-byte body (observable when `observe`).
fn answer(ep: &mut Endpoint, observe: bool) {
    while let Some(ev) = ep.poll_event() {
        if let Event::Request(r) = ev {
            let mut resp = Response::content(ContentFormat::TEXT_PLAIN, vec![b'x'; 50]);
            if observe {
                resp = resp.observable();
            }
            ep.respond(Instant::ZERO, r.id, resp).unwrap();
        }
    }
    while ep.poll_transmit().is_some() {}
}

/// Without the reflection bound: what is measured is the state, not how much an unverified peer may get.
fn server() -> Endpoint {
    Endpoint::new(EndpointConfig { amplification: None, ..EndpointConfig::with_seed(1) })
}

/// Bytes per peer a server keeps after answering one CON GET from each of N peers (peer entry, message
/// ID state, one duplicate-detection entry holding the piggybacked reply).
fn per_peer() -> f64 {
    let mut ep = server();
    let r = Region::new(GLOBAL);
    let base = live(&r);
    for i in 0..N {
        ep.handle_datagram(Instant::ZERO, peer(i), None, &get(1, i as u32, false));
        answer(&mut ep, false);
    }
    assert_eq!(ep.table_sizes().peers, N);
    (live(&r) - base) as f64 / N as f64
}

/// Bytes per outstanding client exchange (CON GET to one peer, NSTART lifted): the exchange, its token,
/// its retransmission copy and timer.
fn per_exchange() -> f64 {
    let mut cfg = EndpointConfig::with_seed(2);
    cfg.params.nstart = u16::MAX;
    let mut ep = Endpoint::new(cfg);
    let dst = peer(0);
    ep.request(Instant::ZERO, dst, Request::get("test"), SendParams::default()).unwrap();
    while ep.poll_transmit().is_some() {}
    let r = Region::new(GLOBAL);
    let base = live(&r);
    for _ in 0..N {
        ep.request(Instant::ZERO, dst, Request::get("test"), SendParams::default()).unwrap();
        while ep.poll_transmit().is_some() {}
    }
    assert_eq!(ep.table_sizes().client_exchanges, N + 1);
    (live(&r) - base) as f64 / N as f64
}

/// Observers measured: below `ObservePolicy::max_observers_per_resource` (256), beyond which a
/// registration is answered without Observe.
const OBSERVERS: usize = 200;

/// Bytes per observer on a server: registrations of one peer (one token each) on /test.
fn per_observer() -> f64 {
    let mut ep = server();
    ep.handle_datagram(Instant::ZERO, peer(0), None, &get(0, u32::MAX, false));
    answer(&mut ep, false);
    let r = Region::new(GLOBAL);
    let base = live(&r);
    for i in 0..OBSERVERS {
        ep.handle_datagram(Instant::ZERO, peer(0), None, &get(i as u16 + 1, i as u32, true));
        answer(&mut ep, true);
    }
    assert_eq!(ep.table_sizes().observers, OBSERVERS);
    // One more than the resource allows is not kept.
    for i in OBSERVERS..300 {
        ep.handle_datagram(Instant::ZERO, peer(0), None, &get(i as u16 + 1, i as u32, true));
        answer(&mut ep, true);
    }
    let kept = corral_proto::ObservePolicy::default().max_observers_per_resource;
    assert_eq!(ep.table_sizes().observers, kept);
    (live(&r) - base) as f64 / kept as f64
}

#[test]
fn coap_state_per_peer_exchange_and_observer_is_bounded_and_counted() {
    let (p, x, o) = (per_peer(), per_exchange(), per_observer());
    let limits = corral_proto::Limits::default();
    println!("corral-proto state, measured on the heap (mean over {N}):");
    println!(
        "  per peer (one remembered reply):   {p:>7.0} B   × max_peers {} = {:.1} MiB",
        limits.max_peers,
        p * limits.max_peers as f64 / 1048576.0
    );
    println!(
        "  per outstanding client exchange:   {x:>7.0} B   × max_client_exchanges {} = {:.1} MiB",
        limits.max_client_exchanges,
        x * limits.max_client_exchanges as f64 / 1048576.0
    );
    let op = corral_proto::ObservePolicy::default();
    println!(
        "  per observer (and its peer's dedup share): {o:>7.0} B   × max_observers {} = {:.2} MiB",
        op.max_observers,
        o * op.max_observers as f64 / 1048576.0
    );
    println!("  Endpoint itself (inline):          {:>7} B", std::mem::size_of::<Endpoint>());
    // Bounds fixed before measuring: the state of a peer, an exchange or an observer is a few hundred
    // bytes, not kilobytes (hash-map slots grow in powers of two, hence the slack).
    for (what, v, max) in [("peer", p, 1024.0), ("exchange", x, 2048.0), ("observer", o, 2048.0)] {
        assert!(v > 0.0 && v < max, "{what}: {v} B per item, bound {max}");
    }
}
