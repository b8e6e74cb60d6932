//! The simulated network: nodes (a `corral_proto::Node` plus radio and wired interfaces), the unslotted
//! CSMA/CA MAC with ACKs and retries, 6LoWPAN fragmentation and reassembly, tree routing with SMRF
//! multicast, wired links, interferers — driven by the event queue of [`crate::engine`].
//!
//! # What it owns
//! Everything that happens between a node's `poll_transmit` and another node's `handle_datagram`, on the
//! virtual clock, and the records of it. It drives each `Node` exactly as corral-tokio would: after every
//! input it drains `poll_command` (multicast joins), `poll_transmit` and `poll_event`, then arms a timer at
//! `poll_timeout`. It must never read a clock or draw randomness except from its seeded streams.
//!
//! # Where things are
//! This file: the types, building a network from a [`Topology`], the public API and the event dispatch.
//! [`Sim`] groups its state in parts that own it, each with its own file and methods: `sim/medium.rs`
//! (the radio links, their loss models and counters, the channels' streams, interferers, frames on the
//! air), `sim/routing.rs` (addresses, multicast groups, wired links), `sim/recorder.rs` (datagram ids,
//! records and their hash, datagrams as sent, pcap). The behaviour that spans them is in `impl Sim`
//! blocks: `sim/net.rs` drives nodes and the network layer (routing, forwarding, multicast, delivery);
//! `sim/mac.rs` the MAC (queue, CSMA/CA, the air, reception, ACKs, reassembly); `sim/apps.rs` nodes that
//! run an [`crate::app::App`] instead of a CoAP node.
//!
//! # Random streams
//! One [`Rng`] per node (CSMA/CA backoffs), one per IEEE 802.15.4 channel (link loss, interference
//! corruption and CCA detection draws, made in receiver order), one per interferer (Wi-Fi backoff), one for
//! wired loss; each endpoint gets its own seed from [`Sim::endpoint_config`]. A change in one node's traffic
//! therefore does not reshuffle another node's backoffs.
//!
//! # The MAC, step by step (IEEE 802.15.4-2006 §7.5.1.4, unslotted; nonbeacon-enabled PAN, no RDC)
//! 1. A frame at the head of the queue starts CSMA/CA with NB = 0, BE = macMinBE.
//! 2. Backoff: a random number of unit backoff periods in `0..2^BE`, then a CCA of 8 symbols. The channel is
//!    busy if any IEEE 802.15.4 transmission in range was on the air at any time during the CCA window, the
//!    node itself was transmitting or owed an ACK, or (with the interferer's detection probability) a Wi-Fi
//!    burst overlapped the window.
//! 3. Busy: NB += 1, BE = min(BE + 1, macMaxBE); over macMaxCSMABackoffs the frame fails (channel-access
//!    failure). Idle: turnaround (192 µs), then the frame is on the air for its airtime.
//! 4. A unicast frame waits macAckWaitDuration for an Imm-ACK that the receiver sends a turnaround after the
//!    frame ends, without CCA; no ACK → a retransmission through CSMA/CA again, up to macMaxFrameRetries.
//!    Broadcast frames get no ACK and no retransmission (why SMRF multicast is unreliable in seed 000).
//! 5. A receiver locks onto the first frame whose start it hears while not transmitting, and keeps it
//!    through overlaps as long as the frame's power stays [`RadioParams::capture_threshold_db`] (3 dB)
//!    above the sum of everything else audible (the capture effect; powers per link from
//!    [`crate::propagation`]); the overlapping frames are not received. A frame at least that much
//!    stronger than the rest that starts within the locked frame's synchronisation header (preamble + SFD,
//!    160 µs) takes the receiver over instead (it re-synchronises on the stronger preamble), and a frame
//!    that starts over weaker energy the receiver is not locked on is received if it clears the threshold.
//!    With `capture_threshold_db = None` any overlap destroys every frame involved. A receiver that is
//!    transmitting hears nothing. A frame that survives collisions is then subject to the Wi-Fi corruption
//!    draw, the link's loss model, and the fault-injection rule, in that order.
//! 6. A receiver drops duplicates (same sender and MAC sequence number, after a lost ACK) but still ACKs
//!    them, and hands the datagram to its IP layer when the ACK is out (as with the CC2420/CC2520 auto-ACK,
//!    the radio acknowledges before the stack processes the frame).
//!
//! # 6LoWPAN
//! A datagram over one frame's payload goes as RFC 4944 fragments ([`crate::radio::RadioParams::layout`]),
//! each its own MAC frame with CSMA/CA and retries, sent back to back. If one fragment fails at the MAC the
//! sender abandons the rest. Reassembly is hop by hop (route-over, as Contiki does it) with a single
//! reassembly buffer per node, as Contiki's `sicslowpan` has: a first fragment of another datagram displaces
//! an incomplete one, and an incomplete datagram is dropped (`fragment-lost`) at the reassembly timeout.
//!
//! # Routing (RFC 6550 storing mode) and SMRF multicast (RFC 7731's predecessor in Contiki)
//! The radio parents of [`crate::Topology::parents`] and the wired links form one routing tree per connected
//! component. Every node knows its parent and, for every node in its sub-DODAG, the child leading there —
//! exactly a storing-mode node's routing table, computed here from tree intervals instead of DAO messages
//! (no control traffic is simulated). Unicast goes up to the common ancestor and down again. A multicast
//! datagram travels away from its source along tree branches that contain a member (storing-mode group
//! membership): over the radio only *downward*, one link-layer broadcast per forwarding node, accepted only
//! from the receiver's routing parent (SMRF); over wired links in any direction. A radio forwarder
//! re-broadcasts after SMRF's delay as Contiki's `smrf.c` computes it ([`SimConfig::smrf_delay_ticks`]),
//! on the ticks of its own clock ([`SimConfig::clock_hz`]): each node has a seeded phase and a rate error
//! within the crystal tolerance, so siblings that draw the same multiple do not fire in the same
//! microsecond, and which of them fire close together changes over a run.
//!
//! # Wired links
//! Full duplex, FIFO per direction: a datagram of `n` payload bytes occupies `(n + 48 + 18) · 8 / bandwidth`
//! seconds (IPv6 + UDP headers, Ethernet header and FCS), then arrives after the propagation delay; optional
//! independent loss.

