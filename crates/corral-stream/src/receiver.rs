//! [`StreamReceiver`]: the collector's side — streams created by POST, readings delivered in order, gaps
//! asked for, the sender's buffer acknowledged at 1/3 and 2/3 (seed 003 §3.2–3.3).
//!
//! # Who may make the collector send (issue 26 item 8)
//! A stream makes the collector send control messages to its sender — up to 65 for one reading that
//! reveals a gap, and one every few seconds while the sender is silent — so a stream must never be
//! created for, or steered by, someone who does not receive at the sender's address:
//!
//! - a POST from a source that has not proved its address is answered 4.01 with an Echo value
//!   ([`Context::challenge`], RFC 9175 §2.4), which corral's sender (and libcoap's) repeat by themselves;
//!   a blind spoofer never sees the value, so it creates nothing and gets one small answer per datagram.
//!   Over TCP the handshake is the proof.
//! - A stream's id is 64 random bits (from the service's generator, which the driver seeds from the OS)
//!   sent only to its sender's proven address in the 2.01's Location-Path, and the stream is bound to
//!   that address: a request for it from any other address is answered 4.04, as for a stream that does
//!   not exist. So every control message goes to a proven address, on behalf of the one party that knows
//!   the id.
//! - Slots are shared: one address holds at most [`MAX_PER_ADDRESS`] streams, and when all
//!   [`MAX_STREAMS`] are taken the one silent longest gives way to a new sender, if it has been silent for
//!   [`RECLAIM_AFTER`] (otherwise 5.03 with Max-Age).
//! - `GET /stream` lists the asker's own streams only (ids are credentials) and counts the rest.

use crate::option::{ScOption, SC_OPTION};
use corral_proto::wire::{Code, OptionNumber};
use corral_proto::{
    Context, Duration, InboundId, IncomingRequest, Instant, Request, ResourceLink, Response, SendParams, Service,
};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

/// Streams held at once, and the widest gap a reading may reveal (the sender never has more than its
/// buffer outstanding; this bounds the memory a hostile sender can claim).
pub const MAX_STREAMS: usize = 64;
const MAX_GAP: u32 = 1024;
/// Streams one sender address (IP) may hold at once.
pub const MAX_PER_ADDRESS: usize = 4;
/// A stream silent this long is forgotten.
const IDLE: Duration = Duration::from_secs(600);
/// When every slot is taken, a stream silent this long gives way to a new one.
pub const RECLAIM_AFTER: Duration = Duration::from_secs(30);
/// The receiver keeps asking a silent sender for its next reading this long (a sender blocked on a full
/// buffer whose acknowledgements were all lost sends nothing until it hears from the receiver).
const ASK_FOR: Duration = Duration::from_secs(120);

/// What the receiver counted, over every stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReceiverStats {
    pub streams: u64,
    /// Readings handed on in order.
    pub delivered: u64,
    pub duplicates: u64,
    /// Readings refused: a bad CoAP-SC option, AN beyond SN, a gap wider than the receiver takes.
    pub refused: u64,
    pub retransmission_requests: u64,
    pub acks: u64,
    /// Stream creations answered with an Echo challenge (the source had not proved its address).
    pub challenges: u64,
    /// Silent streams given up to make room for a new one.
    pub reclaimed: u64,
}

struct Stream {
    sender: SocketAddr,
    /// The sender's buffer size (from the POST).
    bufsize: u32,
    /// Highest SN received in order.
    an: u32,
    /// Received beyond a gap.
    ahead: BTreeSet<u32>,
    /// The AN of the data message for which the 1/3 acknowledgement went out (once per AN).
    early_ack_for: Option<u32>,
    last_data: Instant,
    /// When to ask a silent sender for its next reading (see [`next_ask`]).
    next_ask: Instant,
    idle_acks: u32,
    sc: bool,
    delivered: u64,
}

