//! The simulator's IEEE 802.15.4 MAC: the per-node transmit queue, unslotted CSMA/CA with backoff, frames
//! on the air and their collisions, the channel models' verdict per receiver, acknowledgements and frame
//! retries, 6LoWPAN reassembly. Methods of [`Sim`] (they use its queue, nodes and records), kept apart from
//! the network layer (routing, forwarding, delivery) and the event dispatch in `sim.rs`.

use super::*;

impl Sim {
    // ---------------------------------------------------------------------------------------------
    // Internals: the MAC
    // ---------------------------------------------------------------------------------------------

    pub(super) fn radio(&mut self, i: u32) -> &mut Radio {
        self.nodes[i as usize].radio.as_mut().expect("MAC events only for nodes with a radio")
    }

    pub(super) fn enqueue(&mut self, at: u32, next: Option<u32>, dg: DgramRef, hops: u8) {
        let Some(layout) = self.cfg.radio.layout(radio_len(dg.dst, dg.payload.len()), next.is_none()) else {
            return self.drop_dgram(at, &dg, DropReason::TooBig, hops);
        };
        let (cap, bytes) = (self.cfg.radio.queue_capacity, self.cfg.radio.queue_bytes);
        let Some(radio) = self.nodes[at as usize].radio.as_mut() else {
            return self.drop_dgram(at, &dg, DropReason::NoRoute, hops);
        };
        // A byte bound counts each datagram as the IPv6 packet a stack buffers (headers uncompressed).
        let held = |o: &Outgoing| o.dg.payload.len() + crate::radio::IPV6_UDP_HEADER;
        let full = bytes.is_some_and(|b| {
            radio.queue.iter().map(held).sum::<usize>() + dg.payload.len() + crate::radio::IPV6_UDP_HEADER > b
        });
        if radio.queue.len() >= cap || full {
            return self.drop_dgram(at, &dg, DropReason::QueueOverflow, hops);
        }
        radio.queue.push_back(Outgoing { dg, hops, next, layout });
        let len = radio.queue.len() as u64;
        let idle = radio.mac == MacState::Idle;
        let c = &mut self.nodes[at as usize].counters;
        c.queue_peak = c.queue_peak.max(len);
        if idle {
            self.start_datagram(at);
        }
    }

    pub(super) fn start_datagram(&mut self, i: u32) {
        let r = self.radio(i);
        if r.queue.is_empty() {
            r.mac = MacState::Idle;
            r.gen = r.gen.wrapping_add(1);
            return;
        }
        r.frag = 0;
        self.start_frame(i);
    }

    pub(super) fn start_frame(&mut self, i: u32) {
        let r = self.radio(i);
        r.retries = 0;
        r.dsn = r.dsn.wrapping_add(1);
        self.start_csma(i);
    }

    pub(super) fn start_csma(&mut self, i: u32) {
        let min_be = self.cfg.radio.min_be;
        let r = self.radio(i);
        r.nb = 0;
        r.be = min_be;
        self.backoff(i);
    }

    pub(super) fn backoff(&mut self, i: u32) {
        let now = self.now();
        let unit = self.cfg.radio.unit_backoff;
        let node = &mut self.nodes[i as usize];
        let r = node.radio.as_mut().expect("radio");
        let slots = node.rng.below(1u64 << r.be);
        r.mac = MacState::Backoff;
        r.gen = r.gen.wrapping_add(1);
        let gen = r.gen;
        self.queue.schedule(now + unit.saturating_mul(slots), Ev::Mac(i, gen, MacStep::BackoffDone));
    }

