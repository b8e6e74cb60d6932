//! The papers' findings, checked against a run — in a way that can fail.
//!
//! A scenario names the checks it wants (`[[finding]] check = "…"`), with the paper's words and a *role*:
//!
//! | role | verdict | meaning |
//! |---|---|---|
//! | `claim` (default) | AGREES / DISAGREES | the paper's number against corral's, held out from every calibration |
//! | `fitted` | FITTED | a constant was chosen against this very number: agreement is by construction |
//! | `consequence` | CONSEQUENCE | follows from the configuration's arithmetic (pacing, caps), not evidence |
//!
//! A check computes *measures* from the aggregates: corral's number, the paper's number when the paper
//! gives one, and a tolerance fixed here, in advance, in the code — never after looking at the result.
//! A measure holds when corral's number is within the tolerance; a check holds when all its measures do.
//! With several replicates (independent seeds, and on the office floor independent random floors) a
//! check runs once per replicate; a claim AGREES when it holds in at least 80 % of them
//! ([`AGREEMENT`]), else DISAGREES, and every measure is reported as its mean with the range over the
//! replicates. A check that lacks the points it needs (a `--quick` run) is INCONCLUSIVE.
//!
//! # Rules every check follows
//! - A replicate whose check fails to evaluate (an error, no measures) counts as a replicate in which the
//!   claim did not hold, and the finding's note names it: it is never dropped from the count.
//! - A strict claim ("lower", "fewer", "sooner") uses [`Tolerance::Below`] / [`Tolerance::Above`]: a tie
//!   does not meet it.
//! - A monotone claim ("grows with", "falls with") is checked at every step of its axis ([`steps`]), not
//!   between the end points only.
//! - A check whose result follows from byte, airtime or pacing arithmetic of the configuration is listed in
//!   [`ARITHMETIC`] and reported as CONSEQUENCE whatever role the scenario gives it.
//! - A number that is not finite prints as a word ([`number`]): "infinite", "undefined (0/0)".
//! - A claim names the `[[sensitivity]]` variant that tests its stated reason (`reason`), and the report
//!   says what the finding is there ([`reason`]); a DISAGREES that names none says so.
//!
//! # Families
//! Checks live in one module per experiment family, named like it ([`entity`] — seed 000's testbed and
//! office and the open questions beyond it —, [`stream`], [`emulated`], [`baseline`], [`multiparty`]); each
//! exports a table of [`Check`]s, and [`lookup`] searches the tables. A new family adds its module and its
//! table to [`FAMILIES`] — nothing else changes: the report renders any [`Finding`].

pub mod baseline;
pub mod churn;
pub mod dtls;
pub mod emulated;
pub mod entity;
pub mod multiparty;
pub mod reason;
pub mod stream;

use crate::error::ScenarioError;
use crate::results::Aggregate;
use crate::scenario::{AxisValue, FindingSpec, Point, Role, Scenario};
use std::fmt;

/// A claim agrees when it holds in at least this share of the replicates (4 of 5).
pub const AGREEMENT: f64 = 0.8;

/// Checks whose result is byte, airtime or pacing arithmetic of the configuration, with why: CONSEQUENCE
/// whatever role a scenario gives them (agreement with them is not evidence about the paper).
pub const ARITHMETIC: &[(&str, &str)] = &[
    ("request_sizes", "the request's bytes follow from the encoders"),
    ("coap_fewer_bytes", "bytes on the air follow from the headers each scheme sends"),
    // Seed 002's latency run has no loss and no CPU time: a transaction's latency and radio energy are the
    // airtime of the frames its scheme sends (handshake, headers), which no wrong model of the channel moves.
    ("coap_faster_than_http_tcp", "loss-free, CPU-free latency is the airtime of each scheme's frames"),
    ("persistent_faster_than_tcp", "the handshake's frames are the whole difference without loss or CPU time"),
    ("coap_less_energy", "radio energy is bytes on the air times the datasheet currents"),
    ("mp_requests_grow", "requests per forwarder follow from the request rate and the run's length"),
    ("mp_aware_link_load", "packets per shared-path hop follow from the request rate and aggregation"),
    ("churn_cost_grows_as_lifetime_shrinks", "a registrant refreshes every 0.9 × its lifetime"),
    ("dtls_handshake_costs_frames", "a handshake's flights are bytes the plain exchange does not send"),
    ("dtls_cert_costs_more_than_psk", "certificate flights carry certificates, keys and signatures PSK flights lack"),
];

/// Why a check is arithmetic, if it is ([`ARITHMETIC`]).
pub fn arithmetic(check: &str) -> Option<&'static str> {
    ARITHMETIC.iter().find(|(c, _)| *c == check).map(|(_, why)| *why)
}

/// The aggregates a check reads: one replicate's points.
pub type Aggs<'a> = [(&'a Point, Aggregate)];

/// A check: the computation behind a finding.
pub struct Check {
    pub name: &'static str,
    pub title: &'static str,
    pub run: fn(&Scenario, &Aggs) -> Result<Vec<Measure>, Inconclusive>,
}

