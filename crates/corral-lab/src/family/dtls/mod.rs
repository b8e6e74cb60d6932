//! `[dtls]` (issue 30's lab item): what a first protected response costs across a multi-hop IEEE 802.15.4
//! network — the practical cost seed 000's reference on DTLS in constrained environments (Hartke,
//! draft-hartke-dice-practical-issues) raises, measured. A client on the root of a chain of `hops` radio
//! hops (the border router's side) asks the device at its end for one resource (seed 001's
//! `/instruction`, through the same client and server services and security adapters as `[multiparty]`):
//! - `none`: plain CoAP, the baseline every other point is compared with;
//! - `oscore`: RFC 8613 with a pre-established context (corral-oscore; no handshake, 13-byte overhead);
//! - `dtls-psk`, `dtls-cert`: corral-dtls (dimpl) on both nodes ([`crate::harness::dtls::DtlsNode`]): the
//!   request waits for a full DTLS 1.2 handshake — cookie exchange, then PSK with AES-128-CCM-8, or
//!   ECDHE-ECDSA on P-256 with a certificate on each side (the lab's own CA, `ca.pem`, `server.pem`,
//!   `client.pem` beside this file) — whose flights are fragmented to `mtu` by dimpl and to 127-byte
//!   frames by 6LoWPAN, and retransmitted on dimpl's own timers (1 s, doubling);
//! - `dtls-rpk`: the same suite with a raw public key (RFC 7250) on each side instead of a certificate
//!   chain (the keys of the certificates above, `server.pub` and `client.pub` their public halves): the
//!   Certificate messages carry a 91-byte SubjectPublicKeyInfo instead of a chain.
//!
//! Measured from the client's first datagram to the verified response: the time, the data frames on the
//! air at every hop (MAC retries included) and their bytes, the datagrams the two ends sent and the
//! largest (with its 6LoWPAN fragments), the handshake flights sent again on a timer. Loss comes from the
//! `[network] link` model (the `usage` axis), CPU time from `[calibration]` if set; **the cryptography
//! costs no simulated time** (an ECDSA signature on a Cortex-M class mote takes hundreds of ms to seconds:
//! the times here are the radio's share only).
//!
//! Owns: the chain, the mapping of a point onto the two nodes and the measures. Never reads a clock or
//! draws randomness that does not follow from the point's seed: the DTLS sessions' randoms, nonces and
//! ECDHE keys derive from it too (the DTLS node's docs), so a point's results repeat byte for byte.

use super::multiparty::apps::{
    ClientSecurity, MpClient, MpServer, OscoreClient, OscoreServer, ServerSecurity, Unprotected,
};
use crate::error::RunError;
use crate::harness::dtls::{DtlsNode, COAPS_PORT};
use crate::harness::{link_model, node_endpoint, transmission_params, Created, Network, PointRun, QueryPhase, Trace};
use crate::record::{DtlsFacts, Facts, PointResult, QueryRow};
use crate::scenario::{Common, DtlsSetup, Security};
use corral_dtls::{DtlsConfig, PeerKeys, PskKeys, Role, Rpk, X509};
use corral_proto::{Duration, Endpoint, Instant, Node, Rng, ServiceHandle};
use corral_sim::{NodeId, RecordKind, Sim, SimConfig, Topology};
use std::net::SocketAddr;
use std::sync::Arc;

/// The lab's PSK identity and key (RFC 7252 §9.1.3.1's suite; any 16 bytes do).
const PSK_IDENTITY: &[u8] = b"lab-client";
const PSK_KEY: &[u8] = b"corral-lab-psk-0";

/// The lab's certificates: a CA and a P-256 certificate it signed for each side (openssl, 100 years;
/// lab keys, never a deployment's).
const CA: &str = include_str!("ca.pem");
const SERVER_CERT: &str = include_str!("server.pem");
const SERVER_KEY: &str = include_str!("server.key");
const CLIENT_CERT: &str = include_str!("client.pem");
const CLIENT_KEY: &str = include_str!("client.key");
/// The keys\' public halves (`openssl ec -in KEY -pubout`): what each side of `dtls-rpk` trusts.
const SERVER_PUB: &str = include_str!("server.pub");
const CLIENT_PUB: &str = include_str!("client.pub");

