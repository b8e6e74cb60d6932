//! `[baseline]`: seed 002's evaluation of CoAP against HTTP (TinyCoAP §6). A
//! client on the gateway (the paper's PC behind its 6LoWPAN base station) asks a server mote one IEEE
//! 802.15.4 hop away for `GET /test`, whose body has `payload` bytes:
//! - `coap`: corral's endpoint on both sides (corral-sim's `Responder` and `GroupClient`): CON requests one
//!   after the other, or NON requests at `rate` per second (§6.4 used NON for the workload). The server
//!   stands for TinyCoAP;
//! - `coapblip`: the same endpoints with the server on CoapBlip's profile, the implementation the paper
//!   measures TinyCoAP against (see "Server profiles");
//! - `http-tcp`, `http-persistent`, `http-udp`: the HTTP/1.1 baselines of `corral_sim::http` over the
//!   simulated TCP (smoltcp) or over UDP. Lab baselines, not corral features;
//! - `coap-aa`: `coap` again on a second sequence of draws ([`aa_seed`]), the A/A baseline whose spread
//!   against `coap` is the noise the findings compare solutions beside.
//!
//! Loss, for `snr_db` (none at 0), two procedures:
//! - `loss_model = "message"`, the paper's (§6.5): "Should the random number be less than or equal to the
//!   error rate, the CoAP or HTTP message received by the server is discarded at UDP layer" — a datagram
//!   (a CoAP or HTTP/UDP message, or a TCP segment) of `f` 6LoWPAN fragments is discarded whole at its
//!   destination with Table 4's `C_f` (`Sim::set_message_discard`), at the server only or at either end
//!   (`discard_at`); the radio itself loses nothing;
//! - `loss_model = "frames"`, corral's variant: Table 4's unfragmented column `C₁` is read back through Eqs.
//!   (3) and (1) into a symbol error rate (`LinkModel::SymbolErrors`), frames of every length are lost by
//!   Eq. (1), and the simulator does the MAC retries (Eq. (3)) and the fragmentation (Eq. (4)) itself.
//!
//! The paper's own Eqs. (1)-(2) with its SNRs do not give Table 4 (see `corral_sim::loss`), so the table,
//! not the SNR, is the input either way.
//!
//! Timers (§6.5): CoAP's ACK_TIMEOUT 1 s without randomness, MAX_RETRANSMIT 4; TCP's RTO 1 s initial (RFC
//! 6298, also its minimum), doubling up to 16 s (`tcp = "paper"`), or smoltcp's own (`"smoltcp"`).
//!
//! CPU: `[calibration] processing_delay_ms` (and `rx_queue`) delay every datagram each node receives,
//! whatever its protocol.
//!
//! Server profiles (seed 002 §4.2-4.3, §6), in what the text says differs between TinyCoAP and CoapBlip:
//! - the largest response body: TinyCoAP `tinycoap_max_payload` (1200 B, its compile-time PoolC size),
//!   CoapBlip `coapblip_max_payload` (650 B). A GET for more is answered 5.00 (Internal Server Error) with a
//!   diagnostic — assumed: the paper says only that CoapBlip cannot send more, so the lab has it fail
//!   visibly, as a server that cannot allocate its response, never with a truncated body; the client
//!   counts the transaction unanswered, so the series end at the limit;
//! - the receive path: TinyCoAP copies the PDU out of Blip's UDP buffer into its pool, "Once the PDU
//!   structure has been created, the UDP buffer is ready to receive a new incoming packet" — requests wait
//!   in the pool (`[calibration] rx_queue` of them) while one is processed. CoapBlip keeps the PDU in its
//!   malloc'd UDP-level buffer and reads it through pointers (`coapblip_buffer = "held"`): the buffer stays
//!   taken until the request has been processed, and a datagram arriving meanwhile is lost — the server
//!   mote's receive queue has no waiting room (`Sim::set_rx_queue(server, Some(0))`). With no processing
//!   time the buffer frees as soon as it is taken and the profiles receive alike;
//! - processing time: "The memory allocation used in CoapBlip causes a growth of the packet processing
//!   time" (§6.2), with no number; none is invented — both profiles take `[calibration]`'s, so the latency,
//!   energy and goodput gaps the paper puts down to it cannot be derived here (the findings say so).
//!
//! Radio: IEEE 802.15.4 at 250 kb/s; `radio_speed` k ≠ 1 makes every radio timing k times as fast (a
//! deliberately wrong model for sensitivity variants; energy keeps the 250 kb/s byte time).
//!
//! Energy: the server mote's radio time transmitting and receiving frames (data and MAC ACKs, PHY headers
//! included, 32 µs per byte at 250 kb/s) × the CC2420 datasheet currents (SWRS041: RX 18.8 mA, TX 17.4 mA
//! at 0 dBm) × 3 V, per answered transaction. Like the paper's measurement, it leaves out idle listening
//! (no duty cycling; §6.3: "the energy wasted by the radio chip for listening the channel" is not taken
//! into account) and the CPU (corral-sim has no CPU energy model; the paper's differences come from packet
//! processing, which this cannot show).
//!
//! Owns: the mapping of a `[baseline]` point onto the simulator and its measurement; it never reads a clock
//! or draws randomness of its own.
//!
//! Rows: one `queries.csv` row per transaction (its response time; `replies` 1 when answered); the point's
//! goodput, energy, bytes on the air, application-layer loss and fragments in `points.csv`.

