//! `[stream]`: seed 003's experiment (§4). A sensor on the wired host streams
//! readings to a collector on the gateway over one link of the given bit rate, delay and loss (the
//! paper's two access points joined at 1 Mb/s, with a random loss event generator), with CoAP-SC or the
//! CoAP over UDP or CoAP over TCP baseline — the same corral-stream services as `corral stream
//! send`/`recv`; over TCP, each node runs corral-sim's TCP stack (smoltcp, with the timers `[stream] tcp`
//! names).
//!
//! Loss: the AP's outage process (`corral_sim::Outages`: a draw every second, the link down for 2.5 s
//! when it hits) or independent loss per datagram. Of the common setup it models the CoAP transmission
//! parameters and the CPU (`[calibration] processing_delay_ms`, `rx_queue`: each received datagram,
//! both nodes).
//!
//! NRP: readings sent again — CoAP over UDP's CON retransmissions plus readings sent anew after a CON gave
//! up; CoAP-SC's readings sent again on request; CoAP over TCP's readings carried again by segments its
//! TCP stack sent again (a segment repeating three readings counts three).
//!
//! Rows: one `queries.csv` row per reading (its generated-to-acknowledged delay as the response time); the
//! point's NRP, TBT and TTD in `points.csv`.

use crate::error::RunError;
use crate::harness::{query_row, totals, Exchange, Network, PointRun, Trace};
use crate::record::{Facts, LinkRow, NodeRole, NodeRow, PointResult, PointRow, QueryRow, StreamFacts};
use crate::scenario::{Common, StreamSpec};
use corral_proto::{Duration, Endpoint, Instant, Node};
use corral_sim::{NodeId, NodeSpec, Outages, Role, Sim, SimConfig, TcpTimers, Topology, WiredSpec};
use corral_stream::{Scheme, StreamConfig, StreamReceiver, StreamSender};

