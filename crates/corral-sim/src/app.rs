//! Programs that speak TCP or bare UDP themselves on a simulated node, instead of through a
//! `corral_proto::Node`: the lab's HTTP baselines ([`crate::http`]). An [`App`] is sans-IO like a CoAP
//! node: the simulator hands it connections, bytes, datagrams and timeouts, and drains the
//! [`AppAction`]s it queues. Its TCP runs on the node's smoltcp stack (`crate::tcp`), listening on
//! [`App::tcp_port`]; its UDP datagrams travel like any other (same radio, MAC, fragmentation, records,
//! pcap).
//!
//! Owns: the interface only. The simulator's side (attach, drive, deliver) is in `sim/apps.rs`. An app must
//! never read a clock or a global RNG: `now` comes with every call, so a run stays a function of its seed.

use corral_proto::tcp::ConnId;
use corral_proto::Instant;
use std::any::Any;
use std::net::SocketAddr;

/// What an app asks of its node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppAction {
    /// Open a TCP connection; the stack reports [`App::on_connected`] or [`App::on_connect_failed`].
    Connect(SocketAddr),
    /// Write bytes to a connection.
    Send(ConnId, Vec<u8>),
    /// Close a connection (FIN after the written bytes).
    Close(ConnId),
    /// Send a UDP datagram.
    Datagram(SocketAddr, Vec<u8>),
}

/// A program on a simulated node. Never reads a clock or a global RNG: `now` comes in with every call.
pub trait App: Any {
    /// The port the node's TCP stack listens on.
    fn tcp_port(&self) -> u16;
    /// A connection this node opened (or accepted) is established; `peer` is the other end.
    fn on_connected(&mut self, now: Instant, conn: ConnId, peer: SocketAddr);
    fn on_connect_failed(&mut self, now: Instant, dst: SocketAddr);
    fn on_data(&mut self, now: Instant, conn: ConnId, data: &[u8]);
    fn on_closed(&mut self, now: Instant, conn: ConnId);
    /// A UDP datagram addressed to this node.
    fn on_datagram(&mut self, now: Instant, src: SocketAddr, payload: &[u8]);
    /// Called at (or after) the instant [`App::poll_timeout`] asked for.
    fn on_timeout(&mut self, now: Instant);
    fn poll_timeout(&self) -> Option<Instant>;
    fn poll_action(&mut self) -> Option<AppAction>;
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}
