#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `stoker pack` stores only JPEGs that decode completely. Damaged copies of generated JPEGs —
# cut inside the headers (at 413 and 477 bytes), cut inside the scan (baseline and
# progressive), a marker inside the entropy data, flipped entropy bytes, bytes between the scan
# and EOI, no EOI — are skipped, each listed in pack-report.tsv with libjpeg's message, and the
# summary counts them; every good JPEG is a record equal to its file byte for byte. With
# --keep-damaged they are records too, byte for byte, listed as `kept-damaged: <reason>`.
. "$(dirname "$0")/cli_util.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "skip: needs $PY"; exit 77; }

"$MK" "$T/src" 2 12 64 300 7 >/dev/null || fail "stk-mkfolder"
NGOOD=$(find "$T/src" -name '*.jpg' | wc -l) # before the damaged copies are added
mkdir -p "$T/src/class_001"
# the damaged files, from the generated ones (the same bytes every run: the generator is seeded)
"$PY" - "$T/src" <<'EOF' || fail "making the damaged files"
import glob, sys
root = sys.argv[1]
files = sorted(glob.glob(root + "/class_000/*.jpg"))
def sos(d):
    return d.find(b"\xff\xda")
base = [d for d in (open(f, "rb").read() for f in files) if sos(d) > 500 and b"\xff\xc2" not in d[:sos(d)]]
prog = [d for d in (open(f, "rb").read() for f in files) if b"\xff\xc2" in d[:sos(d)]]
assert len(base) >= 4 and prog, (len(base), len(prog))
def put(name, data):
    open(root + "/class_001/" + name, "wb").write(bytes(data))
put("zz_cut_header_413.jpg", base[0][:413])
put("zz_cut_header_477.jpg", base[1][:477])
put("zz_cut_scan.jpg", base[2][: sos(base[2]) + (len(base[2]) - sos(base[2])) // 2])
put("zz_cut_scan_progressive.jpg", prog[0][: len(prog[0]) * 6 // 10])
d = bytearray(base[3]); m = sos(d) + (len(d) - sos(d)) // 2
d[m:m + 2] = b"\xff\xd5"
put("zz_marker_in_scan.jpg", d)
d = bytearray(base[0]); s = sos(d)
for k in range(40):
    d[s + 30 + 7 * k] ^= 0x5A
put("zz_flipped_bytes.jpg", d)
# (64 bytes: libjpeg's bit buffer reads a few bytes ahead and never counts those)
put("zz_bytes_before_eoi.jpg", base[1][:-2] + bytes(range(1, 65)) + base[1][-2:])
put("zz_no_eoi.jpg", base[2][:-2])
EOF
NBAD=$(ls "$T/src/class_001" | grep -c '^zz_')

# the records of dataset $1 equal their source files byte for byte; their count is $2
records_are_sources() {
    expect_rc 0 "$STOKER" ls "$1"
    [ "$(wc -l <"$T/out")" = "$2" ] || fail "$1: $(wc -l <"$T/out") records, want $2"
    cp "$T/out" "$T/ls"
    local idx name
    while IFS=$'\t' read -r idx _ _ _ _ name; do
        name=${name##*(}
        name=${name%)}
        timeout 60 "$STOKER" get "$1" "$idx" -o "$T/rec" || fail "get $idx"
        cmp -s "$T/rec" "$T/src/$name" || fail "$1: record $idx differs from $name"
    done <"$T/ls"
}

# ---- a plain pack skips them, naming libjpeg's reason ------------------------------------------
expect_rc 0 timeout 120 "$STOKER" pack "$T/src" "$T/ds" --threads 2
grep -q "^packed $NGOOD records" "$T/out" || { cat "$T/out"; fail "summary: $NGOOD records"; }
grep -q "^skipped $NBAD files that cannot be packed" "$T/out" || { cat "$T/out"; fail "summary: $NBAD skipped"; }
R="$T/ds/pack-report.tsv"
[ "$(grep -c 'zz_' "$R")" = "$NBAD" ] || { cat "$R"; fail "report lists the $NBAD damaged files"; }
for f in zz_cut_header_413 zz_cut_header_477 zz_cut_scan zz_cut_scan_progressive zz_no_eoi; do
    grep -q "class_001/$f.jpg	damaged JPEG: truncated: Premature end of JPEG file$" "$R" || { cat "$R"; fail "$f: reason"; }
done
for f in zz_marker_in_scan zz_flipped_bytes zz_bytes_before_eoi; do
    grep -q "class_001/$f.jpg	damaged JPEG: cannot decode: Corrupt JPEG data: " "$R" || { cat "$R"; fail "$f: reason"; }
done
grep -q "zz_bytes_before_eoi.jpg	.* extraneous bytes before marker 0xd9" "$R" || { cat "$R"; fail "extraneous bytes named"; }
grep -q "skipped .*zz_cut_header_413.jpg: damaged JPEG: truncated" "$T/err" || { cat "$T/err"; fail "listed on stderr"; }
records_are_sources "$T/ds" "$NGOOD"
expect_rc 0 "$STOKER" verify "$T/ds" --decode

# ---- --keep-damaged: packed as they are, listed as kept -----------------------------------------
expect_rc 0 timeout 120 "$STOKER" pack "$T/src" "$T/ds2" --threads 2 --keep-damaged
grep -q "^packed $((NGOOD + NBAD)) records" "$T/out" || { cat "$T/out"; fail "--keep-damaged: summary"; }
grep -q "^kept $NBAD damaged JPEGs as they are" "$T/out" || { cat "$T/out"; fail "--keep-damaged: kept count"; }
grep -q "skipped" "$T/out" && { cat "$T/out"; fail "--keep-damaged: nothing is skipped"; }
R="$T/ds2/pack-report.tsv"
[ "$(grep -c '	kept-damaged: damaged JPEG: ' "$R")" = "$NBAD" ] || { cat "$R"; fail "--keep-damaged: report"; }
grep -q "kept damaged .*zz_cut_scan.jpg: damaged JPEG: truncated" "$T/err" || { cat "$T/err"; fail "kept, on stderr"; }
records_are_sources "$T/ds2" "$((NGOOD + NBAD))"
echo ok
