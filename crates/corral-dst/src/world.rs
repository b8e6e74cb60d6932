//! The simulated world of one seed: a gateway with the real Entity Manager on the simulated store, twenty
//! virtual devices in one radio star, the client on a wired host; the faults applied as their time comes;
//! the run loop; the checks at every restart and at quiescence.
//!
//! # What it owns
//! [`World`]: the simulator and what the harness knows beside it (the store, the client's model, who is
//! down, who rebooted when), and [`run`], which drives a seed from its first event to its report. Adding an
//! actor: attach its node in [`World::new`] and give it events in [`run`]'s loop; adding an invariant: a
//! function in `check` called from [`World::quiesce`] (or at restart, in [`World::restart`]).

use crate::check::{self, DeviceView};
use crate::client::{Client, Model};
use crate::fault::{schedule, Fault};
use crate::hostile::{Ledger, Spoofer};
use crate::store::SharedStore;
use crate::{Options, Report};
use corral_group::device::{mount_device, DeviceConfig, DeviceHandles};
use corral_group::{EmConfig, EntityManager, McResource};
use corral_proto::{Duration, Endpoint, EndpointConfig, Instant, Node, Rng, ServiceHandle};
use corral_sim::fault::{Cuts, Jumble};
use corral_sim::topology::WiredSpec;
use corral_sim::{LinkModel, NodeId, Sim, SimConfig, Topology};
use std::collections::BTreeSet;
use std::net::SocketAddr;

const GW: NodeId = NodeId(0);
/// Loss of every radio frame outside bursts (the MAC retries).
const BASE_LOSS: f64 = 0.02;
/// How long the gateway settles after the faults stop, before the quiescence checks: longer than CoAP's
/// EXCHANGE_LIFETIME (247 s), so that every request has its outcome.
const SETTLE: Duration = Duration::from_secs(600);

pub struct World {
    pub sim: Sim,
    seed: u64,
    store: SharedStore,
    em: Option<ServiceHandle>,
    client: (NodeId, ServiceHandle),
    devices: Vec<(NodeId, DeviceHandles)>,
    /// When each device last rebooted, and whether it is down now.
    rebooted: Vec<Option<Instant>>,
    down: Vec<bool>,
    cuts: Cuts,
    jumble: Jumble,
    spoofer: (NodeId, Spoofer),
    ledger: Ledger,
    /// A spoofing spell: when it ends, and every how long it sends.
    spoofing: Option<(Instant, Duration)>,
    model: Model,
    /// Requests whose outcome the model has taken.
    seen: BTreeSet<corral_proto::RequestId>,
    /// Each change request's mark in the model (see `Model::answered`).
    marks: std::collections::BTreeMap<corral_proto::RequestId, u64>,
    rng: Rng,
    /// Ends of faults, by time.
    pending: Vec<(Instant, Due)>,
    verbose: bool,
    strict: bool,
    report: Report,
}