    pub(super) fn mac_step(&mut self, i: u32, gen: u32, step: MacStep) {
        let now = self.now();
        let p = &self.cfg.radio;
        let (cca, turnaround, max_be, max_nb, max_retries) =
            (p.cca, p.turnaround, p.max_be, p.max_csma_backoffs, p.max_frame_retries);
        let r = self.radio(i);
        if r.gen != gen {
            return;
        }
        match (step, r.mac) {
            (MacStep::BackoffDone, MacState::Backoff) => {
                r.mac = MacState::Cca;
                r.cca_start = now;
                self.queue.schedule(now + cca, Ev::Mac(i, gen, MacStep::CcaDone));
            }
            (MacStep::CcaDone, MacState::Cca) => {
                if self.channel_busy(i) {
                    self.nodes[i as usize].counters.busy_ccas += 1;
                    let r = self.radio(i);
                    r.nb += 1;
                    r.be = (r.be + 1).min(max_be);
                    if r.nb > max_nb {
                        self.fail_datagram(i, DropReason::ChannelBusy);
                    } else {
                        self.backoff(i);
                    }
                } else {
                    let r = self.radio(i);
                    r.mac = MacState::Turnaround;
                    self.queue.schedule(now + turnaround, Ev::Mac(i, gen, MacStep::TxStart));
                }
            }
            (MacStep::TxStart, MacState::Turnaround) => self.transmit_data(i),
            (MacStep::AckTimeout, MacState::WaitAck) => {
                self.nodes[i as usize].counters.mac_retries += 1;
                let r = self.radio(i);
                r.retries += 1;
                if r.retries > max_retries {
                    self.fail_datagram(i, DropReason::MacRetriesExhausted);
                } else {
                    self.start_csma(i);
                }
            }
            _ => {}
        }
    }

    pub(super) fn channel_busy(&mut self, i: u32) -> bool {
        let now = self.now();
        let r = self.nodes[i as usize].radio.as_ref().expect("radio");
        let since = r.cca_start;
        if r.tx_until > since || r.ack_until > since || r.audible > 0 || r.last_audible_end > since {
            return true;
        }
        let ch = usize::from(r.channel) % self.medium.chan_rng.len();
        for k in 0..r.wifi.len() {
            let w = &self.medium.interferers[usize::from(r.wifi[k])];
            if (w.process.on || w.process.last_off > since) && self.medium.chan_rng[ch].chance(w.cfg.cca_busy_prob) {
                return true;
            }
        }
        let _ = now;
        false
    }

    /// The current frame failed for good: the datagram is dropped at this hop.
    pub(super) fn fail_datagram(&mut self, i: u32, reason: DropReason) {
        let out = self.radio(i).queue.pop_front().expect("a failing frame has a datagram");
        let frag = self.radio(i).frag;
        self.nodes[i as usize].counters.drop(reason);
        let mut r = Record::new(self.now(), NodeId(i), RecordKind::Dropped, out.dg.id);
        r.reason = Some(reason);
        r.peer = out.next.map(NodeId);
        r.frag = frag;
        r.frags = out.layout.frames;
        r.hops = out.hops;
        r.bytes = out.dg.payload.len() as u32;
        self.record(r);
        self.start_datagram(i);
    }

    pub(super) fn transmit_data(&mut self, i: u32) {
        let now = self.now();
        let r = self.radio(i);
        let out = r.queue.front().expect("transmitting a queued datagram");
        let (frag, dsn, attempt) = (r.frag, r.dsn, r.retries);
        let (dg, hops, next, layout) = (out.dg.clone(), out.hops, out.next, out.layout);
        let mpdu = usize::from(layout.mpdu(frag));
        let phy_bytes = mpdu + self.cfg.radio.phy_overhead;
        let rate = self.radio(i).bit_rate;
        let airtime = self.cfg.radio.airtime_at(mpdu, rate);
        let r = self.radio(i);
        r.mac = MacState::Tx;
        r.tx_until = now + airtime;
        let id = dg.id;
        let air = self.medium.put_air(Air {
            sender: i,
            phy_bytes: phy_bytes as u16,
            kind: AirKind::Data { dg, hops, dst: next, frag, frags: layout.frames, dsn, attempt },
            misses: Vec::new(),
        });
        let c = &mut self.nodes[i as usize].counters;
        c.frames_sent += 1;
        c.frame_bytes_sent += phy_bytes as u64;
        if let Some(n) = next {
            if let Some(k) = self.link_index(i, n) {
                let lc = self.link_counters_mut(k);
                lc.frames += 1;
                lc.bytes += phy_bytes as u64;
                lc.retransmissions += u64::from(attempt > 0);
            }
        }
        let mut rec = Record::new(now, NodeId(i), RecordKind::FrameSent, id);
        rec.peer = next.map(NodeId);
        rec.frag = frag;
        rec.frags = layout.frames;
        rec.attempt = attempt;
        rec.bytes = phy_bytes as u32;
        rec.hops = hops;
        self.record(rec);
        self.start_air(i, air);
        self.queue.schedule(now + airtime, Ev::TxEnd(air));
    }