/// Runs one stream; `record` keeps the simulator's records. Of the common setup it models the CoAP
/// transmission parameters and the CPU.
pub fn run(c: &Common, st: &StreamSpec, index: usize, seed: u64, record: bool) -> Result<PointRun, RunError> {
    let mut topo = Topology::new();
    let gw = topo.add(NodeSpec::new(Role::Gateway, None));
    let link = WiredSpec {
        delay: Duration::from_micros((st.delay_ms * 1000.0).round() as u64),
        bandwidth: st.bandwidth_bps,
        loss: if st.loss_model == "independent" { st.loss } else { 0.0 },
        ..WiredSpec::ethernet(0, 0)
    };
    let host = topo.add_wired_host(gw, link);
    let mut cfg = SimConfig::new(seed);
    cfg.record = record;
    cfg.processing_delay = Duration::from_micros((c.cpu.processing_delay_ms * 1000.0).round() as u64);
    cfg.rx_queue = c.cpu.rx_queue;
    cfg.tcp = if st.tcp == "smoltcp" { TcpTimers::default() } else { TcpTimers::linux() };
    let mut sim = Sim::from_topology(cfg, &topo);
    if st.loss_model == "outage" && st.loss > 0.0 {
        let outages = Outages {
            p: st.loss,
            period: Duration::from_millis(st.outage_period_ms),
            duration: Duration::from_millis(st.outage_ms),
        };
        sim.set_wired_outages(NodeId(gw as u32), NodeId(host as u32), outages);
    }
    let receiver_addr = sim.addr(NodeId(gw as u32));
    let scheme = match st.scheme.as_str() {
        "udp" => Scheme::Udp,
        "tcp" => Scheme::Tcp,
        _ => Scheme::Sc,
    };
    let stream = StreamConfig {
        count: st.count,
        size: st.size,
        interval: Duration::from_millis(st.interval_ms),
        buffer: st.buffer,
        ..StreamConfig::new(receiver_addr, scheme)
    };
    let mut r = Node::new(Endpoint::new(sim.endpoint_config(NodeId(gw as u32))));
    // Seed 003's exchange has no Echo round trip, and the simulated network no spoofer.
    r.mount("stream", StreamReceiver::default().without_proof_of_address());
    sim.attach(NodeId(gw as u32), r);
    let mut ec = sim.endpoint_config(NodeId(host as u32));
    ec.params.ack_timeout = Duration::from_millis(c.transmission.ack_timeout_ms);
    ec.params.ack_random_factor = c.transmission.ack_random_factor;
    ec.params.max_retransmit = c.transmission.max_retransmit;
    // The baseline keeps up to `buffer` CON readings outstanding (seed 003 §4).
    ec.params.nstart = st.buffer.min(u32::from(u16::MAX)) as u16;
    let mut sender = Node::new(Endpoint::new(ec));
    let h = sender.mount("control", StreamSender::new(stream));
    sim.attach(NodeId(host as u32), sender);

    let limit = Instant::ZERO
        + Duration::from_millis(st.interval_ms).saturating_mul(u64::from(st.count))
        + Duration::from_secs(900);
    let id = NodeId(host as u32);
    sim.run_until_cond(limit, |sim| sim.service::<StreamSender>(id, h).is_some_and(StreamSender::is_finished));
    let mut m = sim.service::<StreamSender>(id, h).map(|x| x.metrics().clone()).unwrap_or_default();
    if scheme == Scheme::Tcp {
        // CoAP over TCP: the readings the sensor's TCP stack sent again, one per reading a segment carried.
        m.nrp += sim.tcp_retransmitted_messages(id);
    }

    let mut queries: Vec<QueryRow> = Vec::with_capacity(st.count as usize);
    let totals = totals(&sim, &[gw]);
    for (i, d) in m.delays_ms.iter().enumerate() {
        let at = Instant::ZERO;
        let x = Exchange {
            sent: at,
            answered: at + Duration::from_micros((d * 1000.0) as u64),
            code: Some(corral_proto::wire::Code::CHANGED),
            payload: Vec::new(),
        };
        let mut q = query_row((index, seed), i, 1, &x, false, (totals, totals));
        q.replies = 1; // acknowledged: the "member" (the collector) has it
        queries.push(q);
    }
    for i in m.delays_ms.len()..st.count as usize {
        let x = Exchange { sent: Instant::ZERO, answered: Instant::ZERO, code: None, payload: Vec::new() };
        let mut q = query_row((index, seed), i, 1, &x, false, (totals, totals));
        q.response_ms = f64::NAN;
        queries.push(q);
    }
    // To the microsecond, as points.csv writes them: a report merged from shards (read back from the CSV)
    // must equal the whole run's, down to the rounding of a mean.
    let us = |ms: f64| (ms * 1000.0).round() / 1000.0;
    let facts = StreamFacts { nrp: m.nrp, tbt_ms: us(m.tbt_ms), ttd_ms: m.done.then_some(us(m.ttd_ms)) };
    let point = PointRow {
        created: m.done,
        coap_retx: sim.node(id).map_or(0, |n| n.endpoint().stats().retransmissions),
        events: sim.events_processed(),
        window_s: sim.now().as_secs_f64(),
        ..PointRow::new(index, seed, Facts::Stream(facts))
    };
    // The one link, both ways, and its two ends, in datagrams (a wired link has no radio frames).
    let stats = |i: usize| sim.node(NodeId(i as u32)).map(|n| n.endpoint().stats()).unwrap_or_default();
    let (hs, gs) = (stats(host), stats(gw));
    let links = vec![
        LinkRow {
            point: index,
            from: host as u32,
            to: gw as u32,
            frames: hs.transmits,
            retransmissions: hs.retransmissions,
            received: gs.datagrams_in,
        },
        LinkRow {
            point: index,
            from: gw as u32,
            to: host as u32,
            frames: gs.transmits,
            retransmissions: gs.retransmissions,
            received: hs.datagrams_in,
        },
    ];
    let nodes = vec![
        NodeRow {
            point: index,
            node: host as u32,
            role: NodeRole::Sensor,
            hops: 1,
            frames_sent: hs.transmits,
            frames_received: hs.datagrams_in,
            datagrams_forwarded: 0,
        },
        NodeRow {
            point: index,
            node: gw as u32,
            role: NodeRole::Collector,
            hops: 0,
            frames_sent: gs.transmits,
            frames_received: gs.datagrams_in,
            datagrams_forwarded: 0,
        },
    ];
    let network = Network { topology: topo, gateways: vec![gw], members: vec![Vec::new()], host };
    Ok(PointRun { result: PointResult { queries, point, links, nodes }, trace: Some(Trace { sim, network }) })
}
