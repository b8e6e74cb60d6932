//! One sweep point, end to end: build the network of a [`Setup`] on corral-sim, attach the real Entity
//! Manager (corral-group, on a `MemStore`) to each gateway, virtual devices to the members and a
//! [`LabClient`] to a wired host; the client creates the entity through the EM's CoAP interface, the
//! interference starts, and the client queries the entity `repetitions` times, measuring each response
//! time from its request to the EM's response. Counters of the simulator give the network-side metrics.
//!
//! # What it owns
//! The mapping of a scenario onto the simulator and the measurement of one point. It never reads a clock
//! or draws randomness of its own: everything follows from the point's seed, so a point's rows are a pure
//! function of (scenario, point, seed) — which is what makes shards and threads safe.

use crate::client::{Exchange, LabClient};
use crate::scenario::{Follow, LinkSpec, Point, Setup, TopologyKind};
use corral_group::device::{mount_device, sample, DeviceConfig, Quantity};
use corral_group::{EmConfig, EntityManager, MemStore};
use corral_proto::wire::{Code, ContentFormat, OptionNumber};
use corral_proto::{Duration, Endpoint, Instant, Node, Request, ServiceHandle, TransmissionParams};
use corral_sim::{Interferer, LinkModel, NodeId, NodeSpec, Reach, Role, Sim, SimConfig, Topology, WiredSpec};
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// One query of the client: a row of `queries.csv`.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryRow {
    pub point: usize,
    pub rep: usize,
    pub seed: u64,
    /// Virtual time the query was sent, s.
    pub start_s: f64,
    /// Response time, ms; NaN when no response came.
    pub response_ms: f64,
    /// The EM's response code (`2.05`), or `none`.
    pub code: String,
    /// Member values in the response.
    pub replies: usize,
    pub members: usize,
    /// CoAP retransmissions of the gateways' endpoints during the query.
    pub coap_retx: u64,
    /// IEEE 802.15.4 data frames sent by all nodes during the query (MAC retries included).
    pub frames: u64,
    pub mac_retries: u64,
}

impl QueryRow {
    /// Every member's value arrived (a notification of the `follow` axis has no response time).
    pub fn success(&self) -> bool {
        self.replies >= self.members && self.code != "none"
    }
}

/// Per-point facts: a row of `points.csv`.
#[derive(Debug, Clone, PartialEq)]
pub struct PointRow {
    pub point: usize,
    pub seed: u64,
    /// Whether the EM created the entity (2.01); if not, no query ran.
    pub created: bool,
    /// Time the creation took (validation and, for multicast, joins), ms.
    pub create_ms: f64,
    pub avg_hops: f64,
    pub max_hops: u32,
    /// Totals over the query phase.
    pub frames: u64,
    pub mac_retries: u64,
    pub busy_ccas: u64,
    pub coap_retx: u64,
    pub drops_interference: u64,
    pub drops_collision: u64,
    pub drops_mac: u64,
    /// Datagrams a busy CPU could not take ([`corral_sim::SimConfig::rx_queue`]).
    pub drops_cpu: u64,
    /// Frames on the busiest directed radio link (link stress) and its name.
    pub max_link_frames: u64,
    pub max_link: String,
    /// Frames sent + received by the busiest node and its index.
    pub max_node_frames: u64,
    pub max_node: u32,
    pub events: u64,
    /// Length of the query phase (virtual time), s.
    pub window_s: f64,
    /// The `follow` axis: |the client's latest average − the members' true average|, sampled every second
    /// of the window, mean and maximum (the resource's unit; NaN for other points).
    pub staleness_mean: f64,
    pub staleness_max: f64,
    /// A `[stream]` point (seed 003): readings sent again, total blocking time and total transmission
    /// delay, ms (NaN for other points).
    pub nrp: f64,
    pub tbt_ms: f64,
    pub ttd_ms: f64,
    /// An `[emulated]` point (seed 004): bytes through the link per second, both ways (NaN elsewhere).
    pub throughput: f64,
    /// A `[baseline]` point (seed 002; NaN elsewhere).
    pub baseline: BaselineFacts,
}

