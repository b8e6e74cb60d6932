//! [`StreamSender`]: the sensor's side — readings generated every `interval`, at most `buffer` of them
//! unacknowledged, sent with the chosen [`Scheme`], with the metrics of seed 003 §4.

use crate::option::{ScOption, SC_OPTION};
use corral_proto::wire::{Code, OptionNumber};
use corral_proto::{
    Context, Duration, IncomingRequest, Instant, Outcome, Request, RequestError, RequestId, Response, SendParams,
    Service,
};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;

/// How readings travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    /// CoAP-SC: NON PUTs with the SN/AN option; receiver-driven retransmission and flow control.
    Sc,
    /// CoAP over UDP: CON PUTs, at most `buffer` outstanding.
    Udp,
    /// CoAP over TCP (RFC 8323): PUTs on one connection, at most `buffer` outstanding.
    Tcp,
}

impl Scheme {
    pub fn parse(s: &str) -> Option<Scheme> {
        match s {
            "sc" | "coap-sc" => Some(Scheme::Sc),
            "udp" => Some(Scheme::Udp),
            "tcp" => Some(Scheme::Tcp),
            _ => None,
        }
    }
}

/// A stream to send.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamConfig {
    /// The receiver (its `/stream` resource).
    pub receiver: SocketAddr,
    pub scheme: Scheme,
    /// Readings to send (seed 003: 600) …
    pub count: u32,
    /// … of this many payload bytes (150) …
    pub size: usize,
    /// … one every `interval` (500 ms).
    pub interval: Duration,
    /// Readings the sender keeps until acknowledged (1–10 in the paper).
    pub buffer: u32,
    /// CoAP-SC: resend the oldest unacknowledged reading after this long without progress (doubling).
    pub rto: Duration,
    /// CoAP-SC: give up after this many timeouts in a row.
    pub max_retries: u32,
    /// Give up when the receiver has not been heard from for this long while something waits for it (the
    /// stream's creation, readings in the buffer): a collector that is down ends the stream instead of
    /// blocking it forever. `None`: never (the lab's lossy links, where only the retry limits apply).
    pub give_up: Option<Duration>,
}

impl StreamConfig {
    pub fn new(receiver: SocketAddr, scheme: Scheme) -> StreamConfig {
        StreamConfig {
            receiver,
            scheme,
            count: 600,
            size: 150,
            interval: Duration::from_millis(500),
            buffer: 5,
            rto: Duration::from_secs(2),
            max_retries: 6,
            give_up: None,
        }
    }
}

/// What the sender measured (seed 003 §4: NRP, TBT, TTD; per-reading delay).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Metrics {
    pub generated: u32,
    pub acknowledged: u32,
    /// Number of retransmitted packets: readings sent again (and, for CoAP over UDP, the endpoint's CON
    /// retransmissions of them).
    pub nrp: u64,
    /// Total blocking time: how long a reading waited for room in the full buffer, ms.
    pub tbt_ms: f64,
    /// Total transmission delay: first reading generated to last reading acknowledged, ms.
    pub ttd_ms: f64,
    /// Generated-to-acknowledged delay of each reading, ms, in SN order of acknowledgement.
    pub delays_ms: Vec<f64>,
    pub done: bool,
    /// Why the stream ended early, if it did.
    pub failed: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle,
    Creating,
    Starting,
    Streaming,
    Ending,
    Done,
}

struct Entry {
    generated: Instant,
    request: Option<RequestId>,
}

/// The sender. Mount it at `control` on the sensor's node (CoAP-SC control messages arrive at
/// `/control/<stream>`); it starts by itself at the first timer.
pub struct StreamSender {
    cfg: StreamConfig,
    phase: Phase,
    location: Vec<String>,
    next_generation: Instant,
    /// Readings generated but not sent: the buffer was full.
    waiting: VecDeque<(u32, Instant)>,
    buffer: BTreeMap<u32, Entry>,
    /// The receiver's cumulative acknowledgement as last heard.
    an: u32,
    requests: HashMap<RequestId, u32>,
    control: Option<RequestId>,
    /// The set-up request in flight and how often it was tried (a lossy link may eat all of a CON's
    /// transmissions; the application tries again).
    control_request: Option<Request>,
    control_attempts: u32,
    blocked_since: Option<Instant>,
    first: Option<Instant>,
    last_progress: Instant,
    retries: u32,
    /// Since when something has been waiting for the receiver without a word from it (see
    /// [`StreamConfig::give_up`]); `None` while nothing waits.
    waiting_since: Option<Instant>,
    /// When the receiver last said something (a response, a control message).
    last_heard: Instant,
    retx_at_start: u64,
    metrics: Metrics,
    /// A copy of the metrics for someone outside the node (a command line's progress display).
    report: Option<std::sync::Arc<std::sync::Mutex<Metrics>>>,
}

