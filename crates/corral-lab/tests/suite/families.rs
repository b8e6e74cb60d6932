//! A scenario runs one experiment family: the family sections of a file (`[proxy]`, `[stream]`,
//! `[emulated]`, `[baseline]`, `[multiparty]`, else the Entity Manager's queries) decide it, and a file
//! with two of them is refused with both named rather than run as one of them.

use corral_lab::scenario::{builtin, Experiment, Family, Point, Scenario};

#[test]
fn each_builtin_runs_the_family_of_its_section() {
    for (name, family) in [
        ("fig07-delay", Family::Entity),
        ("ext-proxy", Family::Proxy),
        ("seed003-loss", Family::Stream),
        ("seed004-throughput", Family::Emulated),
        ("seed002-latency", Family::Baseline),
        ("seed001-multiparty", Family::Multiparty),
    ] {
        let s = Scenario::parse(builtin(name).expect("built in")).expect("parses");
        assert_eq!(s.family(), Ok(family), "{name}");
        for p in s.points(true) {
            let setup = s.setup(&p, true).expect("resolves");
            assert_eq!(setup.experiment.family(), family, "{name}: {}", p.label());
        }
    }
}

#[test]
fn a_scenario_with_two_family_sections_is_refused_naming_both() {
    let text = builtin("ext-proxy").expect("built in").to_string() + "\n[stream]\n";
    let e = Scenario::parse(&text).expect_err("a proxy and a stream in one file");
    let message = e.to_string();
    assert!(message.contains("[proxy]") && message.contains("[stream]"), "{message}");
}

#[test]
fn an_entity_point_carries_only_the_entitys_parameters() {
    let s = Scenario::parse(builtin("fig13-two-gateways").expect("built in")).expect("parses");
    let p: Point = s.points(true).into_iter().find(|p| p.label().contains("nested")).expect("a nested point");
    let setup = s.setup(&p, true).expect("resolves");
    let Experiment::Entity(e) = &setup.experiment else { panic!("fig13 queries an entity") };
    assert!(e.nested && !e.multicast, "{e:?}");
    assert_eq!(setup.common.network.gateways, 2);
}
