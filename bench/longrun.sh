#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Long run (not in CI): EPOCHS epochs over the 10 000-image ImageNet-like set with
# one loader (batch 128, train 224x224, default workers), RSS sampled after every epoch, and the
# least-squares slope of RSS over epochs 1..E-1 (epoch 0 includes the warm-up). A flat loader
# shows a slope of a few KB/epoch at most (allocator noise).
#
# Usage: bench/longrun.sh [BUILD_DIR=build] [EPOCHS=20]
#   SRC (default /work/data/imagenet-like) is packed once with `stoker pack` into
#   DST (default /work/data/harden-shards). Output: a TSV table on stdout (also in DST/longrun.tsv)
#   and the loader's report.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
E=${2:-20}
SRC=${SRC:-/work/data/imagenet-like}
DST=${DST:-/work/data/harden-shards}
[ -x "$B/stoker" ] && [ -x "$B/tests/test_longrun" ] || { echo "build $B first (stoker, tests/test_longrun)" >&2; exit 2; }
if [ ! -e "$DST/shard-00000.lmdb" ]; then
  echo "packing $SRC into $DST" >&2
  "$B/stoker" pack "$SRC" "$DST" --quiet
fi
"$B/stoker" info "$DST" >&2
STK_LONGRUN_EPOCHS=$E STK_LONGRUN_DATA=$DST "$B/tests/test_longrun" | tee "$DST/longrun.tsv"