impl PointRow {
    /// The row of a point that is not an entity query run (a stream, a baseline, an emulated link, seed
    /// 001's tree): created, nothing counted yet, every family's own measures NaN. Callers set what they
    /// measured and take the rest from here (`PointRow { frames, ..PointRow::blank(point, seed) }`).
    pub(crate) fn blank(point: usize, seed: u64) -> PointRow {
        PointRow {
            point,
            seed,
            created: true,
            create_ms: 0.0,
            avg_hops: 1.0,
            max_hops: 1,
            frames: 0,
            mac_retries: 0,
            busy_ccas: 0,
            coap_retx: 0,
            drops_interference: 0,
            drops_collision: 0,
            drops_mac: 0,
            drops_cpu: 0,
            max_link_frames: 0,
            max_link: String::new(),
            max_node_frames: 0,
            max_node: 0,
            events: 0,
            window_s: 0.0,
            staleness_mean: f64::NAN,
            staleness_max: f64::NAN,
            nrp: f64::NAN,
            tbt_ms: f64::NAN,
            ttd_ms: f64::NAN,
            throughput: f64::NAN,
            baseline: BaselineFacts::default(),
        }
    }
}

/// What a `[baseline]` point (seed 002: CoAP against HTTP) measures beyond response times.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BaselineFacts {
    /// Response body bytes received per second of the run.
    pub goodput: f64,
    /// Radio energy of the server mote per answered transaction, mJ (TX and RX airtime × CC2420 currents).
    pub energy_mj: f64,
    /// Bytes on the air per answered transaction, both ways: every data frame (MAC retries included) and
    /// MAC ACK, PHY headers included.
    pub air_bytes: f64,
    /// Share of the server's datagrams that never arrived (application-layer loss, Table 4's `C_f`).
    pub dgram_loss: f64,
    /// IEEE 802.15.4 frames of one response datagram (its 6LoWPAN fragments).
    pub frags: f64,
}

impl Default for BaselineFacts {
    fn default() -> BaselineFacts {
        BaselineFacts {
            goodput: f64::NAN,
            energy_mj: f64::NAN,
            air_bytes: f64::NAN,
            dgram_loss: f64::NAN,
            frags: f64::NAN,
        }
    }
}

/// Frames on one directed link during the query phase: a row of `links.csv`.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkRow {
    pub point: usize,
    pub from: u32,
    pub to: u32,
    pub frames: u64,
    pub retransmissions: u64,
    pub received: u64,
}

/// Load of one node during the query phase: a row of `nodes.csv`.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeRow {
    pub point: usize,
    pub node: u32,
    pub role: &'static str,
    pub hops: u32,
    pub frames_sent: u64,
    pub frames_received: u64,
    pub datagrams_forwarded: u64,
}

/// Everything one point produced.
#[derive(Debug, Clone, PartialEq)]
pub struct PointResult {
    pub queries: Vec<QueryRow>,
    pub point: PointRow,
    pub links: Vec<LinkRow>,
    pub nodes: Vec<NodeRow>,
    /// A `[multiparty]` point (seed 001): what Figs. 7-9 and Table III need beyond the rows.
    pub multiparty: Option<std::sync::Arc<crate::multiparty::MpStats>>,
}

/// The seed of a point: the run seed mixed with the point's label, so a point keeps its seed whatever
/// other points the sweep has (and whichever shard runs it).
pub fn point_seed(base: u64, p: &Point) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in p.label().bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut z = base ^ h;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The network of a setup: the topology, the gateway indices, the members of each gateway and the host.
pub struct Network {
    pub topology: Topology,
    pub gateways: Vec<usize>,
    pub members: Vec<Vec<usize>>,
    pub host: usize,
}

pub(crate) fn link_model(l: LinkSpec) -> LinkModel {
    match l {
        LinkSpec::Perfect => LinkModel::Perfect,
        LinkSpec::Bernoulli { p } => LinkModel::Bernoulli { p },
        LinkSpec::Gilbert { mean_loss, burst, loss_bad } => LinkModel::bursty(mean_loss, burst, loss_bad),
        LinkSpec::Snr { snr_db } => LinkModel::Snr { snr_db },
    }
}

fn sub_topology(s: &Setup, k: usize, gw: usize) -> Result<Topology, String> {
    Ok(match s.topology {
        TopologyKind::Star => Topology::star(k),
        TopologyKind::Table7 => table7_like(k),
        TopologyKind::Layered if s.layers.iter().sum::<usize>() == k => Topology::layered(&s.layers),
        TopologyKind::Layered => Topology::testbed_table7(k),
        TopologyKind::Floor => {
            let (w, h, r, seed) = s.floor;
            Topology::random_geometric(k + 1, w, h, r, seed.wrapping_add(gw as u64))
                .ok_or_else(|| format!("no connected placement of {k} nodes on a {w}×{h} m floor with range {r} m"))?
        }
    })
}

