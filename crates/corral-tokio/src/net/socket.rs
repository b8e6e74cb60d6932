//! UDP sockets for CoAP: binding (dual stack), batched receive with the local destination address of every
//! datagram, sending, and multicast membership.
//!
//! The unsafe `recvmmsg`/`sendmsg` and control-message code lives in `quinn-udp` (and `sendmmsg` in `nix`);
//! this module stays safe.
//! Addresses handed to the protocol core are canonical: an IPv4 peer reaching a dual-stack `[::]` socket
//! appears as `1.2.3.4:p`, never as `[::ffff:1.2.3.4]:p`, and is mapped back when sending.

use quinn_udp::{RecvMeta, UdpSocketState};
use socket2::{Domain, Protocol, SockRef, Socket, Type};
use std::io::{self, IoSlice, IoSliceMut};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

#[cfg(target_os = "linux")]
pub(crate) use crate::net::addr::to_socket_addr;
pub use crate::net::addr::{canonical, canonical_ip};

/// A client's busy polling ([`SocketOptions::busy_poll`]) when its user does not choose one (`corral get`'s
/// `--busy-poll`): measured with `scripts/bench-blockwise.sh`, 200 µs takes a lock-step block-wise
/// transfer's next block on loopback without a wake-up. Never on a machine with one CPU, where the spinning
/// client would hold up the very server it waits for. The CPUs online count, not this process's affinity:
/// a client pinned to one core still has its peer elsewhere.
pub fn client_busy_poll() -> std::time::Duration {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .map(|s| {
            s.trim()
                .split(',')
                .map(|r| match r.split_once('-') {
                    Some((a, b)) => b.parse::<usize>().unwrap_or(0).saturating_sub(a.parse().unwrap_or(0)) + 1,
                    None => 1,
                })
                .sum::<usize>()
        })
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    std::time::Duration::from_micros(if online >= 2 { 200 } else { 0 })
}

/// How a socket is set up.
#[derive(Debug, Clone)]
pub struct SocketOptions {
    /// Interface for IPv4 multicast: joins and multicast sends use it. `None`: the kernel's routing choice.
    pub multicast_if_v4: Option<Ipv4Addr>,
    /// Interface index for IPv6 multicast joins and sends; 0 lets the kernel choose.
    pub multicast_if_v6: u32,
    /// Hop limit (TTL) of multicast sends; 1 keeps them on the link.
    pub multicast_hops: u32,
    /// SO_REUSEADDR, so that several processes can bind the same multicast port.
    pub reuse_address: bool,
    /// SO_REUSEPORT: several sockets (one per worker) bind the same address and port, and the kernel
    /// spreads unicast datagrams over them by a hash of the 4-tuple, so every datagram from one peer
    /// address and port reaches the same socket while the group of sockets stays the same.
    pub reuse_port: bool,
    /// Kernel receive buffer size to ask for (bytes); a server under load wants a large one.
    pub recv_buffer: Option<usize>,
    pub send_buffer: Option<usize>,
    /// Datagrams read per system call (`recvmmsg`), 1 to 32.
    pub batch: usize,
    /// After the last datagram of a burst, keep asking the socket for this long before the driver parks
    /// (zero: park at once). Trades a core's idle time for latency: a parked thread on a virtual machine
    /// takes tens of microseconds to wake. See `corral serve --busy-poll`.
    pub busy_poll: std::time::Duration,
}

impl Default for SocketOptions {
    fn default() -> Self {
        SocketOptions {
            multicast_if_v4: None,
            multicast_if_v6: 0,
            multicast_hops: 1,
            reuse_address: false,
            reuse_port: false,
            recv_buffer: None,
            send_buffer: None,
            batch: 8,
            busy_poll: std::time::Duration::ZERO,
        }
    }
}

impl SocketOptions {
    /// What a server's socket wants unless asked otherwise: 4 MiB kernel buffers each way and batches of
    /// at least 32 datagrams (the tokio server, and the gateway on either driver).
    pub fn for_server(mut self) -> SocketOptions {
        self.recv_buffer = self.recv_buffer.or(Some(4 << 20));
        self.send_buffer = self.send_buffer.or(Some(4 << 20));
        self.batch = self.batch.max(32);
        self
    }
}

