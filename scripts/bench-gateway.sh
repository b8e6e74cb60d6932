#!/usr/bin/env bash
# The gateway under an independent closed-loop generator (go-coap's coap-load, as in bench-latency.sh):
# `GET /em/room?eo=avg` of a unicast entity of MEMBERS devices (each client request is MEMBERS member
# exchanges and one answer), with one worker and with two (`corral gateway --workers 2`), in one run.
#
# Usage: scripts/bench-gateway.sh [SECONDS] [ROUNDS]      defaults: 5 seconds per measurement, 1 round
# Configurations (CONFIGS, default "w1 w2-core0 w2"):
#   w1        one worker on CPU 0 (the baseline of every ratio)
#   w2-core0  two workers, both on CPU 0: what sharding costs when it cannot add a core
#   w2        two workers on CPUs 0 and 1 (on a 2-core machine the second shares CPU 1 with the generator
#             and the devices, so it shows the sharing works under load, not how far it scales)
#   w1-tokio  one worker on CPU 0 driven by a tokio runtime (`--driver tokio`, the driver before the
#             blocking one became the gateway's default)
# The devices (`corral device --count MEMBERS`, default 3) and the generator run on CPU 1. For every
# configuration it prints client requests/s, p50/p99 latency, the gateway's CPU time per client request
# (/proc/PID/stat over all its threads) and both relative to w1 in the same round. CLIENTS="16" by default.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_=${1:-5}
ROUNDS=${2:-1}
CONFIGS=${CONFIGS:-"w1 w2-core0 w2 w1-tokio"}
CLIENTS=${CLIENTS:-"16"}
MEMBERS=${MEMBERS:-3}

source scripts/bench-lib.sh
build_coap_load

TMP=$(mktemp -d)
GW_PID=""; DEV_PID=""
bench_stop() { if [ -n "$GW_PID" ]; then kill "$GW_PID" 2>/dev/null || true; wait "$GW_PID" 2>/dev/null || true; GW_PID=""; fi; }
cleanup() { bench_stop; if [ -n "$DEV_PID" ]; then kill "$DEV_PID" 2>/dev/null || true; wait "$DEV_PID" 2>/dev/null || true; fi; rm -rf "$TMP"; }
trap cleanup EXIT

DPORT=$(free_port)
"${PIN_CLIENT[@]}" "$CORRAL" device --bind "127.0.77.1:$DPORT" --count "$MEMBERS" -q >/dev/null 2>&1 &
DEV_PID=$!
wait_up "coap://127.0.77.1:$DPORT/s/t"
MEMBER_URIS=()
for i in $(seq 1 "$MEMBERS"); do MEMBER_URIS+=("coap://127.0.77.$i:$DPORT/s/t"); done

bench_start() { # config port
  local pin=() workers=1 driver=()
  case $1 in
    w1) pin=("${PIN_SERVER[@]}") ;;
    w1-tokio) pin=("${PIN_SERVER[@]}"); driver=(--driver tokio) ;;
    w2-core0) pin=("${PIN_SERVER[@]}"); workers=2 ;;
    w2) if [ ${#PIN_SERVER[@]} -gt 0 ]; then pin=(taskset -c 0,1); fi; workers=2 ;;
  esac
  "${pin[@]}" "$CORRAL" gateway --bind "127.0.0.1:$2" --workers "$workers" "${driver[@]}" --data "$TMP/$1-$RANDOM" \
    --member-port "$DPORT" -q >/dev/null 2>&1 &
  GW_PID=$!
  wait_up "coap://127.0.0.1:$2/em"
  "$CORRAL" entity create room "${MEMBER_URIS[@]}" --eo avg --gateway "coap://127.0.0.1:$2" -q
}

bench_measure() { # config port clients round
  load_measure "$1" "coap://127.0.0.1:$2/em/room?eo=avg" "$3" "$SECONDS_" "$4" "$GW_PID"
}

RESULTS=$TMP/results
run_rounds "$ROUNDS" "$CONFIGS" "$CLIENTS" "${SECONDS_}s, $MEMBERS members"
summarize "$RESULTS" w1 "GET /em/room?eo=avg, $MEMBERS members"
