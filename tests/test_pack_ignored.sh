#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# An ImageFolder's files whose extension torchvision's ImageFolder does not load (IMG_EXTENSIONS:
# .jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp, any case) are left out as ImageFolder leaves
# them — a real GIF too, though stoker reads GIFs — and named: counted in the summary and listed
# in pack-report.tsv with the extension. The records are exactly torchvision's samples, in its
# order, when torchvision is installed.
. "$(dirname "$0")/cli_util.sh"

"$MK" "$T/src" 2 5 32 64 4 >/dev/null || fail "stk-mkfolder"
# a 1x1 GIF89a
printf 'GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff\x21\xf9\x04\x01\x00\x00\x00\x00\x2c\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02\x44\x01\x00\x3b' \
    >"$T/src/class_000/anim.gif"
mkdir -p "$T/src/class_001/sub"
cp "$T/src/class_000/anim.gif" "$T/src/class_001/sub/LOOP.GIF"
echo notes >"$T/src/class_001/notes.txt"
echo x >"$T/src/class_000/README"
cp "$T/src/class_000/img_00000.jpg" "$T/src/class_001/sub/photo.JPG" # any case: packed

expect_rc 0 timeout 120 "$STOKER" pack "$T/src" "$T/ds" --threads 2
grep -q "^packed 11 records (2 classes)" "$T/out" || { cat "$T/out"; fail "summary: 11 records"; }
grep -q "^left out 4 files whose extension torchvision's ImageFolder does not load" "$T/out" ||
    { cat "$T/out"; fail "summary names the files left out"; }
R="$T/ds/pack-report.tsv"
[ "$(wc -l <"$R")" = 4 ] || { cat "$R"; fail "report: 4 lines"; }
exts=".jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp"
for f in class_000/anim.gif:.gif class_001/sub/LOOP.GIF:.GIF class_001/notes.txt:.txt; do
    grep -qF "$T/src/${f%%:*}	extension ${f##*:} is not one of torchvision ImageFolder's image extensions ($exts)" "$R" ||
        { cat "$R"; fail "report: ${f%%:*}"; }
done
grep -qF "$T/src/class_000/README	no extension; torchvision's ImageFolder loads only $exts" "$R" ||
    { cat "$R"; fail "report: README"; }
grep -q "skipped .*anim.gif: extension .gif is not" "$T/err" || { cat "$T/err"; fail "listed on stderr"; }
expect_rc 0 "$STOKER" ls "$T/ds"
sed 's/.*(\(.*\))$/\1/' "$T/out" >"$T/names"
grep -q "class_001/sub/photo.JPG" "$T/names" || fail "photo.JPG packed"

# the same samples as torchvision's ImageFolder, in its order
if /usr/bin/python3 -c "import torchvision" 2>/dev/null; then
    /usr/bin/python3 - "$T/src" >"$T/tv" <<'EOF' || fail "torchvision ImageFolder"
import os, sys
from torchvision.datasets import ImageFolder
root = sys.argv[1]
for p, _ in ImageFolder(root, loader=lambda p: None).samples:
    print(os.path.relpath(p, root))
EOF
    cmp -s "$T/names" "$T/tv" || { diff "$T/names" "$T/tv"; fail "records differ from torchvision's samples"; }
else
    echo "torchvision not installed: its sample list not compared"
fi
echo ok
