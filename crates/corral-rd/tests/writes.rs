//! The directory's writes as effects (`corral_rd::store`), driven by hand on the in-memory net: the node
//! has no runner, so each write waits in it until the test completes it — late, out of order, or failed.
//! A change is answered only when its write is done; a failed write undoes it and answers 5.00; a change of
//! a registration whose write is in flight is answered 5.03 with Max-Age 1 and changes nothing.

use corral_proto::testing::Net;
use corral_proto::wire::{Code, OptionNumber};
use corral_proto::{
    Context, Duration, EffectId, Endpoint, EndpointConfig, IncomingRequest, Node, Outcome, Request, RequestId,
    Response, SendParams, Service, ServiceHandle,
};
use corral_rd::{Limits, RdService, StoreDone, StoreError, StoreOp, Write};
use std::net::SocketAddr;

#[derive(Default)]
struct Client {
    responses: Vec<(RequestId, Response)>,
}

impl Service for Client {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        cx.respond(req.id, Response::error(Code::NOT_FOUND, "client"));
    }
    fn handle_response(&mut self, _cx: &mut Context<'_>, id: RequestId, outcome: Outcome) {
        if let Outcome::Response { response, .. } = outcome {
            self.responses.push((id, response));
        }
    }
}

const SEED: u64 = 9177;

struct Lab {
    net: Net,
    rd: usize,
    rd_svc: ServiceHandle,
    clients: Vec<(usize, ServiceHandle)>,
}

fn lab() -> Lab {
    println!("seed {SEED}");
    let mut net = Net::default();
    let mut n = Node::new(Endpoint::new(EndpointConfig::with_seed(SEED)));
    let (svc, skipped) = RdService::durable(Limits::default(), Vec::new(), 1_000_000);
    assert_eq!(skipped, 0);
    let rd_svc = n.mount("", svc);
    let rd = net.add("10.0.0.1:5683".parse::<SocketAddr>().unwrap(), n);
    let clients = (0..2)
        .map(|i| {
            let mut c = Node::new(Endpoint::new(EndpointConfig::with_seed(SEED + 1 + i)));
            let h = c.mount("", Client::default());
            (net.add(format!("10.0.1.{}:5683", i + 1).parse::<SocketAddr>().unwrap(), c), h)
        })
        .collect();
    Lab { net, rd, rd_svc, clients }
}

impl Lab {
    /// Sends `req` from client `c` and runs the net for a second (the Echo round trip included).
    fn send(&mut self, c: usize, req: Request) -> RequestId {
        let (node, h) = self.clients[c];
        let (now, dst) = (self.net.now, self.net.addr(self.rd));
        let id = self
            .net
            .node(node)
            .with_service(now, h, |_: &mut Client, cx| cx.request(dst, req, SendParams::default()))
            .and_then(Result::ok)
            .expect("request starts");
        self.net.run_for(Duration::from_secs(1));
        id
    }

    fn answer(&mut self, c: usize, id: RequestId) -> Option<Response> {
        let (node, h) = self.clients[c];
        let got = &self.net.node(node).service::<Client>(h).unwrap().responses;
        got.iter().rev().find(|(i, _)| *i == id).map(|(_, r)| r.clone())
    }

    /// The writes waiting in the directory's node, in the order they were started.
    fn writes(&mut self) -> Vec<(EffectId, Vec<Write>)> {
        let node = self.net.node(self.rd);
        std::iter::from_fn(|| node.poll_effect())
            .map(|(id, op)| (id, op.downcast::<StoreOp>().expect("a directory store operation").0))
            .collect()
    }

    fn complete(&mut self, id: EffectId, result: Result<(), StoreError>) {
        let now = self.net.now;
        self.net.node(self.rd).handle_effect_done(now, id, Box::new(StoreDone(result)));
        self.net.run_for(Duration::from_secs(1));
    }

    fn rd(&mut self) -> &RdService {
        let (rd, h) = (self.rd, self.rd_svc);
        self.net.node(rd).service::<RdService>(h).unwrap()
    }

    fn names(&mut self) -> Vec<String> {
        let mut names: Vec<String> = self.rd().directory().iter().map(|r| r.ep.clone()).collect();
        names.sort();
        names
    }
}

fn register(ep: &str) -> Request {
    Request::new(Code::POST).with_path("rd").with_query(&format!("ep={ep}")).with_payload(b"</t>;rt=t".to_vec())
}

fn location(r: &Response) -> String {
    let segs: Vec<String> =
        r.options.get_all(OptionNumber::LOCATION_PATH).map(|s| String::from_utf8_lossy(s).into_owned()).collect();
    format!("/{}", segs.join("/"))
}

