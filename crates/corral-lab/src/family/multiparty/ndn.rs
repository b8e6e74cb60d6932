//! **A lab model of an NDN forwarder** — seed 001's fourth deployment (Table II: NDN, as CCN-lite ran it
//! on RIOT), not a product feature and not an NDN implementation. It has what the paper compares: Interest
//! and Data, a Pending Interest Table that aggregates equal Interests from several faces, a content store of
//! `cs_entries` Data (least recently used out), a static FIB (one default route toward the producer), and
//! hop-wise retransmission from every PIT entry with the CoAP deployments' timers (a timeout, then up to
//! `retries` retransmissions, each after the same timeout: CCN-lite does not back off).
//!
//! What it leaves out: NDN-TLV (a packet here is a type byte, the name and a fixed-size body: a Data is the
//! 2-byte instruction under AES-CCM's 8-byte tag plus a 32-byte HMAC-SHA256 signature value and 2 bytes of
//! signature info), nonces and loop detection (the tree has no loops), Interest lifetimes beyond the
//! retransmissions, and NDN's own link layer: each packet travels between neighbours as the payload of a
//! CoAP NON POST (Interest) or PUT (Data) with No-Response, so it pays CoAP's 4-byte header, a token and
//! two short options (≈ 10 bytes) that CCN-lite's frames do not. Cryptographic operations are *counted*
//! per the NDN security model the paper uses (the producer encrypts and signs each Data it makes: one AEAD
//! and one HMAC; a consumer decrypts and verifies each Data it gets), not computed.
//!
//! [`Forwarder`] is the pure state machine (tested on its own); [`NdnNode`] runs it as a corral service on
//! a simulated node.

use super::apps::{instruction, Retrieval};
use crate::record::Ops;
use corral_proto::wire::{Code, OptionNumber};
use corral_proto::{Context, Duration, IncomingRequest, Instant, Request, SendParams, Service};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;

/// Where a packet came from or goes: the node's own application, or a neighbour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Face {
    App,
    Net(SocketAddr),
}

/// An NDN packet of the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packet {
    Interest(String),
    Data(String),
}

const INTEREST: u8 = 0x05;
const DATA: u8 = 0x06;
/// Interest body: a 4-byte nonce and a 2-byte lifetime.
const INTEREST_BODY: usize = 6;
/// Data body: 2-byte instruction + 8-byte AEAD tag, 2 bytes of signature info, a 32-byte HMAC value.
const DATA_BODY: usize = 2 + 8 + 2 + 32;

impl Packet {
    pub fn encode(&self) -> Vec<u8> {
        let (t, name, body) = match self {
            Packet::Interest(n) => (INTEREST, n, INTEREST_BODY),
            Packet::Data(n) => (DATA, n, DATA_BODY),
        };
        let mut out = Vec::with_capacity(2 + name.len() + body);
        out.push(t);
        out.extend_from_slice(name.as_bytes());
        out.push(0);
        out.resize(out.len() + body, 0xa5);
        out
    }

    pub fn decode(b: &[u8]) -> Option<Packet> {
        let (&t, rest) = b.split_first()?;
        let end = rest.iter().position(|&c| c == 0)?;
        let name = std::str::from_utf8(&rest[..end]).ok()?.to_string();
        match t {
            INTEREST => Some(Packet::Interest(name)),
            DATA => Some(Packet::Data(name)),
            _ => None,
        }
    }
}

/// The name of request k: `/instruction/t=k`.
pub fn name_of(k: u32) -> String {
    let (path, query) = instruction(k);
    format!("/{path}/{query}")
}

/// What the forwarder wants done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Send(Face, Packet),
    /// Data for the node's own application.
    Deliver(String),
    /// The node's own Interest ran out of retransmissions.
    Failed(String),
}

#[derive(Debug, Clone)]
struct PitEntry {
    faces: Vec<Face>,
    retries_left: u8,
    next: Instant,
}

/// Counters of one forwarder.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NdnStats {
    pub interests: u64,
    pub cs_hits: u64,
    pub aggregated: u64,
    pub retransmissions: u64,
    pub produced: u64,
    pub data_sent: u64,
    pub unsolicited: u64,
    pub expired: u64,
}