mod apps;
mod mac;
mod medium;
mod net;
mod recorder;
mod routing;

use apps::radio_len;
use medium::{Air, AirKind, InterfererState, Medium};
use recorder::Recorder;
use routing::Routing;

use crate::engine::EventQueue;
use crate::loss::{BurstProcess, Interferer, LinkModel, LinkState, ModelLoss, OutageState, Outages, Reach};
use crate::pcap::PcapWriter;
use crate::propagation::dbm_to_mw;
use crate::radio::{Layout, RadioParams, IPV6_UDP_HEADER};
use crate::topology::{Role, Topology, WiredSpec};
use crate::trace::{
    CoapSummary, DatagramId, DatagramInfo, DropReason, LinkCounters, NodeCounters, NodeId, Record, RecordKind,
    TraceHash,
};
use corral_proto::{Duration, EndpointConfig, Event, Instant, Node, NodeCommand, Rng, Service, ServiceHandle};
use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::rc::Rc;

/// The CoAP port every simulated node listens on.
pub const COAP_PORT: u16 = 5683;

/// Ethernet II header + FCS, counted on wired links.
const ETHERNET_OVERHEAD: usize = 18;

/// Configuration of a simulation.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Seeds every random stream of the simulator and, through [`Sim::endpoint_config`], of the endpoints.
    pub seed: u64,
    pub radio: RadioParams,
    /// Keep [`Record`]s and [`DatagramInfo`]s in memory (the trace hash is computed either way).
    pub record: bool,
    /// IPv6 hop limit of every datagram (loops end there).
    pub hop_limit: u8,
    /// SMRF's forwarding delay in clock ticks: a forwarder re-broadcasts a multicast datagram on the
    /// `smrf_delay_ticks · (1 + k)`-th tick of its own clock after receiving it, `k` uniform in
    /// `0..smrf_spread`. Contiki's `smrf.c` (2014-07 master, the seed-000 testbed's snapshot) takes
    /// `max(NETSTACK_RDC.channel_check_interval(), SMRF_MIN_FWD_DELAY)`; Null-RDC's interval is 0, so the
    /// delay is `SMRF_MIN_FWD_DELAY` = **4** ticks, spread over `min((CLOCK_SECOND >> 2) / 4,
    /// SMRF_MAX_SPREAD)` = **4** multiples (31.25, 62.5, 93.75 or 125 ms at 128 Hz), set with a `ctimer`.
    /// The source itself sends at once. 0 forwards at once.
    pub smrf_delay_ticks: u32,
    pub smrf_spread: u8,
    /// The rate of each node's clock (Contiki's `CLOCK_SECOND`: **128** Hz on the MSP430 platforms — z1,
    /// wismote, the RM090's relatives). Contiki timers are counted in whole ticks from the tick at which they
    /// are set (`timer_set` stores `clock_time()`), so a `d`-tick timer fires on the node's `d`-th tick
    /// boundary, `(d − 1, d]` ticks later; the motes' clocks are free-running crystals with unrelated phases,
    /// so each simulated node gets its own seeded phase. Only the SMRF forwarding timer uses it.
    pub clock_hz: u32,
    /// How far a node's clock rate may be off, ± ppm (**20**: the tolerance of the 32.768 kHz watch
    /// crystals that clock the MSP430 motes' timers). Each node draws its error uniformly in the range, so
    /// the phases of two motes slide past each other by up to 40 µs per second — which pairs of forwarders
    /// tick together changes from one query to the next, as on real motes.
    pub clock_tolerance_ppm: u32,
    /// Bit rates of channels that differ from [`RadioParams::bit_rate`]: `(IEEE channel, bit/s)`. MAC timing
    /// constants stay those of [`RadioParams`]; only frame and ACK airtimes change.
    pub channel_bit_rates: Vec<(u8, u32)>,
    /// Time a mote's CPU takes to hand a received datagram to its CoAP stack (zero by default). The network
    /// records delivery on arrival; the endpoint sees the datagram this much later. Real motes (an MSP430
    /// running Contiki and Erbium) take milliseconds, which the lab may calibrate. Radio nodes only: a wired
    /// host ([`Role::Host`], a PC) hands every datagram over on arrival, whatever this and `rx_queue` say.
    pub processing_delay: Duration,
    /// With a processing delay: `Some(k)` makes each node's CPU handle received datagrams one at a time
    /// (each takes `processing_delay`), with room for `k` more waiting; a datagram arriving when `k` wait
    /// already is dropped (`queue-overflow`) after the radio acknowledged it — as a Contiki mote with its
    /// single uIP buffer and a one-frame radio FIFO loses frames that arrive while it is busy. `None` (the
    /// default): every datagram is handed over `processing_delay` after its arrival, in parallel.
    pub rx_queue: Option<u16>,
    /// The timers of every node's TCP stack (by default smoltcp's own).
    pub tcp: crate::tcp::TcpTimers,
}

