//! The simulator's side of [`App`]s: attaching one to a node, driving it (its actions out, its timer),
//! handing it TCP news and UDP datagrams, and how big a TCP segment is on the radio.
//!
//! A node runs either a CoAP node (`corral_proto::Node`) or an app, not both. Must never let an app see
//! another node's traffic or act outside the instant it is called at.

use super::Sim;
use crate::app::{App, AppAction};
use crate::tcp::{TcpNews, RAW_IP_PORT};
use crate::trace::NodeId;
use corral_proto::Instant;
use std::net::SocketAddr;

/// Bytes of the uncompressed IPv6 header that 6LoWPAN elides from a TCP segment, beyond what the radio
/// layout already counts for a UDP datagram. The simulator carries a TCP segment as a whole IPv6 packet
/// (40 B header + TCP header + data) and the layout adds 10 B of IPHC + UDP NHC ([`crate::radio`]) to any
/// payload; on the air a TCP segment takes IPHC 2 B + hop limit 1 B + next header inline 1 B (RFC 6282 has
/// no TCP header compression) = 4 B, so 40 + 10 − 4 = 46 B come off.
pub(crate) const TCP_ELIDED: usize = 46;

/// The payload length the radio layout is computed for: a TCP segment without its elided IPv6 header.
pub(crate) fn radio_len(dst: SocketAddr, len: usize) -> usize {
    if dst.port() == RAW_IP_PORT {
        len.saturating_sub(TCP_ELIDED)
    } else {
        len
    }
}

impl Sim {
    /// Attaches an [`App`] to simulated node `id` (instead of a CoAP node) and lets it act at once.
    pub fn attach_app(&mut self, id: NodeId, app: Box<dyn App>) {
        let n = &mut self.nodes[id.index()];
        n.proto = None;
        n.app = Some(app);
        n.timer_at = None;
        self.drain(id.0, false);
    }

    /// The app on `id`, if it is an `A`.
    pub fn app<A: App>(&self, id: NodeId) -> Option<&A> {
        self.nodes.get(id.index())?.app.as_deref()?.as_any().downcast_ref()
    }

    /// Runs `f` on the app on `id` at the current time, then processes its actions.
    pub fn with_app<A: App, R>(&mut self, id: NodeId, f: impl FnOnce(Instant, &mut A) -> R) -> Option<R> {
        let now = self.now();
        let a = self.nodes.get_mut(id.index())?.app.as_deref_mut()?.as_any_mut().downcast_mut::<A>()?;
        let r = f(now, a);
        self.drain(id.0, false);
        Some(r)
    }

    /// Drains an app's actions (after its timeout, if it is due) and re-arms its timer.
    pub(super) fn drain_app(&mut self, i: u32, after_timeout: bool) {
        let now = self.now();
        if after_timeout {
            let app = self.nodes[i as usize].app.as_deref_mut().expect("an app");
            if app.poll_timeout().is_some_and(|t| t <= now) {
                app.on_timeout(now);
            }
        }
        loop {
            let app = self.nodes[i as usize].app.as_deref_mut().expect("an app");
            let port = app.tcp_port();
            match app.poll_action() {
                Some(AppAction::Connect(dst)) => self.tcp_host(i).connect(dst),
                Some(AppAction::Send(conn, bytes)) => self.tcp_host(i).send(conn, &bytes),
                Some(AppAction::Close(conn)) => self.tcp_host(i).close(conn),
                Some(AppAction::Datagram(dst, bytes)) => self.submit_from(i, port, dst, bytes),
                None => {
                    if !self.poll_tcp(i, now) {
                        break;
                    }
                }
            }
        }
        let app_at = self.nodes[i as usize].app.as_deref().and_then(|a| a.poll_timeout());
        self.arm_timer(i, now, app_at, after_timeout);
    }

    /// News from node `i`'s TCP stack, for its app.
    pub(super) fn tcp_news_to_app(&mut self, i: u32, now: Instant, news: Vec<TcpNews>) {
        let Some(app) = self.nodes[i as usize].app.as_deref_mut() else { return };
        for n in news {
            match n {
                TcpNews::Connected(conn, peer) => app.on_connected(now, conn, peer),
                TcpNews::ConnectFailed(dst) => app.on_connect_failed(now, dst),
                TcpNews::Data(conn, bytes) => app.on_data(now, conn, &bytes),
                TcpNews::Closed(conn) => app.on_closed(now, conn),
            }
        }
    }

    /// A datagram reached node `at`, which runs an app: a TCP segment to its stack, UDP to the app.
    pub(super) fn datagram_to_app(&mut self, at: u32, src: SocketAddr, dst: SocketAddr, payload: &[u8]) {
        if dst.port() == RAW_IP_PORT {
            self.tcp_host(at).receive(payload);
        } else {
            let now = self.now();
            if let Some(app) = self.nodes[at as usize].app.as_deref_mut() {
                app.on_datagram(now, src, payload);
            }
        }
        self.drain(at, false);
    }
}
