//! The simulator's network layer and its nodes: draining what a CoAP node (or its TCP host) wants to send,
//! submitting datagrams, routing them hop by hop over radio and wired links, multicast (flooding and
//! SMRF), and delivering them to the node they are for. Methods of [`Sim`]; the MAC below is in `mac.rs`.

use super::*;

impl Sim {
    // ---------------------------------------------------------------------------------------------
    // Internals: driving CoAP nodes
    // ---------------------------------------------------------------------------------------------

    /// Drains a node's outputs after an input and re-arms its timer.
    pub(super) fn drain(&mut self, i: u32, after_timeout: bool) {
        if self.nodes[i as usize].app.is_some() {
            return self.drain_app(i, after_timeout);
        }
        let now = self.now();
        loop {
            let Some(node) = self.nodes[i as usize].proto.as_deref_mut() else { return };
            if let Some(cmd) = node.poll_command() {
                self.apply_command(i, cmd);
                continue;
            }
            if let Some(t) = node.poll_transmit() {
                self.submit(i, t.dst, t.payload);
                continue;
            }
            if let Some(ev) = node.poll_event() {
                self.recorder.node_events.push((now, NodeId(i), ev));
                continue;
            }
            if let Some(dst) = node.poll_tcp_connect() {
                self.tcp_host(i).connect(dst);
                continue;
            }
            if let Some(t) = node.poll_tcp_transmit() {
                self.tcp_host(i).send(t.conn, &t.bytes);
                continue;
            }
            if let Some(conn) = node.poll_tcp_close() {
                self.tcp_host(i).close(conn);
                continue;
            }
            // The TCP stack, if the node has one: packets out, and news for the node (which may make it
            // write more, hence the loop).
            if self.poll_tcp(i, now) {
                continue;
            }
            break;
        }
        let proto_at = self.nodes[i as usize].proto.as_deref().and_then(Node::poll_timeout);
        self.arm_timer(i, now, proto_at, after_timeout);
    }

    /// Arms node `i`'s timer at the earlier of `deadline` (its CoAP node's or app's) and its TCP stack's,
    /// unless an earlier one is armed already.
    pub(super) fn arm_timer(&mut self, i: u32, now: Instant, deadline: Option<Instant>, after_timeout: bool) {
        let tcp_at = self.nodes[i as usize].tcp.as_deref_mut().and_then(|h| h.poll_at(now));
        let node = &mut self.nodes[i as usize];
        let Some(mut t) = [deadline, tcp_at].into_iter().flatten().min() else { return };
        if t <= now && after_timeout {
            // The node still reports a deadline it has just been given: wake it one tick later instead of
            // spinning at the same instant.
            t = now + Duration::from_micros(1);
        }
        let t = t.max(now);
        if node.timer_at.is_none_or(|cur| t < cur) {
            node.timer_at = Some(t);
            self.queue.schedule(t, Ev::Timer(i));
        }
    }

    /// Node `i`'s TCP stack, made on first use (listening on the CoAP port, seeded from the run's seed).
    pub(super) fn tcp_host(&mut self, i: u32) -> &mut crate::tcp::TcpHost {
        let now = self.now();
        let addr = self.nodes[i as usize].addr;
        let seed = self.cfg.seed ^ (0x7c9_0000_0000 + u64::from(i));
        let port = self.nodes[i as usize].app.as_ref().map_or(COAP_PORT, |a| a.tcp_port());
        let timers = self.cfg.tcp;
        self.nodes[i as usize]
            .tcp
            .get_or_insert_with(|| Box::new(crate::tcp::TcpHost::new(addr, port, seed, now, timers)))
    }

