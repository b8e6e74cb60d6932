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
stop_gateway() { if [ -n "$GW_PID" ]; then kill "$GW_PID" 2>/dev/null || true; wait "$GW_PID" 2>/dev/null || true; GW_PID=""; fi; }
cleanup() { stop_gateway; if [ -n "$DEV_PID" ]; then kill "$DEV_PID" 2>/dev/null || true; wait "$DEV_PID" 2>/dev/null || true; fi; rm -rf "$TMP"; }
trap cleanup EXIT

DPORT=$(free_port)
"${PIN_CLIENT[@]}" "$CORRAL" device --bind "127.0.77.1:$DPORT" --count "$MEMBERS" -q >/dev/null 2>&1 &
DEV_PID=$!
wait_up "coap://127.0.77.1:$DPORT/s/t"
MEMBER_URIS=()
for i in $(seq 1 "$MEMBERS"); do MEMBER_URIS+=("coap://127.0.77.$i:$DPORT/s/t"); done

start_gateway() { # config port
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

measure() { # config port clients round
  load_measure "$1" "coap://127.0.0.1:$2/em/room?eo=avg" "$3" "$SECONDS_" "$4" "$GW_PID"
}

RESULTS=$TMP/results
for round in $(seq 1 "$ROUNDS"); do
  for cfg in $CONFIGS; do
    PORT=$(free_port)
    start_gateway "$cfg" "$PORT"
    for c in $CLIENTS; do
      echo "== round $round: $cfg, $c clients, ${SECONDS_}s, $MEMBERS members" >&2
      measure "$cfg" "$PORT" "$c" "$round" | tee -a "$RESULTS" >&2
    done
    stop_gateway
  done
done

python3 - "$RESULTS" "$MEMBERS" <<'PY'
import sys, collections, statistics
rows = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    n, c, rate, p50, p99, cpu, bad, rnd = line.split()
    rows[(n, int(c))][rnd] = (float(rate), float(p50), float(p99), float(cpu), int(bad))
def cell(xs, fmt):
    med = statistics.median(xs)
    return fmt.format(med) if len(xs) == 1 else (fmt + " [" + fmt + "-" + fmt + "]").format(med, min(xs), max(xs))
print(f"\nGET /em/room?eo=avg, {sys.argv[2]} members; median [min-max] over the rounds; x w1: against one worker in the same round")
print(f"{'config':<9} {'clients':>7} {'req/s':>22} {'x w1':>18} {'p50 us':>16} {'p99 us':>18} {'CPU us/req':>22} {'x w1':>18} errors")
for (n, c), v in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    base = rows.get(("w1", c), {})
    col = lambda i, fmt: cell([r[i] for r in v.values()], fmt)
    ratio = lambda i: cell([r[i] / base[k][i] for k, r in v.items() if k in base], "{:.2f}") if base else "-"
    print(f"{n:<9} {c:>7} {col(0, '{:.0f}'):>22} {ratio(0):>18} {col(1, '{:.0f}'):>16} {col(2, '{:.0f}'):>18} "
          f"{col(3, '{:.2f}'):>22} {ratio(3):>18} {sum(r[4] for r in v.values())}")
PY
