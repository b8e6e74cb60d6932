//! The timers of corral-sim's TCP (`SimConfig::tcp`: smoltcp patched so that its RTO bounds are
//! settable) and its count of messages sent again: a lost SYN is resent after the profile's initial RTO, a
//! lost data segment no sooner than Linux's 200 ms, the back-off stops at RFC 6298's cap, and a segment sent
//! again counts every CoAP message it carries. The losses are the wired link's timed outages
//! (`Sim::set_wired_outages`), so they fall at known instants. Virtual time, seeded: nothing here is timed
//! on the machine.

use corral_proto::wire::Code;
use corral_proto::{
    Context, Duration, Endpoint, IncomingRequest, Instant, Node, Outcome, Request, RequestId, SendParams, Service,
};
use corral_sim::workload::Responder;
use corral_sim::{NodeId, NodeSpec, Outages, Role, Sim, SimConfig, TcpTimers, Topology, WiredSpec};

/// Sends one GET over TCP to `dst` at 0.5 s (the connection is then up, its round trip measured), then
/// `burst` GETs at once at `at`; records when the last answer came.
struct Burst {
    dst: std::net::SocketAddr,
    warmed: bool,
    at: Instant,
    burst: u32,
    sent: bool,
    pending: Vec<RequestId>,
    ok: u32,
    done_at: Option<Instant>,
}

impl Service for Burst {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        cx.respond(req.id, corral_proto::Response::new(Code::NOT_FOUND));
    }
    fn handle_response(&mut self, cx: &mut Context<'_>, id: RequestId, outcome: Outcome) {
        if !self.pending.contains(&id) {
            return; // the warm-up's answer
        }
        self.pending.retain(|p| *p != id);
        if matches!(outcome, Outcome::Response { ref response, .. } if response.code == Code::CONTENT) {
            self.ok += 1;
        }
        if self.pending.is_empty() {
            self.done_at = Some(cx.now());
        }
    }
    fn handle_timeout(&mut self, cx: &mut Context<'_>) {
        if !self.warmed && self.at > WARM_UP && cx.now() >= WARM_UP {
            self.warmed = true;
            let params = SendParams { timeout: Some(Duration::from_secs(600)), ..SendParams::default() };
            let _ = cx.request_tcp(self.dst, Request::get("temp"), params);
            return;
        }
        if self.sent || cx.now() < self.at {
            return;
        }
        self.sent = true;
        for _ in 0..self.burst {
            let params = SendParams { timeout: Some(Duration::from_secs(600)), ..SendParams::default() };
            if let Ok(id) = cx.request_tcp(self.dst, Request::get("temp"), params) {
                self.pending.push(id);
            }
        }
    }
    fn poll_timeout(&self) -> Option<Instant> {
        if !self.warmed && self.at > WARM_UP {
            return Some(WARM_UP);
        }
        (!self.sent).then_some(self.at)
    }
}

struct Run {
    ok: u32,
    done_at: Instant,
    segments: u64,
    messages: u64,
}

/// A client on the wired host sends `burst` GETs at `at` to the gateway; the link is down for `down` from
/// each multiple of `period` (the first at time zero).
fn run(timers: TcpTimers, at: Duration, burst: u32, period: Duration, down: Duration) -> Run {
    let mut topo = Topology::new();
    let gw = topo.add(NodeSpec::new(Role::Gateway, None));
    let host = topo.add_wired_host(gw, WiredSpec { bandwidth: 1_000_000, ..WiredSpec::ethernet(0, 0) });
    let mut cfg = SimConfig::new(5);
    cfg.tcp = timers;
    let mut sim = Sim::from_topology(cfg, &topo);
    let (server, client) = (NodeId(gw as u32), NodeId(host as u32));
    assert!(sim.set_wired_outages(server, client, Outages { p: 1.0, period, duration: down }));
    let mut s = Node::new(Endpoint::new(sim.endpoint_config(server)));
    s.mount("temp", Responder::new("21.5"));
    sim.attach(server, s);
    let dst = sim.addr(server);
    let mut c = Node::new(Endpoint::new(sim.endpoint_config(client)));
    let b = Burst {
        dst,
        warmed: false,
        at: Instant::ZERO + at,
        burst,
        sent: false,
        pending: Vec::new(),
        ok: 0,
        done_at: None,
    };
    let h = c.mount("client", b);
    sim.attach(client, c);
    sim.run_until_cond(Instant::from_secs(600), |sim| {
        sim.service::<Burst>(client, h).is_some_and(|b| b.done_at.is_some())
    });
    let b = sim.service::<Burst>(client, h).expect("the client");
    Run {
        ok: b.ok,
        done_at: b.done_at.expect("every request answered"),
        segments: sim.tcp_retransmissions(client),
        messages: sim.tcp_retransmitted_messages(client),
    }
}

