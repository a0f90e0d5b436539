#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The stoker CLI end to end: --help everywhere, exit codes, pack/info/ls/get/verify on a generated
# ImageFolder with bad files, byte-identical `get`, `verify` catching a corrupted byte (and
# --decode catching a record that is a JPEG by its header only), refusal of an existing DST,
# --force, --strict naming the file, clear errors naming the path.
. "$(dirname "$0")/cli_util.sh"

# --help everywhere, exit 0, mentions exit codes; usage errors exit 2
expect_rc 0 "$STOKER" --help
grep -q "exit codes" "$T/out" || fail "--help lists exit codes"
for c in pack info ls get verify; do
    expect_rc 0 "$STOKER" "$c" --help
    grep -q "usage: stoker $c" "$T/out" || fail "$c --help"
    grep -q "exit codes" "$T/out" || fail "$c --help lists exit codes"
    expect_rc 0 "$STOKER" help "$c"
done
expect_rc 2 "$STOKER"
expect_rc 2 "$STOKER" frobnicate
grep -q "unknown command" "$T/err" || fail "unknown command message"
expect_rc 2 "$STOKER" pack onlyone
expect_rc 2 "$STOKER" pack a b --shard-size 12Q
expect_rc 2 "$STOKER" pack a b --threads 0
expect_rc 2 "$STOKER" ls
expect_rc 0 "$STOKER" --version
grep -q "^stoker 0\." "$T/out" || fail "--version"

# source: 4 classes x 25 JPEGs + bad files
"$MK" "$T/src" 4 25 16 200 3 >/dev/null || fail "stk-mkfolder"
printf '\x89PNG\r\n\x1a\n0000IHDR' >"$T/src/class_001/fake.jpg"
: >"$T/src/class_002/empty.jpg"
ln -s /nonexistent/x "$T/src/class_003/gone.jpg"
(cd "$T/src" && find . -type f -o -type l | sort | xargs -d '\n' sha1sum 2>/dev/null) >"$T/src.sum.before"

# --strict: fails, names the first bad file, exit 1
expect_rc 1 "$STOKER" pack "$T/src" "$T/strict" --strict --quiet
grep -q "class_001/fake.jpg" "$T/err" || { cat "$T/err"; fail "--strict names the file"; }
# missing SRC: names it
expect_rc 1 "$STOKER" pack "$T/nope" "$T/x" --quiet
grep -q "$T/nope" "$T/err" || fail "missing SRC named"

# pack (non-TTY: plain progress lines on stderr, a summary on stdout)
expect_rc 0 "$STOKER" pack "$T/src" "$T/ds" --shard-size 1M --threads 2
grep -q "packed 100 records (4 classes)" "$T/out" || { cat "$T/out"; fail "summary"; }
grep -q "skipped 3 files" "$T/out" || fail "summary counts skipped files"
grep -q "^pack: .* files" "$T/err" || fail "plain progress lines"
[ "$(wc -l <"$T/ds/pack-report.tsv")" = 3 ] || fail "report lines"
# a PNG is packed now (stored as JPEG): this one is cut after its signature, so it is listed
# (a build without libpng lists it as such)
grep -q "fake.jpg	PNG: " "$T/ds/pack-report.tsv" || fail "report corrupt PNG"
grep -q "skipped .*class_001/fake.jpg: PNG: " "$T/err" || { cat "$T/err"; fail "skipped files on stderr"; }
grep -q "empty.jpg	empty file" "$T/ds/pack-report.tsv" || fail "report empty"
grep -q "gone.jpg	unreadable: " "$T/ds/pack-report.tsv" || fail "report unreadable"
(cd "$T/src" && find . -type f -o -type l | sort | xargs -d '\n' sha1sum 2>/dev/null) >"$T/src.sum.after"
cmp -s "$T/src.sum.before" "$T/src.sum.after" || fail "SRC modified"

# a whole PNG (8x6 RGB, written with the standard library) is packed as a JPEG; the cut one and
# a file of another kind are still listed with their reasons
if "$STOKER" --version | grep -q png; then
mkdir -p "$T/png/c"
python3 - "$T/png/c/real.png" <<'PY' || fail "write real.png"
import struct, sys, zlib
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
w, h = 8, 6
raw = b"".join(b"\0" + bytes((x * 30 + y * 10) % 256 for x in range(w * 3)) for y in range(h))
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                              + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
PY
cp "$T/src/class_001/fake.jpg" "$T/png/c/fake.png"
printf 'hello, not an image\n' >"$T/png/c/notes.jpg"
expect_rc 0 "$STOKER" pack "$T/png" "$T/pngds"
grep -q "packed 1 records" "$T/out" || { cat "$T/out"; fail "the PNG packed"; }
grep -q "1 non-JPEG file stored as JPEG" "$T/out" || { cat "$T/out"; fail "summary counts the PNG"; }
[ "$(wc -l <"$T/pngds/pack-report.tsv")" = 2 ] || fail "PNG pack: report lines"
grep -q "fake.png	PNG: " "$T/pngds/pack-report.tsv" || fail "PNG pack: cut PNG listed"
grep -q "notes.jpg	not an image stoker reads (text" "$T/pngds/pack-report.tsv" || fail "PNG pack: text listed"
expect_rc 0 "$STOKER" get "$T/pngds" 0 -o "$T/real.out"
[ "$(head -c 3 "$T/real.out" | od -An -tx1 | tr -d ' ')" = ffd8ff ] || fail "the PNG is stored as a JPEG"
expect_rc 0 "$STOKER" verify "$T/pngds" --decode
else
    echo "no PNG decoder in this build: the PNG part is not run"
