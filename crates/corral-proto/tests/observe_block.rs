//! Pair tests on virtual time for Observe (RFC 7641) and block-wise transfer (RFC 7959).

use corral_proto::testing::Net;
use corral_proto::wire::{BlockValue, Code, ContentFormat, Message, MessageId, MessageType, OptionNumber, Token};
use corral_proto::{
    BlockConfig, Context, Duration, Endpoint, EndpointConfig, Event, IncomingRequest, Instant, Node, Outcome, Request,
    RequestError, RequestId, Response, SendParams, Service, ServiceHandle,
};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

fn addr(last: u8) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, last)), 5683)
}

fn body(len: usize, salt: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt)).collect()
}

/// `/obs`: an observable counter; `/large`: a big body; `/upload`: stores what is PUT.
#[derive(Default)]
struct Server {
    value: u32,
    large: Vec<u8>,
    uploads: Vec<Vec<u8>>,
    gets: u32,
}

impl Service for Server {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        let path = req.request.options.path();
        let resp = match (req.request.method, path.as_str()) {
            (Code::GET, "/obs") => {
                Response::content(ContentFormat::TEXT_PLAIN, self.value.to_string()).observable().with_max_age(60)
            }
            (Code::GET, "/obs-large") => {
                let mut b = self.large.clone();
                b[0] = self.value as u8;
                Response::content(ContentFormat::OCTET_STREAM, b).observable()
            }
            (Code::GET, "/large") => {
                self.gets += 1;
                Response::content(ContentFormat::OCTET_STREAM, self.large.clone())
            }
            (Code::PUT, "/upload") => {
                self.uploads.push(req.request.payload.clone());
                Response::new(Code::CHANGED)
            }
            _ => Response::error(Code::NOT_FOUND, "no"),
        };
        cx.respond(req.id, resp);
    }
}

impl Server {
    fn change(&mut self, cx: &mut Context<'_>, path: &str, confirmable: Option<bool>) {
        self.value += 1;
        match confirmable {
            Some(c) => cx.changed_with(path, c),
            None => cx.changed(path),
        }
    }
}

/// The recording test client of corral-proto.
type Client = corral_proto::testing::Recorder;

struct Pair {
    net: Net,
    c: usize,
    s: usize,
    csvc: ServiceHandle,
    ssvc: ServiceHandle,
}

fn pair(seed: u64, server_cfg: EndpointConfig) -> Pair {
    let mut net = Net::default();
    let mut cn = Node::new(Endpoint::new(EndpointConfig::with_seed(seed)));
    let csvc = cn.mount("", Client::default());
    let mut sn = Node::new(Endpoint::new(EndpointConfig { seed: seed + 1, ..server_cfg }));
    let ssvc = sn.mount("", Server { large: body(3000, 7), ..Server::default() });
    let c = net.add(addr(1), cn);
    let s = net.add(addr(2), sn);
    Pair { net, c, s, csvc, ssvc }
}

impl Pair {
    fn request(&mut self, req: Request, params: SendParams) -> RequestId {
        let (now, dst) = (self.net.now, self.net.addr(self.s));
        self.net
            .node(self.c)
            .with_service(now, self.csvc, |_: &mut Client, cx| cx.request(dst, req, params))
            .unwrap()
            .unwrap()
    }
    fn outcomes(&mut self) -> Vec<(Instant, RequestId, Outcome)> {
        self.net.node(self.c).service::<Client>(self.csvc).unwrap().outcomes.clone()
    }
    fn responses(&mut self) -> Vec<Response> {
        self.outcomes()
            .into_iter()
            .filter_map(|(_, _, o)| match o {
                Outcome::Response { response, .. } => Some(response),
                _ => None,
            })
            .collect()
    }
    fn change(&mut self, path: &str, confirmable: Option<bool>) {
        let now = self.net.now;
        self.net.node(self.s).with_service(now, self.ssvc, |s: &mut Server, cx| s.change(cx, path, confirmable));
    }
    fn server(&mut self) -> &mut Server {
        let h = self.ssvc;
        self.net.node(self.s).service_mut::<Server>(h).unwrap()
    }
    fn observers(&mut self, path: &str) -> usize {
        self.net.node(self.s).endpoint().observer_count(path)
    }
}

fn observe_get(path: &str) -> Request {
    Request::get(path).with_option(OptionNumber::OBSERVE, &[])
}