/// Why a check cannot decide: what the run lacks (the points a `--quick` run leaves out, say). A String,
/// not an enum: each check names what it needs in its own words, and the text is only ever shown to a
/// person (the report's `open` findings); nothing branches on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inconclusive(pub String);

impl From<&str> for Inconclusive {
    fn from(why: &str) -> Inconclusive {
        Inconclusive(why.into())
    }
}

impl From<String> for Inconclusive {
    fn from(why: String) -> Inconclusive {
        Inconclusive(why)
    }
}

impl fmt::Display for Inconclusive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Every family's checks.
pub const FAMILIES: &[&[Check]] = &[
    entity::testbed::CHECKS,
    entity::office::CHECKS,
    entity::ext::CHECKS,
    stream::CHECKS,
    emulated::CHECKS,
    baseline::CHECKS,
    multiparty::CHECKS,
    churn::CHECKS,
    dtls::CHECKS,
];

pub fn lookup(name: &str) -> Option<&'static Check> {
    FAMILIES.iter().flat_map(|f| f.iter()).find(|c| c.name == name)
}

/// Every check's name, for error messages.
pub fn names() -> Vec<&'static str> {
    FAMILIES.iter().flat_map(|f| f.iter()).map(|c| c.name).collect()
}

/// Checks that every finding a scenario names is a known check.
pub fn validate(s: &Scenario) -> Result<(), ScenarioError> {
    for f in &s.findings {
        if lookup(&f.check).is_none() {
            return Err(ScenarioError::invalid(format!(
                "finding {:?}: unknown check (known: {})",
                f.check,
                names().join(", ")
            )));
        }
    }
    Ok(())
}

/// What a finding says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Agrees,
    Disagrees,
    Fitted,
    Consequence,
    Inconclusive,
}

impl Kind {
    pub fn word(self) -> &'static str {
        match self {
            Kind::Agrees => "AGREES",
            Kind::Disagrees => "DISAGREES",
            Kind::Fitted => "FITTED",
            Kind::Consequence => "CONSEQUENCE",
            Kind::Inconclusive => "INCONCLUSIVE",
        }
    }

    /// Counted as evidence (a claim that could have failed).
    pub fn is_verdict(self) -> bool {
        matches!(self, Kind::Agrees | Kind::Disagrees)
    }
}

/// The range corral's number must fall in, declared with the check.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Tolerance {
    AtLeast(f64),
    AtMost(f64),
    /// Strictly below: a strict claim ("lower", "fewer", "sooner"), which a tie does not meet.
    Below(f64),
    /// Strictly above ("higher", "more", "grows").
    Above(f64),
    Between(f64, f64),
    /// Within this fraction of the paper's number (0.15: ±15 %).
    Relative(f64),
    /// Within this much of the paper's number, in its unit (percentage points for reliability).
    Absolute(f64),
}

impl Tolerance {
    #[cfg(test)]
    fn holds(self, corral: f64, paper: Option<f64>) -> bool {
        self.holds_beyond(corral, paper, None)
    }

    /// Whether corral's number is within the tolerance once the A/A `noise` is allowed for: a tolerance
    /// that claims a direction (its bound on the far side of a tie: `Above(1.0)` of a ratio, `Below(0.0)` of
    /// a difference, `AtMost(0.9)` of a ratio) must be met by more than the noise — the bound moves away
    /// from the tie by the noise. A bound on the near side (`AtMost(1.25)`: "close to") is left as it is.
    fn holds_beyond(self, corral: f64, paper: Option<f64>, noise: Option<Noise>) -> bool {
        if !corral.is_finite() {
            return false;
        }
        if let Some(noise) = noise {
            let tie = noise.tie();
            let (far, moved) = match self {
                Tolerance::Above(x) | Tolerance::AtLeast(x) => (x >= tie, noise.up(x)),
                Tolerance::Below(x) | Tolerance::AtMost(x) => (x <= tie, noise.down(x)),
                _ => (false, 0.0),
            };
            if far {
                return match self {
                    Tolerance::Above(_) => corral > moved,
                    Tolerance::AtLeast(_) => corral >= moved,
                    Tolerance::Below(_) => corral < moved,
                    _ => corral <= moved,
                };
            }
        }
        match (self, paper) {
            (Tolerance::AtLeast(x), _) => corral >= x,
            (Tolerance::AtMost(x), _) => corral <= x,
            (Tolerance::Below(x), _) => corral < x,
            (Tolerance::Above(x), _) => corral > x,
            (Tolerance::Between(a, b), _) => (a..=b).contains(&corral),
            (Tolerance::Relative(r), Some(p)) => p != 0.0 && (corral / p - 1.0).abs() <= r,
            (Tolerance::Absolute(d), Some(p)) => (corral - p).abs() <= d,
            (Tolerance::Relative(_) | Tolerance::Absolute(_), None) => false,
        }
    }

