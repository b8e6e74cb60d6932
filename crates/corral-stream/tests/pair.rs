//! CoAP-SC in virtual time on corral-proto's in-memory network: recovery by retransmission request,
//! lost acknowledgements, a full buffer, 30 % loss both ways, hostile option values; and the CoAP over UDP
//! baseline under the same loss. Seeded; a failure prints its seed.

use corral_proto::testing::{Net, Record};
use corral_proto::wire::{Code, Message, MessageId, MessageType, OptionNumber, Token};
use corral_proto::{Duration, Endpoint, EndpointConfig, Instant, Node, ServiceHandle};
use corral_stream::{ScOption, Scheme, StreamConfig, StreamReceiver, StreamSender, SC_OPTION};
use std::net::SocketAddr;

const SENDER: &str = "192.0.2.1:5683";
const RECEIVER: &str = "192.0.2.2:5683";

struct Lab {
    net: Net,
    sender: (usize, ServiceHandle),
    receiver: (usize, ServiceHandle),
}

fn lab(cfg: StreamConfig) -> Lab {
    let mut net = Net::new(Duration::from_millis(20));
    let mut sc = EndpointConfig::with_seed(1);
    // The baselines keep up to `buffer` CON readings outstanding (seed 003 §4).
    sc.params.nstart = cfg.buffer as u16;
    let mut s = Node::new(Endpoint::new(sc));
    let sh = s.mount("control", StreamSender::new(cfg));
    let mut r = Node::new(Endpoint::new(EndpointConfig::with_seed(2)));
    let rh = r.mount("stream", StreamReceiver::default());
    let si = net.add(SENDER.parse().unwrap(), s);
    let ri = net.add(RECEIVER.parse().unwrap(), r);
    Lab { net, sender: (si, sh), receiver: (ri, rh) }
}

fn config(scheme: Scheme, count: u32, buffer: u32) -> StreamConfig {
    StreamConfig { count, buffer, ..StreamConfig::new(RECEIVER.parse().unwrap(), scheme) }
}

impl Lab {
    fn run(&mut self, secs: u64) {
        self.net.run_for(Duration::from_secs(secs));
    }
    fn sender(&mut self) -> &StreamSender {
        let (i, h) = self.sender;
        self.net.node(i).service::<StreamSender>(h).unwrap()
    }
    fn receiver(&mut self) -> &StreamReceiver {
        let (i, h) = self.receiver;
        self.net.node(i).service::<StreamReceiver>(h).unwrap()
    }
}

fn sc_of(r: &Record) -> Option<(Code, ScOption)> {
    let m = r.message()?;
    Some((m.code, ScOption::decode(m.options.get(SC_OPTION)?)?))
}

fn is_data(r: &Record) -> bool {
    r.to == RECEIVER.parse::<SocketAddr>().unwrap() && sc_of(r).is_some_and(|(c, s)| c == Code::PUT && s.sn > 0)
}

fn is_control(r: &Record) -> bool {
    r.to == SENDER.parse::<SocketAddr>().unwrap() && sc_of(r).is_some_and(|(c, _)| c == Code::PUT)
}

#[test]
fn a_clean_stream_completes_in_order_without_retransmissions() {
    let mut lab = lab(config(Scheme::Sc, 40, 6));
    lab.run(40);
    let m = lab.sender().metrics().clone();
    assert!(m.done, "{m:?}");
    assert_eq!((m.acknowledged, m.nrp), (40, 0));
    assert_eq!(lab.receiver().stats().delivered, 40);
    assert_eq!(lab.receiver().stats().duplicates, 0);
    // 40 readings every 500 ms: the last one acknowledged shortly after it was generated at 19.5 s.
    assert!(m.ttd_ms > 19_500.0 && m.ttd_ms < 21_000.0, "{}", m.ttd_ms);
}

#[test]
fn a_lost_reading_is_recovered_by_a_retransmission_request_before_any_timeout() {
    let mut lab = lab(config(Scheme::Sc, 20, 6));
    let mut dropped = false;
    lab.net.set_drop(move |r| {
        if !dropped && is_data(r) && sc_of(r).unwrap().1.sn == 3 {
            dropped = true;
            return true;
        }
        false
    });
    lab.run(30);
    let m = lab.sender().metrics().clone();
    assert!(m.done, "{m:?}");
    assert_eq!(m.nrp, 1, "one retransmission: the lost reading");
    // SN 3 was sent at 1.0 s; SN 4 at 1.5 s revealed the gap; the resend followed at once, long before the
    // 2 s timeout: reading 3's delay is about one interval.
    let sends: Vec<Instant> =
        lab.net.records.iter().filter(|r| is_data(r) && sc_of(r).unwrap().1.sn == 3).map(|r| r.sent_at).collect();
    assert_eq!(sends.len(), 2);
    let gap = (sends[1] - sends[0]).as_secs_f64();
    assert!(gap < 0.7, "recovered {gap} s after the loss");
    assert_eq!(lab.receiver().stats().delivered, 20);
}