/// When the client sends its request (the chain's routes are static: nothing to wait for).
const START: Duration = Duration::from_secs(1);

/// Runs one point with `seed`.
pub fn run(c: &Common, d: &DtlsSetup, index: usize, seed: u64) -> Result<PointRun, RunError> {
    let hops = d.hops as usize;
    let topology = Topology::line(hops + 1);
    let mut cfg = SimConfig::new(seed);
    cfg.record = true;
    cfg.processing_delay = Duration::from_micros((c.cpu.processing_delay_ms * 1000.0).round() as u64);
    cfg.rx_queue = c.cpu.rx_queue;
    let mut sim = Sim::from_topology(cfg, &topology);
    sim.set_all_link_models(link_model(c.network.link));
    let (client, server) = (NodeId(0), NodeId(hops as u32));
    let network = Network { topology, gateways: vec![0], members: vec![vec![hops]], host: 0 };
    let phase = QueryPhase::start(&sim, &network);

    let params = transmission_params(&c.transmission);
    let (client_sec, server_sec): (Box<dyn ClientSecurity>, Box<dyn ServerSecurity>) = match d.security {
        Security::Oscore => (
            Box::new(OscoreClient::new(1).map_err(RunError::Security)?),
            Box::new(OscoreServer::new(1).map_err(RunError::Security)?),
        ),
        _ => (Box::new(Unprotected), Box::new(Unprotected)),
    };
    let port = if d.security.is_dtls() { COAPS_PORT } else { corral_sim::COAP_PORT };
    let server_addr = SocketAddr::new(sim.addr(server).ip(), port);
    let limit = Duration::from_secs(d.limit_s);
    let mut s_node = Node::new(Endpoint::new(node_endpoint(&sim, server.index(), params)));
    s_node.mount("", MpServer::new(server_sec, Duration::ZERO));
    let mut c_node = Node::new(Endpoint::new(node_endpoint(&sim, client.index(), params)));
    let h = c_node.mount("", MpClient::new(1, vec![Instant::ZERO + START], server_addr, None, client_sec, limit));
    if d.security.is_dtls() {
        let (sc, cc) = dtls_configs(d)?;
        let dtls_node = |node, config, secret| {
            DtlsNode::new(node, config, secret).map_err(|e| RunError::Credentials(e.to_string()))
        };
        sim.attach_app(server, Box::new(dtls_node(s_node, sc, secret(seed, 1))?));
        sim.attach_app(client, Box::new(dtls_node(c_node, cc, secret(seed, 2))?));
    } else {
        sim.attach(server, s_node);
        sim.attach(client, c_node);
    }
    let end = Instant::ZERO + START + limit;
    let client_done = |s: &Sim| retrieval(s, client, h).is_some_and(|r| r.done.is_some());
    sim.run_until_cond(end, client_done);
    let r = retrieval(&sim, client, h).ok_or(RunError::Lost("the client"))?;
    let until = r.done.unwrap_or(sim.now());

    let mut facts = radio_cost(&sim, [client, server], until);
    facts.hops = hops as f64;
    facts.first_ms = r.done.map_or(f64::NAN, |t| (t - r.sent).as_micros() as f64 / 1000.0);
    let dtls = |id: NodeId| sim.app::<DtlsNode>(id);
    let numbers = |n: &DtlsNode| n.numbers().stats;
    facts.flights_retx =
        [client, server].iter().filter_map(|&n| dtls(n)).map(|n| numbers(n).flights_retransmitted).sum();
    facts.handshakes = dtls(client).map_or(0, |n| numbers(n).handshakes_done);
    let coap_retx = match dtls(client) {
        Some(n) => n.node().endpoint().stats().retransmissions,
        None => sim.node(client).map_or(0, |n| n.endpoint().stats().retransmissions),
    };
    let query = QueryRow {
        point: index,
        rep: 0,
        seed,
        start_s: r.sent.as_micros() as f64 / 1e6,
        response_ms: facts.first_ms,
        code: if r.done.is_some() { "2.05".into() } else { "none".into() },
        replies: usize::from(r.done.is_some()),
        members: 1,
        coap_retx,
        frames: facts.frames,
        mac_retries: sim
            .records()
            .iter()
            .filter(|x| x.kind == RecordKind::FrameSent && x.at <= until && x.attempt > 0)
            .count() as u64,
    };
    let created = Created { created: true, create_ms: 0.0 };
    let (mut point, links, nodes) = phase.finish(&sim, &network, (index, seed), created, Facts::Dtls(facts));
    point.coap_retx = coap_retx;
    Ok(PointRun {
        result: PointResult { queries: vec![query], point, links, nodes },
        trace: Some(Trace { sim, network }),
    })
}