impl StreamSender {
    pub fn new(cfg: StreamConfig) -> StreamSender {
        StreamSender {
            cfg,
            phase: Phase::Idle,
            location: Vec::new(),
            next_generation: Instant::ZERO,
            waiting: VecDeque::new(),
            buffer: BTreeMap::new(),
            an: 0,
            requests: HashMap::new(),
            control: None,
            control_request: None,
            control_attempts: 0,
            blocked_since: None,
            first: None,
            last_progress: Instant::ZERO,
            retries: 0,
            waiting_since: None,
            last_heard: Instant::ZERO,
            retx_at_start: 0,
            metrics: Metrics::default(),
            report: None,
        }
    }

    /// Keeps `report` up to date with the metrics after every input.
    pub fn with_report(mut self, report: std::sync::Arc<std::sync::Mutex<Metrics>>) -> StreamSender {
        self.report = Some(report);
        self
    }

    fn publish(&self) {
        if let Some(r) = &self.report {
            if let Ok(mut m) = r.lock() {
                *m = self.metrics.clone();
            }
        }
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn is_finished(&self) -> bool {
        self.metrics.done || self.metrics.failed.is_some()
    }

    fn fail(&mut self, why: String) {
        tracing::info!(%why, "stream failed");
        self.metrics.failed = Some(why);
        self.phase = Phase::Done;
    }

    fn location_request(&self, method: Code) -> Request {
        let mut r = Request::new(method);
        for s in &self.location {
            r.options.push_str(OptionNumber::URI_PATH, s);
        }
        r
    }

    /// Whether the stream cannot go on without a word from the receiver: a set-up request in flight;
    /// readings sent as CON (the baselines), each answered at once by a receiver that is up; with CoAP-SC a
    /// full buffer or the last readings unacknowledged (before that, silence is normal: acknowledgements
    /// come only when the buffer is a third full).
    fn expecting(&self) -> bool {
        let stuck = match self.cfg.scheme {
            Scheme::Sc => !self.waiting.is_empty() || self.metrics.generated >= self.cfg.count,
            Scheme::Udp | Scheme::Tcp => true,
        };
        self.control.is_some() || (stuck && !self.buffer.is_empty())
    }

    /// After every input: the wait for the receiver starts when something begins to wait for it, starts
    /// again whenever the receiver is heard from, and ends when nothing waits.
    fn settle(&mut self, now: Instant) {
        self.waiting_since = self.expecting().then(|| self.waiting_since.unwrap_or(now).max(self.last_heard));
    }

    /// When the receiver's silence ends the stream.
    fn give_up_at(&self) -> Option<Instant> {
        Some(self.waiting_since? + self.cfg.give_up?).filter(|_| self.phase != Phase::Done)
    }

    fn control(&mut self, cx: &mut Context<'_>, request: Request) {
        self.control_request = Some(request.clone());
        self.control_attempts += 1;
        let params = SendParams { timeout: Some(Duration::from_secs(60)), ..SendParams::default() };
        let started = match self.cfg.scheme {
            Scheme::Tcp => cx.request_tcp(self.cfg.receiver, request, params),
            _ => cx.request(self.cfg.receiver, request, params),
        };
        match started {
            Ok(id) => self.control = Some(id),
            Err(e) => self.fail(format!("cannot reach the receiver: {e}")),
        }
    }

    fn payload(&self, sn: u32) -> Vec<u8> {
        let mut p = format!("reading {sn} ").into_bytes();
        p.resize(self.cfg.size.max(p.len()), b'.');
        p
    }

    fn transmit(&mut self, cx: &mut Context<'_>, sn: u32) {
        let mut req = self.location_request(Code::PUT).with_payload(self.payload(sn));
        let sent = match self.cfg.scheme {
            Scheme::Sc => {
                req.options.push(SC_OPTION, &ScOption { sn, an: self.an }.encode());
                req.options.push_uint(OptionNumber::NO_RESPONSE, 26);
                cx.request(self.cfg.receiver, req, SendParams::non())
            }
            Scheme::Udp => cx.request(self.cfg.receiver, req, SendParams::default()),
            Scheme::Tcp => cx.request_tcp(self.cfg.receiver, req, SendParams::default()),
        };
        match sent {
            Ok(id) if self.cfg.scheme != Scheme::Sc => {
                self.requests.insert(id, sn);
                if let Some(e) = self.buffer.get_mut(&sn) {
                    e.request = Some(id);
                }
            }
            Ok(_) => {}
            Err(e) => tracing::info!(sn, error = %e, "reading not sent now; it stays in the buffer"),
        }
    }

    /// Moves waiting readings into the buffer while there is room; keeps the blocking time.
    fn pump(&mut self, cx: &mut Context<'_>) {
        let now = cx.now();
        while self.buffer.len() < self.cfg.buffer as usize {
            let Some((sn, generated)) = self.waiting.pop_front() else { break };
            self.buffer.insert(sn, Entry { generated, request: None });
            self.transmit(cx, sn);
        }
        if self.waiting.is_empty() {
            if let Some(since) = self.blocked_since.take() {
                self.metrics.tbt_ms += (now - since).as_secs_f64() * 1000.0;
            }
        } else if self.blocked_since.is_none() {
            self.blocked_since = Some(now);
        }
    }

    fn acknowledge(&mut self, cx: &mut Context<'_>, sn: u32) {
        let now = cx.now();
        if let Some(e) = self.buffer.remove(&sn) {
            self.metrics.acknowledged += 1;
            self.metrics.delays_ms.push((now - e.generated).as_secs_f64() * 1000.0);
            self.last_progress = now;
            self.retries = 0;
            if let Some(first) = self.first {
                self.metrics.ttd_ms = (now - first).as_secs_f64() * 1000.0;
            }
        }
    }

    fn after_progress(&mut self, cx: &mut Context<'_>) {
        self.pump(cx);
        if self.phase == Phase::Streaming && self.metrics.acknowledged >= self.cfg.count {
            if self.cfg.scheme == Scheme::Udp {
                let retx = cx.endpoint().stats().retransmissions.saturating_sub(self.retx_at_start);
                self.metrics.nrp += retx;
            }
            self.phase = Phase::Ending;
            let req = self.location_request(Code::DELETE);
            self.control(cx, req);
        }
    }

    /// A CoAP-SC control message: the cumulative AN, and for SN > AN a retransmission request.
    fn on_control(&mut self, cx: &mut Context<'_>, sc: ScOption) {
        let highest = self.buffer.keys().next_back().copied().unwrap_or(self.an).max(self.an);
        if sc.an > highest {
            tracing::debug!(?sc, "acknowledgement beyond what was sent; ignored");
            return;
        }
        if sc.an > self.an {
            self.an = sc.an;
        }
        let acked: Vec<u32> = self.buffer.range(..=self.an).map(|(k, _)| *k).collect();
        for sn in acked {
            self.acknowledge(cx, sn);
        }
        self.last_progress = cx.now();
        if sc.sn > sc.an && self.buffer.contains_key(&sc.sn) {
            self.metrics.nrp += 1;
            self.transmit(cx, sc.sn);
        }
        self.after_progress(cx);
    }

    /// The sender's own timeout covers only a tail loss: once every reading is sent, nothing later can
    /// reveal a gap to the receiver. Before that, the receiver's gap requests and its idle acknowledgement
    /// do the work, and a sender timeout would only resend readings whose acknowledgement was lost.
    fn next_rto(&self) -> Option<Instant> {
        let tail = self.metrics.generated >= self.cfg.count && self.waiting.is_empty();
        (self.cfg.scheme == Scheme::Sc && self.phase == Phase::Streaming && tail && !self.buffer.is_empty())
            // Twice the receiver's idle timeout: its request for the missing reading comes first.
            .then(|| self.last_progress + self.cfg.rto.saturating_mul(2 << self.retries.min(6)))
    }
}

impl Service for StreamSender {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        self.on_request(cx, req);
        self.settle(cx.now());
        self.publish();
    }

