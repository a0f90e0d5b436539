#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build, HERE, everything bench/device/check.sh runs on the GPU machine, and put it into .device/
# (ignored by git through .git/info/exclude): the GPU tests, the benchmark programs, libstoker.so
# for the Python binding, the shared libraries they need that the GPU machine's image may lack
# (found with ldd), and the dataset generator with its source photos. Then carry `.device` in
# the device run (see bench/device/README.md). Needs the CUDA toolkit (/usr/local/cuda).
#
#   bash bench/device/prepare.sh            # BUILD_DIR (default build-device), CUDA_ARCH (default 90)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
B=${BUILD_DIR:-$ROOT/build-device}
D=$ROOT/.device
CUDA=${CUDA_HOME:-/usr/local/cuda}
ARCH=${CUDA_ARCH:-90}
J=$(nproc)

exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qxF '/.device/' "$exclude" 2>/dev/null || echo '/.device/' >>"$exclude"

echo "== build ($B, CUDA arch $ARCH)"
mkdir -p "$B"
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DSTOKER_WITH_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$ARCH" >"$B/prepare-cmake.log" 2>&1 || { cat "$B/prepare-cmake.log"; exit 1; }
make -C "$B" -j"$J" stoker stoker_static stk_testcuda test_stager test_cuda_loader loaderbench stoker_cli >/dev/null

rm -rf "$D"
mkdir -p "$D/bin" "$D/lib" "$D/photo-cache/photos"
cp "$B/tests/test_stager" "$B/tests/test_cuda_loader" "$B/loaderbench" "$B/stoker" "$D/bin/"
cp -L "$B/libstoker.so" "$D/lib/"
# the binding and the dynamic loader look for the SONAME too
soname=$(objdump -p "$B/libstoker.so" | awk '/SONAME/ {print $2}')
[ -n "$soname" ] && cp -L "$B/libstoker.so" "$D/lib/$soname"
echo "   libstoker.so ($soname)"

echo "== benchmark programs"
CFLAGS=(-O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Iinclude -Isrc -Itests/cuda -I"$CUDA/include")
LIBS=("$B/libstoker.a" -L"$CUDA/lib64" -lcudart_static -llmdb -ljpeg -lpthread -ldl -lrt -lm -lstdc++)
if pkg-config --exists liburing 2>/dev/null; then LIBS+=($(pkg-config --libs liburing)); fi
cc "${CFLAGS[@]}" bench/device/stager_h2d.c "${LIBS[@]}" -o "$D/bin/stager_h2d"
cc "${CFLAGS[@]}" bench/device/idle_gap.c "$B/tests/libstk_testcuda.a" "${LIBS[@]}" -o "$D/bin/idle_gap"

echo "== shared libraries (ldd)"
# Everything outside glibc/libgcc/libstdc++ (which any x86-64 Linux image has in a newer version).
for f in "$D"/bin/* "$D/lib/libstoker.so"; do
  ldd "$f" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
    libstoker.so*) ;;
    *) cp -L "$lib" "$D/lib/" && echo "   $(basename "$lib")" ;;
  esac
done

echo "== dataset generator and photos"
cp /work/shared/tools/make-imagenet-like "$D/"
photos=${STOKER_PHOTOS:-$HOME/.cache/stoker-photos/photos}
if [ ! -d "$photos" ] || [ -z "$(ls -A "$photos" 2>/dev/null)" ]; then
  # the generator fetches and unpacks its photos on first use (apt-get download opencv-doc)
  /usr/bin/python3 "$D/make-imagenet-like" --count 1 --classes 1 --force "$(mktemp -d)/x" >/dev/null
fi
cp "$photos"/* "$D/photo-cache/photos/"

# smoke: the programs start and say there is no GPU here
for p in stager_h2d test_stager; do
  rc=0; "$D/bin/$p" >/dev/null 2>&1 || rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 77 ] || { echo "prepare: $D/bin/$p exits $rc here"; exit 1; }
done
lbv=$("$D/bin/loaderbench" --version)
grep -qw cuda <<<"$lbv" || { echo "prepare: $D/bin/loaderbench is not a CUDA build: $lbv"; exit 1; }
du -sh "$D"
echo "ready: carry .device in the run (bench/device/README.md)"
