//! corral-group's integration tests as one test binary: every file is one area (its module docs say which),
//! sharing `tests/common`. One binary rather than one per file because each links the Entity Manager and
//! the SQLite store; the tests still run as many at a time as before (the machine's cores).
//! A new file here must be declared below; `every_file_here_is_declared` fails otherwise. Run one file's
//! tests with `cargo test --release -p corral-group --test suite em::`.

#[path = "../common/mod.rs"]
mod common;

mod crash;
mod device;
mod em;
mod follow;
mod hostile;
mod lifecycle;
mod membership;
mod observe;
mod policy;
mod proof;
mod quotas;
mod repair;
mod robustness;
mod shards;
mod writes;

/// Every `.rs` file beside this one is a module of this binary: cargo builds only what is declared here, so
/// a file someone adds and forgets to declare would never run.
#[test]
fn every_file_here_is_declared() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/suite");
    let main = std::fs::read_to_string(dir.join("main.rs")).unwrap();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if let Some(module) = name.strip_suffix(".rs").filter(|m| *m != "main") {
            assert!(main.contains(&format!("\nmod {module};\n")), "tests/suite/{name} is not declared in main.rs");
        }
    }
}
