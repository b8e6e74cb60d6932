//! Devices joining and leaving a floor (issue 32): the real Entity Manager and corral-rd's Resource
//! Directory on the gateway — one node, as `corral gateway --rd` runs them, so the EM's lookups and the
//! directory's notifications go over loopback and the radio carries only what a deployment's radio
//! carries — and corral-rd's `Registrant` on every device, registering its links with the point's
//! lifetime, refreshing and (on a clean departure) removing itself over the simulated radio. The client
//! creates two entities of the same devices' sensor: `follow`, whose members follow the directory
//! (`fromRd`), and `fixed`, whose members are the devices present when the experiment began (the list a
//! person typed). Then devices come and go by a seeded schedule while the client queries both entities
//! every `query_period_s`; every second the run compares each entity's members with the devices present.
//!
//! A family of its own rather than an axis of `[entity]`: it needs a directory, devices that arrive and
//! leave mid-run, two entities queried side by side and measures of membership over time, none of which
//! the `[entity]` runner's create-then-query flow has.
//!
//! # What it owns
//! The churn schedule (a pure function of the setup's schedule seed, so every point of a replicate sees
//! the same arrivals and departures), the devices' presence on the radio, the sampling of membership,
//! and the split of the radio's frames into the directory's and the queries'. It never reads a clock or
//! draws randomness that does not follow from the point's seed and the schedule seed.

use crate::error::RunError;
use crate::harness::{
    attach_client, build_network, coap_uri, link_model, node_endpoint, simulator, transmission_params, Created,
    Exchange, LabClient, PointRun, QueryPhase, Trace,
};
use crate::record::{ChurnFacts, Facts, PointResult, QueryRow};
use crate::scenario::{ChurnSetup, Common, Vanish};
use corral_group::device::{mount_device, DeviceConfig};
use corral_group::profile::{Delay, Ect, Emt, Op, ProfilePatch};
use corral_group::uri::MemberUri;
use corral_group::{EmConfig, EntityManager, MemStore, Snapshot, StoreRunner};
use corral_proto::wire::ContentFormat;
use corral_proto::{Duration, Endpoint, Instant, Node, Request, Rng, ServiceHandle};
use corral_rd::{Limits, RdService, Registrant};
use corral_sim::{LinkModel, NodeId, RecordKind, Role, Sim};
use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, SocketAddr};

/// How long a device that leaves cleanly keeps its radio after asking for its removal: the DELETE (and
/// the directory's Echo round trip) has time for CoAP's retransmissions.
const CLEAN_GRACE: Duration = Duration::from_secs(20);

/// The two entities, in the order the facts name them.
const ENTITIES: [&str; 2] = ["follow", "fixed"];

/// One device's part in the schedule: when it arrives (ms after the start; `None`: there from the start)
/// and when it leaves, cleanly or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub arrive_ms: Option<u64>,
    pub depart: Option<(u64, bool)>,
}

/// The churn of `n` devices over the setup's window, from its schedule seed alone: a share `present` is
/// there from the start, the others arrive uniformly in the first three quarters of the window; a share
/// `departures` of all devices leaves at a uniform time from 5 % of the window after its arrival to 95 %
/// of the window, the first share `clean` of them with a DELETE.
pub fn schedule(ch: &ChurnSetup, n: usize) -> Vec<Plan> {
    let w = ch.window_s * 1000;
    let mut rng = Rng::stream(ch.schedule_seed, 0xc4_0001);
    let shuffled = |rng: &mut Rng| {
        let mut order: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        order
    };
    let count = |share: f64, of: usize| ((share * of as f64).round() as usize).min(of);
    let mut plans = vec![Plan { arrive_ms: None, depart: None }; n];
    for &i in shuffled(&mut rng).iter().skip(count(ch.present, n)) {
        plans[i].arrive_ms = Some(w / 50 + rng.below((w * 3 / 4 - w / 50).max(1)));
    }
    let leaving = count(ch.departures, n);
    let clean = count(ch.clean, leaving);
    for (k, &i) in shuffled(&mut rng).iter().take(leaving).enumerate() {
        let lo = plans[i].arrive_ms.unwrap_or(0) + w / 20;
        let hi = w * 19 / 20;
        plans[i].depart = Some((lo + rng.below(hi.saturating_sub(lo).max(1)), k < clean));
    }
    plans
}

