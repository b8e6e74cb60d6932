//! Seed 002's AGREES must fail without their cause, in the scenario's `[[sensitivity]]` variant that
//! removes it (quick runs, seed 1). The latency run's claims are not in this list: without loss and CPU
//! time, latency and radio energy are the airtime of each scheme's frames — byte arithmetic, reported as
//! CONSEQUENCE (`findings::ARITHMETIC`), which this file checks too.

use crate::causes;

use causes::cause_matters;
use corral_lab::findings::Kind;

/// Fig. 9's drop past 80 requests/s comes from channel access (CSMA/CA and airtime, 6.09 ms a request in
/// the paper) meeting the request interval; with every radio timing ten times as fast it must go.
#[test]
fn workload_drop_past_80_requests_needs_the_channel_access_time() {
    let r = causes::run("seed002-workload", &[]);
    cause_matters("seed002-workload", &r, "server_rate_drops_past_80", "channel access ten times as fast");
}

#[test]
fn loss_free_latency_and_energy_claims_are_reported_as_consequences() {
    let (found, _) = causes::run(
        "seed002-latency",
        &[("quick_sweep = { payload = [10, 50, 300, 1200] }", "quick_sweep = { payload = [50] }")],
    );
    for check in ["coap_faster_than_http_tcp", "persistent_faster_than_tcp", "coap_less_energy"] {
        let f = found.iter().find(|f| f.check == check).unwrap_or_else(|| panic!("no finding {check}"));
        println!("seed002-latency seed 1: {check} {} — {}", f.status(), f.corral());
        assert_eq!(f.kind, Kind::Consequence, "{check}: {}", f.note);
    }
}
