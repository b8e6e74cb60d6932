#!/usr/bin/env bash
# What DTLS costs: `corral bench` against `corral serve` over plain CoAP and over coaps:// (DTLS 1.2 PSK,
# TLS_PSK_WITH_AES_128_CCM_8), and against libcoap's `coap-server-openssl` over both, one after the other
# in one run; then full handshakes per second (`--full-handshakes`: every request on a new session,
# cookie exchange included) against both servers. Prints requests/s, latency and the server's CPU time
# per request (server pinned to CPU 0 and the load generator to CPU 1 when taskset is available).
# Targets (issue 30): corral's CPU per request over DTLS ≤ 1.5× its plain CoAP; CPU per request and
# handshakes per second ahead of libcoap's in the same run.
#
# Usage: scripts/bench-dtls.sh [CLIENTS] [SECONDS]     defaults: 16 clients, 5 seconds
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=${1:-16}
SECONDS_=${2:-5}
command -v coap-server-openssl >/dev/null || scripts/install-peers.sh
source scripts/bench-lib.sh
KEYS=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$KEYS"; }
trap cleanup EXIT
echo '{"alice": "secretPSK"}' >"$KEYS/psk.json"

CORRAL_PORT=$(free_port)
CORRAL_DTLS=$(free_port)
"${PIN_SERVER[@]}" "$CORRAL" serve --bind "127.0.0.1:$CORRAL_PORT" --dtls "127.0.0.1:$CORRAL_DTLS" \
  --psk-file "$KEYS/psk.json" -q >/dev/null 2>&1 &
CORRAL_PID=$!; PIDS+=("$CORRAL_PID")
wait_up "coap://127.0.0.1:$CORRAL_PORT/hello"

# libcoap serves coaps:// on its -p port + 1.
LIBCOAP_PORT=$(free_port)
"${PIN_SERVER[@]}" coap-server-openssl -A 127.0.0.1 -p "$LIBCOAP_PORT" -k secretPSK >/dev/null 2>&1 &
LIBCOAP_PID=$!; PIDS+=("$LIBCOAP_PID")
wait_up "coap://127.0.0.1:$LIBCOAP_PORT/"

PSK=(-k secretPSK -u alice)
ROWS=()
ROWS+=("$(bench_cpu "corral plain" "$CORRAL_PID" "coap://127.0.0.1:$CORRAL_PORT/hello")")
ROWS+=("$(bench_cpu "corral DTLS" "$CORRAL_PID" "coaps://127.0.0.1:$CORRAL_DTLS/hello" "${PSK[@]}")")
ROWS+=("$(bench_cpu "libcoap plain" "$LIBCOAP_PID" "coap://127.0.0.1:$LIBCOAP_PORT/")")
ROWS+=("$(bench_cpu "libcoap DTLS" "$LIBCOAP_PID" "coaps://127.0.0.1:$((LIBCOAP_PORT + 1))/" "${PSK[@]}")")
ROWS+=("$(bench_cpu "corral handshakes" "$CORRAL_PID" "coaps://127.0.0.1:$CORRAL_DTLS/hello" "${PSK[@]}" --full-handshakes)")
ROWS+=("$(bench_cpu "libcoap handshakes" "$LIBCOAP_PID" "coaps://127.0.0.1:$((LIBCOAP_PORT + 1))/" "${PSK[@]}" --full-handshakes)")
python3 - "${ROWS[@]}" <<'PY'
import json, sys
rows = {r["name"]: r for r in map(json.loads, sys.argv[1:])}
def cpu(r): return r["server_cpu_s"] * 1e6 / (r["requests"] or 1)
print()
for name, r in rows.items():
    print(f"{name:<19} {r['requests_per_s']:>8.0f} req/s  p50 {r['latency_ms']['p50']:.3f} ms  p99 {r['latency_ms']['p99']:.3f} ms  "
          f"errors {r['errors']}  timeouts {r['timeouts']}  server CPU {cpu(r):.1f} us/req")
c, cd, l, ld = (rows[n] for n in ("corral plain", "corral DTLS", "libcoap plain", "libcoap DTLS"))
ch, lh = rows["corral handshakes"], rows["libcoap handshakes"]
print(f"corral: DTLS costs {cpu(cd) / cpu(c):.2f}x the server CPU per request of plain CoAP (target <= 1.5x)")
print(f"libcoap: DTLS costs {cpu(ld) / cpu(l):.2f}x")
print(f"DTLS, server CPU per request: corral {cpu(cd):.1f} us, libcoap {cpu(ld):.1f} us ({cpu(ld) / cpu(cd):.2f}x corral's)")
print(f"full handshakes/s: corral {ch['requests_per_s']:.0f} ({cpu(ch):.0f} us of server CPU each), "
      f"libcoap {lh['requests_per_s']:.0f} ({cpu(lh):.0f} us each)")
PY
