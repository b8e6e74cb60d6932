//! The README and the pages under `docs/` as a new user pastes them: the `sh` blocks of each page run as
//! written, in order, one shell per page (the pages run side by side: each starts and stops its own
//! servers), with the freshly built `corral` first on the PATH, in a scratch directory (and a scratch data
//! directory: the gateway's default is under $XDG_DATA_HOME). Each command's exit status is checked
//! (`set -e`, with the failing command named); the servers a block starts in the background are stopped by
//! the block itself (a block that leaves one running fails), and whatever a failed page left is killed.
//! Blocks wait for their servers with `corral wait` rather than `sleep`. Third-party programs (libcoap)
//! run where installed, and must be with CORRAL_INTEROP=1. Every page with `sh` blocks has a test here,
//! and docs/library.md's Rust is an example the test command compiles. As root each shell runs in a
//! network namespace of its own, so that the pages' fixed ports (5683, 5700-5702, 5801) cannot collide
//! with each other or anything else on the machine. A block that is not meant to be pasted (it needs
//! another machine, or shows output) is fenced as something other than `sh`.
mod common;
use common::*;
use std::process::Command;
use std::time::Duration;

/// The `sh` blocks of `text`, in order, each with the `#`/`##` heading it is under.
fn blocks(text: &str) -> Vec<(String, String)> {
    let (mut out, mut heading, mut block): (Vec<(String, String)>, String, Option<String>) =
        (Vec::new(), String::new(), None);
    let mut other_fence = false; // inside a block fenced as something other than `sh`
    for line in text.lines() {
        if other_fence || (block.is_none() && line.starts_with("```") && line != "```sh") {
            other_fence = !other_fence || line != "```";
            continue;
        }
        match &mut block {
            Some(b) if line == "```" => {
                out.push((heading.clone(), std::mem::take(b)));
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
                }
            }
        }
    }
    out
}

/// Runs the `sh` blocks of `page` (a path from the repository's root) in one shell of their own, in a network namespace of their own (as root), and checks that
/// each of `promises` is in the output. After each block, nothing it started in the background may still
/// run: a block stops what it started (`kill $server; wait $server`), as a reader's next paste expects.
fn the_page_runs_as_written(page: &str, promises: &[&str]) {
    the_page_runs_with(page, promises, "")
}

/// [`the_page_runs_as_written`] with `exports` (`NAME=value …`) set in the page's shell: what a reader
/// sets up before pasting (a database to use).
fn the_page_runs_with(page: &str, promises: &[&str], exports: &str) {
    let text = std::fs::read_to_string(format!("{}/../../{page}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let blocks = blocks(&text);
    assert!(!blocks.is_empty(), "no sh block in {page}");
    let dir = tempfile::tempdir().unwrap();
    let bin = std::path::Path::new(CORRAL).parent().unwrap().display().to_string();
    let mut script = format!(
        "set -eE -o pipefail\n\
         trap 'echo \"{page}: exit status $? from: $BASH_COMMAND\" >&2' ERR\n\
         trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n\
         export PATH={bin}:$PATH XDG_DATA_HOME={dir}/data HOME={dir} {exports}\n\
         cd {dir}\n",
        dir = dir.path().display()
    );
    for (heading, block) in &blocks {
        let heading = heading.replace('\'', "");
        script.push_str(&format!(
            "echo '=== {page}: {heading}' >&2\n{block}\
             if [ -n \"$(jobs -rp)\" ]; then echo '{page}: {heading}: left running:' $(jobs -rp) >&2; exit 1; fi\n"
        ));
    }
    script.push_str("echo PAGE-DONE\n");
    let file = dir.path().join("page.sh");
    std::fs::write(&file, &script).unwrap();
    let netns = Netns::new("readme", &[]);
    let mut cmd = match &netns {
        Some(ns) => ns.command("bash"),
        None => Command::new("bash"),
    };
    let started = std::time::Instant::now();
    let o = run(cmd.arg(&file), Duration::from_secs(300));
    println!("{page}: {:.1} s", started.elapsed().as_secs_f64());
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
    let out = format!("{}{err}", stdout(&o));
    println!("{out}"); // shown by --nocapture, or when a promise below fails
    for promise in promises {
        assert!(out.contains(promise), "`{promise}` in the output of {page}:\n{out}");
    }
}

/// With CORRAL_INTEROP=1 (scripts/test.sh), the third-party programs a page runs where they are installed
/// (`command -v coap-client-gnutls && …`) must be installed, so that those lines run.
fn peers_when_interop(peers: &[&str]) {
    if std::env::var("CORRAL_INTEROP").as_deref() == Ok("1") {
        assert!(interop_enabled(peers));
    }
}

/// The pages whose `sh` blocks the tests below run; `every_page_with_sh_blocks_is_run` keeps the list whole.
const RUN: &[&str] = &[
    "README.md",
    "docs/gateway.md",
    "docs/safety.md",
    "docs/client.md",
    "docs/server.md",
    "docs/proxy.md",
    "docs/directory.md",
    "docs/streaming.md",
    "docs/oscore.md",
    "docs/dtls.md",
    "docs/link.md",
    "docs/lab.md",
    "docs/cluster.md",
];

#[test]
fn the_readme_runs_as_written() {
    the_page_runs_as_written("README.md", &["created room1", "\"bn\":\"em/room1/\"", "deleted lights"]);
}

#[test]
fn the_gateway_page_runs_as_written() {
    the_page_runs_as_written(
        "docs/gateway.md",
        &["\"ready\":true", "content-type: text/plain", "corral_em_member_answers_total"],
    );
}

#[test]
fn the_safety_page_runs_as_written() {
    the_page_runs_as_written(
        "docs/safety.md",
        &[
            "refused: 4",
            "port 22 is not an allowed member port",
            "may read entities, not manage them",
            "421\n403\n",
            "no change (only GET) unless the operator opens it (--http-hc-this-host)",
        ],
    );
}

#[test]
fn the_client_page_runs_as_written() {
    the_page_runs_as_written("docs/client.md", &["Hello from corral!"]);
}

#[test]
fn the_server_page_runs_as_written() {
    the_page_runs_as_written(
        "docs/server.md",
        &["Hello from corral!", "Location-Path: large-create", "</large-create/1>"],
    );
}

#[test]
fn the_proxy_page_runs_as_written() {
    the_page_runs_as_written("docs/proxy.md", &["Hello from corral!", "hits", "3 response(s)"]);
}

#[test]
fn the_directory_page_runs_as_written() {
    the_page_runs_as_written("docs/directory.md", &["rt=\"temperature\"", "dtls:alice", "rt=temperature"]);
}

#[test]
fn the_streaming_page_runs_as_written() {
    the_page_runs_as_written("docs/streaming.md", &["readings acknowledged"]);
}

#[test]
fn the_oscore_page_runs_as_written() {
    the_page_runs_as_written("docs/oscore.md", &["Hello from corral!", "refused: 4", "(member 01)"]);
}

#[test]
fn the_dtls_page_runs_as_written() {
    peers_when_interop(&["coap-client-gnutls", "coap-client-openssl"]);
    the_page_runs_as_written(
        "docs/dtls.md",
        &["Hello from corral!", "the server knows no key for this identity", "not signed by a trusted CA"],
    );
}

#[test]
fn the_link_page_runs_as_written() {
    let root = std::process::Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    if !root || !std::path::Path::new("/dev/net/tun").exists() {
        println!("skipped: corral link needs root and /dev/net/tun");
        return;
    }
    peers_when_interop(&["coap-server-notls", "coap-client-notls"]);
    the_page_runs_as_written("docs/link.md", &["Hello from corral!"]);
}

/// docs/cluster.md's one-machine block against a throwaway PostgreSQL (a Unix socket, which the page's
/// network namespace does not hide), named by the `PG*` variables as the page tells a reader to set them.
#[test]
fn the_cluster_page_runs_as_written() {
    let Some(pg) = corral_store::testing::for_test() else { return };
    let exports: Vec<String> = pg
        .url()
        .split_whitespace()
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            let name = match k {
                "host" => "PGHOST",
                "port" => "PGPORT",
                "user" => "PGUSER",
                "dbname" => "PGDATABASE",
                _ => return None,
            };
            Some(format!("{name}={v}"))
        })
        .collect();
    the_page_runs_with("docs/cluster.md", &["deleted"], &exports.join(" "));
}