    /// Whether `r` is an intended receiver of `air`.
    pub(super) fn intended(&self, air: &Air, r: u32) -> bool {
        match air.kind {
            AirKind::Data { dst: Some(d), .. } => d == r,
            AirKind::Data { dst: None, .. } => {
                let n = &self.nodes[r as usize];
                n.rparent == Some(air.sender) && n.up_wired.is_none()
            }
            AirKind::Ack { to, .. } => to == r,
        }
    }

    /// A transmission starts: every neighbour on the channel hears energy, and locks onto it if it can.
    pub(super) fn start_air(&mut self, sender: u32, air: u32) {
        let now = self.now();
        // Our own reception, if any, is lost: half-duplex.
        if let Some(rx) = self.radio(sender).rx.as_mut() {
            rx.lost.get_or_insert(DropReason::HalfDuplex);
        }
        let (start, end) = {
            let r = self.nodes[sender as usize].radio.as_ref().expect("radio");
            (r.nbr_start as usize, r.nbr_end as usize)
        };
        let phy = &self.cfg.radio;
        let shr_bits = ((phy.phy_overhead.saturating_sub(1)) * 8) as u64;
        for k in start..end {
            let j = self.medium.nbrs[k];
            let (wifi_on, wifi_mark) = self.wifi_status(j);
            let p = self.medium.link_power[k];
            let capture = self.medium.capture;
            let r = self.nodes[j as usize].radio.as_mut().expect("neighbours have radios");
            let prior = r.audible;
            r.audible += 1;
            r.energy += p;
            let fresh = Rx { air, power: p, start: now, lost: None, wifi_on, wifi_mark };
            let mut displaced = None;
            let miss = if r.tx_until > now {
                Some(DropReason::HalfDuplex)
            } else if let Some(rx) = r.rx.as_mut() {
                match capture {
                    None => {
                        rx.lost.get_or_insert(DropReason::Collision);
                        Some(DropReason::Collision)
                    }
                    Some(ratio) => {
                        let shr = Duration::from_micros((shr_bits * 1_000_000).div_ceil(u64::from(r.bit_rate.max(1))));
                        if now < rx.start + shr && p >= ratio * (r.energy - p) {
                            // Still in the locked frame's synchronisation header: the receiver
                            // re-synchronises on the new, stronger preamble.
                            displaced = Some(rx.air);
                            *rx = fresh;
                            None
                        } else {
                            // Locked on the SFD: the frame survives while its SINR stays above the
                            // threshold; the newcomer is not received.
                            if rx.power < ratio * (r.energy - rx.power) {
                                rx.lost.get_or_insert(DropReason::Collision);
                            }
                            Some(DropReason::Collision)
                        }
                    }
                }
            } else if prior > 0 && capture.is_none_or(|ratio| p < ratio * (r.energy - p)) {
                Some(DropReason::Collision)
            } else {
                r.rx = Some(fresh);
                None
            };
            if let Some(old) = displaced {
                self.note_miss(old, j, DropReason::Collision);
            }
            if let Some(reason) = miss {
                self.note_miss(air, j, reason);
            }
        }
    }