/// The receiver, mounted at `stream`: POST creates `/stream/<id>`, GET starts it, PUT carries readings,
/// DELETE ends it. GET `/stream` lists the streams and the counters (JSON).
pub struct StreamReceiver {
    streams: BTreeMap<String, Stream>,
    rto: Duration,
    stats: ReceiverStats,
    /// Ask an unverified creator to prove its address first (see the module docs).
    proof: bool,
}

impl Default for StreamReceiver {
    fn default() -> Self {
        StreamReceiver::new(Duration::from_secs(2))
    }
}

impl StreamReceiver {
    /// `rto`: after this long without a reading, the receiver tells the sender its AN (tail loss).
    pub fn new(rto: Duration) -> StreamReceiver {
        StreamReceiver { streams: BTreeMap::new(), rto, stats: ReceiverStats::default(), proof: true }
    }

    /// Creates streams without the Echo round trip for unverified senders: for the lab, whose simulated
    /// network has no spoofers and whose experiments reproduce seed 003's exchange, which has none. Never
    /// on a real network.
    pub fn without_proof_of_address(mut self) -> StreamReceiver {
        self.proof = false;
        self
    }

    pub fn stats(&self) -> ReceiverStats {
        self.stats
    }

    /// Readings delivered in order on stream `id` so far.
    pub fn delivered(&self, id: &str) -> Option<u64> {
        self.streams.get(id).map(|s| s.delivered)
    }

    /// The streams held: id and sender.
    pub fn streams(&self) -> impl Iterator<Item = (&str, SocketAddr)> {
        self.streams.iter().map(|(id, s)| (id.as_str(), s.sender))
    }

    /// `POST /stream` with the sender's buffer size: a new stream bound to the (proven) sender. `None`:
    /// the request was answered with a challenge.
    fn create(&mut self, cx: &mut Context<'_>, req: &IncomingRequest) -> Option<Response> {
        let text = String::from_utf8_lossy(&req.request.payload);
        let bufsize = match text.trim().parse::<u32>() {
            Ok(b) if (1..=MAX_GAP).contains(&b) => b,
            _ => {
                return Some(Response::error(
                    Code::BAD_REQUEST,
                    format!("the payload is the sender's buffer size, 1 to {MAX_GAP} readings"),
                ))
            }
        };
        if self.proof && !req.verified {
            self.stats.challenges += 1;
            cx.challenge(req.id);
            return None;
        }
        let now = cx.now();
        self.streams.retain(|_, s| now - s.last_data < IDLE);
        let ip = req.from.ip();
        if self.streams.values().filter(|s| s.sender.ip() == ip).count() >= MAX_PER_ADDRESS {
            let why = format!("{ip} holds {MAX_PER_ADDRESS} streams already");
            return Some(Response::error(Code::SERVICE_UNAVAILABLE, why).with_max_age(10));
        }
        if self.streams.len() >= MAX_STREAMS && !self.reclaim(now) {
            return Some(Response::error(Code::SERVICE_UNAVAILABLE, "too many streams").with_max_age(10));
        }
        let id = loop {
            let id = format!("{:016x}", cx.secret_u64());
            if !self.streams.contains_key(&id) {
                break id;
            }
        };
        self.stats.streams += 1;
        self.streams.insert(
            id.clone(),
            Stream {
                sender: req.from,
                bufsize,
                an: 0,
                ahead: BTreeSet::new(),
                early_ack_for: None,
                last_data: now,
                next_ask: now + self.rto,
                idle_acks: 0,
                sc: false,
                delivered: 0,
            },
        );
        Some(
            Response::new(Code::CREATED)
                .with_option(OptionNumber::LOCATION_PATH, b"stream")
                .with_option(OptionNumber::LOCATION_PATH, id.as_bytes()),
        )
    }

