//! A node on real sockets that takes part in multicast groups: [`GroupNode`], one unicast socket, and one
//! more socket for every group the node's services join (`NodeCommand::JoinGroup`, e.g. corral-group's
//! `/mc`) — what `corral device` and the gateway's testbed run for each virtual device.
//!
//! A socket bound to a unicast address never receives multicast datagrams (Linux delivers a group datagram
//! only to sockets bound to the wildcard or to the group address). So for every group the node joins it
//! opens one more socket, bound to `group:port` with SO_REUSEADDR (every member binds the same pair) and
//! joined on the interface of the node's address (`127.0.0.1`, i.e. `lo`, for loopback nodes). Datagrams
//! read there go to the node with the group as their destination (leisure, no error responses: RFC 7252
//! §8.1); answers leave from the unicast socket, so that a group's requester sees them come from the
//! member's own address. Leaving the group closes that socket. Nothing binds the wildcard address.
//!
//! Owns: the sockets and what the driver loop ([`crate::event_loop`]) does with them for one node. Must never: implement protocol
//! behaviour (corral-proto's and the services'). A `Node` is not `Send`: run it in a `LocalSet`.

use crate::net::socket::{CoapSocket, PreparedSocket, SocketOptions};
use crate::Clock;
use corral_proto::{Instant, Node, NodeCommand};
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::ops::ControlFlow;
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

/// Called with every datagram a node reads, before the node handles it: its source, the group it was sent
/// to (`None`: the unicast socket) and its bytes.
pub type DatagramHook = Box<dyn FnMut(SocketAddr, Option<IpAddr>, &[u8])>;

/// One node, its unicast socket and its group sockets. See the module docs.
pub struct GroupNode {
    addr: SocketAddr,
    node: Node,
    socket: CoapSocket,
    clock: Clock,
    /// The port group sockets bind; `None`: the unicast socket's.
    mcast_port: Option<u16>,
    /// The IPv4 interface groups are joined on; `None`: that of the node's address (`lo` for loopback).
    mcast_if: Option<Ipv4Addr>,
    on_datagram: Option<DatagramHook>,
    /// Joined groups and the task reading each group's socket.
    groups: HashMap<IpAddr, tokio::task::JoinHandle<()>>,
    /// What the node says before it stops (see [`GroupNode::on_stop`]).
    farewell: Option<Farewell>,
}

/// Starts a node's last exchanges when it is told to stop (a device removing its registration).
pub type FarewellStart = Box<dyn FnOnce(&mut Node, Instant)>;
/// Whether the last exchanges are done.
pub type FarewellDone = Box<dyn Fn(&Node) -> bool>;

struct Farewell {
    start: FarewellStart,
    done: FarewellDone,
}

/// How long a stopping node waits for its last exchanges.
const FAREWELL_GRACE: corral_proto::Duration = corral_proto::Duration::from_secs(3);

/// Reads per turn before looking at timers again.
const READS_PER_TURN: usize = 16;

/// A datagram read on a group's socket: its source, the group and its bytes.
type GroupDatagram = (SocketAddr, IpAddr, Vec<u8>);

/// A [`GroupNode`] being driven: the node and what its loop reads from.
struct Running {
    node: GroupNode,
    stop: watch::Receiver<bool>,
    /// The group sockets' reading tasks send what they read here.
    mc_tx: mpsc::UnboundedSender<GroupDatagram>,
    mc_rx: mpsc::UnboundedReceiver<GroupDatagram>,
    bufs: crate::net::socket::RecvBuffers,
    /// Told to stop, saying farewell until this time or until it is done.
    leaving: Option<Instant>,
}

/// What wakes a group node.
enum Input {
    Stop,
    /// The unicast socket is readable (or failed).
    Readable(io::Result<()>),
    Group(GroupDatagram),
}

impl crate::driver::event_loop::Drive for Running {
    type Input = Input;
    type Output = ();