    /// Runs node `i`'s TCP stack: sends its packets, hands its news to the node. Whether anything happened.
    pub(super) fn poll_tcp(&mut self, i: u32, now: Instant) -> bool {
        let Some(host) = self.nodes[i as usize].tcp.as_deref_mut() else { return false };
        let packets = host.poll(now);
        let mut news = Vec::new();
        while let Some(n) = host.take_news() {
            news.push(n);
        }
        let busy = !packets.is_empty() || !news.is_empty();
        for p in packets {
            let dst = match smoltcp::wire::Ipv6Packet::new_checked(&p[..]) {
                Ok(ipp) => IpAddr::V6(ipp.dst_addr()),
                Err(_) => continue,
            };
            self.submit(i, SocketAddr::new(dst, crate::tcp::RAW_IP_PORT), p);
        }
        if self.nodes[i as usize].app.is_some() {
            self.tcp_news_to_app(i, now, news);
            return busy;
        }
        let Some(node) = self.nodes[i as usize].proto.as_deref_mut() else { return busy };
        for n in news {
            match n {
                crate::tcp::TcpNews::Connected(conn, peer) => node.handle_tcp_connected(now, conn, peer),
                crate::tcp::TcpNews::ConnectFailed(dst) => node.handle_tcp_connect_failed(now, dst),
                crate::tcp::TcpNews::Data(conn, bytes) => node.handle_tcp_data(now, conn, &bytes),
                crate::tcp::TcpNews::Closed(conn) => node.handle_tcp_closed(now, conn),
            }
        }
        busy
    }

    /// TCP segments node `i` sent again (retransmissions by its TCP stack).
    pub fn tcp_retransmissions(&self, id: NodeId) -> u64 {
        self.nodes.get(id.0 as usize).and_then(|n| n.tcp.as_deref()).map_or(0, |h| h.retransmitted_segments)
    }

    /// Messages node `i`'s TCP stack sent again: each segment sent again counts every write of the node
    /// (one CoAP message each) whose bytes it carries — a segment that repeats three readings counts three,
    /// as a CoAP over UDP sender that repeats three readings sends three datagrams.
    pub fn tcp_retransmitted_messages(&self, id: NodeId) -> u64 {
        self.nodes.get(id.0 as usize).and_then(|n| n.tcp.as_deref()).map_or(0, |h| h.retransmitted_writes)
    }

    /// Gives the wired link between `a` and `b` timed outages (both directions, on top of its independent
    /// loss). Whether there is such a link.
    pub fn set_wired_outages(&mut self, a: NodeId, b: NodeId, outages: Outages) -> bool {
        let (a, b) = (a.0 as usize, b.0 as usize);
        let Some(w) =
            self.routing.wired.iter_mut().find(|w| (w.spec.a, w.spec.b) == (a, b) || (w.spec.a, w.spec.b) == (b, a))
        else {
            return false;
        };
        w.outages = Some((outages, OutageState::default()));
        true
    }

    /// Discards whole datagrams at their destination — at node `only`, or at every node — before its UDP
    /// or TCP layer sees them: a datagram of `f` 6LoWPAN fragments with probability `by_frames[f − 1]` (the
    /// last entry for more). Seed 002 §6.5's procedure, which discards messages with Table 4's `C_f`.
    /// Empty: none.
    pub fn set_message_discard(&mut self, only: Option<NodeId>, by_frames: Vec<f64>) {
        self.routing.discard = by_frames;
        self.routing.discard_at = only.map(|n| n.0);
    }

    /// Gives node `n` a receive path of its own ([`SimConfig::rx_queue`] for this node only): `Some(k)`
    /// handles its datagrams one at a time with room for `k` waiting, `None` in parallel. Seed 002's CoapBlip
    /// server, whose UDP buffer stays taken while a request is processed, is `Some(0)`.
    pub fn set_rx_queue(&mut self, n: NodeId, waiting: Option<u16>) {
        if let Some(node) = self.nodes.get_mut(n.0 as usize) {
            node.rx_queue = waiting;
        }
    }

    pub(super) fn apply_command(&mut self, i: u32, cmd: NodeCommand) {
        let tin = self.nodes[i as usize].tin;
        match cmd {
            NodeCommand::JoinGroup(g) => {
                let m = self.routing.groups.entry(g).or_default();
                if let Err(pos) = m.binary_search(&(tin, i)) {
                    m.insert(pos, (tin, i));
                }
            }
            NodeCommand::LeaveGroup(g) => {
                if let Some(m) = self.routing.groups.get_mut(&g) {
                    m.retain(|&(_, n)| n != i);
                }
            }
        }
    }