/// The IP address of a member URI.
fn member_ip(uri: &str) -> Option<IpAddr> {
    match corral_group::uri::parse(uri).ok()? {
        MemberUri::Coap { addr, .. } => Some(addr.ip()),
        MemberUri::Relative { .. } => None,
    }
}

/// The resource type a directory lookup asks for the sensor at `resource`.
fn resource_type(resource: &str) -> &'static str {
    match resource.trim_matches('/') {
        "s/h" => "humidity",
        "s/l" => "light",
        _ => "temperature",
    }
}

/// Runs one point with `seed` (its records are always kept: the frames are split by message from them).
pub fn run(c: &Common, ch: &ChurnSetup, index: usize, seed: u64) -> Result<PointRun, RunError> {
    let net = build_network(&c.network, false)?;
    let mut sim = simulator(c, &net, seed, true);
    let params = transmission_params(&c.transmission);
    let endpoint = |sim: &Sim, i: usize| node_endpoint(sim, i, params);
    let gw = NodeId(net.gateways[0] as u32);
    let gw_addr = sim.addr(gw);
    let cfg = EmConfig {
        local_addrs: vec![gw_addr],
        multicast_leisure: Duration::from_millis(c.transmission.leisure_ms),
        rd: Some(gw_addr),
        ..EmConfig::default()
    };
    let em = EntityManager::new(cfg, Snapshot::default()).map_err(RunError::EntityManager)?;
    let mut node = Node::new(Endpoint::new(endpoint(&sim, gw.index())));
    let em_h = node.mount("em", em);
    node.set_effect_runner(Box::new(StoreRunner::new(MemStore::new())));
    node.mount("", RdService::new(Limits::default())); // /rd, /rd-lookup/*; the EM keeps /em
    sim.attach(gw, node);

    // The devices: all on the air's topology, the absent ones silent and unregistered until they arrive.
    let devices: Vec<NodeId> = net.members[0].iter().map(|&m| NodeId(m as u32)).collect();
    let plans = schedule(ch, devices.len());
    let by_ip: HashMap<IpAddr, usize> = devices.iter().enumerate().map(|(i, &d)| (sim.addr(d).ip(), i)).collect();
    let mut registrants: Vec<Option<ServiceHandle>> = vec![None; devices.len()];
    let mut present: BTreeSet<usize> = BTreeSet::new();
    for (i, &d) in devices.iter().enumerate() {
        let mut node = Node::new(Endpoint::new(endpoint(&sim, d.index())));
        mount_device(&mut node, DeviceConfig { mc_slots: Some(4), ..DeviceConfig::default() });
        sim.attach(d, node);
        if plans[i].arrive_ms.is_none() {
            present.insert(i);
            registrants[i] = Some(register(&mut sim, d, i, gw_addr, ch.lifetime_s));
        } else {
            sim.set_link_model(gw, d, LinkModel::Bernoulli { p: 1.0 });
        }
    }
    let host = sim.endpoint_config(NodeId(net.host as u32));
    let mut drv = attach_client(sim, &net, host);
    let (host, client) = (drv.host, drv.client);

    // The devices there register; then the client creates both entities.
    drv.sim.run_for(Duration::from_secs(15));
    let t_create = drv.sim.now();
    let resource = ch.resource.trim_start_matches('/');
    let typed: Vec<String> = present.iter().map(|&i| coap_uri(drv.sim.addr(devices[i]), resource)).collect();
    let fixed = profile(ch, Some(typed), None);
    let follow = profile(ch, None, Some(format!("rt={}", resource_type(resource))));
    let created = drv.create_entity(gw_addr, "fixed", fixed) & drv.create_entity(gw_addr, "follow", follow);
    let create_ms = (drv.sim.now() - t_create).as_micros() as f64 / 1000.0;
    drv.sim.run_for(Duration::from_secs(5));

    let t0 = drv.sim.now();
    let phase = QueryPhase::start(&drv.sim, &net);
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    // Events in time order: (ms after t0, order within the same instant, what).
    let mut events: Vec<(u64, u8, Ev)> = Vec::new();
    for (i, p) in plans.iter().enumerate() {
        if let Some(a) = p.arrive_ms {
            events.push((a, 0, Ev::Arrive(i)));
        }
        if let Some((d, clean)) = p.depart {
            events.push((d, 1, Ev::Depart(i, clean)));
            if clean {
                events.push((d + CLEAN_GRACE.as_millis(), 2, Ev::Silence(i)));
            }
        }
    }
    let w = ch.window_s;
    events.extend((1..=w).map(|s| (s * 1000, 3, Ev::Sample)));
    events.extend((0..w / ch.query_period_s).map(|k| (k * ch.query_period_s * 1000 + 500, 4, Ev::Query)));
    events.sort_by_key(|(t, o, _)| (*t, *o));

    let mut m = Membership::new(devices.len());
    // The devices present when the last round of queries left, and every answer with those devices.
    let mut asked: Option<BTreeSet<usize>> = None;
    let mut answers: Vec<(BTreeSet<usize>, Exchange)> = Vec::new();
    for (t, _, ev) in events {
        drv.sim.run_until(at(t));
        let d = |i: usize| devices[i];
        match ev {
            Ev::Arrive(i) => {
                drv.sim.set_link_model(gw, d(i), link_model(c.network.link));
                registrants[i] = Some(register(&mut drv.sim, d(i), i, gw_addr, ch.lifetime_s));
                present.insert(i);
                m.arrived[i] = Some(t);
            }
            Ev::Depart(i, clean) => {
                present.remove(&i);
                m.left[i] = Some((t, clean));
                match (clean, ch.vanish, registrants[i]) {
                    (true, _, Some(h)) => {
                        drv.sim.with_service(d(i), h, |r: &mut Registrant, cx| r.leave(cx));
                    }
                    (false, Vanish::Mute, _) => {
                        // Only the directory client is left on the device: it keeps refreshing.
                        let mut cfg = node_endpoint(&drv.sim, d(i).index(), params);
                        cfg.seed ^= 0x6d75_7465;
                        let mut node = Node::new(Endpoint::new(cfg));
                        let lt = ch.lifetime_s;
                        node.mount(
                            "_rd",
                            Registrant::new(gw_addr, &format!("dev{i}"), None, lt, links_of(&drv.sim, d(i))),
                        );
                        drv.sim.attach(d(i), node);
                    }
                    _ => drv.sim.set_link_model(gw, d(i), LinkModel::Bernoulli { p: 1.0 }),
                }
            }
            Ev::Silence(i) => drv.sim.set_link_model(gw, d(i), LinkModel::Bernoulli { p: 1.0 }),
            Ev::Sample => {
                let em = drv.sim.service::<EntityManager>(gw, em_h);
                let members = |name: &str| -> BTreeSet<usize> {
                    em.and_then(|e| e.entity(name))
                        .map(|e| e.profile.er.iter().filter_map(|u| by_ip.get(&member_ip(u)?).copied()).collect())
                        .unwrap_or_default()
                };
                m.sample(t, &present, &members("follow"), &members("fixed"));
            }
            Ev::Query => {
                // Both entities at once, as two applications would; the previous round ended long ago.
                harvest(&drv.sim, (host, client), &mut asked, &mut answers);
                let reqs = ENTITIES
                    .iter()
                    .map(|e| Request::get(&format!("em/{e}")).with_accept(ContentFormat::JSON))
                    .collect();
                drv.sim.with_service(host, client, |c: &mut LabClient, cx| c.send_all(cx, gw_addr, reqs));
                asked = Some(present.clone());
            }
        }
    }
    // Answers still on their way get the entities' timeout and a little more.
    drv.sim.run_for(Duration::from_millis(ch.timeout_ms) + Duration::from_secs(5));
    harvest(&drv.sim, (host, client), &mut asked, &mut answers);

    let mut facts = m.facts(ch, w * 1000);
    facts.queries = w / ch.query_period_s;
    for (was, x) in &answers {
        // A 5.04 after the entity's timeout still carries the values that came; the answer names its
        // entity.
        let Some((entity, got)) = answered(&x.payload, &by_ip, was) else { continue };
        let (full, partial) = match entity.as_str() {
            "follow" => (&mut facts.follow_full, &mut facts.follow_partial),
            _ => (&mut facts.fixed_full, &mut facts.fixed_partial),
        };
        if !was.is_empty() && got == was.len() {
            *full += 1;
        } else if got > 0 {
            *partial += 1;
        }
    }
    split_frames(&drv.sim, t0, &mut facts);
    let queries = query_rows(&drv.sim, gw, (index, seed), &answers, &by_ip);
    let (point, links, nodes) =
        phase.finish(&drv.sim, &net, (index, seed), Created { created, create_ms }, Facts::Churn(facts));
    Ok(PointRun {
        result: PointResult { queries, point, links, nodes },
        trace: Some(Trace { sim: drv.sim, network: net }),
    })
}

