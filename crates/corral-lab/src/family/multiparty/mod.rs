//! `[multiparty]`: seed 001's experiment (§IV). Nine clients ask one server for
//! `/instruction?t=k` on the Fig. 6 tree over simulated IEEE 802.15.4, in one of Table II's deployments:
//!
//! | deployment | clients and server | forwarders |
//! |---|---|---|
//! | `oscore` | RFC 8613 OSCORE end to end (corral-oscore) | route at the IP layer (the simulator's routing) |
//! | `oscore-proxy` | the same protected requests, sent to the first forwarder with the server in Proxy-Uri | corral-proxy on every forwarder, hop-wise CON; protected requests are POSTs, so neither cached nor aggregated across clients |
//! | `det-oscore-proxy` | deterministic requests of Group OSCORE (corral-oscore's `GroupContext`), signed group-mode responses after the server's 20 ms signature time | corral-proxy, caching and aggregating the identical FETCHes across clients |
//! | `ndn` | the NDN model's consumer and producer ([`ndn`]) | the NDN model's forwarder |
//!
//! **The tree** is the original testbed's route table (`inetrg/IEEE-LCN-ICN-CoAP-21`,
//! `icn-oscore/app/testbed.sh`): 45 nodes — one server, nine clients, 35 forwarders; every client is
//! eight hops from the server. Client 1 has a path of its own (seven forwarders). Clients 8 and 9 attach
//! to f1; client `k` (2..7) reaches `f_{9-k}` over a branch of `8-k` forwarders; f1 → f2 → … → f7 → the
//! server is the shared path, so link f_i → f_{i+1} carries i + 1 clients' requests and f7 → server eight
//! (clients 2–9). The static routes are the routing tree.
//!
//! **Radio contact** comes from node positions, not from the route table alone: Grenoble's m3 nodes stand
//! in corridors, so the route table's next hops are placed 10 m apart along lines — the shared path and
//! client 1's path on one axis, each branch at right angles on alternate sides of the shared path — and
//! every node within `[multiparty] contact_m` (25 m) of another hears it, carrier-senses it and collides
//! with it: two hops along a corridor are in contact, three are hidden terminals. Only the spacing is
//! assumed (positions are not published); 25 m keeps every next hop in contact and no node three hops on.
//! `contact_m = 0` restores the first model: neighbours are exactly the next hops (maximal spatial reuse).
//!
//! Rows: one `queries.csv` row per request, `rep` = (client − 1) · requests + (k − 1), `response_ms` its
//! content retrieval time (NaN when it failed). Everything else of Figs. 7–9 and Table III is in
//! [`MpStats`], which the findings and the report's seed-001 figures read.

pub mod apps;
pub mod ndn;

use crate::error::RunError;
use crate::harness::{link_model, Network, PointRun, Trace};
use crate::record::{Facts, LinkRow, MpStats, NodeRole, NodeRow, Ops, PointResult, PointRow, QueryRow};
use crate::scenario::{Common, MultipartySpec};
use apps::{MpClient, MpServer, Retrieval};
use corral_proto::wire::Code;
use corral_proto::{Duration, Endpoint, EndpointConfig, Instant, Node, Rng, ServiceHandle};
use corral_proxy::{Fib, NextHop, ProxyConfig, ProxyService};
use corral_sim::{Neighbors, NodeId, NodeSpec, RecordKind, Role, Sim, SimConfig, Topology};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Clients of Fig. 6.
pub const CLIENTS: u8 = 9;
/// Forwarders on the shared path.
pub const SHARED: usize = 7;
/// Hop-wise and end-to-end timers of every deployment (the original Makefile): ACK_TIMEOUT 2 s,
/// ACK_RANDOM_FACTOR 1.0, MAX_RETRANSMIT 3.
pub const ACK_TIMEOUT: Duration = Duration::from_secs(2);
pub const MAX_RETRANSMIT: u8 = 3;

/// The Fig. 6 tree: node indices of the server, f1..f7 and the clients, and the topology.
pub struct Fig6 {
    pub topology: Topology,
    pub server: usize,
    /// f1..f7.
    pub shared: Vec<usize>,
    /// Clients 1..9.
    pub clients: Vec<usize>,
    /// Every node's parent toward the server.
    pub parent: Vec<Option<usize>>,
}

