//! The `[dtls]` family (issue 30's lab item): one request across a chain of IEEE 802.15.4 hops, after a
//! real DTLS handshake (corral-dtls on both simulated nodes, dimpl's flights on the simulated clock), with
//! OSCORE, or plain. Seeded; each test prints its seed and the facts it judges.

use corral_lab::record::DtlsFacts;
use corral_lab::run::run_point;
use corral_lab::scenario::{builtin, Experiment, Family, Scenario};

const SEED: u64 = 1;

fn scenario() -> Scenario {
    Scenario::parse(builtin("ext-dtls").expect("built in")).expect("parses")
}

/// The facts of the built-in's point (`security`, `hops`, `usage`), run with `seed`.
fn facts(s: &Scenario, security: &str, hops: f64, usage: &str, seed: u64) -> DtlsFacts {
    let p = s
        .points(false)
        .into_iter()
        .find(|p| {
            p.get("security").map(|v| v.to_string()).as_deref() == Some(security)
                && p.get("hops").and_then(|v| v.num()) == Some(hops)
                && p.get("usage").map(|v| v.to_string()).as_deref() == Some(usage)
        })
        .expect("a point of the sweep");
    let setup = s.setup(&p, false).expect("resolves");
    assert!(matches!(setup.experiment, Experiment::Dtls(_)));
    let r = run_point(&setup, p.index, seed).expect("runs");
    let f = *r.point.facts.dtls().expect("dtls facts");
    println!("seed {seed} {security} {hops} hops {usage}: {f:?}");
    f
}

#[test]
fn a_psk_handshake_completes_across_three_hops_and_costs_more_frames_than_the_plain_request() {
    println!("seed {SEED}");
    let s = scenario();
    assert_eq!(s.family(), Ok(Family::Dtls));
    let plain = facts(&s, "none", 3.0, "clean", SEED);
    let psk = facts(&s, "dtls-psk", 3.0, "clean", SEED);
    assert!(plain.first_ms.is_finite() && plain.handshakes == 0, "{plain:?}");
    assert!(psk.first_ms.is_finite() && psk.handshakes == 1, "the handshake completed and the answer came: {psk:?}");
    assert!(psk.frames > plain.frames && psk.air_bytes > plain.air_bytes, "{psk:?} against {plain:?}");
    assert!(psk.first_ms > plain.first_ms, "the handshake's round trips come first");
    assert_eq!(psk.flights_retx, 0, "no flight is lost on clean links, none is sent again");
}

#[test]
fn a_certificate_handshake_costs_more_frames_than_a_psk_one_and_fragments_its_flights() {
    println!("seed {SEED}");
    let s = scenario();
    let psk = facts(&s, "dtls-psk", 3.0, "clean", SEED);
    let cert = facts(&s, "dtls-cert", 3.0, "clean", SEED);
    assert_eq!(cert.handshakes, 1, "{cert:?}");
    assert!(cert.frames > psk.frames && cert.air_bytes > psk.air_bytes, "{cert:?} against {psk:?}");
    assert!(cert.largest_frames > 1, "a certificate flight takes several 6LoWPAN fragments: {cert:?}");
}

#[test]
fn loss_delays_the_first_protected_response() {
    println!("seed {SEED}");
    let s = scenario();
    let clean = facts(&s, "dtls-psk", 3.0, "clean", SEED);
    let lossy = facts(&s, "dtls-psk", 3.0, "lossy", SEED);
    assert!(lossy.first_ms > clean.first_ms, "{lossy:?} against {clean:?}");
}

/// RFC 7250 on the radio: a raw public key's Certificate message is a 91-byte SubjectPublicKeyInfo where a
/// certificate's carries a chain, so the handshake costs frames between PSK's and a certificate's.
#[test]
fn a_raw_public_key_handshake_costs_more_than_psk_and_less_than_certificates() {
    println!("seed {SEED}");
    let s = scenario();
    let psk = facts(&s, "dtls-psk", 3.0, "clean", SEED);
    let rpk = facts(&s, "dtls-rpk", 3.0, "clean", SEED);
    let cert = facts(&s, "dtls-cert", 3.0, "clean", SEED);
    assert_eq!(rpk.handshakes, 1, "the handshake completed and the answer came: {rpk:?}");
    assert!(rpk.air_bytes > psk.air_bytes && rpk.air_bytes < cert.air_bytes, "{rpk:?} between {psk:?} and {cert:?}");
}
