#!/usr/bin/env bash
# The sans-IO core must never depend on an async runtime or a socket crate (architecture.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bad=0
for crate in corral-wire corral-proto corral-dtls corral-group corral-proxy corral-oscore corral-stream corral-services; do
  if cargo tree -p "$crate" -e normal --prefix none 2>/dev/null | grep -E '^(tokio|mio|socket2|async-std|smol|quinn-udp|nix|libc) ' ; then
    echo "error: $crate depends on a runtime or socket crate (listed above)" >&2
    bad=1
  fi
done
[ $bad -eq 0 ] && echo "dependency check: corral-wire, corral-proto, corral-dtls, corral-group, corral-proxy, corral-oscore, corral-stream and corral-services are free of runtimes and sockets"
exit $bad