/// Builds the tree of the original route table with radio contact within `contact_m` metres, or only
/// between next hops when `contact_m` is 0 (see the module docs).
pub fn fig6(contact_m: f64) -> Fig6 {
    let mut t = Topology::new();
    if contact_m > 0.0 {
        t.neighbors = Neighbors::Radius(contact_m);
    }
    let mut parent: Vec<Option<usize>> = Vec::new();
    let mut add = |t: &mut Topology, role: Role, up: Option<usize>, x: f64, y: f64| {
        let mut spec = NodeSpec::new(role, Some(26)).at(x, y);
        spec.parent = up;
        let i = t.add(spec);
        if let Some(p) = up {
            t.connect(i, p);
        }
        parent.push(up);
        i
    };
    let server = add(&mut t, Role::Gateway, None, 0.0, 0.0);
    // f7 next to the server … f1 seven hops away, along the x axis.
    let mut shared = vec![0; SHARED];
    let mut up = server;
    for j in (0..SHARED).rev() {
        up = add(&mut t, Role::Device, Some(up), -10.0 * (SHARED - j) as f64, 0.0);
        shared[j] = up;
    }
    let mut clients = vec![0; usize::from(CLIENTS)];
    // Client 1: its own path of seven forwarders.
    let mut up = server;
    for h in 1..=7 {
        up = add(&mut t, Role::Device, Some(up), 10.0 * h as f64, 0.0);
    }
    clients[0] = add(&mut t, Role::Device, Some(up), 80.0, 0.0);
    // Client k = 2..9 joins f_{9-k} (clients 8 and 9 both f1) over 8 - k forwarders.
    for k in 2..=usize::from(CLIENTS) {
        let join = SHARED.min(9 - k.min(8)) - 1;
        let (jx, branch) = (-10.0 * (SHARED - join) as f64, 8usize.saturating_sub(k));
        // Branches on alternate sides of the shared path (clients 8 and 9 on either side of f1), so that
        // parallel branches stand 20 m apart, as corridors of a building would.
        let side = if k % 2 == 0 { 1.0 } else { -1.0 };
        let mut up = shared[join];
        for h in 1..=branch {
            up = add(&mut t, Role::Device, Some(up), jx, side * 10.0 * h as f64);
        }
        clients[k - 1] = add(&mut t, Role::Device, Some(up), jx, side * 10.0 * (branch + 1) as f64);
    }
    Fig6 { topology: t, server, shared, clients, parent }
}

fn endpoint_config(sim: &Sim, i: usize, nstart: u16) -> EndpointConfig {
    let mut c = sim.endpoint_config(NodeId(i as u32));
    c.params.ack_timeout = ACK_TIMEOUT;
    c.params.ack_random_factor = 1.0;
    c.params.max_retransmit = MAX_RETRANSMIT;
    c.params.nstart = nstart;
    c
}

/// MAX_TRANSMIT_WAIT for the timers above (RFC 7252 §4.8.2): how long a client waits for a request.
fn max_transmit_wait() -> Duration {
    ACK_TIMEOUT.saturating_mul((1 << (MAX_RETRANSMIT + 1)) - 1)
}

