#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# An upload that fails in the middle of `stoker pack SRC s3://...`, against the real S3 server
# (the `s3` fixture) behind tests/s3_fault_proxy.py: after the marker PUT, the listing and one
# shard PUT every request gets a 500 (no retries: STOKER_S3_RETRIES=0). The pack stops at the
# failed upload instead of packing on (back-pressure: one shard waiting, STOKER_S3_PACK_QUEUE=1),
# exits non-zero naming the shard, the bucket and the endpoint, and the prefix is refused as
# unfinished (nothing half-written is taken for a dataset). A missing bucket and a wrong secret
# fail at the first request, before anything is packed, naming the endpoint and the cause.
. "$(dirname "$0")/cli_util.sh"
. "$(dirname "$0")/s3_cli_util.sh"
B=stk-uperr-$$
s3py mb "$B"
"$MK" "$T/src" 4 40 300 500 11 >/dev/null || fail "stk-mkfolder"
STK_PROXY_FAULTS=500 STK_PROXY_SKIP=3 start_proxy 1
ep=http://127.0.0.1:$PROXY_PORT
AWS_ENDPOINT_URL=$ep STOKER_S3_RETRIES=0 STOKER_S3_PACK_QUEUE=1 \
  timeout 300 "$STOKER" pack "$T/src" "s3://$B/ds" --threads 2 --shard-size 1M >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] || { cat "$T/out" "$T/err"; fail "the pack exited $rc"; }
cat "$T/err"
grep -q "shard-00001.lmdb" "$T/err" || fail "the error does not name the shard"
grep -q "$ep" "$T/err" || fail "the error does not name the endpoint $ep"
grep -q "s3://$B/ds/" "$T/err" || fail "the error does not name the object"
stage=$(echo "$T"/cache/pack/*/"$B"/ds)
made=$(ls "$stage" | grep -c '^shard-[0-9]*\.lmdb\(\.up\)\?$')
[ "$made" -le 4 ] || fail "the pack went on to $made shards after its upload failed: $(ls "$stage")"
"$STOKER" info "s3://$B/ds" >"$T/out" 2>"$T/err" && fail "info took the failed pack's prefix for a dataset"
grep -q "unfinished" "$T/err" || { cat "$T/err"; fail "the error does not name the unfinished pack"; }

for case in nobucket badsecret; do
  b=$B secret=$AWS_SECRET_ACCESS_KEY want=
  [ $case = nobucket ] && b=stk-missing-$$ want=NoSuchBucket
  [ $case = badsecret ] && secret=wrong-$AWS_SECRET_ACCESS_KEY want=SignatureDoesNotMatch
  STOKER_CACHE_DIR=$T/cache-$case AWS_SECRET_ACCESS_KEY=$secret \
    timeout 300 "$STOKER" pack "$T/src" "s3://$b/ds" --threads 2 --shard-size 1M >"$T/out" 2>"$T/err"
  rc=$?
  [ "$rc" = 1 ] || { cat "$T/out" "$T/err"; fail "$case: the pack exited $rc, want 1"; }
  grep -q "$want" "$T/err" && grep -q "$AWS_ENDPOINT_URL" "$T/err" ||
    { cat "$T/err"; fail "$case: the error does not name $want and the endpoint"; }
  [ -z "$(find "$T/cache-$case" -name 'shard-*' 2>/dev/null)" ] || fail "$case: shards were packed before the first request failed"
done
echo "test_s3_pack_upload_error: ok"
