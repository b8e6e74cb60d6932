//! A built-in scenario's text with some of its lines changed, for the tests that remove a finding's
//! cause (seeds 002 and 003).

use corral_lab::scenario::builtin;

/// `name`'s text with each `(from, to)` replaced once (each must occur).
pub fn edited(name: &str, edits: &[(&str, &str)]) -> String {
    let mut text = builtin(name).expect("a builtin").to_string();
    for (from, to) in edits {
        assert!(text.contains(from), "{name} has no {from:?}");
        text = text.replacen(from, to, 1);
    }
    text
}