fi

# on a terminal: a live progress bar (carriage returns, records/s, MB/s, ETA)
if command -v script >/dev/null 2>&1; then
    script -qec "'$STOKER' pack '$T/src' '$T/tty' --shard-size 1M" /dev/null >"$T/tty.out" 2>&1 || { cat "$T/tty.out"; fail "pack on a tty"; }
    grep -q $'\r\[' "$T/tty.out" || { cat -A "$T/tty.out" | head; fail "progress bar drawn with \\r"; }
    grep -q "rec/s .* MB/s | ETA" "$T/tty.out" || fail "progress bar shows rec/s, MB/s, ETA"
    grep -q "100.0%" "$T/tty.out" || fail "progress bar reaches 100%"
fi

# info
expect_rc 0 "$STOKER" info "$T/ds"
grep -q "records: *100" "$T/out" || fail "info records"
grep -q "format: *stoker-shard 2 (checksum of the payload, label and target)" "$T/out" || fail "info format"
grep -q "shard 0: .*shard-00000.lmdb (stoker-shard 2)" "$T/out" || fail "info: each shard's format"
grep -q "classes: *4 (class_000, class_001, class_002, class_003)" "$T/out" || fail "info classes"
grep -q "mean record" "$T/out" || fail "info mean"

# ls: 100 lines; each source's bytes == get of its index
expect_rc 0 "$STOKER" ls "$T/ds"
[ "$(wc -l <"$T/out")" = 100 ] || fail "ls lines"
cp "$T/out" "$T/ls"
while IFS=$'\t' read -r idx shard label bytes crc name; do
    src=${name##*(}; src=${src%)}
    "$STOKER" get "$T/ds" "$idx" >"$T/got" || fail "get $idx"
    cmp -s "$T/got" "$T/src/$src" || fail "get $idx differs from $src"
    [ "$(stat -c %s "$T/src/$src")" = "$bytes" ] || fail "ls bytes of $idx"
    want_label=$((10#${src:6:3}))
    [ "$label" = "$want_label" ] || fail "label of $src: $label"
done <"$T/ls"
expect_rc 0 "$STOKER" get "$T/ds" 5 -o "$T/five"
"$STOKER" get "$T/ds" 5 | cmp -s - "$T/five" || fail "get -o"
expect_rc 1 "$STOKER" get "$T/ds" 100
grep -q "out of range" "$T/err" || fail "get range message"
expect_rc 2 "$STOKER" get "$T/ds" -3
expect_rc 0 "$STOKER" ls "$T/ds" --start 98 --count 5
[ "$(wc -l <"$T/out")" = 2 ] || fail "ls --start/--count"

# verify: all good; then a corrupted payload byte is found (exit 3) and named
expect_rc 0 "$STOKER" verify "$T/ds"
grep -q "100 records, 0 bad" "$T/out" || fail "verify summary"
expect_rc 0 "$STOKER" verify "$T/ds" --decode
# find record 7's payload in the shard by searching for its bytes
"$STOKER" get "$T/ds" 7 >"$T/r7"
shard7=$(awk -F'\t' '$1==7 {print $2}' "$T/ls")
pos=$(/usr/bin/python3 -c "import sys; d=open(sys.argv[1],'rb').read(); p=open(sys.argv[2],'rb').read(); print(d.find(p))" "$T/ds/$shard7" "$T/r7")
[ "$pos" -gt 0 ] || fail "record 7 in $shard7"
printf '\x00\x00\x00\x00' | dd of="$T/ds/$shard7" bs=1 seek=$((pos + 200)) conv=notrunc 2>/dev/null
expect_rc 3 "$STOKER" verify "$T/ds"
grep -q "^BAD	7	$shard7 key 7 (class_000/img_00007.jpg)	.*\(CRC32C mismatch\|STK_E_CRC\)" "$T/out" || { cat "$T/out"; fail "verify names the record"; }
grep -q "100 records, 1 bad" "$T/out" || fail "verify count"
expect_rc 1 "$STOKER" get "$T/ds" 7
grep -q "CRC32C mismatch" "$T/err" || fail "get reports the CRC error"

# --decode also catches a record whose header says JPEG but whose data is garbage (a pack keeps
# it only when asked: --keep-damaged)
printf '\xff\xd8\xff\xe0garbage-garbage-garbage' >"$T/src/class_000/zz_trunc.jpg"
expect_rc 0 "$STOKER" pack "$T/src" "$T/ds2" --quiet --keep-damaged
expect_rc 0 "$STOKER" verify "$T/ds2"
expect_rc 3 "$STOKER" verify "$T/ds2" --decode
grep -q "zz_trunc.jpg" "$T/out" || { cat "$T/out"; fail "verify --decode names the bad JPEG"; }

# existing dataset refused, --force replaces it; info on a missing path names it
expect_rc 1 "$STOKER" pack "$T/src" "$T/ds" --quiet
grep -q "already holds a dataset" "$T/err" || fail "refusal message"
expect_rc 0 "$STOKER" pack "$T/src" "$T/ds" --force --quiet
expect_rc 0 "$STOKER" verify "$T/ds" --quiet
expect_rc 1 "$STOKER" info "$T/missing"
grep -q "$T/missing" "$T/err" || fail "info names the path"
echo ok
