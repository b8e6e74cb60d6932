#!/usr/bin/env bash
# What being watched costs the data path, and what the HTTP→CoAP cross-proxy delivers (the operator's
# window, `--http`), in one run, under go-coap's coap-load as in bench-latency.sh and bench-gateway.sh:
#
#   serve        `corral serve`, CON GET / (the baseline of the next two)
#   serve-http   the same with --http (the listener open, nobody asking)
#   serve-scraped  the same with --http and a GET /metrics every 100 ms (one kept-alive connection, as
#                Prometheus keeps one; on the generator's CPU)
#   gw           `corral gateway`, GET /em/room?eo=avg of a unicast entity of MEMBERS devices (the
#                baseline of the next two)
#   gw-http, gw-scraped   as for serve
#   direct       CON GET / straight to a `corral serve` origin (the baseline of hc)
#   hc           HTTP/1.1 GET of the gateway's /hc/coap://127.0.0.1:ORIGIN/ (coap-load's HTTP mode, one
#                kept-alive connection per client): the same answer through the cross-proxy
#
# For each: requests/s, p50/p99 latency at the generator, and CPU time per request of the process under
# test (/proc/PID/stat, all threads) — serve's, the gateway's, and for direct the origin's and for hc the
# gateway's (so hc's CPU ratio is the cross-proxy's cost per request against the origin's own, not a
# like-for-like comparison; its rate and latency ratios are). The scraper runs on the client CPU, so what
# it costs the server is the server answering it, which is what a Prometheus server costs too.
#
# Usage: scripts/bench-http.sh [SECONDS] [ROUNDS]        defaults: 5 seconds per measurement, 1 round
#   NAMES="serve serve-http serve-scraped gw gw-http gw-scraped direct hc" to choose, CLIENTS="16",
#   MEMBERS=3, SCRAPE=0.1 (seconds between scrapes). The process under test runs on CPU 0; the
#   generator, the devices, the origin and the scraper on CPU 1 (taskset), as in the other scripts.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_=${1:-5}
ROUNDS=${2:-1}
NAMES=${NAMES:-"serve serve-http serve-scraped gw gw-http gw-scraped direct hc"}
CLIENTS=${CLIENTS:-"16"}
MEMBERS=${MEMBERS:-3}
SCRAPE=${SCRAPE:-0.1}

source scripts/bench-lib.sh
build_coap_load
command -v curl >/dev/null || { echo "bench-http.sh needs curl (apt-get install curl)" >&2; exit 1; }

TMP=$(mktemp -d)
PID_=""; SCRAPER=""; HTTP_PORT=""
bench_stop() {
  if [ -n "$SCRAPER" ]; then kill "$SCRAPER" 2>/dev/null || true; wait "$SCRAPER" 2>/dev/null || true; SCRAPER=""; fi
  if [ -n "$PID_" ]; then kill "$PID_" 2>/dev/null || true; wait "$PID_" 2>/dev/null || true; PID_=""; fi
}
OTHERS=()
cleanup() { bench_stop; for p in "${OTHERS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
trap cleanup EXIT

# The devices of the gateway's entity and the origin of direct and hc, on the client CPU.
DPORT=$(free_port)
"${PIN_CLIENT[@]}" "$CORRAL" device --bind "127.0.77.1:$DPORT" --count "$MEMBERS" -q >/dev/null 2>&1 &
OTHERS+=($!)
wait_up "coap://127.0.77.1:$DPORT/s/t"
MEMBER_URIS=()
for i in $(seq 1 "$MEMBERS"); do MEMBER_URIS+=("coap://127.0.77.$i:$DPORT/s/t"); done
ORIGIN=$(free_port)
"${PIN_CLIENT[@]}" "$CORRAL" serve --bind "127.0.0.1:$ORIGIN" -q >/dev/null 2>&1 &
OTHERS+=($!)
ORIGIN_PID=$!
wait_up "coap://127.0.0.1:$ORIGIN/"

wait_http() { # url
  for _ in $(seq 1 50); do
    if curl -sf -o /dev/null "$1"; then return 0; fi
    sleep 0.1
  done
  echo "$1 did not come up" >&2; exit 1
}

scrape() { # http port: GET /metrics every $SCRAPE s on one kept-alive connection, as Prometheus does
  "${PIN_CLIENT[@]}" python3 - "$1" "$SCRAPE" <<'PY' &
import http.client, sys, time
port, every = int(sys.argv[1]), float(sys.argv[2])
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
while True:
    conn.request("GET", "/metrics")
    conn.getresponse().read()
    time.sleep(every)
PY
  SCRAPER=$!
}

bench_start() { # name port
  local http=()
  case $1 in
    *-http|*-scraped|hc) HTTP_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
      http=(--http "127.0.0.1:$HTTP_PORT") ;;
  esac
  case $1 in
    serve*)
      "${PIN_SERVER[@]}" "$CORRAL" serve --bind "127.0.0.1:$2" -q "${http[@]}" >/dev/null 2>&1 &
      PID_=$!
      wait_up "coap://127.0.0.1:$2/" ;;
    gw*|hc)
      "${PIN_SERVER[@]}" "$CORRAL" gateway --bind "127.0.0.1:$2" --data "$TMP/$1-$RANDOM" \
        --member-port "$DPORT,$ORIGIN" -q "${http[@]}" >/dev/null 2>&1 &
      PID_=$!
      wait_up "coap://127.0.0.1:$2/em"
      if [ "$1" != hc ]; then "$CORRAL" entity create room "${MEMBER_URIS[@]}" --eo avg --gateway "coap://127.0.0.1:$2" -q >/dev/null; fi ;;
    direct) PID_="" ;;
  esac
  if [ ${#http[@]} -gt 0 ]; then wait_http "http://127.0.0.1:$HTTP_PORT/healthz"; fi
  case $1 in *-scraped) scrape "$HTTP_PORT" ;; esac
}

bench_measure() { # name port clients round
  case $1 in
    serve*) load_measure "$1" "coap://127.0.0.1:$2/" "$3" "$SECONDS_" "$4" "$PID_" ;;
    gw*) load_measure "$1" "coap://127.0.0.1:$2/em/room?eo=avg" "$3" "$SECONDS_" "$4" "$PID_" ;;
    direct) load_measure "$1" "coap://127.0.0.1:$ORIGIN/" "$3" "$SECONDS_" "$4" "$ORIGIN_PID" ;;
    hc) load_measure "$1" "http://127.0.0.1:$HTTP_PORT/hc/coap://127.0.0.1:$ORIGIN/" "$3" "$SECONDS_" "$4" "$PID_" ;;
  esac
}

RESULTS=$TMP/results
run_rounds "$ROUNDS" "$NAMES" "$CLIENTS" "${SECONDS_}s"
for section in "serve:serve:corral serve, CON GET /" "gw:gw:corral gateway, GET /em/room?eo=avg of $MEMBERS members" \
  "direct hc:direct:HTTP→CoAP cross-proxy against CoAP straight to the origin"; do
  IFS=: read -r names base title <<<"$section"
  pattern=$(echo "$names" | sed 's/ /|/g')
  grep -E "^($pattern)(-[a-z]+)? " "$RESULTS" >"$TMP/part" || continue
  summarize "$TMP/part" "$base" "$title"
done
