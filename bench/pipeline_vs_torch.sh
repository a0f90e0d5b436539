#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/pipeline_vs_torch.sh — the pipeline against torch's DataLoader, one command:
#
#   bash bench/pipeline_vs_torch.sh            # REPEATS=3 EPOCHS=3 THREADS=2 by default
#
#   (a) stoker's pipeline (bench/tools/pipebench: public API, uint8 224x224 NHWC, THREADS decode
#       workers, batch 256, shards in /work/data/loader-shards read buffered from a warm cache)
#   (b) PyTorch DataLoader + torchvision ImageFolder on /work/data/imagenet-like (bench/
#       torch_dataloader.py under /usr/bin/python3, THREADS workers, batch 256)
#   (c) the libjpeg-turbo ceiling: bench/tools/decodebench's crop-window decode at power-of-two
#       DCT scales, no resize, one thread (thread CPU time) x THREADS
# for train (RandomResizedCrop(224) + flip) and eval (Resize(256) + CenterCrop(224)). Runs are
# interleaved (a, b, c for train, then eval, REPEATS times); the table shows medians over the
# repeats of each run's median epoch rate (epochs 2..EPOCHS), the ratios a/b and a/c, and memory:
# stoker's peak RSS and its RSS after the first and last epoch (flat = no growth across epochs),
# the DataLoader's peak PSS summed over the main process and its workers.
#
# The machine's cores are shared: the load average is printed before and after. Wall-clock rates
# suffer from other load; pipebench and torch_dataloader.py also print images per CPU-second (all
# threads / the main process plus its workers), and decodebench measures (c) in thread CPU time,
# so the CPU-time ratios compare the work per image even when the cores are busy with other jobs.
# SRC/SHARDS may name a subset (the same images as ImageFolder and packed; CEIL_LIMIT then the
# same count: decodebench takes the first CEIL_LIMIT images of the manifest).
# Logs go to $OUT (default /work/data/loader-bench-<time>).
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=${SRC:-/work/data/imagenet-like}
SHARDS=${SHARDS:-/work/data/loader-shards}
BUILD=${BUILD:-build}
REPEATS=${REPEATS:-3}
EPOCHS=${EPOCHS:-3}
THREADS=${THREADS:-2}
CEIL_LIMIT=${CEIL_LIMIT:-3000}
PY=/usr/bin/python3
OUT=${OUT:-/work/data/loader-bench-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"

if [ ! -x "$BUILD/pipebench" ] || [ ! -x "$BUILD/decodebench" ] || [ ! -x "$BUILD/stoker" ]; then
  cmake -S . -B "$BUILD" -DSTOKER_WITH_CUDA=OFF >/dev/null
  make -C "$BUILD" -j"$(nproc)" pipebench decodebench stoker_cli >/dev/null
fi
[ -d "$SRC" ] || { echo "missing $SRC (make-imagenet-like)"; exit 1; }
if [ ! -e "$SHARDS/shard-00000.lmdb" ]; then
  echo "== packing $SRC into $SHARDS"
  "$BUILD/stoker" pack "$SRC" "$SHARDS"
fi
echo "== warming the page cache (shards and ImageFolder)"
cat "$SHARDS"/shard-*.lmdb >/dev/null
find "$SRC" -type f -print0 | xargs -0 cat >/dev/null

field() { # field NAME FILE: value of NAME=... on the RESULT line
  grep '^RESULT' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | tail -1
}
ceiling() { # ceiling FILE: the ceiling images/s line of decodebench
  sed -n 's/^ceiling .*: *\([0-9.]*\) images\/s/\1/p' "$1" | tail -1
}
median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

echo "== load before: $(uptime)"
for r in $(seq 1 "$REPEATS"); do
  for mode in train eval; do
    evalflag=""
    [ "$mode" = eval ] && evalflag="--eval"
    echo "-- repeat $r, $mode: stoker"
    "$BUILD/pipebench" "$SHARDS" --mode "$mode" --workers "$THREADS" --epochs "$EPOCHS" >"$OUT/stoker-$mode-$r.log" 2>&1
    tail -1 "$OUT/stoker-$mode-$r.log"
    echo "-- repeat $r, $mode: DataLoader"
    "$PY" bench/torch_dataloader.py "$SRC" --mode "$mode" --workers "$THREADS" --epochs "$EPOCHS" >"$OUT/torch-$mode-$r.log" 2>&1
    tail -1 "$OUT/torch-$mode-$r.log"
    echo "-- repeat $r, $mode: libjpeg-turbo ceiling ($CEIL_LIMIT images, 1 thread)"
    "$BUILD/decodebench" --limit "$CEIL_LIMIT" --repeats 1 $evalflag >"$OUT/ceiling-$mode-$r.log" 2>&1
    grep '^ceiling\|^process' "$OUT/ceiling-$mode-$r.log"
  done
done
echo "== load after: $(uptime)"

report() {
  local mode=$1
  local a b c acpu bcpu rss0 rss1 rsspk pss proc
  a=$(for r in $(seq 1 "$REPEATS"); do field images_per_s "$OUT/stoker-$mode-$r.log"; done | median)
  acpu=$(for r in $(seq 1 "$REPEATS"); do field images_per_cpu_s "$OUT/stoker-$mode-$r.log"; done | median)
  rsspk=$(for r in $(seq 1 "$REPEATS"); do field peak_rss_mib "$OUT/stoker-$mode-$r.log"; done | median)
  rss0=$(for r in $(seq 1 "$REPEATS"); do field rss_first_mib "$OUT/stoker-$mode-$r.log"; done | median)
  rss1=$(for r in $(seq 1 "$REPEATS"); do field rss_last_mib "$OUT/stoker-$mode-$r.log"; done | median)
  b=$(for r in $(seq 1 "$REPEATS"); do field images_per_s "$OUT/torch-$mode-$r.log"; done | median)
  bcpu=$(for r in $(seq 1 "$REPEATS"); do field images_per_cpu_s "$OUT/torch-$mode-$r.log"; done | median)
  pss=$(for r in $(seq 1 "$REPEATS"); do field peak_pss_mib "$OUT/torch-$mode-$r.log"; done | median)
  c=$(for r in $(seq 1 "$REPEATS"); do ceiling "$OUT/ceiling-$mode-$r.log"; done | median)
  proc=$(for r in $(seq 1 "$REPEATS"); do sed -n 's/^process .*: *\([0-9.]*\) images\/s/\1/p' "$OUT/ceiling-$mode-$r.log"; done | median)
  awk -v m="$mode" -v a="$a" -v acpu="$acpu" -v b="$b" -v bcpu="$bcpu" -v c="$c" -v p="$proc" -v t="$THREADS" -v pk="$rsspk" \
      -v r0="$rss0" -v r1="$rss1" -v pss="$pss" 'BEGIN {
    printf "%s:\n", m
    printf "  (a) stoker pipeline, %d threads:        %8.1f images/s wall; %8.1f images per CPU-s (x%d = %.1f)\n", t, a, acpu, t, acpu * t
    printf "  (b) DataLoader, %d workers:             %8.1f images/s wall; %8.1f images per CPU-s (main + workers)\n", t, b, bcpu
    printf "  (c) libjpeg-turbo ceiling, 1 thread x %d: %8.1f images/s (stk__process_sample alone: %.1f x %d = %.1f)\n", t, c * t, p, t, p * t
    printf "  a/b = %.2f (wall), %.2f (CPU time)   a/c = %.2f (wall a / CPU-time c), %.2f (CPU time)\n", (b > 0 ? a / b : 0), (bcpu > 0 ? acpu / bcpu : 0), (c > 0 ? a / (c * t) : 0), (c > 0 ? acpu / c : 0)
    printf "  memory: stoker peak RSS %.1f MiB (after epoch 1: %.1f, after the last: %.1f); DataLoader peak PSS (main + workers) %.1f MiB\n", pk, r0, r1, pss
  }'
}
echo
echo "== results: medians of $REPEATS interleaved repeats, $EPOCHS epochs each (logs: $OUT)"
report train
report eval