    /// A node's `Transmit`: a new datagram.
    pub(super) fn submit(&mut self, i: u32, dst: SocketAddr, payload: Vec<u8>) {
        self.submit_from(i, COAP_PORT, dst, payload);
    }

    /// [`Sim::submit`] from the node's port `sport`.
    pub(super) fn submit_from(&mut self, i: u32, sport: u16, dst: SocketAddr, payload: Vec<u8>) {
        let src = SocketAddr::new(self.nodes[i as usize].addr, sport);
        self.submit_as(i, src, dst, payload);
    }

    /// A datagram leaves node `i` with source `src`, its own or not (a spoofer's).
    pub(super) fn submit_as(&mut self, i: u32, src: SocketAddr, dst: SocketAddr, payload: Vec<u8>) {
        let now = self.now();
        let id = self.recorder.next_id();
        self.recorder.capture(now, src, dst, &payload);
        if self.cfg.record {
            let broadcast = dst.ip().is_multicast();
            let len = radio_len(dst, payload.len());
            let layout = self.nodes[i as usize].radio.as_ref().and_then(|_| self.cfg.radio.layout(len, broadcast));
            self.recorder.datagrams.push(DatagramInfo {
                id,
                at: now,
                node: NodeId(i),
                src,
                dst,
                len: payload.len(),
                layout,
                coap: CoapSummary::parse(&payload),
            });
        }
        let dg = Rc::new(Dgram { id, src, dst, payload: payload.into_boxed_slice(), created: now });
        self.nodes[i as usize].counters.datagrams_sent += 1;
        let mut r = Record::new(now, NodeId(i), RecordKind::Sent, id);
        r.bytes = dg.payload.len() as u32;
        self.record(r);
        if dst.ip().is_multicast() {
            self.multicast(i, dg, 0, None);
        } else {
            self.forward(i, dg, 0);
        }
    }

    pub(super) fn next_hop(&self, at: u32, dst: u32) -> Option<u32> {
        let a = &self.nodes[at as usize];
        let d = &self.nodes[dst as usize];
        if a.comp != d.comp {
            return None;
        }
        if a.tin < d.tin && d.tin < a.tout {
            let k = a.children.partition_point(|&c| self.nodes[c as usize].tin <= d.tin);
            return a.children.get(k.checked_sub(1)?).copied();
        }
        a.rparent
    }

    /// Routes a unicast datagram from node `at` (its source or a forwarder).
    pub(super) fn forward(&mut self, at: u32, dg: DgramRef, hops: u8) {
        let Some(&dst) = self.routing.by_addr.get(&dg.dst.ip()) else {
            return self.drop_dgram(at, &dg, DropReason::NoRoute, hops);
        };
        if dst == at {
            // Loopback: delivered at once.
            return self.deliver_local(at, &dg, hops);
        }
        if hops >= self.cfg.hop_limit {
            return self.drop_dgram(at, &dg, DropReason::HopLimit, hops);
        }
        let Some(next) = self.next_hop(at, dst) else {
            return self.drop_dgram(at, &dg, DropReason::NoRoute, hops);
        };
        self.send_link(at, next, dg, hops);
    }

    /// Sends over the tree edge between `at` and its tree neighbour `next`.
    pub(super) fn send_link(&mut self, at: u32, next: u32, dg: DgramRef, hops: u8) {
        let wired = if self.nodes[next as usize].rparent == Some(at) {
            self.nodes[next as usize].up_wired
        } else {
            self.nodes[at as usize].up_wired
        };
        match wired {
            Some(link) => self.send_wired(at, link, next, dg, hops),
            None => self.enqueue(at, Some(next), dg, hops),
        }
    }

