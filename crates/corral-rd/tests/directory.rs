//! The Resource Directory on the in-memory net (virtual time, seeded): devices register, refresh and
//! leave; lookups filter and page; a registration ends at its lifetime; names are first come, first
//! remembered; an unverified source is challenged before any state is kept; observers of a lookup hear
//! of registrations that come and go; a restarted directory keeps what it stored; a change is answered
//! when its write is done, in whatever order writes complete, and undone when it failed.

use corral_proto::testing::Net;
use corral_proto::wire::{Code, ContentFormat, OptionNumber};
use corral_proto::{
    Context, Duration, EffectId, Endpoint, EndpointConfig, IncomingRequest, Instant, Node, Outcome, Request, RequestId,
    ResourceLink, Response, SendParams, Service, ServiceHandle,
};
use corral_rd::directory::Registered;
use corral_rd::{
    footprint, Directory, Limits, MemStore, Params, RdError, RdService, Requester, Store, StoreDone, StoreError,
    StoreOp, Write, DEFAULT_LIFETIME, SOURCE_SHARE,
};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

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
    /// What the node's `/.well-known/core` lists (a simple registration fetches it).
    fn links(&self) -> Vec<ResourceLink> {
        vec![
            ResourceLink::new("temp").attr("rt", "temperature").flag("obs"),
            ResourceLink::new("hum").attr("rt", "humidity"),
        ]
    }
}

struct Lab {
    net: Net,
    rd: usize,
    rd_svc: ServiceHandle,
    clients: Vec<(usize, ServiceHandle)>,
}

const SEED: u64 = 9176;

fn lab(limits: Limits, clients: usize) -> Lab {
    lab_of(RdService::new(limits), clients)
}

/// `svc` on 10.0.0.1 and `clients` clients on 10.0.1.x.
fn lab_of(svc: RdService, clients: usize) -> Lab {
    println!("seed {SEED}");
    let mut net = Net::default();
    let mut n = Node::new(Endpoint::new(EndpointConfig::with_seed(SEED)));
    let rd_svc = n.mount("", svc);
    let rd = net.add("10.0.0.1:5683".parse::<SocketAddr>().unwrap(), n);
    let clients = (0..clients)
        .map(|i| {
            let mut c = Node::new(Endpoint::new(EndpointConfig::with_seed(SEED + 1 + i as u64)));
            let h = c.mount("", Client::default());
            (net.add(format!("10.0.1.{}:5683", i + 1).parse::<SocketAddr>().unwrap(), c), h)
        })
        .collect();
    Lab { net, rd, rd_svc, clients }
}

impl Lab {
    /// Sends `req` from client `c` and runs the net until it is answered; the final response.
    fn ask(&mut self, c: usize, req: Request) -> Response {
        let id = self.send_for(c, req, Duration::from_secs(10));
        self.answer(c, id).expect("answered")
    }

    /// Sends `req` from client `c` and runs the net for `d`.
    fn send_for(&mut self, c: usize, req: Request, d: Duration) -> RequestId {
        let (node, h) = self.clients[c];
        let (now, dst) = (self.net.now, self.net.addr(self.rd));
        let id = self
            .net
            .node(node)
            .with_service(now, h, |_: &mut Client, cx| cx.request(dst, req, SendParams::default()))
            .and_then(Result::ok)
            .expect("request starts");
        self.net.run_for(d);
        id
    }

    fn register(&mut self, c: usize, query: &str, links: &str) -> Response {
        let mut req = Request::new(Code::POST).with_path("rd").with_content_format(ContentFormat::LINK_FORMAT);
        for q in query.split('&') {
            req = req.with_query(q);
        }
        self.ask(c, req.with_payload(links.as_bytes().to_vec()))
    }

    fn lookup(&mut self, c: usize, what: &str, query: &str) -> String {
        let mut req = Request::get(&format!("rd-lookup/{what}"));
        for q in query.split('&').filter(|q| !q.is_empty()) {
            req = req.with_query(q);
        }
        let r = self.ask(c, req);
        assert_eq!(r.code, Code::CONTENT, "{}", r.payload_text());
        r.payload_text().into_owned()
    }

