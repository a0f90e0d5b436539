#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Warnings are errors only in the project's own test builds: a plain configure of the tree
# (as a user runs it) has STOKER_WERROR OFF and no -Werror in any compile command, while
# scripts/test.sh passes -DSTOKER_WERROR=ON to every build it makes (gcc and clang Release
# builds among them), pip never does, scripts/run.sh turns it off (build/ may be test.sh's), and
# deps.sh's test profile installs clang.
# (Before, STOKER_WERROR defaulted to ON and gcc 12's -O3 maybe-uninitialized in
# loader_params.c failed a plain Release build.)
# stk-test: normal-only
# stk-test: once (a plain configure of its own and the checkout's scripts)
set -u
fail() { echo "FAIL: $*"; exit 1; }
S=${SRC_DIR:?}
T=$(mktemp -d "${TMPDIR:-/tmp}/stk-werror.XXXXXX")
trap 'rm -rf "$T"' EXIT

cmake -S "$S" -B "$T/b" -DCMAKE_BUILD_TYPE=Release -DSTOKER_BUILD_TESTS=OFF -DSTOKER_WITH_CUDA=OFF \
  >"$T/cm.log" 2>&1 || { cat "$T/cm.log"; fail "plain configure"; }
grep -qx "STOKER_WERROR:BOOL=OFF" "$T/b/CMakeCache.txt" || fail "default $(grep STOKER_WERROR: "$T/b/CMakeCache.txt")"
! grep -q -- "-Werror" "$T/b/compile_commands.json" || fail "-Werror in a plain build's compile commands"

t="$S/scripts/test.sh"
grep -q '^WERROR=-DSTOKER_WERROR=ON$' "$t" || fail "test.sh: no WERROR=-DSTOKER_WERROR=ON"
n=$(grep -c 'scripts/build.sh' "$t")
[ "$n" -ge 5 ] || fail "test.sh: $n builds, want 5 (normal, gcc and clang Release, ASan, TSan)"
# every build line (continuations joined) passes it
builds=$(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$t" | grep 'scripts/build.sh')
! grep -v '"$WERROR"' <<<"$builds" | grep -q . || fail "a test.sh build without \$WERROR: $(grep -v '"$WERROR"' <<<"$builds")"
grep -q 'CC=gcc .*CMAKE_BUILD_TYPE=Release' <<<"$builds" || fail "test.sh: no gcc Release build"
grep -q 'CC=clang .*CMAKE_BUILD_TYPE=Release' <<<"$builds" || fail "test.sh: no clang Release build"
! cat "$S/scripts/run.sh" "$S/scripts/build.sh" | grep -v '^ *#' | grep -q 'STOKER_WERROR=ON' ||
  fail "a user build turns -Werror on"
# run.sh turns it off, also in a build/ that test.sh configured with it on
grep -q '^args=(-DSTOKER_WERROR=OFF)$' "$S/scripts/run.sh" || fail "run.sh does not pass -DSTOKER_WERROR=OFF"
grep -qx 'STOKER_WERROR = "OFF"' "$S/pyproject.toml" || fail "pyproject.toml: STOKER_WERROR not OFF"
grep -q '^TEST_PKGS=' "$S/scripts/deps.sh" && sed -n '/^TEST_PKGS=/,/^)/p' "$S/scripts/deps.sh" | grep -qw clang ||
  fail "deps.sh test does not install clang"
echo ok
