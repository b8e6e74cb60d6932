//! A point's family section: the scenario's one family section copied (with `--quick`'s counts), the
//! point's axes applied by the family that owns them, and resolved into the point's [`Experiment`].
//!
//! # What it owns
//! The dispatch from a family's section to its own `apply_axis` and resolution. What each axis sets lives
//! with the section it sets (`entity.rs`, `stream.rs`, …: each declares its `AXES`); an axis of another
//! family is refused, naming the family it belongs to.

use super::entity::EntityPoint;
use super::entity::Queries;
use super::point::{AxisValue, Point};
use super::proxy::Forwarding;
use super::setup::{Common, Experiment, Family, ProxySetup};
use super::{err, ChurnSetup, DtlsSetup, Scenario, ScenarioError, TopologyKind};
use super::{BaselineSpec, ChurnSpec, DtlsSpec, EmulatedSpec, MultipartySpec, ProxySpec, StreamSpec};

/// The family section of one point.
#[derive(Debug, Clone)]
pub(super) enum Section {
    Entity(EntityPoint),
    Proxy(ProxySpec),
    Stream(StreamSpec),
    Emulated(EmulatedSpec),
    Baseline(BaselineSpec),
    Multiparty(MultipartySpec),
    Churn(ChurnSpec),
    Dtls(DtlsSpec),
}

impl Section {
    /// The scenario's family section as written, with `--quick`'s duration or count, before any axis.
    pub(super) fn of(s: &Scenario, quick: bool) -> Result<Section, ScenarioError> {
        s.family()?;
        Ok(if let Some(p) = &s.proxy {
            Section::Proxy(p.clone())
        } else if let Some(st) = &s.stream {
            Section::Stream(st.clone())
        } else if let Some(e) = &s.emulated {
            let duration_s = if quick { e.quick_duration_s } else { e.duration_s };
            Section::Emulated(EmulatedSpec { duration_s, ..e.clone() })
        } else if let Some(b) = &s.baseline {
            Section::Baseline(BaselineSpec { count: if quick { b.quick_count } else { b.count }, ..b.clone() })
        } else if let Some(m) = &s.multiparty {
            let requests = if quick { m.quick_requests } else { m.requests };
            Section::Multiparty(MultipartySpec { requests, ..m.clone() })
        } else if let Some(c) = &s.churn {
            Section::Churn(c.clone())
        } else if let Some(d) = &s.dtls {
            Section::Dtls(d.clone())
        } else {
            Section::Entity(EntityPoint { spec: s.entity.clone(), follow: None })
        })
    }

    fn family(&self) -> Family {
        match self {
            Section::Entity(_) => Family::Entity,
            Section::Proxy(_) => Family::Proxy,
            Section::Stream(_) => Family::Stream,
            Section::Emulated(_) => Family::Emulated,
            Section::Baseline(_) => Family::Baseline,
            Section::Multiparty(_) => Family::Multiparty,
            Section::Churn(_) => Family::Churn,
            Section::Dtls(_) => Family::Dtls,
        }
    }

    /// Applies one of the family's axes; another family's axis is refused, naming its family.
    pub(super) fn apply_axis(&mut self, axis: &str, v: &AxisValue) -> Result<(), ScenarioError> {
        let mine = self.family();
        if !mine.axes().contains(&axis) {
            let owners: Vec<String> =
                Family::ALL.iter().filter(|f| f.axes().contains(&axis)).map(|f| format!("[{}]", f.section())).collect();
            return err(format!(
                "sweep.{axis}: an axis of {} scenarios, not of this [{}] one (its axes: {})",
                if owners.is_empty() { "no".to_string() } else { owners.join(" and ") },
                mine.section(),
                mine.axes().join(", ")
            ));
        }
        match self {
            Section::Entity(e) => e.apply_axis(axis, v),
            Section::Proxy(p) => p.apply_axis(axis, v),
            Section::Stream(st) => st.apply_axis(axis, v),
            Section::Emulated(e) => e.apply_axis(axis, v),
            Section::Baseline(b) => b.apply_axis(axis, v),
            Section::Multiparty(m) => m.apply_axis(axis, v),
            Section::Churn(c) => c.apply_axis(axis, v),
            Section::Dtls(d) => d.apply_axis(axis, v),
        }
    }

    /// The point's experiment, its section checked against the network it runs on.
    pub(super) fn resolve(self, s: &Scenario, c: &Common, p: &Point, quick: bool) -> Result<Experiment, ScenarioError> {
        let w = &s.workload;
        let queries = Queries {
            repetitions: if quick { w.quick_repetitions } else { w.repetitions },
            pause_ms: w.pause_ms,
            query_limit_s: w.query_limit_s,
        };
        let window_s = if quick { w.quick_duration_s } else { w.duration_s };
        let single = EntityPoint::is_single_unicast(&s.entity);
        Ok(match self {
            Section::Entity(e) => Experiment::Entity(e.resolve(s, c.network.gateways, queries, window_s)?),
            Section::Proxy(spec) => {
                let proxy = ProxySetup {
                    queries,
                    resource: s.entity.resource.clone(),
                    mode: Forwarding::parse(&spec.forwarding)?,
                    consumers: spec.consumers,
                    cache_entries: spec.cache_entries,
                    forwarders: spec.forwarders,
                    rules: spec.rule,
                };
                proxy.validate(c.network.group)?;
                if !single {
                    return err("[proxy]: a single unicast [entity] layout");
                }
                Experiment::Proxy(proxy)
            }
            Section::Stream(st) => {
                st.validate()?;
                Experiment::Stream(st)
            }
            Section::Emulated(mut e) => {
                e.validate()?;
                e.keep_own_protocol();
                Experiment::Emulated(e)
            }
            Section::Baseline(b) => {
                b.validate()?;
                Experiment::Baseline(b)
            }
            Section::Multiparty(m) => {
                m.validate()?;
                Experiment::Multiparty(m)
            }
            Section::Churn(spec) => {
                let replicate = p.get("replicate").and_then(AxisValue::num).map_or(1, |r| r as u64);
                let churn = ChurnSetup::resolve(&spec, &s.entity.resource, window_s, replicate)?;
                churn.validate(c.network.group)?;
                if c.network.topology != TopologyKind::Star || c.network.gateways != 1 || !single {
                    return err("[churn]: a star around one gateway, a single unicast [entity] layout");
                }
                Experiment::Churn(churn)
            }
            Section::Dtls(d) => Experiment::Dtls(DtlsSetup::resolve(&d)?),
        })
    }
}
