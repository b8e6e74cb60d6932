//! Virtual devices on the in-memory net: observable sensors notify when their value moves by their step,
//! and stay silent (no timer) when nobody observes.

use corral_group::device::{mount_device, sample, DeviceConfig, NotifySteps, Quantity};
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
    setup_with(DeviceConfig { observable, ..DeviceConfig::default() })
}

fn setup_with(config: DeviceConfig) -> (Net, usize, usize, corral_proto::ServiceHandle) {
    let mut net = Net::default();
    let mut d = Node::new(Endpoint::new(EndpointConfig::with_seed(1)));
    mount_device(&mut d, DeviceConfig { seed: Some(SEED), ..config });
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

/// The values an observer of `path` on a device with `config` receives in `secs` seconds.
fn observed_values(config: DeviceConfig, path: &str, secs: u64) -> Vec<f64> {
    let (mut net, dev, client, svc) = setup_with(config);
    let (now, dst) = (net.now, net.addr(dev));
    let req = Request::get(path).with_option(OptionNumber::OBSERVE, &[]);
    net.node(client).with_service(now, svc, |_: &mut Client, cx| cx.request(dst, req, SendParams::default()));
    net.run_for(Duration::from_secs(secs));
    let got = &net.node(client).service::<Client>(svc).unwrap().responses;
    got.iter().map(|(_, _, r)| r.payload_text().parse().unwrap()).collect()
}

#[test]
fn observable_sensor_notifies_at_its_configured_step() {
    let fine = NotifySteps::default().with(Quantity::Temperature, 0.01);
    assert_eq!(fine.of(Quantity::Humidity), NotifySteps::default().of(Quantity::Humidity), "one step set");
    let coarse = observed_values(DeviceConfig { observable: true, ..DeviceConfig::default() }, "s/t", 600);
    let every =
        observed_values(DeviceConfig { observable: true, notify_steps: fine, ..DeviceConfig::default() }, "s/t", 600);
    // At the sensors' resolution every reading that changed is a notification: most of the 600 seconds'
    // (the noise moves the reading by up to ±0.05 °C a second), where 0.2 °C waits for the slow cycle.
    assert!(every.len() > 400, "step 0.01 °C: {} notifications in 600 s", every.len());
    assert!(coarse.len() < 20, "step 0.2 °C: {} notifications in 600 s", coarse.len());
    assert!(every.windows(2).all(|w| w[0] != w[1]), "only readings that changed are sent");
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
