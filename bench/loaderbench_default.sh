#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# How long `loaderbench` with no DATASET (the embedded default: synthesise 2000 JPEGs, pack them,
# sweep every layout over the default worker counts) takes end to end from a clean cache dir,
# against the 48 s it aims at (docs/loaderbench.md), REPEAT times. Prints one line per run with
# the load average at its start and end: on a machine other programs load, the time says more
# about them than about loaderbench. tests/test_loaderbench_default.sh checks what the default
# run reports; this measures how long it takes.
#
# usage: bench/loaderbench_default.sh     env: BUILD_DIR (build), REPEAT (3), AIM_S (48)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build}
REPEAT=${REPEAT:-3}
AIM=${AIM_S:-48}
LB=$(find "$B" -maxdepth 3 -name loaderbench -type f -perm -u+x | head -1)
[ -n "$LB" ] || { echo "no loaderbench under $B (build it: bash scripts/build.sh)" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stk-lb-default-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "$LB, $(nproc) cores, aim ${AIM} s; $(date -u '+%Y-%m-%d %H:%M UTC')"
for r in $(seq 1 "$REPEAT"); do
    rm -rf "$tmp/cache"
    load0=$(cut -d' ' -f1 /proc/loadavg)
    t0=$(date +%s.%N)
    "$LB" --cache-dir "$tmp/cache" --json "$tmp/out.json" >"$tmp/stdout" 2>"$tmp/stderr" ||
        { echo "loaderbench exited $?"; cat "$tmp/stderr"; exit 1; }
    t1=$(date +%s.%N)
    load1=$(cut -d' ' -f1 /proc/loadavg)
    awk -v r="$r" -v a="$t0" -v b="$t1" -v aim="$AIM" -v l0="$load0" -v l1="$load1" 'BEGIN {
        s = b - a; printf "run %d: %.1f s end to end from a clean cache (%s the %d s aim); load %s -> %s\n",
        r, s, s <= aim ? "within" : "over", aim, l0, l1 }'
done
