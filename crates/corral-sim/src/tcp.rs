//! TCP inside the simulator: each node that speaks CoAP over TCP gets a real TCP stack (smoltcp: the
//! handshake, cumulative ACKs, fast retransmit, RTO back-off), driven by the simulator's clock, between
//! its `corral_proto::TcpEndpoint` (which produces and consumes the byte streams of RFC 8323) and the
//! simulated network (which carries the IP packets smoltcp emits as datagrams to port 0, framed like any
//! other datagram of their size).
//!
//! Owns: the mapping of the node's connections to smoltcp sockets, listening sockets (made when a SYN from a new peer arrives) on the node's CoAP or app
//! port, the sockets' timers ([`TcpTimers`]), and the count of TCP segments sent again (a segment whose
//! data was sent before on its flow) and of the node's writes (its messages) they carried again.
//!
//! smoltcp keeps its RTO bounds as constants (10 ms to 10 s); the workspace patches it (`vendor/smoltcp`,
//! `RtoConfig`) so that the bounds are the stack's the experiment ran: [`TcpTimers::linux`] and
//! [`TcpTimers::rfc6298`].

use corral_proto::tcp::ConnId;
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{Device, DeviceCapabilities, Medium, RxToken, TxToken};
use smoltcp::socket::tcp;
use smoltcp::time::Instant as SInstant;
use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr, IpProtocol, Ipv6Packet, TcpPacket};
use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};

/// The port that marks a simulated datagram as a raw IP packet of the TCP stack.
pub(crate) const RAW_IP_PORT: u16 = 0;

const BUFFER: usize = 64 * 1024;
const MTU: usize = 1280;

/// The timers of a node's TCP stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpTimers {
    /// Lower and upper bound of the RTO, ms.
    pub min_rto_ms: u32,
    pub max_rto_ms: u32,
    /// Lower bound of the RTO's variance term (RTO = SRTT + max(this, 4·RTTVAR)), ms.
    pub min_margin_ms: u32,
    /// RTO before the first round-trip sample, ms (`None`: smoltcp's 700 ms estimate).
    pub initial_rto_ms: Option<u32>,
    /// RFC 6298 §5.5: the RTO doubles at each expiry (up to `max_rto_ms`) until a new sample.
    pub exponential_backoff: bool,
    /// Delayed ACK, ms (`None`: every segment acknowledged at once).
    pub ack_delay_ms: Option<u64>,
    pub nagle: bool,
}

impl Default for TcpTimers {
    /// smoltcp 0.12's own: RTO 10 ms to 10 s (700 ms before a sample), 10 ms delayed ACK; Nagle off (CoAP
    /// over TCP writes whole messages).
    fn default() -> TcpTimers {
        let s = tcp::RtoConfig::default();
        TcpTimers {
            min_rto_ms: s.min_ms,
            max_rto_ms: s.max_ms,
            min_margin_ms: s.min_margin_ms,
            initial_rto_ms: s.initial_ms,
            exponential_backoff: s.exponential_backoff,
            ack_delay_ms: Some(10),
            nagle: false,
        }
    }
}

impl TcpTimers {
    /// Linux's (`include/net/tcp.h`): `TCP_RTO_MIN` 200 ms bounds the variance term, `TCP_TIMEOUT_INIT`
    /// 1 s, `TCP_RTO_MAX` 120 s, exponential back-off, `TCP_DELACK_MIN` 40 ms. Nagle off: Go's `net`
    /// package sets TCP_NODELAY on every TCP connection (go-coap, the paper's library, is Go).
    pub fn linux() -> TcpTimers {
        TcpTimers {
            min_rto_ms: 200,
            max_rto_ms: 120_000,
            min_margin_ms: 200,
            initial_rto_ms: Some(1000),
            exponential_backoff: true,
            ack_delay_ms: Some(40),
            nagle: false,
        }
    }

    /// RFC 6298's timer with a cap: 1 s initial and minimum RTO, exponential back-off up to `max_rto_ms`
    /// (seed 002 §6.5: the same 1 s initial timeout as CoAP's, capped at 16 s).
    pub fn rfc6298(max_rto_ms: u32) -> TcpTimers {
        TcpTimers {
            min_rto_ms: 1000,
            max_rto_ms,
            min_margin_ms: smoltcp::socket::tcp::RtoConfig::default().min_margin_ms,
            initial_rto_ms: Some(1000),
            exponential_backoff: true,
            ..TcpTimers::default()
        }
    }
}

