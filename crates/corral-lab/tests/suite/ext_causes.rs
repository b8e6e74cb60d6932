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
/// pays every minute. (ext-observe's quick run: 5 members, 900 s, seed 1.)
#[test]
fn observing_saves_no_frames_when_members_notify_every_reading() {
    cause_matters(
        "ext-observe",
        &causes::run("ext-observe", &[]),
        "observe_vs_poll",
        "members that notify every reading that changed",
    );
}

/// `[entity] notify_step` is honoured where members notify (the points that observe) and refused, naming
/// the field, where it could not be: a step that is no positive number, a resource that is no sensor, a
/// scenario that never observes.
#[test]
fn notify_step_is_honoured_by_observing_points_or_refused() {
    use corral_lab::scenario::{builtin, Experiment, Scenario};
    const RESOURCE: &str = "resource = \"/s/t\"\n";
    let with = |edits: &[(&str, String)]| {
        let mut t = builtin("ext-observe").expect("built in").to_string();
        for (from, to) in edits {
            assert!(t.contains(from), "ext-observe has no {from:?}");
            t = t.replacen(from, to, 1);
        }
        Scenario::parse(&t)
    };
    let step = |s: &str| (RESOURCE, format!("{RESOURCE}notify_step = {s}\n"));
    let s = with(&[step("0.01")]).expect("a step in °C on /s/t parses");
    for p in s.points(true) {
        let Experiment::Entity(e) = s.setup(&p, true).expect("resolves").experiment else { panic!("an entity") };
        let observes = p.label().contains("follow=observe");
        assert_eq!(e.notify_step, observes.then_some(0.01), "{}: only observing points carry the step", p.label());
    }
    let no_observe = [
        step("0.01"),
        ("follow = [\"observe\", 10, 60, 300]", "follow = [10, 60, 300]".into()),
        ("follow = [\"observe\", 60]", "follow = [60]".into()),
    ];
    for (edits, why) in [
        (vec![step("0")], "a step of 0"),
        (vec![step("-0.2")], "a negative step"),
        (vec![(RESOURCE, step("0.01").1.replace("/s/t", "/a/light"))], "an actuator"),
        (no_observe.to_vec(), "no observing point"),
    ] {
        let e = with(&edits).expect_err(why);
        assert!(e.to_string().contains("entity.notify_step"), "{why}: {e}");
    }
}