/// Runs one point. The simulator always keeps its records: Fig. 9's per-link counts are read from them. Of
/// the common setup it models the link and the CPU.
pub fn run(c: &Common, m: &MultipartySpec, index: usize, seed: u64) -> Result<PointRun, RunError> {
    let fig = fig6(m.contact_m);
    let mut topo = fig.topology.clone();
    // Collisions, hidden terminals and the MAC's limits always; a loss model only if `[network] link` sets
    // one (seed 001 gives none: the default is a perfect channel apart from the MAC).
    topo.default_link = link_model(c.network.link);
    let mut cfg = SimConfig::new(seed);
    cfg.record = true;
    // No CPU model unless `[calibration]` sets one (seed 001's motes are not calibrated anywhere).
    cfg.processing_delay = Duration::from_micros((c.cpu.processing_delay_ms * 1000.0).round() as u64);
    cfg.rx_queue = c.cpu.rx_queue;
    // RIOT GNRC's packet buffer bounds what a node holds queued (off unless the scenario sets it).
    cfg.radio.queue_bytes = (m.pktbuf_bytes > 0).then_some(m.pktbuf_bytes);
    cfg.radio.queue_capacity = m.queue_datagrams;
    let mut sim = Sim::from_topology(cfg, &topo);
    let addr = |sim: &Sim, i: usize| sim.addr(NodeId(i as u32));
    let server_addr = addr(&sim, fig.server);
    let interval = Duration::from_millis(m.interval_ms);
    let first = Duration::from_millis(m.first_ms);
    let mut rng = Rng::stream(seed, 0x5eed_0001);
    let schedules: Vec<Vec<Instant>> =
        (0..CLIENTS).map(|_| apps::schedule(&mut rng.fork(), m.requests, interval, first)).collect();
    let forwarders: Vec<usize> =
        (0..topo.nodes.len()).filter(|i| *i != fig.server && !fig.clients.contains(i)).collect();
    let mut handles: Vec<ServiceHandle> = Vec::new();
    let server_h;
    let ndn = m.deployment == "ndn";
    if ndn {
        let ndn_node = |up: Option<usize>, sim: &Sim| {
            ndn::NdnNode::new(up.map(|p| addr(sim, p)), m.cache_entries, ACK_TIMEOUT, MAX_RETRANSMIT)
        };
        let mut node = Node::new(Endpoint::new(endpoint_config(&sim, fig.server, m.nstart)));
        server_h = node.mount("n", ndn_node(None, &sim));
        sim.attach(NodeId(fig.server as u32), node);
        for &f in &forwarders {
            let mut node = Node::new(Endpoint::new(endpoint_config(&sim, f, m.nstart)));
            node.mount("n", ndn_node(fig.parent[f], &sim));
            sim.attach(NodeId(f as u32), node);
        }
        for (c, &i) in fig.clients.iter().enumerate() {
            let mut node = Node::new(Endpoint::new(endpoint_config(&sim, i, m.nstart)));
            let svc = ndn_node(fig.parent[i], &sim).with_consumer(c as u8 + 1, schedules[c].clone());
            handles.push(node.mount("n", svc));
            sim.attach(NodeId(i as u32), node);
        }
    } else {
        let (clients, server) = apps::security(&m.deployment, CLIENTS)?;
        let proxied = m.deployment != "oscore";
        let signature = Duration::from_micros((m.signature_ms * 1000.0).round() as u64);
        let mut node = Node::new(Endpoint::new(endpoint_config(&sim, fig.server, m.nstart)));
        server_h = node.mount("", MpServer::new(server, signature));
        sim.attach(NodeId(fig.server as u32), node);
        if proxied {
            for &f in &forwarders {
                let up = fig.parent[f].expect("a forwarder has a parent");
                let mut fib = Fib::default();
                if up != fig.server {
                    fib.push("/**", vec![NextHop::new(addr(&sim, up), false, true)])
                        .map_err(|reason| RunError::Rule { at: format!("n{f}"), reason })?;
                }
                let config = ProxyConfig {
                    name: format!("n{f}"),
                    cache_entries: m.cache_entries,
                    upstream_timeout: None,
                    ..ProxyConfig::default()
                };
                let mut node = Node::new(Endpoint::new(endpoint_config(&sim, f, m.nstart)));
                let h = node.mount("proxy", ProxyService::new(config, fib));
                node.set_forward_proxy(h);
                sim.attach(NodeId(f as u32), node);
            }
        }
        for (c, (&i, sec)) in fig.clients.iter().zip(clients).enumerate() {
            let proxy = proxied.then(|| addr(&sim, fig.parent[i].expect("a client has a parent")));
            let client = MpClient::new(c as u8 + 1, schedules[c].clone(), server_addr, proxy, sec, max_transmit_wait());
            let mut node = Node::new(Endpoint::new(endpoint_config(&sim, i, m.nstart)));
            handles.push(node.mount("", client));
            sim.attach(NodeId(i as u32), node);
        }
    }
    let server = NodeId(fig.server as u32);
    let ids: Vec<NodeId> = fig.clients.iter().map(|&i| NodeId(i as u32)).collect();
    let finished = |sim: &Sim| {
        ids.iter().zip(&handles).all(|(&id, &h)| {
            if ndn {
                sim.service::<ndn::NdnNode>(id, h).is_some_and(ndn::NdnNode::finished)
            } else {
                sim.service::<MpClient>(id, h).is_some_and(MpClient::finished)
            }
        })
    };
    let end = Instant::ZERO + interval.saturating_mul(u64::from(m.requests)) + max_transmit_wait() + ACK_TIMEOUT;
    sim.run_until_cond(end, finished);

    // Collect.
    let mut retrievals: Vec<Retrieval> = Vec::new();
    let (client_ops, server_ops, responses) = if ndn {
        let mut ops = Ops::default();
        for (&id, &h) in ids.iter().zip(&handles) {
            if let Some(n) = sim.service::<ndn::NdnNode>(id, h) {
                retrievals.extend_from_slice(n.retrievals());
                ops += n.ops();
            }
        }
        let p = sim.service::<ndn::NdnNode>(server, server_h).ok_or(RunError::Lost("the producer"))?;
        (ops, p.ops(), p.data_out.clone())
    } else {
        let mut ops = Ops::default();
        for (&id, &h) in ids.iter().zip(&handles) {
            if let Some(c) = sim.service::<MpClient>(id, h) {
                retrievals.extend_from_slice(&c.retrievals);
                ops += c.ops();
            }
        }
        let p = sim.service::<MpServer>(server, server_h).ok_or(RunError::Lost("the server"))?;
        (ops, p.ops(), p.responses.clone())
    };
    let mut times_ms = vec![Vec::new(); usize::from(CLIENTS)];
    let mut sent = vec![0u32; usize::from(CLIENTS)];
    for r in &retrievals {
        sent[usize::from(r.client) - 1] += 1;
        if let Some(d) = r.done {
            times_ms[usize::from(r.client) - 1].push(d.saturating_since(r.sent).as_micros() as f64 / 1000.0);
        }
    }
    for t in &mut times_ms {
        t.sort_by(f64::total_cmp);
    }
    let seconds = (sim.now().as_micros() / 1_000_000 + 1) as usize;
    let mut server_per_s = vec![0u32; seconds];
    for r in &responses {
        let s = (r.as_micros() / 1_000_000) as usize;
        if s < seconds {
            server_per_s[s] += 1;
        }
    }
    let (link_requests, link_responses) = shared_path_counts(&sim, &fig, ndn);
    let stats = MpStats {
        deployment: m.deployment.clone(),
        requests: m.requests,
        interval_s: interval.as_secs_f64(),
        times_ms,
        sent,
        server_per_s,
        client_ops,
        server_ops,
        link_requests,
        link_responses,
        server_copies: if m.count_copies {
            sim.node(NodeId(fig.server as u32)).map_or(0, |n| n.endpoint().stats().duplicates_in)
        } else {
            0
        },
    };
    let result = rows(&sim, &fig, &retrievals, index, seed, stats);
    let network =
        Network { topology: topo, gateways: vec![fig.server], members: vec![forwarders], host: fig.clients[8] };
    Ok(PointRun { result, trace: Some(Trace { sim, network }) })
}

