//! A lab on the in-memory net: a gateway with the Entity Manager, N virtual devices and a client.
#![allow(dead_code)]

use corral_group::device::{mount_device, DeviceConfig, DeviceHandles};
use corral_group::{EmConfig, EntityManager, McResource, MemStore, Store, StoreRunner};
use corral_proto::testing::Net;
use corral_proto::wire::{Code, ContentFormat, Message};
use corral_proto::{
    Context, Endpoint, EndpointConfig, IncomingRequest, Instant, Node, Outcome, Request, RequestId, Response,
    SendParams, Service, ServiceHandle,
};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};

/// Records every outcome of the requests it sends.
#[derive(Default)]
pub struct Client {
    pub outcomes: Vec<(Instant, RequestId, Outcome)>,
}

impl Service for Client {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        cx.respond(req.id, Response::error(Code::NOT_FOUND, "client"));
    }
    fn handle_response(&mut self, cx: &mut Context<'_>, id: RequestId, outcome: Outcome) {
        self.outcomes.push((cx.now(), id, outcome));
    }
}

pub struct Lab {
    pub net: Net,
    pub gw: usize,
    pub em: ServiceHandle,
    pub client: usize,
    pub client_svc: ServiceHandle,
    pub devices: Vec<usize>,
    pub handles: Vec<DeviceHandles>,
    pub v6: bool,
    /// The gateway's store, which its node's effect runner writes (see `corral_group::store`).
    pub store: Arc<Mutex<Box<dyn Store>>>,
}

pub fn dev_addr(i: usize, v6: bool) -> SocketAddr {
    if v6 {
        SocketAddr::new(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x100 + i as u16)), 5683)
    } else {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 100 + i as u8)), 5683)
    }
}

pub fn gw_addr(v6: bool) -> SocketAddr {
    if v6 {
        "[2001:db8::1]:5683".parse().unwrap()
    } else {
        "192.0.2.1:5683".parse().unwrap()
    }
}

pub fn client_addr(v6: bool) -> SocketAddr {
    if v6 {
        "[2001:db8::2]:5683".parse().unwrap()
    } else {
        "192.0.2.2:5683".parse().unwrap()
    }
}

pub const DEVICE_SEED: u64 = 1000;

pub struct LabConfig {
    pub devices: usize,
    pub v6: bool,
    pub slots: Vec<usize>,
    pub store: Option<Box<dyn Store>>,
    pub em: EmConfig,
    /// Observable sensors on the devices (RFC 7641).
    pub observable: bool,
    /// Who may change the devices' memberships (empty: anyone).
    pub managers: Vec<corral_group::Prefix>,
    /// The gateway's EM is the manager of a sharded gateway publishing here (see `tests/suite/shards.rs`).
    pub directory: Option<corral_group::Directory>,
    /// The devices' `/mc` asks every change from beyond loopback for an Echo round trip.
    pub verify_managers: bool,
}

impl Default for LabConfig {
    fn default() -> Self {
        LabConfig {
            devices: 5,
            v6: false,
            slots: Vec::new(),
            store: None,
            em: EmConfig::default(),
            observable: false,
            managers: Vec::new(),
            directory: None,
            verify_managers: false,
        }
    }
}

pub fn lab(n: usize) -> Lab {
    lab_with(LabConfig { devices: n, ..LabConfig::default() })
}

pub fn lab_with(cfg: LabConfig) -> Lab {
    let mut net = Net::default();
    let v6 = cfg.v6;
    let mut g = Node::new(Endpoint::new(EndpointConfig::with_seed(1)));
    let mut emc = cfg.em;
    emc.local_addrs.push(gw_addr(v6));
    let store = cfg.store.unwrap_or_else(|| Box::new(MemStore::new()));
    let snapshot = store.load().expect("the store loads");
    let em = match cfg.directory {
        Some(d) => g.mount("em", EntityManager::manager(emc, snapshot, d).expect("EM loads")),
        None => g.mount("em", EntityManager::new(emc, snapshot).expect("EM loads")),
    };
    let store = Arc::new(Mutex::new(store));
    g.set_effect_runner(Box::new(StoreRunner::shared(store.clone())));
    let gw = net.add(gw_addr(v6), g);
    let mut c = Node::new(Endpoint::new(EndpointConfig::with_seed(2)));
    let client_svc = c.mount("", Client::default());
    let client = net.add(client_addr(v6), c);
    let mut devices = Vec::new();
    let mut handles = Vec::new();
    for i in 0..cfg.devices {
        let mut d = Node::new(Endpoint::new(EndpointConfig::with_seed(DEVICE_SEED + i as u64)));
        let slots = cfg.slots.get(i).copied();
        let dc = DeviceConfig {
            mc_slots: slots,
            observable: cfg.observable,
            managers: cfg.managers.clone(),
            verify_managers: cfg.verify_managers,
            ..DeviceConfig::default()
        };
        handles.push(mount_device(&mut d, dc));
        devices.push(net.add(dev_addr(i, v6), d));
    }
    Lab { net, gw, em, client, client_svc, devices, handles, v6, store }
}

