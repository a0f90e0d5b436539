#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Bad data end to end on real photos (not in CI: the generator takes minutes):
# make-imagenet-like writes COUNT good images into OUT and --truncate/--corrupt broken files into
# OUT_bad (with OUT_bad/MANIFEST.tsv); test_baddata (bench mode) packs OUT + OUT_bad from one list
# file, loads an epoch in eval mode (256/224) and accounts for every file per kind (skipped at
# pack, substituted at load with its name, or decoded — and then why: warnings, damage outside
# the decoded window, undetectable), checks every good image is loaded once, and that strict
# mode stops naming a file.
#
# Usage: bench/longrun-baddata.sh [BUILD_DIR=build] [OUT=/work/data/harden-bad]
#   COUNT (200), TRUNCATE (20), CORRUPT (20) in the environment; OUT is reused if it exists.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
OUT=${2:-/work/data/harden-bad}
[ -x "$B/tests/test_baddata" ] || { echo "build $B first (tests/test_baddata)" >&2; exit 2; }
if [ ! -f "${OUT}_bad/MANIFEST.tsv" ]; then
  /usr/bin/python3 "${GEN:-/work/shared/tools/make-imagenet-like}" --count "${COUNT:-200}" --classes 10 \
    --truncate "${TRUNCATE:-20}" --corrupt "${CORRUPT:-20}" --manifest "$OUT.manifest.tsv" --force "$OUT"
fi
echo "good images in the manifest: $(($(wc -l < "$OUT.manifest.tsv") - 1)); bad files: $(($(wc -l < "${OUT}_bad/MANIFEST.tsv") - 1))"
STK_BADDATA_SRC=$OUT "$B/tests/test_baddata"
