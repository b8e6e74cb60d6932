#!/usr/bin/env bash
# Installs the real CoAP peers the interop tests run against: libcoap's command-line tools (Debian package
# libcoap3-bin: coap-client-notls, coap-server-notls) and aiocoap with its OSCORE extra (pip, which brings
# Group OSCORE's Ed25519 too), PostgreSQL's server (the shared store's tests start one in a temporary
# directory), and Wireshark's tshark, which checks that the simulator's pcap files dissect as IPv6 + TCP +
# HTTP. Idempotent; quiet when present.
set -euo pipefail
if ! command -v coap-client-notls >/dev/null 2>&1; then
  echo "installing libcoap3-bin (apt)…" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libcoap3-bin >/dev/null
fi
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "installing postgresql, the server corral-store's tests start in a temporary directory (apt)…" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
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
if ! command -v chromium >/dev/null 2>&1 || [ ! -x /usr/bin/chromedriver ]; then
  echo "installing chromium and chromium-driver, the browser of tests/e2e/console_browser.rs (apt)…" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
fi
if ! python3 -c 'import selenium' >/dev/null 2>&1; then
  echo "installing selenium, the WebDriver client of tests/e2e/console_browser.rs (pip)…" >&2
  python3 -m pip install --quiet --disable-pip-version-check selenium
fi
if ! python3 -c 'import prometheus_client' >/dev/null 2>&1; then
  echo "installing prometheus_client, the Prometheus text-format parser of tests/e2e/http.rs (pip)…" >&2
  python3 -m pip install --quiet --disable-pip-version-check prometheus_client
fi
command -v coap-client-notls >/dev/null && command -v tshark >/dev/null && python3 -c 'import aiocoap, aiocoap.oscore, prometheus_client, selenium' \
  && command -v chromium >/dev/null && echo "interop peers ready" >&2
