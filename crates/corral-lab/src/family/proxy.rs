//! `[proxy]`: simulated forwarders running corral-proxy (the same service as `corral proxy`) with the FIBs
//! the scenario declares, virtual devices on the members, and consumers on the host asking the members'
//! resources through the first forwarder.
//!
//! # What it owns
//! Turning `gateway` / `member:N` names into simulated nodes and addresses, each forwarder's
//! [`ProxyConfig`] for the `forwarding` axis, and one query = `consumers` GETs of one member's resource sent
//! at once (as that many independent applications would), answered when all have ended.

use crate::error::RunError;
use crate::harness::{
    attach_client, attach_devices, build_network, coap_uri, query_row, simulator, start_interference, totals,
    transmission_params, Created, Driver, Exchange, LabClient, Network, PointRun, QueryPhase, Trace,
};
use crate::record::{Facts, PointResult, QueryRow};
use crate::scenario::{Common, Forwarding, ProxySetup};
use corral_proto::wire::{Code, OptionNumber};
use corral_proto::{Duration, Endpoint, EndpointConfig, Node, Request};
use corral_proxy::{Fib, NextHop, ProxyConfig, ProxyService};
use corral_sim::{NodeId, Sim};

/// Runs one point with `seed`; `record` keeps the simulator's records (same numbers either way).
pub fn run(c: &Common, p: &ProxySetup, index: usize, seed: u64, record: bool) -> Result<PointRun, RunError> {
    let net = build_network(&c.network, false)?;
    let mut sim = simulator(c, &net, seed, record);
    let params = transmission_params(&c.transmission);
    let forwarders = forwarder_nodes(p, &net);
    let endpoint = |sim: &Sim, i: usize| {
        let mut cfg = sim.endpoint_config(NodeId(i as u32));
        cfg.params = params;
        if forwarders.contains(&i) {
            cfg.params.nstart = FORWARDER_NSTART;
        }
        cfg
    };
    attach_devices(&mut sim, &net, &endpoint, None);
    for &g in &net.gateways {
        // A forwarder, not the Entity Manager: its proxy is mounted below.
        sim.attach(NodeId(g as u32), Node::new(Endpoint::new(endpoint(&sim, g))));
    }
    let mut host = sim.endpoint_config(NodeId(net.host as u32));
    // The consumers are independent applications: their requests go out together, not one by one.
    host.params.nstart = p.consumers as u16;
    let mut d = attach_client(sim, &net, host);
    mount_forwarders(&mut d, p, &net, &endpoint)?;
    // Nothing to create (the consumers ask the members' resources through the forwarders); the network
    // settles for a second, as the entity family's does after its creation.
    d.sim.run_for(Duration::from_secs(1));

    start_interference(&mut d.sim, &c.wifi);
    let phase = QueryPhase::start(&d.sim, &net);
    let queries = queries(&mut d, p, &net, (index, seed));
    let (point, links, nodes) =
        phase.finish(&d.sim, &net, (index, seed), Created { created: true, create_ms: 0.0 }, Facts::Proxy);
    Ok(PointRun {
        result: PointResult { queries, point, links, nodes },
        trace: Some(Trace { sim: d.sim, network: net }),
    })
}

/// NSTART of a forwarder's endpoint, as `corral proxy`'s default: a forwarder carries many consumers'
/// requests to one member, which NSTART 1 would queue one behind the other.
const FORWARDER_NSTART: u16 = 16;

/// The nodes that run a proxy in this point (none for `direct`).
fn forwarder_nodes(p: &ProxySetup, net: &Network) -> Vec<usize> {
    if p.mode == Forwarding::Direct {
        return Vec::new();
    }
    p.forwarders.iter().map(|n| node_of(n, net)).collect()
}

/// The node a `gateway` / `member:N` name stands for (validated when the scenario loaded).
fn node_of(name: &str, net: &Network) -> usize {
    match name.strip_prefix("member:").and_then(|n| n.parse::<usize>().ok()) {
        Some(n) => net.members.iter().flatten().copied().nth(n).unwrap_or(net.gateways[0]),
        None => net.gateways[0],
    }
}

