#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `stoker pack SRC s3://...` keeps few shards on the local disk, against the real S3 server (the
# `s3` fixture): each shard is uploaded while the pack writes the next and removed once it is up,
# so with STOKER_S3_PACK_QUEUE=1 (one shard waiting for or in upload) the staging folder never
# holds more than 2 shard files (finished or being written), polled all through a pack of 11
# shards; the bucket then lists what a local pack lists. A pack that uploads only after packing
# holds all 11 at once.
. "$(dirname "$0")/cli_util.sh"
. "$(dirname "$0")/s3_cli_util.sh"
B=stk-bound-$$
s3py mb "$B"
make_shards 8

STOKER_S3_PACK_QUEUE=1 "$STOKER" pack "$T/src" "s3://$B/ds" --threads 2 --shard-size 1M --quiet \
  >"$T/pack.out" 2>&1 &
pack=$!
peak=0 polls=0 seen=0
while kill -0 $pack 2>/dev/null; do
  here=$(ls "$T"/cache/pack/*/"$B"/ds 2>/dev/null | grep -c '^shard-[0-9]*\.lmdb\(\.tmp\)\?$')
  [ "$here" -gt "$peak" ] && peak=$here
  [ "$here" -gt 0 ] && seen=$((seen + 1))
  polls=$((polls + 1))
  sleep 0.01
done
wait $pack || { cat "$T/pack.out"; fail "the pack to the bucket failed"; }
echo "polls $polls, $seen with shards in the staging folder, peak $peak shard files"
[ "$peak" -le 2 ] || fail "$peak shard files on the local disk at once (STOKER_S3_PACK_QUEUE=1 allows 2)"
expect_rc 0 "$STOKER" ls "$T/local"; cp "$T/out" "$T/ls.local"
expect_rc 0 "$STOKER" ls "s3://$B/ds"
cmp -s "$T/out" "$T/ls.local" || fail "ls of the bucket differs from the local pack's"
echo "test_s3_pack_bounded: ok"
