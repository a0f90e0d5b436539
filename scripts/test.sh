#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Set up, build and run every test: the normal build (CUDA when a toolkit is present; GPU tests
# skip without a device) with every test, its Python tests again under torch 2.x, a Release (-O3)
# build with gcc (the C and shell tests and the Python tests labelled `pixels`), a Release build
# with clang and the C and shell tests (-LE python: the Python tests load the same C through
# ctypes and ran twice already; this keeps CI near 20 minutes), then the suite under ASan+UBSan,
# then the concurrency tests under TSan. Every build here has warnings as errors
# (-DSTOKER_WERROR=ON): the whole tree (library, tools, bench tools, tests) must build clean at -O2
# and -O3 with both compilers. Users' builds (scripts/run.sh, pip, a plain cmake) keep STOKER_WERROR's default, OFF.
# STK_TEST_QUICK=1 runs only the normal build.
# Each stage prints its elapsed time when it ends, and a table of all of them at the end (also
# when a stage fails), so a CI log shows where the time went.
set -euo pipefail
cd "$(dirname "$0")/.."
STAGES=()
stage_name=
stage_start=$SECONDS
stage_end() {
  if [ -n "$stage_name" ]; then
    STAGES+=("$(printf '%5d s  %s' $((SECONDS - stage_start)) "$stage_name")")
    echo "== $stage_name: $((SECONDS - stage_start)) s"
  fi
  stage_name=
}
stage() { stage_end; stage_name=$1; stage_start=$SECONDS; echo "== $1"; }
summary() {
  local rc=$?
  stage_end
  echo "== time per stage$([ "$rc" = 0 ] || echo " (stopped: exit $rc)")"
  printf '%s\n' "${STAGES[@]}"
  printf '%5d s  total\n' "$SECONDS"
}
trap summary EXIT
stage "dependencies (scripts/deps.sh test)"
bash scripts/deps.sh test
# one test more than the cores: a third of the tests' time is waiting (sleeps, injected read
# delays, the S3 server's start, the doctor's stop sequence), not CPU; tests that keep two cores
# busy say `stk-test: processors 2` and take two slots (docs/HARDENING.md, "CI time").
# STK_TEST_JOBS overrides it.
J=${STK_TEST_JOBS:-$(( $(nproc) + 1 ))}
WERROR=-DSTOKER_WERROR=ON
stage "normal build"
# (tests ON: a build/ that scripts/run.sh configured first has them off)
BUILD_DIR=build bash scripts/build.sh -DSTOKER_BUILD_TESTS=ON "$WERROR"
stage "normal build: ctest"
ctest --test-dir build --output-on-failure -j"$J"
# the Python tests again under PyPI's torch 2.x stack (torchvision v2, timm, Lightning,
# Accelerate): a venv cached between runs (scripts/venv-torch2.sh), or STK_TEST_TORCH2_PYTHON;
# STK_TEST_TORCH2=0 skips it (an offline machine). The tests that need what the venv lacks
# (lmdb, Debian's data) skip there.
if [ -z "${STK_TEST_TORCH2_PYTHON:-}" ] && [ "${STK_TEST_TORCH2:-1}" != 0 ]; then
  stage "torch 2.x venv (scripts/venv-torch2.sh)"
  STK_TEST_TORCH2_PYTHON=$(bash scripts/venv-torch2.sh)
fi
if [ -n "${STK_TEST_TORCH2_PYTHON:-}" ]; then
  stage "Python tests under $STK_TEST_TORCH2_PYTHON"
  STOKER_TEST_PYTHON="$STK_TEST_TORCH2_PYTHON" ctest --test-dir build --output-on-failure -j"$J" -L python
fi
if [ "${STK_TEST_QUICK:-0}" = 1 ]; then exit 0; fi
stage "Release (-O3), gcc: build"
CC=gcc BUILD_DIR=build-release bash scripts/build.sh -DCMAKE_BUILD_TYPE=Release -DSTOKER_BUILD_TESTS=ON "$WERROR"
# the C, shell and fuzz-replay tests, and of the Python tests those that compare stoker's pixels
# or numbers with an independent implementation (labelled `pixels`: "stk-test: pixels" in the
# file): the C arithmetic -O3 vectorises is what they check byte for byte. The other Python tests
# check the binding's own logic, which is the same Python code the two passes above ran.
# Neither Release pass runs the tests labelled `once` ("stk-test: once" in the script, with its
# reason): they read no build tree (test_wheel: pip compiles its own libstoker with the default
# compiler; test_deps_lock, test_cmake_missing_pkg, test_werror_default, test_header_docs: the
# checkout's scripts and headers, configures of their own), so a second run checks the same thing.
stage "Release (-O3), gcc: ctest (C, shell, Python pixels)"
ctest --test-dir build-release --output-on-failure -j"$J" -L '^(c|sh|fuzz|pixels)$' -LE '^once$'
stage "Release (-O3), clang: build"
CC=clang BUILD_DIR=build-release-clang bash scripts/build.sh -DCMAKE_BUILD_TYPE=Release -DSTOKER_BUILD_TESTS=ON \
  -DSTOKER_WITH_CUDA=OFF "$WERROR"
stage "Release (-O3), clang: ctest (C and shell)"
ctest --test-dir build-release-clang --output-on-failure -j"$J" -LE '^(python|once)$'
stage "ASan + UBSan: build"
BUILD_DIR=build-asan bash scripts/build.sh -DSTOKER_SANITIZE=address -DSTOKER_WITH_CUDA=OFF "$WERROR"
stage "ASan + UBSan: ctest"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$J" -LE "python|normal-only"
stage "TSan: build"
BUILD_DIR=build-tsan bash scripts/build.sh -DSTOKER_SANITIZE=thread -DSTOKER_WITH_CUDA=OFF "$WERROR"
stage "TSan: ctest (concurrency tests)"
# suppressions: tests/tsan.supp (each entry with its reason)
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp \
  ctest --test-dir build-tsan --output-on-failure -j"$J" -L concurrency