/// The proxy a forwarder runs for the point's `forwarding` mode.
fn proxy_config(f: &ProxySetup) -> ProxyConfig {
    let (aggregate, cache) = match f.mode {
        Forwarding::Direct | Forwarding::Proxy => (false, 0),
        Forwarding::Aggregate => (true, 0),
        Forwarding::Cache => (true, f.cache_entries),
    };
    ProxyConfig {
        aggregate,
        cache_entries: cache,
        // Hop-wise retransmission with the scenario's CoAP parameters; a query limit bounds it anyway.
        upstream_timeout: None,
        ..ProxyConfig::default()
    }
}

/// The FIB of the forwarder `at`: the scenario's rules held there, next hops resolved to addresses.
fn fib_for(at: &str, f: &ProxySetup, d: &Driver, net: &Network) -> Result<Fib, RunError> {
    let mut fib = Fib::default();
    for r in f.rules.iter().filter(|r| r.at == at) {
        let next = r
            .next
            .iter()
            .map(|n| NextHop::new(d.sim.addr(NodeId(node_of(n, net) as u32)), false, r.send_host))
            .collect();
        fib.push(&r.pattern, next).map_err(|reason| RunError::Rule { at: at.to_string(), reason })?;
    }
    Ok(fib)
}

/// Mounts a proxy on every forwarder (on top of whatever the node runs: a member keeps its sensors).
/// `endpoint` is the node's endpoint configuration for nodes that have no node yet (the gateway).
fn mount_forwarders(
    d: &mut Driver,
    f: &ProxySetup,
    net: &Network,
    endpoint: &dyn Fn(&Sim, usize) -> EndpointConfig,
) -> Result<(), RunError> {
    if f.mode == Forwarding::Direct {
        return Ok(());
    }
    for name in &f.forwarders {
        let id = NodeId(node_of(name, net) as u32);
        let fib = fib_for(name, f, d, net)?;
        let service = ProxyService::new(ProxyConfig { name: name.clone(), ..proxy_config(f) }, fib);
        let attached = d.sim.with_node(id, |_, node| {
            let h = node.mount("proxy", service);
            node.set_forward_proxy(h);
        });
        if attached.is_none() {
            let mut node = Node::new(Endpoint::new(endpoint(&d.sim, id.0 as usize)));
            let fib = fib_for(name, f, d, net)?;
            let h = node.mount("proxy", ProxyService::new(ProxyConfig { name: name.clone(), ..proxy_config(f) }, fib));
            node.set_forward_proxy(h);
            d.sim.attach(id, node);
        }
    }
    Ok(())
}