/// The forwarding state machine: PIT, CS, FIB (a default route), hop-wise retransmission.
#[derive(Debug)]
pub struct Forwarder {
    /// The FIB's one route toward the producer; `None` on the producer itself.
    upstream: Option<Face>,
    cs_entries: usize,
    timeout: Duration,
    retries: u8,
    pit: BTreeMap<String, PitEntry>,
    cs: HashMap<String, u64>,
    tick: u64,
    pub stats: NdnStats,
}

impl Forwarder {
    pub fn new(upstream: Option<Face>, cs_entries: usize, timeout: Duration, retries: u8) -> Forwarder {
        Forwarder {
            upstream,
            cs_entries,
            timeout,
            retries,
            pit: BTreeMap::new(),
            cs: HashMap::new(),
            tick: 0,
            stats: NdnStats::default(),
        }
    }

    fn producer(&self) -> bool {
        self.upstream.is_none()
    }

    fn cache(&mut self, name: &str) {
        if self.cs_entries == 0 {
            return;
        }
        self.tick += 1;
        if !self.cs.contains_key(name) && self.cs.len() >= self.cs_entries {
            if let Some(oldest) = self.cs.iter().min_by_key(|(_, t)| **t).map(|(n, _)| n.clone()) {
                self.cs.remove(&oldest);
            }
        }
        self.cs.insert(name.to_string(), self.tick);
    }

    fn data_to(&mut self, face: Face, name: &str, out: &mut Vec<Action>) {
        match face {
            Face::App => out.push(Action::Deliver(name.to_string())),
            f => {
                self.stats.data_sent += 1;
                out.push(Action::Send(f, Packet::Data(name.to_string())));
            }
        }
    }

    /// An Interest from `face`.
    pub fn on_interest(&mut self, now: Instant, name: &str, face: Face) -> Vec<Action> {
        let mut out = Vec::new();
        self.stats.interests += 1;
        if self.cs.contains_key(name) {
            self.stats.cs_hits += 1;
            self.tick += 1;
            self.cs.insert(name.to_string(), self.tick);
            self.data_to(face, name, &mut out);
            return out;
        }
        if self.producer() {
            // The producer makes a Data for every Interest that reaches it (its content is made on demand,
            // not kept in its content store: seed 001's ideal is 2/9 productions per request, §IV-B.3).
            self.stats.produced += 1;
            self.data_to(face, name, &mut out);
            return out;
        }
        if let Some(e) = self.pit.get_mut(name) {
            if !e.faces.contains(&face) {
                self.stats.aggregated += 1;
                e.faces.push(face);
            }
            // The same face again is a downstream retransmission: this entry retransmits on its own.
            return out;
        }
        self.pit.insert(
            name.to_string(),
            PitEntry { faces: vec![face], retries_left: self.retries, next: now + self.timeout },
        );
        let up = self.upstream.expect("not the producer");
        out.push(Action::Send(up, Packet::Interest(name.to_string())));
        out
    }

    /// A Data from `face` (unsolicited Data is dropped, as CCN-lite does).
    pub fn on_data(&mut self, name: &str, _face: Face) -> Vec<Action> {
        let mut out = Vec::new();
        let Some(e) = self.pit.remove(name) else {
            self.stats.unsolicited += 1;
            return out;
        };
        self.cache(name);
        for f in e.faces {
            self.data_to(f, name, &mut out);
        }
        out
    }

    /// Retransmits every PIT entry whose timeout passed, and ends those out of retransmissions.
    pub fn on_timeout(&mut self, now: Instant) -> Vec<Action> {
        let mut out = Vec::new();
        let due: Vec<String> = self.pit.iter().filter(|(_, e)| e.next <= now).map(|(n, _)| n.clone()).collect();
        for name in due {
            let e = self.pit.get_mut(&name).expect("listed");
            if e.retries_left == 0 {
                let e = self.pit.remove(&name).expect("listed");
                self.stats.expired += 1;
                if e.faces.contains(&Face::App) {
                    out.push(Action::Failed(name));
                }
                continue;
            }
            e.retries_left -= 1;
            e.next = now + self.timeout;
            self.stats.retransmissions += 1;
            out.push(Action::Send(self.upstream.expect("a PIT entry has an upstream"), Packet::Interest(name)));
        }
        out
    }