    fn describe(self, unit: &str) -> String {
        match self {
            Tolerance::AtLeast(x) => format!("≥ {}{unit}", short(x)),
            Tolerance::AtMost(x) => format!("≤ {}{unit}", short(x)),
            Tolerance::Below(x) => format!("< {}{unit} (a tie does not count)", short(x)),
            Tolerance::Above(x) => format!("> {}{unit} (a tie does not count)", short(x)),
            Tolerance::Between(a, b) => format!("{}–{}{unit}", short(a), short(b)),
            Tolerance::Relative(r) => format!("±{} %", short(r * 100.0)),
            Tolerance::Absolute(d) => format!("±{}{unit}", short(d)),
        }
    }
}

/// `3`, `0.39`, `94.6`: a number as short as it reads; one that is not finite as a word ([`number`]).
fn short(x: f64) -> String {
    if !x.is_finite() {
        return non_finite(x).into();
    }
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A number that is not finite as a word: a ratio over zero is "infinite", zero over zero "undefined".
fn non_finite(x: f64) -> &'static str {
    if x.is_nan() {
        "undefined (0/0 or not measured)"
    } else if x > 0.0 {
        "infinite"
    } else {
        "minus infinite"
    }
}

/// A number with its unit as a report prints it: `0.81×`, `2302 B/s`; `infinite` (no unit) when it is not
/// finite — never a dash that reads like a missing value.
pub fn number(x: f64, unit: &str) -> String {
    if x.is_finite() {
        format!("{}{unit}", short(x))
    } else {
        non_finite(x).into()
    }
}

/// One sensitivity variant of a run: what it changed and the findings it produced. Here, below the run's
/// data, because [`reason::link`] reads it: a finding names the variant that tests its stated reason.
#[derive(Debug, Clone)]
pub struct Variant {
    pub name: String,
    pub changes: String,
    pub findings: Vec<Finding>,
}

/// The noise a comparison of two solutions sits in, from an A/A baseline: the same profile run twice in
/// the same run, on two sequences of random draws, and compared as the check compares the solutions. Under
/// common random numbers two *identical* profiles on one sequence agree exactly, which says nothing; two
/// different solutions meet the same draws only until their first different message (each datagram takes
/// the next draws), so what separates them beyond their difference is what separates one profile on two
/// sequences. A claim that one is higher or lower must exceed it ([`Tolerance::holds_beyond`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Noise {
    /// Of a ratio: the A/A pair's larger over its smaller (≥ 1; infinite when one side measured nothing).
    Factor(f64),
    /// Of a difference: the A/A pair's absolute difference, in the measure's unit.
    Difference(f64),
}

impl Noise {
    /// The A/A factor of two measurements of one profile: `max(a/b, b/a)`; infinite when either is not a
    /// positive finite number (a profile that measured nothing on one sequence bounds no comparison).
    pub fn factor(a: f64, b: f64) -> Noise {
        let f = if a > 0.0 && b > 0.0 && a.is_finite() && b.is_finite() { (a / b).max(b / a) } else { f64::INFINITY };
        Noise::Factor(f)
    }

    /// The A/A difference of two measurements of one profile; infinite when either is not finite.
    pub fn difference(a: f64, b: f64) -> Noise {
        let d = (a - b).abs();
        Noise::Difference(if d.is_finite() { d } else { f64::INFINITY })
    }

    fn value(self) -> f64 {
        match self {
            Noise::Factor(x) | Noise::Difference(x) => x,
        }
    }

    /// The value of a tie in the measure this noise goes with: 1 for a ratio, 0 for a difference.
    fn tie(self) -> f64 {
        match self {
            Noise::Factor(_) => 1.0,
            Noise::Difference(_) => 0.0,
        }
    }

    fn up(self, x: f64) -> f64 {
        match self {
            Noise::Factor(f) => x * f,
            Noise::Difference(d) => x + d,
        }
    }

    fn down(self, x: f64) -> f64 {
        match self {
            Noise::Factor(f) => x / f,
            Noise::Difference(d) => x - d,
        }
    }
}

/// One number a check compares.
#[derive(Debug, Clone, PartialEq)]
pub struct Measure {
    pub what: String,
    pub corral: f64,
    pub paper: Option<f64>,
    pub unit: &'static str,
    pub tolerance: Tolerance,
    /// The A/A noise beside a comparison of solutions, when the run measured one ([`Noise`]).
    pub noise: Option<Noise>,
}

impl Measure {
    pub fn new(
        what: impl Into<String>,
        corral: f64,
        paper: Option<f64>,
        unit: &'static str,
        tol: Tolerance,
    ) -> Measure {
        Measure { what: what.into(), corral, paper, unit, tolerance: tol, noise: None }
    }

    /// The same measure beside the A/A noise of its comparison: a directional claim must exceed it.
    pub fn beyond(self, noise: Option<Noise>) -> Measure {
        Measure { noise, ..self }
    }

    pub fn holds(&self) -> bool {
        self.tolerance.holds_beyond(self.corral, self.paper, self.noise)
    }
}

/// The A/A noise of a measure over the replicates: its kind, mean and range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoiseSpread {
    pub ratio: bool,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