/// Resolves `addr` (`"[::]:5683"`, `"localhost:0"`, a `SocketAddr`) to its first address.
pub fn resolve(addr: impl ToSocketAddrs) -> io::Result<SocketAddr> {
    addr.to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the address resolved to nothing"))
}

/// Creates a bound, non-blocking std socket. `[::]` is made dual-stack (IPV6_V6ONLY off) where the OS
/// allows it, so one socket serves IPv4 and IPv6.
pub fn bind_std(addr: SocketAddr, opts: &SocketOptions) -> io::Result<std::net::UdpSocket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if let SocketAddr::V6(v6) = addr {
        if v6.ip().is_unspecified() {
            if let Err(e) = socket.set_only_v6(false) {
                tracing::debug!(error = %e, "cannot make the socket dual-stack; IPv6 only");
            }
        }
    }
    if opts.reuse_address {
        socket.set_reuse_address(true)?;
    }
    if opts.reuse_port {
        socket.set_reuse_port(true)?;
    }
    if let Some(n) = opts.recv_buffer {
        let _ = socket.set_recv_buffer_size(n);
    }
    if let Some(n) = opts.send_buffer {
        let _ = socket.set_send_buffer_size(n);
    }
    socket.bind(&addr.into())?;
    socket.set_nonblocking(true)?;
    let v4_capable = addr.is_ipv4() || !socket.only_v6().unwrap_or(true);
    if v4_capable {
        if let Some(ifaddr) = opts.multicast_if_v4 {
            socket.set_multicast_if_v4(&ifaddr)?;
        }
        let _ = socket.set_multicast_ttl_v4(opts.multicast_hops);
    }
    if addr.is_ipv6() {
        if opts.multicast_if_v6 != 0 {
            socket.set_multicast_if_v6(opts.multicast_if_v6)?;
        }
        let _ = socket.set_multicast_hops_v6(opts.multicast_hops);
    }
    Ok(socket.into())
}

/// A bound socket with its `quinn-udp` state, not yet registered with a runtime: it can be made on one
/// thread and moved to the thread that will drive it.
pub struct PreparedSocket {
    socket: std::net::UdpSocket,
    state: UdpSocketState,
    local: SocketAddr,
    dual_stack: bool,
    opts: SocketOptions,
}

impl PreparedSocket {
    /// Binds a socket (see [`bind_std`]).
    pub fn bind(addr: SocketAddr, opts: SocketOptions) -> io::Result<PreparedSocket> {
        PreparedSocket::from_std(bind_std(addr, &opts)?, opts)
    }

