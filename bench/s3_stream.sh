#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Everything bench/s3_stream.py measures (docs/S3.md "Measured: over an emulated link"), in one
# command from a built tree: the images (../shared/tools/make-imagenet-like, 1000 photos in 10
# classes, made once), a venv with MosaicML Streaming and WebDataset beside Debian's torch (made
# once: Streaming 0.7.6 needs `transformers` at import), a fresh test S3 server
# (scripts/s3-server.sh, stopped at the end), then bench/s3_stream.py over the emulated
# 1 Gbit/s, 20 ms link (tests/s3_fault_proxy.py).
#   bash bench/s3_stream.sh [WORK [REPEATS]]        # WORK default /tmp/stk-s3stream, REPEATS 3
# Env: BUILD (default build: its libstoker.so), VENV (default WORK/venv), IMAGES (default
# WORK/imnet), extra arguments for s3_stream.py in S3_STREAM_ARGS.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/tmp/stk-s3stream} reps=${2:-3}
build=${BUILD:-$here/build} venv=${VENV:-$work/venv} images=${IMAGES:-$work/imnet}
mkdir -p "$work"
lib=$(ls "$build"/libstoker.so 2>/dev/null || true)
[ -n "$lib" ] || { echo "no $build/libstoker.so: build first (scripts/build.sh)" >&2; exit 2; }
if [ ! -d "$images" ]; then
  "$here/../shared/tools/make-imagenet-like" --count 1000 --classes 10 "$images"
fi
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import streaming, webdataset' 2>/dev/null; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install -q --no-deps mosaicml-streaming==0.7.6 webdataset==1.0.2 braceexpand \
    xxhash zstd catalogue python-snappy cramjam Brotli regex tqdm transformers==4.40.2 \
    huggingface_hub==0.23.4 tokenizers==0.19.1 safetensors==0.8.0 typing_extensions
fi
srv=$work/server
bash "$here/scripts/s3-server.sh" start "$srv" >/dev/null
trap 'bash "$here/scripts/s3-server.sh" stop "$srv" >/dev/null' EXIT
eval "$(bash "$here/scripts/s3-server.sh" env "$srv")"
echo "machine: $(nproc) cores; load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
STOKER_LIBRARY=$lib "$venv/bin/python" "$here/bench/s3_stream.py" "$images" "$work/bench" \
  --repeat "$reps" ${S3_STREAM_ARGS:-}