impl fmt::Display for NoiseSpread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A factor reads "×1.12" (the pair differs by up to that factor), a difference "±3".
        let sign = if self.ratio { "×" } else { "±" };
        let mean = if self.mean.is_finite() { short(self.mean) } else { non_finite(self.mean).into() };
        write!(f, "A/A noise {sign}{mean}")?;
        if self.min != self.max && self.min.is_finite() && self.max.is_finite() {
            write!(f, " ({}–{})", short(self.min), short(self.max))?;
        }
        Ok(())
    }
}

/// A measure over the replicates.
#[derive(Debug, Clone, PartialEq)]
pub struct Spread {
    pub what: String,
    pub unit: &'static str,
    pub paper: Option<f64>,
    pub tolerance: Tolerance,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    /// Replicates in which it held, of how many.
    pub held: usize,
    pub of: usize,
    /// The A/A noise beside it, when the run measured one.
    pub noise: Option<NoiseSpread>,
}

impl Spread {
    /// The distance to the paper: the ratio or the difference, whichever the tolerance speaks of.
    pub fn distance(&self) -> String {
        match (self.paper, self.tolerance) {
            (Some(p), Tolerance::Relative(_)) if p != 0.0 => {
                let r = self.mean / p;
                if r.is_finite() {
                    format!("ratio {r:.2}")
                } else {
                    format!("ratio {}", non_finite(r))
                }
            }
            (Some(p), _) => {
                let unit = if self.unit == " %" { " points" } else { self.unit };
                let d = self.mean - p;
                if d.is_finite() {
                    format!("difference {}{}", if d >= 0.0 { "+" } else { "" }, number(d, unit))
                } else {
                    format!("difference {}", non_finite(d))
                }
            }
            (None, _) => String::new(),
        }
    }
}

impl fmt::Display for Spread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: corral {}", self.what, number(self.mean, self.unit))?;
        if self.of > 1 && self.min != self.max {
            write!(f, " ({}–{} over {})", short(self.min), short(self.max), self.of)?;
        }
        if let Some(p) = self.paper {
            write!(f, ", paper {}, {}", number(p, self.unit), self.distance())?;
        }
        if let Some(n) = self.noise {
            write!(f, ", {n}")?;
        }
        write!(f, "; tolerance {}", self.tolerance.describe(self.unit))?;
        if self.noise.is_some() {
            f.write_str(" beyond the A/A noise")?;
        }
        if self.of > 1 {
            write!(f, ", held {}/{}", self.held, self.of)
        } else {
            f.write_str(if self.held == 1 { ", holds" } else { ", does not hold" })
        }
    }
}

/// One checked finding.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub check: String,
    pub figure: String,
    pub title: String,
    pub paper: String,
    pub role: Role,
    pub kind: Kind,
    pub measures: Vec<Spread>,
    /// Replicates in which every measure held, of how many were evaluated.
    pub held: usize,
    pub replicates: usize,
    /// Why the check was inconclusive (or what some replicates lacked).
    pub note: String,
    pub explain: String,
    /// The variants that test the reason `explain` gives (the `[[finding]]`'s `reason`), and, once
    /// [`reason::link`]ed to a run's variants, what the finding is in each.
    pub reasons: Vec<reason::Reason>,
}

impl Finding {
    /// Whether its measures held (in at least [`AGREEMENT`] of the replicates), whatever the role.
    pub fn holds(&self) -> bool {
        self.replicates > 0 && self.held as f64 >= AGREEMENT * self.replicates as f64
    }

    /// The kind, and for a fitted number or a consequence whether it held: what a sensitivity run compares
    /// (a FITTED finding stays FITTED under a wrong model, but may stop holding).
    pub fn status(&self) -> String {
        match self.kind {
            Kind::Fitted | Kind::Consequence => {
                format!("{} ({})", self.kind.word(), if self.holds() { "holds" } else { "fails" })
            }
            k => k.word().to_string(),
        }
    }

    /// corral's side in one line: every measure with its distance and tolerance.
    pub fn corral(&self) -> String {
        let mut s: Vec<String> = self.measures.iter().map(|m| m.to_string()).collect();
        if self.replicates > 1 {
            s.push(format!("all measures held in {} of {} replicates", self.held, self.replicates));
        }
        if !self.note.is_empty() {
            s.push(self.note.clone());
        }
        s.join("; ")
    }
}

/// Evaluates every finding the scenario names, per replicate (the `replicate` axis; one if absent).
pub fn evaluate(s: &Scenario, aggs: &Aggs) -> Vec<Finding> {
    let mut reps: Vec<Option<f64>> = aggs.iter().map(|(p, _)| p.get("replicate").and_then(AxisValue::num)).collect();
    reps.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    reps.dedup();
    s.findings
        .iter()
        .map(|spec| {
            let check = lookup(&spec.check);
            let per_rep: Vec<Result<Vec<Measure>, String>> = reps
                .iter()
                .map(|r| {
                    let part: Vec<(&Point, Aggregate)> = aggs
                        .iter()
                        .filter(|(p, _)| p.get("replicate").and_then(AxisValue::num) == *r)
                        .map(|(p, a)| (*p, a.clone()))
                        .collect();
                    match check.map(|c| (c.run)(s, &part)) {
                        Some(Ok(m)) if !m.is_empty() => Ok(m),
                        Some(Ok(_)) => Err("no measures".into()),
                        Some(Err(e)) => Err(e.0),
                        None => Err(format!("no check named {}", spec.check)),
                    }
                })
                .collect();
            combine(spec, check.map_or("unknown check", |c| c.title), per_rep)
        })
        .collect()
}

