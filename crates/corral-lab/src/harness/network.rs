//! The radio networks of the testbed scenarios: one network per gateway, each on its own channel, the
//! gateways wired to each other and to the client's host; the simulator built on them, the members'
//! virtual devices, the client, and the Wi-Fi interference of the query phase.

use super::{Driver, LabClient};
use crate::error::RunError;
use crate::scenario::{Common, LinkSpec, NetworkSetup, TopologyKind, Transmission, Wifi};
use corral_group::device::{mount_device, DeviceConfig, NotifySteps};
use corral_proto::{Duration, Endpoint, EndpointConfig, Node, TransmissionParams};
use corral_sim::{Interferer, LinkModel, NodeId, NodeSpec, Reach, Role, Sim, SimConfig, Topology, WiredSpec};

/// The network of a point: the topology, the gateway indices, the members of each gateway and the host.
pub struct Network {
    pub topology: Topology,
    pub gateways: Vec<usize>,
    pub members: Vec<Vec<usize>>,
    pub host: usize,
}

/// corral-sim's loss model of a `[network] link`.
pub fn link_model(l: LinkSpec) -> LinkModel {
    match l {
        LinkSpec::Perfect => LinkModel::Perfect,
        LinkSpec::Bernoulli { p } => LinkModel::Bernoulli { p },
        LinkSpec::Gilbert { mean_loss, burst, loss_bad } => LinkModel::bursty(mean_loss, burst, loss_bad),
        LinkSpec::Snr { snr_db } => LinkModel::Snr { snr_db },
    }
}

fn sub_topology(n: &NetworkSetup, k: usize, gw: usize) -> Result<Topology, RunError> {
    Ok(match n.topology {
        TopologyKind::Star => Topology::star(k),
        TopologyKind::Table7 => table7_like(k),
        TopologyKind::Layered if n.layers.iter().sum::<usize>() == k => Topology::layered(&n.layers),
        TopologyKind::Layered => Topology::testbed_table7(k),
        TopologyKind::Floor => {
            let f = n.floor;
            Topology::random_geometric(k + 1, f.width, f.height, f.radius, f.seed.wrapping_add(gw as u64))
                .ok_or(RunError::Placement { nodes: k, width: f.width, height: f.height, radius: f.radius })?
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

/// Builds the network of a point (see [`Network`]): the members split evenly over the gateways when
/// `split` (one child entity per gateway), else all on the first.
pub fn build_network(n: &NetworkSetup, split: bool) -> Result<Network, RunError> {
    let mut topo = Topology::new();
    topo.default_link = link_model(n.link);
    let mut gateways = Vec::new();
    let mut members = Vec::new();
    let split = if split { n.gateways } else { 1 };
    for g in 0..n.gateways {
        let k = if g < split { n.group / split + usize::from(g < n.group % split) } else { 0 };
        let sub = if k == 0 {
            let mut t = Topology::new();
            t.add(NodeSpec::new(Role::Gateway, None));
            t
        } else {
            sub_topology(n, k, g)?
        };
        let offset = topo.nodes.len();
        let adj = sub.adjacency();
        let mut mine = Vec::new();
        for (i, spec) in sub.nodes.iter().enumerate() {
            let mut spec = spec.clone();
            spec.channel = Some(n.channels[g]);
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
    let delay = Duration::from_micros((n.wired_delay_ms * 1000.0).round() as u64);
    for &g in &gateways[1..] {
        topo.wire(WiredSpec { delay, ..WiredSpec::ethernet(gateways[0], g) });
    }
    let host = topo.add_wired_host(gateways[0], WiredSpec { delay, ..WiredSpec::ethernet(0, 0) });
    Ok(Network { topology: topo, gateways, members, host })
}

/// The simulator of a network with the point's CPU model, its records kept if `record`.
pub fn simulator(c: &Common, net: &Network, seed: u64, record: bool) -> Sim {
    let mut cfg = SimConfig::new(seed);
    cfg.record = record;
    cfg.processing_delay = Duration::from_micros((c.cpu.processing_delay_ms * 1000.0).round() as u64);
    cfg.rx_queue = c.cpu.rx_queue;
    Sim::from_topology(cfg, &net.topology)
}

/// The CoAP transmission parameters of `[transmission]` (the rest RFC 7252's defaults).
pub fn transmission_params(t: &Transmission) -> TransmissionParams {
    TransmissionParams {
        ack_timeout: Duration::from_millis(t.ack_timeout_ms),
        ack_random_factor: t.ack_random_factor,
        max_retransmit: t.max_retransmit,
        default_leisure: Duration::from_millis(t.leisure_ms),
        ..TransmissionParams::default()
    }
}

/// The endpoint configuration of node `i`: seeded by the simulator for it, with the point's transmission
/// parameters `params`.
pub fn node_endpoint(sim: &Sim, i: usize, params: TransmissionParams) -> EndpointConfig {
    let mut cfg = sim.endpoint_config(NodeId(i as u32));
    cfg.params = params;
    cfg
}

/// A virtual device (corral-group's `mount_device`: `/s/t`, `/mc`, …) on every member, with the endpoint
/// configuration `endpoint` gives; with `observable` steps, sensors notify observers when a reading moved
/// by its step.
pub fn attach_devices(
    sim: &mut Sim,
    net: &Network,
    endpoint: &dyn Fn(&Sim, usize) -> EndpointConfig,
    observable: Option<NotifySteps>,
) {
    for list in &net.members {
        for &m in list {
            let mut node = Node::new(Endpoint::new(endpoint(sim, m)));
            let dc = DeviceConfig {
                mc_slots: Some(4),
                observable: observable.is_some(),
                notify_steps: observable.unwrap_or_default(),
                ..DeviceConfig::default()
            };
            mount_device(&mut node, dc);
            sim.attach(NodeId(m as u32), node);
        }
    }
}

/// Mounts the lab's client on the host with the endpoint configuration `host`, and drives from there.
pub fn attach_client(mut sim: Sim, net: &Network, host: EndpointConfig) -> Driver {
    let mut client_node = Node::new(Endpoint::new(host));
    let client = client_node.mount("client", LabClient::new());
    sim.attach(NodeId(net.host as u32), client_node);
    Driver { sim, host: NodeId(net.host as u32), client }
}

/// Starts the Wi-Fi interference now (the query phase): its load schedule counts from this moment. A link
/// that never carries load is not added at all.
pub fn start_interference(sim: &mut Sim, wifi: &Wifi) {
    if wifi.schedule.iter().any(|(_, m)| *m > 0.0) {
        let start = sim.now();
        let mut w = Interferer::constant(wifi.channel, 0.0);
        w.load = wifi
            .schedule
            .iter()
            .map(|&(at, mbps)| (start + Duration::from_micros((at.max(0.0) * 1e6) as u64), mbps))
            .collect();
        w.cca_busy_prob = wifi.cca_busy_prob;
        w.corruption_prob = wifi.corruption_prob;
        w.reach = Reach::All;
        sim.add_interferer(w);
    }
}
