//! A device's registrant on the in-memory net: it registers its links, refreshes before the lifetime
//! ends, registers again when the directory has forgotten it, and removes itself when it leaves.

use corral_proto::testing::Net;
use corral_proto::{Duration, Endpoint, EndpointConfig, Node};
use corral_rd::{Limits, RdService, Registrant, RegistrantState};
use std::net::SocketAddr;

const SEED: u64 = 4242;

#[test]
fn a_device_stays_registered_across_refreshes_and_a_directory_that_forgot_it_and_leaves() {
    println!("seed {SEED}");
    let mut net = Net::default();
    let rd_addr: SocketAddr = "10.0.0.1:5683".parse().unwrap();
    let mut n = Node::new(Endpoint::new(EndpointConfig::with_seed(SEED)));
    let rd_h = n.mount("", RdService::new(Limits::default()));
    let rd = net.add(rd_addr, n);
    let mut d = Node::new(Endpoint::new(EndpointConfig::with_seed(SEED + 1)));
    let reg_h = d.mount("_rd", Registrant::new(rd_addr, "dev1", Some("lab"), 100, "</t>;rt=temperature".into()));
    let dev = net.add("10.0.1.7:5683".parse().unwrap(), d);
    net.run_for(Duration::from_secs(5));
    let eps = |net: &mut Net| -> Vec<String> {
        net.node(rd)
            .service::<RdService>(rd_h)
            .unwrap()
            .directory()
            .iter()
            .map(|r| format!("{}@{}", r.ep, r.base))
            .collect()
    };
    assert_eq!(eps(&mut net), ["dev1@coap://10.0.1.7:5683"]);
    // Five lifetimes later it is still there: refreshed at 90 s each time.
    net.run_for(Duration::from_secs(500));
    assert_eq!(eps(&mut net), ["dev1@coap://10.0.1.7:5683"]);
    let r = net.node(dev).service::<Registrant>(reg_h).unwrap();
    assert_eq!((r.registrations, r.refreshes), (1, 5));
    // The directory restarts without its store: the next refresh gets 4.04 and the device registers again.
    let now = net.now;
    net.node(rd).with_service(now, rd_h, |svc: &mut RdService, _cx| *svc = RdService::new(Limits::default()));
    assert!(eps(&mut net).is_empty());
    net.run_for(Duration::from_secs(100));
    assert_eq!(eps(&mut net), ["dev1@coap://10.0.1.7:5683"]);
    assert_eq!(net.node(dev).service::<Registrant>(reg_h).unwrap().registrations, 2);
    // Leaving removes it.
    let now = net.now;
    net.node(dev).with_service(now, reg_h, |r: &mut Registrant, cx| r.leave(cx));
    net.run_for(Duration::from_secs(5));
    assert!(eps(&mut net).is_empty());
    assert_eq!(net.node(dev).service::<Registrant>(reg_h).unwrap().state(), &RegistrantState::Done);
}

#[test]
fn a_directory_that_does_not_answer_is_retried_with_a_back_off() {
    let mut net = Net::default();
    let mut d = Node::new(Endpoint::new(EndpointConfig::with_seed(SEED)));
    let nobody: SocketAddr = "10.0.0.99:5683".parse().unwrap();
    let h = d.mount("_rd", Registrant::new(nobody, "dev", None, 600, "</x>".into()));
    let dev = net.add("10.0.1.1:5683".parse().unwrap(), d);
    net.run_for(Duration::from_secs(3600));
    // CON gives up after ~93 s; then 5, 10, 20, … up to 300 s between attempts: about 14 in an hour,
    // not one per timeout.
    let sent = net.sent_by(net.addr(dev)).len();
    let r = net.node(dev).service::<Registrant>(h).unwrap();
    assert_eq!(r.registrations, 0);
    assert!(sent < 5 * 20, "{sent} datagrams in an hour");
    assert!(matches!(r.state(), RegistrantState::Waiting { .. } | RegistrantState::Asking(..)));
}