    /// Takes a bound std socket; enables destination-address reporting (IP_PKTINFO, IPV6_RECVPKTINFO).
    pub fn from_std(socket: std::net::UdpSocket, opts: SocketOptions) -> io::Result<PreparedSocket> {
        let state = UdpSocketState::new((&socket).into())?;
        // quinn-udp asks for the TOS byte of every datagram (ECN, for QUIC); CoAP never reads it, and the
        // control message costs the kernel work on every receive.
        if socket.local_addr()?.is_ipv4() || !SockRef::from(&socket).only_v6().unwrap_or(true) {
            let _ = SockRef::from(&socket).set_recv_tos_v4(false);
        }
        let local = socket.local_addr()?;
        let dual_stack = local.is_ipv6() && !SockRef::from(&socket).only_v6().unwrap_or(true);
        #[cfg(target_os = "linux")]
        crate::net::icmp::enable(&socket, local, dual_stack);
        Ok(PreparedSocket { socket, state, local, dual_stack, opts })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    pub fn dual_stack(&self) -> bool {
        self.dual_stack
    }

    /// Joins a multicast group on the configured interface.
    pub fn join(&self, group: IpAddr) -> io::Result<()> {
        membership(SockRef::from(&self.socket), &self.opts, group, true)
    }

    /// Registers the socket with the current tokio runtime, for reading and for the errors the kernel
    /// queues (ICMP, see [`CoapSocket::take_errors`]) only (see [`CoapSocket`]).
    pub fn into_tokio(self) -> io::Result<CoapSocket> {
        let io = register(self.socket, Interest::READABLE | Interest::ERROR)?;
        Ok(CoapSocket { io, state: self.state, local: self.local, dual_stack: self.dual_stack, opts: self.opts })
    }
}

/// Registers a socket with the current runtime for one kind of readiness. `AsyncFd::with_interest` is
/// deprecated because an arbitrary `T: AsRawFd` might close its descriptor while registered; a
/// `std::net::UdpSocket` owns its descriptor until the `AsyncFd` (which deregisters first) drops it, so
/// the call is sound here, and its replacement would need `unsafe`, which this crate forbids.
#[allow(deprecated)]
fn register(socket: std::net::UdpSocket, interest: Interest) -> io::Result<AsyncFd<std::net::UdpSocket>> {
    AsyncFd::with_interest(socket, interest)
}

pub(crate) fn membership(sock: SockRef<'_>, opts: &SocketOptions, group: IpAddr, join: bool) -> io::Result<()> {
    let v4_if = opts.multicast_if_v4.unwrap_or(Ipv4Addr::UNSPECIFIED);
    match (canonical_ip(group), join) {
        (IpAddr::V4(g), true) => sock.join_multicast_v4(&g, &v4_if),
        (IpAddr::V4(g), false) => sock.leave_multicast_v4(&g, &v4_if),
        (IpAddr::V6(g), true) => sock.join_multicast_v6(&g, opts.multicast_if_v6),
        (IpAddr::V6(g), false) => sock.leave_multicast_v6(&g, opts.multicast_if_v6),
    }
}

/// Whether a socket bound to `local` can send to `dst`: an IPv4 socket cannot reach IPv6 and an IPv6-only
/// socket cannot reach IPv4.
pub fn can_reach(local: SocketAddr, dual_stack: bool, dst: &SocketAddr) -> bool {
    match (local, dst) {
        (SocketAddr::V4(_), SocketAddr::V4(_)) | (SocketAddr::V6(_), SocketAddr::V6(_)) => true,
        (SocketAddr::V4(_), SocketAddr::V6(_)) => false,
        (SocketAddr::V6(_), SocketAddr::V4(_)) => dual_stack,
    }
}

/// A CoAP UDP socket on tokio. See the module docs.
///
/// The socket is registered with the runtime for readability only. A UDP socket becomes writable again
/// after every datagram it sends (the kernel frees the datagram and signals write space), so a
/// registration for both would wake the driver once more per datagram sent, for nothing: measured
/// (`perf stat`, one closed-loop client) as two `epoll_wait` and two `recvmmsg` per request instead of
/// one. Sends are tried directly; only when the kernel buffer is full does [`CoapSocket::send_from`]
/// wait for room, on a duplicate descriptor registered for writability just for that wait.
pub struct CoapSocket {
    io: AsyncFd<std::net::UdpSocket>,
    state: UdpSocketState,
    local: SocketAddr,
    /// An IPv6 socket that also carries IPv4 (as mapped addresses).
    dual_stack: bool,
    opts: SocketOptions,
}

impl CoapSocket {
    /// Binds a socket; must be called inside a tokio runtime.
    pub fn bind(addr: SocketAddr, opts: SocketOptions) -> io::Result<CoapSocket> {
        PreparedSocket::bind(addr, opts)?.into_tokio()
    }