/// Seed 000 Table 7's layout for its group sizes; other sizes get the hop layers of the nearest size in the
/// table, scaled (largest remainder), so e.g. Figs. 10-12's 30 members keep the 29-member proportions.
pub fn table7_like(k: usize) -> Topology {
    const TABLE: [(usize, &[usize]); 5] =
        [(5, &[5]), (10, &[6, 4]), (20, &[9, 8, 3]), (29, &[11, 13, 5]), (40, &[11, 12, 10, 4, 3])];
    if TABLE.iter().any(|(g, _)| *g == k) {
        return Topology::testbed_table7(k);
    }
    let (g, layers) = TABLE.iter().min_by_key(|(g, _)| g.abs_diff(k)).expect("table is not empty");
    let exact: Vec<f64> = layers.iter().map(|&l| l as f64 * k as f64 / *g as f64).collect();
    let mut out: Vec<usize> = exact.iter().map(|x| x.floor() as usize).collect();
    let mut order: Vec<usize> = (0..out.len()).collect();
    order.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())).then(a.cmp(&b)));
    let mut missing = k - out.iter().sum::<usize>();
    for i in order.into_iter().cycle() {
        if missing == 0 {
            break;
        }
        out[i] += 1;
        missing -= 1;
    }
    out.retain(|&l| l > 0);
    Topology::layered(&out)
}

/// Builds the network of a setup (see [`Network`]).
pub fn build_network(s: &Setup) -> Result<Network, String> {
    let mut topo = Topology::new();
    topo.default_link = link_model(s.link);
    let mut gateways = Vec::new();
    let mut members = Vec::new();
    let split = if s.nested { s.gateways } else { 1 };
    for g in 0..s.gateways {
        let k = if g < split { s.group / split + usize::from(g < s.group % split) } else { 0 };
        let sub = if k == 0 {
            let mut t = Topology::new();
            t.add(NodeSpec::new(Role::Gateway, None));
            t
        } else {
            sub_topology(s, k, g)?
        };
        let offset = topo.nodes.len();
        let adj = sub.adjacency();
        let mut mine = Vec::new();
        for (i, spec) in sub.nodes.iter().enumerate() {
            let mut spec = spec.clone();
            spec.channel = Some(s.channels[g]);
            spec.parent = spec.parent.map(|p| p + offset);
            if spec.role == Role::Gateway {
                gateways.push(offset + i);
            } else {
                mine.push(offset + i);
            }
            topo.add(spec);
        }
        for (a, list) in adj.iter().enumerate() {
            for &b in list {
                if a < b {
                    topo.connect(offset + a, offset + b);
                }
            }
        }
        members.push(mine);
    }
    let delay = Duration::from_micros((s.wired_delay_ms * 1000.0).round() as u64);
    for &g in &gateways[1..] {
        topo.wire(WiredSpec { delay, ..WiredSpec::ethernet(gateways[0], g) });
    }
    let host = topo.add_wired_host(gateways[0], WiredSpec { delay, ..WiredSpec::ethernet(0, 0) });
    Ok(Network { topology: topo, gateways, members, host })
}

fn params(s: &Setup) -> TransmissionParams {
    TransmissionParams {
        ack_timeout: Duration::from_millis(s.ack_timeout_ms),
        ack_random_factor: s.ack_random_factor,
        max_retransmit: s.max_retransmit,
        default_leisure: Duration::from_millis(s.leisure_ms),
        ..TransmissionParams::default()
    }
}

fn uri(addr: SocketAddr, path: &str) -> String {
    match addr {
        SocketAddr::V6(a) => format!("coap://[{}]/{}", a.ip(), path),
        SocketAddr::V4(a) => format!("coap://{}/{}", a.ip(), path),
    }
}

