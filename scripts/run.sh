#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Set up, build and run the main job: loaderbench on DATASET, or — with no argument — on its
# embedded default (a small ImageNet-like sample it synthesises and packs itself).
# Installs only what the build needs (deps.sh run: no torch, clang or valgrind), builds only
# loaderbench and the library, and says what it is doing; the build log is build/run-build.log.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "run.sh: $*" >&2; }
say "checking packages (scripts/deps.sh run)"
bash scripts/deps.sh run
# warnings never fail this build, even in a build/ that scripts/test.sh configured with
# -DSTOKER_WERROR=ON
args=(-DSTOKER_WERROR=OFF)
# a fresh build/ leaves the tests out (they need the test packages); one that scripts/test.sh
# configured keeps its other settings
[ -f build/CMakeCache.txt ] || args+=(-DSTOKER_BUILD_TESTS=OFF)
mkdir -p build
log=build/run-build.log
say "configuring build/ (cmake, log: $log)"
if ! cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "${args[@]}" >"$log" 2>&1; then
  tail -30 "$log" >&2; say "cmake failed (whole log: $log)"; exit 1
fi
say "$(grep -m1 -- '-- stoker ' "$log" | sed 's/^-- //')"
say "building libstoker and loaderbench with $(nproc) jobs"
t0=$(date +%s)
set +e
cmake --build build -j"$(nproc)" --target loaderbench 2>&1 | tee -a "$log" |
  grep --line-buffered -E '^\[ *[0-9]+%\] (Built target|Linking)' | sed -u 's/^/run.sh:   /' >&2
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -ne 0 ]; then
  grep -E -A5 'error|Error' "$log" | tail -40 >&2; say "build failed (whole log: $log)"; exit 1
fi
say "built in $(( $(date +%s) - t0 )) s; running build/loaderbench $*"
exec build/loaderbench "$@"