    fn handle_response(&mut self, cx: &mut Context<'_>, id: RequestId, outcome: Outcome) {
        self.on_response(cx, id, outcome);
        self.settle(cx.now());
        self.publish();
    }

    fn handle_timeout(&mut self, cx: &mut Context<'_>) {
        self.on_timeout(cx);
        self.settle(cx.now());
        self.publish();
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match self.phase {
            Phase::Idle => Some(Instant::ZERO),
            Phase::Streaming => {
                let generation = (self.metrics.generated < self.cfg.count).then_some(self.next_generation);
                [generation, self.next_rto(), self.give_up_at()].into_iter().flatten().min()
            }
            Phase::Done => None,
            _ => self.give_up_at(),
        }
    }
}

impl StreamSender {
    fn on_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        let sc = req.request.options.get(SC_OPTION).map(ScOption::decode);
        let r = match sc {
            Some(Some(sc)) if self.phase == Phase::Streaming => {
                self.last_heard = cx.now();
                self.on_control(cx, sc);
                Response::new(Code::CHANGED)
            }
            Some(Some(_)) => Response::new(Code::CHANGED),
            Some(None) => Response::error(Code::BAD_OPTION, "the CoAP-SC option is 8 bytes: SN and AN"),
            None => Response::error(Code::BAD_REQUEST, "a control message carries the CoAP-SC option"),
        };
        cx.respond(req.id, r);
    }

    fn on_response(&mut self, cx: &mut Context<'_>, id: RequestId, outcome: Outcome) {
        if matches!(outcome, Outcome::Response { .. }) {
            self.last_heard = cx.now();
        }
        if self.control == Some(id) {
            self.control = None;
            let response = match outcome {
                Outcome::Response { response, .. } => response,
                Outcome::Failed(RequestError::Unreachable) if self.phase != Phase::Ending => {
                    return self.fail("the collector refused the request (ICMP: nothing listens there)".into());
                }
                Outcome::Failed(_) if self.phase == Phase::Ending => {
                    // Every reading is acknowledged; only the goodbye was lost.
                    self.phase = Phase::Done;
                    self.metrics.done = true;
                    return;
                }
                Outcome::Failed(_) if self.control_attempts < 4 => {
                    let again = self.control_request.clone().expect("a control request was sent");
                    return self.control(cx, again);
                }
                Outcome::Failed(e) => return self.fail(format!("the receiver did not answer: {e}")),
                _ => return,
            };
            self.control_attempts = 0;
            match (self.phase, response.code) {
                (Phase::Creating, Code::CREATED) => {
                    self.location = response
                        .options
                        .get_all(OptionNumber::LOCATION_PATH)
                        .map(|v| String::from_utf8_lossy(v).into_owned())
                        .collect();
                    if self.location.is_empty() {
                        return self.fail("the receiver created no stream resource (no Location-Path)".into());
                    }
                    self.phase = Phase::Starting;
                    let mut get = self.location_request(Code::GET);
                    if self.cfg.scheme == Scheme::Sc {
                        get.options.push(SC_OPTION, &ScOption { sn: 0, an: 0 }.encode());
                    }
                    self.control(cx, get);
                }
                (Phase::Starting, Code::CONTENT) => {
                    self.phase = Phase::Streaming;
                    self.next_generation = cx.now();
                    self.last_progress = cx.now();
                    self.retx_at_start = cx.endpoint().stats().retransmissions;
                }
                (Phase::Ending, _) => {
                    self.phase = Phase::Done;
                    self.metrics.done = true;
                }
                (_, code) => self.fail(format!("the receiver answered {code:#}: {}", response.payload_text())),
            }
            return;
        }
        let Some(sn) = self.requests.remove(&id) else { return };
        match outcome {
            Outcome::Response { response, .. } if response.code.is_success() => {
                self.acknowledge(cx, sn);
                self.after_progress(cx);
            }
            Outcome::Response { response, .. } => {
                self.fail(format!("reading {sn} refused: {:#} {}", response.code, response.payload_text()))
            }
            Outcome::Failed(RequestError::Timeout | RequestError::ConnectionClosed)
                if self.buffer.contains_key(&sn) =>
            {
                // Lost for good at the CoAP layer: the application sends the reading again.
                self.metrics.nrp += 1;
                self.transmit(cx, sn);
            }
            Outcome::Failed(e) => self.fail(format!("reading {sn}: {e}")),
            _ => {}
        }
    }

    fn on_timeout(&mut self, cx: &mut Context<'_>) {
        let now = cx.now();
        if let (Some(at), Some(limit)) = (self.give_up_at(), self.cfg.give_up) {
            if now >= at {
                return self.fail(format!("no answer from the collector for {} s", limit.as_secs_f64()));
            }
        }
        match self.phase {
            Phase::Idle => {
                self.phase = Phase::Creating;
                let post = Request::new(Code::POST).with_path("stream").with_payload(self.cfg.buffer.to_string());
                self.control(cx, post);
            }
            Phase::Streaming => {
                while now >= self.next_generation && self.metrics.generated < self.cfg.count {
                    self.metrics.generated += 1;
                    self.first.get_or_insert(self.next_generation);
                    self.waiting.push_back((self.metrics.generated, self.next_generation));
                    self.next_generation += self.cfg.interval;
                }
                if self.next_rto().is_some_and(|t| t <= now) {
                    self.retries += 1;
                    if self.retries > self.cfg.max_retries {
                        return self.fail("the receiver stopped acknowledging".into());
                    }
                    self.last_progress = now;
                    if let Some(&oldest) = self.buffer.keys().next() {
                        self.metrics.nrp += 1;
                        self.transmit(cx, oldest);
                    }
                }
                self.pump(cx);
            }
            _ => {}
        }
    }
}
