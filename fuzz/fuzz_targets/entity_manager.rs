//! The Entity Manager on the in-memory net: a gateway, two devices and a client. The input is a sequence of
//! raw datagrams to the gateway and of requests built from its bytes (method, entity name, queries,
//! content format, payload: profiles, member lists, actuation values), with virtual time passing between
//! them. Nothing may panic, and afterwards the gateway still lists its entities.
#![no_main]

use corral_group::device::{mount_device, DeviceConfig};
use corral_group::{EmConfig, EntityManager, MemStore, Snapshot, StoreRunner};
use corral_proto::testing::Net;
use corral_proto::wire::{Code, ContentFormat, OptionNumber};
use corral_proto::{
    Context, Duration, Endpoint, EndpointConfig, IncomingRequest, Node, Outcome, Request, RequestId, Response,
    SendParams, Service,
};
use std::net::SocketAddr;

#[derive(Default)]
struct Client {
    answers: Vec<(RequestId, Code)>,
}

impl Service for Client {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        cx.respond(req.id, Response::error(Code::NOT_FOUND, "client"));
    }
    fn handle_response(&mut self, _cx: &mut Context<'_>, id: RequestId, outcome: Outcome) {
        if let Outcome::Response { response, .. } = outcome {
            self.answers.push((id, response.code));
        }
    }
}

const NAMES: [&str; 4] = ["room", "lights", "floor", "profile"];
const METHODS: [Code; 6] = [Code::GET, Code::PUT, Code::POST, Code::DELETE, Code::FETCH, Code::IPATCH];
const FORMATS: [Option<u16>; 5] = [None, Some(50), Some(60), Some(40), Some(0)];

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut net = Net::default();
    let gw_addr: SocketAddr = "192.0.2.1:5683".parse().unwrap();
    let client_addr: SocketAddr = "192.0.2.2:5683".parse().unwrap();
    let mut g = Node::new(Endpoint::new(EndpointConfig::with_seed(1)));
    let cfg = EmConfig { local_addrs: vec![gw_addr], max_jobs: 16, ..EmConfig::default() };
    g.mount("em", EntityManager::new(cfg, Snapshot::default()).unwrap());
    // Its writes are effects: an in-memory store completes them, as the SQLite thread does in a gateway.
    g.set_effect_runner(Box::new(StoreRunner::new(MemStore::new())));
    let gw = net.add(gw_addr, g);
    for i in 0..2u8 {
        let mut d = Node::new(Endpoint::new(EndpointConfig::with_seed(10 + u64::from(i))));
        mount_device(&mut d, DeviceConfig { observable: true, ..DeviceConfig::default() });
        net.add(SocketAddr::new([192, 0, 2, 100 + i].into(), 5683), d);
    }
    let mut c = Node::new(Endpoint::new(EndpointConfig::with_seed(2)));
    let svc = c.mount("", Client::default());
    let client = net.add(client_addr, c);

    // Each item: [kind, len, bytes...].
    let mut rest = data;
    while rest.len() >= 2 {
        let (kind, len) = (rest[0], usize::from(rest[1]));
        let take = len.min(rest.len() - 2);
        let bytes = &rest[2..2 + take];
        rest = &rest[2 + take..];
        let now = net.now;
        if kind & 1 == 0 {
            net.node(gw).handle_datagram(now, client_addr, None, bytes);
        } else {
            // Structured: method, name, then `\n`-separated queries; the payload after the first `\0`.
            let method = METHODS[usize::from(kind >> 1) % METHODS.len()];
            let (head, payload) = match bytes.iter().position(|b| *b == 0) {
                Some(i) => (&bytes[..i], &bytes[i + 1..]),
                None => (bytes, &[][..]),
            };
            let head = String::from_utf8_lossy(head);
            let mut lines = head.split('\n');
            let first = lines.next().unwrap_or("");
            let mut req = Request::new(method);
            req.options.push_str(OptionNumber::URI_PATH, "em");
            match usize::from(kind >> 4) % 6 {
                0 => {}
                1 => {
                    req.options.push_str(OptionNumber::URI_PATH, first);
                }
                k => {
                    req.options.push_str(OptionNumber::URI_PATH, NAMES[(k - 2) % NAMES.len()]);
                }
            }
            if kind & 0x40 != 0 {
                req.options.push_str(OptionNumber::URI_PATH, "profile");
            }
            for q in lines {
                req.options.push_str(OptionNumber::URI_QUERY, q);
            }
            if let Some(cf) = FORMATS[usize::from(kind >> 3) % FORMATS.len()] {
                req = req.with_content_format(ContentFormat(cf));
            }
            if kind & 0x80 != 0 {
                req.options.set_uint(OptionNumber::OBSERVE, 0);
            }
            req.payload = payload.to_vec();
            net.node(client).with_service(now, svc, |_: &mut Client, cx| {
                let _ = cx.request(gw_addr, req, SendParams::default());
            });
        }
        net.run_for(Duration::from_millis(u64::from(kind >> 5) * 700));
    }
    net.run_for(Duration::from_secs(300));
    // Still alive: the entity list is answered.
    let now = net.now;
    let id = net
        .node(client)
        .with_service(now, svc, |_: &mut Client, cx| cx.request(gw_addr, Request::get("em"), SendParams::default()))
        .unwrap()
        .unwrap();
    net.run_for(Duration::from_secs(60));
    let answers = &net.node(client).service::<Client>(svc).unwrap().answers;
    let answered = answers.iter().any(|(r, c)| *r == id && *c == Code::CONTENT);
    assert!(answered, "GET /em answered 2.05 after the input");
});