fn profile_doc(s: &Setup, er: &[String], delay_ms: Option<u64>, multicast: bool) -> Vec<u8> {
    let mut doc = serde_json::json!({
        "er": er,
        "ect": if multicast { "multicast" } else { "unicast" },
        "eo": ["lst", "avg", "min", "max"],
    });
    if !multicast {
        doc["emt"] = serde_json::json!(if s.confirmable { "con" } else { "non" });
        doc["delay"] = match delay_ms {
            Some(d) => serde_json::json!(d),
            None => serde_json::json!("auto"),
        };
    }
    if let Some(t) = s.timeout_ms {
        doc["timeout"] = serde_json::json!(t);
    }
    if multicast && s.repair {
        doc["repair"] = serde_json::json!("unicast");
    }
    serde_json::to_vec(&doc).expect("a JSON value serialises")
}

/// Totals of the counters we difference per query.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Totals {
    frames: u64,
    mac_retries: u64,
    coap_retx: u64,
}

pub(crate) fn totals(sim: &Sim, gateways: &[usize]) -> Totals {
    let mut t = Totals::default();
    for i in 0..sim.len() {
        let c = sim.counters(NodeId(i as u32));
        t.frames += c.frames_sent;
        t.mac_retries += c.mac_retries;
    }
    for &g in gateways {
        if let Some(n) = sim.node(NodeId(g as u32)) {
            t.coap_retx += n.endpoint().stats().retransmissions;
        }
    }
    t
}

/// Counts the member values in an EM response (JSON `values`, or 1 per member for an aggregate).
pub fn count_replies(payload: &[u8]) -> usize {
    let Ok(doc) = serde_json::from_slice::<serde_json::Value>(payload) else { return 0 };
    match doc.get("values").and_then(|v| v.as_array()) {
        Some(v) => v.len(),
        None => doc.get("replies").and_then(|r| r.as_u64()).unwrap_or(0) as usize,
    }
}

pub(crate) struct Driver {
    pub(crate) sim: Sim,
    pub(crate) host: NodeId,
    pub(crate) client: ServiceHandle,
}

impl Driver {
    /// Sends a request from the client and runs until it is answered or `limit` passes.
    fn exchange(&mut self, dst: SocketAddr, req: Request, limit: Duration) -> crate::client::Exchange {
        let (host, h) = (self.host, self.client);
        self.sim.with_service(host, h, |c: &mut LabClient, cx| c.send(cx, dst, req));
        let deadline = self.sim.now() + limit;
        self.sim.run_until_cond(deadline, |s| s.service::<LabClient>(host, h).is_some_and(|c| c.result().is_some()));
        let now = self.sim.now();
        match self.sim.service::<LabClient>(host, h).and_then(|c| c.result()) {
            Some(x) => x.clone(),
            None => crate::client::Exchange { sent: now - limit, answered: now, code: None, payload: Vec::new() },
        }
    }
}

/// Runs one point with `seed`. Errors are configuration problems (a topology that cannot be built).
pub fn run_point(s: &Setup, index: usize, seed: u64) -> Result<PointResult, String> {
    run_point_sim(s, index, seed, false).map(|t| t.result)
}

/// A point run with the simulator kept, for looking into its records (the `multicast_losses` example).
pub struct TracedPoint {
    pub result: PointResult,
    pub sim: Sim,
    pub network: Network,
    /// The [`LabClient`] on the host node (`network.host`), to go on driving the run.
    pub client: ServiceHandle,
}