/// What the EM answers for operation `o` over `values`: the aggregate at the members' precision.
pub fn op(o: corral_group::Op, values: &[f64]) -> f64 {
    let v = corral_group::output::aggregate(o, values).expect("values to aggregate");
    corral_group::output::round_to_members(v, values)
}

pub fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(bytes)))
}

impl Lab {
    pub fn uri(&self, i: usize, path: &str) -> String {
        corral_group::uri::format_coap(dev_addr(i, self.v6), &path.split('/').map(String::from).collect::<Vec<_>>())
    }

    pub fn uris(&self, range: std::ops::Range<usize>, path: &str) -> Vec<String> {
        range.map(|i| self.uri(i, path)).collect()
    }

    /// Sends `req` from the client to the gateway (the net does not run).
    pub fn send(&mut self, req: Request) -> RequestId {
        self.send_at(gw_addr(self.v6), req)
    }

    /// Sends `req` from the client to `dst` (the net does not run).
    pub fn send_at(&mut self, dst: SocketAddr, req: Request) -> RequestId {
        let now = self.net.now;
        self.net
            .node(self.client)
            .with_service(now, self.client_svc, |_: &mut Client, cx| cx.request(dst, req, SendParams::default()))
            .unwrap()
            .unwrap()
    }

    pub fn outcome(&mut self, id: RequestId) -> Option<(Instant, Outcome)> {
        let c = self.net.node(self.client).service::<Client>(self.client_svc).unwrap();
        c.outcomes.iter().find(|(_, r, _)| *r == id).map(|(t, _, o)| (*t, o.clone()))
    }

    /// Sends a request to the gateway and runs the net until its response (or failure) arrives.
    pub fn request(&mut self, req: Request) -> Response {
        let id = self.send(req);
        let limit = self.net.now + corral_proto::Duration::from_secs(600);
        while self.outcome(id).is_none() {
            assert!(self.net.step(limit), "no outcome before the limit");
        }
        match self.outcome(id).unwrap().1 {
            Outcome::Response { response, .. } => response,
            other => panic!("request failed: {other:?}"),
        }
    }

    /// A second gateway with its own Entity Manager at 192.0.2.9: (net index, EM handle, address).
    pub fn add_gateway(&mut self) -> (usize, ServiceHandle, SocketAddr) {
        let addr: SocketAddr = "192.0.2.9:5683".parse().unwrap();
        let mut n = Node::new(Endpoint::new(EndpointConfig::with_seed(9)));
        let cfg = EmConfig { local_addrs: vec![addr], ..EmConfig::default() };
        let em = n.mount("em", EntityManager::new(cfg, corral_group::Snapshot::default()).expect("EM loads"));
        n.set_effect_runner(Box::new(StoreRunner::new(MemStore::new())));
        (self.net.add(addr, n), em, addr)
    }

    /// Another client node at `addr` (its own endpoint, so its requests do not queue behind the main
    /// client's under NSTART): (net index, service handle).
    pub fn add_client(&mut self, addr: SocketAddr) -> (usize, ServiceHandle) {
        let mut c = Node::new(Endpoint::new(EndpointConfig::with_seed(u64::from(addr.port()) + 77)));
        let h = c.mount("", Client::default());
        (self.net.add(addr, c), h)
    }

    /// Sends `req` from an extra client (see [`Lab::add_client`]) to the gateway.
    pub fn send_from(&mut self, (node, svc): (usize, ServiceHandle), req: Request) -> RequestId {
        let now = self.net.now;
        let dst = gw_addr(self.v6);
        self.net
            .node(node)
            .with_service(now, svc, |_: &mut Client, cx| cx.request(dst, req, SendParams::default()))
            .unwrap()
            .unwrap()
    }

    /// The response an extra client got for `id`, if any.
    pub fn response_of(&mut self, (node, svc): (usize, ServiceHandle), id: RequestId) -> Option<Response> {
        let c = self.net.node(node).service::<Client>(svc).unwrap();
        c.outcomes.iter().find(|(_, r, _)| *r == id).and_then(|(_, _, o)| match o {
            Outcome::Response { response, .. } => Some(response.clone()),
            _ => None,
        })
    }