    pub fn next_timeout(&self) -> Option<Instant> {
        self.pit.values().map(|e| e.next).min()
    }
}

/// A consumer's schedule and records.
struct Consumer {
    client: u8,
    schedule: Vec<Instant>,
    next: usize,
    index: HashMap<String, usize>,
    retrievals: Vec<Retrieval>,
}

/// The model on a simulated node: a forwarder, and on a client its application, on the server the producer.
pub struct NdnNode {
    fwd: Forwarder,
    consumer: Option<Consumer>,
    ops: Ops,
    /// When the producer sent each Data (Fig. 8).
    pub data_out: Vec<Instant>,
}

impl NdnNode {
    /// A forwarder (or, with `upstream = None`, the producer).
    pub fn new(upstream: Option<SocketAddr>, cs_entries: usize, timeout: Duration, retries: u8) -> NdnNode {
        NdnNode {
            fwd: Forwarder::new(upstream.map(Face::Net), cs_entries, timeout, retries),
            consumer: None,
            ops: Ops::default(),
            data_out: Vec::new(),
        }
    }

    /// Makes the node a consumer that expresses `/instruction/t=k` at `schedule[k-1]`.
    pub fn with_consumer(mut self, client: u8, schedule: Vec<Instant>) -> NdnNode {
        self.consumer = Some(Consumer { client, schedule, next: 0, index: HashMap::new(), retrievals: Vec::new() });
        self
    }

    pub fn stats(&self) -> NdnStats {
        self.fwd.stats
    }

    pub fn ops(&self) -> Ops {
        self.ops
    }

    pub fn retrievals(&self) -> &[Retrieval] {
        self.consumer.as_ref().map_or(&[], |c| &c.retrievals)
    }

    pub fn finished(&self) -> bool {
        self.consumer.as_ref().is_none_or(|c| c.next >= c.schedule.len() && self.fwd.pit.is_empty())
    }

    fn apply(&mut self, cx: &mut Context<'_>, actions: Vec<Action>) {
        let producer = self.fwd.producer();
        for a in actions {
            match a {
                Action::Send(Face::Net(to), p) => {
                    let method = match p {
                        Packet::Interest(_) => Code::POST,
                        Packet::Data(_) => {
                            if producer {
                                self.data_out.push(cx.now());
                            }
                            Code::PUT
                        }
                    };
                    let mut r = Request::new(method);
                    r.options.push_str(OptionNumber::URI_PATH, "n");
                    r.options.set_uint(OptionNumber::NO_RESPONSE, 26);
                    r.payload = p.encode();
                    let _ = cx.request(to, r, SendParams::non());
                }
                Action::Send(Face::App, _) => {}
                Action::Deliver(name) => {
                    if let Some(c) = self.consumer.as_mut() {
                        if let Some(&i) = c.index.get(&name) {
                            if c.retrievals[i].done.is_none() {
                                // Decrypt the content and check its HMAC signature.
                                self.ops.aead += 1;
                                self.ops.hmac += 1;
                                c.retrievals[i].done = Some(cx.now());
                            }
                        }
                    }
                }
                Action::Failed(_) => {}
            }
        }
    }
}

