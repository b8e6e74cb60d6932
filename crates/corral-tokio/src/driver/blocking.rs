//! A server loop without a runtime: one thread drives one [`Node`] on one UDP socket, asleep inside a
//! blocking `recvmmsg` (MSG_WAITFORONE, SO_RCVTIMEO set to the node's next timer) and answering a whole
//! batch with `sendmmsg` — the shape of the bare echo floor (`scripts/coap-echo-floor.c`), one system call
//! per wake-up instead of `epoll_wait` and then a read. For `corral serve` workers that speak CoAP over UDP
//! only; everything protocol is the node's, exactly as under the tokio driver and the simulator.
//!
//! Linux only (`nix`'s safe `recvmmsg`/`sendmmsg`); [`BlockingServer::run`] returns when `stop` is set,
//! within [`MAX_WAIT`].

use crate::driver::Clock;
use crate::net::socket::{
    canonical, canonical_ip, send_run, to_socket_addr, MmsgHeaders, OutDatagram, SendHeaders, SocketOptions,
};
use corral_proto::{Node, NodeCommand};
use nix::libc;
use nix::sys::socket::{recvmmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags};
use socket2::SockRef;
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tracing::{debug, trace, warn};

/// Datagrams read per system call.
const RECV_BATCH: usize = 8;
/// The largest datagram read (a UDP payload).
const MAX_DATAGRAM: usize = 65_535;
/// The longest sleep: how late a stop request may be noticed.
pub const MAX_WAIT: Duration = Duration::from_millis(250);
/// How often the error queue is read even when no receive has failed (see `BlockingServer::errors_read_at`).
const ERROR_QUEUE_PERIOD: corral_proto::Duration = corral_proto::Duration::from_millis(100);
/// How late a timer may fire: the shortest sleep, and how far the receive timeout may run past the next
/// timer before it is set again.
const TIMER_SLACK: Duration = Duration::from_millis(1);

/// One node on one socket, driven by the calling thread.
pub struct BlockingServer {
    node: Node,
    socket: UdpSocket,
    opts: SocketOptions,
    local: SocketAddr,
    clock: Clock,
    /// The receive timeout last set on the socket.
    timeout: Option<Duration>,
    /// The datagrams of one turn, sent together; kept for its capacity.
    outbox: Vec<corral_proto::Transmit>,
    /// `sendmmsg` headers, kept across turns.
    send_headers: SendHeaders,
    /// `recvmmsg` headers kept across turns, when they can be (see [`BlockingServer::receive`]).
    recv_headers: Option<MmsgHeaders>,
    /// Fresh receive headers for every call (see [`BoundSocket::mixed_destinations`]).
    mixed_destinations: bool,
    /// The destination of every datagram, on a socket bound to one address (see
    /// [`BoundSocket::from_std`]); `None` on a wildcard socket, which asks the kernel for each.
    bound_destination: Option<IpAddr>,
    /// A receive failed with an error the kernel queued (ICMP, IP_RECVERR): read the error queue.
    errors_pending: bool,
    /// When the error queue was last read: it is read at least every [`ERROR_QUEUE_PERIOD`], since a
    /// socket that always has datagrams waiting never reports the error on a receive.
    errors_read_at: corral_proto::Instant,
}

/// A bound socket for a [`BlockingServer`], made on one thread and served on another (a [`Node`] holds
/// services that need not be `Send`, so the node is made on the thread that runs it).
pub struct BoundSocket {
    socket: UdpSocket,
    opts: SocketOptions,
    local: SocketAddr,
    /// Which slice of message IDs and tokens the node served on this socket must use.
    shard: corral_proto::Shard,
    /// The socket asks for both IPv4 and IPv6 destinations (a dual-stack wildcard socket): its IPv4
    /// datagrams carry two control messages and its IPv6 ones one.
    mixed_destinations: bool,
}

impl BoundSocket {
    /// Binds `addr` (as [`crate::socket::bind_std`] does, then blocking, with the destination address of
    /// every datagram known: see [`BoundSocket::from_std`]).
    pub fn bind(addr: SocketAddr, opts: SocketOptions) -> io::Result<BoundSocket> {
        BoundSocket::from_std(crate::net::socket::bind_std(addr, &opts)?, opts)
    }

