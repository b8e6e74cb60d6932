# Shared by the bench scripts (sourced, not run): builds corral, pins processes to cores when it can, and
# the small helpers every script needs.
#   CORRAL            the release binary
#   PIN_SERVER/PIN_CLIENT   `taskset -c 0` / `taskset -c 1` on a machine with 2+ cores, else nothing
#   free_port         a UDP port on 127.0.0.1 that was free a moment ago
#   cpu_ticks PID     the process's user+system CPU time in clock ticks (/proc/PID/stat)
#   wait_up URI       waits (at most 5 s) until a CoAP GET of URI gets any answer
#   build_coap_load   builds coap-load (tools/coap-load, on go-coap) into $LOAD once
#   load_measure NAME URI CLIENTS SECONDS ROUND PID
#                     runs coap-load (closed loop, CON GET, 1 s warm-up, on the client CPU) against URI and
#                     prints "NAME CLIENTS req/s p50_us p99_us cpu_us_per_req errors ROUND", the CPU time
#                     being PID's (all its threads) after the warm-up, per request answered
#   run_rounds ROUNDS "NAMES" "CLIENTS" WHAT
#                     for each round and each name: the script's `bench_start NAME PORT`, then
#                     `bench_measure NAME PORT CLIENTS ROUND` (a load_measure line) for each client count,
#                     appended to $RESULTS, then `bench_stop`
#   bench_cpu NAME PID URI [ARGS]
#                     runs `corral bench URI --clients $CLIENTS --duration $SECONDS_ --json ARGS` on the client
#                     CPU and prints its JSON line with "name" and PID's CPU seconds over the run
#                     ("server_cpu_s") added
#   summarize RESULTS BASELINE TITLE
#                     the median [min-max] over the rounds of each name and client count, and its rate and
#                     CPU per request relative to BASELINE's in the same round
# The whole workspace, as the test command builds it: `-p corral` alone unifies other features and
# rebuilds much of it.
cargo build --release --locked -q --workspace
CORRAL=target/release/corral
PIN_SERVER=(); PIN_CLIENT=()
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then PIN_SERVER=(taskset -c 0); PIN_CLIENT=(taskset -c 1); fi

free_port() { python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

wait_up() {
  for _ in $(seq 1 50); do
    if "$CORRAL" get "$1" -B 1 -q >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  echo "$1 did not come up" >&2; exit 1
}

LOAD=${COAP_LOAD:-target/bench/coap-load}
build_coap_load() {
  # Rebuilt when its source is newer than the binary (an old build would not meet Echo challenges).
  if [ ! -x "$LOAD" ] || [ -n "$(find tools/coap-load -newer "$LOAD" -name '*.go' -o -newer "$LOAD" -name go.mod | head -1)" ]; then
    mkdir -p target/bench
    (cd tools/coap-load && GOTOOLCHAIN=local GOFLAGS=-mod=mod go build -o "$OLDPWD/$LOAD" .)
  fi
}

load_measure() { # name uri clients seconds round pid
  local out before after lpid
  out=$(mktemp)
  "${PIN_CLIENT[@]}" "$LOAD" -uri "$2" -c "$3" -d "${4}s" -warmup 1s >"$out" 2>&1 &
  lpid=$!
  sleep 1
  before=$(cpu_ticks "$6")
  wait "$lpid"
  after=$(cpu_ticks "$6")
  python3 - "$1" "$3" "$out" "$before" "$after" "$(getconf CLK_TCK)" "$5" <<'PY'
import re, sys
name, clients, path, before, after, hz, rnd = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
text = open(path).read()
def dur(s):  # go durations: 61.2µs, 1.2ms, 0.5s
    v, u = re.match(r"([\d.]+)(µs|us|ms|s|ns)", s).groups()
    return float(v) * {"ns": 1e-3, "µs": 1, "us": 1, "ms": 1e3, "s": 1e6}[u]
ok = int(re.search(r"ok: (\d+)", text).group(1))
bad = sum(int(x) for x in re.findall(r"(?:non-2.xx|timeouts|errors): (\d+)", text))
rate = float(re.search(r"req/s: ([\d.]+)", text).group(1))
p50 = dur(re.search(r"p50: (\S+?),", text).group(1))
p99 = dur(re.search(r"p99: (\S+?),", text).group(1))
cpu = (after - before) / hz * 1e6 / ok if ok else float("nan")
if bad:  # say which kind, and what the generator saw
    print(f"{name}: {bad} requests failed; the generator's report:\n{text}", file=sys.stderr)
print(f"{name} {clients} {rate:.0f} {p50:.1f} {p99:.1f} {cpu:.2f} {bad} {rnd}")
PY
  rm -f "$out"
}

run_rounds() { # rounds names clients what
  local round name c port
  for round in $(seq 1 "$1"); do
    for name in $2; do
      port=$(free_port)
      bench_start "$name" "$port"
      for c in $3; do
        echo "== round $round: $name, $c clients, $4" >&2
        bench_measure "$name" "$port" "$c" "$round" | tee -a "$RESULTS" >&2
      done
      bench_stop
    done
  done
}

summarize() { # results baseline title
  python3 - "$@" <<'PY'
import sys, collections, statistics
path, baseline, title = sys.argv[1:4]
rows = collections.defaultdict(dict)
for line in open(path):
    n, c, rate, p50, p99, cpu, bad, rnd = line.split()
    rows[(n, int(c))][rnd] = (float(rate), float(p50), float(p99), float(cpu), int(bad))
def cell(xs, fmt):
    """median [min-max] over the rounds"""
    med = statistics.median(xs)
    return fmt.format(med) if len(xs) == 1 else (fmt + " [" + fmt + "-" + fmt + "]").format(med, min(xs), max(xs))
x = f"x {baseline}"
print(f"\n{title}; median [min-max] over the rounds; {x}: against {baseline} in the same round")
print(f"{'':<12} {'clients':>7} {'req/s':>24} {x:>18} {'p50 us':>18} {'p99 us':>22} {'CPU us/req':>24} {x:>18} errors")
for (n, c), v in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    base = rows.get((baseline, c), {})
    col = lambda i, fmt: cell([r[i] for r in v.values()], fmt)
    ratios = lambda i: [r[i] / base[k][i] for k, r in v.items() if k in base]
    ratio = lambda i: cell(ratios(i), "{:.2f}") if ratios(i) else "-"
    print(f"{n:<12} {c:>7} {col(0, '{:.0f}'):>24} {ratio(0):>18} {col(1, '{:.0f}'):>18} {col(2, '{:.0f}'):>22} "
          f"{col(3, '{:.2f}'):>24} {ratio(3):>18} {sum(r[4] for r in v.values())}")
PY
}

bench_cpu() { # name pid uri [args] -> corral bench's JSON line, with name and the server's CPU seconds
  local name=$1 pid=$2 uri=$3; shift 3
  echo "== $name: corral bench $uri --clients $CLIENTS --duration $SECONDS_ $*" >&2
  local before after json
  before=$(cpu_ticks "$pid")
  json=$("${PIN_CLIENT[@]}" "$CORRAL" bench "$uri" --clients "$CLIENTS" --duration "$SECONDS_" --json -q "$@")
  after=$(cpu_ticks "$pid")
  python3 -c 'import json,sys; j=json.loads(sys.argv[1]); j["name"]=sys.argv[2]; j["server_cpu_s"]=(int(sys.argv[3])-int(sys.argv[4]))/int(sys.argv[5]); print(json.dumps(j))' \
    "$json" "$name" "$after" "$before" "$(getconf CLK_TCK)"
}
