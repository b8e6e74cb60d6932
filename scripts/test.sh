#!/usr/bin/env bash
# The whole test suite: unit, property, pair, simulation and loopback tests, then interop tests against
# real peers (libcoap, aiocoap), installing those peers first when they are missing; then the checks of the
# house: no runtime in the sans-IO crates, no module circle within a crate, and the fuzz targets compile
# (a `cargo check` of fuzz/, a workspace of its own that `cargo test` never builds, on stable).
#
# Usage: scripts/test.sh            # everything
#        CORRAL_SKIP_INTEROP=1 scripts/test.sh   # Rust tests only (no apt/pip)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${CORRAL_SKIP_INTEROP:-}" ]; then
  scripts/install-peers.sh
  export CORRAL_INTEROP=1
fi

cargo test --workspace --release --locked
scripts/check-deps.sh
scripts/check-module-cycles.sh
cargo check --manifest-path fuzz/Cargo.toml --locked --bins --quiet
