#!/usr/bin/env python3
"""Spoofed UDP datagrams from a raw socket (root, inside a network namespace of the test's own), and what
the spoofed address gets back.

  spoof.py SRC_IP DST_IP DST_PORT LISTEN_S PORT:HEX [PORT:HEX ...]

Sends each HEX payload as a UDP datagram from SRC_IP:PORT to DST_IP:DST_PORT with a hand-made IPv4
header (the kernel never checks the source). With LISTEN_S > 0, a socket bound to SRC_IP at the first
datagram's PORT (the victim: it never sends anything itself) counts what arrives there for LISTEN_S
seconds after the last datagram. Prints one JSON line: sent, sent_bytes, received, received_bytes (UDP
payload bytes).
"""
import json
import socket
import struct
import sys
import time


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def datagram(src, sport, dst, dport, payload):
    udp_len = 8 + len(payload)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, 0, 0, 64, socket.IPPROTO_UDP, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    udp = struct.pack("!HHHH", sport, dport, udp_len, 0)  # checksum 0: none (IPv4)
    return ip + udp + payload


def main():
    src, dst, dport, listen = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    grams = [(int(p), bytes.fromhex(h)) for p, h in (a.split(":", 1) for a in sys.argv[5:])]
    victim = None
    if listen > 0:
        victim = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        victim.bind((src, grams[0][0]))
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    sent_bytes = 0
    for sport, payload in grams:
        raw.sendto(datagram(src, sport, dst, dport, payload), (dst, 0))
        sent_bytes += len(payload)
    received, received_bytes = 0, 0
    if victim is not None:
        end = time.monotonic() + listen
        while True:
            left = end - time.monotonic()
            if left <= 0:
                break
            victim.settimeout(left)
            try:
                data, _ = victim.recvfrom(65535)
            except socket.timeout:
                break
            received += 1
            received_bytes += len(data)
    print(json.dumps({"sent": len(grams), "sent_bytes": sent_bytes, "received": received,
                      "received_bytes": received_bytes}), flush=True)


if __name__ == "__main__":
    main()
