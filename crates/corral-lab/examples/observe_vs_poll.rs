//! An open question beyond seed 000: a client that wants to follow a group's average — poll the entity, or
//! observe it? The Entity Manager observes each member once and notifies its observers with the combined
//! value whenever a member's reading moves by a step (0.2 °C); polling asks every member each time.
//!
//! For each group size this runs the seed-000 testbed (Table 7 layout, `testbed` calibration, unicast,
//! delay 100 ms) twice with the real EM and devices: once polling `GET /em/group?eo=avg` to measure the
//! radio frames one query costs, once with one Observe registration for an hour of virtual time, counting
//! the frames and comparing what the client knows with the members' true average every second. Polling's
//! error is that of a value read every P seconds (its response time, 0.6-2.2 s here, is left out, in
//! polling's favour).
//!
//! ```text
//! cargo run --release -p corral-lab --example observe_vs_poll [-- SEED]
//! ```
use corral_group::device::{sample, Quantity};
use corral_lab::client::LabClient;
use corral_lab::run::{point_seed, run_point, run_point_sim};
use corral_lab::scenario::{builtin, Scenario};
use corral_proto::wire::{ContentFormat, OptionNumber};
use corral_proto::{Duration, Instant, Request};
use corral_sim::{NodeId, Sim};

const HOUR_S: u64 = 3600;
const POLL_PERIODS_S: [u64; 4] = [10, 30, 60, 300];

fn frames(sim: &Sim) -> u64 {
    (0..sim.len()).map(|i| sim.counters(NodeId(i as u32)).frames_sent).sum()
}

/// Mean and maximum of |x|.
fn summary(errors: &[f64]) -> (f64, f64) {
    let mean = errors.iter().map(|e| e.abs()).sum::<f64>() / errors.len().max(1) as f64;
    (mean, errors.iter().fold(0.0f64, |m, e| m.max(e.abs())))
}

fn main() {
    let seed: u64 = std::env::args().nth(1).map_or(1, |s| s.parse().expect("SEED is a number"));
    let scenario = Scenario::parse(builtin("fig08-group-size").expect("built in")).expect("scenario");
    println!("seed {seed}; one hour of virtual time per group; error = |client's value − members' true average|, °C\n");
    println!(
        "{:>7}  {:>12}  {:>22}  {:>14}  {}",
        "members",
        "frames/query",
        "observe: frames/h (n)",
        "observe error",
        POLL_PERIODS_S.map(|p| format!("poll {p:>3} s: frames/h, error")).join("  ")
    );
    for group in [5usize, 10, 20] {
        let label = format!("group={group} delay=100");
        let point = scenario.points(false).into_iter().find(|p| p.label() == label).expect("point");
        let mut setup = scenario.setup(&point, false).expect("setup");
        let pseed = point_seed(seed, &point);

        // Polling: the frames of one query, averaged over the scenario's repetitions.
        let polled = run_point(&setup, point.index, pseed).expect("run");
        let per_query =
            polled.queries.iter().map(|q| q.frames as f64).sum::<f64>() / polled.queries.len().max(1) as f64;

        // Observing: create the entity, register once, follow it for an hour.
        setup.repetitions = 0;
        setup.observable_devices = true;
        let mut t = run_point_sim(&setup, point.index, pseed, false).expect("run");
        assert!(t.result.point.created, "group {group}: the entity was not created");
        let (host, client) = (NodeId(t.network.host as u32), t.client);
        let em = t.sim.addr(NodeId(t.network.gateways[0] as u32));
        let members: Vec<u64> = t
            .network
            .members
            .iter()
            .flatten()
            .map(|&m| t.sim.node(NodeId(m as u32)).expect("attached").endpoint().config().seed)
            .collect();
        let truth = |at: Instant| {
            members.iter().map(|&s| sample(s, Quantity::Temperature, at)).sum::<f64>() / members.len() as f64
        };
        let req = Request::get("em/group")
            .with_query("eo=avg")
            .with_accept(ContentFormat::JSON)
            .with_option(OptionNumber::OBSERVE, &[]);
        let before = frames(&t.sim);
        let start = t.sim.now();
        assert!(t.sim.with_service(host, client, |c: &mut LabClient, cx| c.observe(cx, em, req)).unwrap_or(false));
        let mut observe_err = Vec::new();
        let mut poll_err: Vec<Vec<f64>> = vec![Vec::new(); POLL_PERIODS_S.len()];
        for s in 1..=HOUR_S {
            t.sim.run_until(start + Duration::from_secs(s));
            let now = t.sim.now();
            let real = truth(now);
            let known = t.sim.service::<LabClient>(host, client).and_then(|c| {
                c.notifications()
                    .iter()
                    .rev()
                    .find_map(|(_, r)| serde_json::from_slice::<serde_json::Value>(&r.payload).ok()?.get("v")?.as_f64())
            });
            if let Some(k) = known {
                observe_err.push(k - real);
            }
            for (i, p) in POLL_PERIODS_S.iter().enumerate() {
                let polled_at = start + Duration::from_secs((s / p) * p);
                poll_err[i].push(truth(polled_at) - real);
            }
        }
        let observe_frames = frames(&t.sim) - before;
        let n = t.sim.service::<LabClient>(host, client).map_or(0, |c| c.notifications().len());
        let (om, ox) = summary(&observe_err);
        let polls: Vec<String> = POLL_PERIODS_S
            .iter()
            .zip(&poll_err)
            .map(|(p, e)| {
                let (m, x) = summary(e);
                format!("{:>7.0}, {m:.3} (max {x:.2})", per_query * (HOUR_S / p) as f64)
            })
            .collect();
        println!(
            "{group:>7}  {per_query:>12.1}  {:>16} ({n:>3})  {om:.3} (max {ox:.2})  {}",
            observe_frames,
            polls.join("  ")
        );
    }
}
