#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `stoker pack SRC s3://bucket/prefix` against the real S3 server (the `s3` CTest fixture): the
# dataset packed locally and uploaded lists the same records (index, label, size, CRC) as a local
# pack of the same source, leaves no marker behind, leaves its shards in the read cache (the
# first open fetches nothing), and `stoker verify` and `loaderbench` read it; a prefix with the unfinished-pack marker is
# refused by `stoker info` naming it, and rerunning the pack finishes the upload.
. "$(dirname "$0")/cli_util.sh"
if [ ! -f "${STK_S3_ENV:-/nonexistent}" ]; then
  command -v radosgw >/dev/null || { echo "skip: Ceph packages missing"; exit 77; }
  fail "no S3 server environment (STK_S3_ENV=${STK_S3_ENV:-}): the s3 fixture did not start"
fi
eval "$(cat "$STK_S3_ENV")"
unset AWS_PROFILE
python3 -c 'import boto3' 2>/dev/null || fail "python3-boto3 missing (scripts/deps.sh test)"
export STOKER_CACHE_DIR=$T/cache
B=stk-pack-$$
s3py() { python3 - "$@" <<'PY'
import boto3, os, sys
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
op, bucket = sys.argv[1], sys.argv[2]
if op == "mb":
    s3.create_bucket(Bucket=bucket)
elif op == "keys":
    for o in s3.list_objects_v2(Bucket=bucket, Prefix=sys.argv[3]).get("Contents", []):
        print(o["Key"])
elif op == "put":
    s3.put_object(Bucket=bucket, Key=sys.argv[3], Body=b"")
PY
}
s3py mb "$B"
"$MK" "$T/src" 3 12 40 90 7 >/dev/null || fail "stk-mkfolder"
expect_rc 0 "$STOKER" pack "$T/src" "$T/local" --threads 2
expect_rc 0 "$STOKER" pack "$T/src" "s3://$B/sets/ds" --threads 2
# the packed shards moved into the read cache (with the bucket's ETag); the staging folder is gone
cached=$(ls "$T"/cache/s3/*/"$B"/sets/ds/shard-00000.lmdb 2>/dev/null) || fail "the pack left no cached shard"
[ -s "$cached.etag" ] || fail "the cached shard has no ETag"
[ -z "$(ls -A "$T"/cache/pack/*/"$B"/sets 2>/dev/null)" ] || fail "the staging folder stayed: $(ls -R "$T/cache/pack")"
ino=$(stat -c %i "$cached")
expect_rc 0 "$STOKER" ls "$T/local"; cp "$T/out" "$T/ls.local"
expect_rc 0 "$STOKER" ls "s3://$B/sets/ds"
[ "$(stat -c %i "$cached")" = "$ino" ] || fail "the first open fetched the shard again instead of using the pack's copy"
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
