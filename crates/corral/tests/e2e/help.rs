//! `--help` as a user copies from it: wrapped once, so that on an 80-column terminal no example is split
//! mid-command and no paragraph leaves orphan words; every example line is a command corral accepts.

use crate::common;
use common::*;
use std::process::Command;
use std::time::Duration;

/// `corral PATH… --help` rendered for a terminal `columns` wide (clap reads COLUMNS when not on a tty).
fn help(path: &[&str], columns: u32) -> String {
    let o =
        run(Command::new(CORRAL).args(path).arg("--help").env("COLUMNS", columns.to_string()), Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(0), "{path:?}: {}", stderr(&o));
    stdout(&o)
}

/// Every command path, from the "Commands:" sections of the help texts themselves.
fn command_paths() -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut todo = vec![Vec::<String>::new()];
    while let Some(path) = todo.pop() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let text = help(&args, 1000);
        let mut in_commands = false;
        for line in text.lines() {
            if line == "Commands:" {
                in_commands = true;
            } else if in_commands && line.starts_with("  ") {
                let name = line.split_whitespace().next().unwrap_or("");
                if name != "help" && !name.is_empty() {
                    let mut sub = path.clone();
                    sub.push(name.to_string());
                    todo.push(sub);
                }
            } else {
                in_commands = false;
            }
        }
        out.push(path);
    }
    out
}

/// The example lines of a help text: indented lines that start with `corral `.
fn example_lines(text: &str) -> Vec<String> {
    text.lines().filter(|l| l.starts_with("  ") && l.trim_start().starts_with("corral ")).map(String::from).collect()
}

#[test]
fn no_example_is_split_on_an_80_column_terminal() {
    let paths = command_paths();
    assert!(paths.len() > 20, "{paths:?}");
    let mut examples = 0;
    for path in &paths {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let (wide, narrow) = (help(&args, 1000), help(&args, 80));
        let wide_examples = example_lines(&wide);
        // An example wrapped by clap would start in one line and end in the next: it must appear whole.
        for e in &wide_examples {
            assert!(narrow.lines().any(|l| l == e), "{path:?}: at 80 columns this example is split:\n{e}\n{narrow}");
        }
        assert_eq!(wide_examples, example_lines(&narrow), "{path:?}");
        // A line that continues a command ends the line before it with a backslash.
        let lines: Vec<&str> = narrow.lines().collect();
        for (i, l) in lines.iter().enumerate().skip(1) {
            let prev = lines[i - 1];
            if example_lines(prev).len() == 1 && l.starts_with("      ") && !l.trim().starts_with('#') {
                assert!(prev.ends_with('\\'), "{path:?}: `{l}` continues `{prev}` without a backslash");
            }
        }
        examples += wide_examples.len();
    }
    assert!(examples > 60, "{examples} examples");
}

/// Paragraphs are wrapped once (by clap, to the terminal): at 80 columns no line of prose is a stray
/// word or two left over from a line wrapped in the source.
#[test]
fn paragraphs_have_no_orphan_words() {
    for path in command_paths() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let text = help(&args, 80);
        let lines: Vec<&str> = text.lines().collect();
        for w in lines.windows(3) {
            let (before, short, after) = (w[0], w[1], w[2]);
            let prose = |l: &str| !l.is_empty() && !l.starts_with(' ');
            let orphan = prose(before)
                && prose(short)
                && prose(after)
                && before.chars().count() > 60
                && short.split_whitespace().count() <= 2
                && after.starts_with(|c: char| c.is_lowercase());
            assert!(!orphan, "{path:?}: an orphan line `{short}` between\n{before}\n{after}");
        }
    }
}
