#!/usr/bin/env bash
# Benchmarks `corral serve` and libcoap's `coap-server-notls` one after the other on loopback, with the
# same `corral bench` settings, and prints both rates and their ratio.
#
# Usage: scripts/bench-server.sh [CLIENTS] [SECONDS] [extra corral bench args, e.g. --non]
#   defaults: 16 clients, 5 seconds, CON GET of / (both servers answer / with ~100 bytes of text).
# The server runs on CPU 0 and the load generator on CPU 1 when `taskset` is available, so that each
# server gets one core, as a gateway would. On a 2-core machine one core of load generator rarely
# saturates a server, so the script also reads each server's CPU time (/proc/PID/stat) and prints the
# server CPU cost per request and the rate that implies for one fully used core.
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=${1:-16}
SECONDS_=${2:-5}
shift $(( $# > 2 ? 2 : $# )) || true
EXTRA=("$@")

command -v coap-server-notls >/dev/null || scripts/install-peers.sh
source scripts/bench-lib.sh
SERVER_PID=""
cleanup() { if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi; }
trap cleanup EXIT


bench() { # name port -> JSON line on stdout, with the server's CPU seconds added
  echo "== $1: corral bench coap://127.0.0.1:$2/ --clients $CLIENTS --duration $SECONDS_ ${EXTRA[*]:-}" >&2
  local before after json
  before=$(cpu_ticks "$SERVER_PID")
  json=$("${PIN_CLIENT[@]}" "$CORRAL" bench "coap://127.0.0.1:$2/" --clients "$CLIENTS" --duration "$SECONDS_" --json "${EXTRA[@]}")
  after=$(cpu_ticks "$SERVER_PID")
  python3 -c 'import json,sys; j=json.loads(sys.argv[1]); j["server_cpu_s"]=(int(sys.argv[2])-int(sys.argv[3]))/int(sys.argv[4]); print(json.dumps(j))' \
    "$json" "$after" "$before" "$(getconf CLK_TCK)"
}

PORT=$(free_port)
"${PIN_SERVER[@]}" "$CORRAL" serve --bind "127.0.0.1:$PORT" -q >/dev/null 2>&1 &
SERVER_PID=$!
wait_up "coap://127.0.0.1:$PORT/"
CORRAL_JSON=$(bench "corral serve" "$PORT")
cleanup; SERVER_PID=""

PORT=$(free_port)
"${PIN_SERVER[@]}" coap-server-notls -A 127.0.0.1 -p "$PORT" >/dev/null 2>&1 &
SERVER_PID=$!
wait_up "coap://127.0.0.1:$PORT/"
LIBCOAP_JSON=$(bench "libcoap coap-server-notls" "$PORT")
cleanup; SERVER_PID=""

python3 - "$CORRAL_JSON" "$LIBCOAP_JSON" <<'PY'
import json, sys
c, l = json.loads(sys.argv[1]), json.loads(sys.argv[2])
def cost(r):
    return r["server_cpu_s"] * 1e6 / r["requests"] if r["requests"] else float("nan")
def row(name, r):
    lat = r["latency_ms"]
    us = cost(r)
    print(f"{name:<26} {r['requests_per_s']:>8.0f} req/s  p50 {lat['p50']:.3f} ms  p99 {lat['p99']:.3f} ms  "
          f"max {lat['max']:.2f} ms  errors {r['errors']}  timeouts {r['timeouts']}  retx {r['retransmissions']}  "
          f"server CPU {us:.1f} us/req (= {1e6 / us:.0f} req/s per core)")
print()
row("corral serve", c)
row("libcoap coap-server-notls", l)
ratio = c["requests_per_s"] / l["requests_per_s"] if l["requests_per_s"] else float("inf")
print(f"ratio corral/libcoap: {ratio:.2f}x measured rate, {cost(l) / cost(c):.2f}x server CPU efficiency")
PY
