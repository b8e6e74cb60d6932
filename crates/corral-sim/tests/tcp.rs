//! CoAP over TCP inside the simulator: a real TCP stack (smoltcp) on each node, over a wired link and over
//! a multi-hop IEEE 802.15.4 path, clean and lossy; deterministic for a seed.

use corral_proto::wire::Code;
use corral_proto::{
    Context, Duration, Endpoint, IncomingRequest, Instant, Node, Outcome, Request, RequestId, SendParams, Service,
};
use corral_sim::workload::Responder;
use corral_sim::{NodeId, NodeSpec, Role, Sim, SimConfig, Topology, WiredSpec};

/// Sends `n` GETs over TCP to `dst`, one after the other, and records the outcomes.
struct TcpClient {
    dst: std::net::SocketAddr,
    left: u32,
    ok: u32,
    failed: u32,
    current: Option<RequestId>,
}

impl Service for TcpClient {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        cx.respond(req.id, corral_proto::Response::new(Code::NOT_FOUND));
    }
    fn handle_response(&mut self, cx: &mut Context<'_>, id: RequestId, outcome: Outcome) {
        if self.current != Some(id) {
            return;
        }
        match outcome {
            Outcome::Response { response, .. } if response.code == Code::CONTENT => self.ok += 1,
            _ => self.failed += 1,
        }
        self.current = None;
        self.next(cx);
    }
    fn handle_timeout(&mut self, cx: &mut Context<'_>) {
        if self.current.is_none() {
            self.next(cx);
        }
    }
    fn poll_timeout(&self) -> Option<Instant> {
        (self.current.is_none() && self.left > 0).then_some(Instant::ZERO)
    }
}

impl TcpClient {
    fn next(&mut self, cx: &mut Context<'_>) {
        if self.left == 0 {
            return;
        }
        self.left -= 1;
        let params = SendParams { timeout: Some(Duration::from_secs(120)), ..SendParams::default() };
        self.current = cx.request_tcp(self.dst, Request::get("temp"), params).ok();
    }
}

fn run(topo: &Topology, server: usize, client: usize, seed: u64, n: u32) -> (u32, u32, u64, Instant) {
    let mut sim = Sim::from_topology(SimConfig::new(seed), topo);
    let mut s = Node::new(Endpoint::new(sim.endpoint_config(NodeId(server as u32))));
    s.mount("temp", Responder::new("21.5"));
    sim.attach(NodeId(server as u32), s);
    let dst = sim.addr(NodeId(server as u32));
    let mut c = Node::new(Endpoint::new(sim.endpoint_config(NodeId(client as u32))));
    let h = c.mount("client", TcpClient { dst, left: n, ok: 0, failed: 0, current: None });
    sim.attach(NodeId(client as u32), c);
    let id = NodeId(client as u32);
    sim.run_until_cond(Instant::from_secs(3600), |sim| {
        sim.service::<TcpClient>(id, h).is_some_and(|c| c.left == 0 && c.current.is_none())
    });
    let c = sim.service::<TcpClient>(id, h).unwrap();
    (c.ok, c.failed, sim.tcp_retransmissions(id) + sim.tcp_retransmissions(NodeId(server as u32)), sim.now())
}

fn wired(loss: f64) -> Topology {
    let mut topo = Topology::new();
    let gw = topo.add(NodeSpec::new(Role::Gateway, None));
    topo.add_wired_host(gw, WiredSpec { loss, bandwidth: 1_000_000, ..WiredSpec::ethernet(0, 0) });
    topo
}

#[test]
fn coap_over_tcp_over_a_clean_wired_link() {
    let (ok, failed, retx, _) = run(&wired(0.0), 0, 1, 1, 20);
    assert_eq!((ok, failed, retx), (20, 0, 0));
}

#[test]
fn tcp_recovers_losses_with_retransmissions() {
    let (ok, failed, retx, _) = run(&wired(0.2), 0, 1, 7, 30);
    assert_eq!((ok, failed), (30, 0), "every request answered over TCP at 20 % loss");
    assert!(retx > 0, "losses show up as TCP retransmissions");
}

#[test]
fn coap_over_tcp_across_a_multi_hop_radio_path() {
    let topo = Topology::layered(&[1, 1, 1]);
    let (ok, failed, _, _) = run(&topo, 3, 0, 3, 5);
    assert_eq!((ok, failed), (5, 0));
}

#[test]
fn tcp_runs_are_deterministic() {
    let a = run(&wired(0.1), 0, 1, 11, 15);
    let b = run(&wired(0.1), 0, 1, 11, 15);
    assert_eq!(a, b);
}