impl SimConfig {
    pub fn new(seed: u64) -> SimConfig {
        SimConfig {
            seed,
            radio: RadioParams::default(),
            record: true,
            hop_limit: 64,
            smrf_delay_ticks: 4,
            smrf_spread: 4,
            clock_hz: 128,
            clock_tolerance_ppm: 20,
            channel_bit_rates: Vec::new(),
            processing_delay: Duration::ZERO,
            rx_queue: None,
            tcp: crate::tcp::TcpTimers::default(),
        }
    }
}

/// What a fault-injection rule sees of a frame at one intended receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameInfo {
    pub at: Instant,
    pub from: NodeId,
    pub to: NodeId,
    pub datagram: DatagramId,
    /// True for an Imm-ACK frame (then `frag`/`frags` are 0).
    pub ack: bool,
    pub broadcast: bool,
    pub frag: u16,
    pub frags: u16,
    pub attempt: u8,
}

type FrameRule = Box<dyn FnMut(&FrameInfo) -> bool>;

/// One datagram as its source sent it (shared by every copy in flight).
struct Dgram {
    id: DatagramId,
    src: SocketAddr,
    dst: SocketAddr,
    payload: Box<[u8]>,
    created: Instant,
}

type DgramRef = Rc<Dgram>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MacState {
    Idle,
    Backoff,
    Cca,
    Turnaround,
    Tx,
    WaitAck,
}

struct Outgoing {
    dg: DgramRef,
    hops: u8,
    /// `None`: link-layer broadcast.
    next: Option<u32>,
    layout: Layout,
}

struct Rx {
    air: u32,
    /// Received power of the frame, mW, and when it started (capture decisions).
    power: f64,
    start: Instant,
    lost: Option<DropReason>,
    wifi_on: bool,
    wifi_mark: u32,
}

struct Reasm {
    from: u32,
    id: DatagramId,
    next_frag: u16,
    frags: u16,
}

struct PendingAck {
    to: u32,
    dsn: u8,
    up: Option<(DgramRef, u8, u32)>,
}

struct Radio {
    channel: u8,
    bit_rate: u32,
    /// This node's neighbours are `nbrs[nbr_start..nbr_end]`.
    nbr_start: u32,
    nbr_end: u32,
    queue: VecDeque<Outgoing>,
    mac: MacState,
    /// Bumped on every MAC state change; a MAC event with an older generation is stale.
    gen: u32,
    nb: u8,
    be: u8,
    retries: u8,
    frag: u16,
    dsn: u8,
    cca_start: Instant,
    tx_until: Instant,
    ack_until: Instant,
    rx: Option<Rx>,
    audible: u16,
    /// Total received power of the transmissions audible now, mW (capture decisions).
    energy: f64,
    last_audible_end: Instant,
    pending_ack: Option<PendingAck>,
    dedup: [(u32, u8); 4],
    dedup_next: u8,
    reasm: Option<Reasm>,
    /// Interferers whose bursts reach this node.
    wifi: Box<[u16]>,
}

struct SimNode {
    addr: IpAddr,
    role: Role,
    position: Option<(f64, f64)>,
    proto: Option<Box<Node>>,
    /// A program that speaks TCP or UDP itself instead of `proto` (the HTTP baselines; see `sim/apps.rs`).
    app: Option<Box<dyn crate::app::App>>,
    /// The node's TCP stack, made when it first speaks CoAP over TCP (see `crate::tcp`).
    tcp: Option<Box<crate::tcp::TcpHost>>,
    timer_at: Option<Instant>,
    radio: Option<Radio>,
    /// `(link, peer)` for every wired link.
    wired: Vec<(u32, u32)>,
    /// Routing tree: parent, whether the edge to it is wired (its link), Euler-tour interval, component.
    rparent: Option<u32>,
    up_wired: Option<u32>,
    tin: u32,
    tout: u32,
    comp: u32,
    /// Routing children, sorted by `tin`.
    children: Vec<u32>,
    rng: Rng,
    counters: NodeCounters,
    /// Serial CPU ([`SimConfig::rx_queue`]): datagrams accepted and not yet handed over, and when the last
    /// of them will be.
    cpu_backlog: u16,
    cpu_free_at: Instant,
    /// This node's [`SimConfig::rx_queue`] (the config's unless [`Sim::set_rx_queue`] changed it).
    rx_queue: Option<u16>,
    clock: NodeClock,
}

/// A node's free-running clock ([`SimConfig::clock_hz`], [`SimConfig::clock_tolerance_ppm`]): tick `n` is
/// at `phase + n · period`, in picoseconds.
struct NodeClock {
    phase_ps: u64,
    period_ps: u64,
}

impl NodeClock {
    fn new(cfg: &SimConfig, mut rng: Rng) -> NodeClock {
        let tol = i128::from(cfg.clock_tolerance_ppm) * 1000;
        let ppb = rng.range_inclusive(0, (2 * tol) as u64) as i128 - tol;
        let period = 1_000_000_000_000i128 * (1_000_000_000 + ppb) / (i128::from(cfg.clock_hz.max(1)) * 1_000_000_000);
        let period_ps = period.max(1) as u64;
        NodeClock { phase_ps: rng.below(period_ps), period_ps }
    }