    /// Gives up the stream silent longest, if it has been silent for [`RECLAIM_AFTER`].
    fn reclaim(&mut self, now: Instant) -> bool {
        let oldest = self.streams.iter().min_by_key(|(_, s)| s.last_data).map(|(id, s)| (id.clone(), s.last_data));
        match oldest {
            Some((id, last)) if now - last >= RECLAIM_AFTER => {
                tracing::info!(stream = %id, "stream table full: a silent stream gives way");
                self.streams.remove(&id);
                self.stats.reclaimed += 1;
                true
            }
            _ => false,
        }
    }

    /// `GET /stream/<id>`: starts the stream (with the CoAP-SC option, a CoAP-SC one). `None`: answered.
    fn start(&mut self, cx: &mut Context<'_>, rid: InboundId, id: &str, req: &IncomingRequest) -> Option<Response> {
        let now = cx.now();
        let s = self.streams.get_mut(id).expect("checked by the caller");
        let mut r = Response::new(Code::CONTENT);
        if let Some(v) = req.request.options.get(SC_OPTION) {
            if ScOption::decode(v).is_none() {
                cx.respond(rid, Response::error(Code::BAD_OPTION, "the CoAP-SC option is 8 bytes"));
                return None;
            }
            s.sc = true;
            s.last_data = now;
            s.next_ask = now + self.rto;
            r = r.with_option(SC_OPTION, &ScOption { sn: 0, an: 0 }.encode());
        }
        Some(r)
    }

    /// Whether stream `id` is the one of the sender at `from`: another sender's stream is as good as none.
    fn own(&self, id: &str, from: SocketAddr) -> bool {
        self.streams.get(id).is_some_and(|s| s.sender == from)
    }

    fn send_control(&mut self, cx: &mut Context<'_>, id: &str, sc: ScOption) {
        let Some(s) = self.streams.get(id) else { return };
        let mut r = Request::new(Code::PUT).with_path(&format!("control/{id}"));
        r.options.push(SC_OPTION, &sc.encode());
        r.options.push_uint(OptionNumber::NO_RESPONSE, 26);
        if cx.request(s.sender, r, SendParams::non()).is_err() {
            tracing::debug!(%id, "control message not sent (exchange table full)");
        }
    }