#[derive(Default)]
struct Queues {
    rx: VecDeque<Vec<u8>>,
    tx: VecDeque<Vec<u8>>,
}

struct Rx(Vec<u8>);
struct Tx<'a>(&'a mut VecDeque<Vec<u8>>);

impl RxToken for Rx {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl TxToken for Tx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut b = vec![0u8; len];
        let r = f(&mut b);
        self.0.push_back(b);
        r
    }
}

impl Device for Queues {
    type RxToken<'a> = Rx;
    type TxToken<'a> = Tx<'a>;

    fn receive(&mut self, _: SInstant) -> Option<(Rx, Tx<'_>)> {
        let p = self.rx.pop_front()?;
        Some((Rx(p), Tx(&mut self.tx)))
    }

    fn transmit(&mut self, _: SInstant) -> Option<Tx<'_>> {
        Some(Tx(&mut self.tx))
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut c = DeviceCapabilities::default();
        c.medium = Medium::Ip;
        c.max_transmission_unit = MTU;
        c
    }
}

/// What the TCP stack tells the node after a poll.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TcpNews {
    Connected(ConnId, SocketAddr),
    ConnectFailed(SocketAddr),
    Data(ConnId, Vec<u8>),
    Closed(ConnId),
}

/// One node's TCP stack. See the module docs.
pub(crate) struct TcpHost {
    iface: Interface,
    dev: Queues,
    sockets: SocketSet<'static>,
    listen_port: u16,
    listener: Option<SocketHandle>,
    /// Established (or being established) connections.
    conns: HashMap<SocketHandle, (ConnId, bool)>,
    by_conn: HashMap<ConnId, SocketHandle>,
    /// Outgoing connections not yet established: where to.
    connecting: HashMap<SocketHandle, SocketAddr>,
    /// Bytes the node wrote that the socket had no room for yet.
    unsent: HashMap<ConnId, VecDeque<u8>>,
    /// Connections to close once their unsent bytes are in the socket (a close right after a write).
    closing: std::collections::HashSet<ConnId>,
    /// Connections whose close the node has heard of, still finishing their close handshake.
    closed_told: std::collections::HashSet<ConnId>,
    next_conn: u64,
    next_port: u16,
    /// Highest sequence number (end of data) sent per flow, to recognise segments sent again.
    sent_up_to: HashMap<(u16, SocketAddr), u32>,
    pub(crate) retransmitted_segments: u64,
    /// Per connection, the stream offsets at which the node's writes end (bytes written so far, and the
    /// ends not yet known to be acknowledged); per flow, its connection and the sequence number of its
    /// first data byte — to tell which writes a segment sent again carries.
    writes: HashMap<ConnId, (u64, VecDeque<u64>)>,
    flows: HashMap<(u16, SocketAddr), (ConnId, Option<u32>)>,
    pub(crate) retransmitted_writes: u64,
    timers: TcpTimers,
    news: VecDeque<TcpNews>,
}

fn ip(a: IpAddr) -> IpAddress {
    match a {
        IpAddr::V4(v) => IpAddress::Ipv4(v),
        IpAddr::V6(v) => IpAddress::Ipv6(v),
    }
}

fn std_ip(a: IpAddress) -> IpAddr {
    match a {
        IpAddress::Ipv4(v) => IpAddr::V4(v),
        IpAddress::Ipv6(v) => IpAddr::V6(v),
    }
}

fn sinstant(now: corral_proto::Instant) -> SInstant {
    SInstant::from_micros(now.as_micros() as i64)
}

