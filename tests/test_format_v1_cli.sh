#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A format-1 shard (tests/data/v0.1-dataset, written by stoker 0.1.0) is still read and verified,
# as format 1: `info` and `verify` say so, its labels and bytes come back, a changed payload byte
# is still a bad record. A copy, so the tree's file is never touched.
. "$(dirname "$0")/cli_util.sh"
SRC_DIR=${SRC_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
cp -r "$SRC_DIR/tests/data/v0.1-dataset" "$T/v1"
rm -f "$T/v1"/*.lmdb-lock

expect_rc 0 "$STOKER" info "$T/v1"
grep -q "^format: *stoker-shard 1 (checksum of the payload only)" "$T/out" || { cat "$T/out"; fail "info: format 1"; }
grep -q "^shard 0: .*shard-00000.lmdb (stoker-shard 1)$" "$T/out" || { cat "$T/out"; fail "info: shard 0 is format 1"; }
expect_rc 0 "$STOKER" verify "$T/v1" --decode
grep -q "^shard-00000.lmdb: stoker-shard 1 (crc32c of the payload only" "$T/out" || { cat "$T/out"; fail "verify names format 1"; }
grep -q "3 records, 0 bad" "$T/out" || fail "verify count"
expect_rc 0 "$STOKER" ls "$T/v1"
[ "$(cut -f3 "$T/out" | tr '\n' ' ')" = "0 0 1 " ] || { cat "$T/out"; fail "labels of the v1 records"; }

# a payload byte changed in record 1: the v1 checksum (of the payload) still finds it
"$STOKER" get "$T/v1" 1 >"$T/r1" || fail "get 1"
pos=$(/usr/bin/python3 -c "import sys; d=open(sys.argv[1],'rb').read(); p=open(sys.argv[2],'rb').read(); print(d.find(p))" "$T/v1/shard-00000.lmdb" "$T/r1")
[ "$pos" -gt 16 ] || fail "record 1 in the shard"
printf '\x00\x00\x00\x00' | dd of="$T/v1/shard-00000.lmdb" bs=1 seek=$((pos + 300)) conv=notrunc 2>/dev/null
expect_rc 3 "$STOKER" verify "$T/v1"
grep -q "^BAD	1	shard-00000.lmdb key 1" "$T/out" || { cat "$T/out"; fail "verify names record 1"; }
echo ok