    fn clock(&self) -> Clock {
        self.node.clock
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let node = self.node.node.poll_timeout();
        match self.leaving {
            Some(deadline) => Some(node.map_or(deadline, |t| t.min(deadline))),
            None => node,
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.node.node.handle_timeout(now)
    }

    async fn flush(&mut self, now: Instant) -> ControlFlow<()> {
        self.node.drain(&self.mc_tx).await;
        if let Some(deadline) = self.leaving {
            let done = self.node.farewell.as_ref().is_none_or(|f| (f.done)(&self.node.node));
            if done || now >= deadline {
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }

    async fn input(&mut self) -> Input {
        let leaving = self.leaving.is_some();
        tokio::select! {
            _ = self.stop.changed(), if !leaving => Input::Stop,
            r = self.node.socket.readable() => Input::Readable(r),
            Some(d) = self.mc_rx.recv() => Input::Group(d),
        }
    }

    async fn handle(&mut self, input: Input) -> ControlFlow<()> {
        let me = &mut self.node;
        match input {
            Input::Stop => {
                let Some(farewell) = me.farewell.as_mut() else { return ControlFlow::Break(()) };
                let now = me.clock.now();
                let start = std::mem::replace(&mut farewell.start, Box::new(|_, _| {}));
                start(&mut me.node, now);
                self.leaving = Some(now + FAREWELL_GRACE);
                me.drain(&self.mc_tx).await;
            }
            Input::Readable(Err(e)) => {
                warn!(device = %me.addr, error = %e, "socket failed; device stopped");
                return ControlFlow::Break(());
            }
            Input::Readable(Ok(())) => {
                // ICMP errors for answers that could not be delivered (a spoofed source that does not
                // exist): fed to the node; left queued, they made every later read fail.
                let now = me.clock.now();
                let node = &mut me.node;
                me.socket.take_errors(|peer, quoted| node.handle_unreachable(now, peer, Some(quoted)));
                for _ in 0..READS_PER_TURN {
                    match me.socket.try_recv(&mut self.bufs) {
                        Ok(_) => {
                            let now = me.clock.now();
                            for (from, _dst, data) in self.bufs.datagrams() {
                                me.log(from, None, data);
                                me.node.handle_datagram(now, from, None, data);
                            }
                            me.drain(&self.mc_tx).await;
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => {
                            debug!(device = %me.addr, error = %e, "receive error");
                            break;
                        }
                    }
                }
            }
            Input::Group((from, group, data)) => {
                me.log(from, Some(group), &data);
                me.node.handle_datagram(me.clock.now(), from, Some(group), &data);
            }
        }
        ControlFlow::Continue(())
    }
}

impl GroupNode {
    /// `node` on `socket`, bound to `addr`.
    pub fn new(addr: SocketAddr, node: Node, socket: CoapSocket, clock: Clock) -> GroupNode {
        GroupNode {
            addr,
            node,
            socket,
            clock,
            mcast_port: None,
            mcast_if: None,
            on_datagram: None,
            groups: HashMap::new(),
            farewell: None,
        }
    }

    /// When told to stop, calls `start` (which begins the node's last exchanges, e.g. removing a
    /// registration) and keeps running until `done` says they are over, or for at most 3 s.
    pub fn on_stop(mut self, start: FarewellStart, done: FarewellDone) -> GroupNode {
        self.farewell = Some(Farewell { start, done });
        self
    }

    /// The port group sockets bind (default: the unicast socket's) and the IPv4 interface groups are joined
    /// on (default: that of the node's address).
    pub fn multicast(mut self, port: Option<u16>, interface: Option<Ipv4Addr>) -> GroupNode {
        self.mcast_port = port;
        self.mcast_if = interface;
        self
    }

    /// Calls `hook` with every datagram read, before the node handles it (a request log).
    pub fn on_datagram(mut self, hook: DatagramHook) -> GroupNode {
        self.on_datagram = Some(hook);
        self
    }

    /// Drives the node until `stop` changes or the unicast socket fails; must run within a `LocalSet`.
    pub async fn run(self, stop: watch::Receiver<bool>) {
        let (mc_tx, mc_rx) = mpsc::unbounded_channel();
        let bufs = self.socket.recv_buffers();
        let mut running = Running { node: self, stop, mc_tx, mc_rx, bufs, leaving: None };
        crate::driver::event_loop::run(&mut running).await;
        for (_, task) in running.node.groups.drain() {
            task.abort();
        }
    }

    fn log(&mut self, from: SocketAddr, group: Option<IpAddr>, data: &[u8]) {
        if let Some(hook) = &mut self.on_datagram {
            hook(from, group, data);
        }
    }

    /// Applies joins and leaves, then sends what the node has to send.
    async fn drain(&mut self, mc_tx: &mpsc::UnboundedSender<GroupDatagram>) {
        while self.node.poll_event().is_some() {}
        while let Some(cmd) = self.node.poll_command() {
            match cmd {
                NodeCommand::JoinGroup(g) => {
                    if self.groups.contains_key(&g) {
                        continue;
                    }
                    match self.open_group(g, mc_tx.clone()) {
                        Ok(task) => {
                            info!(device = %self.addr, group = %g, "joined multicast group");
                            self.groups.insert(g, task);
                        }
                        // /mc already answered 2.04; the EM learns of the failure when the member stays
                        // silent on a multicast request. Said loudly, since it is a host problem.
                        Err(e) => warn!(device = %self.addr, group = %g, error = %e, "cannot join multicast group"),
                    }
                }
                NodeCommand::LeaveGroup(g) => {
                    if let Some(task) = self.groups.remove(&g) {
                        task.abort();
                        info!(device = %self.addr, group = %g, "left multicast group");
                    }
                }
            }
        }
        while let Some(t) = self.node.poll_transmit() {
            if let Err(e) = self.socket.send(t.dst, &t.payload).await {
                debug!(device = %self.addr, dst = %t.dst, error = %e, "send failed");
            }
        }
    }

    /// A socket bound to `group:port`, joined to the group, read by a task that forwards to the device.
    fn open_group(
        &self,
        group: IpAddr,
        tx: mpsc::UnboundedSender<GroupDatagram>,
    ) -> io::Result<tokio::task::JoinHandle<()>> {
        let port = self.mcast_port.unwrap_or(self.addr.port());
        let ifaddr = self.mcast_if.unwrap_or(match self.addr.ip() {
            IpAddr::V4(a) if a.is_loopback() => Ipv4Addr::LOCALHOST,
            IpAddr::V4(a) => a,
            IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
        });
        let opts = SocketOptions {
            reuse_address: true,
            multicast_if_v4: Some(ifaddr),
            // IPv6 groups on the loopback interface (index 1) for loopback devices; the kernel's choice
            // otherwise.
            multicast_if_v6: if self.addr.ip().is_loopback() { 1 } else { 0 },
            batch: 1,
            ..SocketOptions::default()
        };
        let socket = PreparedSocket::bind(SocketAddr::new(group, port), opts)?;
        socket.join(group)?;
        let socket = socket.into_tokio()?;
        let device = self.addr;
        Ok(tokio::task::spawn_local(async move {
            let mut bufs = socket.recv_buffers();
            loop {
                if socket.readable().await.is_err() {
                    return;
                }
                // A receive-only socket: nothing of ours to fail, but a queued error must not stay queued.
                socket.take_errors(|_, _| {});
                match socket.try_recv(&mut bufs) {
                    Ok(_) => {
                        for (from, _dst, data) in bufs.datagrams() {
                            if tx.send((from, group, data.to_vec())).is_err() {
                                return;
                            }
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => {
                        debug!(%device, %group, error = %e, "group socket receive error");
                    }
                }
            }
        }))
    }
}
