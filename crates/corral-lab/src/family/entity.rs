//! The Entity Manager's queries (seed 000; the default family): the real Entity Manager (corral-group, on a
//! `MemStore`) on each gateway, virtual devices on the members and the lab's client on a wired host. The
//! client creates the entity through the EM's CoAP interface, the interference starts, and the client
//! queries the entity `repetitions` times, measuring each response time from its request to the EM's
//! response — or, on the `follow` axis, follows the entity's average for a window by polling or observing
//! it. Counters of the simulator give the network-side metrics.
//!
//! # What it owns
//! The mapping of an `[entity]` point onto the simulator: the EM's profile documents, the creation, the
//! query phase, the staleness of a followed average. It never reads a clock or draws randomness of its own:
//! a point's rows are a pure function of (setup, point, seed).

use crate::error::RunError;
use crate::harness::{
    attach_client, attach_devices, build_network, coap_uri, node_endpoint, query_row, simulator, start_interference,
    totals, transmission_params, Created, Driver, Exchange, LabClient, PointRun, QueryPhase, Trace,
};
use crate::record::{Facts, PointResult, QueryRow, Staleness};
use crate::scenario::{Common, EntitySetup, Follow};
use corral_group::device::{sample, NotifySteps, Quantity};
use corral_group::profile::{Delay, Ect, Emt, Op, ProfilePatch, Repair};
use corral_group::{EmConfig, EntityManager, MemStore, Snapshot, StoreRunner};
use corral_proto::wire::{Code, ContentFormat, OptionNumber};
use corral_proto::{Duration, Endpoint, Instant, Node, Request};
use corral_sim::{NodeId, Sim};
use std::net::SocketAddr;

/// Runs one point with `seed`; `record` keeps the simulator's records (same numbers either way).
pub fn run(c: &Common, e: &EntitySetup, index: usize, seed: u64, record: bool) -> Result<PointRun, RunError> {
    let net = build_network(&c.network, e.nested)?;
    let mut sim = simulator(c, &net, seed, record);
    let params = transmission_params(&c.transmission);
    let endpoint = |sim: &Sim, i: usize| node_endpoint(sim, i, params);
    let quantity = Quantity::at(&e.resource);
    let steps = match (quantity, e.notify_step) {
        (Some(q), Some(step)) => NotifySteps::default().with(q, step),
        _ => NotifySteps::default(),
    };
    attach_devices(&mut sim, &net, &endpoint, matches!(e.follow, Some(Follow::Observe)).then_some(steps));
    for &g in &net.gateways {
        let cfg = EmConfig {
            local_addrs: vec![sim.addr(NodeId(g as u32))],
            multicast_leisure: Duration::from_millis(c.transmission.leisure_ms),
            ..EmConfig::default()
        };
        let em = EntityManager::new(cfg, Snapshot::default()).map_err(RunError::EntityManager)?;
        let mut node = Node::new(Endpoint::new(endpoint(&sim, g)));
        node.mount("em", em);
        node.set_effect_runner(Box::new(StoreRunner::new(MemStore::new())));
        sim.attach(NodeId(g as u32), node);
    }
    let host = sim.endpoint_config(NodeId(net.host as u32));
    let mut d = attach_client(sim, &net, host);

    // Create the entity (or the children, then the parent) through the EM's CoAP interface.
    let em0 = d.sim.addr(NodeId(net.gateways[0] as u32));
    let resource = e.resource.trim_start_matches('/');
    let t0 = d.sim.now();
    let mut created = true;
    if e.nested {
        let mut children = Vec::new();
        for (g, list) in net.members.iter().enumerate() {
            if list.is_empty() {
                continue;
            }
            let gw = d.sim.addr(NodeId(net.gateways[g] as u32));
            let er: Vec<String> = list.iter().map(|&m| coap_uri(d.sim.addr(NodeId(m as u32)), resource)).collect();
            let name = format!("part{}", g + 1);
            created &= d.create_entity(gw, &name, profile_doc(e, &er, e.delay_ms, false));
            children.push(coap_uri(gw, &format!("em/{name}")));
        }
        created &= d.create_entity(em0, "group", profile_doc(e, &children, Some(e.parent_delay_ms), false));
    } else {
        let er: Vec<String> =
            net.members.iter().flatten().map(|&m| coap_uri(d.sim.addr(NodeId(m as u32)), resource)).collect();
        created &= d.create_entity(em0, "group", profile_doc(e, &er, e.delay_ms, e.multicast));
    }
    let create_ms = (d.sim.now() - t0).as_micros() as f64 / 1000.0;
    d.sim.run_for(Duration::from_secs(1));

    // Interference starts with the query phase.
    let start = d.sim.now();
    start_interference(&mut d.sim, &c.wifi);
    let phase = QueryPhase::start(&d.sim, &net);
    let mut queries = Vec::new();
    let mut staleness = None;
    match (created, e.follow) {
        (false, _) => {}
        (true, Some(f)) => {
            let (rows, updates) = follow(&mut d, e, f, em0, (index, seed, c.network.group), &net.gateways);
            queries = rows;
            let seeds: Vec<u64> = net
                .members
                .iter()
                .flatten()
                .filter_map(|&m| d.sim.node(NodeId(m as u32)).map(|n| n.endpoint().config().seed))
                .collect();
            if let Some(q) = quantity {
                let truth = |t: Instant| seeds.iter().map(|&sd| sample(sd, q, t)).sum::<f64>() / seeds.len() as f64;
                staleness = self::staleness(&updates, truth, start, d.sim.now());
            }
        }
        (true, None) => {
            for rep in 0..e.queries.repetitions {
                let before = totals(&d.sim, &net.gateways);
                let req = Request::get("em/group").with_accept(ContentFormat::JSON);
                let x = d.exchange(em0, req, Duration::from_secs(e.queries.query_limit_s));
                let after = totals(&d.sim, &net.gateways);
                queries.push(query_row((index, seed), rep, c.network.group, &x, false, (before, after)));
                d.sim.run_for(Duration::from_millis(e.queries.pause_ms));
            }
        }
    }
    let (point, links, nodes) =
        phase.finish(&d.sim, &net, (index, seed), Created { created, create_ms }, Facts::Entity { staleness });
    Ok(PointRun {
        result: PointResult { queries, point, links, nodes },
        trace: Some(Trace { sim: d.sim, network: net }),
    })
}