/// The query phase: per repetition, `consumers` GETs of member (rep mod group)'s resource at once —
/// through the first forwarder, or straight to the member for `direct`.
fn queries(d: &mut Driver, f: &ProxySetup, net: &Network, point: (usize, u64)) -> Vec<QueryRow> {
    let members: Vec<usize> = net.members.iter().flatten().copied().collect();
    let first = d.sim.addr(NodeId(node_of(&f.forwarders[0], net) as u32));
    let resource = f.resource.trim_start_matches('/');
    let mut rows = Vec::new();
    for rep in 0..f.queries.repetitions {
        let member = d.sim.addr(NodeId(members[rep % members.len()] as u32));
        let (dst, request) = match f.mode {
            Forwarding::Direct => (member, Request::get(resource)),
            _ => {
                let mut r = Request::new(Code::GET);
                r.options.push_str(OptionNumber::PROXY_URI, &coap_uri(member, resource));
                (first, r)
            }
        };
        let before = totals(&d.sim, &net.gateways);
        let (host, h) = (d.host, d.client);
        let requests = vec![request; f.consumers];
        d.sim.with_service(host, h, |c: &mut LabClient, cx| c.send_all(cx, dst, requests));
        let limit = Duration::from_secs(f.queries.query_limit_s);
        let deadline = d.sim.now() + limit;
        d.sim.run_until_cond(deadline, |sim| {
            sim.service::<LabClient>(host, h).is_some_and(|c| c.batch_results().is_some())
        });
        let after = totals(&d.sim, &net.gateways);
        let results = d.sim.service::<LabClient>(host, h).and_then(|c| c.batch_results()).unwrap_or(&[]).to_vec();
        let ok = results.iter().filter(|x| x.code.is_some_and(|c| c.is_success())).count();
        // The query's response time is the last consumer's; its code the worst one.
        let last = results.iter().max_by_key(|x| x.answered).cloned();
        let worst = results.iter().map(|x| x.code).max_by_key(|c| c.map_or(u8::MAX, |c| c.0));
        let exchange = match (last, worst) {
            (Some(mut x), Some(code)) if results.len() == f.consumers => {
                x.code = code;
                x
            }
            _ => Exchange { sent: d.sim.now() - limit, answered: d.sim.now(), code: None, payload: vec![] },
        };
        let mut row = query_row(point, rep, f.consumers, &exchange, false, (before, after));
        row.replies = ok;
        rows.push(row);
        d.sim.run_for(Duration::from_millis(f.queries.pause_ms));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{AxisValue, Experiment, Point, Scenario};

    /// ext-proxy with a second forwarder on member 0 and a gateway FIB that sends everything through it.
    fn chained(forwarding: &str, consumers: usize) -> (Common, ProxySetup) {
        let text = crate::scenario::builtin("ext-proxy").unwrap().replace(
            "forwarders = [\"gateway\"]",
            "forwarders = [\"gateway\", \"member:0\"]\n[[proxy.rule]]\nat = \"gateway\"\nmatch = \"/**\"\nnext = [\"member:0\"]",
        );
        let s = Scenario::parse(&text).expect("the chained scenario loads");
        let p = Point {
            index: 0,
            values: vec![
                ("forwarding".into(), AxisValue::Text(forwarding.into())),
                ("consumers".into(), AxisValue::Num(consumers as f64)),
            ],
        };
        let setup = s.setup(&p, true).unwrap();
        let Experiment::Proxy(mut proxy) = setup.experiment else { panic!("ext-proxy is a [proxy] scenario") };
        proxy.queries.repetitions = 6;
        (setup.common, proxy)
    }

    #[test]
    fn a_gateway_fib_sends_requests_through_a_second_forwarder() {
        let (common, proxy) = chained("aggregate", 4);
        let out = run(&common, &proxy, 0, 7, true).unwrap();
        let t = out.trace.expect("a simulated run");
        assert!(out.result.queries.iter().all(|q| q.success()), "{:?}", out.result.queries);
        let gw = t.sim.addr(NodeId(t.network.gateways[0] as u32));
        let m0 = t.sim.addr(NodeId(t.network.members[0][0] as u32));
        let far = t.sim.addr(NodeId(*t.network.members.iter().flatten().last().unwrap() as u32));
        let sent = |from, to| t.sim.datagrams().iter().filter(|d| d.src == from && d.dst == to).count();
        // Every query went gateway -> member 0's proxy; member 0 fetched the far member's reading itself.
        assert_eq!(sent(gw, m0), 6, "one aggregated request per query, to the FIB's next hop");
        assert!(sent(m0, far) >= 1, "member 0 forwarded to the origin");
        assert_eq!(sent(gw, far), 0, "the gateway never went to the origin itself");
    }

    #[test]
    fn aggregation_and_the_cache_save_radio_frames() {
        let frames = |mode: &str| {
            let (common, mut proxy) = chained(mode, 8);
            proxy.rules.clear();
            proxy.forwarders.truncate(1);
            proxy.queries.repetitions = 12; // each member twice: the second round can come from the cache
            let r = run(&common, &proxy, 0, 3, false).unwrap().result;
            assert!(r.queries.iter().all(|q| q.success()), "{mode}: {:?}", r.queries);
            r.queries.iter().map(|q| q.frames).sum::<u64>()
        };
        let (plain, aggregated, cached) = (frames("proxy"), frames("aggregate"), frames("cache"));
        assert!(aggregated * 4 < plain, "aggregation: {aggregated} vs {plain} frames");
        assert!(cached < aggregated, "the cache: {cached} vs {aggregated} frames");
    }
}
