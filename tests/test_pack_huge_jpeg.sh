#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# JPEGs over the pack's pixel limit (178,956,970, Pillow's bomb bound) are never stored unchecked
# nor dropped without a word: a damaged 843-byte file claiming 65500x65500 gets the same full
# decode check as every JPEG (skipped as damaged; --keep-damaged keeps and lists it, and
# `verify --decode` calls it bad too); a valid 14000x13000 one is skipped and listed as too large
# (counted in the summary), and `--max-side 1024` resizes it (a DCT-scaled decode first) to
# 1024x951; a 9600x9400 JPEG (over the loader's default 89,478,485) is stored with a warning in
# the report, on stderr and in the summary. Needs Pillow to write the test images.
. "$(dirname "$0")/cli_util.sh"
PY=/usr/bin/python3
"$PY" -c "import PIL" 2>/dev/null || { echo "skip: no Pillow"; exit 77; }
mkdir -p "$T/src/a" "$T/src/b" "$T/src/c" "$T/bomb/a" "$T/bomb/b"
"$PY" - "$T" <<'PYEOF' || fail "making the test images"
import io, struct, sys
from PIL import Image, ImageDraw
t = sys.argv[1]
def big(w, h, path, mode):
    im = Image.new(mode, (w, h), 90)
    d = ImageDraw.Draw(im)
    for k in range(0, w, 997):
        d.rectangle([k, k * h // w, k + 400, k * h // w + 300], fill=200 if mode == "L" else (200, 40, 90))
    im.save(path, quality=70)
big(14000, 13000, t + "/src/a/huge.jpg", "L")
big(9600, 9400, t + "/src/b/large.jpg", "L")
Image.new("RGB", (40, 30), (1, 2, 3)).save(t + "/src/c/ok.jpg")
# the bomb: a real 64x48 JPEG whose SOF says 65500x65500, cut (or padded) to 843 bytes
b = io.BytesIO(); Image.new("RGB", (64, 48), (120, 30, 200)).save(b, "JPEG", quality=90)
d = bytearray(b.getvalue()); i = d.find(b"\xff\xc0")
struct.pack_into(">HH", d, i + 5, 65500, 65500)
d = (d + bytes(843))[:843]
open(t + "/bomb/a/bomb.jpg", "wb").write(bytes(d))
Image.new("RGB", (40, 30), (1, 2, 3)).save(t + "/bomb/b/ok.jpg")
PYEOF
[ "$(stat -c %s "$T/bomb/a/bomb.jpg")" = 843 ] || fail "bomb size"
size_of() { "$STOKER" get "$1" "$2" | "$PY" -c "import io, sys; from PIL import Image; print('%dx%d' % Image.open(io.BytesIO(sys.stdin.buffer.read())).size)"; }

# the 843-byte bomb: checked like any JPEG, so skipped as damaged, listed and counted
expect_rc 0 "$STOKER" pack "$T/bomb" "$T/b1"
grep -qE "^$T/bomb/a/bomb.jpg	damaged JPEG: " "$T/b1/pack-report.tsv" || { cat "$T/b1/pack-report.tsv"; fail "bomb listed"; }
grep -q "skipped 1 file" "$T/out" || { cat "$T/out"; fail "bomb counted"; }
expect_rc 0 "$STOKER" ls "$T/b1"
[ "$(wc -l <"$T/out")" = 1 ] || fail "bomb not stored"
expect_rc 0 "$STOKER" pack "$T/bomb" "$T/b2" --max-side 1024 --quiet
grep -qE "^$T/bomb/a/bomb.jpg	damaged JPEG: " "$T/b2/pack-report.tsv" || fail "bomb under --max-side"
expect_rc 0 "$STOKER" pack "$T/bomb" "$T/b3" --keep-damaged --quiet
grep -qE "^$T/bomb/a/bomb.jpg	kept-damaged: damaged JPEG: " "$T/b3/pack-report.tsv" || fail "bomb kept and listed"
expect_rc 3 "$STOKER" verify "$T/b3" --decode
grep -q "^BAD	0	shard-00000.lmdb key 0 (a/bomb.jpg)" "$T/out" || { cat "$T/out"; fail "verify --decode: the kept bomb"; }

# 14000x13000: over the pack's limit, listed; 9600x9400: stored with a warning
expect_rc 0 "$STOKER" pack "$T/src" "$T/d1"
rep="$T/d1/pack-report.tsv"
grep -qxF "$T/src/a/huge.jpg	too large: 14000x13000 = 182000000 pixels, over the pack's limit of 178956970 (Pillow's decompression-bomb bound; --max-side resizes it)" "$rep" || { cat "$rep"; fail "huge listed"; }
grep -q "skipped 1 file that cannot be packed" "$T/out" || { cat "$T/out"; fail "huge counted"; }
grep -qF "$T/src/b/large.jpg	over-loader-limit: 9600x9400 = 90240000 pixels, over the loader's default limit of 89478485" "$rep" || { cat "$rep"; fail "large listed"; }
grep -q "warning: 1 image over the loader's default limit of 89478485 pixels" "$T/out" || { cat "$T/out"; fail "summary warns"; }
grep -qF "stoker: warning: $T/src/b/large.jpg: 9600x9400" "$T/err" || { cat "$T/err"; fail "stderr warns"; }
expect_rc 0 "$STOKER" ls "$T/d1"
[ "$(cut -f6 "$T/out" | tr '\n' ' ')" = "shard-00000.lmdb key 0 (b/large.jpg) shard-00000.lmdb key 1 (c/ok.jpg) " ] || { cat "$T/out"; fail "records of d1"; }
cmp -s <("$STOKER" get "$T/d1" 0) "$T/src/b/large.jpg" || fail "large stored byte for byte"

# --max-side 1024: the huge one resized (1/8-scale decode, then the loader's filter), large too
expect_rc 0 "$STOKER" pack "$T/src" "$T/d2" --max-side 1024
grep -q "skipped" "$T/out" && { cat "$T/out"; fail "--max-side skipped something"; }
[ ! -s "$T/d2/pack-report.tsv" ] || { cat "$T/d2/pack-report.tsv"; fail "--max-side: nothing to report"; }
[ "$(size_of "$T/d2" 0)" = 1024x951 ] || fail "huge resized: $(size_of "$T/d2" 0)"
[ "$(size_of "$T/d2" 1)" = 1024x1003 ] || fail "large resized: $(size_of "$T/d2" 1)"
expect_rc 0 "$STOKER" verify "$T/d2" --decode
echo ok