    /// Sends `req` from the client to `dst` and runs the net for five seconds.
    pub fn send_to(&mut self, dst: SocketAddr, req: Request) -> RequestId {
        let id = self.send_at(dst, req);
        self.net.run_for(corral_proto::Duration::from_secs(5));
        id
    }

    /// Creates entity `name` with a JSON profile on the gateway at `dst` (see [`Lab::add_gateway`]).
    pub fn create_at(&mut self, dst: SocketAddr, name: &str, profile: serde_json::Value) -> RequestId {
        let req = Request::new(Code::PUT)
            .with_path(&format!("em/{name}"))
            .with_content_format(ContentFormat::JSON)
            .with_payload(profile.to_string());
        self.send_to(dst, req)
    }

    /// Every response received so far for request `id` (an observation's notifications, in order).
    pub fn responses(&mut self, id: RequestId) -> Vec<Response> {
        let c = self.net.node(self.client).service::<Client>(self.client_svc).unwrap();
        c.outcomes
            .iter()
            .filter(|(_, r, _)| *r == id)
            .filter_map(|(_, _, o)| match o {
                Outcome::Response { response, .. } => Some(response.clone()),
                _ => None,
            })
            .collect()
    }

    /// Runs until everything pending is done (or 10 minutes of virtual time).
    pub fn settle(&mut self) {
        let limit = self.net.now + corral_proto::Duration::from_secs(600);
        while self.em().jobs_in_progress() > 0 && self.net.step(limit) {}
    }

    /// The gateway's store, as its writes left it.
    pub fn store(&self) -> MutexGuard<'_, Box<dyn Store>> {
        self.store.lock().unwrap()
    }

    pub fn em(&mut self) -> &EntityManager {
        self.net.node(self.gw).service::<EntityManager>(self.em).unwrap()
    }

    pub fn mc(&mut self, i: usize) -> &McResource {
        let (d, h) = (self.devices[i], self.handles[i].mc);
        self.net.node(d).service::<McResource>(h).unwrap()
    }

    /// Creates an entity with a JSON profile; returns the response.
    pub fn create(&mut self, name: &str, profile: serde_json::Value) -> Response {
        self.send_json(Code::PUT, &format!("em/{name}"), profile)
    }

    /// `method path` with a JSON document (a profile, a profile change), run to its response.
    pub fn send_json(&mut self, method: Code, path: &str, doc: serde_json::Value) -> Response {
        self.request(
            Request::new(method).with_path(path).with_content_format(ContentFormat::JSON).with_payload(doc.to_string()),
        )
    }

    pub fn get(&mut self, path: &str, query: &[&str], accept: Option<ContentFormat>) -> Response {
        let mut r = Request::get(path);
        for q in query {
            r = r.with_query(q);
        }
        if let Some(a) = accept {
            r = r.with_accept(a);
        }
        self.request(r)
    }

    /// Member requests the gateway sent to device `i` (time, message), ignoring ACKs.
    pub fn requests_to(&self, i: usize) -> Vec<(Instant, Message)> {
        let gw = gw_addr(self.v6);
        let dst = dev_addr(i, self.v6);
        self.net
            .records
            .iter()
            .filter(|r| r.from == gw && r.to == dst)
            .filter_map(|r| r.message().map(|m| (r.sent_at, m)))
            .filter(|(_, m)| m.code.is_request())
            .collect()
    }

    /// What the gateway sent the client (time, message).
    pub fn to_client(&self) -> Vec<(Instant, Message)> {
        let gw = gw_addr(self.v6);
        let c = client_addr(self.v6);
        self.net
            .records
            .iter()
            .filter(|r| r.from == gw && r.to == c)
            .filter_map(|r| r.message().map(|m| (r.sent_at, m)))
            .collect()
    }

    /// The value device `i` reported for temperature to the last GET from the gateway it received.
    pub fn reported_temperature(&self, i: usize) -> f64 {
        let dev = dev_addr(i, self.v6);
        let t = self
            .net
            .records
            .iter()
            .rev()
            .find(|r| r.delivered_to == Some(dev) && r.message().is_some_and(|m| m.code == Code::GET))
            .map(|r| r.sent_at)
            .expect("device was asked");
        corral_group::device::sample(
            DEVICE_SEED + i as u64,
            corral_group::device::Quantity::Temperature,
            t + self.net.latency,
        )
    }
}