impl World {
    fn new(seed: u64, opts: &Options) -> World {
        let mut topo = Topology::star(opts.devices);
        let host = topo.add_wired_host(0, WiredSpec::ethernet(0, 0));
        let spoofer = NodeId(topo.add_wired_host(0, WiredSpec::ethernet(0, 0)) as u32);
        // The victim: a host that runs nothing, whose address the spoofer writes on its requests.
        let victim = NodeId(topo.add_wired_host(0, WiredSpec::ethernet(0, 0)) as u32);
        let mut cfg = SimConfig::new(seed);
        cfg.record = false;
        let mut sim = Sim::from_topology(cfg, &topo);
        sim.set_all_link_models(LinkModel::Bernoulli { p: BASE_LOSS });
        let cuts = Cuts::new();
        sim.set_frame_rule(cuts.rule());
        let jumble = Jumble::new(Rng::stream(seed, 0xD57_0004));
        let ledger = Ledger::default();
        let (gw_ip, victim_ip) = (sim.addr(GW).ip(), sim.addr(victim).ip());
        let (mut mangle, counts) = (jumble.rule(), ledger.clone());
        sim.set_datagram_rule(move |d| {
            if d.src.ip() == gw_ip && d.dst.ip() == victim_ip {
                counts.count(true, d.len);
            } else if d.src.ip() == victim_ip && d.dst.ip() == gw_ip {
                counts.count(false, d.len);
            }
            mangle(d)
        });
        let mut devices = Vec::new();
        for i in 1..=opts.devices {
            let id = NodeId(i as u32);
            let (node, h) = device_node(&sim, id, 0);
            sim.attach(id, node);
            devices.push((id, h));
        }
        let mut c = Node::new(Endpoint::new(sim.endpoint_config(NodeId(host as u32))));
        let ch = c.mount("", Client::default());
        sim.attach(NodeId(host as u32), c);
        let store = SharedStore::new(seed, opts.defect);
        let mut w = World {
            sim,
            seed,
            store,
            em: None,
            client: (NodeId(host as u32), ch),
            rebooted: vec![None; devices.len()],
            down: vec![false; devices.len()],
            devices,
            cuts,
            jumble,
            spoofer: (spoofer, Spoofer::new(Rng::stream(seed, 0xD57_0005), victim_ip)),
            ledger,
            spoofing: None,
            model: Model::default(),
            seen: BTreeSet::new(),
            marks: Default::default(),
            rng: Rng::stream(seed, 0xD57_0002),
            pending: Vec::new(),
            verbose: std::env::var_os("CORRAL_DST_LOG").is_some(),
            strict: opts.strict,
            report: Report { seed, ..Report::default() },
        };
        w.start_gateway();
        w
    }

    /// Starts the gateway from what its store holds (a fresh endpoint: new message IDs and tokens, as a
    /// new process draws).
    fn start_gateway(&mut self) {
        let snapshot = self.store.lock().durable().clone();
        let cfg = EmConfig { local_addrs: vec![self.sim.addr(GW)], ..EmConfig::default() };
        let em = EntityManager::new(cfg, snapshot).expect("the gateway loads what its store holds");
        let seed = Rng::stream(self.seed, 0xD57_1000 + u64::from(self.report.crashes)).next_u64();
        let mut node = Node::new(Endpoint::new(EndpointConfig::with_seed(seed)));
        self.em = Some(node.mount("em", em));
        node.set_effect_runner(Box::new(self.store.runner()));
        self.sim.attach(GW, node);
    }

    fn gateway_up(&self) -> bool {
        self.em.is_some()
    }

    /// The gateway's process dies: its node is gone, the store loses what it never reported done.
    fn crash(&mut self) {
        if !self.gateway_up() {
            return;
        }
        self.sync_model();
        self.sim.detach(GW);
        self.em = None;
        self.store.lock().crash();
        self.report.crashes += 1;
    }

    /// The gateway comes back from its store; every acknowledged change must be there.
    fn restart(&mut self) {
        if self.gateway_up() {
            return;
        }
        self.sync_model();
        let v = check::durable(&self.model, self.store.lock().durable());
        self.fail(v);
        self.start_gateway();
    }

    fn em(&self) -> Option<&EntityManager> {
        self.sim.service::<EntityManager>(GW, self.em?)
    }

    fn client(&self) -> &Client {
        self.sim.service::<Client>(self.client.0, self.client.1).expect("the client is attached")
    }

    /// With `CORRAL_DST_LOG` set: the devices whose groups changed since the last call.
    fn log_groups(&mut self, last: &mut Vec<Vec<std::net::IpAddr>>) {
        if !self.verbose {
            return;
        }
        last.resize(self.devices.len(), Vec::new());
        for (k, (id, h)) in self.devices.iter().enumerate() {
            let now: Vec<std::net::IpAddr> =
                self.sim.service::<McResource>(*id, h.mc).map_or(Vec::new(), |m| m.groups().to_vec());
            if now != last[k] {
                eprintln!("{} device {}: groups {:?} -> {:?}", self.sim.now(), self.sim.addr(*id), last[k], now);
                last[k] = now;
            }
        }
    }

