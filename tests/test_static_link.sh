#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Static linking of the installed library, the two ways users do it: `cmake --install` into a
# temporary prefix, then tests/install_consumer.c (writer -> dataset round trip, a loader opened
# on it, the CUDA device count, the CPU budget: enough to pull in every stage's objects, the CUDA
# stager's included in a CUDA build) linked against libstoker.a
#   1. through find_package(stoker) and stoker::stoker_static (its exported link interface),
#   2. through `pkg-config --static --libs stoker` (Requires.private + Libs.private),
#   3. fully static (-static) through pkg-config, when the dependencies' .a files are there;
# each binary must not need libstoker.so and must run.
# stk-test: normal-only (the consumer would need the sanitizer runtime)
set -u
. "$(dirname "$0")/install_prefix.sh" static
pc=$(find "$T/prefix" -name stoker.pc | head -1)
archive=$(find "$T/prefix" -name libstoker.a | head -1)
[ -n "$pc" ] && [ -n "$archive" ] || fail "stoker.pc and libstoker.a installed"

mkdir -p "$T/consumer"
cp "$(dirname "$0")/install_consumer.c" "$T/consumer/main.c"

check_binary() { # NAME BINARY DATASET
  readelf -d "$2" | grep -q 'NEEDED.*libstoker' && fail "$1: the binary needs libstoker.so"
  out=$("$2" "$3") || fail "$1: run: $out"
  [ "$out" = "consumer-ok CRC32C mismatch" ] || fail "$1: output: $out"
  echo "$1: $out"
}

# 1. find_package(stoker) -> stoker::stoker_static
cat >"$T/consumer/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(consumer C)
find_package(stoker 0.5 REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE stoker::stoker_static)
CM
cmake -S "$T/consumer" -B "$T/consumer/build" -DCMAKE_PREFIX_PATH="$T/prefix" >"$T/cm.log" 2>&1 ||
  { cat "$T/cm.log"; fail "configure with find_package"; }
cmake --build "$T/consumer/build" --verbose >>"$T/cm.log" 2>&1 || { tail -30 "$T/cm.log"; fail "link with stoker::stoker_static"; }
check_binary "cmake stoker::stoker_static" "$T/consumer/build/consumer" "$T/ds1"

# 2. pkg-config --static: libstoker.a itself (-l:libstoker.a: the .so lies next to it)
export PKG_CONFIG_PATH="$(dirname "$pc")"
libs=$(pkg-config --static --libs stoker) || fail "pkg-config --static --libs stoker"
libs=${libs/-lstoker /-l:libstoker.a }
"$CC" -std=c11 -Wall -Werror $(pkg-config --cflags stoker) -o "$T/consumer/pc" "$T/consumer/main.c" $libs \
  2>"$T/pc.log" || { cat "$T/pc.log"; fail "link with pkg-config --static ($libs)"; }
check_binary "pkg-config --static" "$T/consumer/pc" "$T/ds2"

# 3. fully static, when the dependencies' archives are installed (Debian's -dev packages have them)
# — the dependencies' own too: libcurl's (nghttp2, ssh2, ldap ..., which stoker.pc leaves to the
# shared libcurl) count when libstoker links libcurl (the s3 build)
deps=$(pkg-config --static --libs-only-l stoker)
case " $deps " in *" -lcurl "*) deps="$deps $(pkg-config --static --libs-only-l libcurl libxml-2.0 2>/dev/null)";; esac
missing=
for l in $(echo "$deps" | tr ' ' '\n' | sed -n 's/^-l//p' | sort -u); do
  case "$l" in stoker|pthread|m|dl|rt|c|stdc++) continue;; esac
  if ! "$CC" -print-file-name="lib$l.a" | grep -q /; then
    for d in $(pkg-config --static --libs-only-L stoker | sed 's/-L//g') /usr/lib/x86_64-linux-gnu /usr/lib; do
      [ -f "$d/lib$l.a" ] && continue 2
    done
    missing="$missing lib$l.a"
  fi
done
if [ -n "$missing" ]; then
  why=
  # Debian's libcurl is built with GSS-API (Kerberos), and libkrb5-dev ships no static library:
  # with libcurl linked in (the s3 build) a fully static link cannot be made from Debian's packages
  case "$missing" in *libgssapi_krb5.a*) why="; libcurl (s3 build) needs libgssapi_krb5.a, which Debian's libkrb5-dev does not ship: a fully static link with Debian's libcurl is impossible (docs/PACKAGING.md)";; esac
  echo "fully static: skipped (missing:$missing$why)"; echo ok; exit 0
fi
# libtiff's static dependency libLerc is C++, and Debian's libtiff-4.pc does not name the C++
# runtime: a fully static link needs it after -lLerc (the decode layer links libtiff since 0.5)
case " $libs " in *" -lLerc "*) libs="$libs -lstdc++";; esac
"$CC" -static -std=c11 -Wall -Werror $(pkg-config --cflags stoker) -o "$T/consumer/full" "$T/consumer/main.c" $libs \
  2>"$T/full.log" || { cat "$T/full.log"; fail "fully static link ($libs)"; }
readelf -d "$T/consumer/full" 2>/dev/null | grep -q NEEDED && fail "the -static binary has NEEDED entries"
check_binary "fully static" "$T/consumer/full" "$T/ds3"
echo ok