#[test]
fn observe_registration_and_notifications() {
    let mut p = pair(1, EndpointConfig::default());
    p.request(observe_get("obs"), SendParams::default());
    p.net.run_for(Duration::from_secs(1));
    assert_eq!(p.observers("/obs"), 1);
    for _ in 0..3 {
        p.change("/obs", None);
        p.net.run_for(Duration::from_secs(1));
    }
    let values: Vec<String> = p.responses().iter().map(|r| r.payload_text().into_owned()).collect();
    assert_eq!(values, ["0", "1", "2", "3"]);
    let seqs: Vec<u32> = p.responses().iter().map(|r| r.options.observe().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "sequence numbers increase: {seqs:?}");
    // NON notifications by default, once the observer has proved its address: the first is CON, and its
    // ACK is the proof. The registration's response was piggybacked.
    let server = p.net.addr(p.s);
    let types: Vec<MessageType> = p.net.sent_by(server).iter().map(|(_, m)| m.mtype).collect();
    assert_eq!(types, [MessageType::Ack, MessageType::Con, MessageType::Non, MessageType::Non]);
    // Re-registration with the same token replaces rather than duplicates.
    assert_eq!(p.responses()[0].options.max_age(), Some(60));
}

/// RFC 7641 §3.4: a notification older than the last one received is discarded.
#[test]
fn out_of_order_notifications_are_discarded() {
    let mut client = Endpoint::new(EndpointConfig::with_seed(3));
    let server = addr(2);
    let now = Instant::ZERO;
    let id = client.request(now, server, observe_get("obs"), SendParams::default()).unwrap();
    let sent = Message::parse(&client.poll_transmit().unwrap().payload).unwrap();
    let notification = |mtype, mid: u16, seq: u64, body: &str| {
        let mut m = Message::new(mtype, Code::CONTENT, MessageId(mid), sent.token);
        m.options.push_uint(OptionNumber::OBSERVE, seq);
        m.payload = body.as_bytes().to_vec();
        m.encode()
    };
    client.handle_datagram(now, server, None, &notification(MessageType::Ack, sent.mid.0, 5, "five"));
    client.handle_datagram(
        now + Duration::from_secs(1),
        server,
        None,
        &notification(MessageType::Non, 100, 7, "seven"),
    );
    client.handle_datagram(now + Duration::from_secs(2), server, None, &notification(MessageType::Non, 101, 6, "six"));
    client.handle_datagram(
        now + Duration::from_secs(3),
        server,
        None,
        &notification(MessageType::Con, 102, 8, "eight"),
    );
    let mut got = Vec::new();
    while let Some(ev) = client.poll_event() {
        if let Event::Response { id: rid, response, .. } = ev {
            assert_eq!(rid, id);
            got.push(response.payload_text().into_owned());
        }
    }
    assert_eq!(got, ["five", "seven", "eight"]);
    assert_eq!(client.stats().stale_notifications, 1);
    assert!(client.is_active(id), "still observing");
    // The CON notification was acknowledged.
    let acks: Vec<Message> =
        std::iter::from_fn(|| client.poll_transmit()).map(|t| Message::parse(&t.payload).unwrap()).collect();
    assert!(acks.iter().any(|m| m.mtype == MessageType::Ack && m.mid == MessageId(102)));
}

/// RFC 7641 §3.6: deregistration with a GET carrying Observe=1 ends the observation on both sides.
#[test]
fn deregistration_with_observe_1() {
    let mut p = pair(4, EndpointConfig::default());
    let id = p.request(observe_get("obs"), SendParams::default());
    p.net.run_for(Duration::from_secs(1));
    assert_eq!(p.observers("/obs"), 1);
    let now = p.net.now;
    p.net.node(p.c).with_service(now, p.csvc, |_: &mut Client, cx| cx.deregister(id));
    p.net.run_for(Duration::from_secs(1));
    assert_eq!(p.observers("/obs"), 0);
    assert!(!p.net.node(p.c).endpoint().is_active(id));
    let last = p.responses().pop().unwrap();
    assert_eq!(last.options.observe(), None, "the final response carries no Observe");
    p.change("/obs", None);
    p.net.run_for(Duration::from_secs(1));
    assert_eq!(p.responses().len(), 2, "no notification after deregistration");
}