impl TcpHost {
    /// A stack for a node at `addr`, listening on `listen_port`; `seed` makes its initial sequence numbers
    /// (and so the run) reproducible.
    pub(crate) fn new(
        addr: IpAddr,
        listen_port: u16,
        seed: u64,
        now: corral_proto::Instant,
        timers: TcpTimers,
    ) -> TcpHost {
        let mut config = Config::new(HardwareAddress::Ip);
        config.random_seed = seed;
        let mut dev = Queues::default();
        let mut iface = Interface::new(config, &mut dev, sinstant(now));
        iface.update_ip_addrs(|a| {
            // Prefix 0: every destination is on the link; the simulator routes the packets.
            let _ = a.push(IpCidr::new(ip(addr), 0));
        });
        let h = TcpHost {
            iface,
            dev,
            sockets: SocketSet::new(Vec::new()),
            listen_port,
            listener: None,
            conns: HashMap::new(),
            by_conn: HashMap::new(),
            connecting: HashMap::new(),
            unsent: HashMap::new(),
            closing: std::collections::HashSet::new(),
            closed_told: std::collections::HashSet::new(),
            next_conn: 1 << 40,
            next_port: 49152,
            sent_up_to: HashMap::new(),
            retransmitted_segments: 0,
            writes: HashMap::new(),
            flows: HashMap::new(),
            retransmitted_writes: 0,
            timers,
            news: VecDeque::new(),
        };
        h
    }

