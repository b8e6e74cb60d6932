//! The README and the pages under `docs/` as a new user pastes them: the `sh` blocks of each page run as
//! written, in order, one shell per page (the pages run side by side: each starts and stops its own
//! servers), with the freshly built `corral` first on the PATH, in a scratch directory (and a scratch data
//! directory: the gateway's default is under $XDG_DATA_HOME). Each command's exit status is checked
//! (`set -e`, with the failing command named); the servers a page starts in the background are stopped by
//! the page itself, and whatever is left when the shell ends is killed. As root each shell runs in a
//! network namespace of its own, so that the pages' fixed ports (5683, 5700-5702, 5801) cannot collide
//! with each other or anything else on the machine. A block that is not meant to be pasted (it needs
//! another machine, or shows output) is fenced as something other than `sh`.
mod common;
use common::*;
use std::process::Command;
use std::time::Duration;

/// The `sh` blocks of `text` under a `#`/`##`/`###` heading that starts with one of `sections` (all of
/// them when `sections` is empty), in order, each with its heading.
fn blocks(text: &str, sections: &[&str]) -> Vec<(String, String)> {
    let (mut out, mut heading, mut block): (Vec<(String, String)>, String, Option<String>) =
        (Vec::new(), String::new(), None);
    let mut in_section = sections.is_empty();
    let mut other_fence = false; // inside a block fenced as something other than `sh`
    for line in text.lines() {
        if other_fence || (block.is_none() && line.starts_with("```") && line != "```sh") {
            other_fence = !other_fence || line != "```";
            continue;
        }
        match &mut block {
            Some(b) if line == "```" => {
                if in_section {
                    out.push((heading.clone(), std::mem::take(b)));
                }
                block = None;
            }
            Some(b) => {
                b.push_str(line);
                b.push('\n');
            }
            None if line == "```sh" => block = Some(String::new()),
            None => {
                if let Some(h) = line.strip_prefix("## ").or_else(|| line.strip_prefix("# ")) {
                    heading = h.to_string();
                    if !sections.is_empty() && line.starts_with("## ") {
                        in_section = sections.iter().any(|s| h.starts_with(s));
                    }
                }
            }
        }
    }
    out
}

/// Runs the `sh` blocks of `page` (a path from the repository's root; only those under `sections` when it
/// is not empty) in one shell of their own, in a network namespace of their own (as root), and checks that
/// each of `promises` is in the output.
fn the_page_runs_as_written(page: &str, sections: &[&str], promises: &[&str]) {
    let text = std::fs::read_to_string(format!("{}/../../{page}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let blocks = blocks(&text, sections);
    assert!(!blocks.is_empty(), "no sh block in {page} {sections:?}");
    let dir = tempfile::tempdir().unwrap();
    let bin = std::path::Path::new(CORRAL).parent().unwrap().display().to_string();
    let mut script = format!(
        "set -eE -o pipefail\n\
         trap 'echo \"{page}: exit status $? from: $BASH_COMMAND\" >&2' ERR\n\
         trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n\
         export PATH={bin}:$PATH XDG_DATA_HOME={dir}/data HOME={dir}\n\
         cd {dir}\n",
        dir = dir.path().display()
    );
    for (heading, block) in &blocks {
        script.push_str(&format!("echo '=== {page}: {}' >&2\n{block}", heading.replace('\'', "")));
    }
    script.push_str("echo PAGE-DONE\n");
    let file = dir.path().join("page.sh");
    std::fs::write(&file, &script).unwrap();
    let netns = Netns::new("readme", &[]);
    let mut cmd = match &netns {
        Some(ns) => ns.command("bash"),
        None => Command::new("bash"),
    };
    let o = run(cmd.arg(&file), Duration::from_secs(300));
    if let Some(ns) = &netns {
        // Whatever a failed page left running in the namespace.
        let pids = Command::new("ip").args(["netns", "pids", &ns.name]).output().unwrap();
        for pid in String::from_utf8_lossy(&pids.stdout).split_whitespace() {
            let _ = Command::new("kill").arg(pid).output();
        }
    }
    let err = stderr(&o);
    let tail: Vec<&str> = err.lines().rev().take(40).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    assert!(
        o.status.success() && stdout(&o).contains("PAGE-DONE"),
        "the commands of {page} failed (status {:?}):\n{}",
        o.status.code(),
        tail.join("\n")
    );
    // What the page promises on the way (a sample; every command's status was checked above).
    let out = stdout(&o);
    for promise in promises {
        assert!(out.contains(promise), "`{promise}` in the output of {page}:\n{out}");
    }
}

#[test]
fn the_readme_gateway_section_runs_as_written() {
    the_page_runs_as_written("README.md", &["The gateway in five minutes"], &["created room1", "deleted lights"]);
}

#[test]
fn the_client_page_runs_as_written() {
    the_page_runs_as_written("docs/client.md", &[], &["Hello from corral!"]);
}

#[test]
fn the_proxy_page_runs_as_written() {
    the_page_runs_as_written("docs/proxy.md", &[], &[]);
}

#[test]
fn the_streaming_page_runs_as_written() {
    the_page_runs_as_written("docs/streaming.md", &[], &["readings acknowledged"]);
}

#[test]
fn the_oscore_page_runs_as_written() {
    the_page_runs_as_written("docs/oscore.md", &[], &[]);
}

/// The documents the README and the crates' READMEs link to are in the repository: no `shared/docs/…`
/// outside it, and every relative Markdown link names a file that exists.
#[test]
fn the_docs_the_readme_links_to_are_in_the_repository() {
    let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let mut files = vec![root.join("README.md")];
    for dir in ["docs", "crates"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
            let p = entry.path();
            files.push(if p.is_dir() { p.join("README.md") } else { p });
        }
    }
    // Module docs too, in every source file.
    let mut dirs: Vec<std::path::PathBuf> =
        std::fs::read_dir(root.join("crates")).unwrap().flatten().map(|d| d.path().join("src")).collect();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = entry.path();
            match p.is_dir() {
                true => dirs.push(p),
                false if p.extension().is_some_and(|e| e == "rs") => files.push(p),
                false => {}
            }
        }
    }
    let mut checked = 0;
    for file in files.iter().filter(|f| f.exists()) {
        let text = std::fs::read_to_string(file).unwrap();
        assert!(!text.contains("shared/docs"), "{} points outside the repository (shared/docs)", file.display());
        if file.extension().is_some_and(|e| e == "rs") {
            continue; // rustdoc's links name items, not files
        }
        for (i, _) in text.match_indices("](") {
            let target = text[i + 2..].split(')').next().unwrap_or("");
            if target.starts_with("http") || target.starts_with('#') || target.contains(' ') {
                continue;
            }
            let path = file.parent().unwrap().join(target.split('#').next().unwrap());
            assert!(path.exists(), "{}: the link {target} names no file", file.display());
            checked += 1;
        }
    }
    for doc in ["docs/architecture.md", "docs/entity-manager.md"] {
        assert!(root.join(doc).exists(), "{doc}");
    }
    assert!(checked >= 3, "{checked} links");
}
