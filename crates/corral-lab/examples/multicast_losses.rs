//! Where do group members go missing? Runs one point of a scenario with the simulator's records on and
//! attributes every member missing from a query's answer to the request on its way down (which hop, why:
//! collision, interference, a parent that never sent it, the member's full CPU queue) or the response on its
//! way up (which hop gave up, or whose CPU queue was full).
//!
//! ```text
//! cargo run --release -p corral-lab --example multicast_losses -- \
//!     fig10-interference "mode=multicast group=30 wifi_mbps=0" [SEED | FIRST-LAST] [--tree] [--frames]
//! ```
//! The point is chosen by its label as `corral lab run` prints it; the seed is the run's `--seed` (1), or a
//! range whose runs are added up. `--tree` prints the routing tree, `--frames` the request's frames of the
//! first queries that lost a member. Works for unicast points too (the request is then the EM's unicast
//! request to that member).
use corral_lab::harness::point_seed;
use corral_lab::run::run_point_traced;
use corral_lab::scenario::{builtin, Experiment, Scenario};
use corral_proto::{Duration, Instant};
use corral_sim::{DatagramId, DropReason, NodeId, Record, RecordKind, Sim};
use std::collections::{BTreeMap, HashMap};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let flag = |f: &str| std::env::args().any(|a| a == f);
    let (Some(name), Some(label)) = (args.first(), args.get(1)) else {
        eprintln!("usage: multicast_losses SCENARIO \"POINT LABEL\" [SEED | FIRST-LAST] [--tree] [--frames]");
        std::process::exit(2);
    };
    let seeds: Vec<u64> = match args.get(2).map(|s| s.split_once('-')) {
        None => vec![1],
        Some(None) => vec![args[2].parse().expect("seed")],
        Some(Some((a, b))) => (a.parse().expect("seed")..=b.parse().expect("seed")).collect(),
    };
    let text = builtin(name).map_or_else(|| std::fs::read_to_string(name).expect("scenario file"), str::to_string);
    let scenario = Scenario::parse(&text).expect("scenario");
    let Some(point) = scenario.points(false).into_iter().find(|p| p.label() == *label) else {
        eprintln!("no point labelled {label:?}; the labels are:");
        for p in scenario.points(false) {
            eprintln!("  {}", p.label());
        }
        std::process::exit(2);
    };
    let setup = scenario.setup(&point, false).expect("setup");
    let Experiment::Entity(entity) = &setup.experiment else {
        eprintln!("{name} is not an entity scenario: nothing to attribute to members");
        std::process::exit(2);
    };

    let mut causes: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_depth: BTreeMap<u32, (usize, usize)> = BTreeMap::new();
    let mut per_node: BTreeMap<(u32, u32), usize> = BTreeMap::new();
    let (mut queries, mut complete, mut missing_total) = (0, 0, 0);
    let mut dumped = 0;
    for (run, &seed) in seeds.iter().enumerate() {
        let out = run_point_traced(&setup, point.index, point_seed(seed, &point), true).expect("run");
        let t = out.trace.expect("an entity point runs in the simulator");
        let sim = &t.sim;
        let gw = NodeId(t.network.gateways[0] as u32);
        let members: Vec<NodeId> = t.network.members.iter().flatten().map(|&m| NodeId(m as u32)).collect();
        let hops = t.network.topology.hop_counts();
        if run == 0 && flag("--tree") {
            print_tree(&t.network.topology.parents(), &hops);
        }
        let idx = ByDatagram::new(sim);
        let (find, has) =
            (|dg, f: &dyn Fn(&Record) -> bool| idx.find(dg, f), |dg, f: &dyn Fn(&Record) -> bool| idx.has(dg, f));
        for q in &out.result.queries {
            queries += 1;
            complete += usize::from(q.success());
            missing_total += q.members.saturating_sub(q.replies);
            let start = Instant::from_micros((q.start_s * 1e6).round() as u64);
            let end = start
                + if q.response_ms.is_finite() {
                    Duration::from_micros((q.response_ms * 1000.0).round() as u64)
                } else {
                    Duration::from_secs(entity.queries.query_limit_s)
                };
            let sent_in = |from: NodeId, to: &dyn Fn(&std::net::SocketAddr) -> bool| -> Vec<DatagramId> {
                sim.datagrams()
                    .iter()
                    .filter(|d| d.node == from && to(&d.dst) && d.at >= start && d.at <= end)
                    .map(|d| d.id)
                    .collect()
            };
            let multicast = sent_in(gw, &|d| d.ip().is_multicast());
            let mut lost_here = 0;
            for &m in &members {
                let depth = hops[m.index()].unwrap_or(0);
                by_depth.entry(depth).or_default().0 += 1;
                let resp = sent_in(m, &|d| d.ip() == sim.addr(gw).ip());
                if resp.iter().any(|&d| has(d, &|r| r.kind == RecordKind::Delivered && r.node == gw)) {
                    continue;
                }
                lost_here += 1;
                by_depth.entry(depth).or_default().1 += 1;
                *per_node.entry((m.0, depth)).or_default() += 1;
                let req =
                    multicast.first().copied().or_else(|| sent_in(gw, &|d| d.ip() == sim.addr(m).ip()).last().copied());
                let Some(req) = req else {
                    *causes.entry("request: never sent".into()).or_default() += 1;
                    continue;
                };
                let cause = if has(req, &|r| r.kind == RecordKind::Delivered && r.node == m) {
                    match resp.last() {
                        None => "response: not sent before the EM answered".to_string(),
                        Some(&d) => match find(d, &|r| r.kind == RecordKind::Dropped) {
                            Some(r) if r.node == gw => {
                                format!("response: dropped by the gateway ({})", reason(r.reason))
                            }
                            Some(r) => format!(
                                "response: dropped at depth {} ({})",
                                hops[r.node.index()].unwrap_or(0),
                                reason(r.reason)
                            ),
                            None => "response: still on its way when the EM answered".to_string(),
                        },
                    }
                } else if let Some(r) = find(req, &|r| r.kind == RecordKind::Dropped && r.node == m) {
                    format!("request: reached the member, which dropped it ({})", reason(r.reason))
                } else {
                    request_loss(sim, &idx, req, gw, m, &hops)
                };
                *causes.entry(cause).or_default() += 1;
            }
            if lost_here > 0 && flag("--frames") && dumped < 5 {
                dumped += 1;
                println!("query {} (seed {seed}): {lost_here} missing; the request's frames:", q.rep);
                for &req in multicast.first().iter() {
                    print_frames(sim, *req, &hops);
                }
            }
        }
        let p = &out.result.point;
        println!(
            "seed {seed}: frames {} mac_retries {} busy_ccas {}; lost frames: collision {} interference {}; dropped datagrams: mac {} cpu {}",
            p.frames, p.mac_retries, p.busy_ccas, p.drops_collision, p.drops_interference, p.drops_mac, p.drops_cpu
        );
    }
    let members = setup.common.network.group;
    println!(
        "\n{} — {queries} queries, {missing_total} member answers missing: member reliability {:.2} %, group {:.1} %",
        point.label(),
        100.0 - 100.0 * missing_total as f64 / (queries * members).max(1) as f64,
        100.0 * complete as f64 / queries.max(1) as f64
    );
    println!("\nwhy members were missing:");
    for (c, n) in &causes {
        println!("  {n:6}  {c}");
    }
    println!("\nby depth: member answers expected, missing");
    for (d, (n, miss)) in &by_depth {
        println!("  depth {d}: {n:6} {miss:5} ({:.2} %)", 100.0 * *miss as f64 / (*n).max(1) as f64);
    }
    println!("\nmost often missing: node (depth) count");
    let mut v: Vec<_> = per_node.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for ((n, d), c) in v.iter().take(8) {
        println!("  {n} ({d}) {c}");
    }
}