/// What happens at an instant of the run.
#[derive(Debug, Clone, Copy)]
enum Ev {
    Arrive(usize),
    /// A device leaves (`true`: it removes its registration first).
    Depart(usize, bool),
    /// A device that left cleanly switches its radio off.
    Silence(usize),
    Sample,
    Query,
}

/// The device's links as its registration sends them.
fn links_of(sim: &Sim, d: NodeId) -> String {
    sim.node(d).map(|n| corral_proto::render_links(&n.links(), None)).unwrap_or_default()
}

/// Mounts a registrant on device `d` (endpoint `dev{i}`), which registers at once.
fn register(sim: &mut Sim, d: NodeId, i: usize, rd: SocketAddr, lt: u32) -> ServiceHandle {
    let links = links_of(sim, d);
    let h = sim.with_node(d, |_, n| n.mount("_rd", Registrant::new(rd, &format!("dev{i}"), None, lt, links)));
    h.unwrap_or_else(|| unreachable!("device {i} is attached"))
}

/// An entity's profile: `er` typed in, or `from_rd` followed; unicast CON, no delay, the setup's timeout.
fn profile(ch: &ChurnSetup, er: Option<Vec<String>>, from_rd: Option<String>) -> Vec<u8> {
    let doc = ProfilePatch {
        er,
        from_rd,
        ect: Some(Ect::Unicast),
        emt: Some(Emt::Con),
        delay: Some(Delay::Millis(0)),
        eo: Some(vec![Op::Lst, Op::Avg, Op::Min, Op::Max]),
        timeout: Some(Some(ch.timeout_ms)),
        ..ProfilePatch::default()
    };
    serde_json::to_vec(&doc.to_json()).unwrap_or_default()
}