/// One finding from its replicates' measures. A replicate whose check failed to evaluate while others
/// evaluated counts as one in which the claim did not hold, and the note says which and why; when none
/// evaluated, the finding is INCONCLUSIVE with the reason.
fn combine(spec: &FindingSpec, title: &str, per_rep: Vec<Result<Vec<Measure>, String>>) -> Finding {
    let failed: Vec<(usize, String)> =
        per_rep.iter().enumerate().filter_map(|(i, r)| r.as_ref().err().map(|e| (i, e.clone()))).collect();
    let evaluated: Vec<Vec<Measure>> = per_rep.into_iter().filter_map(Result::ok).collect();
    let replicates = evaluated.len() + if evaluated.is_empty() { 0 } else { failed.len() };
    let held = evaluated.iter().filter(|ms| ms.iter().all(Measure::holds)).count();
    let mut measures: Vec<Spread> = Vec::new();
    for ms in &evaluated {
        for m in ms {
            let sp = match measures.iter_mut().find(|x| x.what == m.what) {
                Some(sp) => sp,
                None => {
                    measures.push(Spread {
                        what: m.what.clone(),
                        unit: m.unit,
                        paper: m.paper,
                        tolerance: m.tolerance,
                        mean: 0.0,
                        min: f64::INFINITY,
                        max: f64::NEG_INFINITY,
                        held: 0,
                        of: 0,
                        noise: None,
                    });
                    measures.last_mut().expect("just pushed")
                }
            };
            sp.mean += m.corral;
            sp.min = sp.min.min(m.corral);
            sp.max = sp.max.max(m.corral);
            sp.held += usize::from(m.holds());
            sp.of += 1;
            if let Some(n) = m.noise {
                let x = n.value();
                let ns = sp.noise.get_or_insert(NoiseSpread {
                    ratio: matches!(n, Noise::Factor(_)),
                    mean: 0.0,
                    min: f64::INFINITY,
                    max: f64::NEG_INFINITY,
                });
                ns.mean += x;
                ns.min = ns.min.min(x);
                ns.max = ns.max.max(x);
            }
        }
    }
    for sp in &mut measures {
        sp.mean /= sp.of.max(1) as f64;
        if let Some(ns) = &mut sp.noise {
            ns.mean /= sp.of.max(1) as f64;
        }
    }
    let arithmetic = arithmetic(&spec.check);
    let kind = if replicates == 0 {
        Kind::Inconclusive
    } else {
        match spec.role {
            _ if arithmetic.is_some() => Kind::Consequence,
            Role::Fitted => Kind::Fitted,
            Role::Consequence => Kind::Consequence,
            Role::Claim if held as f64 >= AGREEMENT * replicates as f64 => Kind::Agrees,
            Role::Claim => Kind::Disagrees,
        }
    };
    let mut notes = Vec::new();
    if replicates == 0 {
        notes.push(failed.first().map(|(_, why)| why.clone()).unwrap_or_else(|| "no replicates".into()));
    } else if !failed.is_empty() {
        let which: Vec<String> = failed.iter().map(|(i, why)| format!("replicate {}: {why}", i + 1)).collect();
        notes.push(format!(
            "the check failed to evaluate in {} of {replicates} replicates, counted as not holding ({})",
            failed.len(),
            which.join("; ")
        ));
    }
    if let (Some(why), Role::Claim | Role::Fitted) = (arithmetic, spec.role) {
        if replicates > 0 {
            notes.push(format!("arithmetic, not evidence: {why}"));
        }
    }
    Finding {
        check: spec.check.clone(),
        figure: spec.figure.clone(),
        title: title.to_string(),
        paper: spec.paper.clone(),
        role: spec.role,
        kind,
        measures,
        held,
        replicates,
        note: notes.join("; "),
        explain: spec.explain.clone(),
        reasons: spec.reason.iter().map(|v| reason::Reason { variant: v.clone(), there: None }).collect(),
    }
}

// ------------------------------------------------------------------------------------------------
// Helpers the families share
// ------------------------------------------------------------------------------------------------

pub(crate) fn rt_s(a: &Aggregate) -> f64 {
    a.rt.map_or(f64::NAN, |s| s.mean / 1000.0)
}

pub(crate) fn num(p: &Point, axis: &str) -> Option<f64> {
    p.get(axis).and_then(AxisValue::num)
}

/// Distinct values of a numeric axis, sorted.
pub(crate) fn values(aggs: &Aggs, axis: &str) -> Vec<f64> {
    let mut v: Vec<f64> = aggs.iter().filter_map(|(p, _)| num(p, axis)).collect();
    v.sort_by(f64::total_cmp);
    v.dedup();
    v
}

