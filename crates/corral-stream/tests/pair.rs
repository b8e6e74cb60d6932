//! CoAP-SC in virtual time on corral-proto's in-memory network: recovery by retransmission request,
//! lost acknowledgements, a full buffer, 30 % loss both ways, hostile option values; the CoAP over UDP
//! baseline under the same loss; and the receiver against spoofers (creations challenged, ids bound to
//! their sender, slots reclaimed from silent senders). Seeded; a failure prints its seed.

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
fn a_sender_gives_up_on_a_receiver_that_never_answers_and_not_on_one_that_is_quiet() {
    let give_up = Some(Duration::from_secs(3));
    let mut dead = lab(StreamConfig { give_up, ..config(Scheme::Sc, 100, 6) });
    dead.net.set_drop(|r| r.to == RECEIVER.parse::<SocketAddr>().unwrap());
    dead.run(10);
    let m = dead.sender().metrics().clone();
    assert_eq!(m.failed.as_deref(), Some("no answer from the collector for 3 s"), "{m:?}");
    // Mid-stream: readings go out, nothing comes back; the buffer fills (or the CONs time out) and the
    // sender gives up.
    for scheme in [Scheme::Udp, Scheme::Sc] {
        let mut dies = lab(StreamConfig { give_up, ..config(scheme, 100, 6) });
        dies.run(3);
        dies.net.set_drop(|r| r.to == RECEIVER.parse::<SocketAddr>().unwrap());
        dies.run(20);
        assert!(dies.sender().metrics().failed.is_some(), "{scheme:?}: {:?}", dies.sender().metrics());
    }
    // A large buffer: the receiver acknowledges only every third of it (15 readings, 7.5 s), longer than
    // the patience; nothing is stuck meanwhile, so the stream completes.
    let mut quiet = lab(StreamConfig { give_up, ..config(Scheme::Sc, 60, 45) });
    quiet.run(60);
    let m = quiet.sender().metrics().clone();
    assert!(m.done && m.failed.is_none(), "{m:?}");
}

/// A request datagram from `from` straight into the receiver; the answers that went back to `from`.
fn inject(lab: &mut Lab, from: &str, m: &Message) -> Vec<Message> {
    let (ri, _) = lab.receiver;
    let (now, from) = (lab.net.now, from.parse::<SocketAddr>().unwrap());
    let before = lab.net.records.len();
    lab.net.node(ri).handle_datagram(now, from, None, &m.encode());
    lab.net.flush();
    lab.net.records[before..].iter().filter(|r| r.to == from).filter_map(Record::message).collect()
}

fn to_stream(code: Code, mid: u16, id: &str) -> Message {
    let mut m = Message::new(MessageType::Con, code, MessageId(mid), Token::new(&[7, mid as u8]).unwrap());
    m.options.push_str(OptionNumber::URI_PATH, "stream");
    if !id.is_empty() {
        m.options.push_str(OptionNumber::URI_PATH, id);
    }
    m
}

/// POST /stream from `from` (a client that proves its address: it repeats the request with the Echo
/// value when challenged); the final answer.
fn create_from(lab: &mut Lab, from: &str, mid: u16) -> Message {
    let mut post = to_stream(Code::POST, mid, "");
    post.payload = b"5".to_vec();
    let r = inject(lab, from, &post).pop().expect("an answer");
    let Some(echo) = r.options.get(OptionNumber::ECHO).filter(|_| r.code == Code::UNAUTHORIZED) else { return r };
    post.options.set(OptionNumber::ECHO, echo);
    post.mid = MessageId(mid.wrapping_add(1));
    inject(lab, from, &post).pop().expect("an answer")
}

/// The id of the (only) stream of the lab's sender.
fn sender_stream(lab: &mut Lab) -> String {
    let sender: SocketAddr = SENDER.parse().unwrap();
    let ids: Vec<String> =
        lab.receiver().streams().filter(|(_, from)| *from == sender).map(|(id, _)| id.to_string()).collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    ids[0].clone()
}

