//! The command-line, loopback, attack and interop tests of the `corral` executable, as one test binary.
//!
//! Each file is one area's tests (its module docs say which); they share `tests/common` (the built binary,
//! peers with time limits, servers on ephemeral ports, throwaway network namespaces). They are one binary
//! rather than one per file because every test binary links the whole workspace: 40 of them cost CI's two
//! cores minutes of linking, and the tests inside one binary still run two at a time, as before.
//!
//! A new file here must be declared below; `every_file_here_is_declared` fails otherwise. Run one area
//! with `cargo test --release -p corral --test e2e gateway::`. `readme.rs`, `lab.rs` and
//! `lab_procedures.rs` stay binaries of their own: they run long real-time programs (the docs' blocks,
//! seed 004 over `corral link`) whose timing other tests must not share.

#[path = "../common/mod.rs"]
mod common;
mod spoof;

mod abuse;
mod attack_carpet;
mod attack_dtls;
mod attack_endpoint;
mod attack_gateway;
mod attack_proxy;
mod attack_proxy_cache;
mod attack_stream;
mod attack_window;
mod cli;
mod cluster;
mod console_browser;
mod dead_peer;
mod dtls;
mod dtls_bench;
mod dtls_cert;
mod dtls_gateway;
mod dtls_proxy;
mod dtls_rpk;
mod exit_codes;
mod flags;
mod gateway;
mod group_oscore;
mod help;
mod http;
mod interop;
mod interop_dtls;
mod interop_dtls_cert;
mod interop_dtls_cid;
mod interop_dtls_mixed;
mod interop_dtls_rpk;
mod interop_rd;
mod interop_tls;
mod link;
mod oscore;
mod oscore_bench;
mod output;
mod plugtest;
mod proxy;
mod proxy_group;
mod proxy_group_cache;
mod rd;
mod rd_fib;
mod rd_follow;
mod rd_groups;
mod rd_policy;
mod stream;
mod tls;
mod wait;

/// Every `.rs` file beside this one is a module of this binary: cargo builds only what is declared here, so
/// a file someone adds and forgets to declare would never run.
#[test]
fn every_file_here_is_declared() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e");
    let main = std::fs::read_to_string(dir.join("main.rs")).unwrap();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if let Some(module) = name.strip_suffix(".rs").filter(|m| *m != "main") {
            assert!(main.contains(&format!("\nmod {module};\n")), "tests/e2e/{name} is not declared in main.rs");
        }
    }
}