    pub fn dual_stack(&self) -> bool {
        self.dual_stack
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Whether this socket can send to `dst`.
    pub fn can_reach(&self, dst: &SocketAddr) -> bool {
        can_reach(self.local, self.dual_stack, dst)
    }

    fn to_wire(&self, dst: SocketAddr) -> SocketAddr {
        match dst {
            SocketAddr::V4(v4) if self.local.is_ipv6() => {
                SocketAddr::new(IpAddr::V6(v4.ip().to_ipv6_mapped()), v4.port())
            }
            other => other,
        }
    }

    /// Waits until the socket is readable or has errors queued (or was, spuriously).
    pub async fn readable(&self) -> io::Result<()> {
        self.io.ready(Interest::READABLE | Interest::ERROR).await.map(|mut guard| guard.retain_ready())
    }

    /// Hands every ICMP error queued for this socket (a datagram it sent could not be delivered: port,
    /// host or network unreachable) to `f`, with the peer it was sent to and the datagram's quoted start
    /// (see `icmp`). Never blocks; returns how many entries were read.
    pub fn take_errors(&self, mut f: impl FnMut(SocketAddr, &[u8])) -> usize {
        #[cfg(target_os = "linux")]
        {
            let mut total = 0;
            // Until the queue is empty (`WouldBlock` clears the error readiness), at most a few rounds.
            for _ in 0..4 {
                match self.io.try_io(Interest::ERROR, |sock| crate::net::icmp::drain(sock, &mut f)) {
                    Ok(n) => total += n,
                    Err(_) => break,
                }
            }
            total
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = &mut f;
            0
        }
    }

    /// Waits until the kernel has room for a datagram (or spuriously). See the type's docs.
    pub async fn writable(&self) -> io::Result<()> {
        let dup = register(self.io.get_ref().try_clone()?, Interest::WRITABLE)?;
        dup.writable().await.map(|mut guard| guard.retain_ready())
    }

    /// Reads as many datagrams as are waiting, up to the batch size, without blocking.
    /// `WouldBlock` when there are none.
    pub fn try_recv(&self, bufs: &mut RecvBuffers) -> io::Result<usize> {
        self.io.try_io(Interest::READABLE, |sock| self.recv_batch(sock, bufs))
    }

    /// Reads the datagrams waiting, up to the batch size, once the runtime has reported the socket readable
    /// (`WouldBlock` at once otherwise). A batch shorter than the buffers means the kernel's queue is empty, so the socket is taken as not ready (a datagram that
    /// arrives meanwhile raises a new readiness event) instead of asking the kernel once more just to
    /// hear `WouldBlock`: one `recvmmsg` per wake-up instead of two.
    pub async fn recv(&self, bufs: &mut RecvBuffers) -> io::Result<usize> {
        // Never waits for readiness the runtime does not report already: the driver calls this after
        // `readable`, which also returns for queued errors alone (see `take_errors`).
        let mut guard = tokio::select! {
            biased;
            guard = self.io.ready(Interest::READABLE | Interest::ERROR) => guard?,
            () = std::future::ready(()) => return Err(io::ErrorKind::WouldBlock.into()),
        };
        if !guard.ready().is_readable() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        match guard.try_io(|sock| self.recv_batch(sock.get_ref(), bufs)) {
            Ok(Ok(n)) => {
                if n < bufs.metas.len() {
                    guard.clear_ready_matching(tokio::io::Ready::READABLE);
                }
                Ok(n)
            }
            Ok(Err(e)) => Err(e),
            Err(_would_block) => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    /// Like [`CoapSocket::try_recv`], but asks the kernel even when the runtime believes the socket is
    /// not ready: for busy polling, between readiness events.
    pub fn try_recv_now(&self, bufs: &mut RecvBuffers) -> io::Result<usize> {
        self.recv_batch(self.io.get_ref(), bufs)
    }

    /// How long to busy-poll after a burst (see [`SocketOptions::busy_poll`]).
    pub fn busy_poll(&self) -> std::time::Duration {
        self.opts.busy_poll
    }

    fn recv_batch(&self, sock: &std::net::UdpSocket, bufs: &mut RecvBuffers) -> io::Result<usize> {
        let RecvBuffers { storage, chunk, metas, .. } = bufs;
        // On the stack: this runs once per batch, on the request path.
        let mut chunks = storage.chunks_mut(*chunk);
        let mut iovs: [IoSliceMut<'_>; quinn_udp::BATCH_SIZE] =
            std::array::from_fn(|_| IoSliceMut::new(chunks.next().unwrap_or_default()));
        let batch = metas.len().min(iovs.len());
        let n = self.state.recv(sock.into(), &mut iovs[..batch], &mut metas[..batch])?;
        bufs.filled = n;
        Ok(n)
    }

    /// Sends one datagram without blocking (`WouldBlock` when the kernel buffer is full). Other errors
    /// (unreachable network, …) are for the caller to log: CoAP's retransmissions deal with loss.
    pub fn try_send(&self, dst: SocketAddr, payload: &[u8]) -> io::Result<()> {
        self.try_send_from(dst, payload, None)
    }

    /// Like [`CoapSocket::try_send`], from local address `src` when the socket is bound to a wildcard
    /// address (IP_PKTINFO / IPV6_PKTINFO): an answer leaves from the address its request was sent to.
    pub fn try_send_from(&self, dst: SocketAddr, payload: &[u8], src: Option<IpAddr>) -> io::Result<()> {
        let src_ip = self.source(src);
        let transmit = quinn_udp::Transmit {
            destination: self.to_wire(dst),
            ecn: None,
            contents: payload,
            segment_size: None,
            src_ip,
        };
        self.state.try_send(self.io.get_ref().into(), &transmit)
    }

    /// Sends datagrams with as few system calls as the platform allows and returns how many the kernel
    /// took (the rest, after `WouldBlock` or an error, are the caller's; an error is returned only when
    /// nothing was sent). On Linux a run of datagrams that leave from the same source address goes out in
    /// one `sendmmsg` (the source as one IP_PKTINFO / IPV6_PKTINFO control message shared by the run, as
    /// `sendmmsg` in `nix` has it, see `send_run`); elsewhere the first datagram alone through quinn-udp.
    pub fn try_send_many(&self, datagrams: &[OutDatagram<'_>]) -> io::Result<usize> {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            // Fresh headers: a socket shared by tasks cannot keep them (they hold pointers, so are not
            // `Send`); the blocking driver, one thread per socket, does (see `SendHeaders`).
            send_run(self.io.get_ref().as_raw_fd(), self.local, datagrams, &mut SendHeaders::default())
        }
        #[cfg(not(target_os = "linux"))]
        match datagrams.first() {
            None => Ok(0),
            Some(d) => self.try_send_from(d.dst, d.payload, d.src).map(|()| 1),
        }
    }

    /// See [`source_for`].
    fn source(&self, src: Option<IpAddr>) -> Option<IpAddr> {
        source_for(self.local, src)
    }

    /// Sends one datagram, waiting for buffer space if needed.
    pub async fn send(&self, dst: SocketAddr, payload: &[u8]) -> io::Result<()> {
        self.send_from(dst, payload, None).await
    }

    /// Sends one datagram from `src` (see [`CoapSocket::try_send_from`]), waiting for buffer space.
    pub async fn send_from(&self, dst: SocketAddr, payload: &[u8], src: Option<IpAddr>) -> io::Result<()> {
        loop {
            match self.try_send_from(dst, payload, src) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.writable().await?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }

    /// Joins a multicast group on the configured interface.
    pub fn join(&self, group: IpAddr) -> io::Result<()> {
        membership(SockRef::from(self.io.get_ref()), &self.opts, group, true)
    }

    pub fn leave(&self, group: IpAddr) -> io::Result<()> {
        membership(SockRef::from(self.io.get_ref()), &self.opts, group, false)
    }

    /// The batch size this socket was configured with.
    pub fn batch(&self) -> usize {
        self.opts.batch.clamp(1, quinn_udp::BATCH_SIZE)
    }

    /// Receive buffers sized for this socket (GRO may coalesce datagrams into one buffer).
    pub fn recv_buffers(&self) -> RecvBuffers {
        RecvBuffers::new(self.batch(), 65_535usize.max(2048 * self.state.gro_segments()).min(1 << 16))
    }
}

/// The most datagrams [`CoapSocket::try_send_many`] hands the kernel in one call.
pub const SEND_BATCH: usize = 16;

/// One datagram to send (see [`CoapSocket::try_send_many`]).
#[derive(Debug, Clone, Copy)]
pub struct OutDatagram<'a> {
    pub dst: SocketAddr,
    pub payload: &'a [u8],
    /// The local address to send from, on a wildcard-bound socket (see [`CoapSocket::try_send_from`]).
    pub src: Option<IpAddr>,
}

impl<'a> OutDatagram<'a> {
    /// The first [`SEND_BATCH`] of `transmits` (a protocol node's output) as datagrams, and how many.
    pub(crate) fn batch(transmits: &'a [corral_proto::Transmit]) -> ([OutDatagram<'a>; SEND_BATCH], usize) {
        let n = transmits.len().min(SEND_BATCH);
        let mut batch = [OutDatagram { dst: SocketAddr::from(([0, 0, 0, 0], 0)), payload: &[], src: None }; SEND_BATCH];
        for (slot, t) in batch.iter_mut().zip(&transmits[..n]) {
            *slot = OutDatagram { dst: t.dst, payload: &t.payload, src: t.src };
        }
        (batch, n)
    }
}

/// The `sendmmsg` headers of one sender, kept across calls: allocating them anew (with room for the
/// whole batch's addresses) cost more user time than anything else in sending a small batch. One set
/// carries no control message, the other room for a source address (IP_PKTINFO / IPV6_PKTINFO): a header
/// whose control length is not 0 must carry a control message, and the kernel leaves the lengths of a
/// header it sends from as they were, so each set stays valid for its kind of send. Made on first use.
#[cfg(target_os = "linux")]
#[derive(Default)]
pub(crate) struct SendHeaders {
    plain: Option<MmsgHeaders>,
    with_source: Option<MmsgHeaders>,
    /// The destinations of the batch being sent (past the batch's length: a previous batch's, unused).
    addrs: [Option<nix::sys::socket::SockaddrStorage>; SEND_BATCH],
}

/// `nix`'s headers for `sendmmsg` (and `recvmmsg`), with room for an address each.
#[cfg(target_os = "linux")]
pub(crate) type MmsgHeaders = nix::sys::socket::MultiHeaders<nix::sys::socket::SockaddrStorage>;

#[cfg(target_os = "linux")]
impl SendHeaders {
    /// The headers for a send with or without a source address, and the destination slots.
    fn get(&mut self, with_source: bool) -> (&mut MmsgHeaders, &mut [Option<nix::sys::socket::SockaddrStorage>]) {
        let headers = if with_source {
            self.with_source.get_or_insert_with(|| {
                MmsgHeaders::preallocate(SEND_BATCH, Some(nix::cmsg_space!(nix::libc::in6_pktinfo)))
            })
        } else {
            self.plain.get_or_insert_with(|| MmsgHeaders::preallocate(SEND_BATCH, None))
        };
        (headers, &mut self.addrs)
    }
}

/// Sends the leading run of `datagrams` that leave from the same source (see [`source_for`]) in one
/// `sendmmsg` on the socket `fd` bound to `local`; returns how many the kernel took.
#[cfg(target_os = "linux")]
pub(crate) fn send_run(
    fd: std::os::fd::RawFd,
    local: SocketAddr,
    datagrams: &[OutDatagram<'_>],
    headers: &mut SendHeaders,
) -> io::Result<usize> {
    let Some(first) = datagrams.first() else { return Ok(0) };
    let src = source_for(local, first.src);
    let run = datagrams.iter().take(SEND_BATCH).take_while(|d| source_for(local, d.src) == src).count();
    sendmmsg_from(fd, local, &datagrams[..run], src, headers)
}

/// One `sendmmsg` of datagrams (at most [`SEND_BATCH`]) that all leave from `src` (an IP_PKTINFO /
/// IPV6_PKTINFO control message shared by the lot, as `nix`'s `sendmmsg` has it; `None`: the kernel's
/// choice) on the socket `fd` bound to `local` (an IPv4 destination is mapped for an IPv6 socket). Returns
/// how many the kernel took.
#[cfg(target_os = "linux")]
fn sendmmsg_from(
    fd: std::os::fd::RawFd,
    local: SocketAddr,
    datagrams: &[OutDatagram<'_>],
    src: Option<IpAddr>,
    headers: &mut SendHeaders,
) -> io::Result<usize> {
    use nix::libc;
    use nix::sys::socket::{sendmmsg, ControlMessage, MsgFlags, SockaddrStorage};
    let n = datagrams.len().min(SEND_BATCH);
    let mut iovs: [[IoSlice<'_>; 1]; SEND_BATCH] = [[IoSlice::new(&[])]; SEND_BATCH];
    let (headers, addrs) = headers.get(src.is_some());
    for (i, d) in datagrams[..n].iter().enumerate() {
        iovs[i] = [IoSlice::new(d.payload)];
        let dst = match d.dst {
            SocketAddr::V4(v4) if local.is_ipv6() => SocketAddr::new(IpAddr::V6(v4.ip().to_ipv6_mapped()), v4.port()),
            other => other,
        };
        addrs[i] = Some(SockaddrStorage::from(dst));
    }
    let v4 = match src {
        Some(IpAddr::V4(a)) => Some(libc::in_pktinfo {
            ipi_ifindex: 0,
            ipi_spec_dst: libc::in_addr { s_addr: u32::from_ne_bytes(a.octets()) },
            ipi_addr: libc::in_addr { s_addr: 0 },
        }),
        _ => None,
    };
    let v6 = match src {
        Some(IpAddr::V6(a)) => {
            Some(libc::in6_pktinfo { ipi6_ifindex: 0, ipi6_addr: libc::in6_addr { s6_addr: a.octets() } })
        }
        _ => None,
    };
    let cmsg = match (&v4, &v6) {
        (Some(p), _) => Some(ControlMessage::Ipv4PacketInfo(p)),
        (_, Some(p)) => Some(ControlMessage::Ipv6PacketInfo(p)),
        _ => None,
    };
    match sendmmsg(fd, headers, &iovs[..n], &addrs[..n], cmsg.as_slice(), MsgFlags::empty()) {
        Ok(results) => match results.count() {
            0 => Err(io::ErrorKind::WouldBlock.into()),
            sent => Ok(sent),
        },
        Err(e) => Err(io::Error::from(e)),
    }
}

/// The address a datagram must name as its source on a socket bound to `local`: only on a wildcard-bound
/// socket, and as IPv4 for an IPv4 peer of a dual-stack socket (the kernel sends it as IPv4).
pub(crate) fn source_for(local: SocketAddr, src: Option<IpAddr>) -> Option<IpAddr> {
    src.filter(|_| local.ip().is_unspecified()).map(|ip| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    })
}

/// Buffers for one batched receive.
pub struct RecvBuffers {
    storage: Vec<u8>,
    chunk: usize,
    metas: Vec<RecvMeta>,
    filled: usize,
}

impl RecvBuffers {
    pub fn new(batch: usize, chunk: usize) -> RecvBuffers {
        RecvBuffers { storage: vec![0; batch * chunk], chunk, metas: vec![RecvMeta::default(); batch], filled: 0 }
    }

    /// The datagrams of the last receive: (source, local destination address, bytes), with GRO segments
    /// split and addresses canonical.
    pub fn datagrams(&self) -> impl Iterator<Item = (SocketAddr, Option<IpAddr>, &[u8])> + '_ {
        self.metas[..self.filled].iter().zip(self.storage.chunks(self.chunk)).flat_map(|(meta, buf)| {
            let from = canonical(meta.addr);
            let dst = meta.dst_ip.map(canonical_ip);
            let stride = if meta.stride == 0 { meta.len.max(1) } else { meta.stride };
            buf[..meta.len.min(buf.len())].chunks(stride).map(move |seg| (from, dst, seg))
        })
    }
}

/// The unspecified address of the family of `addr` with port 0: a client's natural bind address.
pub fn unspecified_for(addr: &SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        SocketAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
    }
}
