//! A scenario's procedure table (`[[procedure]]`): every input of the paper's experiment — its loss
//! generator, where delay is applied, the client's sending pattern, the TCP stack and its timers, the nodes'
//! hardware, payloads, duration, repetitions, topology — with where the paper states it and how the lab
//! sets it. An input the paper does not state is *assumed*, and the row names the source of the value (a
//! datasheet, an operating system's source, a published measurement). A reproduction is judged against
//! this table: an input taken from the paper's procedure is not fitting; a constant chosen against a result
//! is (it belongs in `[calibration] fitted_to`).
//!
//! ```toml
//! [[procedure]]
//! input = "loss generator"
//! paper = "a loss event drawn at the access point every second"
//! where = "§4.1, Fig. 12"
//! lab = "[stream] loss.model = \"outage\""
//!
//! [[procedure]]
//! input = "TCP minimum RTO"
//! paper = "not stated (go-coap on Linux)"
//! lab = "200 ms"
//! assumed = "Linux TCP_RTO_MIN, include/net/tcp.h"
//! ```
//!
//! Never runs anything: the runners read their inputs from the family sections; this table says what those
//! inputs are to a reader, and the report opens with it.

use super::{err, ScenarioError};
use serde::{Deserialize, Serialize};

/// One input of the paper's experiment.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProcedureRow {
    /// What the input is, e.g. "loss generator".
    pub input: String,
    /// What the paper does (its words or a faithful summary); "not stated" when it is silent.
    #[serde(default)]
    pub paper: String,
    /// Where the paper says it (section, figure, table); empty when the paper does not.
    #[serde(default, rename = "where")]
    pub where_: String,
    /// How the lab sets it (the scenario field, the model, the value).
    pub lab: String,
    /// For an input the paper does not state: where the lab's value comes from.
    #[serde(default)]
    pub assumed: String,
}

impl ProcedureRow {
    /// Whether the lab's value is an assumption rather than the paper's.
    pub fn is_assumed(&self) -> bool {
        !self.assumed.is_empty()
    }

    /// Where the value comes from, for a report: the paper's place, or "assumed: source".
    pub fn provenance(&self) -> String {
        match (self.where_.is_empty(), self.assumed.is_empty()) {
            (false, true) => self.where_.clone(),
            (true, false) => format!("assumed: {}", self.assumed),
            _ => format!("{}; assumed: {}", self.where_, self.assumed),
        }
    }
}

/// Checks every row says what it is, how the lab sets it, and where its value comes from.
pub(super) fn validate(rows: &[ProcedureRow]) -> Result<(), ScenarioError> {
    for (i, r) in rows.iter().enumerate() {
        let at = format!("procedure[{i}]");
        if r.input.trim().is_empty() {
            return err(format!("{at}: `input` names the input (e.g. \"loss generator\")"));
        }
        if r.lab.trim().is_empty() {
            return err(format!("{at} ({}): `lab` says how the lab sets it", r.input));
        }
        if r.where_.trim().is_empty() && r.assumed.trim().is_empty() {
            return err(format!(
                "{at} ({}): give `where` (the paper's section or figure) or `assumed` (the source of a value the paper does not state)",
                r.input
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(where_: &str, assumed: &str) -> ProcedureRow {
        ProcedureRow {
            input: "TCP minimum RTO".into(),
            paper: String::new(),
            where_: where_.into(),
            lab: "200 ms".into(),
            assumed: assumed.into(),
        }
    }

    #[test]
    fn a_row_without_a_source_is_refused_naming_the_input() {
        let e = validate(&[row("", "")]).unwrap_err().to_string();
        assert!(e.contains("procedure[0] (TCP minimum RTO)") && e.contains("assumed"), "{e}");
    }

    #[test]
    fn provenance_names_the_paper_or_the_assumption() {
        assert_eq!(row("§4", "").provenance(), "§4");
        assert_eq!(row("", "Linux include/net/tcp.h").provenance(), "assumed: Linux include/net/tcp.h");
        assert!(row("§4", "x").is_assumed());
    }
}