    /// With `CORRAL_DST_LOG` set: a line of the seed's story on stderr (replaying a failure).
    fn log(&self, what: impl FnOnce() -> String) {
        if self.verbose {
            eprintln!("{} {}", self.sim.now(), what());
        }
    }

    fn fail(&mut self, v: Vec<String>) {
        let at = self.sim.now();
        for s in v {
            let line = format!("at {at}: {s}");
            if !self.strict && s.starts_with("known defect") {
                self.report.known.push(line);
            } else {
                self.report.failures.push(line);
            }
        }
    }

    /// Takes the outcomes the client got since the last call into the model, in the order they came (the
    /// gateway's order of answers is the order its changes took effect in).
    fn sync_model(&mut self) {
        let c = self.sim.service::<Client>(self.client.0, self.client.1).expect("the client is attached");
        let mut news: Vec<(Instant, corral_proto::RequestId)> = Vec::new();
        for (id, outcomes) in &c.outcomes {
            if let (false, Some((at, _))) = (self.seen.contains(id), outcomes.first()) {
                news.push((*at, *id));
            }
        }
        news.sort();
        for (at, id) in news {
            let (Some((t0, sent)), Some((_, first))) = (c.sent.get(&id), c.outcomes[&id].first()) else { continue };
            let mark = self.marks.get(&id).copied().unwrap_or(0);
            self.model.answered(sent, (*t0, mark), first, at);
            self.seen.insert(id);
            if self.verbose {
                let what = match first {
                    corral_proto::Outcome::Response { response, .. } => {
                        format!("{} {}", response.code, String::from_utf8_lossy(&response.payload))
                    }
                    other => format!("{other:?}"),
                };
                eprintln!("{at} client: {sent:?} sent at {t0} -> {what}");
            }
        }
    }

    fn act(&mut self) {
        if let (Some(em), Some(node)) = (self.em(), self.sim.node(GW)) {
            let limits = &node.endpoint().config().limits;
            let v = check::bounded(em, &node.endpoint().table_sizes(), limits);
            self.fail(v);
        }
        let gw = self.sim.addr(GW);
        let devices: Vec<SocketAddr> = self.devices.iter().map(|(id, _)| self.sim.addr(*id)).collect();
        let (host, h) = self.client;
        let mut rng = self.rng.fork();
        let change = self.sim.with_service(host, h, |c: &mut Client, cx| c.act(cx, &mut rng, gw, &devices));
        if let Some(Some((id, Some(name)))) = change {
            let mark = self.model.sent(&name);
            self.marks.insert(id, mark);
        }
    }

    fn apply(&mut self, fault: Fault) {
        let now = self.sim.now();
        self.log(|| format!("fault: {fault:?}"));
        match fault {
            Fault::Crash { down, .. } => {
                self.crash();
                self.pending.push((now + down, Due::Restart));
            }
            Fault::Reboot { index, down } => {
                if self.down[index] {
                    return;
                }
                let (id, _) = self.devices[index];
                self.sim.detach(id);
                self.down[index] = true;
                self.rebooted[index] = Some(now);
                self.report.reboots += 1;
                self.pending.push((now + down, Due::DeviceBack(index)));
            }
            Fault::Partition { first, count, span } => {
                let n = self.devices.len();
                let cut: Vec<NodeId> = (0..count).map(|k| self.devices[(first + k) % n].0).collect();
                self.cuts.cut(GW, &cut, now + span);
            }
            Fault::LossBurst { loss, span } => {
                self.sim.set_all_link_models(LinkModel::bursty(loss, 8.0, 0.9));
                self.pending.push((now + span, Due::LossEnds));
            }
            Fault::Jumble { duplicate, delay, max_delay, span } => {
                self.jumble.start(now + span, duplicate, delay, max_delay)
            }
            Fault::Spoof { every, span } => {
                if self.spoofing.is_none() {
                    self.spoofing = Some((now + span, every));
                    let sent = self.ledger.totals().0;
                    self.pending.push((now, Due::Spoof));
                    // The check waits for the answers and retransmissions of the spell's last requests.
                    self.pending.push((now + span + Duration::from_secs(60), Due::ReflectionCheck(now, sent)));
                }
            }
            Fault::Garbage { count } => {
                let gw = self.sim.addr(GW);
                for _ in 0..count {
                    let bytes = self.spoofer.1.garbage();
                    self.sim.inject(self.spoofer.0, gw, bytes);
                }
            }
            Fault::StoreSlow { span } => self.store.lock().slow_until(now + span),
            Fault::StoreDown { span } => self.store.lock().down_until(now + span),
        }
    }

