//! Calibration probe: runs one setup and prints the response times.
use corral_lab::run::run_point;
use corral_lab::scenario::Scenario;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let text = std::fs::read_to_string(&args[1]).unwrap();
    let s = Scenario::parse(&text).unwrap();
    for p in s.points(args.get(2).is_some_and(|a| a == "quick")) {
        let setup = s.setup(&p, args.get(2).is_some_and(|a| a == "quick")).unwrap();
        let t = std::time::Instant::now();
        let r = run_point(&setup, p.index, 1).unwrap();
        let rts: Vec<f64> = r.queries.iter().map(|q| q.response_ms).collect();
        let mean = rts.iter().sum::<f64>() / rts.len() as f64;
        let rep: usize = r.queries.iter().map(|q| q.replies).sum();
        let mem: usize = r.queries.iter().map(|q| q.members).sum();
        let ok = r.queries.iter().filter(|q| q.success()).count();
        let retx: u64 = r.queries.iter().map(|q| q.coap_retx).sum();
        println!("{:40} mean {:8.1} ms  min {:8.1} max {:8.1}  member {:5.1}% group {:5.1}% retx/q {:.2} create {:.0}ms drops i/c/m/cpu {}/{}/{}/{} ({:.1}s wall)", p.label(), mean,
            rts.iter().cloned().fold(f64::INFINITY, f64::min), rts.iter().cloned().fold(0.0, f64::max),
            100.0*rep as f64/mem as f64, 100.0*ok as f64/r.queries.len() as f64, retx as f64 / r.queries.len() as f64, r.point.create_ms, r.point.drops_interference, r.point.drops_collision, r.point.drops_mac, r.point.drops_cpu, t.elapsed().as_secs_f64());
    }
}