/// [`run_point`] that keeps the simulator, with its records stored if `record` (same numbers either way).
pub fn run_point_sim(s: &Setup, index: usize, seed: u64, record: bool) -> Result<TracedPoint, String> {
    if let Some(st) = &s.stream {
        return crate::streaming::run(s, st, index, seed, record);
    }
    if let Some(em) = &s.emulated {
        return crate::emulated::run(em, index, seed);
    }
    if let Some(b) = &s.baseline {
        return crate::baseline::run(b, index, seed, record);
    }
    if let Some(m) = &s.multiparty {
        return crate::multiparty::run(s, m, index, seed);
    }
    let net = build_network(s)?;
    let mut cfg = SimConfig::new(seed);
    cfg.record = record;
    cfg.processing_delay = Duration::from_micros((s.processing_delay_ms * 1000.0).round() as u64);
    cfg.rx_queue = s.rx_queue;
    let mut sim = Sim::from_topology(cfg, &net.topology);
    let params = params(s);
    let forwarders = crate::forwarder::forwarder_nodes(s, &net);
    let endpoint = |sim: &Sim, i: usize| {
        let mut c = sim.endpoint_config(NodeId(i as u32));
        c.params = params;
        if forwarders.contains(&i) {
            c.params.nstart = crate::forwarder::FORWARDER_NSTART;
        }
        c
    };
    for list in &net.members {
        for &m in list {
            let mut node = Node::new(Endpoint::new(endpoint(&sim, m)));
            let observable = matches!(s.follow, Some(Follow::Observe));
            let dc = DeviceConfig { mc_slots: Some(4), observable, ..DeviceConfig::default() };
            mount_device(&mut node, dc);
            sim.attach(NodeId(m as u32), node);
        }
    }
    for &g in &net.gateways {
        if s.forwarding.is_some() {
            // A forwarder, not the Entity Manager (crate::forwarder mounts its proxy).
            sim.attach(NodeId(g as u32), Node::new(Endpoint::new(endpoint(&sim, g))));
            continue;
        }
        let cfg = EmConfig {
            local_addrs: vec![sim.addr(NodeId(g as u32))],
            multicast_leisure: Duration::from_millis(s.leisure_ms),
            ..EmConfig::default()
        };
        let em = EntityManager::new(cfg, Box::new(MemStore::new())).map_err(|e| e.to_string())?;
        let mut node = Node::new(Endpoint::new(endpoint(&sim, g)));
        node.mount("em", em);
        sim.attach(NodeId(g as u32), node);
    }
    let mut host_config = sim.endpoint_config(NodeId(net.host as u32));
    if let Some(f) = &s.forwarding {
        // The consumers are independent applications: their requests go out together, not one by one.
        host_config.params.nstart = f.consumers as u16;
    }
    let mut client_node = Node::new(Endpoint::new(host_config));
    let client = client_node.mount("client", LabClient::new());
    sim.attach(NodeId(net.host as u32), client_node);
    let mut d = Driver { sim, host: NodeId(net.host as u32), client };

    crate::forwarder::mount_forwarders(&mut d, s, &net, &endpoint)?;

    // Create the entity (or the children, then the parent) through the EM's CoAP interface.
    let em0 = d.sim.addr(NodeId(net.gateways[0] as u32));
    let resource = s.resource.trim_start_matches('/');
    let create_limit = Duration::from_secs(600);
    let t0 = d.sim.now();
    let mut created = true;
    let create = |d: &mut Driver, gw: SocketAddr, name: &str, doc: Vec<u8>| {
        let req = Request::new(Code::PUT)
            .with_path(&format!("em/{name}"))
            .with_content_format(ContentFormat::JSON)
            .with_accept(ContentFormat::JSON)
            .with_payload(doc);
        // As an experimenter would: a creation that failed (a member did not answer its validation or
        // join in time; the EM rolled it back) is tried again, up to five times.
        for _ in 0..5 {
            if d.exchange(gw, req.clone(), create_limit).code == Some(Code::CREATED) {
                return true;
            }
            d.sim.run_for(Duration::from_secs(5));
        }
        false
    };
    if s.forwarding.is_some() {
        // Nothing to create: the consumers ask the members' resources through the forwarders.
    } else if s.nested {
        let mut children = Vec::new();
        for (g, list) in net.members.iter().enumerate() {
            if list.is_empty() {
                continue;
            }
            let gw = d.sim.addr(NodeId(net.gateways[g] as u32));
            let er: Vec<String> = list.iter().map(|&m| uri(d.sim.addr(NodeId(m as u32)), resource)).collect();
            let name = format!("part{}", g + 1);
            created &= create(&mut d, gw, &name, profile_doc(s, &er, s.delay_ms, false));
            children.push(uri(gw, &format!("em/{name}")));
        }
        created &= create(&mut d, em0, "group", profile_doc(s, &children, Some(s.parent_delay_ms), false));
    } else {
        let er: Vec<String> =
            net.members.iter().flatten().map(|&m| uri(d.sim.addr(NodeId(m as u32)), resource)).collect();
        created &= create(&mut d, em0, "group", profile_doc(s, &er, s.delay_ms, s.multicast));
    }
    let create_ms = (d.sim.now() - t0).as_micros() as f64 / 1000.0;
    d.sim.run_for(Duration::from_secs(1));

    // Interference starts with the query phase.
    let start = d.sim.now();
    if s.wifi_schedule.iter().any(|(_, m)| *m > 0.0) {
        let mut w = Interferer::constant(s.wifi_channel, 0.0);
        w.load = s
            .wifi_schedule
            .iter()
            .map(|&(at, mbps)| (start + Duration::from_micros((at.max(0.0) * 1e6) as u64), mbps))
            .collect();
        w.cca_busy_prob = s.cca_busy_prob;
        w.corruption_prob = s.corruption_prob;
        w.reach = Reach::All;
        d.sim.add_interferer(w);
    }

    let hops = net.topology.hop_counts();
    let member_ids: Vec<usize> = net.members.iter().flatten().copied().collect();
    let member_hops: Vec<u32> = member_ids.iter().filter_map(|&m| hops[m]).collect();
    let avg_hops = member_hops.iter().sum::<u32>() as f64 / member_hops.len().max(1) as f64;
    let max_hops = member_hops.iter().copied().max().unwrap_or(0);

    let link_before = link_snapshot(&d.sim);
    let node_before: Vec<(u64, u64, u64)> = (0..d.sim.len()).map(|i| node_snapshot(&d.sim, i)).collect();
    let before_all = totals(&d.sim, &net.gateways);
    let busy_before: u64 = (0..d.sim.len()).map(|i| d.sim.counters(NodeId(i as u32)).busy_ccas).sum();
    let drops_before = drops(&d.sim);

    let mut queries = Vec::new();
    let (mut staleness_mean, mut staleness_max) = (f64::NAN, f64::NAN);
    match (created, s.follow) {
        (false, _) => {}
        (true, Some(f)) => {
            let (rows, updates) = follow(&mut d, s, f, em0, (index, seed), &net.gateways);
            queries = rows;
            let seeds: Vec<u64> = member_ids
                .iter()
                .filter_map(|&m| d.sim.node(NodeId(m as u32)).map(|n| n.endpoint().config().seed))
                .collect();
            if let Some(q) = quantity(&s.resource) {
                let truth = |t: Instant| seeds.iter().map(|&sd| sample(sd, q, t)).sum::<f64>() / seeds.len() as f64;
                (staleness_mean, staleness_max) = staleness(&updates, truth, start, d.sim.now());
            }
        }
        (true, None) if s.forwarding.is_some() => {
            queries = crate::forwarder::queries(&mut d, s, &net, (index, seed));
        }
        (true, None) => {
            for rep in 0..s.repetitions {
                let before = totals(&d.sim, &net.gateways);
                let req = Request::get("em/group").with_accept(ContentFormat::JSON);
                let x = d.exchange(em0, req, Duration::from_secs(s.query_limit_s));
                let after = totals(&d.sim, &net.gateways);
                queries.push(query_row((index, seed), rep, s.group, &x, false, (before, after)));
                d.sim.run_for(Duration::from_millis(s.pause_ms));
            }
        }
    }

    let after_all = totals(&d.sim, &net.gateways);
    let mut links = Vec::new();
    for (from, to, c) in d.sim.link_counters() {
        let (f0, r0, x0) = link_before.get(&(from.0, to.0)).copied().unwrap_or_default();
        let row = LinkRow {
            point: index,
            from: from.0,
            to: to.0,
            frames: c.frames - f0,
            retransmissions: c.retransmissions - r0,
            received: c.received - x0,
        };
        if row.frames > 0 || row.received > 0 {
            links.push(row);
        }
    }
    let mut nodes = Vec::new();
    for (i, &(s0, r0, f0)) in node_before.iter().enumerate() {
        let c = d.sim.counters(NodeId(i as u32));
        let role = match d.sim.role(NodeId(i as u32)) {
            Role::Gateway => "gateway",
            Role::Device => "device",
            Role::Host => "client",
        };
        nodes.push(NodeRow {
            point: index,
            node: i as u32,
            role,
            hops: hops.get(i).copied().flatten().unwrap_or(0),
            frames_sent: c.frames_sent - s0,
            frames_received: c.frames_received - r0,
            datagrams_forwarded: c.datagrams_forwarded - f0,
        });
    }
    let (max_link_frames, max_link) = links
        .iter()
        .map(|l| (l.frames, format!("{}->{}", l.from, l.to)))
        .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
        .unwrap_or((0, String::new()));
    let (max_node_frames, max_node) = nodes
        .iter()
        .map(|n| (n.frames_sent + n.frames_received, n.node))
        .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
        .unwrap_or((0, 0));
    let drops_after = drops(&d.sim);
    let busy_after: u64 = (0..d.sim.len()).map(|i| d.sim.counters(NodeId(i as u32)).busy_ccas).sum();
    let point = PointRow {
        point: index,
        seed,
        created,
        create_ms,
        avg_hops,
        max_hops,
        frames: after_all.frames - before_all.frames,
        mac_retries: after_all.mac_retries - before_all.mac_retries,
        busy_ccas: busy_after - busy_before,
        coap_retx: after_all.coap_retx - before_all.coap_retx,
        drops_interference: drops_after.0 - drops_before.0,
        drops_collision: drops_after.1 - drops_before.1,
        drops_mac: drops_after.2 - drops_before.2,
        drops_cpu: drops_after.3 - drops_before.3,
        max_link_frames,
        max_link,
        max_node_frames,
        max_node,
        events: d.sim.events_processed(),
        window_s: (d.sim.now() - start).as_micros() as f64 / 1e6,
        staleness_mean,
        staleness_max,
        nrp: f64::NAN,
        tbt_ms: f64::NAN,
        ttd_ms: f64::NAN,
        throughput: f64::NAN,
        baseline: BaselineFacts::default(),
    };
    Ok(TracedPoint {
        result: PointResult { queries, point, links, nodes, multiparty: None },
        sim: d.sim,
        network: net,
        client,
    })
}