    fn due(&mut self, d: Due) {
        self.log(|| format!("fault ends: {d:?}"));
        match d {
            Due::Restart => self.restart(),
            Due::DeviceBack(i) => {
                let (id, _) = self.devices[i];
                let boots = self.report.reboots;
                let (node, h) = device_node(&self.sim, id, boots);
                self.devices[i].1 = h;
                self.sim.attach(id, node);
                self.down[i] = false;
            }
            Due::LossEnds => self.sim.set_all_link_models(LinkModel::Bernoulli { p: BASE_LOSS }),
            Due::Spoof => {
                let now = self.sim.now();
                let Some((until, every)) = self.spoofing.filter(|(until, _)| now < *until) else {
                    self.spoofing = None;
                    return;
                };
                let (src, bytes) = self.spoofer.1.spoofed_read();
                self.sim.inject_as(self.spoofer.0, src, self.sim.addr(GW), bytes);
                self.pending.push(((now + every).min(until), Due::Spoof));
            }
            Due::ReflectionCheck(a, sent_a) => {
                let (sent, received) = self.ledger.totals();
                let limit = corral_proto::AmplificationLimit::default();
                let v = check::reflection(&limit, (sent_a, a), (sent, received, self.sim.now()));
                self.log(|| {
                    format!(
                        "reflection since {a}: {} bytes sent to the victim, {received} received ever",
                        sent - sent_a
                    )
                });
                self.fail(v);
            }
        }
    }

    /// The faults stop: every device and the gateway are up, the network and the store are healed.
    fn heal(&mut self) {
        let now = self.sim.now();
        let due: Vec<Due> = self.pending.drain(..).map(|(_, d)| d).collect();
        for d in due {
            self.due(d);
        }
        self.restart();
        self.cuts.heal();
        self.jumble.stop();
        self.spoofing = None;
        self.sim.set_all_link_models(LinkModel::Perfect);
        self.store.lock().heal(now);
    }

    /// Everything settled: the quiescence invariants.
    fn quiesce(&mut self) {
        self.sync_model();
        let mut v = Vec::new();
        {
            let em = self.em().expect("the gateway is up after the heal");
            let store = self.store.lock();
            v.extend(check::store_agrees(em, store.durable(), store.in_flight()));
            v.extend(check::model_agrees(em, &self.model));
            let views: Vec<DeviceView<'_>> = self
                .devices
                .iter()
                .zip(&self.rebooted)
                .map(|((id, h), rebooted)| DeviceView {
                    addr: self.sim.addr(*id),
                    groups: self.sim.service::<McResource>(*id, h.mc).map_or(&[][..], |m| m.groups()),
                    rebooted: *rebooted,
                })
                .collect();
            v.extend(check::memberships(em, &views, &self.model));
            if let Some(node) = self.sim.node(GW) {
                v.extend(check::drained(em, &node.endpoint().table_sizes()));
            }
        }
        v.extend(check::one_outcome(self.client()));
        let sim = &self.sim;
        let sample = |m: SocketAddr, t: Instant| {
            let id = sim.node_by_addr(m.ip()).filter(|id| *id != GW && id.index() <= self.devices.len())?;
            Some(corral_group::device::sample(u64::from(id.0), corral_group::device::Quantity::Temperature, t))
        };
        let devices: Vec<SocketAddr> = self.devices.iter().map(|(id, _)| sim.addr(*id)).collect();
        v.extend(check::use_values(self.client(), &devices, sample));
        self.fail(v);
    }
}

