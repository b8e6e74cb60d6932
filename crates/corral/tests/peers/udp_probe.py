#!/usr/bin/env python3
"""UDP probe for `corral link` tests.

  udp_probe.py echo PORT                      echo every datagram back (runs until killed)
  udp_probe.py probe HOST PORT N SIZE GAP_MS  send N numbered datagrams of SIZE bytes, GAP_MS apart, collect
                                              the echoes for 2 s after the last, print JSON: sent, received,
                                              rtt_min_ms, rtt_median_ms, inversions (echoes arriving out of
                                              order), span_ms (first send to last echo)
"""
import json
import socket
import struct
import sys
import time


def echo(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    while True:
        data, addr = s.recvfrom(65535)
        s.sendto(data, addr)


def probe(host, port, n, size, gap_ms):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.001)
    sent_at = {}
    rtts, order = [], []
    start = time.monotonic()
    last_echo = start
    deadline = None
    i = 0
    while True:
        now = time.monotonic()
        if i < n and now >= start + i * gap_ms / 1000.0:
            sent_at[i] = now
            s.sendto(struct.pack("!I", i) + b"x" * max(0, size - 4), (host, port))
            i += 1
            if i == n:
                deadline = now + 2.0
        try:
            data, _ = s.recvfrom(65535)
            t = time.monotonic()
            k = struct.unpack("!I", data[:4])[0]
            rtts.append((t - sent_at[k]) * 1000.0)
            order.append(k)
            last_echo = t
        except socket.timeout:
            pass
        if deadline is not None and time.monotonic() > deadline:
            break
    inversions = sum(1 for a, b in zip(order, order[1:]) if b < a)
    rtts.sort()
    print(json.dumps({
        "sent": n,
        "received": len(rtts),
        "rtt_min_ms": rtts[0] if rtts else None,
        "rtt_median_ms": rtts[len(rtts) // 2] if rtts else None,
        "inversions": inversions,
        "span_ms": (last_echo - start) * 1000.0,
    }), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "echo":
        echo(int(sys.argv[2]))
    else:
        probe(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]))
