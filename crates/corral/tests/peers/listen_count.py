#!/usr/bin/env python3
"""Counts who knocks: for `corral` tests that must show nothing was sent to an address.

  listen_count.py ADDR PORT SECONDS    listen on TCP ADDR:PORT and UDP ADDR:PORT; print "ready", then
                                       after SECONDS one JSON line: tcp_connections, udp_datagrams
"""
import json
import select
import socket
import sys
import time


def main(addr, port, seconds):
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.bind((addr, port))
    t.listen(64)
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind((addr, port))
    print("ready", flush=True)
    conns, grams = 0, 0
    end = time.monotonic() + seconds
    while True:
        left = end - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([t, u], [], [], left)
        for s in ready:
            if s is t:
                c, _ = t.accept()
                conns += 1
                c.close()
            else:
                u.recvfrom(65535)
                grams += 1
    print(json.dumps({"tcp_connections": conns, "udp_datagrams": grams}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))