/// Takes the last round's answers, once both ended, with the devices present when it left.
fn harvest(
    sim: &Sim,
    (host, client): (NodeId, ServiceHandle),
    asked: &mut Option<BTreeSet<usize>>,
    answers: &mut Vec<(BTreeSet<usize>, Exchange)>,
) {
    let done = sim.service::<LabClient>(host, client).and_then(|c| c.batch_results());
    if let (Some(was), Some(xs)) = (asked.as_ref(), done) {
        answers.extend(xs.iter().map(|x| (was.clone(), x.clone())));
        *asked = None;
    }
}

/// The entity an EM answer names and how many devices of `present` it has a value of (JSON `values`,
/// each naming its member `m`); `None` for an answer without a JSON body naming its entity.
fn answered(payload: &[u8], by_ip: &HashMap<IpAddr, usize>, present: &BTreeSet<usize>) -> Option<(String, usize)> {
    let doc = serde_json::from_slice::<serde_json::Value>(payload).ok()?;
    let entity = doc.get("entity")?.as_str()?.to_string();
    let Some(values) = doc.get("values").and_then(|v| v.as_array()) else { return Some((entity, 0)) };
    let got: BTreeSet<usize> = values
        .iter()
        .filter_map(|v| by_ip.get(&member_ip(v.get("m")?.as_str()?)?).copied())
        .filter(|i| present.contains(i))
        .collect();
    Some((entity, got.len()))
}

/// Membership over time: each second, each entity's members against the devices present.
struct Membership {
    arrived: Vec<Option<u64>>,
    left: Vec<Option<(u64, bool)>>,
    /// When the following entity first listed a device after its arrival, and first lacked it after its
    /// departure (ms after the start).
    joined: Vec<Option<u64>>,
    removed: Vec<Option<u64>>,
    /// Member-seconds: the following entity's stale and missing, the fixed entity's.
    sums: [u64; 4],
}

impl Membership {
    fn new(n: usize) -> Membership {
        Membership {
            arrived: vec![None; n],
            left: vec![None; n],
            joined: vec![None; n],
            removed: vec![None; n],
            sums: [0; 4],
        }
    }

