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
//! Owns: the sockets and the loop that drives one node over them. Must never: implement protocol
//! behaviour (corral-proto's and the services'). A `Node` is not `Send`: run it in a `LocalSet`.

use crate::socket::{CoapSocket, PreparedSocket, SocketOptions};
use crate::Clock;
use corral_proto::{Node, NodeCommand};
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
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
}

/// Reads per turn before looking at timers again.
const READS_PER_TURN: usize = 16;

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
        }
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
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let (mc_tx, mut mc_rx) = mpsc::unbounded_channel::<(SocketAddr, IpAddr, Vec<u8>)>();
        let mut bufs = self.socket.recv_buffers();
        let sleep = tokio::time::sleep_until(tokio::time::Instant::now());
        tokio::pin!(sleep);
        loop {
            let now = self.clock.now();
            if self.node.poll_timeout().is_some_and(|t| t <= now) {
                self.node.handle_timeout(now);
            }
            self.drain(&mc_tx).await;
            let wake = self.node.poll_timeout();
            if let Some(t) = wake {
                sleep.as_mut().reset(self.clock.to_std(t).into());
            }
            tokio::select! {
                _ = stop.changed() => break,
                r = self.socket.readable() => {
                    if let Err(e) = r {
                        warn!(device = %self.addr, error = %e, "socket failed; device stopped");
                        break;
                    }
                    // ICMP errors for answers that could not be delivered (a spoofed source that does not
                    // exist): fed to the node; left queued, they made every later read fail.
                    let now = self.clock.now();
                    let node = &mut self.node;
                    self.socket.take_errors(|peer, quoted| node.handle_unreachable(now, peer, Some(quoted)));
                    for _ in 0..READS_PER_TURN {
                        match self.socket.try_recv(&mut bufs) {
                            Ok(_) => {
                                let now = self.clock.now();
                                for (from, _dst, data) in bufs.datagrams() {
                                    self.log(from, None, data);
                                    self.node.handle_datagram(now, from, None, data);
                                }
                                self.drain(&mc_tx).await;
                            }
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                            Err(e) => {
                                debug!(device = %self.addr, error = %e, "receive error");
                                break;
                            }
                        }
                    }
                }
                Some((from, group, data)) = mc_rx.recv() => {
                    self.log(from, Some(group), &data);
                    self.node.handle_datagram(self.clock.now(), from, Some(group), &data);
                }
                _ = &mut sleep, if wake.is_some() => {}
            }
        }
        for (_, task) in self.groups.drain() {
            task.abort();
        }
    }

    fn log(&mut self, from: SocketAddr, group: Option<IpAddr>, data: &[u8]) {
        if let Some(hook) = &mut self.on_datagram {
            hook(from, group, data);
        }
    }

    /// Applies joins and leaves, then sends what the node has to send.
    async fn drain(&mut self, mc_tx: &mpsc::UnboundedSender<(SocketAddr, IpAddr, Vec<u8>)>) {
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
        tx: mpsc::UnboundedSender<(SocketAddr, IpAddr, Vec<u8>)>,
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