/// RFC 7641 §3.6: a client that forgot the observation answers the next notification with RST, and the
/// server removes the observer.
#[test]
fn deregistration_by_rst() {
    let mut p = pair(5, EndpointConfig::default());
    let id = p.request(observe_get("obs"), SendParams::default());
    p.net.run_for(Duration::from_secs(1));
    let now = p.net.now;
    p.net.node(p.c).with_service(now, p.csvc, |_: &mut Client, cx| cx.cancel(id));
    p.change("/obs", None);
    p.net.run_for(Duration::from_secs(1));
    assert_eq!(p.observers("/obs"), 0);
    let client = p.net.addr(p.c);
    assert_eq!(p.net.sent_by(client).last().unwrap().1.mtype, MessageType::Rst);
    assert_eq!(p.net.node(p.s).endpoint().stats().observers_lost, 1);
}

/// RFC 7641 §4.5: an observer that never acknowledges a CON notification is removed, after the usual
/// retransmissions.
#[test]
fn observer_removed_after_con_notification_fails() {
    let mut p = pair(6, EndpointConfig::default());
    p.request(observe_get("obs"), SendParams::default());
    p.net.run_for(Duration::from_secs(1));
    let server = p.net.addr(p.s);
    p.net.set_drop(move |r| r.from == server);
    p.change("/obs", Some(true));
    p.net.run_for(Duration::from_secs(30));
    // Further changes while the CON is retransmitted replace it, continuing its back-off.
    p.change("/obs", None);
    p.net.run_for(Duration::from_secs(100));
    assert_eq!(p.observers("/obs"), 0);
    let cons = p.net.sent_by(server).iter().filter(|(_, m)| m.mtype == MessageType::Con).count();
    assert_eq!(cons, 5, "1 + MAX_RETRANSMIT transmissions in all, the replacement included");
}

/// RFC 7959 §2.4: the client asks for 1024-byte blocks, the server lowers the size to 256; the body
/// arrives whole and the server's blocks were 256 bytes.
#[test]
fn block2_with_server_lowering_szx() {
    let server_cfg =
        EndpointConfig { block: BlockConfig { szx: 4, ..BlockConfig::default() }, ..EndpointConfig::default() };
    let mut p = pair(7, server_cfg);
    p.request(Request::get("large"), SendParams { block_szx: Some(6), ..SendParams::default() });
    p.net.run_for(Duration::from_secs(10));
    let responses = p.responses();
    assert_eq!(responses.len(), 1);
    assert_eq!(responses[0].payload, body(3000, 7));
    assert!(responses[0].options.block2().is_none(), "the assembled response has no Block2");
    let server = p.net.addr(p.s);
    // (Only the 2.05 blocks: a first answer beyond the first-answer credit would be an Echo challenge first.)
    let blocks: Vec<usize> =
        p.net.sent_by(server).iter().filter(|(_, m)| m.code == Code::CONTENT).map(|(_, m)| m.payload.len()).collect();
    assert_eq!(blocks.len(), 12);
    assert!(blocks[..11].iter().all(|l| *l == 256) && blocks[11] == 3000 - 11 * 256, "{blocks:?}");
    // Block 0 (256 B) fits the client address's first-answer credit: rendered once.
    assert_eq!(p.server().gets, 1, "later blocks come from the rendered body, not the handler");
}

/// The progress of a transfer, as a CLI shows it: bytes so far grow block by block to the size the server
/// announced (Size2) for a download, and to the body's length for an upload; none once it is done.
#[test]
fn transfer_progress_counts_blocks_in_both_directions() {
    let mut p = pair(12, EndpointConfig::default());
    let id = p.request(Request::get("large"), SendParams { block_szx: Some(4), ..SendParams::default() });
    let mut seen = Vec::new();
    while p.responses().is_empty() {
        assert!(p.net.now < Instant::from_secs(60), "the download ends");
        p.net.run_for(Duration::from_millis(1));
        if let Some(pr) = p.net.node(p.c).endpoint().transfer_progress(id) {
            assert!(!pr.upload);
            if pr.done > 0 {
                assert_eq!(pr.total, Some(3000), "Size2 of block 0");
            }
            seen.push(pr.done);
        }
    }
    assert!(seen.windows(2).all(|w| w[0] <= w[1]) && seen.len() >= 5, "{seen:?}");
    assert!(seen.iter().all(|d| d % 256 == 0 && *d < 3000), "{seen:?}");
    assert!(p.net.node(p.c).endpoint().transfer_progress(id).is_none(), "done");
    assert_eq!(p.responses()[0].payload, body(3000, 7));

    let up = p.request(Request::new(Code::PUT).with_path("upload").with_payload(body(2500, 3)), SendParams::default());
    let mut seen = Vec::new();
    while p.net.node(p.c).endpoint().is_active(up) {
        p.net.run_for(Duration::from_millis(1));
        if let Some(pr) = p.net.node(p.c).endpoint().transfer_progress(up) {
            assert!(pr.upload);
            assert_eq!(pr.total, Some(2500));
            seen.push(pr.done);
        }
    }
    assert!(seen.contains(&0) && seen.contains(&1024) && seen.contains(&2048), "{seen:?}");
}