    /// When a timer of `ticks` set at `now` fires: the `ticks`-th tick after the current one, rounded up to
    /// the next microsecond.
    fn after(&self, now: Instant, ticks: u64) -> Instant {
        let (phase, period) = (i128::from(self.phase_ps), i128::from(self.period_ps));
        let now_ps = i128::from(now.as_micros()) * 1_000_000;
        let n0 = (now_ps - phase).div_euclid(period);
        let at = phase + (n0 + i128::from(ticks)) * period;
        Instant::from_micros(((at + 999_999).div_euclid(1_000_000)).max(i128::from(now.as_micros())) as u64)
    }
}

#[derive(Debug, Clone, Copy)]
enum MacStep {
    BackoffDone,
    CcaDone,
    TxStart,
    AckTimeout,
}

enum Ev {
    Timer(u32),
    Mac(u32, u32, MacStep),
    TxEnd(u32),
    AckStart(u32),
    Arrive {
        node: u32,
        from: u32,
        dg: DgramRef,
        hops: u8,
    },
    WifiStart(u16),
    WifiEnd(u16),
    ReasmTimeout(u32, DatagramId),
    SmrfForward {
        node: u32,
        dg: DgramRef,
        hops: u8,
    },
    Process(u32, DgramRef),
    /// A datagram the datagram rule held back or copied (see [`crate::fault`]), delivered now.
    Late {
        node: u32,
        dg: DgramRef,
        hops: u8,
    },
}

/// The simulator. See the module docs for the model, [`crate`] for an overview and an example.
pub struct Sim {
    cfg: SimConfig,
    queue: EventQueue<Ev>,
    nodes: Vec<SimNode>,
    /// The radio medium: links, their loss models and counters, channels, interferers, frames on the air.
    medium: Medium,
    /// The network layer's tables: addresses, multicast groups, wired links.
    routing: Routing,
    /// What happened: datagram ids, records and their hash, datagrams as sent, node events, pcap.
    recorder: Recorder,
    rule: Option<FrameRule>,
    /// Delays and duplicates of datagrams at their receiver (see [`crate::fault`]).
    dgram_rule: Option<crate::fault::DatagramRule>,
}

fn default_addr(i: usize) -> IpAddr {
    let n = (i + 1) as u32;
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, (n >> 16) as u16, n as u16))
}

impl Sim {
    /// Builds the network a topology describes. Node `i` of the topology is `NodeId(i)`; no CoAP node is
    /// attached yet ([`Sim::attach`]); nodes without one still route.
    pub fn from_topology(cfg: SimConfig, topo: &Topology) -> Sim {
        let n = topo.nodes.len();
        let seed = cfg.seed;
        let adj = topo.adjacency();
        let mut nbrs = Vec::new();
        let mut nodes = Vec::with_capacity(n);
        let mut by_addr = HashMap::with_capacity(n);
        for (i, spec) in topo.nodes.iter().enumerate() {
            let addr = spec.addr.unwrap_or_else(|| default_addr(i));
            by_addr.insert(addr, i as u32);
            let radio = spec.channel.map(|channel| {
                let start = nbrs.len() as u32;
                nbrs.extend(adj[i].iter().map(|&j| j as u32));
                Radio {
                    channel,
                    bit_rate: cfg
                        .channel_bit_rates
                        .iter()
                        .find(|(c, _)| *c == channel)
                        .map_or(cfg.radio.bit_rate, |(_, r)| *r),
                    nbr_start: start,
                    nbr_end: nbrs.len() as u32,
                    queue: VecDeque::new(),
                    mac: MacState::Idle,
                    gen: 0,
                    nb: 0,
                    be: 0,
                    retries: 0,
                    frag: 0,
                    dsn: (i as u8).wrapping_mul(37),
                    cca_start: Instant::ZERO,
                    tx_until: Instant::ZERO,
                    ack_until: Instant::ZERO,
                    rx: None,
                    audible: 0,
                    energy: 0.0,
                    last_audible_end: Instant::ZERO,
                    pending_ack: None,
                    dedup: [(u32::MAX, 0); 4],
                    dedup_next: 0,
                    reasm: None,
                    wifi: Box::new([]),
                }
            });
            nodes.push(SimNode {
                addr,
                role: spec.role,
                position: spec.position,
                proto: None,
                app: None,
                tcp: None,
                timer_at: None,
                radio,
                wired: Vec::new(),
                rparent: None,
                up_wired: None,
                tin: 0,
                tout: 0,
                comp: 0,
                children: Vec::new(),
                rng: Rng::stream(seed, 0x1_0000_0000 + i as u64),
                counters: NodeCounters::default(),
                cpu_backlog: 0,
                cpu_free_at: Instant::ZERO,
                rx_queue: cfg.rx_queue,
                clock: NodeClock::new(&cfg, Rng::stream(seed, 0x6_0000_0000 + i as u64)),
            });
        }
        let links = nbrs.len();
        let mut link_power = Vec::with_capacity(links);
        for (i, node) in nodes.iter().enumerate() {
            if let Some(r) = &node.radio {
                for &j in &nbrs[r.nbr_start as usize..r.nbr_end as usize] {
                    link_power.push(dbm_to_mw(topo.rx_dbm(i, j as usize)));
                }
            }
        }
        let capture = cfg.radio.capture_threshold_db.map(|db| 10f64.powf(db / 10.0));
        let mut sim = Sim {
            queue: EventQueue::new(),
            nodes,
            medium: Medium::new(seed, nbrs, link_power, capture, topo.default_link),
            routing: Routing::new(seed, by_addr),
            recorder: Recorder::default(),
            rule: None,
            dgram_rule: None,
            cfg,
        };
        for &(a, b, model) in &topo.link_models {
            sim.set_link_model(NodeId(a as u32), NodeId(b as u32), model);
        }
        for spec in &topo.wired {
            let l = sim.routing.add_wired(*spec);
            sim.nodes[spec.a].wired.push((l, spec.b as u32));
            sim.nodes[spec.b].wired.push((l, spec.a as u32));
        }
        sim.build_routes(&topo.parents());
        for i in topo.interferers.iter().cloned() {
            sim.add_interferer(i);
        }
        sim
    }