impl Service for NdnNode {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        cx.discard(req.id);
        let face = Face::Net(req.from);
        let actions = match Packet::decode(&req.request.payload) {
            Some(Packet::Interest(name)) => {
                let made = self.fwd.stats.produced;
                let a = self.fwd.on_interest(cx.now(), &name, face);
                if self.fwd.stats.produced > made {
                    // The producer encrypts the content and signs the Data with an HMAC.
                    self.ops.aead += 1;
                    self.ops.hmac += 1;
                }
                a
            }
            Some(Packet::Data(name)) => self.fwd.on_data(&name, face),
            None => Vec::new(),
        };
        self.apply(cx, actions);
    }

    fn handle_timeout(&mut self, cx: &mut Context<'_>) {
        let now = cx.now();
        let mut actions = self.fwd.on_timeout(now);
        if let Some(c) = self.consumer.as_mut() {
            while c.next < c.schedule.len() && c.schedule[c.next] <= now {
                c.next += 1;
                let k = c.next as u32;
                let name = name_of(k);
                c.index.insert(name.clone(), c.retrievals.len());
                c.retrievals.push(Retrieval { client: c.client, k, sent: now, done: None });
                actions.extend(self.fwd.on_interest(now, &name, Face::App));
            }
        }
        self.apply(cx, actions);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let next = self.consumer.as_ref().and_then(|c| c.schedule.get(c.next).copied());
        match (next, self.fwd.next_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn face(n: u8) -> Face {
        Face::Net(SocketAddr::from(([10, 0, 0, n], 5683)))
    }

    fn fwd() -> Forwarder {
        Forwarder::new(Some(face(1)), 40, Duration::from_secs(2), 3)
    }

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn packets_round_trip() {
        for p in [Packet::Interest(name_of(7)), Packet::Data(name_of(1000))] {
            assert_eq!(Packet::decode(&p.encode()), Some(p));
        }
        assert_eq!(Packet::decode(&[9, b'a', 0]), None);
    }

    #[test]
    fn the_pit_aggregates_equal_interests_and_the_data_fans_out() {
        let mut f = fwd();
        let n = name_of(1);
        assert_eq!(f.on_interest(at(0), &n, face(2)), vec![Action::Send(face(1), Packet::Interest(n.clone()))]);
        assert!(f.on_interest(at(10), &n, face(3)).is_empty(), "aggregated: nothing goes upstream");
        assert!(f.on_interest(at(20), &n, face(3)).is_empty(), "the same face again: nothing either");
        assert_eq!(f.stats.aggregated, 1);
        let out = f.on_data(&n, face(1));
        assert_eq!(
            out,
            vec![Action::Send(face(2), Packet::Data(n.clone())), Action::Send(face(3), Packet::Data(n.clone()))]
        );
        assert!(f.on_data(&n, face(1)).is_empty(), "a second Data is unsolicited");
        assert_eq!(f.stats.unsolicited, 1);
    }

    #[test]
    fn the_content_store_answers_and_forgets_the_least_recent() {
        let mut f = Forwarder::new(Some(face(1)), 2, Duration::from_secs(2), 3);
        for k in 1..=2 {
            f.on_interest(at(0), &name_of(k), face(2));
            f.on_data(&name_of(k), face(1));
        }
        assert_eq!(f.on_interest(at(5), &name_of(1), face(3)), vec![Action::Send(face(3), Packet::Data(name_of(1)))]);
        assert_eq!(f.stats.cs_hits, 1);
        f.on_interest(at(6), &name_of(3), face(2));
        f.on_data(&name_of(3), face(1)); // evicts t=2, the least recently used
        assert_eq!(
            f.on_interest(at(7), &name_of(2), face(3)),
            vec![Action::Send(face(1), Packet::Interest(name_of(2)))]
        );
        let mut p = Forwarder::new(None, 40, Duration::from_secs(2), 3);
        assert_eq!(p.on_interest(at(0), &name_of(1), face(2)), vec![Action::Send(face(2), Packet::Data(name_of(1)))]);
        assert_eq!(p.on_interest(at(1), &name_of(1), face(3)), vec![Action::Send(face(3), Packet::Data(name_of(1)))]);
        assert_eq!((p.stats.produced, p.stats.cs_hits), (2, 0), "the producer makes a Data per Interest");
    }

    #[test]
    fn pit_entries_retransmit_hop_wise_then_give_up() {
        let mut f = fwd();
        let n = name_of(4);
        f.on_interest(at(0), &n, Face::App);
        assert_eq!(f.next_timeout(), Some(at(2000)));
        assert!(f.on_timeout(at(1999)).is_empty());
        for (i, t) in [2000, 4000, 6000].into_iter().enumerate() {
            assert_eq!(f.on_timeout(at(t)), vec![Action::Send(face(1), Packet::Interest(n.clone()))], "retry {i}");
        }
        assert_eq!(f.on_timeout(at(8000)), vec![Action::Failed(n.clone())]);
        assert_eq!((f.stats.retransmissions, f.stats.expired), (3, 1));
        assert_eq!(f.next_timeout(), None);
        // A Data in time ends the retransmissions.
        f.on_interest(at(9000), &n, Face::App);
        assert_eq!(f.on_data(&n, face(1)), vec![Action::Deliver(n.clone())]);
        assert!(f.on_timeout(at(20_000)).is_empty());
    }
}