    pub(super) fn send_wired(&mut self, at: u32, link: u32, to: u32, dg: DgramRef, hops: u8) {
        let now = self.now();
        let w = &mut self.routing.wired[link as usize];
        let down = w.outages.as_mut().is_some_and(|(o, s)| o.down(s, now, &mut self.routing.outage_rng));
        if down || (w.spec.loss > 0.0 && self.routing.wired_rng.chance(w.spec.loss)) {
            return self.drop_dgram(at, &dg, DropReason::WiredLoss, hops);
        }
        let dir = usize::from(w.spec.a != at as usize);
        let bits = ((dg.payload.len() + IPV6_UDP_HEADER + ETHERNET_OVERHEAD) * 8) as u64;
        let tx = Duration::from_micros((bits * 1_000_000).div_ceil(w.spec.bandwidth.max(1)));
        let start = w.free_at[dir].max(now);
        w.free_at[dir] = start + tx;
        let arrive = start + tx + w.spec.delay;
        self.queue.schedule(arrive, Ev::Arrive { node: to, from: at, dg, hops: hops + 1 });
    }

    /// A datagram reached node `at` over a link from `from`.
    pub(super) fn arrive(&mut self, at: u32, from: u32, dg: DgramRef, hops: u8) {
        if dg.dst.ip().is_multicast() {
            return self.multicast(at, dg, hops, Some(from));
        }
        if self.routing.by_addr.get(&dg.dst.ip()) == Some(&at) {
            return self.deliver_local(at, &dg, hops);
        }
        self.nodes[at as usize].counters.datagrams_forwarded += 1;
        let mut r = Record::new(self.now(), NodeId(at), RecordKind::Forwarded, dg.id);
        r.peer = Some(NodeId(from));
        r.hops = hops;
        self.record(r);
        self.forward(at, dg, hops);
    }

    pub(super) fn deliver_local(&mut self, at: u32, dg: &DgramRef, hops: u8) {
        let now = self.now();
        if !self.routing.discard.is_empty() && self.routing.discard_at.is_none_or(|n| n == at) {
            let len = super::apps::radio_len(dg.dst, dg.payload.len());
            let f = self.cfg.radio.layout(len, false).map_or(1, |l| usize::from(l.frames).max(1));
            let p = self.routing.discard[(f - 1).min(self.routing.discard.len() - 1)];
            if self.routing.discard_rng.chance(p) {
                return self.drop_dgram(at, dg, DropReason::Discarded, hops);
            }
        }
        if let Some(rule) = self.dgram_rule.as_mut() {
            let info = crate::fault::DatagramInfo {
                at: now,
                to: NodeId(at),
                src: dg.src,
                dst: dg.dst,
                id: dg.id,
                len: dg.payload.len(),
            };
            match rule(&info) {
                crate::fault::Mangle::Deliver => {}
                crate::fault::Mangle::Delay(d) => {
                    self.queue.schedule(now + d, Ev::Late { node: at, dg: dg.clone(), hops });
                    return;
                }
                crate::fault::Mangle::Duplicate(d) => {
                    self.queue.schedule(now + d, Ev::Late { node: at, dg: dg.clone(), hops });
                }
            }
        }
        self.deliver_now(at, dg, hops);
    }

    /// [`Sim::deliver_local`] past the datagram rule: the receiver's CPU and its node.
    pub(super) fn deliver_now(&mut self, at: u32, dg: &DgramRef, hops: u8) {
        let now = self.now();
        // The CPU model is a mote's: a wired host (a PC on the Ethernet side) hands a datagram over at once.
        // (Charging it a mote's 50 ms made an empty ACK followed closely by its separate response queue
        // up at the client: seed 000's fig14 "ACK_TIMEOUT 2 s is 35 ms slower" artefact.)
        let delay = if self.nodes[at as usize].role == Role::Host { Duration::ZERO } else { self.cfg.processing_delay };
        let serial = self.nodes[at as usize].rx_queue.filter(|_| !delay.is_zero());
        if let Some(waiting) = serial {
            if self.nodes[at as usize].cpu_backlog > waiting {
                return self.drop_dgram(at, dg, DropReason::QueueOverflow, hops);
            }
        }
        self.nodes[at as usize].counters.datagrams_delivered += 1;
        let mut r = Record::new(now, NodeId(at), RecordKind::Delivered, dg.id);
        r.latency = Some(now - dg.created);
        r.hops = hops;
        r.bytes = dg.payload.len() as u32;
        self.record(r);
        if delay.is_zero() {
            self.hand_to_node(at, dg);
        } else if serial.is_some() {
            let node = &mut self.nodes[at as usize];
            node.cpu_backlog += 1;
            node.cpu_free_at = node.cpu_free_at.max(now) + delay;
            let t = node.cpu_free_at;
            self.queue.schedule(t, Ev::Process(at, dg.clone()));
        } else {
            self.queue.schedule(now + delay, Ev::Process(at, dg.clone()));
        }
    }