#[test]
fn the_lab_page_runs_as_written() {
    the_page_runs_as_written("docs/lab.md", &["fig07-delay", "index.html"]);
}

/// Every page (the README, docs/, the crates' READMEs) with an `sh` block is in `RUN`: a page added later
/// cannot have commands no test runs. Blocks not meant to be run are fenced as `console`, `text`, `toml` ….
#[test]
fn every_page_with_sh_blocks_is_run() {
    let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let mut pages = vec!["README.md".to_string()];
    for dir in ["docs", "crates"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
            let p = entry.path();
            let p = if p.is_dir() { p.join("README.md") } else { p };
            if p.extension().is_some_and(|e| e == "md") && p.exists() {
                pages.push(p.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    for page in &pages {
        let text = std::fs::read_to_string(root.join(page)).unwrap();
        let has_sh = text.lines().any(|l| l == "```sh");
        assert_eq!(has_sh, RUN.contains(&page.as_str()), "{page}: sh blocks {has_sh}, run by a test {}", !has_sh);
    }
}

/// docs/library.md's example is `crates/corral-tokio/examples/library.rs` word for word, which the test
/// command compiles (`cargo test` builds every example): the page cannot show code that does not build.
#[test]
fn the_library_page_shows_the_example_that_compiles() {
    let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let page = std::fs::read_to_string(root.join("docs/library.md")).unwrap();
    let example = std::fs::read_to_string(root.join("crates/corral-tokio/examples/library.rs")).unwrap();
    let shown = page.split("```rust\n").nth(1).and_then(|b| b.split("\n```").next()).expect("a rust block");
    let body: String = example
        .lines()
        .skip_while(|l| !l.contains("// page: begin"))
        .skip(1)
        .take_while(|l| !l.contains("// page: end"))
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(shown.trim_end(), body.trim_end(), "docs/library.md's rust block and examples/library.rs differ");
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

/// The README stays a short map (issue 46): at most 300 lines, and its table lists every page under docs/.
#[test]
fn the_readme_is_a_short_map_of_every_page() {
    let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(readme.lines().count() <= 300, "README.md has {} lines", readme.lines().count());
    let map = readme.split("## Where to read on").nth(1).expect("the README's map");
    for entry in std::fs::read_dir(root.join("docs")).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.ends_with(".md") {
            assert!(map.contains(&format!("](docs/{name})")), "the README's map does not list docs/{name}");
        }
    }
}
