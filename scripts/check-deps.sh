#!/usr/bin/env bash
# The sans-IO core must never depend on an async runtime or a socket crate (architecture.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bad=0
for crate in corral-wire corral-proto corral-group corral-proxy corral-oscore corral-stream corral-services corral-rd; do
  if cargo tree -p "$crate" -e normal --prefix none 2>/dev/null | grep -E '^(tokio|mio|socket2|async-std|smol|quinn-udp|nix|libc) ' ; then
    echo "error: $crate depends on a runtime or socket crate (listed above)" >&2
    bad=1
  fi
done
# corral-dtls: dimpl draws every session's randomness from a generator corral-dtls keys (its Config::rng_key);
# its fallback for instances without a key (rand's thread generator) and its provider's self-check still link
# getrandom, which links libc; nothing else of a runtime or socket may come in.
if cargo tree -p corral-dtls -e normal --prefix none 2>/dev/null | grep -E '^(tokio|mio|socket2|async-std|smol|quinn-udp|nix) '; then
  echo "error: corral-dtls depends on a runtime or socket crate (listed above)" >&2
  bad=1
fi
if cargo tree -p corral-dtls -e normal -i libc --depth 1 --prefix none 2>/dev/null | grep -vE '^(libc|getrandom) '; then
  echo "error: corral-dtls reaches libc other than through getrandom (listed above)" >&2
  bad=1
fi
# corral-tokio is a runtime for any node: the applications it runs (the Entity Manager, the directory, the
# fleet of virtual devices) sit above it, in corral-gateway.
if cargo tree -p corral-tokio -e normal --prefix none 2>/dev/null | grep -E '^(corral-group|corral-rd|corral-proxy|corral-services) '; then
  echo "error: corral-tokio depends on an application crate (listed above): that belongs in corral-gateway" >&2
  bad=1
fi
[ $bad -eq 0 ] && echo "dependency check: corral-wire, corral-proto, corral-dtls (libc only through getrandom), corral-group, corral-proxy, corral-oscore, corral-stream, corral-services and corral-rd are free of runtimes and sockets; corral-tokio runs no application"
exit $bad