/// RFC 7959 §2.5: an upload in Block1 blocks gets 2.31 Continue for each non-final block; a lost block
/// is retransmitted by the message layer, and the handler sees the whole body once.
#[test]
fn block1_with_continue_and_a_lost_block() {
    let mut p = pair(8, EndpointConfig::default());
    let client = p.net.addr(p.c);
    let mut dropped = false;
    p.net.set_drop(move |r| {
        let Some(m) = r.message() else { return false };
        let second = m.options.block1().is_some_and(|b| b.num == 1);
        if r.from == client && second && !dropped {
            dropped = true;
            return true;
        }
        false
    });
    let payload = body(2500, 3);
    let id =
        p.request(Request::new(Code::PUT).with_path("upload").with_payload(payload.clone()), SendParams::default());
    p.net.run_for(Duration::from_secs(20));
    let outcomes = p.outcomes();
    assert!(
        matches!(&outcomes[..], [(_, rid, Outcome::Response { response, .. })] if *rid == id && response.code == Code::CHANGED)
    );
    assert_eq!(p.server().uploads, vec![payload]);
    let server = p.net.addr(p.s);
    let continues = p.net.sent_by(server).iter().filter(|(_, m)| m.code == Code::CONTINUE).count();
    assert_eq!(continues, 2, "2.31 for blocks 0 and 1");
    let block1_sends =
        p.net.sent_by(client).iter().filter(|(_, m)| m.options.block1().is_some_and(|b| b.num == 1)).count();
    assert_eq!(block1_sends, 2, "block 1 was retransmitted");
    let last = p.responses().pop().unwrap();
    assert_eq!(last.options.block1(), Some(BlockValue { num: 2, more: false, szx: 6 }), "Block1 echoed");
}

/// RFC 9175 §3: two concurrent uploads from one client to one resource carry different Request-Tags and
/// are assembled apart, although their blocks interleave.
#[test]
fn concurrent_block1_uploads_are_kept_apart() {
    let mut p = pair(9, EndpointConfig::default());
    let a = body(3000, 1);
    let b = body(2200, 2);
    p.request(Request::new(Code::PUT).with_path("upload").with_payload(a.clone()), SendParams::default());
    p.request(Request::new(Code::PUT).with_path("upload").with_payload(b.clone()), SendParams::default());
    p.net.run_for(Duration::from_secs(30));
    let mut uploads = p.server().uploads.clone();
    uploads.sort_by_key(|u| u.len());
    assert_eq!(uploads, vec![b, a]);
    // The blocks really interleaved on the wire.
    let client = p.net.addr(p.c);
    let tags: Vec<bool> = p
        .net
        .sent_by(client)
        .iter()
        .filter(|(_, m)| m.options.block1().is_some())
        .map(|(_, m)| m.options.contains(OptionNumber::REQUEST_TAG))
        .collect();
    assert!(tags.windows(2).any(|w| w[0] != w[1]), "blocks of the two uploads alternate: {tags:?}");
}

/// A download that stops half-way fails with an error that says it stalled (not a plain timeout: block 0
/// did arrive); no truncated body is ever delivered.
#[test]
fn stalled_transfer_fails_instead_of_truncating() {
    let mut p = pair(10, EndpointConfig::default());
    let server = p.net.addr(p.s);
    let mut seen = 0;
    p.net.set_drop(move |r| {
        // Only block 0 gets through (and the Echo challenge before it, to a client not yet verified).
        if r.from == server && r.message().is_some_and(|m| m.code == Code::CONTENT) {
            seen += 1;
            return seen > 1;
        }
        false
    });
    let id = p.request(Request::get("large"), SendParams::default());
    p.net.run_for(Duration::from_secs(300));
    let outcomes = p.outcomes();
    assert!(
        matches!(&outcomes[..], [(_, rid, Outcome::Failed(RequestError::BadTransfer(why)))] if *rid == id && why.starts_with("stalled")),
        "{outcomes:?}"
    );
}