/// The records of each datagram.
struct ByDatagram<'a>(HashMap<DatagramId, Vec<&'a Record>>);

impl<'a> ByDatagram<'a> {
    fn new(sim: &'a Sim) -> ByDatagram<'a> {
        let mut m: HashMap<DatagramId, Vec<&Record>> = HashMap::new();
        for r in sim.records() {
            m.entry(r.datagram).or_default().push(r);
        }
        ByDatagram(m)
    }

    fn find(&self, dg: DatagramId, f: &dyn Fn(&Record) -> bool) -> Option<Record> {
        self.0.get(&dg).and_then(|v| v.iter().find(|r| f(r)).map(|r| **r))
    }

    fn has(&self, dg: DatagramId, f: &dyn Fn(&Record) -> bool) -> bool {
        self.find(dg, f).is_some()
    }
}

fn reason(r: Option<DropReason>) -> &'static str {
    r.map_or("?", DropReason::name)
}

/// Walks the tree path from the gateway down to `m` and names the first hop the request did not cross.
fn request_loss(sim: &Sim, idx: &ByDatagram, req: DatagramId, gw: NodeId, m: NodeId, hops: &[Option<u32>]) -> String {
    let has = |dg, f: &dyn Fn(&Record) -> bool| idx.has(dg, f);
    let find = |dg, f: &dyn Fn(&Record) -> bool| idx.find(dg, f);
    let path = sim.route(gw, m).unwrap_or_default();
    for w in path.windows(2) {
        let (a, b) = (w[0], w[1]);
        if has(req, &|r| r.kind == RecordKind::FrameReceived && r.node == b && r.peer == Some(a)) {
            continue;
        }
        let depth = hops[b.index()].unwrap_or(0);
        if !has(req, &|r| r.kind == RecordKind::FrameSent && r.node == a) {
            let why = find(req, &|r| r.kind == RecordKind::Dropped && r.node == a).and_then(|r| r.reason);
            return format!("request: the parent at depth {} never sent it ({})", depth - 1, reason(why));
        }
        let why =
            find(req, &|r| r.kind == RecordKind::FrameLost && r.node == b && r.peer == Some(a)).and_then(|r| r.reason);
        return format!("request: lost on the hop to depth {depth} ({})", reason(why));
    }
    "request: ?".into()
}

fn print_tree(parents: &[Option<usize>], hops: &[Option<u32>]) {
    let mut kids: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, p) in parents.iter().enumerate() {
        if let Some(p) = p {
            kids.entry(*p).or_default().push(i);
        }
    }
    println!("routing tree (parent (depth): children):");
    for (p, k) in &kids {
        println!("  {p} ({}): {k:?}", hops[*p].unwrap_or(0));
    }
}

fn print_frames(sim: &Sim, req: DatagramId, hops: &[Option<u32>]) {
    for r in sim.records().iter().filter(|r| r.datagram == req) {
        let what = match r.kind {
            RecordKind::FrameSent => "sent".to_string(),
            RecordKind::FrameLost => format!("lost from {} ({})", r.peer.map_or(0, |p| p.0), reason(r.reason)),
            _ => continue,
        };
        println!(
            "  {:>14} µs  node {:3} (depth {})  {what}",
            r.at.as_micros(),
            r.node.0,
            hops[r.node.index()].unwrap_or(0)
        );
    }
}
