#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `cmake --install` into a temporary prefix, then a C consumer (tests/install_consumer.c: a
# dataset written with stk_writer and read back with stk_dataset, a loader opened on it) built
# twice: with pkg-config and with find_package(stoker) in a CMake project. The installed `stoker`
# CLI runs too.
set -u
. "$(dirname "$0")/install_prefix.sh" install
[ -f "$T/prefix/include/stoker.h" ] || fail "header installed"
pc=$(find "$T/prefix" -name stoker.pc | head -1)
cfg=$(find "$T/prefix" -name stokerConfig.cmake | head -1)
[ -n "$pc" ] || fail "stoker.pc installed"
[ -n "$cfg" ] || fail "stokerConfig.cmake installed"
libdir=$(dirname "$(find "$T/prefix" -name 'libstoker.so*' | head -1)")
[ -d "$libdir" ] || fail "libstoker.so installed"
[ -x "$T/prefix/bin/stoker" ] || fail "CLI installed"
"$T/prefix/bin/stoker" --version >/dev/null || fail "installed CLI runs"

mkdir -p "$T/consumer"
cp "$(dirname "$0")/install_consumer.c" "$T/consumer/main.c"

# 1. pkg-config
export PKG_CONFIG_PATH="$(dirname "$pc")"
flags=$(pkg-config --cflags --libs stoker) || fail "pkg-config stoker"
"$CC" -std=c11 -Wall -Werror -o "$T/consumer/pc" "$T/consumer/main.c" $flags -Wl,-rpath,"$libdir" \
    || fail "build with pkg-config ($flags)"
out=$("$T/consumer/pc" "$T/ds1") || fail "pkg-config consumer run: $out"
[ "$out" = "consumer-ok CRC32C mismatch" ] || fail "pkg-config consumer output: $out"

# 2. find_package(stoker)
cat >"$T/consumer/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(consumer C)
find_package(stoker 0.5 REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE stoker::stoker)
CM
cmake -S "$T/consumer" -B "$T/consumer/build" -DCMAKE_PREFIX_PATH="$T/prefix" \
    -DCMAKE_BUILD_RPATH="$libdir" >"$T/cm.log" 2>&1 || { cat "$T/cm.log"; fail "configure with find_package"; }
cmake --build "$T/consumer/build" >>"$T/cm.log" 2>&1 || { cat "$T/cm.log"; fail "build with find_package"; }
out=$("$T/consumer/build/consumer" "$T/ds2") || fail "find_package consumer run: $out"
[ "$out" = "consumer-ok CRC32C mismatch" ] || fail "find_package consumer output: $out"
# the installed CLI reads what the consumer wrote
"$T/prefix/bin/stoker" verify "$T/ds2" >/dev/null || fail "installed CLI verify"
echo ok
