#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Pack speed against tar, measured side by side in one run.
#
#   bench/pack_vs_tar.sh [SRC] [WORKDIR] [REPEATS]
#     SRC      an ImageFolder [/work/data/imagenet-like]
#     WORKDIR  scratch space on the same filesystem as the outputs [/work/data/pack-bench]
#     REPEATS  interleaved repeats [3]
#   env: STOKER (the CLI) [build-pack/stoker or build/stoker], THREADS [all cores]
#
# Each repeat runs, in this order: `stoker pack SRC` (1 GiB shards; it fsyncs every shard),
# `tar cf` of the same folder, and `tar cf` followed by `sync FILE` (so that both write durably).
# Before each timed command the source's pages are dropped from the page cache
# (posix_fadvise DONTNEED on every source file, no global drop_caches): every command reads a
# cold source. (Warming it instead is not reproducible on this shared VM — other jobs evict it —
# and biased: the first command of a round warmed the source for the next.) Prints each run,
# then the medians: records/s, MB/s (source bytes / s) and the ratios.
#
# Measured here (2 vCPUs shared with other jobs, 10 000-image ImageNet-like set, 1.09 GB, 5
# interleaved repeats, medians): pack 11.02 s (908 records/s, 99.0 MB/s), tar cf 10.50 s,
# tar cf + sync 12.36 s: pack / tar = 1.05, pack / (tar + sync) = 0.89.
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
SRC=${1:-/work/data/imagenet-like}
WORK=${2:-/work/data/pack-bench}
REPEATS=${3:-3}
STOKER=${STOKER:-}
if [ -z "$STOKER" ]; then
    for c in "$HERE/build-pack/stoker" "$HERE/build/stoker"; do [ -x "$c" ] && STOKER=$c && break; done
fi
[ -x "$STOKER" ] || { echo "no stoker CLI (set STOKER)"; exit 1; }
[ -d "$SRC" ] || { echo "no $SRC"; exit 1; }
THREADS=${THREADS:-$(nproc)}
mkdir -p "$WORK"
files=$(find -L "$SRC" -type f | wc -l)
bytes=$(find -L "$SRC" -type f -printf '%s\n' | awk '{s+=$1} END {print s}')
echo "source: $SRC: $files files, $bytes bytes; stoker: $STOKER; threads: $THREADS; repeats: $REPEATS"
PY=/usr/bin/python3
evict() { "$PY" -c 'import os, sys
for root, _, files in os.walk(sys.argv[1], followlinks=True):
    for f in files:
        try:
            fd = os.open(os.path.join(root, f), os.O_RDONLY)
        except OSError:
            continue
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)' "$SRC"; }

now() { date +%s.%N; }
declare -a T_PACK T_TAR T_TARSYNC
for r in $(seq 1 "$REPEATS"); do
    rm -rf "$WORK/ds" "$WORK/src.tar"; sync; evict
    t0=$(now)
    "$STOKER" pack "$SRC" "$WORK/ds" --threads "$THREADS" --quiet
    t1=$(now)
    rm -rf "$WORK/ds"; sync; evict
    t2=$(now)
    tar cf "$WORK/src.tar" -C "$(dirname "$SRC")" "$(basename "$SRC")"
    t3=$(now)
    rm -f "$WORK/src.tar"; sync; evict
    t4=$(now)
    tar cf "$WORK/src.tar" -C "$(dirname "$SRC")" "$(basename "$SRC")"
    sync "$WORK/src.tar"
    t5=$(now)
    rm -f "$WORK/src.tar"
    T_PACK+=("$(echo "$t1 - $t0" | bc -l)")
    T_TAR+=("$(echo "$t3 - $t2" | bc -l)")
    T_TARSYNC+=("$(echo "$t5 - $t4" | bc -l)")
    printf 'repeat %d: pack %.2f s   tar %.2f s   tar+sync %.2f s\n' "$r" "${T_PACK[-1]}" "${T_TAR[-1]}" "${T_TARSYNC[-1]}"
done
rm -rf "$WORK/ds"
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
mp=$(median "${T_PACK[@]}"); mt=$(median "${T_TAR[@]}"); ms=$(median "${T_TARSYNC[@]}")
awk -v f="$files" -v b="$bytes" -v p="$mp" -v t="$mt" -v s="$ms" 'BEGIN {
    printf "median of %s:\n", "repeats"
    printf "  stoker pack : %6.2f s  %8.0f records/s  %7.1f MB/s\n", p, f / p, b / p / 1e6
    printf "  tar cf      : %6.2f s  %8.0f files/s    %7.1f MB/s\n", t, f / t, b / t / 1e6
    printf "  tar cf+sync : %6.2f s  %8.0f files/s    %7.1f MB/s\n", s, f / s, b / s / 1e6
    printf "  ratio pack / tar = %.2f   pack / (tar+sync) = %.2f   (target <= 1.5)\n", p / t, p / s
}'
