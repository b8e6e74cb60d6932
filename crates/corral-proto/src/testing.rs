//! An in-memory network on virtual time for tests: nodes exchange datagrams through queues, time jumps to
//! the next delivery or timer, and a filter can drop any datagram. Nothing sleeps, nothing reads a clock.
//!
//! This is the quinn-style `Pair` generalised to N nodes and multicast; the full radio simulator lives in
//! `corral-sim`.

use crate::node::Node;
use crate::time::{Duration, Instant};
use corral_wire::{Message, Packet};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::net::{IpAddr, SocketAddr};

/// One datagram that went over the in-memory network.
#[derive(Debug, Clone)]
pub struct Record {
    pub sent_at: Instant,
    pub from: SocketAddr,
    pub to: SocketAddr,
    /// The node it was delivered to (several records for a multicast), or `None` if dropped/unroutable.
    pub delivered_to: Option<SocketAddr>,
    pub bytes: Vec<u8>,
}

impl Record {
    pub fn message(&self) -> Option<Message> {
        Message::parse(&self.bytes).ok()
    }
}

type DropRule = Box<dyn FnMut(&Record) -> bool>;

struct InFlight {
    at: Instant,
    seq: u64,
    from: SocketAddr,
    to_node: usize,
    dst_ip: IpAddr,
    bytes: Vec<u8>,
}

impl PartialEq for InFlight {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for InFlight {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// A set of nodes on one lossless (unless told otherwise) in-memory network with a fixed latency.
pub struct Net {
    pub now: Instant,
    pub latency: Duration,
    nodes: Vec<(SocketAddr, Node)>,
    groups: BTreeMap<IpAddr, Vec<usize>>,
    in_flight: BinaryHeap<Reverse<InFlight>>,
    seq: u64,
    drop_rule: Option<DropRule>,
    pub records: Vec<Record>,
}

impl Default for Net {
    fn default() -> Self {
        Net::new(Duration::from_millis(10))
    }
}

impl Net {
    pub fn new(latency: Duration) -> Net {
        Net {
            now: Instant::ZERO,
            latency,
            nodes: Vec::new(),
            groups: BTreeMap::new(),
            in_flight: BinaryHeap::new(),
            seq: 0,
            drop_rule: None,
            records: Vec::new(),
        }
    }

    /// Adds a node reachable at `addr`; returns its index.
    pub fn add(&mut self, addr: SocketAddr, node: Node) -> usize {
        self.nodes.push((addr, node));
        self.nodes.len() - 1
    }

    pub fn node(&mut self, i: usize) -> &mut Node {
        &mut self.nodes[i].1
    }

    pub fn addr(&self, i: usize) -> SocketAddr {
        self.nodes[i].0
    }

    /// Makes node `i` a member of a multicast group.
    pub fn join(&mut self, i: usize, group: IpAddr) {
        let members = self.groups.entry(group).or_default();
        if !members.contains(&i) {
            members.push(i);
        }
    }

    /// Drops every datagram for which `rule` returns true (it sees the record before delivery).
    pub fn set_drop(&mut self, rule: impl FnMut(&Record) -> bool + 'static) {
        self.drop_rule = Some(Box::new(rule));
    }

    pub fn clear_drop(&mut self) {
        self.drop_rule = None;
    }

    /// Collects what every node wants to send and puts it in flight; applies join/leave commands.
    pub fn flush(&mut self) {
        for i in 0..self.nodes.len() {
            while let Some(cmd) = self.nodes[i].1.poll_command() {
                match cmd {
                    crate::NodeCommand::JoinGroup(g) => self.join(i, g),
                    crate::NodeCommand::LeaveGroup(g) => {
                        if let Some(m) = self.groups.get_mut(&g) {
                            m.retain(|x| *x != i);
                        }
                    }
                }
            }
            while let Some(t) = self.nodes[i].1.poll_transmit() {
                let from = self.nodes[i].0;
                let targets: Vec<usize> = if t.dst.ip().is_multicast() {
                    self.groups.get(&t.dst.ip()).cloned().unwrap_or_default().into_iter().filter(|j| *j != i).collect()
                } else {
                    self.nodes.iter().position(|(a, _)| *a == t.dst).into_iter().collect()
                };
                if targets.is_empty() {
                    self.records.push(Record {
                        sent_at: self.now,
                        from,
                        to: t.dst,
                        delivered_to: None,
                        bytes: t.payload.clone(),
                    });
                }
                for j in targets {
                    let mut rec = Record {
                        sent_at: self.now,
                        from,
                        to: t.dst,
                        delivered_to: Some(self.nodes[j].0),
                        bytes: t.payload.clone(),
                    };
                    let dropped = self.drop_rule.as_mut().is_some_and(|r| r(&rec));
                    if dropped {
                        rec.delivered_to = None;
                    } else {
                        self.seq += 1;
                        self.in_flight.push(Reverse(InFlight {
                            at: self.now + self.latency,
                            seq: self.seq,
                            from,
                            to_node: j,
                            dst_ip: t.dst.ip(),
                            bytes: t.payload.clone(),
                        }));
                    }
                    self.records.push(rec);
                }
            }
        }
    }

