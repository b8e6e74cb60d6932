//! Seed 001's multiparty scenario (`seed001-multiparty`): the quick run end to end, deterministic seeds,
//! and the shape of what each deployment measures.

use corral_lab::multiparty::MpStats;
use corral_lab::scenario::{builtin, AxisValue, Point, Scenario};
use std::sync::Arc;

fn run(deployment: &str, requests: u32, seed: u64) -> (corral_lab::run::PointResult, Arc<MpStats>) {
    let s = Scenario::parse(builtin("seed001-multiparty").expect("built in")).expect("parses");
    let p = Point { index: 0, values: vec![("deployment".into(), AxisValue::Text(deployment.into()))] };
    let mut setup = s.setup(&p, true).expect("resolves");
    setup.multiparty.as_mut().unwrap().requests = requests;
    let r = corral_lab::run::run_point(&setup, 0, seed).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let m = r.multiparty.clone().expect("multiparty stats");
    (r, m)
}

#[test]
fn print_quick_numbers() {
    for d in ["oscore", "oscore-proxy", "det-oscore-proxy", "ndn"] {
        let t = std::time::Instant::now();
        let (_, m) = run(d, 60, 1);
        let succ: Vec<String> = (1..=9).map(|c| format!("{:.0}", m.success(c))).collect();
        println!(
            "{d}: {:?} success {} rate {:.2} sub-s median {:.1} ms aead {:?} sig {:?} hmac {:?} req {:?} resp {:?}",
            t.elapsed(),
            succ.join("/"),
            m.server_rate(),
            m.subsecond_median(&[1, 5, 9]),
            m.per_success(|o| o.aead),
            m.per_success(|o| o.signatures),
            m.per_success(|o| o.hmac),
            m.per_thousand(&m.link_requests).iter().map(|x| x.round()).collect::<Vec<_>>(),
            m.per_thousand(&m.link_responses).iter().map(|x| x.round()).collect::<Vec<_>>(),
        );
    }
}

#[test]
#[ignore]
fn print_full_numbers() {
    for d in ["oscore", "oscore-proxy", "det-oscore-proxy", "ndn"] {
        let t = std::time::Instant::now();
        let (r, m) = run(d, 1000, 1);
        let succ: Vec<String> = (1..=9).map(|c| format!("{:.1}", m.success(c))).collect();
        println!(
            "{d}: {:?} success {} rate {:.2} sub-s median {:.1} ms aead {:?} sig {:?} hmac {:?} req {:?} resp {:?} drops {} {} {}",
            t.elapsed(),
            succ.join("/"),
            m.server_rate(),
            m.subsecond_median(&[1, 5, 9]),
            m.per_success(|o| o.aead),
            m.per_success(|o| o.signatures),
            m.per_success(|o| o.hmac),
            m.per_thousand(&m.link_requests).iter().map(|x| x.round()).collect::<Vec<_>>(),
            m.per_thousand(&m.link_responses).iter().map(|x| x.round()).collect::<Vec<_>>(),
            r.point.drops_collision, r.point.drops_mac, r.point.drops_cpu,
        );
    }
}