/// Requests up and responses down on each link of f1 → … → f7 → server, counted once per datagram and
/// link when the receiver got it (MAC retransmissions and ACKs aside). A request is a CoAP request (an
/// Interest, POST, in the NDN model); a response a CoAP response (a Data, PUT); empty ACKs are neither.
fn shared_path_counts(sim: &Sim, fig: &Fig6, ndn: bool) -> (Vec<u64>, Vec<u64>) {
    let mut path: Vec<u32> = fig.shared.iter().map(|&i| i as u32).collect();
    path.push(fig.server as u32);
    let up: HashMap<(u32, u32), usize> = path.windows(2).enumerate().map(|(i, w)| ((w[0], w[1]), i)).collect();
    let down: HashMap<(u32, u32), usize> = path.windows(2).enumerate().map(|(i, w)| ((w[1], w[0]), i)).collect();
    let (mut req, mut resp) = (vec![0u64; SHARED], vec![0u64; SHARED]);
    let mut seen = HashSet::new();
    for r in sim.records() {
        if r.kind != RecordKind::FrameReceived || r.frag > 0 {
            continue;
        }
        let Some(peer) = r.peer else { continue };
        let link = (peer.0, r.node.0);
        let (is_up, i) = match (up.get(&link), down.get(&link)) {
            (Some(&i), _) => (true, i),
            (_, Some(&i)) => (false, i),
            _ => continue,
        };
        if !seen.insert((r.datagram, link)) {
            continue;
        }
        let Some(code) = sim.datagram(r.datagram).and_then(|d| d.coap).map(|c| c.code) else { continue };
        let (is_req, is_resp) =
            if ndn { (code == Code::POST, code == Code::PUT) } else { (code.is_request(), code.0 >= 0x40) };
        if is_up && is_req {
            req[i] += 1;
        } else if !is_up && is_resp {
            resp[i] += 1;
        }
    }
    (req, resp)
}