#[test]
fn upload_too_large_gets_4_13_with_size1() {
    let server_cfg =
        EndpointConfig { block: BlockConfig { max_body: 2000, ..BlockConfig::default() }, ..EndpointConfig::default() };
    let mut p = pair(11, server_cfg);
    p.request(Request::new(Code::PUT).with_path("upload").with_payload(body(3000, 0)), SendParams::default());
    p.net.run_for(Duration::from_secs(5));
    let r = p.responses().pop().unwrap();
    assert_eq!(r.code, Code::REQUEST_ENTITY_TOO_LARGE);
    assert_eq!(r.options.get_uint(OptionNumber::SIZE1), Some(2000));
    assert!(p.server().uploads.is_empty());
}

/// RFC 7959 §2.6: a notification of a large resource carries block 0; the client fetches the rest without
/// Observe and reports the whole representation.
#[test]
fn observe_with_block2() {
    let mut p = pair(12, EndpointConfig::default());
    p.request(observe_get("obs-large"), SendParams::default());
    p.net.run_for(Duration::from_secs(5));
    p.change("/obs-large", None);
    p.net.run_for(Duration::from_secs(5));
    let responses = p.responses();
    assert_eq!(responses.len(), 2, "{responses:?}");
    for (i, r) in responses.iter().enumerate() {
        assert_eq!(r.payload.len(), 3000);
        assert_eq!(r.payload[0], i as u8, "notification {i} carries the value at that time");
        assert_eq!(r.payload[1..], body(3000, 7)[1..]);
    }
    assert_eq!(p.observers("/obs-large"), 1);
    // Later blocks were fetched without Observe.
    let client = p.net.addr(p.c);
    assert!(p
        .net
        .sent_by(client)
        .iter()
        .filter(|(_, m)| m.options.block2().is_some_and(|b| b.num > 0))
        .all(|(_, m)| !m.options.contains(OptionNumber::OBSERVE)));
}

#[test]
fn token_of_observation_is_kept() {
    let mut p = pair(13, EndpointConfig::default());
    let token = Token::new(&[9, 9, 9]).unwrap();
    p.request(observe_get("obs"), SendParams { token: Some(token), ..SendParams::default() });
    p.net.run_for(Duration::from_secs(1));
    p.change("/obs", None);
    p.net.run_for(Duration::from_secs(1));
    let server = p.net.addr(p.s);
    assert!(p.net.sent_by(server).iter().all(|(_, m)| m.token == token));
}

/// RFC 7641 §4.5.2: a change while a CON notification is in flight to an observer that has not yet proved
/// its address (every notification to it is CON) does not open a second CON; the newest state waits, and
/// the ACK of the one in flight — the observer's proof of address — sends it at once. (An entity observed
/// through the gateway stalled for a retransmission timeout after two values when the replaced message's
/// ACK was taken for a stray.)
#[test]
fn the_ack_of_a_replaced_notification_releases_the_newest_at_once() {
    for seed in [21u64, 22, 23] {
        let mut p = pair(seed, EndpointConfig::default());
        p.request(observe_get("obs"), SendParams::default());
        p.net.run_for(Duration::from_secs(1));
        let server = p.net.addr(p.s);
        // Two changes before the first notification can be acknowledged.
        p.change("/obs", None);
        p.change("/obs", None);
        p.net.run_for(Duration::from_millis(200));
        let values: Vec<String> = p.responses().iter().map(|r| r.payload_text().into_owned()).collect();
        assert_eq!(values, ["0", "1", "2"], "seed {seed}: the newest value waited for a retransmission");
        // Acknowledged, so verified: the next change goes out NON and at once.
        p.change("/obs", None);
        p.net.run_for(Duration::from_millis(200));
        let values: Vec<String> = p.responses().iter().map(|r| r.payload_text().into_owned()).collect();
        assert_eq!(values, ["0", "1", "2", "3"], "seed {seed}");
        let types: Vec<MessageType> = p.net.sent_by(server).iter().map(|(_, m)| m.mtype).collect();
        assert_eq!(types[..2], [MessageType::Ack, MessageType::Con], "seed {seed}: {types:?}");
        assert_eq!(types.last(), Some(&MessageType::Non), "seed {seed}: {types:?}");
        // One CON in flight at a time: nothing is ever retransmitted.
        p.net.run_for(Duration::from_secs(10));
        let cons = p.net.sent_by(server).iter().filter(|(_, m)| m.mtype == MessageType::Con).count();
        assert!(cons <= 2, "seed {seed}: {cons} CON notifications for three changes: {types:?}");
    }
}
