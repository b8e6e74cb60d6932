#!/usr/bin/env bash
# The Entity Manager's cost: a GET of an N-member unicast entity (delay=0, eo=avg) through
# `corral gateway`, against a client that sends the same N member GETs itself — concurrently across the
# members, NSTART=1 per member, as the EM does — in the same run, on loopback. The gateway and its N
# virtual devices (--testbed) share one process; the client is `corral entity bench` in another.
#
# Usage: scripts/bench-em.sh [MEMBERS] [REPETITIONS] [--json]     (defaults: 40 members, 500 repetitions)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-40}
REPS=${2:-500}
JSON=${3:-}
cargo build --release --locked -q -p corral
BIN=target/release/corral
DATA=$(mktemp -d)
"$BIN" gateway --bind 127.0.0.1:0 --testbed "$N" --testbed-from 127.0.200.1:0 --data "$DATA" --json -q \
  >"$DATA/gateway.json" 2>"$DATA/gateway.err" &
GW=$!
trap 'kill $GW 2>/dev/null || true; wait $GW 2>/dev/null || true; rm -rf "$DATA"' EXIT
for _ in $(seq 100); do [ -s "$DATA/gateway.json" ] && break; sleep 0.1; done
[ -s "$DATA/gateway.json" ] || { echo "the gateway did not start:" >&2; cat "$DATA/gateway.err" >&2; exit 1; }
read -r URI MEMBERS < <(python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
print(j["uri"], " ".join("coap://%s/s/t" % d for d in j["devices"]))' "$DATA/gateway.json")
# shellcheck disable=SC2086  # one argument per member
"$BIN" entity create bench --eo avg --gateway "$URI" -q $MEMBERS >/dev/null
echo "gateway $URI, $N virtual devices on 127.0.200.1 …, $(nproc) CPU(s): $(uname -sr)" >&2
"$BIN" entity bench bench --repeat "$REPS" --gateway "$URI" ${JSON:+--json}