    fn rd(&mut self) -> &mut RdService {
        let (rd, h) = (self.rd, self.rd_svc);
        self.net.node(rd).service_mut::<RdService>(h).unwrap()
    }
}

fn location(r: &Response) -> String {
    let segs: Vec<String> =
        r.options.get_all(OptionNumber::LOCATION_PATH).map(|s| String::from_utf8_lossy(s).into_owned()).collect();
    format!("/{}", segs.join("/"))
}

#[test]
fn a_device_registers_and_its_resources_are_found_by_type_with_absolute_uris() {
    let mut l = lab(Limits::default(), 1);
    let r = l.register(0, "ep=node1&d=floor2&lt=600&et=sensor", "</temp>;rt=temperature;ct=0,</light>;rt=light");
    assert_eq!(r.code, Code::CREATED, "{}", r.payload_text());
    let loc = location(&r);
    assert!(loc.starts_with("/rd/") && loc.len() == 4 + 16, "an unguessable location: {loc}");
    let res = l.lookup(0, "res", "rt=temp*");
    assert_eq!(res, r#"<coap://10.0.1.1:5683/temp>;rt="temperature";ct=0;anchor="coap://10.0.1.1:5683""#);
    let ep = l.lookup(0, "ep", "d=floor2");
    assert!(ep.starts_with(&format!("<{loc}>;ep=\"node1\";d=\"floor2\";base=\"coap://10.0.1.1:5683\";lt=600")), "{ep}");
    assert!(ep.contains("et=\"sensor\""), "{ep}");
    assert_eq!(l.lookup(0, "ep", "et=actuator"), "", "a filter on a registration attribute");
    // The registration resource shows the links as registered, and DELETE removes it.
    let shown = l.ask(0, Request::get(&loc));
    assert_eq!(shown.payload_text(), r#"</temp>;rt="temperature";ct=0,</light>;rt="light""#);
    let del = l.ask(0, Request::new(Code::DELETE).with_path(&loc));
    assert_eq!(del.code, Code::DELETED);
    assert_eq!(l.lookup(0, "res", ""), "");
}

#[test]
fn a_registration_ends_at_its_lifetime_unless_refreshed() {
    let mut l = lab(Limits::default(), 1);
    let loc = location(&l.register(0, "ep=a&lt=60", "</x>"));
    location(&l.register(0, "ep=b&lt=60", "</y>"));
    l.net.run_for(Duration::from_secs(40));
    let upd = l.ask(0, Request::new(Code::POST).with_path(&loc));
    assert_eq!(upd.code, Code::CHANGED);
    l.net.run_for(Duration::from_secs(40));
    // b (registered 40+10+40 s ago, never refreshed) is gone; a was refreshed 40 s ago.
    let eps = l.lookup(0, "ep", "");
    assert!(eps.contains("ep=\"a\"") && !eps.contains("ep=\"b\""), "{eps}");
    assert_eq!(l.rd().stats().expired, 1);
    let gone = l.ask(0, Request::new(Code::POST).with_path("rd/0000000000000000"));
    assert_eq!(gone.code, Code::NOT_FOUND, "an update of an unknown registration tells the device to register again");
}

/// A refresh moves the registration's end: past its first end it is still there, and it ends 60 s after
/// the refresh (the directory's expiry index follows the refresh).
#[test]
fn a_refreshed_registration_ends_a_lifetime_after_its_refresh() {
    let mut l = lab(Limits::default(), 1);
    let loc = location(&l.register(0, "ep=a&lt=60", "</x>")); // t 0 (each ask runs the net 10 s)
    l.net.run_for(Duration::from_secs(35));
    assert_eq!(l.ask(0, Request::new(Code::POST).with_path(&loc)).code, Code::CHANGED); // t 45: ends at 105
    l.net.run_for(Duration::from_secs(30));
    assert!(l.lookup(0, "ep", "").contains("ep=\"a\""), "t 85: past the first end (60)");
    assert!(l.lookup(0, "ep", "").contains("ep=\"a\""), "t 95");
    l.net.run_for(Duration::from_secs(10));
    assert_eq!(l.lookup(0, "ep", "").trim(), "", "t 115: ended at 105");
    assert_eq!(l.rd().stats().expired, 1);
}

#[test]
fn a_name_belongs_to_its_first_registrant_until_its_registration_ends() {
    let mut l = lab(Limits::default(), 2);
    let first = l.register(0, "ep=boiler&lt=30", "</t>");
    assert_eq!(first.code, Code::CREATED);
    let other = l.register(1, "ep=boiler", "</evil>");
    assert_eq!(other.code, Code::FORBIDDEN, "{}", other.payload_text());
    let loc = location(&first);
    assert_eq!(l.ask(1, Request::new(Code::DELETE).with_path(&loc)).code, Code::FORBIDDEN);
    // The owner registering again keeps its location and replaces its links.
    let again = l.register(0, "ep=boiler&lt=30", "</t2>");
    assert_eq!((again.code, location(&again)), (Code::CREATED, loc));
    assert!(l.lookup(0, "res", "").contains("/t2>"));
    l.net.run_for(Duration::from_secs(40));
    assert_eq!(l.register(1, "ep=boiler", "</mine>").code, Code::CREATED, "free again after its lifetime");
}

#[test]
fn lookups_page_with_count_and_refuse_page_alone() {
    let mut l = lab(Limits::default(), 1);
    for i in 0..5 {
        assert_eq!(l.register(0, &format!("ep=n{i}"), "</s>;rt=t").code, Code::CREATED);
    }
    let page = l.lookup(0, "res", "rt=t&page=1&count=2");
    assert_eq!(page.matches("<coap://").count(), 2, "{page}");
    let eps = l.lookup(0, "ep", "page=2&count=2");
    assert!(eps.contains("ep=\"n4\"") && !eps.contains("ep=\"n3\""), "{eps}");
    let bad = l.ask(0, Request::get("rd-lookup/ep").with_query("page=1"));
    assert_eq!(bad.code, Code::BAD_REQUEST);
}

#[test]
fn a_source_holds_at_most_its_share_and_a_full_directory_refuses() {
    let limits = Limits { registrations: 3, per_source: 2, ..Limits::default() };
    let mut l = lab(limits, 2);
    assert_eq!(l.register(0, "ep=a", "</x>").code, Code::CREATED);
    assert_eq!(l.register(0, "ep=b", "</x>").code, Code::CREATED);
    assert_eq!(l.register(0, "ep=c", "</x>").code, Code::TOO_MANY_REQUESTS);
    assert_eq!(l.register(1, "ep=d", "</x>").code, Code::CREATED);
    assert_eq!(l.register(1, "ep=e", "</x>").code, Code::SERVICE_UNAVAILABLE);
    assert_eq!(l.rd().directory().len(), 3);
}

#[test]
fn garbage_is_refused_with_a_diagnostic() {
    let mut l = lab(Limits { links: 2, ..Limits::default() }, 1);
    for (query, links, code) in [
        ("lt=60", "</x>", Code::BAD_REQUEST),                  // no ep
        ("ep=a&lt=0", "</x>", Code::BAD_REQUEST),              // lifetime 0
        ("ep=a&lt=soon", "</x>", Code::BAD_REQUEST),           // not a number
        ("ep=a&base=http://x", "</x>", Code::BAD_REQUEST),     // not a CoAP base
        ("ep=a&rt=x", "</x>", Code::BAD_REQUEST),              // a lookup filter in a registration
        ("ep=a", "</x>;rt=\"unterminated", Code::BAD_REQUEST), // not link-format
        ("ep=a", "</x>,</y>,</z>", Code::REQUEST_ENTITY_TOO_LARGE),
        (&format!("ep={}", "n".repeat(64)), "</x>", Code::BAD_REQUEST),
    ] {
        let r = l.register(0, query, links);
        assert_eq!(r.code, code, "{query} {links}: {}", r.payload_text());
        assert!(!r.payload.is_empty(), "{query}: a diagnostic");
    }
    assert!(l.rd().directory().is_empty());
}

#[test]
fn an_unverified_source_is_challenged_before_anything_is_kept() {
    let mut l = lab(Limits::default(), 0);
    let (rd, rd_addr) = (l.rd, l.net.addr(l.rd));
    let req = corral_proto::wire::Message {
        mtype: corral_proto::wire::MessageType::Con,
        code: Code::POST,
        mid: corral_proto::wire::MessageId(7),
        token: corral_proto::wire::Token::new(&[1, 2]).unwrap(),
        options: Request::new(Code::POST).with_path("rd").with_query("ep=spoofed").options,
        payload: b"</x>".to_vec(),
    };
    let spoofed: SocketAddr = "192.0.2.66:5683".parse().unwrap();
    let now = l.net.now;
    l.net.node(rd).handle_datagram(now, spoofed, Some(rd_addr.ip()), &req.encode());
    let answer = l.net.node(rd).poll_transmit().expect("an answer");
    let m = corral_proto::wire::Message::parse(&answer.payload).unwrap();
    assert_eq!(m.code, Code::UNAUTHORIZED);
    assert!(m.options.get(OptionNumber::ECHO).is_some(), "a challenge (RFC 9175)");
    assert!(l.rd().directory().is_empty(), "nothing kept for a source that has not proved its address");
}

#[test]
fn simple_registration_takes_the_senders_well_known_core() {
    let mut l = lab(Limits::default(), 1);
    let r = l.ask(0, Request::new(Code::POST).with_path(".well-known/rd").with_query("ep=simple").with_query("lt=600"));
    assert_eq!(r.code, Code::CHANGED, "{}", r.payload_text());
    let res = l.lookup(0, "res", "ep=simple");
    assert!(res.contains("<coap://10.0.1.1:5683/temp>;rt=\"temperature\";obs"), "{res}");
    assert!(res.contains("<coap://10.0.1.1:5683/hum>"), "{res}");
    let base = l.ask(
        0,
        Request::new(Code::POST).with_path(".well-known/rd").with_query("ep=x").with_query("base=coap://192.0.2.9"),
    );
    assert_eq!(base.code, Code::BAD_REQUEST, "the fetch goes to the sender, never to a base it names");
}

#[test]
fn an_observer_of_a_lookup_hears_of_registrations_that_come_and_go() {
    let mut l = lab(Limits::default(), 2);
    let (node, h) = l.clients[1];
    let (now, dst) = (l.net.now, l.net.addr(l.rd));
    let obs = Request::get("rd-lookup/res").with_query("rt=temperature").with_option(OptionNumber::OBSERVE, &[]);
    l.net
        .node(node)
        .with_service(now, h, |_: &mut Client, cx| cx.request(dst, obs, SendParams::default()))
        .unwrap()
        .unwrap();
    l.net.run_for(Duration::from_secs(5));
    let loc = location(&l.register(0, "ep=t1&lt=60", "</t>;rt=temperature"));
    l.register(0, "ep=h1", "</h>;rt=humidity");
    l.ask(0, Request::new(Code::DELETE).with_path(&loc));
    let seen: Vec<String> = l
        .net
        .node(node)
        .service::<Client>(h)
        .unwrap()
        .responses
        .iter()
        .map(|(_, r)| r.payload_text().into_owned())
        .collect();
    assert_eq!(seen.first().map(String::as_str), Some(""), "{seen:?}");
    assert!(seen.iter().any(|s| s.contains("/t>")), "told of the registration: {seen:?}");
    assert_eq!(seen.last().map(String::as_str), Some(""), "told of the removal: {seen:?}");
}

/// A node's runner doing the directory's writes at once on `store` (shared, so that it outlives the node).
fn runner(store: &Arc<Mutex<MemStore>>) -> Box<corral_proto::InlineRunner> {
    let store = store.clone();
    Box::new(corral_proto::InlineRunner::new(move |op| corral_rd::store::run_op(&mut *store.lock().unwrap(), op)))
}

#[test]
fn a_restarted_directory_keeps_what_it_stored_and_drops_what_expired_meanwhile() {
    let store = Arc::new(Mutex::new(MemStore::default()));
    let (mut net, rd_addr) = (Net::default(), "10.0.0.1:5683".parse::<SocketAddr>().unwrap());
    let (svc, _) = RdService::durable(Limits::default(), Vec::new(), 1_000_000);
    let mut n = Node::new(Endpoint::new(EndpointConfig::with_seed(SEED)));
    n.mount("", svc);
    n.set_effect_runner(runner(&store));
    let rd = net.add(rd_addr, n);
    let mut c = Node::new(Endpoint::new(EndpointConfig::with_seed(SEED + 1)));
    let h = c.mount("", Client::default());
    let client = net.add("10.0.1.1:5683".parse().unwrap(), c);
    for (ep, lt) in [("long", "3600"), ("short", "20")] {
        let req = Request::new(Code::POST)
            .with_path("rd")
            .with_query(&format!("ep={ep}"))
            .with_query(&format!("lt={lt}"))
            .with_payload(b"</s>;rt=t".to_vec());
        let now = net.now;
        net.node(client)
            .with_service(now, h, |_: &mut Client, cx| cx.request(rd_addr, req, SendParams::default()))
            .unwrap()
            .unwrap();
        net.run_for(Duration::from_secs(1));
    }
    let codes: Vec<Code> =
        net.node(client).service::<Client>(h).unwrap().responses.iter().map(|(_, r)| r.code).collect();
    assert_eq!(codes, [Code::CREATED, Code::CREATED]);
    assert!(net.node(rd).poll_timeout().is_some(), "the expiry timer is armed");
    drop(net);
    // The directory starts again 60 s (wall clock) later: its clock's zero is 60 s further on.
    let (rows, bad) = store.lock().unwrap().load().unwrap();
    assert_eq!((rows.len(), bad), (2, 0), "both were written before they were acknowledged");
    let (svc, skipped) = RdService::durable(Limits::default(), rows, 1_000_000 + 60_000);
    assert_eq!(skipped, 0);
    let mut net = Net::default();
    let mut n = Node::new(Endpoint::new(EndpointConfig::with_seed(SEED)));
    assert_eq!(svc.directory().len(), 2);
    let short = svc.directory().iter().find(|r| r.ep == "short").unwrap();
    assert_eq!(short.expires, Instant::ZERO, "its end (21 s after the old zero) is before the new zero");
    let h2 = n.mount("", svc);
    n.set_effect_runner(runner(&store));
    let rd = net.add(rd_addr, n);
    net.run_for(Duration::from_secs(1));
    let svc = net.node(rd).service::<RdService>(h2).unwrap();
    let eps: Vec<&str> = svc.directory().iter().map(|r| r.ep.as_str()).collect();
    assert_eq!(eps, ["long"], "the short registration ended while the directory was down");
    let stored: Vec<String> = store.lock().unwrap().rows.iter().map(|r| r.reg.ep.clone()).collect();
    assert_eq!(stored, ["long"], "and its row is removed");
}

/// Issue 41 item 8: a name held for 136 years. `lt=4294967295` is refused (4.00 naming the longest
/// lifetime this directory keeps); `lt` at the cap is kept; a stored registration from before the cap
/// comes back from a restart cut to it.
#[test]
fn lifetimes_are_capped_and_a_longer_one_is_refused_with_the_maximum() {
    let mut l = lab(Limits::default(), 1);
    let r = l.register(0, "ep=dev-127.0.0.2-5683&lt=4294967295", "</s/t>;rt=temperature");
    assert_eq!(r.code, Code::BAD_REQUEST, "{}", r.payload_text());
    assert!(r.payload_text().contains("at most 90000 seconds"), "{}", r.payload_text());
    assert!(l.rd().directory().is_empty());
    assert_eq!(l.register(0, "ep=dev-127.0.0.2-5683&lt=90000", "</s/t>").code, Code::CREATED);
    let loc = l.rd().directory().iter().next().unwrap().location();
    let r = l.ask(0, Request::new(Code::POST).with_path(&loc).with_query("lt=90001"));
    assert_eq!(r.code, Code::BAD_REQUEST, "an update asks no more: {}", r.payload_text());

    // A registration stored by a directory without the cap.
    let mut stored = l.rd().directory().iter().next().unwrap().clone();
    stored.lt = u32::MAX;
    stored.expires = Instant::ZERO + Duration::from_secs(u64::from(u32::MAX));
    let mut dir = Directory::new(Limits::default());
    assert!(dir.restore(stored));
    let back = dir.iter().next().unwrap();
    assert_eq!(back.lt, DEFAULT_LIFETIME);
    assert_eq!(back.expires, Instant::ZERO + Duration::from_secs(u64::from(DEFAULT_LIFETIME)));
}

/// Registers `ep` from `ip` straight into `dir` (the bounds live there; the CoAP interface is tested
/// above).
fn register_at(dir: &mut Directory, ip: IpAddr, ep: &str) -> Result<Registered, RdError> {
    let links = dir.parse_links("</s/t>;rt=temperature;if=sensor").unwrap();
    let params = Params { ep: Some(ep.to_string()), lt: Some(DEFAULT_LIFETIME), ..Params::default() };
    dir.register(Instant::ZERO, &Requester::plain(ip), format!("coap://{ip}:5683"), params, links, ep.to_string())
}

/// Issue 41 item 8: 10,880 registrations from 170 addresses (64 each, all an address could hold) filled a
/// directory of 10,000, and every registrant after them got 5.03 for the flood's lifetime. An address now
/// holds 16 and a network 1,024: from one /24 the flood keeps 1,024, from 170 networks 2,720, and a
/// device that registers afterwards is registered either way.
#[test]
fn a_flood_from_170_addresses_leaves_room_for_the_devices_that_register_after_it() {
    for (networks, kept_by_flood) in [(1u32, 1_024), (170, 2_720)] {
        let mut dir = Directory::new(Limits::default());
        let mut kept = 0;
        let ip = |a: u32| match networks {
            1 => IpAddr::V4(Ipv4Addr::from(0x0a4d_0001 + a)),
            _ => IpAddr::V4(Ipv4Addr::from(0x0a00_0001 + (a << 8))),
        };
        for a in 0..170u32 {
            let ip = ip(a);
            for i in 0..64 {
                kept += usize::from(register_at(&mut dir, ip, &format!("squat-{a}-{i}")).is_ok());
            }
        }
        assert_eq!(kept, kept_by_flood, "{networks} network(s)");
        let device = register_at(&mut dir, "192.0.2.7".parse().unwrap(), "dev-192.0.2.7-5683");
        assert!(matches!(device, Ok(Registered::Created(_))), "{networks} network(s): {device:?}");
        let more = register_at(&mut dir, ip(0), "squat-again");
        assert!(matches!(more, Err(RdError::SourceFull)), "{more:?}");
        let elsewhere = register_at(&mut dir, ip(169), "squat-again");
        let want = if networks == 1 { RdError::NetworkFull } else { RdError::SourceFull };
        assert_eq!(elsewhere.unwrap_err(), want);
    }
}

/// The memory bound: registrations of the largest kind fill [`Limits::memory`] from many addresses, each
/// within its 1/256; a source past its share gets 4.29, a registration larger than a share 4.13.
#[test]
fn registrations_are_bounded_by_the_memory_they_take_in_all_and_per_address() {
    let limits = Limits::default();
    let mut dir = Directory::new(limits);
    let link = |i: usize| format!("</sensors/s{i:03}>;rt=\"temperature\";if=\"core.s\";ct=0;obs;title=\"sensor {i}\"");
    let text: Vec<String> = (0..160).map(link).collect();
    let links = dir.parse_links(&text.join(",")).unwrap();
    let ip = |n: u32| IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + (n << 8) + 1));
    let mut created = 0;
    let mut refused = None;
    for n in 0..10_000u32 {
        let params = Params { ep: Some(format!("big-{n}")), ..Params::default() };
        match dir.register(Instant::ZERO, &Requester::plain(ip(n)), String::new(), params, links.clone(), n.to_string())
        {
            Ok(_) => created += 1,
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    assert_eq!(refused, Some(RdError::Full), "after {created}");
    let counted: usize = dir.iter().map(footprint).sum();
    assert!(counted <= limits.memory && counted > limits.memory - limits.memory / SOURCE_SHARE, "{counted}");
    // A registration larger than an address's share is too large; a second one past it, its share.
    let mut small = Directory::new(limits);
    let params = |ep: &str| Params { ep: Some(ep.to_string()), ..Params::default() };
    let who = Requester::plain(ip(1));
    let flags: String = (0..2_000).map(|i| format!(";f{i}")).collect();
    let huge = small.parse_links(&format!("</x>{flags}")).unwrap();
    let e = small.register(Instant::ZERO, &who, String::new(), params("huge"), huge, "h".into()).unwrap_err();
    assert!(matches!(&e, RdError::TooLarge(m) if m.contains("one address may hold")), "{e:?}");
    for i in 0.. {
        if let Err(e) =
            small.register(Instant::ZERO, &who, String::new(), params(&format!("n{i}")), links.clone(), i.to_string())
        {
            assert_eq!(e, RdError::SourceFull, "after {i}");
            assert!(i < 16, "the memory share ran out before the count: {i}");
            break;
        }
    }
}

// The directory's writes as effects (`corral_rd::store`), driven by hand: the node has no runner, so each
// write waits in it until the test completes it — late, out of order, or failed. A change is answered
// only when its write is done; a failed write undoes it and answers 5.00; a change of a registration
// whose write is in flight is answered 5.03 with Max-Age 1 and changes nothing.

/// A directory kept in a store, with two clients, and no runner for its writes.
fn durable_lab() -> Lab {
    let (svc, skipped) = RdService::durable(Limits::default(), Vec::new(), 1_000_000);
    assert_eq!(skipped, 0);
    lab_of(svc, 2)
}

impl Lab {
    /// Sends `req` from client `c` and runs the net for a second (the Echo round trip included).
    fn send(&mut self, c: usize, req: Request) -> RequestId {
        self.send_for(c, req, Duration::from_secs(1))
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

    fn names(&mut self) -> Vec<String> {
        let mut names: Vec<String> = self.rd().directory().iter().map(|r| r.ep.clone()).collect();
        names.sort();
        names
    }
}

/// A registration of `ep` with one link.
fn register_req(ep: &str) -> Request {
    Request::new(Code::POST).with_path("rd").with_query(&format!("ep={ep}")).with_payload(b"</t>;rt=t".to_vec())
}

#[test]
fn a_registration_is_answered_when_its_write_is_done_in_whatever_order_writes_complete() {
    let mut l = durable_lab();
    let a = l.send(0, register_req("a"));
    let b = l.send(1, register_req("b"));
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
    let mut l = durable_lab();
    let a = l.send(0, register_req("a"));
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
    let b = l.send(1, register_req("b"));
    let (w, _) = l.writes().remove(0);
    l.complete(w, Err(StoreError("disk full".into())));
    assert_eq!(l.answer(1, b).unwrap().code, Code::INTERNAL_SERVER_ERROR);
    assert_eq!(l.names(), ["a"]);
    assert_eq!(l.rd().stats().store_failures, 3);
    assert_eq!(l.rd().writes_in_flight(), 0);
}

#[test]
fn a_change_of_a_registration_whose_write_is_in_flight_is_answered_5_03_and_changes_nothing() {
    let mut l = durable_lab();
    let first = l.send(0, register_req("a"));
    // The same name from another client while the first write is in flight.
    let second = l.send(1, register_req("a"));
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
    let mut l = durable_lab();
    for (c, ep) in [(0, "a"), (1, "b")] {
        let req = register_req(ep).with_query("lt=60");
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
