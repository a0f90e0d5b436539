#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Set up, build and run the main job: loaderbench on DATASET, or — with no argument — on its
# embedded default (a small ImageNet-like sample it synthesises and packs itself).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
BUILD_DIR=build bash scripts/build.sh >/dev/null
exec build/loaderbench "$@"
