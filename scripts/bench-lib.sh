# Shared by the bench scripts (sourced, not run): builds corral, pins processes to cores when it can, and
# the small helpers every script needs.
#   CORRAL            the release binary
#   PIN_SERVER/PIN_CLIENT   `taskset -c 0` / `taskset -c 1` on a machine with 2+ cores, else nothing
#   free_port         a UDP port on 127.0.0.1 that was free a moment ago
#   cpu_ticks PID     the process's user+system CPU time in clock ticks (/proc/PID/stat)
#   wait_up URI       waits (at most 5 s) until a CoAP GET of URI gets any answer
#   build_coap_load   builds go-coap's coap-load (../shared/tools/coap-load) into $LOAD once
#   load_measure NAME URI CLIENTS SECONDS ROUND PID
#                     runs coap-load (closed loop, CON GET, 1 s warm-up, on the client CPU) against URI and
#                     prints "NAME CLIENTS req/s p50_us p99_us cpu_us_per_req errors ROUND", the CPU time
#                     being PID's (all its threads) after the warm-up, per request answered
cargo build --release --locked -q -p corral
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
  if [ ! -x "$LOAD" ]; then
    mkdir -p target/bench
    (cd ../shared/tools/coap-load 2>/dev/null || cd /work/shared/tools/coap-load
     GOTOOLCHAIN=local GOFLAGS=-mod=mod go build -o "$OLDPWD/$LOAD" ./cmd/load)
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
print(f"{name} {clients} {rate:.0f} {p50:.1f} {p99:.1f} {cpu:.2f} {bad} {rnd}")
PY
  rm -f "$out"
}
