//! Seed 000's claims about an effect must fail when the effect's cause is removed: each AGREES of fig08,
//! fig10 and fig14 is run (quick sweep, 20 queries a point, seed 1) with its cause present — it holds —
//! and in the scenario's `[[sensitivity]]` variant that removes the cause — it must not. A claim that
//! survives its cause's removal is arithmetic, not evidence (it becomes a CONSEQUENCE or is rescoped).

use crate::causes;

use causes::{cause_matters, with_and_without, Run};

/// The scenario's quick run with `repetitions` queries a point, and its sensitivity variants.
fn run(name: &str, repetitions: u32) -> Run {
    let quick = format!("quick_repetitions = {repetitions}\n");
    causes::run(name, &[("quick_repetitions = 3\n", &quick)])
}

#[test]
fn fig10_interference_claims_fail_with_the_wifi_switched_off() {
    let r = run("fig10-interference", 50);
    cause_matters("fig10-interference", &r, "unicast_member_max_load", "Wi-Fi switched off");
    // Since the Entity Manager answers with what it has (issue 46 item 9), a use whose members did not all
    // answer in time is a 2.05 whose values count as the members' replies (it was a 5.04 that counted
    // none), so multicast member reliability loses less under interference: at G=30 the seed-1 quick run
    // loses 0.933 points where this claim asks at least 1, and the claim does not hold with its cause
    // present, nor do the other two claims that ask for the same loss (multicast_falls_with_load,
    // multicast_rt_flat). Without the cause each must still fail; with it, the verdict is what the run says.
    for check in ["unicast_group_max_load", "multicast_falls_with_load", "multicast_rt_flat"] {
        let (with, without) = with_and_without("fig10-interference", &r, check, "Wi-Fi switched off");
        assert!(!without.holds(), "{check} still holds without the Wi-Fi: {}", without.corral());
        println!("{check} with the Wi-Fi on: {} — {}", with.status(), with.corral());
    }
}

/// The claim that ACK_TIMEOUT 1 s beats 2 s is about interference; without it the two must not differ.
/// (They did, by a deterministic 35 ms, while the simulated client paid a mote's CPU for the EM's empty
/// ACK — corral-sim's `host_cpu` test. With the Wi-Fi on, whether 1 s wins is the full run's verdict.)
#[test]
fn fig14_shorter_ack_timeout_does_not_win_without_interference() {
    let r = run("fig14-ack-timeout", 20);
    let (_, off) = with_and_without("fig14-ack-timeout", &r, "ack_timeout_1s_beats_2s", "Wi-Fi switched off");
    assert!(!off.holds(), "fig14 (seed 1), Wi-Fi off: 1 s still beats 2 s: {}", off.corral());
}

#[test]
fn fig08_best_delay_needs_the_gateways_cpu_queue() {
    // The delay helps because replies that arrive together overflow the gateway's CPU queue (Fig. 7's 3 s);
    // with no CPU cost the best delay is no delay at all.
    let r = run("fig08-group-size", 10);
    cause_matters("fig08-group-size", &r, "best_delay_eq2", "no CPU cost");
}

/// multicast_group_15mbps DISAGREES because Table 7's dense layout puts 30 members behind many SMRF
/// forwarders in one collision domain (docs/lab.md, Known differences). With four forwarders (layers of 26
/// and 4) the 30-member groups must reach the paper's "about 80 %" at 15 Mb/s: the stated reason, tested.
#[test]
fn fig10_thirty_member_multicast_groups_reach_80_percent_with_fewer_forwarders() {
    let r = causes::run(
        "fig10-interference",
        &[
            ("quick_repetitions = 3\n", "quick_repetitions = 50\n"),
            (
                "quick_sweep = { wifi_mbps = [0, 28.5] }",
                "quick_sweep = { mode = [\"multicast\"], group = [30], wifi_mbps = [0, 15] }",
            ),
        ],
    );
    let (dense, sparse) =
        with_and_without("fig10-interference", &r, "multicast_group_15mbps", "30 members with four forwarders");
    assert!(!dense.holds(), "fig10 (seed 1): Table 7's 30 members already reach 80 % at 15 Mb/s: {}", dense.corral());
    assert!(sparse.holds(), "fig10 (seed 1), four forwarders: still below 80 % at 15 Mb/s: {}", sparse.corral());
}
