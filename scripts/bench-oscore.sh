#!/usr/bin/env bash
# What OSCORE costs per request: one `corral serve --credentials` (it serves plain and protected requests
# alike), loaded by `corral bench` without and with `--credentials`, one after the other in one run.
# Prints requests/s, latency and the server's CPU time per request for both (server pinned to CPU 0 and
# the load generator to CPU 1 when taskset is available).
#
# Usage: scripts/bench-oscore.sh [CLIENTS] [SECONDS]     defaults: 16 clients, 5 seconds
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=${1:-16}
SECONDS_=${2:-5}
source scripts/bench-lib.sh
PORT=$(free_port)
KEYS=$(mktemp -d)
SERVER_PID=""
cleanup() { [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$KEYS"; }
trap cleanup EXIT
"$CORRAL" oscore new --server "coap://127.0.0.1:$PORT" --dir "$KEYS" -q
"${PIN_SERVER[@]}" "$CORRAL" serve --bind "127.0.0.1:$PORT" --credentials "$KEYS/server.json" -q >/dev/null 2>&1 &
SERVER_PID=$!
wait_up "coap://127.0.0.1:$PORT/hello"
PLAIN=$(bench_cpu "plain CoAP" "$SERVER_PID" "coap://127.0.0.1:$PORT/hello")
PROTECTED=$(bench_cpu "OSCORE" "$SERVER_PID" "coap://127.0.0.1:$PORT/hello" --credentials "$KEYS/client.json")
python3 - "$PLAIN" "$PROTECTED" <<'PY'
import json, sys
rows = [json.loads(a) for a in sys.argv[1:]]
print()
for r in rows:
    n = r["requests"] or 1
    print(f"{r['name']:<11} {r['requests_per_s']:>8.0f} req/s  p50 {r['latency_ms']['p50']:.3f} ms  p99 {r['latency_ms']['p99']:.3f} ms  "
          f"errors {r['errors']}  timeouts {r['timeouts']}  server CPU {r['server_cpu_s'] * 1e6 / n:.1f} us/req")
a, b = rows
print(f"OSCORE adds {(b['server_cpu_s'] / (b['requests'] or 1) - a['server_cpu_s'] / (a['requests'] or 1)) * 1e6:.1f} us of server CPU per request")
PY
