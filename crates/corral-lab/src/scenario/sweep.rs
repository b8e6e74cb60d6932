//! A scenario's validation and the expansion of its sweep axes into points, each resolved into the
//! [`Setup`] of one run (see the parent module's "Sweep order").

use super::figure::Metric;
use super::point::{AxisValue, Point, AXES};
use super::section::Section;
use super::setup::{Common, Family, Setup};
use super::{err, ranges, Scenario, ScenarioError};

impl Scenario {
    /// Parses and validates a scenario file.
    pub fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        let s: Scenario = toml::from_str(text).map_err(|e| ScenarioError::Format(e.to_string()))?;
        s.validate()?;
        Ok(s)
    }

    /// The experiment family: the one family section the file has, or the Entity Manager's queries.
    pub fn family(&self) -> Result<Family, ScenarioError> {
        let given: Vec<Family> = [
            (self.proxy.is_some(), Family::Proxy),
            (self.stream.is_some(), Family::Stream),
            (self.emulated.is_some(), Family::Emulated),
            (self.baseline.is_some(), Family::Baseline),
            (self.multiparty.is_some(), Family::Multiparty),
            (self.churn.is_some(), Family::Churn),
            (self.dtls.is_some(), Family::Dtls),
        ]
        .into_iter()
        .filter_map(|(present, f)| present.then_some(f))
        .collect();
        match given[..] {
            [] => Ok(Family::Entity),
            [f] => Ok(f),
            _ => err(format!(
                "{}: a scenario runs one experiment family",
                given.iter().map(|f| format!("[{}]", f.section())).collect::<Vec<_>>().join(" and ")
            )),
        }
    }

    fn validate(&self) -> Result<(), ScenarioError> {
        self.family()?;
        super::procedure::validate(&self.procedure)?;
        ranges::check(self)?;
        if self.name.is_empty() || !self.name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
            return err(format!("name {:?}: use letters, digits, - _ .", self.name));
        }
        for (axis, values) in &self.sweep {
            if !AXES.contains(&axis.as_str()) {
                return err(format!("sweep.{axis}: unknown axis (known: {})", AXES.join(", ")));
            }
            if values.is_empty() {
                return err(format!("sweep.{axis}: no values"));
            }
            for v in values {
                AxisValue::from_toml(axis, v)?;
            }
        }
        for (axis, keep) in &self.workload.quick_sweep {
            let Some(values) = self.sweep.get(axis) else {
                return err(format!("workload.quick_sweep.{axis}: not a sweep axis of this scenario"));
            };
            // The quick sweep keeps the values of the sweep it names (an edited sweep may have dropped some);
            // naming none of them would drop every point, and the run would report "0 of 0 points", exit 0.
            let full: Vec<AxisValue> = values.iter().filter_map(|v| AxisValue::from_toml(axis, v).ok()).collect();
            let kept = keep.iter().filter_map(|v| AxisValue::from_toml(axis, v).ok()).filter(|v| full.contains(v));
            if kept.count() == 0 {
                let named: Vec<String> = keep.iter().map(ToString::to_string).collect();
                return err(format!(
                    "workload.quick_sweep.{axis} = [{}]: none is a value of sweep.{axis}, so the quick run would have no point",
                    named.join(", ")
                ));
            }
        }
        for f in &self.figures {
            if !matches!(f.kind.as_str(), "line" | "box") {
                return err(format!("figure {}: kind must be line or box", f.id));
            }
            if f.kind == "line" && !self.sweep.contains_key(&f.x) && f.x != "replicate" {
                return err(format!("figure {}: x = {:?} is not a sweep axis", f.id, f.x));
            }
            for a in f.series.iter().chain(f.filter.keys()) {
                if !self.sweep.contains_key(a) {
                    return err(format!("figure {}: {a:?} is not a sweep axis", f.id));
                }
            }
            Metric::parse(&f.metric)?;
        }
        for f in &self.findings {
            for r in &f.reason {
                if !self.sensitivity.iter().any(|v| &v.name == r) {
                    let known: Vec<String> = self.sensitivity.iter().map(|v| format!("{:?}", v.name)).collect();
                    return err(format!(
                        "finding {:?}: reason {r:?} is no [[sensitivity]] variant of this scenario (variants: {})",
                        f.check,
                        if known.is_empty() { "none".into() } else { known.join(", ") }
                    ));
                }
            }
        }
        if self.sweep.contains_key("replicate") {
            return err("sweep.replicate: replicates come from workload.replicates, not from the sweep");
        }
        // Every point must resolve.
        for p in self.points(false).iter().chain(self.points(true).iter()) {
            self.setup(p, false)?;
        }
        Ok(())
    }

    /// Every sweep point (all of them, or those of `--quick`), indexed in the full sweep's order.
    pub fn points(&self, quick: bool) -> Vec<Point> {
        let mut axes: Vec<(&str, Vec<AxisValue>)> = AXES
            .iter()
            .filter_map(|a| {
                let values = self.sweep.get(*a)?;
                Some((*a, values.iter().filter_map(|v| AxisValue::from_toml(a, v).ok()).collect()))
            })
            .collect();
        let replicates = self.replicates(quick);
        if replicates > 1 {
            axes.push(("replicate", (1..=replicates).map(|r| AxisValue::Num(r as f64)).collect()));
        }
        let mut out = Vec::new();
        let total: usize = axes.iter().map(|(_, v)| v.len()).product();
        for index in 0..total {
            let mut rest = index;
            let mut values = vec![(String::new(), AxisValue::Num(0.0)); axes.len()];
            for (k, (a, vs)) in axes.iter().enumerate().rev() {
                values[k] = (a.to_string(), vs[rest % vs.len()].clone());
                rest /= vs.len();
            }
            let p = Point { index, values };
            if quick && !self.in_quick(&p) {
                continue;
            }
            out.push(p);
        }
        out
    }

    /// Whether a point of the `follow` axis observes (its members' sensors then notify).
    pub(super) fn observes(&self) -> bool {
        self.sweep.get("follow").is_some_and(|vs| vs.iter().any(|v| v.as_str() == Some("observe")))
    }

    /// Replicates per point: `workload.replicates`, or `quick_replicates` with `--quick`.
    pub fn replicates(&self, quick: bool) -> usize {
        if quick { self.workload.quick_replicates } else { self.workload.replicates }.max(1)
    }

    fn in_quick(&self, p: &Point) -> bool {
        self.workload.quick_sweep.iter().all(|(axis, keep)| {
            let keep: Vec<AxisValue> = keep.iter().filter_map(|v| AxisValue::from_toml(axis, v).ok()).collect();
            p.get(axis).is_none_or(|v| keep.contains(v))
        })
    }

    /// The resolved parameters of one point: the shared sections and the family's, each with the point's
    /// axes applied by the section that owns them (`Common` or the family's section).
    pub fn setup(&self, p: &Point, quick: bool) -> Result<Setup, ScenarioError> {
        let mut common = Common::of(self, p);
        let mut section = Section::of(self, quick)?;
        // Replicates change the seed (`crate::harness::point_seed`) and, on a floor, the floor (`Common::of`).
        for (axis, v) in p.values.iter().filter(|(a, _)| a != "replicate") {
            if !common.apply_axis(self, axis, v)? {
                section.apply_axis(axis, v)?;
            }
        }
        common.validate()?;
        let experiment = section.resolve(self, &common, p, quick)?;
        Ok(Setup { common, experiment })
    }

    /// The file text of this scenario as TOML (for the report directory).
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }
}
