//! What the experiment families run on: a point's seed, the radio networks of the testbed scenarios, the
//! client on the wired host and the [`Driver`] that sends its requests through the simulator, counter
//! snapshots around a query phase, the row of one query, and DTLS on a simulated node (`dtls`).
//!
//! # What it owns
//! The pieces more than one family uses, and the shape of a family's output ([`PointRun`]). It never reads
//! a clock or draws randomness of its own: everything follows from the point's seed.

pub mod client;
mod counters;
pub mod dtls;
mod network;

use crate::record::{PointResult, QueryRow};
use crate::scenario::Point;
pub use client::{Exchange, LabClient};
use corral_proto::wire::{Code, ContentFormat};
use corral_proto::{Duration, Request, ServiceHandle};
use corral_sim::{NodeId, Sim};
pub use counters::{totals, Created, QueryPhase, Totals};
pub use network::{
    attach_client, attach_devices, build_network, link_model, node_endpoint, simulator, start_interference,
    table7_like, transmission_params, Network,
};
use std::net::SocketAddr;

/// The seed of a point: the run seed mixed with the point's replicate (1 when the sweep has none) — and
/// with nothing else. Every point of one replicate runs on the same random numbers (common random
/// numbers): two solutions, two error rates or a sensitivity variant and the base run are compared under
/// one sequence of draws, as seed 002 compared its solutions, so a difference between them is theirs and
/// not the draws'. A point keeps its seed whatever other points the sweep has (and whichever shard runs
/// it); replicates are independent.
pub fn point_seed(base: u64, p: &Point) -> u64 {
    let replicate = p.get("replicate").and_then(crate::scenario::AxisValue::num).unwrap_or(1.0);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in format!("replicate={}", crate::record::num(replicate)).bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut z = base ^ h;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What a family's run of one point gives: its rows, and the simulator it ran in (none for a family that
/// runs real programs).
pub struct PointRun {
    pub result: PointResult,
    pub trace: Option<Trace>,
}

/// A simulated point's simulator after the run, with its records if they were asked for, and the network
/// it was built from.
pub struct Trace {
    pub sim: Sim,
    pub network: Network,
}

/// The simulator of a point with the lab's client on the wired host.
pub struct Driver {
    pub sim: Sim,
    pub host: NodeId,
    pub client: ServiceHandle,
}

impl Driver {
    /// `PUT /em/{name}` with a profile document at the EM `gw`, as an experimenter would: a creation that
    /// failed (a member did not answer its validation or join in time; the EM rolled it back) is tried
    /// again, up to five times.
    pub fn create_entity(&mut self, gw: SocketAddr, name: &str, doc: Vec<u8>) -> bool {
        let req = Request::new(Code::PUT)
            .with_path(&format!("em/{name}"))
            .with_content_format(ContentFormat::JSON)
            .with_accept(ContentFormat::JSON)
            .with_payload(doc);
        for _ in 0..5 {
            if self.exchange(gw, req.clone(), Duration::from_secs(600)).code == Some(Code::CREATED) {
                return true;
            }
            self.sim.run_for(Duration::from_secs(5));
        }
        false
    }

    /// Sends a request from the client and runs until it is answered or `limit` passes.
    pub fn exchange(&mut self, dst: SocketAddr, req: Request, limit: Duration) -> Exchange {
        let (host, h) = (self.host, self.client);
        self.sim.with_service(host, h, |c: &mut LabClient, cx| c.send(cx, dst, req));
        let deadline = self.sim.now() + limit;
        self.sim.run_until_cond(deadline, |s| s.service::<LabClient>(host, h).is_some_and(|c| c.result().is_some()));
        let now = self.sim.now();
        match self.sim.service::<LabClient>(host, h).and_then(|c| c.result()) {
            Some(x) => x.clone(),
            None => Exchange { sent: now - limit, answered: now, code: None, payload: Vec::new() },
        }
    }
}

/// A row of `queries.csv` for one exchange (or, `notification`, one Observe notification, which has no
/// response time); `(point, seed)` and the counters around it.
pub fn query_row(
    (point, seed): (usize, u64),
    rep: usize,
    members: usize,
    x: &Exchange,
    notification: bool,
    (before, after): (Totals, Totals),
) -> QueryRow {
    let answered = x.code.is_some();
    QueryRow {
        point,
        rep,
        seed,
        start_s: x.sent.as_micros() as f64 / 1e6,
        // µs / 1000 is the double nearest the CSV's 3 decimals, so merged shards aggregate identically.
        response_ms: if answered && !notification { x.response_time().as_micros() as f64 / 1000.0 } else { f64::NAN },
        code: x.code.map_or_else(|| "none".to_string(), |c| format!("{c}")),
        replies: if answered { count_replies(&x.payload) } else { 0 },
        members,
        coap_retx: after.coap_retx - before.coap_retx,
        frames: after.frames - before.frames,
        mac_retries: after.mac_retries - before.mac_retries,
    }
}

/// `coap://host/path` of a node's address (an IPv6 host in brackets, the default port).
pub fn coap_uri(addr: SocketAddr, path: &str) -> String {
    match addr {
        SocketAddr::V6(a) => format!("coap://[{}]/{}", a.ip(), path),
        SocketAddr::V4(a) => format!("coap://{}/{}", a.ip(), path),
    }
}

/// Counts the member values in an EM response (JSON `values`, or 1 per member for an aggregate).
pub fn count_replies(payload: &[u8]) -> usize {
    let Ok(doc) = serde_json::from_slice::<serde_json::Value>(payload) else { return 0 };
    match doc.get("values").and_then(|v| v.as_array()) {
        Some(v) => v.len(),
        None => doc.get("replies").and_then(|r| r.as_u64()).unwrap_or(0) as usize,
    }
}