    /// A CoAP-SC reading on stream `id`.
    fn on_data(&mut self, cx: &mut Context<'_>, id: &str, sc: ScOption) -> Result<(), &'static str> {
        let now = cx.now();
        let s = self.streams.get_mut(id).ok_or("no such stream")?;
        if sc.sn == 0 || sc.an > sc.sn {
            return Err("SN must be above 0 and AN at most SN");
        }
        if sc.sn > s.an.saturating_add(MAX_GAP) {
            return Err("SN too far ahead of what was received");
        }
        s.last_data = now;
        s.next_ask = now + self.rto;
        s.idle_acks = 0;
        if sc.sn <= s.an || s.ahead.contains(&sc.sn) {
            self.stats.duplicates += 1;
        } else if sc.sn == s.an + 1 {
            s.an = sc.sn;
            s.delivered += 1;
            self.stats.delivered += 1;
            while s.ahead.remove(&(s.an + 1)) {
                s.an += 1;
                s.delivered += 1;
                self.stats.delivered += 1;
            }
        } else {
            s.ahead.insert(sc.sn);
        }
        let (an, bufsize) = (s.an, s.bufsize);
        // Error handling (Figs. 11–12): ask for every reading still missing below the highest received.
        let missing: Vec<u32> = match s.ahead.iter().next_back() {
            Some(&top) => (an + 1..top).filter(|n| !s.ahead.contains(n)).take(64).collect(),
            None => Vec::new(),
        };
        // Flow control (Figs. 13–14), on the sender's view: the reading's SN and the AN it carries.
        let outstanding = sc.sn - sc.an;
        let early = 3 * outstanding >= bufsize && s.early_ack_for != Some(sc.an);
        let critical = 3 * outstanding >= 2 * bufsize;
        if early {
            s.early_ack_for = Some(sc.an);
        }
        for sn in missing {
            self.stats.retransmission_requests += 1;
            self.send_control(cx, id, ScOption { sn, an });
        }
        if early || critical {
            self.stats.acks += 1;
            self.send_control(cx, id, ScOption { sn: an, an });
        }
        Ok(())
    }

    /// The counters, the number of streams held, and the asker's own streams (ids are credentials:
    /// nobody else's are shown).
    fn status(&self, asker: SocketAddr) -> Response {
        let mine: Vec<serde_json::Value> = self
            .streams
            .iter()
            .filter(|(_, s)| s.sender == asker)
            .map(|(id, s)| serde_json::json!({ "id": id, "delivered": s.delivered, "an": s.an, "coap_sc": s.sc }))
            .collect();
        let body = serde_json::json!({ "stats": self.stats, "held": self.streams.len(), "streams": mine });
        Response::content(corral_proto::wire::ContentFormat::JSON, body.to_string().into_bytes())
    }
}

/// When to ask a silent CoAP-SC sender for its next reading: `rto` after the last reading, then every
/// 2 × `rto`, for [`ASK_FOR`] after the last reading.
fn next_ask(s: &Stream) -> Option<Instant> {
    (s.sc && s.next_ask < s.last_data + ASK_FOR).then_some(s.next_ask)
}

impl Service for StreamReceiver {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        let sub = cx.subpath(&req.request);
        let method = req.request.method;
        let r = match (sub.as_slice(), method) {
            ([], Code::GET) => self.status(req.from),
            ([], Code::POST) => match self.create(cx, &req) {
                Some(r) => r,
                None => return,
            },
            ([id], _) if !self.own(id, req.from) => Response::error(Code::NOT_FOUND, "no such stream"),
            ([id], Code::GET) => match self.start(cx, req.id, id, &req) {
                Some(r) => r,
                None => return,
            },
            ([id], Code::PUT) => match req.request.options.get(SC_OPTION).map(ScOption::decode) {
                Some(Some(sc)) => match self.on_data(cx, &id.clone(), sc) {
                    Ok(()) => Response::new(Code::CHANGED),
                    Err(why) => {
                        self.stats.refused += 1;
                        Response::error(Code::BAD_REQUEST, why)
                    }
                },
                Some(None) => {
                    self.stats.refused += 1;
                    Response::error(Code::BAD_OPTION, "the CoAP-SC option is 8 bytes: SN and AN")
                }
                None => {
                    // A baseline reading (CoAP over UDP or TCP): delivered as it comes.
                    let s = self.streams.get_mut(id.as_str()).expect("checked above");
                    s.delivered += 1;
                    s.last_data = cx.now();
                    self.stats.delivered += 1;
                    Response::new(Code::CHANGED)
                }
            },
            ([id], Code::DELETE) => {
                self.streams.remove(id.as_str());
                Response::new(Code::DELETED)
            }
            _ => Response::error(Code::METHOD_NOT_ALLOWED, "POST /stream creates; GET, PUT, DELETE /stream/<id>"),
        };
        cx.respond(req.id, r);
    }

    fn handle_timeout(&mut self, cx: &mut Context<'_>) {
        let now = cx.now();
        let due: Vec<String> = self
            .streams
            .iter()
            .filter(|(_, s)| next_ask(s).is_some_and(|t| t <= now))
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            let Some(s) = self.streams.get_mut(&id) else { continue };
            s.idle_acks += 1;
            s.next_ask = now + self.rto.saturating_mul(1 << s.idle_acks.min(1));
            let an = s.an;
            // Nothing arrived for a while: the next reading may be lost with nothing after it to reveal
            // the gap (a tail loss, or a sender blocked on a full buffer). Ask for it; the AN tells the
            // sender what it may free.
            self.stats.retransmission_requests += 1;
            self.send_control(cx, &id, ScOption { sn: an + 1, an });
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.streams.values().filter_map(next_ask).min()
    }

    fn links(&self) -> Vec<ResourceLink> {
        vec![ResourceLink::new("").attr("rt", "corral.stream").attr("title", "CoAP-SC streams (POST to create)")]
    }
}