const LONG: Duration = Duration::from_secs(1000);
const WARM_UP: Instant = Instant::from_millis(500);

#[test]
fn a_lost_syn_is_resent_after_the_profiles_initial_rto() {
    // The link is down for the first 100 ms: the SYN at time zero is lost.
    let down = Duration::from_millis(100);
    let linux = run(TcpTimers::linux(), Duration::ZERO, 1, LONG, down);
    let smoltcp = run(TcpTimers::default(), Duration::ZERO, 1, LONG, down);
    println!("answered at: Linux {:?}, smoltcp {:?}", linux.done_at, smoltcp.done_at);
    assert_eq!((linux.ok, smoltcp.ok), (1, 1));
    // Linux: TCP_TIMEOUT_INIT, 1 s; smoltcp's own estimate before a sample: 700 ms.
    assert!(linux.done_at >= Instant::from_millis(1000), "{:?}", linux.done_at);
    assert!(smoltcp.done_at < Instant::from_millis(1000), "{:?}", smoltcp.done_at);
}

#[test]
fn a_lost_segment_is_resent_after_srtt_plus_linuxs_200ms() {
    // The connection is up at 0.5 s, its round trip (a few ms) measured; the GET at 2 s falls into an
    // outage (every 2 s, 50 ms long). Linux: RTO = SRTT +
    // max(200 ms, 4·RTTVAR) ≈ 210 ms (RFC 6298's first sample: SRTT = R, RTTVAR = R/2). smoltcp's own
    // averages from a 300 ms guess and waits about 800 ms after one sample.
    let (at, period, down) = (Duration::from_secs(2), Duration::from_secs(2), Duration::from_millis(50));
    let linux = run(TcpTimers::linux(), at, 1, period, down);
    let smoltcp = run(TcpTimers::default(), at, 1, period, down);
    println!("answered at: Linux {:?}, smoltcp {:?}", linux.done_at, smoltcp.done_at);
    assert!(
        linux.done_at >= Instant::from_millis(2200) && linux.done_at < Instant::from_millis(2300),
        "{:?}",
        linux.done_at
    );
    assert!(smoltcp.done_at >= Instant::from_millis(2300), "{:?}", smoltcp.done_at);
}

#[test]
fn the_rfc6298_back_off_stops_at_its_cap() {
    // Down for the first 40 s: SYNs at 0, 1, 3, 7, 15, 31 s, then 16 s apart when capped at 16 s (47 s),
    // 32 s apart when not (63 s).
    let down = Duration::from_secs(40);
    let capped = run(TcpTimers::rfc6298(16_000), Duration::ZERO, 1, LONG, down);
    let uncapped = run(TcpTimers::rfc6298(120_000), Duration::ZERO, 1, LONG, down);
    println!("answered at: cap 16 s {:?}, cap 120 s {:?}", capped.done_at, uncapped.done_at);
    assert!(
        capped.done_at >= Instant::from_secs(47) && capped.done_at < Instant::from_secs(48),
        "{:?}",
        capped.done_at
    );
    assert!(uncapped.done_at >= Instant::from_secs(63), "{:?}", uncapped.done_at);
}

#[test]
fn a_segment_sent_again_counts_every_message_it_carries() {
    // Four GETs written at once into an outage: the segments that repeat them carry all four.
    let (at, period, down) = (Duration::from_secs(2), Duration::from_secs(2), Duration::from_millis(300));
    let r = run(TcpTimers::linux(), at, 4, period, down);
    println!("segments sent again {}, messages sent again {}", r.segments, r.messages);
    assert_eq!(r.ok, 4);
    assert!(r.segments >= 1, "the outage cost a retransmission");
    assert!(r.messages >= 2 * r.segments, "{} messages in {} segments", r.messages, r.segments);
}
