#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# decode_ceiling.sh — the libjpeg-turbo ceiling on one thread against stoker's
# full per-sample work, on the same images and the same crops.
#
#   bench/decode_ceiling.sh [BUILD_DIR] [decodebench options...]
#
# Builds bench/tools/decodebench in BUILD_DIR (default build-bench, CUDA off) if needed, then runs
# it on /work/data/imagenet-like (all 10 000 images, in memory) with the train crops that
# stk__crop_params draws for seed 0, epoch 0:
#   ceiling  = header + crop-window decode at the smallest covering power-of-two DCT scale
#   process  = stk__process_sample (the same decode + antialiased resize to 224x224 + flip)
# and prints images/s for each (medians of 5 interleaved repeats, thread CPU time), the
# overhead ratio and the fraction of samples at each DCT scale. The target: overhead < 15%.
# Then the same for eval (Resize(256) + CenterCrop(224) window).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-bench}
shift || true
if [ ! -x "$B/decodebench" ]; then
  cmake -S . -B "$B" -DSTOKER_WITH_CUDA=OFF -DSTOKER_BUILD_TESTS=OFF >/dev/null
  make -C "$B" -j"$(nproc)" decodebench >/dev/null
fi
M=/work/data/imagenet-like.manifest.tsv
if [ ! -f "$M" ]; then echo "decode_ceiling: $M not found" >&2; exit 77; fi
echo "== $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== train (RandomResizedCrop 224 + flip)"
"$B/decodebench" --list "$M" --repeats 5 "$@"
echo "== eval (Resize 256 + CenterCrop 224)"
"$B/decodebench" --list "$M" --repeats 5 --eval "$@"