use crate::error::{RunError, ScenarioError};
use crate::harness::{query_row, totals, Exchange, Network, PointRun, Trace};
use crate::record::{BaselineFacts, Facts, LinkRow, NodeRole, NodeRow, PointResult, PointRow, QueryRow};
use crate::scenario::{BaselineSpec, Common, AA_TWIN};
use corral_proto::wire::Code;
use corral_proto::{Context, Duration, Endpoint, IncomingRequest, Instant, Node, Response, SendParams, Service};
use corral_sim::http::{HttpClient, HttpServer, HttpTransport, HTTP_PORT};
use corral_sim::loss::snr;
use corral_sim::workload::{GroupClient, Pacing, Responder};
use corral_sim::{LinkModel, NodeId, RecordKind, Sim, SimConfig, TcpTimers, Topology};
use std::collections::HashSet;
use std::net::SocketAddr;

/// CC2420 (TelosB) datasheet figures: receive current, transmit current at 0 dBm (mA), supply (V).
pub const CC2420_RX_MA: f64 = 18.8;
pub const CC2420_TX_MA: f64 = 17.4;
pub const SUPPLY_V: f64 = 3.0;
/// Airtime of a byte at 250 kb/s, s.
const BYTE_S: f64 = 32e-6;
/// An Imm-ACK frame on the air (5 B MPDU + 6 B PHY).
const ACK_BYTES: u64 = 11;

/// One transaction: sent, answered (if it was) and body bytes.
type Tx = (Instant, Option<Instant>, usize);

