#!/usr/bin/env bash
# Latency and CPU per request of `corral serve`, libcoap's `coap-server-notls` and a bare echo floor
# (scripts/coap-echo-floor.c), each under an independent closed-loop generator (coap-load from
# tools/coap-load, on go-coap), at 1 and 16 clients, in one run.
#
# Usage: scripts/bench-latency.sh [SECONDS] [ROUNDS] [extra `corral serve` args, e.g. --workers 2]
#   defaults: 5 seconds per measurement, 1 round; CON GET of / (all three answer ~90 bytes of text);
#   BENCH_PATH=/hello asks for another resource (libcoap answers it 4.04, counted as errors).
# Each server runs on CPU 0 and the generator on CPU 1 (taskset), as in bench-server.sh. For every server
# and client count it prints requests/s, p50/p99 latency as the generator sees it, and the server's CPU
# time per request (/proc/PID/stat, read after the generator's 1 s warm-up), and the ratio of each
# server's rate and CPU per request to the floor's. corral is `corral serve` as a user runs it (on Linux its workers
# sleep inside the receive call); corral-tokio is `corral serve --driver tokio` (a tokio runtime, as with
# --tcp); corral-busy is `corral serve --busy-poll $BUSY_POLL` (default 50 us, the tokio driver);
# corral-w2 (not run by default) is `corral serve --workers 2` on the CPUs W2_CPUS (default 0,1, so its
# second worker shares a core with the generator on a 2-core machine). Set SERVERS="floor corral"
# to choose, CLIENTS="1 16 64". BASE=path/to/another/corral adds a server corral-base run from that binary
# (an A/B comparison of a change, in the same run and rounds).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_=${1:-5}
ROUNDS=${2:-1}
shift $(( $# > 2 ? 2 : $# )) || true
SERVE_EXTRA=("$@")
SERVERS=${SERVERS:-"floor corral corral-tokio corral-busy libcoap${BASE:+ corral-base}"}
BUSY_POLL=${BUSY_POLL:-50}
CLIENTS=${CLIENTS:-"1 16"}
BENCH_PATH=${BENCH_PATH:-/}

command -v coap-server-notls >/dev/null || scripts/install-peers.sh
source scripts/bench-lib.sh
PIN_W2=()
if [ ${#PIN_SERVER[@]} -gt 0 ]; then PIN_W2=(taskset -c "${W2_CPUS:-0,1}"); fi
build_coap_load
FLOOR=target/bench/coap-echo-floor
if [ ! -x "$FLOOR" ] || [ scripts/coap-echo-floor.c -nt "$FLOOR" ]; then
  mkdir -p target/bench && cc -O2 -o "$FLOOR" scripts/coap-echo-floor.c
fi

SERVER_PID=""
bench_stop() { if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""; fi; }
trap bench_stop EXIT

bench_start() { # name port
  case $1 in
    floor) "${PIN_SERVER[@]}" "$FLOOR" 127.0.0.1 "$2" >/dev/null 2>&1 & ;;
    corral) "${PIN_SERVER[@]}" "$CORRAL" serve --bind "127.0.0.1:$2" -q "${SERVE_EXTRA[@]}" >/dev/null 2>&1 & ;;
    corral-busy) "${PIN_SERVER[@]}" "$CORRAL" serve --bind "127.0.0.1:$2" -q --busy-poll "$BUSY_POLL" "${SERVE_EXTRA[@]}" >/dev/null 2>&1 & ;;
    corral-tokio) "${PIN_SERVER[@]}" "$CORRAL" serve --bind "127.0.0.1:$2" -q --driver tokio "${SERVE_EXTRA[@]}" >/dev/null 2>&1 & ;;
    corral-base) "${PIN_SERVER[@]}" "$BASE" serve --bind "127.0.0.1:$2" -q "${SERVE_EXTRA[@]}" >/dev/null 2>&1 & ;;
    corral-w2) "${PIN_W2[@]}" "$CORRAL" serve --bind "127.0.0.1:$2" -q --workers 2 "${SERVE_EXTRA[@]}" >/dev/null 2>&1 & ;;
    libcoap) "${PIN_SERVER[@]}" coap-server-notls -A 127.0.0.1 -p "$2" >/dev/null 2>&1 & ;;
  esac
  SERVER_PID=$!
  wait_up "coap://127.0.0.1:$2$BENCH_PATH"
}

bench_measure() { # name port clients round
  load_measure "$1" "coap://127.0.0.1:$2$BENCH_PATH" "$3" "$SECONDS_" "$4" "$SERVER_PID"
}

TMP=$(mktemp -d)
RESULTS=$TMP/results
run_rounds "$ROUNDS" "$SERVERS" "$CLIENTS" "${SECONDS_}s"
summarize "$RESULTS" floor "CON GET /"
rm -rf "$TMP"