    /// The routing tree: radio parent edges plus wired links, one depth-first tree per component.
    fn build_routes(&mut self, radio_parent: &[Option<usize>]) {
        let n = self.nodes.len();
        let mut adj: Vec<Vec<(u32, Option<u32>)>> = vec![Vec::new(); n];
        for (v, p) in radio_parent.iter().enumerate() {
            if let Some(p) = *p {
                adj[v].push((p as u32, None));
                adj[p].push((v as u32, None));
            }
        }
        for (v, node) in self.nodes.iter().enumerate() {
            for &(l, peer) in &node.wired {
                adj[v].push((peer, Some(l)));
            }
        }
        for list in &mut adj {
            list.sort_unstable();
        }
        let mut visited = vec![false; n];
        let mut clock = 0u32;
        let mut comp = 0u32;
        let roots: Vec<usize> = (0..n)
            .filter(|&v| radio_parent[v].is_none())
            .chain((0..n).filter(|&v| radio_parent[v].is_some()))
            .collect();
        for root in roots {
            if visited[root] {
                continue;
            }
            comp += 1;
            visited[root] = true;
            self.nodes[root].tin = clock;
            self.nodes[root].comp = comp;
            clock += 1;
            let mut stack: Vec<(u32, usize)> = vec![(root as u32, 0)];
            while let Some(&mut (v, ref mut next)) = stack.last_mut() {
                if let Some(&(w, link)) = adj[v as usize].get(*next) {
                    *next += 1;
                    if !visited[w as usize] {
                        visited[w as usize] = true;
                        let node = &mut self.nodes[w as usize];
                        node.rparent = Some(v);
                        node.up_wired = link;
                        node.tin = clock;
                        node.comp = comp;
                        clock += 1;
                        self.nodes[v as usize].children.push(w);
                        stack.push((w, 0));
                    }
                } else {
                    self.nodes[v as usize].tout = clock;
                    stack.pop();
                }
            }
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Building and attaching
    // ---------------------------------------------------------------------------------------------

    /// An endpoint configuration seeded for node `id` from the simulation seed.
    pub fn endpoint_config(&self, id: NodeId) -> EndpointConfig {
        EndpointConfig::with_seed(Rng::stream(self.cfg.seed, 0x5_0000_0000 + u64::from(id.0)).next_u64())
    }

    /// Attaches a CoAP node (endpoint and services) to simulated node `id`, replacing any previous one, and
    /// processes whatever it wants to do at the current time.
    pub fn attach(&mut self, id: NodeId, node: Node) {
        self.nodes[id.index()].proto = Some(Box::new(node));
        self.nodes[id.index()].timer_at = None;
        self.drain(id.0, false);
    }

    /// Takes the CoAP node off simulated node `id`, as a process that dies: its timers stop, datagrams
    /// that reach it from now on are lost, and the multicast groups its sockets had joined are left (the
    /// kernel forgets them with the process). The radio and the routes stay, as a host's do when one of
    /// its programs crashes. [`Sim::attach`] a new node to restart it.
    pub fn detach(&mut self, id: NodeId) -> Option<Node> {
        let node = self.nodes.get_mut(id.index())?;
        node.timer_at = None;
        let proto = node.proto.take()?;
        let groups: Vec<IpAddr> = self.routing.groups.keys().copied().collect();
        for g in groups {
            self.apply_command(id.0, NodeCommand::LeaveGroup(g));
        }
        Some(*proto)
    }

    /// The CoAP node attached to `id`.
    pub fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id.index())?.proto.as_deref()
    }

    /// Runs `f` on the attached CoAP node at the current time, then processes its outputs (use it to issue
    /// requests directly on the endpoint; their events come back through [`Sim::take_node_events`]).
    pub fn with_node<R>(&mut self, id: NodeId, f: impl FnOnce(Instant, &mut Node) -> R) -> Option<R> {
        let now = self.now();
        let r = f(now, self.nodes.get_mut(id.index())?.proto.as_deref_mut()?);
        self.drain(id.0, false);
        Some(r)
    }

