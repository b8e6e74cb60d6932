#!/usr/bin/env bash
# The gateway's deterministic simulation test (issue 44, crates/corral-dst): seeds 1..SEEDS, each one
# virtual hour of the real Entity Manager with 20 virtual devices and a client under faults in random
# combination (gateway crashes with restarts from a simulated store that loses what it never acknowledged,
# a slow, unavailable or failing store, device reboots, partitions, loss bursts), the invariants checked at
# every restart and at quiescence. Ends with one line:
#
#   dst: N seeds, V virtual s in W s (R× real time), F failures
#
# and exits non-zero when F > 0. A failing seed prints its violations and the command that replays it.
#
# Usage: scripts/dst.sh [SEEDS] [--hours H] [--first S] [-q]     default: 200 seeds of 1 hour
#        scripts/dst.sh --defects                                the injectable defects, one a line
#
#   CORRAL_DST_DEFECT=NAME   run with that defect switched on (the harness must catch it)
#   CORRAL_DST_SEED=N        run only seed N (replaying a failure)
#   CORRAL_DST_LOG=1         tell the seed's story on stderr
#   CORRAL_DST_STRICT=1      fail on the known defects too (crates/corral-dst/src/lib.rs lists them)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -q -p corral-dst
exec target/release/corral-dst "$@"