/// What the harness does later: the end of a fault.
#[derive(Debug, Clone, Copy)]
enum Due {
    Restart,
    DeviceBack(usize),
    LossEnds,
    /// The spoofer's next request.
    Spoof,
    /// The reflection bound over the spell that started then (with the bytes sent to the victim by then).
    ReflectionCheck(Instant, usize),
}

/// A virtual device's node, seeded for its `boot`-th start.
fn device_node(sim: &Sim, id: NodeId, boot: u32) -> (Node, DeviceHandles) {
    let mut cfg = sim.endpoint_config(id);
    cfg.seed ^= u64::from(boot).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut node = Node::new(Endpoint::new(cfg));
    let h = mount_device(&mut node, DeviceConfig { seed: Some(u64::from(id.0)), ..DeviceConfig::default() });
    (node, h)
}

/// Runs seed `seed` to its report.
pub fn run(seed: u64, opts: Options) -> Report {
    let mut w = World::new(seed, &opts);
    let mut rng = Rng::stream(seed, 0xD57_0003);
    let faults = schedule(seed, opts.faults, opts.duration, opts.devices);
    let end = Instant::ZERO + opts.duration;
    let mut faults = faults.into_iter().peekable();
    let mut next_act = Instant::from_secs(rng.range_inclusive(1, 20));
    // A crash waiting for a write in flight, and its latest moment.
    let mut armed: Option<(Instant, Duration)> = None;
    let mut groups_seen = Vec::new();
    loop {
        w.log_groups(&mut groups_seen);
        w.pending.sort_by_key(|(t, _)| *t);
        let next_fault = faults.peek().map_or(Instant::MAX, |(t, _)| *t);
        let next_due = w.pending.first().map_or(Instant::MAX, |(t, _)| *t);
        let mut next = next_act.min(next_fault).min(next_due).min(end);
        if let Some((latest, _)) = armed {
            next = next.min(latest);
        }
        if w.verbose {
            // Telling the story: look at the devices' groups every 100 ms.
            next = next.min(w.sim.now() + Duration::from_millis(100));
        }
        if let Some((_, down)) = armed {
            let store = w.store.clone();
            if w.sim.run_until_cond(next, |_| store.lock().in_flight() > 0) && w.sim.now() < next {
                armed = None;
                w.apply(Fault::Crash { armed: false, down });
                continue;
            }
        } else {
            w.sim.run_until(next);
        }
        let now = w.sim.now();
        if now >= end {
            break;
        }
        if let Some((latest, down)) = armed {
            if now >= latest {
                armed = None;
                w.apply(Fault::Crash { armed: false, down });
            }
        }
        if next_due <= now {
            let (_, d) = w.pending.remove(0);
            w.due(d);
        } else if next_fault <= now {
            let (_, f) = faults.next().expect("peeked");
            match f {
                Fault::Crash { armed: true, down } if w.gateway_up() => {
                    armed = Some((now + Duration::from_secs(120), down));
                }
                f => w.apply(f),
            }
        } else if next_act <= now {
            w.act();
            next_act = now + Duration::from_millis(rng.range_inclusive(2_000, 40_000));
        }
    }
    w.heal();
    w.sim.run_for(SETTLE);
    w.quiesce();
    let r = &mut w.report;
    r.virtual_s = w.sim.now().as_micros() as f64 / 1e6;
    r.trace_hash = w.sim.trace_hash();
    r.requests = w.sim.service::<Client>(w.client.0, w.client.1).map_or(0, |c| c.sent.len());
    let store = w.store.lock();
    r.acknowledged = store.acknowledged;
    r.lost = store.lost;
    drop(store);
    w.report
}