    fn sample(&mut self, t: u64, present: &BTreeSet<usize>, follow: &BTreeSet<usize>, fixed: &BTreeSet<usize>) {
        self.sums[0] += follow.difference(present).count() as u64;
        self.sums[1] += present.difference(follow).count() as u64;
        self.sums[2] += fixed.difference(present).count() as u64;
        self.sums[3] += present.difference(fixed).count() as u64;
        for i in 0..self.arrived.len() {
            if self.arrived[i].is_some() && self.joined[i].is_none() && follow.contains(&i) {
                self.joined[i] = Some(t);
            }
            if self.left[i].is_some() && self.removed[i].is_none() && !follow.contains(&i) {
                self.removed[i] = Some(t);
            }
        }
    }

    /// The facts of membership; `end` is the window's length, ms.
    fn facts(&self, ch: &ChurnSetup, end: u64) -> ChurnFacts {
        let s = |ms: u64| ms as f64 / 1000.0;
        let joins: Vec<f64> =
            (0..self.arrived.len()).filter_map(|i| Some(s(self.joined[i]? - self.arrived[i]?))).collect();
        let leave = |clean: bool| -> Vec<f64> {
            (0..self.left.len())
                .filter_map(|i| match (self.left[i], self.removed[i]) {
                    (Some((d, c)), Some(r)) if c == clean => Some(s(r - d)),
                    _ => None,
                })
                .collect()
        };
        let max = |v: &[f64]| v.iter().copied().fold(f64::NAN, f64::max);
        let due = Duration::from_secs(u64::from(ch.lifetime_s)).mul_f64(1.1).as_millis() + 30_000;
        let unremoved = (0..self.left.len())
            .filter(|&i| matches!(self.left[i], Some((d, false)) if d + due < end) && self.removed[i].is_none())
            .count();
        ChurnFacts {
            lifetime_s: f64::from(ch.lifetime_s),
            follow_stale_s: self.sums[0] as f64,
            follow_missing_s: self.sums[1] as f64,
            fixed_stale_s: self.sums[2] as f64,
            fixed_missing_s: self.sums[3] as f64,
            join_mean_s: if joins.is_empty() { f64::NAN } else { joins.iter().sum::<f64>() / joins.len() as f64 },
            join_max_s: max(&joins),
            clean_leave_max_s: max(&leave(true)),
            vanish_leave_max_s: max(&leave(false)),
            vanish_unremoved: unremoved as u64,
            ..ChurnFacts::empty()
        }
    }
}

/// A row of `queries.csv` per answer of either entity, in the order they came: `members` is the devices
/// present when it left, `replies` how many of them it has a value of; the frames (MAC retries included)
/// are every node's while it was out, and the CoAP retransmissions the gateway's, from the records.
fn query_rows(
    sim: &Sim,
    gw: NodeId,
    (point, seed): (usize, u64),
    answers: &[(BTreeSet<usize>, Exchange)],
    by_ip: &HashMap<IpAddr, usize>,
) -> Vec<QueryRow> {
    let frames: Vec<(Instant, bool)> =
        sim.records().iter().filter(|r| r.kind == RecordKind::FrameSent).map(|r| (r.at, r.attempt > 0)).collect();
    // A CON the gateway sends again: same destination and message ID as one before.
    let mut seen = BTreeSet::new();
    let retx: Vec<Instant> = sim
        .datagrams()
        .iter()
        .filter(|d| d.node == gw)
        .filter_map(|d| {
            let c = d.coap?;
            (c.mtype == corral_proto::wire::MessageType::Con && !seen.insert((d.dst, c.mid))).then_some(d.at)
        })
        .collect();
    let within = |from: Instant, to: Instant| {
        let (a, b) = (frames.partition_point(|f| f.0 < from), frames.partition_point(|f| f.0 <= to));
        let k = |t: Instant| retx.partition_point(|x| *x < t);
        (
            (b - a) as u64,
            frames[a..b].iter().filter(|f| f.1).count() as u64,
            (k(to + Duration::from_micros(1)) - k(from)) as u64,
        )
    };
    answers
        .iter()
        .enumerate()
        .map(|(rep, (was, x))| {
            let replies = answered(&x.payload, by_ip, was).map_or(0, |(_, got)| got);
            let (frames, mac_retries, coap_retx) = within(x.sent, x.answered);
            QueryRow {
                point,
                rep,
                seed,
                start_s: x.sent.as_micros() as f64 / 1e6,
                response_ms: if x.code.is_some() { x.response_time().as_micros() as f64 / 1000.0 } else { f64::NAN },
                code: x.code.map_or_else(|| "none".to_string(), |c| format!("{c}")),
                replies,
                members: was.len(),
                coap_retx,
                frames,
                mac_retries,
            }
        })
        .collect()
}

