//! A 10,000-node building in memory: events/s, memory per node and wall time of one run.
//!
//! The building has 10 floors of 1,000 nodes. Each floor is a 200 m × 100 m random geometric network
//! (12 m radio range, about 20 neighbours a node, up to ~10 hops) with its border router at the centre;
//! floors are out of each other's radio range (a concrete slab and distance), so each is its own RPL tree
//! and collision domain, as a building deployed with one border router per floor is. Every device serves
//! a corral-proto `Responder` (a sensor reading); every border router runs a `GroupClient`, the Entity
//! Manager's collection pattern (seed 000): a CON GET to each of its floor's 999 devices, 25 ms apart, a
//! new round every 30 s, so the building carries 400 requests/s through up to ten hops of CSMA/CA,
//! fragmentation-free 802.15.4, for as long as the run lasts.
//!
//! Not criterion: one run is one measurement (300 s of virtual time, ten rounds, about 100,000 requests).
//! It prints the events processed, wall time and events/s, and the live heap per node (a counting global
//! allocator, `stats_alloc`) after building the network and after the run, with the simulator's own
//! footprint estimate. `cargo bench -p corral-sim --bench building [-- FLOORS NODES_PER_FLOOR SECONDS]`.

use corral_proto::{Duration, Endpoint, Instant, Node, ServiceHandle};
use corral_sim::workload::{GroupClient, Pacing, Responder};
use corral_sim::{Neighbors, NodeId, NodeSpec, Sim, SimConfig, Topology};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const FLOOR_W: f64 = 200.0;
const FLOOR_H: f64 = 100.0;
const RADIUS: f64 = 12.0;
/// Between floors laid out side by side: more than the radio range, so floors never hear each other.
const GAP: f64 = 4.0 * RADIUS;
/// A border router starts a new collection round this often.
const ROUND_SECS: u64 = 30;

/// The building: floor `f`'s nodes are `f * per_floor ..`, its border router first.
fn building(floors: usize, per_floor: usize) -> Topology {
    let mut t = Topology::new();
    t.neighbors = Neighbors::Radius(RADIUS);
    for f in 0..floors {
        let floor = Topology::random_geometric(per_floor, FLOOR_W, FLOOR_H, RADIUS, 0xb11d + f as u64)
            .expect("a floor at this density is connected within 1000 draws");
        let dx = f as f64 * (FLOOR_W + GAP);
        for spec in floor.nodes {
            let (x, y) = spec.position.expect("random_geometric places every node");
            t.add(NodeSpec::new(spec.role, spec.channel).at(x + dx, y));
        }
    }
    t
}

fn live(region: &Region<'_, System>) -> i64 {
    let c = region.change();
    c.bytes_allocated as i64 - c.bytes_deallocated as i64
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let floors = args.first().copied().unwrap_or(10);
    let per_floor = args.get(1).copied().unwrap_or(1000);
    let seconds = args.get(2).copied().unwrap_or(300) as u64;
    let n = floors * per_floor;

    let wall = std::time::Instant::now();
    let region = Region::new(GLOBAL);
    let topo = building(floors, per_floor);
    let hops = topo.hop_counts();
    let max_hops = hops.iter().flatten().max().copied().unwrap_or(0);
    let mean_hops = hops.iter().flatten().map(|&h| f64::from(h)).sum::<f64>() / n as f64;
    let mut cfg = SimConfig::new(1);
    cfg.record = false;
    let mut sim = Sim::from_topology(cfg, &topo);
    drop(topo);
    let mut clients: Vec<(NodeId, ServiceHandle)> = Vec::new();
    for f in 0..floors {
        let gw = f * per_floor;
        for i in gw + 1..gw + per_floor {
            let mut node = Node::new(Endpoint::new(sim.endpoint_config(NodeId(i as u32))));
            node.mount("temp", Responder::new("21.5"));
            sim.attach(NodeId(i as u32), node);
        }
        let targets = (gw + 1..gw + per_floor).map(|i| sim.addr(NodeId(i as u32))).collect();
        let id = NodeId(gw as u32);
        let mut node = Node::new(Endpoint::new(sim.endpoint_config(id)));
        let h = node.mount("client", GroupClient::new(targets, "temp", Pacing::Interval(Duration::from_millis(25))));
        sim.attach(id, node);
        clients.push((id, h));
    }
    let built_bytes = live(&region);
    let build_wall = wall.elapsed();

    let run_start = std::time::Instant::now();
    let (mut answered, mut asked, mut round_start) = (0usize, 0usize, 0u64);
    while round_start < seconds {
        for &(id, h) in &clients {
            sim.with_service(id, h, |c: &mut GroupClient, cx| c.start(cx));
        }
        let round_end = (round_start + ROUND_SECS).min(seconds);
        sim.run_until(Instant::from_secs(round_end));
        // A round's requests still outstanding at its end are cancelled by the next `start` (or the run
        // ends): they count as unanswered.
        answered += clients
            .iter()
            .map(|&(id, h)| sim.service::<GroupClient>(id, h).map_or(0, GroupClient::successes))
            .sum::<usize>();
        asked += floors * (per_floor - 1);
        round_start = round_end;
    }
    let run_wall = run_start.elapsed();
    let ran_bytes = live(&region);
    let events = sim.events_processed();

    println!(
        "corral-sim building: {floors} floors x {per_floor} nodes = {n} nodes, hops max {max_hops} mean {mean_hops:.1}"
    );
    println!(
        "  build: {:.2} s wall; live heap {} B/node (simulator footprint {} B/node)",
        build_wall.as_secs_f64(),
        built_bytes / n as i64,
        sim.footprint() / n
    );
    println!(
        "  run:   {seconds} s virtual in {:.2} s wall ({:.1}x real time); {events} events, {:.0} events/s",
        run_wall.as_secs_f64(),
        seconds as f64 / run_wall.as_secs_f64(),
        events as f64 / run_wall.as_secs_f64()
    );
    println!(
        "  after: live heap {} B/node; {answered} of {asked} requests answered within their round",
        ran_bytes / n as i64,
    );
}
