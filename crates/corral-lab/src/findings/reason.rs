//! A finding's stated reason and what the variant that tests it shows.
//!
//! # What it owns
//! A `[[finding]]`'s `reason` names the `[[sensitivity]]` variant(s) that test the reason its `explain`
//! gives: for a DISAGREES the stated cause of the disagreement ("the radio loses too little"), for an
//! AGREES the variant that removes its cause. [`link`] looks each one up among a run's variants and
//! [`Reason::sentence`] says what the finding is there — "its stated reason — V — makes it AGREES: …" or
//! "… leaves it DISAGREES: the reason is not confirmed". A DISAGREES without a reason says it has none
//! ([`NO_REASON`]), so a scenario that lost its link shows the gap. It never runs anything: the variants
//! ran in `crate::sweep::run_sensitivity`.

use super::{number, Finding, Kind, Variant, AGREEMENT};

/// What a DISAGREES without a `reason` says in the report.
pub const NO_REASON: &str = "none named: no [[sensitivity]] variant tests why it disagrees (a [[finding]] names one with reason = \"<variant>\")";

/// One reason variant of a finding and, once [`link`]ed, the finding in that variant.
#[derive(Debug, Clone, PartialEq)]
pub struct Reason {
    /// The `[[sensitivity]]` variant's name.
    pub variant: String,
    /// The finding rerun in that variant; `None` when the variants did not run (a shard, or findings
    /// evaluated without them).
    pub there: Option<There>,
}

/// A finding in its reason variant.
#[derive(Debug, Clone, PartialEq)]
pub struct There {
    pub kind: Kind,
    /// [`Finding::status`] there.
    pub status: String,
    /// The deciding measure there ([`deciding`]), e.g. "G=5 auto / best fixed delay: 1.55×".
    pub measure: String,
}

impl Reason {
    /// What the finding (of kind `kind` in the run) is in this reason's variant, in one sentence.
    pub fn sentence(&self, kind: Kind) -> String {
        let v = &self.variant;
        let Some(t) = &self.there else {
            return format!("{v}: not run in this report (variants run in an unsharded run or a merge of every shard)");
        };
        let m = &t.measure;
        match (kind, t.kind) {
            (Kind::Disagrees, Kind::Agrees) => format!("its stated reason — {v} — makes it AGREES: {m}"),
            (Kind::Disagrees, Kind::Inconclusive) => {
                format!("its stated reason — {v} — leaves it INCONCLUSIVE: the reason is untested ({m})")
            }
            (Kind::Disagrees, _) => {
                format!("its stated reason — {v} — leaves it {}: the reason is not confirmed ({m})", t.status)
            }
            (Kind::Agrees, Kind::Disagrees) => format!("its cause removed — {v} — makes it DISAGREES: {m}"),
            (Kind::Agrees, _) => {
                format!("its cause removed — {v} — leaves it {}: the cause is not confirmed ({m})", t.status)
            }
            _ => format!("in {v} it is {}: {m}", t.status),
        }
    }
}

/// The measure that decides a finding: the first that holds in fewer replicates than a claim needs, else
/// the first — as "what: value".
pub fn deciding(f: &Finding) -> String {
    let fails = |m: &&super::Spread| (m.held as f64) < AGREEMENT * m.of as f64;
    match f.measures.iter().find(fails).or(f.measures.first()) {
        Some(m) => format!("{}: {}", m.what, number(m.mean, m.unit)),
        None if !f.note.is_empty() => f.note.clone(),
        None => "no measure".into(),
    }
}

/// Fills each finding's reasons with what the finding is in the named variants (those the run has).
pub fn link(found: &mut [Finding], variants: &[Variant]) {
    for f in found.iter_mut() {
        for r in &mut f.reasons {
            let Some(v) = variants.iter().find(|v| v.name == r.variant) else { continue };
            r.there = v.findings.iter().find(|g| g.check == f.check).map(|g| There {
                kind: g.kind,
                status: g.status(),
                measure: deciding(g),
            });
        }
    }
}

/// The report's lines about a finding's reasons: one per reason for a claim or a finding that names one,
/// and [`NO_REASON`] for a DISAGREES that names none. Empty for the rest.
pub fn lines(f: &Finding) -> Vec<String> {
    if f.reasons.is_empty() {
        return if f.kind == Kind::Disagrees { vec![NO_REASON.to_string()] } else { Vec::new() };
    }
    f.reasons.iter().map(|r| r.sentence(f.kind)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn there(kind: Kind) -> Option<There> {
        Some(There { kind, status: kind.word().into(), measure: "x: 1×".into() })
    }

    #[test]
    fn the_sentence_says_what_the_reason_variant_shows() {
        let r = |t| Reason { variant: "V".into(), there: t };
        assert_eq!(r(there(Kind::Agrees)).sentence(Kind::Disagrees), "its stated reason — V — makes it AGREES: x: 1×");
        assert_eq!(
            r(there(Kind::Disagrees)).sentence(Kind::Disagrees),
            "its stated reason — V — leaves it DISAGREES: the reason is not confirmed (x: 1×)"
        );
        assert_eq!(
            r(there(Kind::Disagrees)).sentence(Kind::Agrees),
            "its cause removed — V — makes it DISAGREES: x: 1×"
        );
        assert!(r(there(Kind::Agrees)).sentence(Kind::Agrees).contains("the cause is not confirmed"));
        assert!(r(None).sentence(Kind::Disagrees).contains("not run in this report"));
    }
}
