#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `stoker pack SRC s3://bucket/prefix` against the real S3 server (the `s3` CTest fixture): the
# dataset packed and uploaded shard by shard lists the same records (index, label, size, CRC) as a
# local pack of the same source, leaves no marker and no local copy behind, and `stoker verify`
# and `loaderbench` read it; a prefix with the unfinished-pack marker is
# refused by `stoker info` naming it, and rerunning the pack finishes the upload.
. "$(dirname "$0")/cli_util.sh"
. "$(dirname "$0")/s3_cli_util.sh"
B=stk-pack-$$
s3py mb "$B"
"$MK" "$T/src" 3 12 40 90 7 >/dev/null || fail "stk-mkfolder"
expect_rc 0 "$STOKER" pack "$T/src" "$T/local" --threads 2
expect_rc 0 "$STOKER" pack "$T/src" "s3://$B/sets/ds" --threads 2
# each shard was removed once uploaded, the staging folder is gone: the first open fetches
[ -z "$(ls -A "$T"/cache/pack/*/"$B"/sets 2>/dev/null)" ] || fail "the staging folder stayed: $(ls -R "$T/cache/pack")"
expect_rc 0 "$STOKER" ls "$T/local"; cp "$T/out" "$T/ls.local"
expect_rc 0 "$STOKER" ls "s3://$B/sets/ds"
[ -s "$(ls "$T"/cache/s3/*/"$B"/sets/ds/shard-00000.lmdb)" ] || fail "the open did not fetch the shard into the cache"
cmp -s "$T/out" "$T/ls.local" || { diff "$T/out" "$T/ls.local" | head; fail "ls of the bucket differs from the local pack's"; }
[ "$(wc -l <"$T/out")" -ge 30 ] || fail "ls lists $(wc -l <"$T/out") lines"
s3py keys "$B" sets/ds/ >"$T/keys"
grep -q "sets/ds/shard-00000.lmdb" "$T/keys" || fail "no shard object: $(cat "$T/keys")"
! grep -q stoker-pack-incomplete "$T/keys" || fail "the unfinished-pack marker stayed"
expect_rc 0 "$STOKER" verify "s3://$B/sets/ds"
if [ -n "${LOADERBENCH:-}" ]; then   # loaderbench takes the s3:// path too
  expect_rc 0 "$LOADERBENCH" --epochs 1 --workers 1 --layouts shards-buffered --size 32 "s3://$B/sets/ds"
  grep -q "img/s" "$T/out" || { cat "$T/out" "$T/err"; fail "loaderbench printed no rate"; }
fi

# an unfinished upload's marker: refused, named; the rerun finishes
s3py put "$B" sets/ds/.stoker-pack-incomplete
"$STOKER" info "s3://$B/sets/ds" >"$T/out" 2>"$T/err" && fail "info accepted a prefix with the marker"
grep -q "unfinished" "$T/err" || { cat "$T/err"; fail "the error does not say the pack is unfinished"; }
expect_rc 0 "$STOKER" pack "$T/src" "s3://$B/sets/ds" --threads 2
expect_rc 0 "$STOKER" info "s3://$B/sets/ds"
echo "test_s3_pack_cli: ok"