/// A row of `queries.csv` for one exchange (or, `notification`, one Observe notification, which has no
/// response time); `(point, seed)` and the counters around it.
pub(crate) fn query_row(
    (point, seed): (usize, u64),
    rep: usize,
    members: usize,
    x: &Exchange,
    notification: bool,
    (before, after): (Totals, Totals),
) -> QueryRow {
    let answered = x.code.is_some();
    QueryRow {
        point,
        rep,
        seed,
        start_s: x.sent.as_micros() as f64 / 1e6,
        // µs / 1000 is the double nearest the CSV's 3 decimals, so merged shards aggregate identically.
        response_ms: if answered && !notification { x.response_time().as_micros() as f64 / 1000.0 } else { f64::NAN },
        code: x.code.map_or_else(|| "none".to_string(), |c| format!("{c}")),
        replies: if answered { count_replies(&x.payload) } else { 0 },
        members,
        coap_retx: after.coap_retx - before.coap_retx,
        frames: after.frames - before.frames,
        mac_retries: after.mac_retries - before.mac_retries,
    }
}

/// The `follow` axis: the client follows `GET /em/group?eo=avg` for the setup's window, polling or
/// observing. Returns a row per exchange (polling) or notification (observing), and every average the
/// client learnt with the time it learnt it.
fn follow(
    d: &mut Driver,
    s: &Setup,
    how: Follow,
    em: SocketAddr,
    ids: (usize, u64),
    gateways: &[usize],
) -> (Vec<QueryRow>, Vec<(Instant, f64)>) {
    let req = Request::get("em/group").with_query("eo=avg").with_accept(ContentFormat::JSON);
    let end = d.sim.now() + Duration::from_secs(s.window_s);
    let (mut rows, mut updates) = (Vec::new(), Vec::new());
    let mut learn = |x: &Exchange| {
        if x.code == Some(Code::CONTENT) {
            if let Some(v) = average(&x.payload) {
                updates.push((x.answered, v));
            }
        }
    };
    match how {
        Follow::Poll { period_ms } => {
            let mut next = d.sim.now();
            while next < end {
                d.sim.run_until(next);
                let before = totals(&d.sim, gateways);
                let x = d.exchange(em, req.clone(), Duration::from_secs(s.query_limit_s));
                learn(&x);
                rows.push(query_row(ids, rows.len(), s.group, &x, false, (before, totals(&d.sim, gateways))));
                // A query that outlasted the period is followed by the next at once.
                next = (next + Duration::from_millis(period_ms)).max(d.sim.now());
            }
        }
        Follow::Observe => {
            let (host, h) = (d.host, d.client);
            let req = req.with_option(OptionNumber::OBSERVE, &[]);
            d.sim.with_service(host, h, |c: &mut LabClient, cx| c.observe(cx, em, req));
            let count = |sim: &Sim| sim.service::<LabClient>(host, h).map_or(0, |c| c.notifications().len());
            let mut before = totals(&d.sim, gateways);
            loop {
                let seen = count(&d.sim);
                if !d.sim.run_until_cond(end, |sim| count(sim) > seen) {
                    break;
                }
                let after = totals(&d.sim, gateways);
                let news: Vec<Exchange> = d
                    .sim
                    .service::<LabClient>(host, h)
                    .map(|c| c.notifications()[seen..].to_vec())
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(at, r)| Exchange { sent: at, answered: at, code: Some(r.code), payload: r.payload })
                    .collect();
                for (k, x) in news.iter().enumerate() {
                    learn(x);
                    // The frames since the previous notification go with the first of a burst.
                    let span = if k == 0 { (before, after) } else { (after, after) };
                    rows.push(query_row(ids, rows.len(), s.group, x, true, span));
                }
                before = after;
            }
        }
    }
    d.sim.run_until(end);
    (rows, updates)
}

