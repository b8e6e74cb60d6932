#!/usr/bin/env bash
# Installs the real CoAP peers the interop tests run against: libcoap's command-line tools (Debian package
# libcoap3-bin: coap-client-notls, coap-server-notls) and aiocoap with its OSCORE extra (pip, which brings
# Group OSCORE's Ed25519 too), and Wireshark's tshark, which checks that the simulator's pcap files dissect
# as IPv6 + TCP + HTTP. Idempotent; quiet when present.
set -euo pipefail
if ! command -v coap-client-notls >/dev/null 2>&1; then
  echo "installing libcoap3-bin (apt)…" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libcoap3-bin >/dev/null
fi
if ! command -v tshark >/dev/null 2>&1; then
  echo "installing tshark (apt)…" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq tshark >/dev/null
fi
if ! python3 -c 'import aiocoap, aiocoap.oscore' >/dev/null 2>&1; then
  echo "installing aiocoap with OSCORE (pip)…" >&2
  python3 -m pip install --quiet --disable-pip-version-check 'aiocoap[linkheader,oscore]'
fi
command -v coap-client-notls >/dev/null && command -v tshark >/dev/null && python3 -c 'import aiocoap, aiocoap.oscore' && echo "interop peers ready" >&2