    /// Records that intended receiver `j` could not lock onto (or lost the lock of) frame `air`.
    pub(super) fn note_miss(&mut self, air: u32, j: u32, reason: DropReason) {
        let a = self.medium.air[air as usize].as_ref().expect("air frame alive");
        if self.intended(a, j) {
            self.medium.air[air as usize].as_mut().expect("air frame alive").misses.push((j, reason));
        }
    }

    pub(super) fn wifi_status(&self, j: u32) -> (bool, u32) {
        let Some(r) = &self.nodes[j as usize].radio else { return (false, 0) };
        let mut on = false;
        let mut mark = 0u32;
        for &w in r.wifi.iter() {
            let p = &self.medium.interferers[usize::from(w)].process;
            on |= p.on;
            mark = mark.wrapping_add(p.count);
        }
        (on, mark)
    }

    /// A transmission ends: every neighbour that locked onto it decides whether it got it.
    pub(super) fn end_air(&mut self, air_id: u32) {
        let now = self.now();
        let air = self.medium.take_air(air_id);
        let sender = air.sender;
        let (start, end, channel) = {
            let r = self.nodes[sender as usize].radio.as_ref().expect("radio");
            (r.nbr_start as usize, r.nbr_end as usize, r.channel)
        };
        for k in start..end {
            let j = self.medium.nbrs[k];
            let (_, mark_now) = self.wifi_status(j);
            let p = self.medium.link_power[k];
            let r = self.nodes[j as usize].radio.as_mut().expect("neighbours have radios");
            r.audible -= 1;
            r.energy = if r.audible == 0 { 0.0 } else { r.energy - p };
            r.last_audible_end = now;
            let locked = r.rx.as_ref().is_some_and(|rx| rx.air == air_id);
            let rx = if locked { r.rx.take() } else { None };
            if !self.intended(&air, j) {
                continue;
            }
            let outcome = match rx {
                None => Err(air.misses.iter().find(|(n, _)| *n == j).map_or(DropReason::Collision, |(_, r)| *r)),
                Some(rx) => match rx.lost {
                    Some(reason) => Err(reason),
                    None => self.channel_outcome(&air, j, k, channel, &rx, mark_now),
                },
            };
            self.reception(&air, j, outcome);
        }
        match air.kind {
            AirKind::Data { dst, .. } => {
                let ack_wait = self.cfg.radio.ack_wait;
                let r = self.radio(sender);
                if dst.is_none() {
                    self.frame_done(sender);
                } else {
                    r.mac = MacState::WaitAck;
                    r.gen = r.gen.wrapping_add(1);
                    let gen = r.gen;
                    self.queue.schedule(now + ack_wait, Ev::Mac(sender, gen, MacStep::AckTimeout));
                }
            }
            AirKind::Ack { .. } => {
                let up = self.radio(sender).pending_ack.take().and_then(|p| p.up);
                if let Some((dg, hops, from)) = up {
                    self.arrive(sender, from, dg, hops);
                }
            }
        }
    }

