#!/usr/bin/env bash
# Benchmarks `corral proxy` and libcoap's forward proxy (`coap-server-notls -P`) under the same
# `corral bench` load, one after the other on loopback, in front of one `corral serve` origin:
#
#   hits      CLIENTS clients, CON GET of one resource: a caching proxy answers from its cache
#   misses    every request a different resource (--distinct): each one is forwarded
#   same      CLIENTS clients, one resource, corral's cache off (--cache-entries 0): what aggregation saves
#
# For each: requests/s and latency at the clients, the proxy's CPU time per request (/proc/PID/stat) and
# the origin's requests per client request (its /stats requests_in), which aggregation drives toward
# 1/CLIENTS and a cache toward 0.
#
# Usage: scripts/bench-proxy.sh [CLIENTS] [SECONDS]      defaults: 16 clients, 5 seconds
# The proxy runs on CPU 0, the load generator and the origin on CPU 1 when `taskset` is available.
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=${1:-16}
SECONDS_=${2:-5}

command -v coap-server-notls >/dev/null || scripts/install-peers.sh
source scripts/bench-lib.sh
PIN_PROXY=("${PIN_SERVER[@]}"); PIN_OTHER=("${PIN_CLIENT[@]}")
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; PIDS=(); }
trap cleanup EXIT

origin_requests() { "$CORRAL" get "coap://127.0.0.1:$ORIGIN/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests_in"])'; }

ORIGIN=$(free_port)
"${PIN_OTHER[@]}" "$CORRAL" serve --bind "127.0.0.1:$ORIGIN" -q >/dev/null 2>&1 &
ORIGIN_PID=$!
trap 'cleanup; kill $ORIGIN_PID 2>/dev/null || true' EXIT
wait_up "coap://127.0.0.1:$ORIGIN/hello"

run() { # proxy-name scenario proxy-pid proxy-port [bench args…] -> JSON line
  local name=$1 scenario=$2 pid=$3 port=$4; shift 4
  echo "== $name, $scenario: corral bench coap://127.0.0.1:$ORIGIN/hello -P coap://127.0.0.1:$port --clients $CLIENTS --duration $SECONDS_ $*" >&2
  local before after o_before o_after json
  o_before=$(origin_requests); before=$(cpu_ticks "$pid")
  json=$("${PIN_OTHER[@]}" "$CORRAL" bench "coap://127.0.0.1:$ORIGIN/hello" -P "coap://127.0.0.1:$port" \
        --clients "$CLIENTS" --duration "$SECONDS_" --json -q "$@")
  after=$(cpu_ticks "$pid"); o_after=$(origin_requests)
  python3 -c 'import json,sys; j=json.loads(sys.argv[1]); j["proxy"]=sys.argv[2]; j["scenario"]=sys.argv[3];
j["proxy_cpu_s"]=(int(sys.argv[4])-int(sys.argv[5]))/int(sys.argv[6]); j["origin_requests"]=int(sys.argv[7])-int(sys.argv[8])-1; print(json.dumps(j))' \
    "$json" "$name" "$scenario" "$after" "$before" "$(getconf CLK_TCK)" "$o_after" "$o_before"
}

start_corral() { # extra args -> sets PROXY_PID PROXY_PORT
  PROXY_PORT=$(free_port)
  "${PIN_PROXY[@]}" "$CORRAL" proxy --bind "127.0.0.1:$PROXY_PORT" -q "$@" >/dev/null 2>&1 &
  PROXY_PID=$!; PIDS+=("$PROXY_PID")
  wait_up "coap://127.0.0.1:$PROXY_PORT/proxy"
}
start_libcoap() {
  PROXY_PORT=$(free_port)
  "${PIN_PROXY[@]}" coap-server-notls -A 127.0.0.1 -p "$PROXY_PORT" -P ",bench-proxy" >/dev/null 2>&1 &
  PROXY_PID=$!; PIDS+=("$PROXY_PID")
  wait_up "coap://127.0.0.1:$PROXY_PORT/"
}

RESULTS=()
start_corral
RESULTS+=("$(run "corral proxy" hits "$PROXY_PID" "$PROXY_PORT")")
RESULTS+=("$(run "corral proxy" misses "$PROXY_PID" "$PROXY_PORT" --distinct)")
cleanup
start_corral --cache-entries 0
RESULTS+=("$(run "corral proxy" same "$PROXY_PID" "$PROXY_PORT")")
cleanup
start_libcoap
RESULTS+=("$(run "libcoap -P" hits "$PROXY_PID" "$PROXY_PORT")")
RESULTS+=("$(run "libcoap -P" misses "$PROXY_PID" "$PROXY_PORT" --distinct)")
RESULTS+=("$(run "libcoap -P" same "$PROXY_PID" "$PROXY_PORT")")
cleanup

python3 - "${RESULTS[@]}" <<'PY'
import json, sys
rows = [json.loads(a) for a in sys.argv[1:]]
print()
print(f"{'proxy':<14} {'scenario':<8} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} {'timeouts':>8} "
      f"{'proxy CPU us/req':>16} {'origin req per client req':>26}")
for r in rows:
    n = r["requests"] or 1
    print(f"{r['proxy']:<14} {r['scenario']:<8} {r['requests_per_s']:>8.0f} {r['latency_ms']['p50']:>8.3f} "
          f"{r['latency_ms']['p99']:>8.3f} {r['errors']:>7} {r['timeouts']:>8} {r['proxy_cpu_s'] * 1e6 / n:>16.1f} "
          f"{r['origin_requests'] / n:>26.3f}")
PY
