#!/usr/bin/env bash
# Block-wise goodput (RFC 7959) over loopback UDP: a 1 MiB body uploaded with PUT (Block1) and downloaded
# with GET (Block2), 1024-byte blocks, NSTART = 1 (one block in flight, lock-step), for every pairing of
# corral and libcoap as client and server, side by side in one run:
#
#   corral  client -> corral serve         (PUT/GET /large-update)
#   libcoap client -> coap-server-notls    (PUT/GET /example_data; its example server stores any PUT body)
#   corral  client -> coap-server-notls
#   libcoap client -> corral serve
#
# Usage: scripts/bench-blockwise.sh [RUNS] [BYTES]     defaults: 5 runs, 1048576 bytes
#
# Each transfer is one client process (`corral put|get -b 1024`, `coap-client-notls -b 1024`); its wall
# time includes the process start-up, which the script measures separately (a one-datagram GET) and
# reports, with the goodput both raw and with the start-up taken off. Every download is compared with the
# uploaded body byte for byte. The median of RUNS is shown. Servers run on CPU 0 and clients on CPU 1
# when `taskset` is available. MB/s is 10^6 bytes per second.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
BYTES=${2:-1048576}

command -v coap-server-notls >/dev/null || scripts/install-peers.sh
cargo build --release --locked -q -p corral

exec python3 - "$RUNS" "$BYTES" <<'PY'
import os, shutil, signal, socket, statistics, subprocess, sys, tempfile, time

RUNS, BYTES = int(sys.argv[1]), int(sys.argv[2])
CORRAL = os.path.abspath("target/release/corral")
pin = shutil.which("taskset") and os.cpu_count() >= 2
SERVER_CPU = ["taskset", "-c", "0"] if pin else []
CLIENT_CPU = ["taskset", "-c", "1"] if pin else []
tmp = tempfile.mkdtemp(prefix="corral-bench-blockwise-")
body = bytes((i * 2654435761 >> 13) & 0xFF for i in range(BYTES))
src = os.path.join(tmp, "body.bin")
with open(src, "wb") as f:
    f.write(body)

def free_port():
    while True:
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.bind(("127.0.0.1", 0))
        port = u.getsockname()[1]
        t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            t.bind(("127.0.0.1", port))
            return port
        except OSError:
            pass
        finally:
            u.close(); t.close()

def run(cmd, out=None):
    """Runs a client; returns its wall time in seconds, or raises with its stderr."""
    start = time.perf_counter()
    p = subprocess.run(CLIENT_CPU + cmd, stdout=out or subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    elapsed = time.perf_counter() - start
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.decode(errors='replace').strip()}")
    return elapsed

def wait_up(port):
    for _ in range(100):
        if subprocess.run([CORRAL, "get", f"coap://127.0.0.1:{port}/", "-B", "1", "-q"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode in (0, 4):
            return
        time.sleep(0.05)
    sys.exit(f"server on port {port} did not come up")

class Server:
    def __init__(self, kind):
        self.port = free_port()
        if kind == "corral":
            cmd = [CORRAL, "serve", "--bind", f"127.0.0.1:{self.port}", "-q"]
            self.path, self.hello = "large-update", "hello"
        else:
            cmd = ["coap-server-notls", "-A", "127.0.0.1", "-p", str(self.port)]
            self.path, self.hello = "example_data", ""
        self.proc = subprocess.Popen(SERVER_CPU + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_up(self.port)
    def uri(self, path):
        return f"coap://127.0.0.1:{self.port}/{path}"
    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()

def client_cmds(kind, server, dst):
    uri = server.uri(server.path)
    if kind == "corral":
        put = [CORRAL, "put", uri, "-f", src, "-t", "octet-stream", "-b", "1024", "-B", "60"]
        get = [CORRAL, "get", uri, "-b", "1024", "-B", "60"]
        hello = [CORRAL, "get", server.uri(server.hello), "-B", "5"]
        return put, get, hello, True
    put = ["coap-client-notls", "-b", "1024", "-m", "put", "-t", "42", "-f", src, "-B", "60", uri]
    get = ["coap-client-notls", "-b", "1024", "-B", "60", "-o", dst, uri]
    hello = ["coap-client-notls", "-B", "5", server.uri(server.hello)]
    return put, get, hello, False

def measure_once(client, server, results):
    dst = os.path.join(tmp, "download.bin")
    put, get, hello, to_stdout = client_cmds(client, server, dst)
    results["start"].append(run(hello))
    results["up"].append(run(put))
    if os.path.exists(dst):
        os.remove(dst)
    if to_stdout:
        with open(dst, "wb") as f:
            results["down"].append(run(get, out=f))
    else:
        results["down"].append(run(get))
    with open(dst, "rb") as f:
        got = f.read()
    if got != body:
        raise RuntimeError(f"{client} -> {server}: downloaded {len(got)} bytes that differ from the body")

pairs = [("corral", "corral"), ("libcoap", "libcoap"), ("corral", "libcoap"), ("libcoap", "corral")]
names = {"corral": ("corral", "corral serve"), "libcoap": ("coap-client-notls", "coap-server-notls")}
print(f"block-wise goodput over loopback UDP: {BYTES} bytes, block size 1024 (Block1 PUT / Block2 GET), "
      f"NSTART 1, median of {RUNS} runs" + (", server on CPU 0, client on CPU 1" if pin else ""), flush=True)
servers = {"corral": Server("corral"), "libcoap": Server("libcoap")}
results = {pair: {"up": [], "down": [], "start": []} for pair in pairs}
try:
    # Round-robin, so that a change in the machine's load hits every pair alike.
    for i in range(RUNS):
        for client, server in pairs:
            measure_once(client, servers[server], results[(client, server)])
        print(f"  run {i + 1} of {RUNS} done", file=sys.stderr, flush=True)
finally:
    for s in servers.values():
        s.stop()
rows = [(c, s, statistics.median(r["up"]), statistics.median(r["down"]), statistics.median(r["start"]))
        for (c, s), r in results.items()]

mb = BYTES / 1e6
def cell(t, start):
    net = max(t - start, 1e-6)
    return f"{t * 1e3:7.1f} ms {mb / t:6.1f} MB/s ({mb / net:6.1f} net)"
print()
print(f"{'client -> server':<42} {'upload (PUT, Block1)':<34} {'download (GET, Block2)':<34} start-up")
for client, server, up, down, start in rows:
    pair = f"{names[client][0]} -> {names[server][1]}"
    print(f"{pair:<42} {cell(up, start):<34} {cell(down, start):<34} {start * 1e3:5.1f} ms")
print()
print("time: the client process's wall time; net: with its start-up (a one-datagram GET) taken off.")
c = next(r for r in rows if r[0] == "corral" and r[1] == "corral")
l = next(r for r in rows if r[0] == "libcoap" and r[1] == "libcoap")
print(f"corral/libcoap goodput ratio: upload {l[2] / c[2]:.2f}x, download {l[3] / c[3]:.2f}x "
      f"(net: {(l[2] - l[4]) / (c[2] - c[4]):.2f}x, {(l[3] - l[4]) / (c[3] - c[4]):.2f}x)")
shutil.rmtree(tmp, ignore_errors=True)
PY