/// The `v` of an EM's JSON answer to an arithmetic operation.
fn average(payload: &[u8]) -> Option<f64> {
    serde_json::from_slice::<serde_json::Value>(payload).ok()?.get("v")?.as_f64()
}

/// The sensor behind a device resource path.
fn quantity(resource: &str) -> Option<Quantity> {
    match resource.trim_matches('/') {
        "s/t" => Some(Quantity::Temperature),
        "s/h" => Some(Quantity::Humidity),
        "s/l" => Some(Quantity::Light),
        _ => None,
    }
}

/// |what the client knew − `truth`| at every whole second in (`start`, `end`] after its first update:
/// mean and maximum, rounded to 4 decimals (so that a merged report reads back the same values). NaN
/// when the client learnt nothing.
pub fn staleness(
    updates: &[(Instant, f64)],
    truth: impl Fn(Instant) -> f64,
    start: Instant,
    end: Instant,
) -> (f64, f64) {
    let (mut sum, mut max, mut n) = (0.0, 0.0f64, 0u64);
    let mut k = 0;
    let mut known = None;
    for sec in start.as_secs() + 1..=end.as_secs() {
        let t = Instant::from_secs(sec);
        while k < updates.len() && updates[k].0 <= t {
            known = Some(updates[k].1);
            k += 1;
        }
        let Some(v) = known else { continue };
        let e = (v - truth(t)).abs();
        sum += e;
        max = max.max(e);
        n += 1;
    }
    let round = |x: f64| (x * 1e4).round() / 1e4;
    if n == 0 {
        (f64::NAN, f64::NAN)
    } else {
        (round(sum / n as f64), round(max))
    }
}

