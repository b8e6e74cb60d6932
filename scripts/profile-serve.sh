#!/usr/bin/env bash
# Where `corral serve`'s user-space work per request goes, counted rather than timed: the server runs under
# valgrind's callgrind (instructions executed, collected only inside the serving thread's loop) while
# go-coap's coap-load sends CON GET / from one closed-loop client, so every request is one wake-up of the
# server and the counts do not depend on this machine's noise. Prints user-space instructions and heap
# allocations per request, the allocation sites, and the functions that take the most instructions
# (inclusive), each per request. The kernel's share (the system calls) is not counted: bench-latency.sh
# measures the whole CPU time against the echo floor.
#
# Usage: scripts/profile-serve.sh [SECONDS] [BINARY]
#   defaults: 10 seconds; target/profiling/corral (built: the release profile with line tables). BINARY=path/to/another/corral profiles that one,
#   e.g. a build of the previous commit, for an A/B comparison of a change. BENCH_PATH=/hello asks for
#   another resource than / (as in bench-latency.sh). SERVE_EXTRA="--http 127.0.0.1:9100" adds arguments
#   to `corral serve` (the instructions counted are still the serving thread's: what the data path pays
#   for being watched, with a scraper of your own on that port).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_=${1:-10}
if ! command -v valgrind >/dev/null; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "installing valgrind" >&2
    apt-get install -y -q valgrind >/dev/null
  else
    echo "profile-serve.sh needs valgrind: apt-get install valgrind (as root)" >&2; exit 1
  fi
fi
source scripts/bench-lib.sh
# The release code with line tables, so that inlined functions keep their names (Cargo.toml's profiling).
if [ -z "${2:-}" ]; then cargo build --profile profiling --locked -q --workspace --bin corral; fi
BIN=${2:-target/profiling/corral}
BENCH_PATH=${BENCH_PATH:-/}
build_coap_load

OUT=$(mktemp -d)
PORT=$(free_port)
"${PIN_SERVER[@]}" valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.out" \
  --toggle-collect='corral_tokio::*BlockingServer::run' \
  "$BIN" serve --bind "127.0.0.1:$PORT" -q ${SERVE_EXTRA:-} >/dev/null 2>"$OUT/valgrind.err" &
SERVER_PID=$!
trap 'kill $SERVER_PID 2>/dev/null || true' EXIT
# Valgrind starts slowly: about a minute at most for the first answer.
for _ in $(seq 1 60); do
  if "$CORRAL" get "coap://127.0.0.1:$PORT$BENCH_PATH" -q --timeout 1 >/dev/null 2>&1; then break; fi
  sleep 0.5
done
echo "== callgrind: $BIN serve, coap-load 1 client, ${SECONDS_}s" >&2
"${PIN_CLIENT[@]}" "$LOAD" -uri "coap://127.0.0.1:$PORT$BENCH_PATH" -c 1 -d "${SECONDS_}s" -warmup 1s >"$OUT/load.txt" 2>&1
kill -INT "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null || true
trap - EXIT

python3 - "$OUT/callgrind.out" <<'PY'
import collections, re, sys
names = {}
def name(s):
    m = re.match(r"\((\d+)\)(?: (.*))?", s.strip())
    if not m:
        return s.strip()
    if m.group(2):
        names[m.group(1)] = m.group(2)
    return names.get(m.group(1), m.group(1))
fn = cfn = None
pending = None
calls, inclusive, self_cost = collections.Counter(), collections.Counter(), collections.Counter()
total = 0
for line in open(sys.argv[1]):
    if line.startswith("fn="):
        fn = name(line[3:])
    elif line.startswith("cfn="):
        cfn = name(line[4:])
    elif line.startswith("calls="):
        pending = int(line[6:].split()[0])
    elif line[:1].isdigit() or line[:1] in "+-*":
        parts = line.split()
        if len(parts) >= 2:
            cost = int(parts[1])
            if pending is not None:
                calls[(fn, cfn)] += pending
                inclusive[(fn, cfn)] += cost
                pending = None
            else:
                self_cost[fn] += cost
                total += cost
# One request, one datagram handed to the node.
requests = sum(n for (a, b), n in calls.items() if b.startswith("corral_proto::node::Node::handle_datagram")
               and not a.startswith("corral_proto::node::Node::handle_datagram"))
if not requests:
    sys.exit("no request reached the server")
allocs = collections.Counter()
for (a, b), n in calls.items():
    if b in ("__rustc::__rust_alloc", "__rustc::__rust_alloc_zeroed", "__rustc::__rust_realloc"):
        allocs[a] += n
print(f"requests: {requests}")
print(f"user-space instructions per request: {total / requests:,.0f}")
print(f"heap allocations per request: {sum(allocs.values()) / requests:.2f}")
for site, n in allocs.most_common():
    if n / requests >= 0.05:
        print(f"  {n / requests:5.2f}  {site}")
# Inclusive cost of a function: its own instructions and those of the calls it makes (a call to itself is
# already inside its own).
incl = collections.Counter(self_cost)
for (a, b), cost in inclusive.items():
    if a != b:
        incl[a] += cost
print("instructions per request, inclusive (top 25):")
for f, c in incl.most_common(25):
    print(f"  {c / requests:8,.0f}  {f[:110]}")
PY
rm -rf "$OUT"