/// The EM's profile of an entity of the members `er` (seed 000's JSON: `er`, `ect`, `eo`, and for unicast
/// `emt` and `delay`), written by corral-group's [`ProfilePatch`].
fn profile_doc(e: &EntitySetup, er: &[String], delay_ms: Option<u64>, multicast: bool) -> Vec<u8> {
    let mut doc = ProfilePatch {
        er: Some(er.to_vec()),
        ect: Some(if multicast { Ect::Multicast } else { Ect::Unicast }),
        eo: Some(vec![Op::Lst, Op::Avg, Op::Min, Op::Max]),
        timeout: e.timeout_ms.map(Some),
        ..ProfilePatch::default()
    };
    if !multicast {
        doc.emt = Some(if e.confirmable { Emt::Con } else { Emt::Non });
        doc.delay = Some(delay_ms.map_or(Delay::Auto, Delay::Millis));
    }
    if multicast && e.repair {
        doc.repair = Some(Repair::Unicast);
    }
    serde_json::to_vec(&doc.to_json()).expect("a JSON value serialises")
}

/// The `follow` axis: the client follows `GET /em/group?eo=avg` for the setup's window, polling or
/// observing, the entity having `members`. Returns a row per exchange (polling) or notification
/// (observing), and every average the client learnt with the time it learnt it.
fn follow(
    d: &mut Driver,
    e: &EntitySetup,
    how: Follow,
    em: SocketAddr,
    (point, seed, members): (usize, u64, usize),
    gateways: &[usize],
) -> (Vec<QueryRow>, Vec<(Instant, f64)>) {
    let ids = (point, seed);
    let req = Request::get("em/group").with_query("eo=avg").with_accept(ContentFormat::JSON);
    let end = d.sim.now() + Duration::from_secs(e.window_s);
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
                let x = d.exchange(em, req.clone(), Duration::from_secs(e.queries.query_limit_s));
                learn(&x);
                rows.push(query_row(ids, rows.len(), members, &x, false, (before, totals(&d.sim, gateways))));
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
                    rows.push(query_row(ids, rows.len(), members, x, true, span));
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

/// |what the client knew − `truth`| at every whole second in (`start`, `end`] after its first update:
/// mean and maximum, rounded to 4 decimals (so that a merged report reads back the same values). `None`
/// when the client learnt nothing.
pub fn staleness(
    updates: &[(Instant, f64)],
    truth: impl Fn(Instant) -> f64,
    start: Instant,
    end: Instant,
) -> Option<Staleness> {
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
    (n > 0).then(|| Staleness { mean: round(sum / n as f64), max: round(max) })
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
        let st = staleness(&updates, truth, s(0), s(10)).expect("learnt something");
        // Seconds 3-4: 0; 5-6: 0.5; 7-10: 0.1 → (0 + 0 + 0.5 + 0.5 + 4 × 0.1) / 8.
        assert_eq!(st.mean, 0.175);
        assert_eq!(st.max, 0.5);
        assert!(staleness(&[], truth, s(0), s(10)).is_none());
    }
}