#[test]
fn a_registration_is_answered_when_its_write_is_done_in_whatever_order_writes_complete() {
    let mut l = lab();
    let a = l.send(0, register("a"));
    let b = l.send(1, register("b"));
    assert_eq!((l.answer(0, a), l.answer(1, b)), (None, None), "nothing is answered before its write is done");
    assert_eq!(l.rd().writes_in_flight(), 2);
    let writes = l.writes();
    let eps: Vec<&str> = writes
        .iter()
        .map(|(_, w)| match &w[..] {
            [Write::Save(s)] => s.reg.ep.as_str(),
            other => panic!("one save per registration: {other:?}"),
        })
        .collect();
    assert_eq!(eps, ["a", "b"]);
    // The second write completes first, a moment later; then the first, much later.
    l.complete(writes[1].0, Ok(()));
    assert_eq!(l.answer(1, b).map(|r| r.code), Some(Code::CREATED));
    assert_eq!(l.answer(0, a), None, "a's write is still in flight");
    l.net.run_for(Duration::from_secs(20));
    l.complete(writes[0].0, Ok(()));
    let ra = l.answer(0, a).expect("answered once its write is done");
    assert_eq!(ra.code, Code::CREATED);
    assert!(location(&ra).starts_with("/rd/"));
    assert_eq!(l.names(), ["a", "b"]);
    assert_eq!((l.rd().stats().registered, l.rd().writes_in_flight()), (2, 0));
    // A completion delivered twice finds nothing to finish.
    l.complete(writes[0].0, Ok(()));
    assert_eq!(l.rd().stats().registered, 2);
}

#[test]
fn a_failed_write_undoes_its_change_and_answers_5_00() {
    let mut l = lab();
    let a = l.send(0, register("a"));
    let (w, _) = l.writes().remove(0);
    l.complete(w, Ok(()));
    let loc = location(&l.answer(0, a).unwrap());
    let lt_before = l.rd().directory().iter().next().unwrap().lt;

    // An update whose write fails: the lifetime stays.
    let up = l.send(0, Request::new(Code::POST).with_path(&loc).with_query("lt=9000"));
    assert_eq!(l.rd().directory().iter().next().unwrap().lt, 9000, "made in memory while its write is in flight");
    let (w, _) = l.writes().remove(0);
    l.complete(w, Err(StoreError("disk full".into())));
    let r = l.answer(0, up).unwrap();
    assert_eq!(r.code, Code::INTERNAL_SERVER_ERROR);
    assert!(r.payload_text().contains("disk full"), "{}", r.payload_text());
    assert_eq!(l.rd().directory().iter().next().unwrap().lt, lt_before);

    // A removal whose write fails: the registration stays.
    let del = l.send(0, Request::new(Code::DELETE).with_path(&loc));
    let (w, _) = l.writes().remove(0);
    l.complete(w, Err(StoreError("disk full".into())));
    assert_eq!(l.answer(0, del).unwrap().code, Code::INTERNAL_SERVER_ERROR);
    assert_eq!(l.names(), ["a"]);

    // A new registration whose write fails: it is gone.
    let b = l.send(1, register("b"));
    let (w, _) = l.writes().remove(0);
    l.complete(w, Err(StoreError("disk full".into())));
    assert_eq!(l.answer(1, b).unwrap().code, Code::INTERNAL_SERVER_ERROR);
    assert_eq!(l.names(), ["a"]);
    assert_eq!(l.rd().stats().store_failures, 3);
    assert_eq!(l.rd().writes_in_flight(), 0);
}

#[test]
fn a_change_of_a_registration_whose_write_is_in_flight_is_answered_5_03_and_changes_nothing() {
    let mut l = lab();
    let first = l.send(0, register("a"));
    // The same name from another client while the first write is in flight.
    let second = l.send(1, register("a"));
    let r = l.answer(1, second).expect("answered at once");
    assert_eq!(r.code, Code::SERVICE_UNAVAILABLE, "{}", r.payload_text());
    assert_eq!(r.options.max_age(), Some(1), "try again in a second");
    let writes = l.writes();
    assert_eq!(writes.len(), 1, "the refused change wrote nothing");
    l.complete(writes[0].0, Ok(()));
    let r = l.answer(0, first).unwrap();
    assert_eq!(r.code, Code::CREATED);
    // Once stored, the registration's owner changes it as usual; and its removal is written.
    let del = l.send(0, Request::new(Code::DELETE).with_path(&location(&r)));
    let writes = l.writes();
    assert!(matches!(&writes[0].1[..], [Write::Remove(_)]), "{:?}", writes[0].1);
    l.complete(writes[0].0, Ok(()));
    assert_eq!(l.answer(0, del).unwrap().code, Code::DELETED);
    assert!(l.names().is_empty());
}

#[test]
fn registrations_whose_lifetime_ends_are_removed_from_the_store() {
    let mut l = lab();
    for (c, ep) in [(0, "a"), (1, "b")] {
        let req = register(ep).with_query("lt=60");
        let id = l.send(c, req);
        let (w, _) = l.writes().remove(0);
        l.complete(w, Ok(()));
        assert_eq!(l.answer(c, id).unwrap().code, Code::CREATED);
    }
    l.net.run_for(Duration::from_secs(61));
    assert!(l.names().is_empty());
    // They ended a second apart: one removal each (those that end together share one write).
    let writes = l.writes();
    let removed: Vec<&Write> = writes.iter().flat_map(|(_, w)| w).collect();
    assert!(removed.len() == 2 && removed.iter().all(|w| matches!(w, Write::Remove(_))), "{writes:?}");
    // A failed removal changes nothing in memory: the row is dropped as expired at the next start.
    for (id, _) in writes {
        l.complete(id, Err(StoreError("disk full".into())));
    }
    assert!(l.names().is_empty());
    assert_eq!(l.rd().stats().expired, 2);
}