/// Runs one point. The simulator always keeps its records: energy is computed from them. Of the common
/// setup it models the CPU.
pub fn run(c: &Common, b: &BaselineSpec, index: usize, seed: u64) -> Result<PointRun, RunError> {
    let seed = if b.solution == AA_TWIN { aa_seed(seed) } else { seed };
    let topo = Topology::star(1);
    let mut cfg = SimConfig::new(seed);
    cfg.record = true;
    cfg.processing_delay = Duration::from_micros((c.cpu.processing_delay_ms * 1000.0).round() as u64);
    cfg.rx_queue = c.cpu.rx_queue;
    if b.radio_speed != 1.0 {
        let r = &mut cfg.radio;
        let k = b.radio_speed;
        r.bit_rate = (f64::from(r.bit_rate) * k).round() as u32;
        for t in [&mut r.turnaround, &mut r.cca, &mut r.unit_backoff, &mut r.ack_wait] {
            *t = Duration::from_micros((t.as_micros() as f64 / k).round() as u64);
        }
    }
    if b.tcp == "paper" {
        cfg.tcp = TcpTimers::rfc6298(b.tcp_max_rto_ms);
    }
    let mut sim = Sim::from_topology(cfg, &topo);
    let (client, server) = (NodeId(0), NodeId(1));
    if b.snr_db != 0.0 {
        let bad =
            || ScenarioError::invalid(format!("baseline.snr_db {}: 0 or one of Table 4's 2.5, 2, 1.5, 1", b.snr_db));
        if b.loss_model == "frames" {
            let ser = snr::table4_symbol_error_rate(b.snr_db).ok_or_else(bad)?;
            sim.set_all_link_models(LinkModel::SymbolErrors { ser });
        } else {
            let by_frames =
                (1..=snr::TABLE4.len()).map(|f| snr::table4(b.snr_db, f).ok_or_else(bad)).collect::<Result<_, _>>()?;
            let only = (b.discard_at == "server").then_some(server);
            sim.set_message_discard(only, by_frames);
        }
    }
    let limit = Instant::ZERO + Duration::from_secs(b.limit_s);
    let interval = (b.rate > 0.0).then(|| Duration::from_micros((1e6 / b.rate).round() as u64));
    let txs: Vec<Tx> = if matches!(b.solution.as_str(), "coap" | "coapblip" | AA_TWIN) {
        let blip = b.solution == "coapblip";
        let mut sc = sim.endpoint_config(server);
        sc.params.ack_timeout = Duration::from_millis(b.ack_timeout_ms);
        let mut s = Node::new(Endpoint::new(sc));
        let (profile, max) =
            if blip { ("CoapBlip", b.coapblip_max_payload) } else { ("TinyCoAP", b.tinycoap_max_payload) };
        if b.payload > max {
            s.mount("test", TooLarge { profile, max, payload: b.payload });
        } else {
            s.mount("test", Responder::new(vec![b'x'; b.payload]));
        }
        sim.attach(server, s);
        if blip && b.coapblip_buffer == "held" {
            // §4.3: the request stays in CoapBlip's UDP-level buffer while it is processed.
            sim.set_rx_queue(server, Some(0));
        }
        let mut cc = sim.endpoint_config(client);
        cc.params.ack_timeout = Duration::from_millis(b.ack_timeout_ms);
        // Seed 002 §6.5: "avoid any randomness in the calculation of the subsequent values".
        cc.params.ack_random_factor = 1.0;
        cc.params.max_retransmit = b.max_retransmit;
        cc.params.nstart = u16::MAX;
        let mut c = Node::new(Endpoint::new(cc));
        let targets = vec![sim.addr(server); b.count];
        let mut gc = GroupClient::new(targets, "test", interval.map_or(Pacing::AfterResponse, Pacing::Interval));
        if interval.is_some() {
            // The workload (§6.4): NON, and a request unanswered for 2 s is lost (as HTTP/UDP's).
            gc.params = SendParams { timeout: Some(Duration::from_secs(2)), ..SendParams::non() };
        }
        let h = c.mount("client", gc);
        sim.attach(client, c);
        sim.with_service(client, h, |g: &mut GroupClient, cx| g.start(cx));
        sim.run_until_cond(limit, |s| s.service::<GroupClient>(client, h).is_some_and(GroupClient::done));
        let g = sim.service::<GroupClient>(client, h).ok_or(RunError::Lost("the client"))?;
        g.outcomes
            .iter()
            .map(|o| {
                let ok = o.code.is_some_and(|c| c == Code::CONTENT);
                (o.sent, o.finished.filter(|_| ok), if ok { b.payload } else { 0 })
            })
            .collect()
    } else {
        let transport = match b.solution.as_str() {
            "http-tcp" => HttpTransport::Tcp,
            "http-persistent" => HttpTransport::Persistent,
            _ => HttpTransport::Udp,
        };
        sim.attach_app(server, Box::new(HttpServer::new("test", b.payload)));
        let dst = SocketAddr::new(sim.addr(server).ip(), HTTP_PORT);
        let mut hc = HttpClient::new(dst, transport, "test", b.count);
        hc.interval = interval;
        sim.attach_app(client, Box::new(hc));
        sim.with_app(client, |now, c: &mut HttpClient| c.start(now));
        sim.run_until_cond(limit, |s| s.app::<HttpClient>(client).is_some_and(HttpClient::done));
        let c = sim.app::<HttpClient>(client).ok_or(RunError::Lost("the client"))?;
        c.transactions.iter().map(|t| (t.sent, t.answered, t.body)).collect()
    };
    let facts = facts(&sim, server, &txs);
    Ok(point(sim, index, seed, &txs, facts))
}

