# Shared by the bench scripts (sourced, not run): builds corral, pins processes to cores when it can, and
# the small helpers every script needs.
#   CORRAL            the release binary
#   PIN_SERVER/PIN_CLIENT   `taskset -c 0` / `taskset -c 1` on a machine with 2+ cores, else nothing
#   free_port         a UDP port on 127.0.0.1 that was free a moment ago
#   cpu_ticks PID     the process's user+system CPU time in clock ticks (/proc/PID/stat)
#   wait_up URI       waits (at most 5 s) until a CoAP GET of URI gets any answer
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