    fn socket(&self) -> tcp::Socket<'static> {
        let mut s = tcp::Socket::new(tcp::SocketBuffer::new(vec![0; BUFFER]), tcp::SocketBuffer::new(vec![0; BUFFER]));
        let t = self.timers;
        s.set_nagle_enabled(t.nagle);
        s.set_ack_delay(t.ack_delay_ms.map(smoltcp::time::Duration::from_millis));
        s.set_rto_config(tcp::RtoConfig {
            min_ms: t.min_rto_ms,
            max_ms: t.max_rto_ms,
            min_margin_ms: t.min_margin_ms,
            initial_ms: t.initial_rto_ms,
            exponential_backoff: t.exponential_backoff,
        });
        s
    }

    fn listen(&mut self) {
        let mut s = self.socket();
        if s.listen(self.listen_port).is_ok() {
            self.listener = Some(self.sockets.add(s));
        }
    }

    fn new_conn(&mut self) -> ConnId {
        self.next_conn += 1;
        ConnId(self.next_conn)
    }

    /// The node wants a connection to `dst`.
    pub(crate) fn connect(&mut self, dst: SocketAddr) {
        let mut s = self.socket();
        self.next_port = if self.next_port == u16::MAX { 49152 } else { self.next_port + 1 };
        match s.connect(self.iface.context(), (ip(dst.ip()), dst.port()), self.next_port) {
            Ok(()) => {
                let h = self.sockets.add(s);
                self.connecting.insert(h, dst);
            }
            Err(_) => self.news.push_back(TcpNews::ConnectFailed(dst)),
        }
    }

    /// The node writes `bytes` to `conn`.
    pub(crate) fn send(&mut self, conn: ConnId, bytes: &[u8]) {
        if self.closed_told.contains(&conn) {
            return;
        }
        self.unsent.entry(conn).or_default().extend(bytes);
        let (total, ends) = self.writes.entry(conn).or_default();
        *total += bytes.len() as u64;
        ends.push_back(*total);
        // A write that ended more than a send buffer before the last cannot be in flight any more.
        while ends.front().is_some_and(|&e| e + (BUFFER as u64) < *total) {
            ends.pop_front();
        }
    }

    pub(crate) fn close(&mut self, conn: ConnId) {
        if self.unsent.get(&conn).is_some_and(|b| !b.is_empty()) {
            // The bytes written before the close go first (smoltcp takes no data after close()).
            self.closing.insert(conn);
            return;
        }
        if let Some(&h) = self.by_conn.get(&conn) {
            self.sockets.get_mut::<tcp::Socket>(h).close();
        }
    }

    /// An IP packet from the network. A SYN to the listening port from a peer this stack has no socket for
    /// gets a listening socket first: listeners are made on demand, so that a SYN sent again for a
    /// connection in progress always reaches that connection's socket and never a spare listener (which
    /// would answer it with a second SYN-ACK of another sequence number, and the peer would reset both).
    pub(crate) fn receive(&mut self, packet: &[u8]) {
        if self.listener.is_none() {
            if let Some(peer) = self.new_syn(packet) {
                let known = self.conns.keys().any(|&h| {
                    self.sockets.get::<tcp::Socket>(h).remote_endpoint().is_some_and(|e| (e.addr, e.port) == peer)
                });
                if !known {
                    self.listen();
                }
            }
        }
        self.dev.rx.push_back(packet.to_vec());
    }

    /// The sender of a SYN (without ACK) to the listening port.
    fn new_syn(&self, packet: &[u8]) -> Option<(IpAddress, u16)> {
        let ipp = Ipv6Packet::new_checked(packet).ok()?;
        if ipp.next_header() != IpProtocol::Tcp {
            return None;
        }
        let t = TcpPacket::new_checked(ipp.payload()).ok()?;
        (t.syn() && !t.ack() && t.dst_port() == self.listen_port)
            .then(|| (IpAddress::Ipv6(ipp.src_addr()), t.src_port()))
    }

    /// Runs the stack at `now`: feeds written bytes into the sockets, processes packets and timers, and
    /// collects what the node must hear (connections, data, closes). Returns the packets to send.
    pub(crate) fn poll(&mut self, now: corral_proto::Instant) -> Vec<Vec<u8>> {
        let t = sinstant(now);
        for _round in 0..4 {
            self.flush_unsent();
            self.iface.poll(t, &mut self.dev, &mut self.sockets);
            let changed = self.harvest();
            self.flush_unsent();
            self.iface.poll(t, &mut self.dev, &mut self.sockets);
            if !changed {
                break;
            }
        }
        let out: Vec<Vec<u8>> = self.dev.tx.drain(..).collect();
        for p in &out {
            self.count_retransmission(p);
        }
        out
    }

    pub(crate) fn poll_at(&mut self, now: corral_proto::Instant) -> Option<corral_proto::Instant> {
        let t = self.iface.poll_at(sinstant(now), &self.sockets)?;
        Some(corral_proto::Instant::from_micros(t.total_micros().max(0) as u64))
    }

    pub(crate) fn take_news(&mut self) -> Option<TcpNews> {
        self.news.pop_front()
    }

    fn flush_unsent(&mut self) {
        for (conn, buf) in self.unsent.iter_mut() {
            let Some(&h) = self.by_conn.get(conn) else { continue };
            let s = self.sockets.get_mut::<tcp::Socket>(h);
            while !buf.is_empty() && s.can_send() {
                let (a, _) = buf.as_slices();
                match s.send_slice(a) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        buf.drain(..n);
                    }
                }
            }
        }
        self.unsent.retain(|_, b| !b.is_empty());
        let ready: Vec<ConnId> = self.closing.iter().copied().filter(|c| !self.unsent.contains_key(c)).collect();
        for conn in ready {
            self.closing.remove(&conn);
            if let Some(&h) = self.by_conn.get(&conn) {
                self.sockets.get_mut::<tcp::Socket>(h).close();
            }
        }
    }

    /// New connections, received data, closed connections. Whether anything changed.
    fn harvest(&mut self) -> bool {
        let mut changed = false;
        // The listener got a peer: it becomes a connection, and a new listener takes its place.
        if let Some(l) = self.listener {
            let s = self.sockets.get::<tcp::Socket>(l);
            if s.is_active() && s.state() != tcp::State::Listen {
                if s.remote_endpoint().is_some() {
                    let conn = self.new_conn();
                    self.conns.insert(l, (conn, false));
                    self.by_conn.insert(conn, l);
                }
                self.listener = None;
                changed = true;
            }
        }
        let handles: Vec<SocketHandle> = self.conns.keys().copied().chain(self.connecting.keys().copied()).collect();
        for h in handles {
            let s = self.sockets.get_mut::<tcp::Socket>(h);
            if let Some(dst) = self.connecting.get(&h).copied() {
                if s.may_send() {
                    self.connecting.remove(&h);
                    self.next_conn += 1;
                    let conn = ConnId(self.next_conn);
                    self.conns.insert(h, (conn, true));
                    self.by_conn.insert(conn, h);
                    self.news.push_back(TcpNews::Connected(conn, dst));
                    changed = true;
                } else if !s.is_open() {
                    self.connecting.remove(&h);
                    self.sockets.remove(h);
                    self.news.push_back(TcpNews::ConnectFailed(dst));
                    changed = true;
                }
                continue;
            }
            if let Some(&(conn, _)) = self.conns.get(&h) {
                if let (Some(l), Some(r)) = (s.local_endpoint(), s.remote_endpoint()) {
                    let flow = (l.port, SocketAddr::new(std_ip(r.addr), r.port));
                    self.flows.entry(flow).or_insert((conn, None));
                }
            }
            let Some(&(conn, announced)) = self.conns.get(&h) else { continue };
            if !announced && s.may_send() {
                if let Some(ep) = s.remote_endpoint() {
                    self.news.push_back(TcpNews::Connected(conn, SocketAddr::new(std_ip(ep.addr), ep.port)));
                    self.conns.insert(h, (conn, true));
                    changed = true;
                }
            }
            let s = self.sockets.get_mut::<tcp::Socket>(h);
            let mut data = Vec::new();
            while s.can_recv() {
                let mut buf = [0u8; 4096];
                match s.recv_slice(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => data.extend_from_slice(&buf[..n]),
                }
            }
            if !data.is_empty() {
                self.news.push_back(TcpNews::Data(conn, data));
                changed = true;
            }
            let s = self.sockets.get_mut::<tcp::Socket>(h);
            let announced = self.conns[&h].1;
            let peer_closed = !s.may_recv() && s.state() != tcp::State::Established;
            if peer_closed && s.is_open() && announced && !self.closed_told.contains(&conn) {
                // The peer closed: the node hears it now, and this end closes too (a FIN after any bytes
                // still unsent); the socket stays until the close handshake is over, so that the peer's
                // segments sent again are still acknowledged rather than reset.
                self.news.push_back(TcpNews::Closed(conn));
                self.closed_told.insert(conn);
                if !self.unsent.contains_key(&conn) {
                    s.close();
                } else {
                    self.closing.insert(conn);
                }
                changed = true;
            }
            if !s.is_open() {
                if announced && !self.closed_told.remove(&conn) {
                    self.news.push_back(TcpNews::Closed(conn));
                }
                self.conns.remove(&h);
                self.by_conn.remove(&conn);
                self.writes.remove(&conn);
                self.flows.retain(|_, (c, _)| *c != conn);
                self.unsent.remove(&conn);
                self.closing.remove(&conn);
                self.closed_told.remove(&conn);
                self.sockets.remove(h);
                changed = true;
            }
        }
        changed
    }

    /// Counts a data segment whose bytes were sent before on its flow (a retransmission, fast or by RTO).
    fn count_retransmission(&mut self, packet: &[u8]) {
        let Ok(ipp) = Ipv6Packet::new_checked(packet) else { return };
        if ipp.next_header() != IpProtocol::Tcp {
            return;
        }
        let Ok(tcpp) = TcpPacket::new_checked(ipp.payload()) else { return };
        let len = tcpp.payload().len() as u32;
        if len == 0 {
            return;
        }
        let flow = (tcpp.src_port(), SocketAddr::new(IpAddr::V6(ipp.dst_addr()), tcpp.dst_port()));
        let seq = tcpp.seq_number().0 as u32;
        let end = seq.wrapping_add(len);
        let top = self.sent_up_to.entry(flow).or_insert(seq);
        if (end.wrapping_sub(*top) as i32) <= 0 {
            self.retransmitted_segments += 1;
            self.retransmitted_writes += self.writes_in(flow, seq, end);
        } else {
            *top = end;
        }
        if let Some((_, first)) = self.flows.get_mut(&flow) {
            first.get_or_insert(seq);
        }
    }

    /// How many of the node's writes on `flow` overlap the bytes `[seq, end)` (at least one: a segment sent
    /// again carries part of some write).
    fn writes_in(&self, flow: (u16, SocketAddr), seq: u32, end: u32) -> u64 {
        let Some(&(conn, Some(first))) = self.flows.get(&flow) else { return 1 };
        let Some((_, ends)) = self.writes.get(&conn) else { return 1 };
        let (lo, hi) = (u64::from(seq.wrapping_sub(first)), u64::from(end.wrapping_sub(first)));
        // Write k spans [ends[k-1], ends[k]); it overlaps [lo, hi) when its end is past lo and its start
        // before hi (the offsets are absolute; the entries dropped were acknowledged long ago).
        let from = ends.partition_point(|&e| e <= lo);
        let to = ends.partition_point(|&e| e < hi);
        ((to + 1).min(ends.len()).saturating_sub(from) as u64).max(1)
    }
}