    /// Interference, the link model and the rule, for a frame that survived collisions.
    pub(super) fn channel_outcome(
        &mut self,
        air: &Air,
        j: u32,
        k: usize,
        channel: u8,
        rx: &Rx,
        mark_now: u32,
    ) -> Result<(), DropReason> {
        let ch = usize::from(channel) % self.medium.chan_rng.len();
        let bursts = u32::from(rx.wifi_on) + mark_now.wrapping_sub(rx.wifi_mark);
        if bursts > 0 {
            let r = self.nodes[j as usize].radio.as_ref().expect("radio");
            let p =
                r.wifi.iter().map(|&w| self.medium.interferers[usize::from(w)].cfg.corruption_prob).fold(0.0, f64::max);
            let survive = (1.0 - p).powi(bursts as i32);
            if !self.medium.chan_rng[ch].chance(survive) {
                return Err(DropReason::Interference);
            }
        }
        // The link from the sender to j is the sender's k-th neighbour.
        let model = self.medium.models[usize::from(self.medium.link_model[k])];
        if let Some(loss) =
            model.lose(&mut self.medium.link_state[k], usize::from(air.phy_bytes), &mut self.medium.chan_rng[ch])
        {
            return Err(match loss {
                ModelLoss::Bernoulli => DropReason::Bernoulli,
                ModelLoss::Burst => DropReason::Burst,
                ModelLoss::Snr => DropReason::Snr,
            });
        }
        if let Some(rule) = self.rule.as_mut() {
            let info = match &air.kind {
                AirKind::Data { dg, dst, frag, frags, attempt, .. } => FrameInfo {
                    at: self.queue.now(),
                    from: NodeId(air.sender),
                    to: NodeId(j),
                    datagram: dg.id,
                    ack: false,
                    broadcast: dst.is_none(),
                    frag: *frag,
                    frags: *frags,
                    attempt: *attempt,
                },
                AirKind::Ack { datagram, .. } => FrameInfo {
                    at: self.queue.now(),
                    from: NodeId(air.sender),
                    to: NodeId(j),
                    datagram: *datagram,
                    ack: true,
                    broadcast: false,
                    frag: 0,
                    frags: 0,
                    attempt: 0,
                },
            };
            if rule(&info) {
                return Err(DropReason::Rule);
            }
        }
        Ok(())
    }

