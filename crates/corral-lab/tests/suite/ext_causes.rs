//! The open questions' AGREES (corral's own hypotheses beyond seed 000) must fail without their cause, in
//! the scenario's `[[sensitivity]]` variant that removes it (quick runs, 20 queries a point, seed 1).
//! `ext-auto-delay` has no AGREES (auto is 1.5× the best fixed delay) and `ext-proxy` no finding: neither
//! is tested here.

use crate::causes;

use causes::cause_matters;

fn quick(name: &str) -> causes::Run {
    causes::run(name, &[("quick_repetitions = 3\n", "quick_repetitions = 20\n")])
}

/// Eq. (1)'s bound assumes a network that carries R = 1 kB/s of replies; with 150 ms of CPU per datagram
/// (under 7 replies, about 530 B, a second) replies squeezed into the bound's window are lost.
#[test]
fn leisure_bound_fails_on_a_network_slower_than_its_r() {
    cause_matters("ext-leisure", &quick("ext-leisure"), "leisure_lower_bound", "a network slower than Eq. (1)'s R");
}

/// Repair saves frames because the multicast round answers most members; with a window too short to
/// collect their replies every member is asked again by unicast, on top of the multicast.
#[test]
fn repair_saves_no_frames_when_the_multicast_window_collects_nothing() {
    cause_matters("ext-repair", &quick("ext-repair"), "repair_best_of_both", "a multicast window too short");
}

/// Observing saves frames because a member notifies only when its reading moved by its step (0.2 °C),
/// which the slow temperature cycle does a few times an hour; when every reading that changed is a
/// notification (a step at the sensors' 0.01 °C resolution), observing pays every second where polling
/// pays every minute. (ext-observe's quick run: 5 members, 300 s, seed 1.)
#[test]
fn observing_saves_no_frames_when_members_notify_every_reading() {
    cause_matters(
        "ext-observe",
        &causes::run("ext-observe", &[]),
        "observe_vs_poll",
        "members that notify every reading that changed",
    );
}