pub(crate) fn pick<'a>(aggs: &'a Aggs<'a>, want: &[(&str, AxisValue)]) -> Option<&'a Aggregate> {
    aggs.iter().find(|(p, _)| want.iter().all(|(a, v)| p.get(a) == Some(v))).map(|(_, a)| a)
}

pub(crate) fn n(x: f64) -> AxisValue {
    AxisValue::Num(x)
}

pub(crate) fn t(s: &str) -> AxisValue {
    AxisValue::Text(s.into())
}

/// Nothing measured: the run lacks the points.
pub(crate) fn need(ms: Vec<Measure>, missing: &str) -> Result<Vec<Measure>, Inconclusive> {
    if ms.is_empty() {
        Err(missing.into())
    } else {
        Ok(ms)
    }
}

/// Which way a monotone claim goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trend {
    Rises,
    Falls,
}

/// A monotone claim checked at every step of its axis: one measure per pair of neighbouring points
/// (`(x, y)` sorted by x), `y(next) − y(this)`, strictly above zero when it rises and strictly below when
/// it falls — an interior step against the trend fails the claim even when the end points agree with it.
pub fn steps(what: &str, points: &[(f64, f64)], trend: Trend, unit: &'static str) -> Vec<Measure> {
    let mut sorted = points.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let tol = match trend {
        Trend::Rises => Tolerance::Above(0.0),
        Trend::Falls => Tolerance::Below(0.0),
    };
    sorted
        .windows(2)
        .map(|w| {
            Measure::new(
                format!("{what} at {} − at {}", short(w[1].0), short(w[0].0)),
                w[1].1 - w[0].1,
                None,
                unit,
                tol,
            )
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod testing {
    //! Synthetic aggregates for the checks' tests: points with given axes and a few fields set.
    use super::*;
    use crate::record::Facts;
    use crate::stats::Summary;

    pub struct Synth {
        pub points: Vec<Point>,
        pub aggs: Vec<Aggregate>,
    }

    impl Synth {
        pub fn new() -> Synth {
            Synth { points: Vec::new(), aggs: Vec::new() }
        }

        /// A point with `axes` whose mean response time is `rt_s` seconds and reliability as given.
        pub fn add(&mut self, axes: &[(&str, AxisValue)], rt_s: f64, member: f64, group: f64) -> &mut Aggregate {
            let index = self.points.len();
            self.points.push(Point { index, values: axes.iter().map(|(a, v)| (a.to_string(), v.clone())).collect() });
            let ms = rt_s * 1000.0;
            let rt = Summary {
                n: 50,
                mean: ms,
                min: ms * 0.5,
                max: ms * 2.0,
                p25: ms * 0.8,
                median: ms,
                p75: ms * 1.2,
                ..Summary::default()
            };
            self.aggs.push(Aggregate {
                point: index,
                queries: 50,
                members: 10,
                rt: Some(rt),
                rt_complete: Some(rt),
                share_under_2s: f64::NAN,
                share_under_6s: f64::NAN,
                member_reliability: member,
                group_reliability: group,
                retx_per_query: 0.0,
                frames_per_query: 10.0,
                link_stress_per_query: 1.0,
                node_load_per_query: 1.0,
                frames_per_hour: f64::NAN,
                avg_hops: 1.0,
                max_hops: 1,
                created: true,
                facts: Facts::Entity { staleness: None },
            });
            self.aggs.last_mut().expect("just pushed")
        }

        pub fn view(&self) -> Vec<(&Point, Aggregate)> {
            self.points.iter().zip(self.aggs.iter().cloned()).collect()
        }

        /// Runs `check` on the synthetic data: whether all its measures hold.
        pub fn holds(&self, check: &str) -> Result<bool, Inconclusive> {
            let c = lookup(check).ok_or("no such check")?;
            let s = Scenario::parse(crate::scenario::builtin("fig10-interference").expect("builtin")).expect("parses");
            let ms = (c.run)(&s, &self.view())?;
            Ok(ms.iter().all(Measure::holds))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerances() {
        assert!(Tolerance::Relative(0.15).holds(3.3, Some(3.0)));
        assert!(!Tolerance::Relative(0.15).holds(3.6, Some(3.0)));
        assert!(Tolerance::Absolute(1.5).holds(93.5, Some(94.6)));
        assert!(!Tolerance::Absolute(1.5).holds(92.9, Some(94.6)));
        assert!(Tolerance::Between(50.0, 150.0).holds(100.0, None));
        assert!(!Tolerance::AtMost(5.0).holds(f64::NAN, None), "no number never holds");
        assert!(!Tolerance::Relative(0.1).holds(1.0, None), "a relative tolerance needs the paper's number");
    }

    #[test]
    fn every_scenario_names_known_checks_with_a_role() {
        for b in crate::scenario::BUILTINS {
            let s = Scenario::parse(b.text).expect("builtin parses");
            for f in &s.findings {
                assert!(lookup(&f.check).is_some(), "{}: {}", b.name, f.check);
            }
        }
    }

    #[test]
    fn replicates_decide_by_four_of_five() {
        let spec = claim("x");
        let m = |v: f64| Ok(vec![Measure::new("v", v, Some(1.0), " s", Tolerance::Relative(0.1))]);
        let agree = combine(&spec, "t", vec![m(1.0), m(1.05), m(0.95), m(1.0), m(2.0)]);
        assert_eq!((agree.kind, agree.held, agree.replicates), (Kind::Agrees, 4, 5));
        let disagree = combine(&spec, "t", vec![m(1.0), m(1.05), m(2.0), m(1.0), m(2.0)]);
        assert_eq!(disagree.kind, Kind::Disagrees);
        assert!(disagree.corral().contains("held 3/5"), "{}", disagree.corral());
        let fitted = combine(&FindingSpec { role: Role::Fitted, ..spec.clone() }, "t", vec![m(1.0)]);
        assert_eq!(fitted.kind, Kind::Fitted);
        let none = combine(&spec, "t", vec![Err("needs points".into())]);
        assert_eq!((none.kind, none.note.as_str()), (Kind::Inconclusive, "needs points"));
    }

    fn claim(check: &str) -> FindingSpec {
        FindingSpec {
            check: check.into(),
            figure: String::new(),
            paper: String::new(),
            explain: String::new(),
            role: Role::Claim,
            reason: Vec::new(),
        }
    }

    #[test]
    fn a_replicate_whose_check_fails_is_reported_and_counted_not_dropped() {
        let m = |v: f64| Ok(vec![Measure::new("v", v, Some(1.0), " s", Tolerance::Relative(0.1))]);
        let broken = || Err("needs udp at error rate 0.1".to_string());
        // Four replicates hold, one fails to evaluate: 4 of 5 still agree, and the note names the failure.
        let f = combine(&claim("x"), "t", vec![m(1.0), m(1.0), broken(), m(1.0), m(1.0)]);
        assert_eq!((f.kind, f.held, f.replicates), (Kind::Agrees, 4, 5));
        assert!(
            f.note.contains("failed to evaluate in 1 of 5") && f.note.contains("replicate 3: needs udp"),
            "{}",
            f.note
        );
        // Three hold, two fail: 3 of 5 is below four in five. Dropping the failures made this 3 of 3.
        let g = combine(&claim("x"), "t", vec![m(1.0), broken(), m(1.0), broken(), m(1.0)]);
        assert_eq!((g.kind, g.held, g.replicates), (Kind::Disagrees, 3, 5));
    }

    /// Claims a tie may meet, with why: claims of no difference, and claims about one number (which the
    /// synthetic tie below happens to satisfy). Every other claim compares — solutions, cells, steps — and
    /// must not hold when everything it compares is equal.
    const A_TIE_MAY_MEET: &[(&str, &str)] = &[
        ("coap_not_impacted_by_latency", "a claim of no difference: CoAP's throughput flat across delays"),
        ("auto_delay_near_best", "a claim of no difference: delay=auto as good as the best fixed delay"),
        ("oscore_costs_no_handshake", "a claim of no difference: OSCORE about plain CoAP's frames"),
        ("multicast_rt_below_leisure", "a number: the response time below the 5 s leisure"),
    ];

    /// Every point of the scenario with the same aggregate: every comparison between solutions, cells or
    /// steps is a tie.
    fn all_tied(s: &Scenario) -> Vec<(Point, Aggregate)> {
        use crate::record::{
            BaselineFacts, ChurnFacts, DtlsFacts, EmulatedFacts, Facts, MpStats, Ops, Staleness, StreamFacts,
        };
        let facts = match s.family().expect("a built-in's family") {
            crate::scenario::Family::Entity => Facts::Entity { staleness: Some(Staleness { mean: 0.1, max: 0.3 }) },
            crate::scenario::Family::Proxy => Facts::Proxy,
            crate::scenario::Family::Stream => {
                Facts::Stream(StreamFacts { nrp: 40, tbt_ms: 20_000.0, ttd_ms: Some(310_000.0) })
            }
            crate::scenario::Family::Emulated => Facts::Emulated(EmulatedFacts { throughput: 1000.0 }),
            crate::scenario::Family::Baseline => Facts::Baseline(BaselineFacts {
                goodput: 200.0,
                energy_mj: 1.0,
                air_bytes: 300.0,
                dgram_loss: 0.2,
                frags: 1.0,
            }),
            crate::scenario::Family::Multiparty => {
                let ops = Ops { aead: 200, signatures: 100, hmac: 300 };
                Facts::Multiparty(std::sync::Arc::new(MpStats {
                    deployment: String::new(),
                    requests: 100,
                    interval_s: 1.0,
                    times_ms: vec![vec![50.0; 90]; 9],
                    sent: vec![100; 9],
                    server_per_s: vec![5; 100],
                    client_ops: ops,
                    server_ops: ops,
                    link_requests: vec![500; 8],
                    link_responses: vec![500; 8],
                    server_copies: 0,
                }))
            }
            crate::scenario::Family::Churn => Facts::Churn(ChurnFacts {
                lifetime_s: 300.0,
                queries: 100,
                follow_full: 50,
                follow_partial: 50,
                fixed_full: 50,
                fixed_partial: 50,
                follow_stale_s: 100.0,
                follow_missing_s: 100.0,
                fixed_stale_s: 100.0,
                fixed_missing_s: 100.0,
                join_mean_s: 30.0,
                join_max_s: 60.0,
                clean_leave_max_s: 10.0,
                vanish_leave_max_s: 200.0,
                vanish_unremoved: 0,
                rd_frames: 1000,
                rd_bytes: 50_000,
                query_frames: 1000,
                query_bytes: 50_000,
                notifications: 0,
            }),
            crate::scenario::Family::Dtls => Facts::Dtls(DtlsFacts {
                hops: 3.0,
                first_ms: 200.0,
                frames: 40,
                air_bytes: 3000,
                datagrams: 10,
                largest: 300,
                largest_frames: 3,
                flights_retx: 1,
                handshakes: 1,
            }),
        };
        let mut synth = testing::Synth::new();
        let points = s.points(false);
        for p in &points {
            let axes: Vec<(&str, AxisValue)> = p.values.iter().map(|(a, v)| (a.as_str(), v.clone())).collect();
            synth.add(&axes, 2.345, 91.7, 33.3).facts = facts.clone();
        }
        synth.points.iter().cloned().zip(synth.aggs.iter().cloned()).collect()
    }

    /// Issue 43: a tie never meets "better", "lower", "helps", "grows": for every claim of every built-in
    /// scenario, a run in which everything it compares is equal must not make it hold.
    #[test]
    fn a_tie_meets_no_comparative_claim() {
        let mut met = Vec::new();
        for b in crate::scenario::BUILTINS {
            let s = Scenario::parse(b.text).expect("a built-in parses");
            let tied = all_tied(&s);
            let view: Vec<(&Point, Aggregate)> = tied.iter().map(|(p, a)| (p, a.clone())).collect();
            for f in evaluate(&s, &view) {
                if f.holds() && !A_TIE_MAY_MEET.iter().any(|(c, _)| *c == f.check) {
                    met.push(format!("{}: {} holds on a tie: {}", b.name, f.check, f.corral()));
                }
            }
        }
        assert!(met.is_empty(), "{}", met.join("\n"));
    }

    #[test]
    fn a_tie_does_not_meet_a_strict_claim() {
        assert!(Tolerance::AtMost(1.0).holds(1.0, None), "at most: a tie is within");
        assert!(!Tolerance::Below(1.0).holds(1.0, None), "lower: a tie is not lower");
        assert!(Tolerance::Below(1.0).holds(0.999, None));
        assert!(!Tolerance::Above(0.0).holds(0.0, None), "higher: a tie is not higher");
        assert!(Tolerance::Below(1.0).describe("×").contains("< 1×"));
    }

    #[test]
    fn a_monotone_claim_fails_at_an_interior_point() {
        // TCP's NRP in issue 29: 62 → 213 → 107 grows between the end points but not at every step.
        let ms = steps("NRP", &[(0.1, 62.0), (0.2, 213.0), (0.3, 107.0)], Trend::Rises, " readings");
        assert_eq!(ms.len(), 2);
        assert!(ms[0].holds() && !ms[1].holds(), "{ms:?}");
        assert!(ms[1].what.contains("at 0.3 − at 0.2"), "{}", ms[1].what);
        let flat = steps("x", &[(1.0, 5.0), (2.0, 5.0)], Trend::Rises, "");
        assert!(!flat[0].holds(), "a flat step does not rise");
        let falls = steps("x", &[(2.0, 1.0), (1.0, 3.0)], Trend::Falls, "");
        assert!(falls[0].holds(), "points are sorted by x first");
    }

    #[test]
    fn arithmetic_checks_are_consequences_whatever_the_role() {
        let m = vec![Ok(vec![Measure::new("bytes", 14.0, Some(14.0), " B", Tolerance::Absolute(0.0))])];
        let f = combine(&claim("request_sizes"), "t", m);
        assert_eq!(f.kind, Kind::Consequence);
        assert!(f.note.contains("arithmetic"), "{}", f.note);
    }

    #[test]
    fn numbers_that_are_not_finite_print_as_words() {
        assert_eq!(number(f64::INFINITY, "×"), "infinite");
        assert_eq!(number(f64::NEG_INFINITY, "×"), "minus infinite");
        assert!(number(f64::NAN, "×").starts_with("undefined"));
        assert_eq!(number(0.81, "×"), "0.81×");
        let sp = Spread {
            what: "ratio".into(),
            unit: "×",
            paper: Some(0.81),
            tolerance: Tolerance::AtMost(0.95),
            mean: f64::INFINITY,
            min: f64::INFINITY,
            max: f64::INFINITY,
            held: 0,
            of: 1,
            noise: None,
        };
        let text = sp.to_string();
        assert!(text.contains("corral infinite") && !text.contains('–'), "{text}");
    }
}