#[test]
fn a_lost_acknowledgement_causes_no_retransmission() {
    let mut lab = lab(config(Scheme::Sc, 30, 6));
    let mut dropped = 0;
    lab.net.set_drop(move |r| {
        if dropped < 2 && is_control(r) && sc_of(r).is_some_and(|(_, s)| s.sn == s.an) {
            dropped += 1;
            return true;
        }
        false
    });
    lab.run(40);
    let m = lab.sender().metrics().clone();
    assert!(m.done, "{m:?}");
    assert_eq!(m.nrp, 0, "a lost flow-control ACK is covered by the next one, not by resending data");
}

#[test]
fn a_full_buffer_blocks_and_the_acknowledgements_unblock_it() {
    let mut lab = lab(config(Scheme::Sc, 30, 3));
    // No acknowledgement gets through for the first 4 s: the 3-reading buffer fills and blocks.
    lab.net.set_drop(move |r| is_control(r) && r.sent_at < Instant::from_secs(4));
    lab.run(60);
    let m = lab.sender().metrics().clone();
    assert!(m.done, "{m:?}");
    assert!(m.tbt_ms > 1000.0, "the sender was blocked: TBT {} ms", m.tbt_ms);
    assert_eq!(lab.receiver().stats().delivered, 30);
}

/// A small LCG for seeded loss inside a drop rule.
fn lossy(seed: u64, p: f64, filter: fn(&Record) -> bool) -> impl FnMut(&Record) -> bool {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    move |r| {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        filter(r) && ((x >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

#[test]
fn thirty_percent_loss_both_ways_completes_in_order() {
    for seed in 1..=5u64 {
        let mut lab = lab(config(Scheme::Sc, 100, 6));
        lab.net.set_drop(lossy(seed, 0.3, |_| true));
        lab.run(600);
        let m = lab.sender().metrics().clone();
        assert!(m.done, "seed {seed}: {m:?}");
        assert_eq!(m.acknowledged, 100, "seed {seed}");
        let st = lab.receiver().stats();
        // Every reading delivered exactly once (duplicates are counted, never delivered).
        assert!(st.delivered >= 100, "seed {seed}: {st:?}");
        assert!(m.nrp > 0, "seed {seed}: loss needs retransmissions");
    }
}

#[test]
fn the_udp_baseline_completes_under_loss_and_counts_its_retransmissions() {
    let mut lab = lab(config(Scheme::Udp, 40, 4));
    lab.net.set_drop(lossy(9, 0.1, |_| true));
    lab.run(600);
    let m = lab.sender().metrics().clone();
    assert!(m.done, "{m:?}");
    assert_eq!(m.acknowledged, 40);
    assert!(m.nrp > 0, "CON retransmissions are NRP: {m:?}");
}

#[test]
fn hostile_option_values_are_refused_without_panic() {
    let mut lab = lab(config(Scheme::Sc, 1000, 6));
    lab.run(3); // created and started: stream 1 exists
    let (ri, _) = lab.receiver;
    let now = lab.net.now;
    let cases: Vec<Vec<u8>> = vec![
        ScOption { sn: 5, an: 9 }.encode().to_vec(),               // AN beyond SN
        ScOption { sn: 1_000_000, an: 0 }.encode().to_vec(),       // a huge gap
        ScOption { sn: u32::MAX, an: u32::MAX }.encode().to_vec(), // wrapped numbers
        ScOption { sn: 0, an: 0 }.encode().to_vec(),               // no reading 0
        vec![1, 2, 3],                                             // not 8 bytes
    ];
    let before = lab.receiver().stats().refused;
    for (i, v) in cases.iter().enumerate() {
        let mut m =
            Message::new(MessageType::Con, Code::PUT, MessageId(900 + i as u16), Token::new(&[9, i as u8]).unwrap());
        m.options.push_str(OptionNumber::URI_PATH, "stream");
        m.options.push_str(OptionNumber::URI_PATH, "1");
        m.options.push(SC_OPTION, v);
        lab.net.node(ri).handle_datagram(now, "192.0.2.99:5683".parse().unwrap(), None, &m.encode());
    }
    lab.net.flush();
    assert_eq!(lab.receiver().stats().refused - before, cases.len() as u64);
    lab.run(600);
    assert!(lab.sender().metrics().done, "the real stream is unharmed");
}
