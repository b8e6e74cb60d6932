//! A whole run's data: the scenario, the points of its sweep, the results of those that ran, and the
//! findings rerun with each `[[sensitivity]]` variant; the aggregates per point, with or without the
//! replicates pooled.
//!
//! # What it owns
//! [`RunData`] and [`Variant`]: what `crate::sweep` produces (by running or merging) and `crate::csv` and
//! `crate::report` write. It never runs a simulation and never writes a file.

use crate::record::{PointResult, QueryRow};
use crate::results::{aggregate, Aggregate};
use crate::scenario::{AxisValue, Point, Scenario};

/// A whole run's data: the scenario, the points that ran and their rows.
#[derive(Debug, Clone)]
pub struct RunData {
    pub scenario: Scenario,
    /// The scenario file as given (written to the report and read back by merge).
    pub scenario_text: String,
    pub seed: u64,
    pub quick: bool,
    /// Points of the full (or quick) sweep, and how many of them this data covers.
    pub points: Vec<Point>,
    pub results: Vec<PointResult>,
    /// `Some((i, n))` for a shard.
    pub shard: Option<(usize, usize)>,
    /// The findings rerun with the scenario's `[[sensitivity]]` variants (deliberately wrong models).
    pub sensitivity: Vec<Variant>,
    /// Stopped by a signal before every point (or every sensitivity variant) ran: the report says so.
    pub interrupted: bool,
    /// A shard's share of the points its sensitivity variants rerun (split over the shards as the base
    /// points are), written beside its own points for `merge` to join; empty outside a shard.
    pub shares: Vec<VariantShare>,
    /// Points of the sensitivity variants that merged shards did not hold: their variants are left out of
    /// the sensitivity table, and the report says so (PARTIAL).
    pub variant_points_missing: usize,
}

/// One sensitivity variant's points that a shard ran: the variant by its position among the scenario's
/// `[[sensitivity]]` tables, its scenario text (the base's with the variant's changes), and the results.
#[derive(Debug, Clone)]
pub struct VariantShare {
    pub variant: usize,
    pub text: String,
    pub scenario: Scenario,
    pub results: Vec<PointResult>,
}

/// One sensitivity variant (its type lives with the findings it holds, which link to it by name).
pub use crate::findings::Variant;

impl RunData {
    /// Aggregates per point with the replicates pooled: one row per point of the sweep's axes, over the
    /// queries of every replicate (point-level counters and facts from the first replicate).
    pub fn pooled(&self) -> Vec<(Point, Aggregate)> {
        let mut groups: Vec<(Point, &PointResult, Vec<&QueryRow>)> = Vec::new();
        for r in &self.results {
            let Some(p) = self.points.iter().find(|p| p.index == r.point.point) else { continue };
            let values: Vec<(String, AxisValue)> = p.values.iter().filter(|(a, _)| a != "replicate").cloned().collect();
            match groups.iter_mut().find(|g| g.0.values == values) {
                Some(g) => g.2.extend(r.queries.iter()),
                None => groups.push((Point { index: p.index, values }, r, r.queries.iter().collect())),
            }
        }
        groups.into_iter().map(|(p, r, q)| (p, aggregate(&r.point, &q))).collect()
    }

    /// Aggregates in point order, with their points.
    pub fn aggregates(&self) -> Vec<(&Point, Aggregate)> {
        let mut out = Vec::new();
        for r in &self.results {
            let Some(p) = self.points.iter().find(|p| p.index == r.point.point) else { continue };
            let q: Vec<&QueryRow> = r.queries.iter().collect();
            out.push((p, aggregate(&r.point, &q)));
        }
        out
    }

    /// The names of the sweep's axes, in point order.
    pub fn axes(&self) -> Vec<String> {
        self.points.first().map(|p| p.values.iter().map(|(a, _)| a.clone()).collect()).unwrap_or_default()
    }

    /// The axis values of point `index`, in [`RunData::axes`] order.
    pub fn axis_values(&self, index: usize) -> Vec<&AxisValue> {
        self.points
            .iter()
            .find(|p| p.index == index)
            .map(|p| p.values.iter().map(|(_, v)| v).collect())
            .unwrap_or_default()
    }
}
