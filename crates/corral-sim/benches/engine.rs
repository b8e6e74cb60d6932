//! Engine throughput and memory per node.
//!
//! - `raw_engine`: the event queue alone — 1,000 pending events, each handled by rescheduling itself at a
//!   random later time (the heap stays at 1,000 entries, as in a busy network).
//! - `coap_multihop`: a 1,000-node random geometric network (400 m × 400 m, 30 m radio range, up to ~10
//!   hops) with a corral-proto `Responder` on every node and a `GroupClient` at the gateway sending CON GETs
//!   to all 999 members, 25 ms apart; 30 s of virtual time per iteration, records off. Events are every MAC,
//!   radio, routing and CoAP-timer event the simulator processes.
//!
//! Both report events/s as criterion's element throughput. Memory per node is measured with a counting
//! global allocator (`stats_alloc`, which keeps `unsafe` out of this crate): live heap bytes after building
//! the network with its CoAP nodes attached, and after running the workload, divided by the node count —
//! printed once before the benchmarks run, together with the simulator's own `footprint()` estimate.

use corral_proto::{Duration, Endpoint, Instant, Node, Rng};
use corral_sim::engine::EventQueue;
use corral_sim::workload::{GroupClient, Pacing, Responder};
use corral_sim::{NodeId, Sim, SimConfig, Topology};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::hint::black_box;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const RAW_EVENTS: u64 = 1_000_000;
const NODES: usize = 1000;

fn raw_engine(events: u64) -> u64 {
    let mut q = EventQueue::<(u32, u32)>::new();
    let mut rng = Rng::new(1);
    for i in 0..1000 {
        q.schedule(Instant::from_micros(rng.below(1000)), (i, 0));
    }
    let mut acc = 0u64;
    for _ in 0..events {
        let Some((t, (id, k))) = q.pop_until(Instant::MAX) else { break };
        acc = acc.wrapping_add(t.as_micros() ^ u64::from(id));
        q.schedule(t + Duration::from_micros(1 + rng.below(1000)), (id, k + 1));
    }
    acc
}

struct Workload {
    sim: Sim,
    client: corral_proto::ServiceHandle,
}

fn build() -> Workload {
    let topo = Topology::random_geometric(NODES, 400.0, 400.0, 30.0, 1).expect("connected");
    let mut cfg = SimConfig::new(1);
    cfg.record = false;
    let mut sim = Sim::from_topology(cfg, &topo);
    for i in 1..NODES as u32 {
        let mut node = Node::new(Endpoint::new(sim.endpoint_config(NodeId(i))));
        node.mount("temp", Responder::new("21.5"));
        sim.attach(NodeId(i), node);
    }
    let targets = (1..NODES as u32).map(|i| sim.addr(NodeId(i))).collect();
    let mut gw = Node::new(Endpoint::new(sim.endpoint_config(NodeId(0))));
    let client = gw.mount("client", GroupClient::new(targets, "temp", Pacing::Interval(Duration::from_millis(25))));
    sim.attach(NodeId(0), gw);
    Workload { sim, client }
}

fn run(w: &mut Workload) -> u64 {
    w.sim.with_service(NodeId(0), w.client, |c: &mut GroupClient, cx| c.start(cx));
    w.sim.run_until(Instant::from_secs(30));
    w.sim.events_processed()
}

fn memory_report() -> u64 {
    let region = Region::new(GLOBAL);
    let mut w = build();
    let built = region.change();
    let live_built = built.bytes_allocated as i64 - built.bytes_deallocated as i64;
    let events = run(&mut w);
    let ran = region.change();
    let live_ran = ran.bytes_allocated as i64 - ran.bytes_deallocated as i64;
    let done = w.sim.service::<GroupClient>(NodeId(0), w.client).map_or(0, GroupClient::successes);
    println!(
        "corral-sim: {NODES} nodes; live heap per node after build {} B, after a 30 s workload {} B \
         (simulator's own footprint {} B/node); workload: {events} events, {done}/999 members answered",
        live_built / NODES as i64,
        live_ran / NODES as i64,
        w.sim.footprint() / NODES,
    );
    events
}

fn benches(c: &mut Criterion) {
    let events = memory_report();

    let mut g = c.benchmark_group("raw_engine");
    g.sample_size(20);
    g.throughput(Throughput::Elements(RAW_EVENTS));
    g.bench_function("1M events, 1000 pending", |b| b.iter(|| black_box(raw_engine(RAW_EVENTS))));
    g.finish();

    let mut g = c.benchmark_group("coap_multihop");
    g.sample_size(10);
    g.measurement_time(std::time::Duration::from_secs(20));
    g.throughput(Throughput::Elements(events));
    g.bench_function("1000 nodes, 999-member group, 30 s", |b| {
        b.iter_batched(build, |mut w| black_box(run(&mut w)), BatchSize::PerIteration)
    });
    g.finish();
}

criterion_group!(engine, benches);
criterion_main!(engine);