fn rows(sim: &Sim, fig: &Fig6, retrievals: &[Retrieval], index: usize, seed: u64, stats: MpStats) -> PointResult {
    let n = stats.requests as usize;
    let mut queries: Vec<QueryRow> = retrievals
        .iter()
        .map(|r| QueryRow {
            point: index,
            rep: (usize::from(r.client) - 1) * n + (r.k as usize - 1),
            seed,
            start_s: r.sent.as_micros() as f64 / 1e6,
            response_ms: r.done.map_or(f64::NAN, |d| d.saturating_since(r.sent).as_micros() as f64 / 1000.0),
            code: if r.done.is_some() { "2.05".into() } else { "none".into() },
            replies: usize::from(r.done.is_some()),
            members: 1,
            coap_retx: 0,
            frames: 0,
            mac_retries: 0,
        })
        .collect();
    queries.sort_by_key(|q| q.rep);
    let mut frames = 0;
    let mut mac_retries = 0;
    let mut busy = 0;
    let mut retx = 0;
    let mut drops = [0u64; 4];
    let mut nodes = Vec::new();
    for i in 0..sim.len() {
        let c = sim.counters(NodeId(i as u32));
        frames += c.frames_sent;
        mac_retries += c.mac_retries;
        busy += c.busy_ccas;
        drops[0] += c.drops(corral_sim::DropReason::Collision);
        drops[1] += c.drops(corral_sim::DropReason::MacRetriesExhausted) + c.drops(corral_sim::DropReason::ChannelBusy);
        drops[2] += c.drops(corral_sim::DropReason::QueueOverflow);
        drops[3] += c.total_drops();
        retx += sim.node(NodeId(i as u32)).map_or(0, |n| n.endpoint().stats().retransmissions);
        let role = if i == fig.server {
            NodeRole::Gateway
        } else if fig.clients.contains(&i) {
            NodeRole::Client
        } else {
            NodeRole::Device
        };
        nodes.push(NodeRow {
            point: index,
            node: i as u32,
            role,
            hops: sim.hops(NodeId(i as u32), NodeId(fig.server as u32)).unwrap_or(0) as u32,
            frames_sent: c.frames_sent,
            frames_received: c.frames_received,
            datagrams_forwarded: c.datagrams_forwarded,
        });
    }
    let mut links: Vec<LinkRow> = sim
        .link_counters()
        .into_iter()
        .map(|(a, b, l)| LinkRow {
            point: index,
            from: a.0,
            to: b.0,
            frames: l.frames,
            retransmissions: l.retransmissions,
            received: l.received,
        })
        .collect();
    links.sort_by_key(|l| (l.from, l.to));
    let busiest = links.iter().max_by_key(|l| l.frames);
    let busiest_node = nodes.iter().max_by_key(|n| n.frames_sent + n.frames_received);
    let point = PointRow {
        avg_hops: 8.0,
        max_hops: 8,
        frames,
        mac_retries,
        busy_ccas: busy,
        coap_retx: retx,
        drops_collision: drops[0],
        drops_mac: drops[1],
        drops_cpu: drops[2],
        max_link_frames: busiest.map_or(0, |l| l.frames),
        max_link: busiest.map_or(String::new(), |l| format!("{}->{}", l.from, l.to)),
        max_node_frames: busiest_node.map_or(0, |n| n.frames_sent + n.frames_received),
        max_node: busiest_node.map_or(0, |n| n.node),
        events: sim.events_processed(),
        window_s: sim.now().as_secs_f64(),
        ..PointRow::new(index, seed, Facts::Multiparty(Arc::new(stats)))
    };
    PointResult { queries, point, links, nodes }
}
