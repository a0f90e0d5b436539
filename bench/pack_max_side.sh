#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `stoker pack --max-side N --quality Q` against a plain pack, on the same ImageNet-like images
# (make-imagenet-like: real photos): per N — pack time, shard bytes, train-pipeline images/s
# (loaderbench, shards-buffered, median of REPEAT runs) and the PSNR of the eval output (Resize
# 256 + CenterCrop 224, uint8) against the eval output of the unpacked original files (the
# ImageFolder itself, files layout). Prints a Markdown table for docs/PERFORMANCE.md.
#
# usage: bench/pack_max_side.sh [WORKDIR]     env: BUILD_DIR (build), COUNT (1000), QUALITY (90),
#        SIDES ("off 512 384 256"), WORKERS (2), REPEAT (3), SECONDS_PER_RUN (5)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build}
W=${1:-/tmp/stk-pack-max-side}
COUNT=${COUNT:-1000}
Q=${QUALITY:-90}
SIDES=${SIDES:-"off 512 384 256"}
WORKERS=${WORKERS:-2}
REPEAT=${REPEAT:-3}
SECS=${SECONDS_PER_RUN:-5}
PY=/usr/bin/python3
mkdir -p "$W"
if [ ! -d "$W/src" ]; then
    /work/shared/tools/make-imagenet-like --count "$COUNT" --classes 10 --seed 15 "$W/src" >/dev/null
fi
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "images: $COUNT (make-imagenet-like --seed 15), $(du -sbL "$W/src" | cut -f1) bytes of JPEG"
echo
declare -A PACKS MIB RESIZED PSNR IPS
for n in $SIDES; do
    ds="$W/ds-$n"
    rm -rf "$ds"
    args=()
    [ "$n" != off ] && args=(--max-side "$n" --quality "$Q")
    t0=$(date +%s.%N)
    "$B/stoker" pack "$W/src" "$ds" "${args[@]}" >"$W/pack-$n.out" 2>"$W/pack-$n.err"
    t1=$(date +%s.%N)
    PACKS[$n]=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
    MIB[$n]=$(du -cb "$ds"/shard-*.lmdb | tail -1 | awk '{printf "%.1f", $1 / 1048576}')
    RESIZED[$n]=$(grep -o "[0-9]* images\? resized" "$W/pack-$n.out" | cut -d' ' -f1 || true)
    PSNR[$n]=$(STOKER_LIBRARY="$B/libstoker.so" PYTHONPATH=bindings/python "$PY" - "$W/src" "$ds" <<'PY'
import sys
import numpy as np
import stoker

def eval_out(path):
    out = []
    with stoker.Loader(path, 50, train=False, size=224, resize=256, shuffle=False, dtype="uint8",
                       layout="NHWC", copy=True, array="numpy") as ld:
        for images, _ in ld:
            out.append(np.asarray(images))
    return np.concatenate(out)

ref, got = eval_out(sys.argv[1]), eval_out(sys.argv[2])
assert ref.shape == got.shape
mse = ((ref.astype(np.float64) - got.astype(np.float64)) ** 2).reshape(len(ref), -1).mean(axis=1)
p = np.where(mse == 0, np.inf, 10 * np.log10(255.0 ** 2 / np.maximum(mse, 1e-12)))
fmt = lambda v: "exact" if np.isinf(v) else "%.1f" % v
print("%s / %s" % (fmt(np.median(p)), fmt(p.min())))
PY
)
done
# images/s: REPEAT rounds over all the packed sets, one run each per round (the load on a shared
# machine drifts; interleaving spreads it over every set alike), median per set
for r in $(seq "$REPEAT"); do
    for n in $SIDES; do
        v=$("$B/loaderbench" "$W/ds-$n" --layouts shards-buffered --workers "$WORKERS" --seconds "$SECS" 2>/dev/null |
            awk '$1 == "shards-buffered" && $2 ~ /^[0-9]+$/ {print $3; exit}')
        IPS[$n]="${IPS[$n]:-} $v"
    done
done
echo "| --max-side | pack s | shard MiB | train img/s ($WORKERS workers, median of $REPEAT) | eval PSNR vs original (median / min dB) | resized |"
echo "|---|---:|---:|---:|---:|---:|"
for n in $SIDES; do
    med=$(echo ${IPS[$n]} | tr ' ' '\n' | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')
    echo "| $n | ${PACKS[$n]} | ${MIB[$n]} | $med (${IPS[$n]# }) | ${PSNR[$n]} | ${RESIZED[$n]:-0} |"
done
echo
echo "quality $Q for re-encoded images (4:4:4); off = the JPEG files byte for byte"
