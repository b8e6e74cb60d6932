//! TCP inside the simulator: each node that speaks CoAP over TCP gets a real TCP stack (smoltcp: the
//! handshake, cumulative ACKs, fast retransmit, RTO back-off), driven by the simulator's clock, between
//! its `corral_proto::TcpEndpoint` (which produces and consumes the byte streams of RFC 8323) and the
//! simulated network (which carries the IP packets smoltcp emits as datagrams to port 0, framed like any
//! other datagram of their size).
//!
//! Owns: the mapping of the node's connections to smoltcp sockets, listening sockets (made when a SYN from a new peer arrives) on the node's CoAP or app
//! port, and the count of TCP segments sent again (a segment whose data was sent before on its flow).

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
    pub(crate) fn new(addr: IpAddr, listen_port: u16, seed: u64, now: corral_proto::Instant) -> TcpHost {
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
            news: VecDeque::new(),
        };
        h
    }

    fn socket() -> tcp::Socket<'static> {
        let mut s = tcp::Socket::new(tcp::SocketBuffer::new(vec![0; BUFFER]), tcp::SocketBuffer::new(vec![0; BUFFER]));
        s.set_nagle_enabled(false);
        s
    }

    fn listen(&mut self) {
        let mut s = Self::socket();
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
        let mut s = Self::socket();
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
        } else {
            *top = end;
        }
    }
}
