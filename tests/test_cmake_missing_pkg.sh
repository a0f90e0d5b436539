#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CMake's configure stops on a missing required library with a message naming the Debian
# package to install: for lmdb, libjpeg and jansson, pkg-config is given a directory that
# holds every .pc file of the system except that module's, and the configure must fail saying
# "apt-get install <package>". (Before: "Package 'lmdb', required by 'virtual:world', not
# found", no package named.)
# stk-test: normal-only (it runs cmake; nothing to sanitize)
# stk-test: once (a configure of its own, in a temporary directory, with the default compiler)
set -u
SRC_DIR=${SRC_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
command -v cmake >/dev/null || { echo "skip: no cmake"; exit 77; }
command -v pkg-config >/dev/null || { echo "skip: no pkg-config"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/stk-cmakepkg.XXXXXX")
trap 'rm -rf "$T"' EXIT
pcpath=$(pkg-config --variable pc_path pkg-config)
fails=0
for case in "lmdb liblmdb-dev" "libjpeg libjpeg62-turbo-dev" "jansson libjansson-dev"; do
  set -- $case
  mod=$1 pkg=$2
  pkg-config --exists "$mod" || { echo "skip: $mod is not installed"; exit 77; }
  pc="$T/pc-$mod"
  mkdir -p "$pc"
  IFS=: read -r -a dirs <<<"$pcpath"
  for d in "${dirs[@]}"; do
    [ -d "$d" ] || continue
    for f in "$d"/*.pc; do
      [ -e "$f" ] && [ "$(basename "$f" .pc)" != "$mod" ] && ln -sf "$f" "$pc/"
    done
  done
  out=$(PKG_CONFIG_LIBDIR="$pc" PKG_CONFIG_PATH= timeout 120 cmake -S "$SRC_DIR" -B "$T/b-$mod" \
        -DSTOKER_WITH_CUDA=OFF -DSTOKER_BUILD_TESTS=OFF -DSTOKER_WITH_FORMATS=OFF 2>&1)
  rc=$?
  if [ $rc -eq 0 ]; then
    echo "FAIL: configure without $mod succeeded"; fails=$((fails + 1))
  elif ! tr -s " \n" "  " <<<"$out" | grep -q "apt-get install $pkg"; then
    echo "FAIL: configure without $mod does not name $pkg:"; echo "$out" | tail -8
    fails=$((fails + 1))
  else
    echo "ok: without $mod: $(grep -m1 -o "$mod was not found.*" <<<"$out")"
  fi
done
[ $fails -eq 0 ] || exit 1
echo "PASS"