    /// `steering.count` sockets on `addr` as shards of one port (see [`crate::steer`]): socket `i` is for
    /// the node whose endpoint uses shard `i`.
    pub fn bind_group(
        addr: SocketAddr,
        opts: SocketOptions,
        steering: crate::driver::steer::Steering,
    ) -> io::Result<Vec<BoundSocket>> {
        let sockets = crate::driver::steer::bind_group(addr, &opts, steering)?;
        let shards = (0..steering.count).filter_map(|i| corral_proto::Shard::new(i, steering.count));
        sockets
            .into_iter()
            .zip(shards)
            .map(|(s, shard)| Ok(BoundSocket { shard, ..BoundSocket::from_std(s, opts.clone())? }))
            .collect()
    }

    /// The shard the node's endpoint must use on this socket ([`corral_proto::EndpointConfig::shard`]):
    /// alone, unless the socket is one of a [`BoundSocket::bind_group`].
    pub fn shard(&self) -> corral_proto::Shard {
        self.shard
    }

    /// Takes a bound socket (made blocking here) and, if it is bound to a wildcard address, asks for the
    /// destination address of every datagram (IP_PKTINFO / IPV6_RECVPKTINFO). A socket bound to one
    /// address, unicast or a multicast group, receives only datagrams sent to that address (whatever
    /// groups it joins), so its datagrams' destination is known without asking; not asking saves the
    /// kernel a control message per datagram (about 1.5 % of `corral serve`'s CPU per request).
    pub fn from_std(socket: UdpSocket, opts: SocketOptions) -> io::Result<BoundSocket> {
        socket.set_nonblocking(false)?;
        let local = socket.local_addr()?;
        let wildcard = local.ip().is_unspecified();
        let v4 = wildcard && (local.is_ipv4() || !SockRef::from(&socket).only_v6().unwrap_or(true));
        let v6 = wildcard && local.is_ipv6();
        if v4 {
            setsockopt(&socket, sockopt::Ipv4PacketInfo, &true).map_err(io::Error::from)?;
        }
        if v6 {
            setsockopt(&socket, sockopt::Ipv6RecvPacketInfo, &true).map_err(io::Error::from)?;
        }
        let dual_stack = local.is_ipv6() && !SockRef::from(&socket).only_v6().unwrap_or(true);
        crate::net::icmp::enable(&socket, local, dual_stack);
        Ok(BoundSocket { socket, opts, local, shard: corral_proto::Shard::ALONE, mixed_destinations: v4 && v6 })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Joins a multicast group on the configured interface.
    pub fn join(&self, group: IpAddr) -> io::Result<()> {
        crate::net::socket::membership(SockRef::from(&self.socket), &self.opts, group, true)
    }
}

impl BlockingServer {
    pub fn new(node: Node, bound: BoundSocket) -> BlockingServer {
        let BoundSocket { socket, opts, local, mixed_destinations, .. } = bound;
        let bound_destination = (!local.ip().is_unspecified()).then(|| local.ip());
        BlockingServer {
            node,
            socket,
            opts,
            local,
            clock: Clock::new(),
            timeout: None,
            outbox: Vec::new(),
            send_headers: SendHeaders::default(),
            recv_headers: None,
            mixed_destinations,
            bound_destination,
            errors_pending: false,
            errors_read_at: corral_proto::Instant::ZERO,
        }
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Serves until `stop` is set, then stops reading and gives requests in progress up to `grace` to be
    /// answered (as [`crate::ServerHandle::shutdown`] does).
    pub fn run(mut self, stop: &AtomicBool, grace: Duration) {
        self.serve(stop);
        let deadline = self.clock.now() + corral_proto::Duration::from(grace);
        loop {
            let now = self.clock.now();
            if self.node.poll_timeout().is_some_and(|t| t <= now) {
                self.node.handle_timeout(now);
            }
            self.flush();
            let idle = self.node.endpoint().table_sizes().inbound_exchanges == 0;
            if idle || now >= deadline {
                debug!(idle, "blocking server stopped");
                return;
            }
            let next = self.node.poll_timeout().map_or(deadline, |t| t.min(deadline));
            std::thread::sleep(Duration::from(next.saturating_since(now)).max(Duration::from_millis(1)));
        }
    }

    fn serve(&mut self, stop: &AtomicBool) {
        let mut storage = vec![0u8; RECV_BATCH * MAX_DATAGRAM];
        // One clock reading per turn, taken when datagrams arrive. The timers are checked against it once
        // they are handled, so a timer may fire late by the time that took: microseconds for a plain
        // server, a gateway's SQLite commit at most, nothing next to CoAP's timers (seconds).
        let mut now = self.clock.now();
        while !stop.load(Ordering::Relaxed) {
            let mut next = self.node.poll_timeout();
            if next.is_some_and(|t| t <= now) {
                self.node.handle_timeout(now);
                next = self.node.poll_timeout();
            }
            self.flush();
            let wait = next.map_or(MAX_WAIT, |t| t.saturating_since(now).into()).clamp(TIMER_SLACK, MAX_WAIT);
            self.set_timeout(wait);
            // (source, destination, length) of each datagram read; the bytes stay in `storage`.
            let mut got: [(Option<SocketAddr>, Option<IpAddr>, usize); RECV_BATCH] = [(None, None, 0); RECV_BATCH];
            let n = self.receive(&mut storage, &mut got);
            now = self.clock.now();
            if self.errors_pending || now.saturating_since(self.errors_read_at) >= ERROR_QUEUE_PERIOD {
                self.take_errors(now);
            }
            for (i, (from, dst, len)) in got[..n].iter().enumerate() {
                let Some(from) = from else { continue };
                let data = &storage[i * MAX_DATAGRAM..i * MAX_DATAGRAM + (*len).min(MAX_DATAGRAM)];
                trace!(%from, ?dst, len, "datagram in");
                self.node.handle_datagram(now, canonical(*from), dst.map(canonical_ip), data);
            }
        }
    }

    /// One `recvmmsg` (asleep until at least one datagram or the receive timeout) into `storage`, one
    /// datagram per [`MAX_DATAGRAM`] chunk; fills `got` and returns how many datagrams were read.
    ///
    /// The headers are kept across calls where that is sound: making them (with room for every datagram's
    /// address and control messages) was most of a wake-up's cost in user space. The kernel shrinks each
    /// header's name and control lengths to what it wrote, and `nix` does not restore them. On a socket of
    /// one family the name is always the same size, and every datagram carries the same control messages
    /// (none on a socket bound to one address, one destination on a wildcard one), so the shrunk lengths
    /// still fit the next datagram. On a dual-stack socket an IPv4 datagram
    /// carries IP_PKTINFO and IPV6_PKTINFO and an IPv6 one only the latter, so an IPv4 datagram after an
    /// IPv6 one in the same header would be cut (MSG_CTRUNC, and `nix` then gives no control messages at
    /// all): a dual-stack socket gets fresh headers for every call, and any socket does after a datagram
    /// whose control messages were cut or carried no destination.
    fn receive(
        &mut self,
        storage: &mut [u8],
        got: &mut [(Option<SocketAddr>, Option<IpAddr>, usize); RECV_BATCH],
    ) -> usize {
        let mut chunks = storage.chunks_mut(MAX_DATAGRAM);
        let mut iovs: [[IoSliceMut<'_>; 1]; RECV_BATCH] =
            std::array::from_fn(|_| [IoSliceMut::new(chunks.next().unwrap_or_default())]);
        if self.mixed_destinations {
            self.recv_headers = None;
        }
        let bound = self.bound_destination;
        let headers = self.recv_headers.get_or_insert_with(|| {
            // Room for both IP_PKTINFO and IPV6_PKTINFO (`cmsg_space!` allocates a buffer of that size),
            // unless the socket's address is every datagram's destination.
            let space = bound.is_none().then(|| nix::cmsg_space!(libc::in_pktinfo, libc::in6_pktinfo));
            MmsgHeaders::preallocate(RECV_BATCH, space)
        });
        let mut whole = true;
        let n = match recvmmsg(self.socket.as_raw_fd(), headers, iovs.iter_mut(), MsgFlags::MSG_WAITFORONE, None) {
            Ok(results) => {
                let mut n = 0;
                for (slot, r) in got.iter_mut().zip(results) {
                    let dst = bound.or_else(|| destination(&r));
                    whole &= dst.is_some() && !r.flags.contains(MsgFlags::MSG_CTRUNC);
                    *slot = (r.address.as_ref().and_then(to_socket_addr), dst, r.bytes);
                    n += 1;
                }
                n
            }
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => 0,
            Err(nix::errno::Errno::ECONNREFUSED | nix::errno::Errno::EHOSTUNREACH | nix::errno::Errno::ENETUNREACH) => {
                // An ICMP error queued for a datagram we sent (IP_RECVERR), reported once by a receive.
                self.errors_pending = true;
                0
            }
            Err(e) => {
                warn!(error = %e, "receive failed");
                std::thread::sleep(Duration::from_millis(10));
                0
            }
        };
        if !whole {
            self.recv_headers = None;
        }
        n
    }

    /// Feeds the ICMP errors queued on the socket to the node (see `crate::net::icmp`).
    fn take_errors(&mut self, now: corral_proto::Instant) {
        self.errors_pending = false;
        self.errors_read_at = now;
        let node = &mut self.node;
        let _ = crate::net::icmp::drain(&self.socket, |peer, quoted| node.handle_unreachable(now, peer, Some(quoted)));
    }

    fn set_timeout(&mut self, wait: Duration) {
        // Only when it matters (a system call): a timeout more than TIMER_SLACK longer than the wait would
        // oversleep a timer, and one much shorter wakes the thread for nothing. As a timer draws near the
        // wait shrinks at every turn; the slack keeps that to one call per TIMER_SLACK, not one per turn.
        let stale = match self.timeout {
            None => true,
            Some(t) => t > wait + TIMER_SLACK || t < wait / 2,
        };
        if stale {
            if let Err(e) = self.socket.set_read_timeout(Some(wait)) {
                warn!(error = %e, "cannot set the receive timeout");
            }
            self.timeout = Some(wait);
        }
    }

    /// Sends what the node has to send, and carries out its multicast membership changes.
    fn flush(&mut self) {
        while let Some(event) = self.node.poll_event() {
            trace!(?event, "event without a taker");
        }
        while let Some(cmd) = self.node.poll_command() {
            let (group, join) = match cmd {
                NodeCommand::JoinGroup(g) => (g, true),
                NodeCommand::LeaveGroup(g) => (g, false),
            };
            if let Err(e) = crate::net::socket::membership(SockRef::from(&self.socket), &self.opts, group, join) {
                warn!(%group, error = %e, "multicast join/leave failed");
            }
        }
        // Again while a datagram found no route: its exchange failed, and the service may answer for it.
        while self.send_pending() {}
    }

    /// Sends the node's datagrams; `true` when one found no route and failed its exchange.
    fn send_pending(&mut self) -> bool {
        let mut out = std::mem::take(&mut self.outbox);
        while let Some(t) = self.node.poll_transmit() {
            trace!(dst = %t.dst, src = ?t.src, len = t.payload.len(), "datagram out");
            out.push(t);
        }
        let (mut sent, mut bounced) = (0, false);
        let fd = self.socket.as_raw_fd();
        while sent < out.len() {
            let (batch, n) = OutDatagram::batch(&out[sent..]);
            match send_run(fd, self.local, &batch[..n], &mut self.send_headers) {
                Ok(k) => sent += k,
                Err(e) if crate::net::icmp::unreachable_send(&e) => {
                    // No route: as the ICMP error would say, at once (see `crate::net::icmp::unreachable_send`).
                    let t = &out[sent];
                    debug!(dst = %t.dst, error = %e, "send failed: no route; the exchange fails now");
                    self.node.handle_unreachable(self.clock.now(), t.dst, Some(crate::net::icmp::quote(&t.payload)));
                    bounced = true;
                    sent += 1;
                }
                Err(e) => {
                    debug!(dst = %out[sent].dst, error = %e, "send failed");
                    sent += 1;
                }
            }
        }
        out.clear();
        self.outbox = out;
        bounced
    }
}

/// The local address a datagram was sent to (its IP_PKTINFO / IPV6_PKTINFO control message).
fn destination<S>(r: &nix::sys::socket::RecvMsg<'_, '_, S>) -> Option<IpAddr> {
    let cmsgs = match r.cmsgs() {
        Ok(c) => c,
        Err(e) => {
            debug!(error = %e, "control messages truncated: destination unknown");
            return None;
        }
    };
    for c in cmsgs {
        match c {
            ControlMessageOwned::Ipv4PacketInfo(p) => {
                return Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(p.ipi_addr.s_addr))));
            }
            ControlMessageOwned::Ipv6PacketInfo(p) => return Some(IpAddr::V6(Ipv6Addr::from(p.ipi6_addr.s6_addr))),
            _ => {}
        }
    }
    None
}

/// Blocking servers, one thread each, stopped together.
#[derive(Default)]
pub struct Workers {
    stop: std::sync::Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Workers {
    pub fn new() -> Workers {
        Workers::default()
    }

    /// Starts a thread named `name` that makes its node with `make` (on that thread: a node's services
    /// need not be `Send`, only what `make` captures) and serves it on `bound` until [`Workers::stop`].
    pub fn spawn(
        &mut self,
        name: String,
        bound: BoundSocket,
        make: impl FnOnce() -> Node + Send + 'static,
    ) -> io::Result<()> {
        let stop = self.stop.clone();
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || BlockingServer::new(make(), bound).run(&stop, Duration::from_secs(1)))?;
        self.threads.push(thread);
        Ok(())
    }

    /// Stops reading, lets requests in progress finish (up to a second, as the tokio driver does) and
    /// waits for every thread.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
    }
}