fn link_snapshot(sim: &Sim) -> BTreeMap<(u32, u32), (u64, u64, u64)> {
    sim.link_counters().into_iter().map(|(a, b, c)| ((a.0, b.0), (c.frames, c.retransmissions, c.received))).collect()
}

fn node_snapshot(sim: &Sim, i: usize) -> (u64, u64, u64) {
    let c = sim.counters(NodeId(i as u32));
    (c.frames_sent, c.frames_received, c.datagrams_forwarded)
}

/// Frames lost to interference, to collisions (incl. half-duplex) and datagrams dropped after the MAC
/// gave up, over all links and nodes so far.
fn drops(sim: &Sim) -> (u64, u64, u64, u64) {
    use corral_sim::DropReason as R;
    let mut out = (0, 0, 0, 0);
    for (_, _, c) in sim.link_counters() {
        out.0 += c.lost(R::Interference);
        out.1 += c.lost(R::Collision) + c.lost(R::HalfDuplex);
    }
    for i in 0..sim.len() {
        let c = sim.counters(NodeId(i as u32));
        out.2 += c.drops(R::MacRetriesExhausted) + c.drops(R::ChannelBusy);
        out.3 += c.drops(R::QueueOverflow);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staleness_is_sampled_every_second_after_the_first_update() {
        let s = |x: u64| Instant::from_secs(x);
        // The truth is 20.0 until t = 5 s, then 20.5; the client learns 20.0 at 2.5 s and 20.4 at 7 s.
        let truth = |t: Instant| if t < s(5) { 20.0 } else { 20.5 };
        let updates = [(Instant::from_millis(2500), 20.0), (s(7), 20.4)];
        let (mean, max) = staleness(&updates, truth, s(0), s(10));
        // Seconds 3-4: 0; 5-6: 0.5; 7-10: 0.1 → (0 + 0 + 0.5 + 0.5 + 4 × 0.1) / 8.
        assert_eq!(mean, 0.175);
        assert_eq!(max, 0.5);
        assert!(staleness(&[], truth, s(0), s(10)).0.is_nan());
    }
}