/// The client's one retrieval, on a plain node or behind DTLS.
fn retrieval(sim: &Sim, client: NodeId, h: ServiceHandle) -> Option<super::multiparty::apps::Retrieval> {
    let c = match sim.app::<DtlsNode>(client) {
        Some(n) => n.node().service::<MpClient>(h),
        None => sim.service::<MpClient>(client, h),
    };
    c?.retrievals.first().copied()
}

/// The data frames (MAC retries included) and bytes on the air up to `until`, and the datagrams the two
/// `ends` sent by then, with the largest and its 6LoWPAN fragments.
fn radio_cost(sim: &Sim, ends: [NodeId; 2], until: Instant) -> DtlsFacts {
    let mut f = DtlsFacts::empty();
    for r in sim.records().iter().filter(|r| r.kind == RecordKind::FrameSent && r.at <= until) {
        f.frames += 1;
        f.air_bytes += u64::from(r.bytes);
    }
    for d in sim.datagrams().iter().filter(|d| d.at <= until && ends.contains(&d.node)) {
        f.datagrams += 1;
        if d.len as u64 > f.largest {
            f.largest = d.len as u64;
            f.largest_frames = d.layout.map_or(1, |l| u64::from(l.frames));
        }
    }
    f
}

/// 32 bytes of a DTLS layer's secret, from the point's seed.
fn secret(seed: u64, node: u64) -> [u8; 32] {
    let mut out = [0; 32];
    Rng::stream(seed, 0xd715_0000 + node).fill(&mut out);
    out
}

/// The server's and the client's DTLS configurations for the point's security.
fn dtls_configs(d: &DtlsSetup) -> Result<(DtlsConfig, DtlsConfig), RunError> {
    let mut keys = PskKeys::new();
    keys.insert(PSK_IDENTITY, PSK_KEY);
    let mut server = DtlsConfig::new(Role::Server(Arc::new(keys)));
    let mut client = DtlsConfig::new(Role::Client { identity: PSK_IDENTITY.to_vec(), key: PSK_KEY.to_vec() });
    if d.security == Security::DtlsRpk {
        let r = |key: &str, peer: &str| {
            let peers = PeerKeys::from_pem(peer).map_err(|e| RunError::Credentials(e.to_string()))?;
            Rpk::from_pem(key, peers).map(Arc::new).map_err(|e| RunError::Credentials(e.to_string()))
        };
        server.rpk = Some(r(SERVER_KEY, CLIENT_PUB)?);
        client.rpk = Some(r(CLIENT_KEY, SERVER_PUB)?);
        server.role = Role::Server(Arc::new(PskKeys::new()));
    }
    if d.security == Security::DtlsCert {
        let x = |cert: &str, key: &str| {
            X509::from_pem(cert, key, CA).map(Arc::new).map_err(|e| RunError::Credentials(e.to_string()))
        };
        server.x509 = Some(x(SERVER_CERT, SERVER_KEY)?);
        client.x509 = Some(x(CLIENT_CERT, CLIENT_KEY)?);
        // A certificate server here takes certificates only: its PSK table is left empty.
        server.role = Role::Server(Arc::new(PskKeys::new()));
    }
    for c in [&mut server, &mut client] {
        c.mtu = d.mtu;
        c.handshake_timeout = Duration::from_secs(d.limit_s);
    }
    Ok((server, client))
}
