#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The exported ABI is exactly what the version script lists: every symbol libstoker.so exports
# is named in src/stoker.map under a release section, every name there is exported, and the set
# equals the functions include/stoker.h declares with STK_API. Each release node is versioned.
set -u
LIB=${STOKER_LIBRARY:-}
[ -n "$LIB" ] && [ -f "$LIB" ] || { echo "skip: STOKER_LIBRARY not set"; exit 77; }
command -v nm >/dev/null || { echo "skip: no nm"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/stk-syms.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail=0
nm -D --defined-only "$LIB" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sort >"$T/exported.ver"
sed 's/@.*//' "$T/exported.ver" | sort -u >"$T/exported"
# names listed in the map (inside `global:` blocks), with their section
awk '/^[A-Z0-9_.]+ *\{/ {sec=$1} /global:/ {g=1; next} /local:/ {g=0} /\}/ {g=0}
     g && /^[ \t]*[a-z_][a-z0-9_]*;/ {gsub(/[ \t;]/, ""); print $0, sec}' "$SRC_DIR/src/stoker.map" >"$T/map.sec"
cut -d' ' -f1 "$T/map.sec" | sort >"$T/map"
sort -u "$T/map" | cmp -s - "$T/map" || { echo "FAIL: a symbol is listed twice in stoker.map"; fail=1; }
grep -q '\*' <(awk '/global:/ {g=1; next} /local:/ {g=0} g' "$SRC_DIR/src/stoker.map") &&
  { echo "FAIL: a wildcard in a global: block (list each symbol)"; fail=1; }
grep -E '^STK_API ' "$SRC_DIR/include/stoker.h" | grep -oE '^STK_API[^;(]*[ *]([a-z_][a-z0-9_]*) *\(' |
  sed -E 's/.*[ *]([a-z_][a-z0-9_]*) *\($/\1/' | sort -u >"$T/header"
if ! diff -u "$T/map" "$T/exported" >"$T/d1"; then echo "FAIL: stoker.map vs exported:"; cat "$T/d1"; fail=1; fi
if ! diff -u "$T/header" "$T/exported" >"$T/d2"; then echo "FAIL: STK_API in stoker.h vs exported:"; cat "$T/d2"; fail=1; fi
# each exported symbol carries the version node of the section that lists it
while read -r name sec; do
  grep -qx "$name@@$sec" "$T/exported.ver" || grep -qx "$name@$sec" "$T/exported.ver" ||
    { echo "FAIL: $name not exported as $name@@$sec"; fail=1; }
done <"$T/map.sec"
n=$(wc -l <"$T/exported")
[ "$fail" = 0 ] && echo "test_symbols: $n symbols, map = exports = header" || exit 1