    /// An intended receiver's verdict on a frame.
    pub(super) fn reception(&mut self, air: &Air, j: u32, outcome: Result<(), DropReason>) {
        let now = self.now();
        match (&air.kind, outcome) {
            (AirKind::Data { dg, frag, frags, attempt, .. }, Err(reason)) => {
                if let Some(k) = self.link_index(air.sender, j) {
                    self.link_counters_mut(k).lose(reason);
                }
                let mut r = Record::new(now, NodeId(j), RecordKind::FrameLost, dg.id);
                r.peer = Some(NodeId(air.sender));
                (r.frag, r.frags, r.attempt, r.bytes, r.reason) =
                    (*frag, *frags, *attempt, u32::from(air.phy_bytes), Some(reason));
                self.record(r);
            }
            (AirKind::Data { dg, hops, dst, frag, frags, dsn, attempt }, Ok(())) => {
                let c = &mut self.nodes[j as usize].counters;
                c.frames_received += 1;
                c.frame_bytes_received += u64::from(air.phy_bytes);
                if let Some(k) = self.link_index(air.sender, j) {
                    self.link_counters_mut(k).received += 1;
                }
                let mut r = Record::new(now, NodeId(j), RecordKind::FrameReceived, dg.id);
                r.peer = Some(NodeId(air.sender));
                (r.frag, r.frags, r.attempt, r.bytes) = (*frag, *frags, *attempt, u32::from(air.phy_bytes));
                self.record(r);
                self.receive_data(j, air.sender, dg, *hops, dst.is_some(), *frag, *frags, *dsn);
            }
            (AirKind::Ack { dsn, datagram, .. }, Ok(())) => {
                let r = self.radio(j);
                if r.mac == MacState::WaitAck && r.dsn == *dsn {
                    let mut rec = Record::new(now, NodeId(j), RecordKind::AckReceived, *datagram);
                    rec.peer = Some(NodeId(air.sender));
                    self.record(rec);
                    self.frame_done(j);
                }
            }
            (AirKind::Ack { datagram, .. }, Err(reason)) => {
                let mut rec = Record::new(now, NodeId(j), RecordKind::AckLost, *datagram);
                rec.peer = Some(NodeId(air.sender));
                rec.reason = Some(reason);
                self.record(rec);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn receive_data(
        &mut self,
        j: u32,
        from: u32,
        dg: &DgramRef,
        hops: u8,
        unicast: bool,
        frag: u16,
        frags: u16,
        dsn: u8,
    ) {
        let now = self.now();
        let p = &self.cfg.radio;
        let rate = self.nodes[j as usize].radio.as_ref().expect("radio").bit_rate;
        let (turnaround, ack_air, reasm_timeout) = (p.turnaround, p.airtime_at(p.ack_mpdu, rate), p.reassembly_timeout);
        let r = self.radio(j);
        if unicast {
            r.ack_until = now + turnaround + ack_air;
            r.pending_ack = Some(PendingAck { to: from, dsn, up: None });
            self.nodes[j as usize].counters.acks_sent += 1;
            self.queue.schedule(now + turnaround, Ev::AckStart(j));
        }
        let r = self.radio(j);
        if r.dedup.contains(&(from, dsn)) {
            return;
        }
        r.dedup[usize::from(r.dedup_next)] = (from, dsn);
        r.dedup_next = (r.dedup_next + 1) % r.dedup.len() as u8;
        let complete = if frags <= 1 {
            true
        } else if frag == 0 {
            let displaced = r.reasm.replace(Reasm { from, id: dg.id, next_frag: 1, frags }).map(|old| old.id);
            if let Some(old) = displaced {
                self.reasm_lost(j, old, hops);
            }
            self.queue.schedule(now + reasm_timeout, Ev::ReasmTimeout(j, dg.id));
            false
        } else {
            match r.reasm.as_mut() {
                Some(re) if re.from == from && re.id == dg.id && re.next_frag == frag => {
                    re.next_frag += 1;
                    let done = re.next_frag == re.frags;
                    if done {
                        r.reasm = None;
                    }
                    done
                }
                _ => false,
            }
        };
        if !complete {
            return;
        }
        if unicast {
            if let Some(pa) = self.radio(j).pending_ack.as_mut() {
                pa.up = Some((dg.clone(), hops + 1, from));
            }
        } else {
            self.arrive(j, from, dg.clone(), hops + 1);
        }
    }

    pub(super) fn reasm_lost(&mut self, j: u32, id: DatagramId, hops: u8) {
        self.nodes[j as usize].counters.drop(DropReason::FragmentLost);
        let mut r = Record::new(self.now(), NodeId(j), RecordKind::Dropped, id);
        r.reason = Some(DropReason::FragmentLost);
        r.hops = hops;
        self.record(r);
    }

    pub(super) fn send_ack(&mut self, j: u32) {
        let now = self.now();
        let rate = self.radio(j).bit_rate;
        let ack_air = self.cfg.radio.airtime_at(self.cfg.radio.ack_mpdu, rate);
        let phy = (self.cfg.radio.ack_mpdu + self.cfg.radio.phy_overhead) as u16;
        let r = self.radio(j);
        let Some(pa) = r.pending_ack.as_ref() else { return };
        let (to, dsn) = (pa.to, pa.dsn);
        let datagram = pa.up.as_ref().map_or(DatagramId(u64::MAX), |(dg, _, _)| dg.id);
        r.tx_until = now + ack_air;
        let air = self.medium.put_air(Air {
            sender: j,
            phy_bytes: phy,
            kind: AirKind::Ack { to, dsn, datagram },
            misses: Vec::new(),
        });
        self.start_air(j, air);
        self.queue.schedule(now + ack_air, Ev::TxEnd(air));
    }

    /// The current frame is done (acknowledged, or a broadcast sent): next fragment or next datagram.
    pub(super) fn frame_done(&mut self, i: u32) {
        let r = self.radio(i);
        let frames = r.queue.front().map_or(0, |o| o.layout.frames);
        r.frag += 1;
        if r.frag < frames {
            self.start_frame(i);
        } else {
            r.queue.pop_front();
            self.start_datagram(i);
        }
    }
}