/// Splits the radio's frames since `t0` (MAC retries included) and their bytes on the air by message: a
/// request a device sent, or a response the gateway sent one, is the directory's (the gateway's only
/// radio service for devices is the directory); a request the gateway sent, or a device's response, is a
/// query's member traffic. Counts the directory's answers to the EM over loopback too.
fn split_frames(sim: &Sim, t0: Instant, f: &mut ChurnFacts) {
    for r in sim.records().iter().filter(|r| r.kind == RecordKind::FrameSent && r.at >= t0) {
        let Some(dg) = sim.datagram(r.datagram) else { continue };
        let Some(coap) = dg.coap else { continue };
        let from_device = sim.role(dg.node) == Role::Device;
        let rd = match (coap.code.is_request(), coap.code.is_response()) {
            (true, _) => from_device,
            (_, true) => !from_device,
            _ => continue,
        };
        let (frames, bytes) =
            if rd { (&mut f.rd_frames, &mut f.rd_bytes) } else { (&mut f.query_frames, &mut f.query_bytes) };
        *frames += 1;
        *bytes += u64::from(r.bytes);
    }
    f.notifications = sim
        .datagrams()
        .iter()
        .filter(|d| d.at >= t0 && d.src.ip() == d.dst.ip() && d.coap.is_some_and(|c| c.code.is_response()))
        .count() as u64;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(present: f64, departures: f64) -> ChurnSetup {
        ChurnSetup {
            present,
            departures,
            clean: 0.5,
            vanish: Vanish::Off,
            lifetime_s: 60,
            query_period_s: 30,
            timeout_ms: 5000,
            schedule_seed: 7,
            resource: "s/t".into(),
            window_s: 600,
        }
    }

    #[test]
    fn the_schedule_has_the_shares_asked_and_leaves_after_arriving() {
        let plans = schedule(&setup(0.5, 0.5), 10);
        assert_eq!(plans.iter().filter(|p| p.arrive_ms.is_none()).count(), 5);
        let leaving: Vec<_> = plans.iter().filter_map(|p| p.depart).collect();
        assert_eq!(leaving.len(), 5);
        assert_eq!(leaving.iter().filter(|(_, clean)| *clean).count(), 3, "half of five, rounded");
        for p in &plans {
            if let (Some(a), Some((d, _))) = (p.arrive_ms, p.depart) {
                assert!(d > a, "{p:?}");
            }
            assert!(p.arrive_ms.is_none_or(|a| a < 450_000) && p.depart.is_none_or(|(d, _)| d < 600_000));
        }
        assert_eq!(plans, schedule(&setup(0.5, 0.5), 10), "a function of the schedule seed");
        let still = schedule(&setup(1.0, 0.0), 10);
        assert!(still.iter().all(|p| *p == Plan { arrive_ms: None, depart: None }), "no churn");
    }

    #[test]
    fn membership_integrates_stale_and_missing_devices_and_times_joins_and_removals() {
        let mut m = Membership::new(3);
        let set = |v: &[usize]| v.iter().copied().collect::<BTreeSet<usize>>();
        // Device 2 arrives at 0.5 s and device 0 leaves (silently) at 0.5 s.
        m.arrived[2] = Some(500);
        m.left[0] = Some((500, false));
        m.sample(1000, &set(&[1, 2]), &set(&[0, 1]), &set(&[0, 1]));
        m.sample(2000, &set(&[1, 2]), &set(&[1, 2]), &set(&[0, 1]));
        let f = m.facts(&setup(0.5, 0.5), 2000);
        // Following: device 0 stale for 1 s and device 2 missing for 1 s; fixed: both for 2 s.
        assert_eq!((f.follow_stale_s, f.follow_missing_s, f.fixed_stale_s, f.fixed_missing_s), (1.0, 1.0, 2.0, 2.0));
        assert_eq!((f.join_max_s, f.vanish_leave_max_s), (1.5, 1.5));
        assert!(f.clean_leave_max_s.is_nan());
    }
}