/// The A/A twin's seed: its point's (the one `coap` draws from in the same replicate, common random
/// numbers) mixed with a constant, so that the twin meets a second sequence of draws. Deterministic: the
/// run stays byte-identical from its seed.
pub fn aa_seed(seed: u64) -> u64 {
    let mut z = seed ^ 0x4141_5f74_7769_6e00; // "AA_twin"
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A server profile's resource when the body asked for exceeds what the profile can build: 5.00 with a
/// diagnostic (see the module docs).
struct TooLarge {
    profile: &'static str,
    max: usize,
    payload: usize,
}

impl Service for TooLarge {
    fn handle_request(&mut self, cx: &mut Context<'_>, request: IncomingRequest) {
        let why = format!("{} B body exceeds {}'s {} B maximum payload", self.payload, self.profile, self.max);
        cx.respond(request.id, Response::error(Code::INTERNAL_SERVER_ERROR, why));
    }
}

/// Goodput, energy, bytes and loss of a finished run (see the module docs).
fn facts(sim: &Sim, server: NodeId, txs: &[Tx]) -> BaselineFacts {
    let answered = txs.iter().filter(|t| t.1.is_some()).count();
    let (mut tx_bytes, mut rx_bytes, mut air) = (0u64, 0u64, 0u64);
    let mut delivered = HashSet::new();
    for r in sim.records() {
        let b = u64::from(r.bytes);
        match r.kind {
            RecordKind::FrameSent => {
                air += b;
                if r.node == server {
                    tx_bytes += b;
                }
            }
            RecordKind::FrameReceived => {
                // Received, and acknowledged with an Imm-ACK.
                air += ACK_BYTES;
                if r.node == server {
                    rx_bytes += b;
                    tx_bytes += ACK_BYTES;
                }
            }
            RecordKind::FrameLost if r.node == server && r.reason != Some(corral_sim::DropReason::HalfDuplex) => {
                // The radio received it, corrupted.
                rx_bytes += b;
            }
            RecordKind::AckReceived if r.node == server => rx_bytes += ACK_BYTES,
            RecordKind::AckLost => air += ACK_BYTES,
            RecordKind::Delivered => {
                delivered.insert(r.datagram);
            }
            _ => {}
        }
    }
    let joules_per_byte_ma = SUPPLY_V * BYTE_S; // mJ per (byte × mA)
    let energy = (tx_bytes as f64 * CC2420_TX_MA + rx_bytes as f64 * CC2420_RX_MA) * joules_per_byte_ma;
    // The server's largest datagrams (its responses): their fragments and how many never arrived.
    let ours: Vec<_> = sim.datagrams().iter().filter(|d| d.node == server).collect();
    let frags = ours.iter().filter_map(|d| d.layout.map(|l| l.frames)).max().unwrap_or(0);
    let big: Vec<_> = ours.iter().filter(|d| d.layout.is_some_and(|l| l.frames == frags)).collect();
    let lost = big.iter().filter(|d| !delivered.contains(&d.id)).count();
    let per = |x: f64| if answered == 0 { f64::NAN } else { x / answered as f64 };
    let first = txs.first().map(|t| t.0);
    let last = txs.iter().filter_map(|t| t.1).max();
    let goodput = match (first, last) {
        (Some(a), Some(z)) if z > a => txs.iter().map(|t| t.2).sum::<usize>() as f64 / (z - a).as_secs_f64(),
        _ => f64::NAN,
    };
    BaselineFacts {
        goodput,
        energy_mj: per(energy),
        air_bytes: per(air as f64),
        dgram_loss: if big.is_empty() { f64::NAN } else { lost as f64 / big.len() as f64 },
        frags: f64::from(frags),
    }
}

fn point(sim: Sim, index: usize, seed: u64, txs: &[Tx], baseline: BaselineFacts) -> PointRun {
    let totals = totals(&sim, &[0]);
    let queries: Vec<QueryRow> = txs
        .iter()
        .enumerate()
        .map(|(i, &(sent, answered, _))| {
            let x = Exchange {
                sent,
                answered: answered.unwrap_or(sent),
                code: answered.map(|_| Code::CONTENT),
                payload: Vec::new(),
            };
            let mut q = query_row((index, seed), i, 1, &x, false, (totals, totals));
            q.replies = usize::from(answered.is_some());
            q
        })
        .collect();
    let c = |i: u32| sim.counters(NodeId(i)).clone();
    let (cc, sc) = (c(0), c(1));
    let point = PointRow {
        frames: cc.frames_sent + sc.frames_sent,
        mac_retries: cc.mac_retries + sc.mac_retries,
        busy_ccas: cc.busy_ccas + sc.busy_ccas,
        coap_retx: sim.node(NodeId(0)).map_or(0, |n| n.endpoint().stats().retransmissions),
        max_link_frames: cc.frames_sent.max(sc.frames_sent),
        max_link: if cc.frames_sent >= sc.frames_sent { "0->1".into() } else { "1->0".into() },
        max_node_frames: sc.frames_sent + sc.frames_received,
        max_node: 1,
        events: sim.events_processed(),
        window_s: sim.now().as_secs_f64(),
        ..PointRow::new(index, seed, Facts::Baseline(baseline))
    };
    let links = vec![
        LinkRow {
            point: index,
            from: 0,
            to: 1,
            frames: cc.frames_sent,
            retransmissions: cc.mac_retries,
            received: sc.frames_received,
        },
        LinkRow {
            point: index,
            from: 1,
            to: 0,
            frames: sc.frames_sent,
            retransmissions: sc.mac_retries,
            received: cc.frames_received,
        },
    ];
    let node = |n: u32, role: NodeRole, c: &corral_sim::NodeCounters| NodeRow {
        point: index,
        node: n,
        role,
        hops: n,
        frames_sent: c.frames_sent,
        frames_received: c.frames_received,
        datagrams_forwarded: 0,
    };
    let nodes = vec![node(0, NodeRole::Client, &cc), node(1, NodeRole::Server, &sc)];
    let network = Network { topology: Topology::star(1), gateways: vec![0], members: vec![vec![1]], host: 0 };
    PointRun { result: PointResult { queries, point, links, nodes }, trace: Some(Trace { sim, network }) }
}