    fn next_wakeup(&self) -> Option<Instant> {
        let flight = self.in_flight.peek().map(|Reverse(f)| f.at);
        let timers = self.nodes.iter().filter_map(|(_, n)| n.poll_timeout()).min();
        match (flight, timers) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Advances to the next delivery or timer and processes it. Returns false when nothing is left to do
    /// before `limit`.
    pub fn step(&mut self, limit: Instant) -> bool {
        self.flush();
        let Some(at) = self.next_wakeup() else { return false };
        if at > limit {
            return false;
        }
        self.now = self.now.max(at);
        while self.in_flight.peek().is_some_and(|Reverse(f)| f.at <= self.now) {
            let Some(Reverse(f)) = self.in_flight.pop() else { break };
            let now = self.now;
            self.nodes[f.to_node].1.handle_datagram(now, f.from, Some(f.dst_ip), &f.bytes);
        }
        for i in 0..self.nodes.len() {
            if self.nodes[i].1.poll_timeout().is_some_and(|t| t <= self.now) {
                let now = self.now;
                self.nodes[i].1.handle_timeout(now);
            }
        }
        self.flush();
        true
    }

    /// Runs until nothing is pending or `limit` is reached; time ends at `limit` if given work ran out.
    pub fn run_until(&mut self, limit: Instant) {
        while self.step(limit) {}
        self.now = self.now.max(limit.min(self.next_wakeup().unwrap_or(limit)));
    }

    pub fn run_for(&mut self, d: Duration) {
        let limit = self.now + d;
        self.run_until(limit);
        self.now = self.now.max(limit);
    }

    /// Records sent by `from`, parsed, with their send time.
    pub fn sent_by(&self, from: SocketAddr) -> Vec<(Instant, Message)> {
        self.records.iter().filter(|r| r.from == from).filter_map(|r| r.message().map(|m| (r.sent_at, m))).fold(
            Vec::new(),
            |mut acc: Vec<(Instant, Message)>, (t, m)| {
                // A multicast send produces one record per receiver; count it once.
                if !acc
                    .last()
                    .is_some_and(|(lt, lm)| *lt == t && lm.mid == m.mid && lm.mtype == m.mtype && lm.code == m.code)
                {
                    acc.push((t, m));
                }
                acc
            },
        )
    }

    /// Whether a datagram is a valid CoAP message (helper for drop rules).
    pub fn is_coap(bytes: &[u8]) -> bool {
        Packet::new_checked(bytes).is_ok()
    }
}

/// A client service for tests: serves nothing (4.04) and records the outcome of every request it sent,
/// with the time it arrived. Start requests with [`crate::Node::with_service`].
#[derive(Debug, Default)]
pub struct Recorder {
    pub outcomes: Vec<(Instant, crate::RequestId, crate::Outcome)>,
}

impl crate::Service for Recorder {
    fn handle_request(&mut self, cx: &mut crate::Context<'_>, req: crate::IncomingRequest) {
        cx.respond(req.id, crate::Response::error(corral_wire::Code::NOT_FOUND, "a test client serves nothing"));
    }

    fn handle_response(&mut self, cx: &mut crate::Context<'_>, id: crate::RequestId, outcome: crate::Outcome) {
        self.outcomes.push((cx.now(), id, outcome));
    }
}
