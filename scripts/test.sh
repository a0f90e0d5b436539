#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Set up, build and run every test: the normal build (CUDA when a toolkit is present; GPU tests
# skip without a device), then the suite under ASan+UBSan, then the concurrency tests under TSan.
# STK_TEST_QUICK=1 runs only the normal build.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh test
J=$(nproc)
echo "== normal build"
# (tests ON: a build/ that scripts/run.sh configured first has them off)
BUILD_DIR=build bash scripts/build.sh -DSTOKER_BUILD_TESTS=ON
ctest --test-dir build --output-on-failure -j"$J"
if [ "${STK_TEST_QUICK:-0}" = 1 ]; then exit 0; fi
echo "== ASan + UBSan"
BUILD_DIR=build-asan bash scripts/build.sh -DSTOKER_SANITIZE=address -DSTOKER_WITH_CUDA=OFF
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$J" -LE "python|normal-only"
echo "== TSan (concurrency tests)"
BUILD_DIR=build-tsan bash scripts/build.sh -DSTOKER_SANITIZE=thread -DSTOKER_WITH_CUDA=OFF
# suppressions: tests/tsan.supp (each entry with its reason)
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp \
  ctest --test-dir build-tsan --output-on-failure -j"$J" -L concurrency