    pub(super) fn hand_to_node(&mut self, at: u32, dg: &Dgram) {
        let now = self.now();
        if self.nodes[at as usize].app.is_some() {
            return self.datagram_to_app(at, dg.src, dg.dst, &dg.payload);
        }
        if dg.dst.port() == crate::tcp::RAW_IP_PORT {
            // A TCP segment: to the node's TCP stack (made now if this is the first one).
            if self.nodes[at as usize].proto.is_some() {
                self.tcp_host(at).receive(&dg.payload);
                self.drain(at, false);
            }
            return;
        }
        if let Some(node) = self.nodes[at as usize].proto.as_deref_mut() {
            node.handle_datagram(now, dg.src, Some(dg.dst.ip()), &dg.payload);
            self.drain(at, false);
        }
    }

    pub(super) fn members_in(&self, group: IpAddr, lo: u32, hi: u32) -> usize {
        let Some(m) = self.routing.groups.get(&group) else { return 0 };
        let a = m.partition_point(|&(t, _)| t < lo);
        let b = m.partition_point(|&(t, _)| t < hi);
        b - a
    }

    /// SMRF-style multicast forwarding at node `at` (see the module docs).
    pub(super) fn multicast(&mut self, at: u32, dg: DgramRef, hops: u8, came_from: Option<u32>) {
        let group = dg.dst.ip();
        let (tin, tout, parent, up_wired) = {
            let n = &self.nodes[at as usize];
            (n.tin, n.tout, n.rparent, n.up_wired)
        };
        // A node does not hear its own multicast (IP_MULTICAST_LOOP off), only others'.
        if came_from.is_some() && self.members_in(group, tin, tin + 1) == 1 {
            self.deliver_local(at, &dg, hops);
        }
        if hops >= self.cfg.hop_limit {
            return;
        }
        let total = self.routing.groups.get(&group).map_or(0, Vec::len);
        if let (Some(p), Some(link)) = (parent, up_wired) {
            if came_from != Some(p) && total > self.members_in(group, tin, tout) {
                self.send_wired(at, link, p, dg.clone(), hops);
            }
        }
        let mut radio_down = false;
        for k in 0..self.nodes[at as usize].children.len() {
            let c = self.nodes[at as usize].children[k];
            if Some(c) == came_from {
                continue;
            }
            let cn = &self.nodes[c as usize];
            if self.members_in(group, cn.tin, cn.tout) == 0 {
                continue;
            }
            match cn.up_wired {
                Some(link) => self.send_wired(at, link, c, dg.clone(), hops),
                None => radio_down = true,
            }
        }
        if radio_down {
            match came_from {
                None => self.enqueue(at, None, dg, hops),
                Some(_) if self.cfg.smrf_delay_ticks == 0 => self.enqueue(at, None, dg, hops),
                Some(_) => {
                    let k = self.nodes[at as usize].rng.below(u64::from(self.cfg.smrf_spread.max(1)));
                    let ticks = u64::from(self.cfg.smrf_delay_ticks) * (1 + k);
                    let t = self.nodes[at as usize].clock.after(self.now(), ticks);
                    self.queue.schedule(t, Ev::SmrfForward { node: at, dg, hops });
                }
            }
        }
    }
}
