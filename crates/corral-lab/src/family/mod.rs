//! The experiment families: how a point of each family is built on the harness, run and measured — one
//! module per family, named like its section of the scenario file.
//!
//! | module | family | runs |
//! | --- | --- | --- |
//! | [`entity`] | `[entity]` (the default; seed 000) | the real Entity Manager on each gateway, virtual devices on the members; the client creates an entity and queries or follows it |
//! | [`proxy`] | `[proxy]` | corral-proxy on the forwarders; consumers ask the members' resources through them |
//! | [`stream`] | `[stream]` (seed 003) | a sensor streams readings to a collector over one lossy link: CoAP-SC, CoAP over UDP or TCP |
//! | [`emulated`] | `[emulated]` (seed 004) | real programs on either side of an emulated link, in real time |
//! | [`baseline`] | `[baseline]` (seed 002) | CoAP against corral-sim's HTTP baselines over one IEEE 802.15.4 hop |
//! | [`multiparty`] | `[multiparty]` (seed 001) | nine clients and a server over the Fig. 6 tree in Table II's deployments |
//! | [`dtls`] | `[dtls]` (issue 30) | one request across a multi-hop chain, after a DTLS handshake (PSK or certificates), with OSCORE, or plain |
//! | [`churn`] | `[churn]` (issue 32) | devices join and leave a floor, registering with a Resource Directory on the gateway; the client queries an entity that follows the directory and one that does not |
//!
//! Each module's `run` takes the point's [`crate::scenario::Common`] (what it models of it) and its own
//! part of [`crate::scenario::Experiment`], and gives a [`crate::harness::PointRun`]. A family never reads a
//! clock (but the emulated one, which runs in real time) or draws randomness that does not follow from the
//! point's seed.

pub mod baseline;
pub mod churn;
pub mod dtls;
pub mod emulated;
pub mod entity;
pub mod multiparty;
pub mod proxy;
pub mod stream;

use crate::error::ScenarioError;
use crate::scenario::{Calibration, Family, Scenario};

/// The `[calibration]` fields each family's runner reads — one line per family; a runner that starts
/// honouring a field adds it here. A scenario that gives any other field a value other than its default or
/// its "off" value, sweeps it, or varies it in a `[[sensitivity]]` is refused ([`check_calibration`]): a
/// report never prints a constant that did not act on the run.
pub fn calibration_read(f: Family) -> &'static [&'static str] {
    match f {
        Family::Entity => &["processing_delay_ms", "rx_queue", "cca_busy_prob", "corruption_prob"],
        Family::Proxy => &["processing_delay_ms", "rx_queue", "cca_busy_prob", "corruption_prob"],
        // The stream and baseline runners charge the nodes' CPU (seed 003/002 procedures); no Wi-Fi there.
        Family::Stream => &["processing_delay_ms", "rx_queue"],
        Family::Emulated => &[],
        Family::Baseline => &["processing_delay_ms", "rx_queue"],
        Family::Multiparty => &["processing_delay_ms", "rx_queue"],
        // The churn runner starts no Wi-Fi.
        Family::Churn => &["processing_delay_ms", "rx_queue"],
        // The dtls runner starts no Wi-Fi either.
        Family::Dtls => &["processing_delay_ms", "rx_queue"],
    }
}

/// A calibration field's value in a scenario, and whether that value leaves a runner that ignores the field
/// exactly as it is: the field's default, or "off" (no CPU time, no queue limit, Wi-Fi that never blocks or
/// corrupts).
fn calibration_field(c: &Calibration, field: &str) -> (f64, bool) {
    let d = Calibration::default();
    let (v, default, off) = match field {
        "processing_delay_ms" => (c.processing_delay_ms, d.processing_delay_ms, 0.0),
        "rx_queue" => (f64::from(c.rx_queue), f64::from(d.rx_queue), -1.0),
        "cca_busy_prob" => (c.cca_busy_prob, d.cca_busy_prob, 0.0),
        _ => (c.corruption_prob, d.corruption_prob, 0.0),
    };
    (v, v == default || v == off)
}

/// The calibration fields a scenario can set.
pub const CALIBRATION_FIELDS: &[&str] = &["processing_delay_ms", "rx_queue", "cca_busy_prob", "corruption_prob"];

/// Refuses a scenario that sets, sweeps or varies a `[calibration]` field its family's runner does not read
/// ([`calibration_read`]), naming the field.
pub fn check_calibration(s: &Scenario) -> Result<(), ScenarioError> {
    let family = s.family()?;
    let reads = calibration_read(family);
    let refuse = |field: &str, how: String| {
        let read = if reads.is_empty() { "none".to_string() } else { reads.join(", ") };
        Err(ScenarioError::invalid(format!(
            "{how}: the [{}] runner does not read calibration.{field} (it reads: {read}); remove it so that the report does not print a constant that did not act on the run",
            family.section()
        )))
    };
    for field in CALIBRATION_FIELDS.iter().filter(|f| !reads.contains(f)) {
        let (v, inert) = calibration_field(&s.calibration, field);
        if !inert {
            return refuse(field, format!("calibration.{field} = {v}"));
        }
        if s.sweep.contains_key(*field) {
            return refuse(field, format!("sweep.{field}"));
        }
        if let Some(v) = s.sensitivity.iter().find(|v| v.set.contains_key(&format!("calibration.{field}"))) {
            return refuse(field, format!("sensitivity {:?} sets calibration.{field}", v.name));
        }
    }
    Ok(())
}
