//! Helpers shared by the simulation tests: attach responders and a group client to a simulated network.
#![allow(dead_code)]

use corral_proto::{Endpoint, EndpointConfig, Instant, Node, ServiceHandle};
use corral_sim::workload::{GroupClient, Pacing, Responder};
use corral_sim::{NodeId, Sim};

/// Attaches a `Responder` at `/temp` answering `payload` to each of `ids`.
pub fn responders(sim: &mut Sim, ids: impl IntoIterator<Item = u32>, payload: &[u8]) {
    for i in ids {
        let mut node = Node::new(Endpoint::new(sim.endpoint_config(NodeId(i))));
        node.mount("temp", Responder::new(payload.to_vec()));
        sim.attach(NodeId(i), node);
    }
}

/// Attaches a `GroupClient` at node `at` targeting `/temp` on `targets`; returns its handle.
pub fn client(sim: &mut Sim, at: u32, targets: &[u32], pacing: Pacing) -> ServiceHandle {
    client_with(sim, at, targets, pacing, sim.endpoint_config(NodeId(at)))
}

pub fn client_with(sim: &mut Sim, at: u32, targets: &[u32], pacing: Pacing, cfg: EndpointConfig) -> ServiceHandle {
    let addrs = targets.iter().map(|&t| sim.addr(NodeId(t))).collect();
    let mut node = Node::new(Endpoint::new(cfg));
    let h = node.mount("client", GroupClient::new(addrs, "temp", pacing));
    sim.attach(NodeId(at), node);
    h
}

/// Starts a round and runs until it is done (or `limit`); returns the client's state.
pub fn run_round(sim: &mut Sim, at: u32, h: ServiceHandle, limit: Instant) -> GroupClient {
    sim.with_service(NodeId(at), h, |c: &mut GroupClient, cx| c.start(cx));
    sim.run_until_cond(limit, |s| s.service::<GroupClient>(NodeId(at), h).is_some_and(GroupClient::done));
    sim.service::<GroupClient>(NodeId(at), h).expect("client attached").clone()
}
