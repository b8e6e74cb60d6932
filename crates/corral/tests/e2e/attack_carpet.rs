//! Issue 41 item 1: reflection spread over a network. A blind spoofer in a second network namespace sends
//! confirmable GETs whose source addresses cycle over 4,096 addresses of one /20 (each a victim with a
//! first-answer bucket of its own) against the real `corral serve` and `corral rd`; every answer crosses
//! the wire to the victims' side and is counted there, per victim address (see `spoof::Pair::carpet`).
//! Within the bound, the servers send all victims together at most 3 x what was sent in their names plus
//! one shared allowance (8,192 B + 4,096 B/s) — overall at most 3 x — and each victim at most 3 x plus its
//! own bucket (2,048 B + 1,024 B/s). Root only (namespaces, raw sockets); skipped otherwise.

use crate::common;
use crate::spoof;

use common::*;
use corral_proto::wire::{Code, Message, MessageId, MessageType, Token};
use spoof::{Carpet, CarpetSpec, Pair, SERVER};
use std::net::SocketAddrV4;

/// A CON GET of `path` with a 2-byte token (the carpet gives each copy its own message ID and token).
fn get(path: &str) -> Vec<u8> {
    let mut m = Message::new(MessageType::Con, Code::GET, MessageId(0), Token::new(&[0, 0]).unwrap());
    m.options.set_path(path);
    m.encode()
}

/// The carpet of the measurement, shortened: 1,540 requests a second (the 184,800 B in
/// 10 s of 12-byte requests) for 4 s, so that every one of the 4,096 addresses is a victim at least once;
/// then 3 s for retransmissions of whatever was sent.
fn carpet(net: &Pair, to: SocketAddrV4, path: &str) -> Carpet {
    net.carpet(&CarpetSpec { request: get(path), port: 40_001, to, rate: 1540, secs: 4.0, linger: 3.0 })
}

/// Prints the figures and checks both bounds: overall (3 x; the shared allowance must fit in it at this
/// rate) and per victim (3 x what was sent in its name, plus its bucket).
fn check(what: &str, c: &Carpet) {
    let (worst, w_sent, w_got) = c.worst_victim().unwrap_or((SERVER, 0, 0));
    println!(
        "{what}: {} requests, {} B in the names of {} addresses; {} answers, {} B back to {} victims in {:.1} s: \
         {:.2}x overall; the worst victim {worst} got {w_got} B for {w_sent} B ({:.1}x)",
        c.sent,
        c.sent_bytes,
        c.per_victim.values().filter(|(s, _)| *s > 0).count(),
        c.received,
        c.received_bytes,
        c.per_victim.values().filter(|(_, r)| *r > 0).count(),
        c.secs,
        c.factor(),
        w_got as f64 / w_sent.max(1) as f64,
    );
    assert!(c.received > 0, "{what}: the victims got nothing, not even the Echo challenges");
    assert!(c.factor() <= 3.0, "{what}: {:.2}x overall ({} B for {} B)", c.factor(), c.received_bytes, c.sent_bytes);
    let secs = c.secs.ceil() as usize;
    for (victim, (sent, got)) in &c.per_victim {
        let bound = 3 * sent + 2048 + 1024 * secs;
        assert!(*got <= bound, "{what}: victim {victim} got {got} B for {sent} B (bound {bound} B)");
    }
}

/// `corral serve` on the servers' side: `CON GET /large` (12 B; the first block is 1 KB) over a /20. It
/// was 86.8x overall (16 MB to 4,080 victims in 10 s).
#[test]
fn a_carpet_of_spoofed_gets_over_a_network_reflects_at_most_3x_from_corral_serve() {
    let Some(net) = Pair::new("carpet", &[]) else { return };
    let (_serve, _) = spawn_json(net.in_g(CORRAL).args(["serve", "--bind", "0.0.0.0:5683", "--json", "-q"]));
    let c = carpet(&net, SocketAddrV4::new(SERVER, 5683), "large");
    check("spoofed CON GET /large over 10.78.0.0/20 (corral serve)", &c);
}

/// `corral rd` on the servers' side, a dozen devices registered (from its own host): `CON GET
/// /rd-lookup/res` (20 B; the answer's first block is 1 KB) over a /20. It was about 52x per fresh address.
#[test]
fn a_carpet_of_spoofed_lookups_over_a_network_reflects_at_most_3x_from_corral_rd() {
    let Some(net) = Pair::new("carpetrd", &[]) else { return };
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().display().to_string();
    let (_rd, _) = spawn_json(net.in_g(CORRAL).args(["rd", "--bind", "0.0.0.0:5690", "--json", "-q", "--data", &dir]));
    for k in 0..12 {
        let links = format!(
            "</s/t>;rt=temperature;ct=0,</s/h>;rt=humidity;ct=0,</a/light>;rt=light-lux;if=actuator,</s/p{k}>;rt=pressure"
        );
        let uri = format!("coap://127.0.0.1:5690/rd?ep=device-{k:02}&lt=600&d=floor-{}", k % 3);
        let o =
            run(net.in_g(CORRAL).args(["post", &uri, "-t", "link", "-e", &links]), std::time::Duration::from_secs(30));
        assert_eq!(code(&o), 0, "registration {k}: {}", stderr(&o));
    }
    let lookup =
        run(net.in_g(CORRAL).args(["get", "coap://127.0.0.1:5690/rd-lookup/res"]), std::time::Duration::from_secs(30));
    assert!(stdout(&lookup).len() > 1024, "a lookup larger than a block: {} B", stdout(&lookup).len());
    let c = carpet(&net, SocketAddrV4::new(SERVER, 5690), "rd-lookup/res");
    check("spoofed CON GET /rd-lookup/res over 10.78.0.0/20 (corral rd)", &c);
}