    /// [`Node::with_service`] at the current time, then processes the node's outputs: how a driver makes a
    /// client service start a request.
    pub fn with_service<S: Service, R>(
        &mut self,
        id: NodeId,
        h: ServiceHandle,
        f: impl FnOnce(&mut S, &mut corral_proto::Context<'_>) -> R,
    ) -> Option<R> {
        let now = self.now();
        let r = self.nodes.get_mut(id.index())?.proto.as_deref_mut()?.with_service(now, h, f);
        self.drain(id.0, false);
        r
    }

    /// Reads a service of an attached node.
    pub fn service<S: Service>(&self, id: NodeId, h: ServiceHandle) -> Option<&S> {
        self.node(id)?.service(h)
    }

    /// Sends a raw UDP datagram from node `from` as if its endpoint had (background traffic, tests). It is
    /// recorded, captured and routed like any `Transmit`.
    pub fn inject(&mut self, from: NodeId, dst: SocketAddr, payload: Vec<u8>) -> DatagramId {
        let id = self.recorder.peek_id();
        self.submit(from.0, dst, payload);
        id
    }

    /// [`Sim::inject`] with source address `src` whatever the node's own: a spoofer on that node (the
    /// network does no source-address validation, as most do not).
    pub fn inject_as(&mut self, from: NodeId, src: SocketAddr, dst: SocketAddr, payload: Vec<u8>) -> DatagramId {
        let id = self.recorder.peek_id();
        self.submit_as(from.0, src, dst, payload);
        id
    }

    /// Makes a node a member of a multicast group, as a `NodeCommand::JoinGroup` from its services would.
    pub fn join_group(&mut self, id: NodeId, group: IpAddr) {
        self.apply_command(id.0, NodeCommand::JoinGroup(group));
    }

    /// Sets the loss model of the radio link between `a` and `b`, both directions.
    pub fn set_link_model(&mut self, a: NodeId, b: NodeId, model: LinkModel) {
        self.set_link_model_directed(a, b, model);
        self.set_link_model_directed(b, a, model);
    }

    /// Sets the loss model of frames from `from` to `to` only. No effect if they are not neighbours.
    pub fn set_link_model_directed(&mut self, from: NodeId, to: NodeId, model: LinkModel) {
        let idx = self.medium.intern_model(model);
        if let Some(k) = self.link_index(from.0, to.0) {
            self.medium.set_link_model(k, idx);
        }
    }

    /// Sets the loss model of every radio link.
    pub fn set_all_link_models(&mut self, model: LinkModel) {
        self.medium.set_all_link_models(model);
    }

    /// Installs a fault-injection rule: it sees every frame that reached an intended receiver intact and
    /// drops it (reason `rule`) by returning true.
    pub fn set_frame_rule(&mut self, rule: impl FnMut(&FrameInfo) -> bool + 'static) {
        self.rule = Some(Box::new(rule));
    }

    pub fn clear_frame_rule(&mut self) {
        self.rule = None;
    }

    /// Installs a datagram rule: it sees every datagram about to be delivered to a node and may deliver
    /// it, hold it back (reordering it behind later ones) or deliver it and a copy later (see
    /// [`crate::fault`]).
    pub fn set_datagram_rule(
        &mut self,
        rule: impl FnMut(&crate::fault::DatagramInfo) -> crate::fault::Mangle + 'static,
    ) {
        self.dgram_rule = Some(Box::new(rule));
    }

    /// Adds a Wi-Fi interferer; returns its index.
    pub fn add_interferer(&mut self, cfg: Interferer) -> usize {
        let id = self.medium.interferers.len() as u16;
        for node in &mut self.nodes {
            let Some(radio) = &mut node.radio else { continue };
            let reached = match cfg.reach {
                Reach::All => true,
                Reach::Within { x, y, radius } => {
                    node.position.is_some_and(|(nx, ny)| (nx - x).hypot(ny - y) <= radius)
                }
            };
            if reached && cfg.overlaps(radio.channel) {
                let mut v = radio.wifi.to_vec();
                v.push(id);
                radio.wifi = v.into_boxed_slice();
            }
        }
        let rng = Rng::stream(self.cfg.seed, 0x3_0000_0000 + u64::from(id));
        let mut st = InterfererState { cfg, process: BurstProcess::new(rng) };
        let now = self.now();
        if let Some(at) = st.process.next_start(&st.cfg, now, now) {
            self.queue.schedule_in_lane(usize::from(id), at, Ev::WifiStart(id));
        }
        self.medium.interferers.push(st);
        id as usize
    }

    /// Captures every datagram (at its source) into an in-memory pcap; see [`Sim::take_pcap`].
    pub fn capture_pcap(&mut self) {
        self.recorder.capture_pcap();
    }

    /// Captures every datagram (at its source) as pcap into `out`.
    pub fn capture_pcap_to(&mut self, out: Box<dyn Write>) -> std::io::Result<()> {
        self.recorder.capture_pcap_to(out)
    }

    /// The in-memory pcap captured so far (capture stops).
    pub fn take_pcap(&mut self) -> Option<Vec<u8>> {
        self.recorder.take_pcap()
    }

    // ---------------------------------------------------------------------------------------------
    // Running
    // ---------------------------------------------------------------------------------------------

    pub fn now(&self) -> Instant {
        self.queue.now()
    }

    /// Processes the next event; false if there is none.
    pub fn step(&mut self) -> bool {
        self.step_until(Instant::MAX)
    }

    fn step_until(&mut self, limit: Instant) -> bool {
        match self.queue.pop_until(limit) {
            Some((at, ev)) => {
                self.handle(at, ev);
                true
            }
            None => false,
        }
    }

    /// Processes every event up to and including `t`; the clock ends at `t`.
    pub fn run_until(&mut self, t: Instant) {
        while self.step_until(t) {}
        self.queue.advance_to(t);
    }

    pub fn run_for(&mut self, d: Duration) {
        let t = self.now() + d;
        self.run_until(t);
    }

    /// Runs until `done` holds (checked after every event) or `limit` passes; returns whether `done` held.
    pub fn run_until_cond(&mut self, limit: Instant, mut done: impl FnMut(&Sim) -> bool) -> bool {
        loop {
            if done(self) {
                return true;
            }
            if !self.step_until(limit) {
                self.queue.advance_to(limit);
                return done(self);
            }
        }
    }

    /// Events processed so far.
    pub fn events_processed(&self) -> u64 {
        self.queue.processed()
    }

    // ---------------------------------------------------------------------------------------------
    // Observation
    // ---------------------------------------------------------------------------------------------

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// The node's CoAP address (`[addr]:5683`).
    pub fn addr(&self, id: NodeId) -> SocketAddr {
        SocketAddr::new(self.nodes[id.index()].addr, COAP_PORT)
    }

    pub fn node_by_addr(&self, ip: IpAddr) -> Option<NodeId> {
        self.routing.by_addr.get(&ip).map(|&i| NodeId(i))
    }

    pub fn role(&self, id: NodeId) -> Role {
        self.nodes[id.index()].role
    }

    /// The routing path from `a` to `b` (both included), or `None` if there is no route.
    pub fn route(&self, a: NodeId, b: NodeId) -> Option<Vec<NodeId>> {
        let mut path = vec![a];
        let mut at = a.0;
        while at != b.0 {
            at = self.next_hop(at, b.0)?;
            path.push(NodeId(at));
            if path.len() > self.nodes.len() {
                return None;
            }
        }
        Some(path)
    }

    /// Links (radio and wired) on the route from `a` to `b`.
    pub fn hops(&self, a: NodeId, b: NodeId) -> Option<usize> {
        self.route(a, b).map(|p| p.len() - 1)
    }

    /// The routing parent of a node.
    pub fn parent(&self, id: NodeId) -> Option<NodeId> {
        self.nodes[id.index()].rparent.map(NodeId)
    }

    /// Radio neighbours of a node.
    pub fn neighbors(&self, id: NodeId) -> Vec<NodeId> {
        match &self.nodes[id.index()].radio {
            Some(r) => self.medium.nbrs[r.nbr_start as usize..r.nbr_end as usize].iter().map(|&j| NodeId(j)).collect(),
            None => Vec::new(),
        }
    }

    pub fn records(&self) -> &[Record] {
        &self.recorder.records
    }

    /// Datagrams as their sources sent them, indexed by [`DatagramId`].
    pub fn datagrams(&self) -> &[DatagramInfo] {
        &self.recorder.datagrams
    }

    pub fn datagram(&self, id: DatagramId) -> Option<&DatagramInfo> {
        self.recorder.datagrams.get(id.0 as usize)
    }

    /// The hash of every record so far (computed whether or not records are stored).
    pub fn trace_hash(&self) -> u64 {
        self.recorder.hash.value()
    }

    pub fn counters(&self, id: NodeId) -> &NodeCounters {
        &self.nodes[id.index()].counters
    }

    /// Counters of every directed radio link that carried traffic, in (from, to) order.
    pub fn link_counters(&self) -> Vec<(NodeId, NodeId, &LinkCounters)> {
        let mut out = Vec::new();
        for (i, node) in self.nodes.iter().enumerate() {
            let Some(r) = &node.radio else { continue };
            for k in r.nbr_start as usize..r.nbr_end as usize {
                if let Some(c) = &self.medium.link_counters[k] {
                    out.push((NodeId(i as u32), NodeId(self.medium.nbrs[k]), &**c));
                }
            }
        }
        out
    }

    /// Counters of the directed link `from → to`, if it carried traffic.
    pub fn link(&self, from: NodeId, to: NodeId) -> Option<&LinkCounters> {
        self.medium.link_counters[self.link_index(from.0, to.0)?].as_deref()
    }

    /// Endpoint events of requests issued directly on endpoints ([`Sim::with_node`]), with time and node.
    pub fn take_node_events(&mut self) -> Vec<(Instant, NodeId, Event)> {
        self.recorder.take_node_events()
    }

    /// Members of a multicast group.
    pub fn group_members(&self, group: IpAddr) -> Vec<NodeId> {
        let mut v: Vec<NodeId> =
            self.routing.groups.get(&group).map_or(Vec::new(), |m| m.iter().map(|&(_, n)| NodeId(n)).collect());
        v.sort();
        v
    }

    /// An estimate of the simulator's own memory (bytes): node, radio and link tables with their heap
    /// capacities, the event queue and frames on the air — not the attached CoAP nodes' internal tables,
    /// and not stored records.
    pub fn footprint(&self) -> usize {
        use std::mem::size_of;
        let mut b = size_of::<Sim>() + self.nodes.capacity() * size_of::<SimNode>();
        for n in &self.nodes {
            b += n.children.capacity() * 4 + n.wired.capacity() * 8;
            if n.proto.is_some() {
                b += size_of::<Node>();
            }
            if let Some(r) = &n.radio {
                b += r.queue.capacity() * size_of::<Outgoing>() + r.wifi.len() * 2;
            }
        }
        b +=
            self.medium.nbrs.capacity() * 4 + self.medium.link_model.capacity() * 2 + self.medium.link_state.capacity();
        b += self.medium.link_counters.capacity() * 8
            + self.medium.link_counters.iter().flatten().count() * size_of::<LinkCounters>();
        b += self.queue.capacity() * (size_of::<Ev>() + 16) + self.medium.air.capacity() * size_of::<Option<Air>>();
        b += self.routing.by_addr.capacity() * (size_of::<IpAddr>() + 4 + 8);
        b
    }

    // ---------------------------------------------------------------------------------------------
    // Internals: recording
    // ---------------------------------------------------------------------------------------------

    fn record(&mut self, r: Record) {
        self.recorder.record(r, self.cfg.record);
    }

    fn drop_dgram(&mut self, node: u32, dg: &Dgram, reason: DropReason, hops: u8) {
        self.nodes[node as usize].counters.drop(reason);
        let mut r = Record::new(self.now(), NodeId(node), RecordKind::Dropped, dg.id);
        r.reason = Some(reason);
        r.bytes = dg.payload.len() as u32;
        r.hops = hops;
        self.record(r);
    }

    fn link_index(&self, from: u32, to: u32) -> Option<usize> {
        let r = self.nodes.get(from as usize)?.radio.as_ref()?;
        let s = &self.medium.nbrs[r.nbr_start as usize..r.nbr_end as usize];
        s.binary_search(&to).ok().map(|k| r.nbr_start as usize + k)
    }

    fn link_counters_mut(&mut self, k: usize) -> &mut LinkCounters {
        self.medium.counters_mut(k)
    }

    // ---------------------------------------------------------------------------------------------
    // Internals: dispatch
    // ---------------------------------------------------------------------------------------------

    fn handle(&mut self, at: Instant, ev: Ev) {
        match ev {
            Ev::Timer(i) => {
                let node = &mut self.nodes[i as usize];
                if node.timer_at != Some(at) {
                    return;
                }
                node.timer_at = None;
                if let Some(p) = node.proto.as_deref_mut() {
                    if p.poll_timeout().is_some_and(|t| t <= at) {
                        p.handle_timeout(at);
                    }
                }
                self.drain(i, true);
            }
            Ev::Mac(i, gen, step) => self.mac_step(i, gen, step),
            Ev::TxEnd(air) => self.end_air(air),
            Ev::AckStart(j) => self.send_ack(j),
            Ev::Arrive { node, from, dg, hops } => self.arrive(node, from, dg, hops),
            Ev::SmrfForward { node, dg, hops } => self.enqueue(node, None, dg, hops),
            Ev::Late { node, dg, hops } => self.deliver_now(node, &dg, hops),
            Ev::Process(node, dg) => {
                let n = &mut self.nodes[node as usize];
                n.cpu_backlog = n.cpu_backlog.saturating_sub(1);
                self.hand_to_node(node, &dg)
            }
            Ev::WifiStart(w) => {
                let st = &mut self.medium.interferers[usize::from(w)];
                if st.cfg.load_at(at) <= 0.0 {
                    // A load change point: the load may be zero now; look for the next burst.
                    if let Some(t) = st.process.next_start(&st.cfg, at, at) {
                        self.queue.schedule_in_lane(
                            usize::from(w),
                            t.max(at + Duration::from_micros(1)),
                            Ev::WifiStart(w),
                        );
                    }
                    return;
                }
                st.process.on = true;
                st.process.count = st.process.count.wrapping_add(1);
                let burst = st.cfg.wifi.burst;
                self.queue.schedule_in_lane(usize::from(w), at + burst, Ev::WifiEnd(w));
            }
            Ev::WifiEnd(w) => {
                let st = &mut self.medium.interferers[usize::from(w)];
                st.process.on = false;
                st.process.last_off = at;
                if let Some(t) = st.process.next_start(&st.cfg, at, at) {
                    self.queue.schedule_in_lane(usize::from(w), t, Ev::WifiStart(w));
                }
            }
            Ev::ReasmTimeout(j, id) => {
                let r = self.radio(j);
                if r.reasm.as_ref().is_some_and(|re| re.id == id) {
                    r.reasm = None;
                    self.reasm_lost(j, id, 0);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_clocks_tick_at_their_own_phase_and_rate() {
        let cfg = SimConfig::new(1);
        let nominal = 1_000_000_000_000 / 128; // ps
        let clocks: Vec<NodeClock> = (0..200).map(|i| NodeClock::new(&cfg, Rng::stream(9, i))).collect();
        for c in &clocks {
            let err = c.period_ps.abs_diff(nominal) as f64 / nominal as f64;
            assert!(err <= 20e-6 + 1e-12, "rate error {err}");
            assert!(c.phase_ps < c.period_ps);
            // A 4-tick timer set anywhere fires within (3, 4] of the node's ticks.
            for now in [0u64, 1, 7_812, 1_000_000, 123_456_789] {
                let now = Instant::from_micros(now);
                let d = (c.after(now, 4) - now).as_micros() * 1_000_000;
                assert!(d + 1_000_000 > 3 * c.period_ps && d <= 4 * c.period_ps + 1_000_000, "{d} ps");
            }
        }
        // Drift: the offset between two clocks' ticks is not the same an hour later.
        let offset = |t: u64| {
            let now = Instant::from_secs(t);
            (clocks[0].after(now, 1).as_micros() as i64 - clocks[1].after(now, 1).as_micros() as i64).rem_euclid(7_812)
        };
        assert_ne!(offset(0), offset(3600));
        let exact = SimConfig { clock_tolerance_ppm: 0, ..SimConfig::new(1) };
        assert_eq!(NodeClock::new(&exact, Rng::new(3)).period_ps, nominal);
    }
}
