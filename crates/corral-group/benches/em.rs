//! The Entity Manager's CPU cost per use request of a 40-member unicast entity (`delay=0`).
//!
//! - `net/*`: the whole lab on the in-memory net (client, gateway, 40 virtual devices, the net itself),
//!   for the EM (`eo=avg`, `eo=lst`) and for a client sending the 40 GETs itself.
//! - `gateway_node/*`: only the gateway node's CPU time (endpoint + EM), measured around its
//!   `handle_datagram`/`poll_transmit` calls: one client request in, 40 member requests out, 40 replies
//!   in, one answer out. `client_node_40_gets` is the same for a client node that sends the 40 GETs and
//!   takes the 40 replies itself. (EM − client) / 40 is the EM's overhead per member.
//!
//! `cargo bench -p corral-group --bench em`

use corral_group::device::{mount_device, DeviceConfig};
use corral_group::{EmConfig, EntityManager, MemStore, Snapshot, StoreRunner};
use corral_proto::testing::Net;
use corral_proto::wire::{Code, ContentFormat};
use corral_proto::{
    Context, Duration, Endpoint, EndpointConfig, IncomingRequest, Node, Outcome, Request, RequestId, Response,
    SendParams, Service, ServiceHandle,
};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

const MEMBERS: usize = 40;

#[derive(Default)]
struct Client {
    done: usize,
}

impl Service for Client {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        cx.respond(req.id, Response::error(Code::NOT_FOUND, ""));
    }
    fn handle_response(&mut self, _cx: &mut Context<'_>, _id: RequestId, outcome: Outcome) {
        if let Outcome::Response { response, .. } = outcome {
            assert!(response.code.is_success(), "{response:?}");
        }
        self.done += 1;
    }
}

fn addr(i: usize) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10 + i as u8)), 5683)
}

struct Bench {
    net: Net,
    client: usize,
    svc: ServiceHandle,
    gw: SocketAddr,
}

fn setup() -> Bench {
    let mut net = Net::new(Duration::from_millis(1));
    let gw = "192.0.2.1:5683".parse().unwrap();
    let mut g = Node::new(Endpoint::new(EndpointConfig::with_seed(1)));
    let em = EntityManager::new(EmConfig { local_addrs: vec![gw], ..EmConfig::default() }, Snapshot::default());
    g.mount("em", em.unwrap());
    g.set_effect_runner(Box::new(StoreRunner::new(MemStore::new())));
    net.add(gw, g);
    let mut c = Node::new(Endpoint::new(EndpointConfig::with_seed(2)));
    let svc = c.mount("", Client::default());
    let client = net.add("192.0.2.2:5683".parse().unwrap(), c);
    for i in 0..MEMBERS {
        let mut d = Node::new(Endpoint::new(EndpointConfig::with_seed(100 + i as u64)));
        mount_device(&mut d, DeviceConfig::default());
        net.add(addr(i), d);
    }
    let mut b = Bench { net, client, svc, gw };
    let er: Vec<String> = (0..MEMBERS).map(|i| format!("coap://{}/s/t", addr(i).ip())).collect();
    let body = serde_json::json!({ "er": er }).to_string();
    let req = Request::new(Code::PUT).with_path("em/room").with_content_format(ContentFormat::JSON).with_payload(body);
    b.round(vec![(gw, req)]);
    b
}