#[test]
fn a_creation_from_a_source_that_never_proved_its_address_is_challenged() {
    let mut lab = lab(config(Scheme::Sc, 10, 6));
    let mut post = to_stream(Code::POST, 1, "");
    post.payload = b"5".to_vec();
    let answers = inject(&mut lab, "198.51.100.7:5683", &post);
    assert_eq!(answers.len(), 1, "one answer to a blind spoofer: {answers:?}");
    assert_eq!(answers[0].code, Code::UNAUTHORIZED);
    assert!(answers[0].options.contains(OptionNumber::ECHO));
    assert_eq!(lab.receiver().streams().count(), 0, "nothing created in the spoofed address's name");
    // The real sender meets the challenge by itself.
    lab.run(30);
    assert!(lab.sender().metrics().done, "{:?}", lab.sender().metrics());
    assert_eq!(lab.receiver().stats().challenges, 2);
}

#[test]
fn stream_ids_are_random_and_belong_to_their_sender() {
    let mut lab = lab(config(Scheme::Sc, 1000, 6));
    lab.run(3);
    let id = sender_stream(&mut lab);
    assert!(id.len() == 16 && id.chars().all(|c| c.is_ascii_hexdigit()) && id != format!("{:016x}", 1), "{id}");
    let sender: SocketAddr = SENDER.parse().unwrap();
    let controls_before = lab.net.records.iter().filter(|r| r.to == sender && is_control(r)).count();
    // Another address that knows the id: a reading revealing a gap of 64, and a DELETE. Neither is served.
    let mut reading = to_stream(Code::PUT, 50, &id);
    reading.options.push(SC_OPTION, &ScOption { sn: 65, an: 0 }.encode());
    for m in [reading, to_stream(Code::DELETE, 51, &id)] {
        let answers = inject(&mut lab, "192.0.2.99:5683", &m);
        assert_eq!(answers.iter().map(|a| a.code).collect::<Vec<_>>(), [Code::NOT_FOUND], "{:?}", m.code);
    }
    let controls_after = lab.net.records.iter().filter(|r| r.to == sender && is_control(r)).count();
    assert_eq!(controls_after, controls_before, "no control message caused by another address");
    lab.run(600);
    assert!(lab.sender().metrics().done, "the real stream is unharmed");
    assert_eq!(lab.receiver().stats().delivered, 1000);
}

#[test]
fn silent_senders_give_way_when_every_slot_is_taken() {
    let mut lab = lab(config(Scheme::Sc, 1, 1));
    lab.run(5); // the lab's own stream comes and goes
    for i in 0..64u16 {
        let r = create_from(&mut lab, &format!("198.51.100.{}:5683", i + 1), 100 + 2 * i);
        assert_eq!(r.code, Code::CREATED, "stream {i}");
    }
    let r = create_from(&mut lab, "203.0.113.1:5683", 300);
    assert_eq!(r.code, Code::SERVICE_UNAVAILABLE, "the table is full and nobody is silent long enough yet");
    // The 64 never sent a reading; after a while, a new sender gets the slot of the one silent longest.
    lab.net.run_for(Duration::from_secs(31));
    let r = create_from(&mut lab, "203.0.113.2:5683", 400);
    assert_eq!(r.code, Code::CREATED, "{}", String::from_utf8_lossy(&r.payload));
    assert_eq!(lab.receiver().stats().reclaimed, 1);
    for i in 0..4u16 {
        let r = create_from(&mut lab, "203.0.113.3:5683", 500 + 2 * i);
        assert_eq!(r.code, Code::CREATED, "{i}");
    }
    let r = create_from(&mut lab, "203.0.113.3:5684", 520);
    assert_eq!(r.code, Code::SERVICE_UNAVAILABLE, "a fifth stream for one address");
    assert!(String::from_utf8_lossy(&r.payload).contains("holds 4 streams"));
}

#[test]
fn hostile_option_values_are_refused_without_panic() {
    let mut lab = lab(config(Scheme::Sc, 1000, 6));
    lab.run(3); // created and started
    let id = sender_stream(&mut lab);
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
        m.options.push_str(OptionNumber::URI_PATH, &id);
        m.options.push(SC_OPTION, v);
        // As the stream's sender (only its own address may send it readings).
        lab.net.node(ri).handle_datagram(now, SENDER.parse().unwrap(), None, &m.encode());
    }
    lab.net.flush();
    assert_eq!(lab.receiver().stats().refused - before, cases.len() as u64);
    lab.run(600);
    assert!(lab.sender().metrics().done, "the real stream is unharmed");
}
