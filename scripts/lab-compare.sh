#!/usr/bin/env bash
# Do two builds of corral give the same lab results? Runs built-in scenarios with one `corral` binary into a
# directory, and compares two such directories file by file — for a change that must not move a number
# (a refactoring of corral-lab, a faster simulator).
#
# Usage:
#   scripts/lab-compare.sh run BIN OUT [--full] [--seed N] [--jobs N] [--shards N] [SCENARIO…]
#       runs each SCENARIO (default: every built-in) with BIN into OUT/<scenario>[-quick]; --quick unless
#       --full; with --shards N as N shards joined by `corral lab merge` (OUT/<scenario>[-quick]-merged).
#       Wall-clock seconds per scenario go to OUT/times.txt.
#   scripts/lab-compare.sh compare A B
#       compares every report directory of A with B's: every file byte for byte (CSV, summary.txt,
#       summary.json, SVG, HTML, run.json), one line per scenario; exit 1 if any differs.
#
# seed004-throughput runs real programs over `corral link` in real time (root only): its numbers differ
# from run to run, so `compare` checks only that the same files exist with the same CSV headers and row
# counts.
#
# BIN is copied to OUT/bin/corral first: the emulated family's CoAP programs (`corral serve`, `corral get`)
# are the binary that runs the lab, which must be named `corral`.
set -euo pipefail

usage() {
  sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}

run() {
  local bin=$1 out=$2
  shift 2
  local mode=--quick seed=1 jobs=2 shards=0 names=()
  while [ $# -gt 0 ]; do
    case $1 in
      --full) mode= ;;
      --seed) seed=$2; shift ;;
      --jobs) jobs=$2; shift ;;
      --shards) shards=$2; shift ;;
      *) names+=("$1") ;;
    esac
    shift
  done
  mkdir -p "$out/bin"
  cp "$bin" "$out/bin/corral"
  local corral=$out/bin/corral
  if [ ${#names[@]} -eq 0 ]; then
    mapfile -t names < <("$corral" lab list --json | python3 -c 'import json,sys; print("\n".join(s["name"] for s in json.load(sys.stdin)))')
  fi
  for name in "${names[@]}"; do
    local dir=$out/$name${mode:+-quick}
    local t0=$SECONDS
    if [ "$shards" -gt 0 ]; then
      local parts=()
      for ((i = 0; i < shards; i++)); do
        rm -rf "$dir-shard$i"
        "$corral" lab run "$name" $mode --seed "$seed" --jobs "$jobs" --shard "$i/$shards" --out "$dir-shard$i" -q >/dev/null 2>"$dir.stderr" || true
        parts+=("$dir-shard$i")
      done
      dir=$dir-merged
      rm -rf "$dir"
      if ! "$corral" lab merge "${parts[@]}" --out "$dir" -q >/dev/null 2>"$dir.stderr"; then
        echo "$name: merge failed: $(cat "$dir.stderr")"
        rm -rf "${parts[@]}"
        continue
      fi
      rm -rf "${parts[@]}"
      rm -f "${dir%-merged}.stderr"
    else
      rm -rf "$dir"
      if ! "$corral" lab run "$name" $mode --seed "$seed" --jobs "$jobs" --out "$dir" -q >/dev/null 2>"$dir.stderr"; then
        echo "$name: failed (see $dir.stderr)"
        continue
      fi
    fi
    rm -f "$dir.stderr"
    echo "$name${mode:+ (quick)}: $((SECONDS - t0)) s" | tee -a "$out/times.txt"
  done
}

compare() {
  local a=$1 b=$2 bad=0
  for da in "$a"/*/; do
    da=${da%/}
    local name
    name=$(basename "$da")
    [ "$name" = bin ] && continue
    local db=$b/$name
    if [ ! -d "$db" ]; then
      echo "$name: missing in $b"
      bad=1
      continue
    fi
    if ! diff -q <(cd "$da" && ls) <(cd "$db" && ls) >/dev/null; then
      echo "$name: DIFFERENT file sets"
      diff <(cd "$da" && ls) <(cd "$db" && ls) || true
      bad=1
      continue
    fi
    local differ=() files=0
    for f in "$da"/*; do
      local base
      base=$(basename "$f")
      files=$((files + 1))
      if [[ $name == seed004-* ]]; then
        # Real time: same header and row count only.
        if [[ $base == *.csv ]]; then
          if [ "$(head -1 "$f")" != "$(head -1 "$db/$base")" ] || [ "$(wc -l <"$f")" != "$(wc -l <"$db/$base")" ]; then
            differ+=("$base")
          fi
        fi
      elif ! cmp -s "$f" "$db/$base"; then
        differ+=("$base")
      fi
    done
    if [ ${#differ[@]} -eq 0 ]; then
      if [[ $name == seed004-* ]]; then
        echo "$name: same files, CSV headers and row counts ($files files; real-time numbers not compared)"
      else
        echo "$name: identical ($files files)"
      fi
    else
      echo "$name: DIFFERENT: ${differ[*]}"
      bad=1
    fi
  done
  return $bad
}

case ${1:-} in
  run) shift; [ $# -ge 2 ] || usage; run "$@" ;;
  compare) shift; [ $# -eq 2 ] || usage; compare "$@" ;;
  *) usage ;;
esac