impl Bench {
    /// Sends requests from the client and runs the net until every one has its outcome.
    fn round(&mut self, reqs: Vec<(SocketAddr, Request)>) {
        let n = reqs.len();
        let now = self.net.now;
        self.net.node(self.client).with_service(now, self.svc, |c: &mut Client, cx| {
            c.done = 0;
            for (dst, r) in reqs {
                cx.request(dst, r, SendParams::default()).unwrap();
            }
        });
        let limit = self.net.now + Duration::from_secs(60);
        while self.net.node(self.client).service::<Client>(self.svc).unwrap().done < n {
            assert!(self.net.step(limit));
        }
        self.net.records.clear();
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("net");
    g.throughput(Throughput::Elements(MEMBERS as u64));
    g.sample_size(30).measurement_time(std::time::Duration::from_secs(4));
    for op in ["avg", "lst"] {
        let mut b = setup();
        g.bench_function(format!("em_get_{op}"), |bench| {
            bench.iter(|| {
                let gw = b.gw;
                b.round(vec![(gw, Request::get("em/room").with_query(&format!("eo={op}")))])
            })
        });
    }
    let mut b = setup();
    g.bench_function("client_40_gets_itself", |bench| {
        bench.iter(|| b.round((0..MEMBERS).map(|i| (addr(i), Request::get("s/t"))).collect()))
    });
    g.finish();
}

/// Times only the gateway node: request in, member requests out, replies in, answer out.
fn gateway_node(c: &mut Criterion) {
    use corral_proto::wire::{Message, MessageId, MessageType, Token};
    use corral_proto::Instant;
    let gw_addr: SocketAddr = "192.0.2.1:5683".parse().unwrap();
    let client: SocketAddr = "192.0.2.2:5683".parse().unwrap();
    let mut g = c.benchmark_group("gateway_node");
    g.throughput(Throughput::Elements(MEMBERS as u64));
    g.sample_size(30).measurement_time(std::time::Duration::from_secs(4));

    // The gateway with a 40-member entity, built on the net, then driven by hand.
    let mut gw = Node::new(Endpoint::new(EndpointConfig::with_seed(1)));
    let em = EntityManager::new(EmConfig { local_addrs: vec![gw_addr], ..EmConfig::default() }, Snapshot::default());
    gw.mount("em", em.unwrap());
    gw.set_effect_runner(Box::new(StoreRunner::new(MemStore::new())));
    let reply = |m: &Message| {
        let mut r = Message::new(MessageType::Ack, Code::CONTENT, m.mid, m.token);
        r.options.set_uint(corral_proto::wire::OptionNumber::CONTENT_FORMAT, 0);
        r.payload = b"21.37".to_vec();
        r.encode()
    };
    // Create the entity by answering its validation requests.
    let mut now = Instant::from_secs(1);
    let er: Vec<String> = (0..MEMBERS).map(|i| format!("coap://{}/s/t", addr(i).ip())).collect();
    let mut create = Message::new(MessageType::Con, Code::PUT, MessageId(1), Token::new(&[1]).unwrap());
    create.options.set_path("em/room");
    create.options.set_uint(corral_proto::wire::OptionNumber::CONTENT_FORMAT, 50);
    create.payload = serde_json::json!({ "er": er }).to_string().into_bytes();
    gw.handle_datagram(now, client, None, &create.encode());
    let out: Vec<_> = std::iter::from_fn(|| gw.poll_transmit()).collect();
    for t in out {
        if t.dst != client {
            let m = Message::parse(&t.payload).unwrap();
            gw.handle_datagram(now, t.dst, None, &reply(&m));
        }
    }
    while gw.poll_transmit().is_some() {}

    for op in ["avg", "lst"] {
        let mut mid = 100u16;
        g.bench_function(format!("em_get_{op}"), |bench| {
            bench.iter_custom(|iters| {
                let mut spent = std::time::Duration::ZERO;
                for _ in 0..iters {
                    mid = mid.wrapping_add(1);
                    now += Duration::from_millis(1);
                    let mut req = Message::new(
                        MessageType::Con,
                        Code::GET,
                        MessageId(mid),
                        Token::new(&mid.to_be_bytes()).unwrap(),
                    );
                    req.options.set_path("em/room");
                    req.options.push_str(corral_proto::wire::OptionNumber::URI_QUERY, &format!("eo={op}"));
                    let bytes = req.encode();
                    let t0 = std::time::Instant::now();
                    gw.handle_datagram(now, client, None, &bytes);
                    let out: Vec<_> = std::iter::from_fn(|| gw.poll_transmit()).collect();
                    spent += t0.elapsed();
                    let replies: Vec<_> =
                        out.iter().map(|t| (t.dst, reply(&Message::parse(&t.payload).unwrap()))).collect();
                    let t0 = std::time::Instant::now();
                    for (from, r) in &replies {
                        gw.handle_datagram(now, *from, None, r);
                    }
                    let answered = std::iter::from_fn(|| gw.poll_transmit()).count();
                    spent += t0.elapsed();
                    assert_eq!((out.len(), answered), (MEMBERS, 1));
                }
                spent
            })
        });
    }

    let mut node = Node::new(Endpoint::new(EndpointConfig::with_seed(2)));
    let svc = node.mount("", Client::default());
    g.bench_function("client_node_40_gets", |bench| {
        bench.iter_custom(|iters| {
            let mut spent = std::time::Duration::ZERO;
            for _ in 0..iters {
                now += Duration::from_millis(1);
                let t0 = std::time::Instant::now();
                node.with_service(now, svc, |c: &mut Client, cx| {
                    c.done = 0;
                    for i in 0..MEMBERS {
                        cx.request(addr(i), Request::get("s/t"), SendParams::default()).unwrap();
                    }
                });
                let out: Vec<_> = std::iter::from_fn(|| node.poll_transmit()).collect();
                spent += t0.elapsed();
                let replies: Vec<_> =
                    out.iter().map(|t| (t.dst, reply(&Message::parse(&t.payload).unwrap()))).collect();
                let t0 = std::time::Instant::now();
                for (from, r) in &replies {
                    node.handle_datagram(now, *from, None, r);
                }
                while node.poll_transmit().is_some() {}
                spent += t0.elapsed();
                assert_eq!(node.service::<Client>(svc).unwrap().done, MEMBERS);
            }
            spent
        })
    });
    g.finish();
}

criterion_group!(benches, bench, gateway_node);
criterion_main!(benches);
