//! Virtual devices on the in-memory net: observable sensors notify when their value moves, and stay silent
//! (no timer) when nobody observes.

use corral_group::device::{mount_device, sample, DeviceConfig, Quantity};
use corral_proto::testing::Net;
use corral_proto::wire::{Code, OptionNumber};
use corral_proto::{
    Context, Duration, Endpoint, EndpointConfig, IncomingRequest, Instant, Node, Outcome, Request, RequestId, Response,
    SendParams, Service,
};
use std::net::SocketAddr;

#[derive(Default)]
struct Client {
    responses: Vec<(Instant, RequestId, Response)>,
}

impl Service for Client {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        cx.respond(req.id, Response::error(Code::NOT_FOUND, "client"));
    }
    fn handle_response(&mut self, cx: &mut Context<'_>, id: RequestId, outcome: Outcome) {
        if let Outcome::Response { response, .. } = outcome {
            self.responses.push((cx.now(), id, response));
        }
    }
}

const SEED: u64 = 77;

fn setup(observable: bool) -> (Net, usize, usize, corral_proto::ServiceHandle) {
    let mut net = Net::default();
    let mut d = Node::new(Endpoint::new(EndpointConfig::with_seed(1)));
    mount_device(&mut d, DeviceConfig { seed: Some(SEED), observable, ..DeviceConfig::default() });
    let dev = net.add("10.0.0.2:5683".parse::<SocketAddr>().unwrap(), d);
    let mut c = Node::new(Endpoint::new(EndpointConfig::with_seed(2)));
    let svc = c.mount("", Client::default());
    let client = net.add("10.0.0.1:5683".parse::<SocketAddr>().unwrap(), c);
    (net, dev, client, svc)
}

#[test]
fn observable_sensor_notifies_when_its_value_moves() {
    let (mut net, dev, client, svc) = setup(true);
    let (now, dst) = (net.now, net.addr(dev));
    let req = Request::get("s/l").with_option(OptionNumber::OBSERVE, &[]);
    net.node(client).with_service(now, svc, |_: &mut Client, cx| cx.request(dst, req, SendParams::default()));
    net.run_for(Duration::from_secs(3600));
    assert_eq!(net.node(dev).endpoint().observer_count("/s/l"), 1);
    let got = net.node(client).service::<Client>(svc).unwrap().responses.clone();
    assert!(got.len() > 10, "an hour of light readings moves more than ten times: {}", got.len());
    let values: Vec<f64> = got.iter().map(|(_, _, r)| r.payload_text().parse().unwrap()).collect();
    for w in values.windows(2) {
        assert!((w[1] - w[0]).abs() >= 10.0, "notified only on a move of a step (10 lx): {w:?}");
    }
    for (t, _, r) in &got {
        // Each notification carries the value the sensor had when it was sent (one net latency earlier).
        let sent = Instant::from_micros(t.as_micros() - net.latency.as_micros());
        assert_eq!(r.payload_text().parse::<f64>().unwrap(), sample(SEED, Quantity::Light, sent));
    }
    let seqs: Vec<u32> = got.iter().map(|(_, _, r)| r.options.observe().expect("Observe option")).collect();
    assert!(seqs.windows(2).all(|w| w[1] > w[0]), "{seqs:?}");
}

#[test]
fn unobserved_sensors_arm_no_timer() {
    for observable in [false, true] {
        let (mut net, dev, client, svc) = setup(observable);
        let (now, dst) = (net.now, net.addr(dev));
        net.node(client)
            .with_service(now, svc, |_: &mut Client, cx| cx.request(dst, Request::get("s/t"), SendParams::default()));
        net.run_for(Duration::from_secs(600));
        assert_eq!(net.node(client).service::<Client>(svc).unwrap().responses.len(), 1);
        assert_eq!(net.node(dev).poll_timeout(), None, "observable={observable}: an idle device sleeps");
        let wkc = net.node(dev).links();
        let t = wkc.iter().find(|l| l.path == "s/t").unwrap();
        assert_eq!(t.attributes.iter().any(|(n, _)| n == "obs"), observable);
    }
}
