#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Regenerate the seed corpora in tests/fuzz/corpus/ (committed; run this only to change them).
# Usage: tests/fuzz/make-seeds.sh BUILD_DIR   (a normal build: needs stoker and stk-mkjpeg)
# Small on purpose: libFuzzer mutates better from small inputs and CI replays them all.
set -euo pipefail
B=$(cd "${1:?usage: make-seeds.sh BUILD_DIR}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
C=$HERE/corpus
MK=$B/tests/stk-mkjpeg
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# decode: 9 argument bytes (flags, crop x/y/w/h as 16-bit fractions) + a JPEG of each kind
rm -f "$C"/decode/*
i=0
for spec in "24 16 420 0" "17 13 444 0" "40 24 422 1" "16 16 gray 0" "20 12 cmyk 0" "20 12 ycck 0" \
            "33 21 420 2" "32 32 440 4" "24 8 411 8" "48 40 420 1"; do
  set -- $spec
  "$MK" "$1" "$2" "$3" "$4" 85 "$i" "$T/j$i.jpg"
  # flags: scale index (i % 4), strict on odd, crop on every second, fresh decoder every third
  flags=$(( (i % 4) | ((i % 2) << 2) | (((i / 2) % 2) << 3) | ((i % 3 == 0) << 4) ))
  printf "$(printf '\\x%02x' $flags)\x20\x00\x10\x00\xc0\x00\x80\x00" > "$C/decode/$i-$3.bin"
  cat "$T/j$i.jpg" >> "$C/decode/$i-$3.bin"
  i=$((i + 1))
done

# rec_header: valid values, bad magic, a length that lies
rm -f "$C"/rec_header/*
printf 'STK1\x07\x00\x00\x00\xde\xad\xbe\xef\x04\x00\x00\x00abcd' > "$C/rec_header/valid-4"
printf 'STK1\xff\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x00' > "$C/rec_header/valid-empty-neg-label"
printf 'STK1\x00\x00\x00\x00\x00\x00\x00\x00\x10\x00\x00\x00short' > "$C/rec_header/length-lies"
printf 'STK2\x03\x00\x00\x00\x12\x34\x56\x78\x02\x00\x00\x00xy' > "$C/rec_header/valid-v2"
printf 'STK3\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00' > "$C/rec_header/bad-magic"
printf 'STK1\x00\x00' > "$C/rec_header/truncated"

# list: list files with comments, CRLF, absolute paths, bad lines
rm -f "$C"/list/*
printf 'a/b.jpg\t0\n# comment\n\nc.jpg\t12\r\n/abs/d.jpg\t2147483647\n' > "$C/list/valid"
printf 'x.jpg\t-1\n' > "$C/list/negative-label"
printf 'x.jpg 3\n' > "$C/list/no-tab"
printf '\t3\n' > "$C/list/empty-path"
printf 'x.jpg\t2147483648\n' > "$C/list/label-too-large"
printf 'dir with space/\xc3\xa9.jpg\t7' > "$C/list/utf8-no-final-newline"

# shard: a packed shard of tiny JPEGs (one large enough for LMDB overflow pages), a foreign LMDB
rm -f "$C"/shard/*
mkdir -p "$T/src/cat" "$T/src/dog"
"$MK" 8 8 420 0 80 1 "$T/src/cat/a.jpg"
"$MK" 12 8 gray 0 80 2 "$T/src/cat/b.jpg"
"$MK" 64 48 444 0 98 3 "$T/src/dog/c.jpg"
"$B/stoker" pack "$T/src" "$T/ds" --quiet
cp "$T/ds/shard-00000.lmdb" "$C/shard/stoker-3-records.lmdb"
mkdir -p "$T/one/x"
"$MK" 8 8 420 0 80 4 "$T/one/x/only.jpg"
"$B/stoker" pack "$T/one" "$T/ds1" --quiet
cp "$T/ds1/shard-00000.lmdb" "$C/shard/stoker-1-record.lmdb"
/usr/bin/python3 - "$T/foreign.lmdb" "$T/src/cat/a.jpg" "$T/src/dog/c.jpg" <<'PY'
import sys, lmdb
env = lmdb.open(sys.argv[1], subdir=False, map_size=1 << 20)
with env.begin(write=True) as t:
    for i, p in enumerate(sys.argv[2:]):
        t.put(b"img%03d" % i, open(p, "rb").read())
env.close()
PY
cp "$T/foreign.lmdb" "$C/shard/foreign-2-records.lmdb"
ls -l "$C"/*
