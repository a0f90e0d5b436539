#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `stoker pack SRC s3://...` killed with SIGKILL while it packs and uploads, then rerun, against
# the real S3 server (the `s3` fixture). The pack talks to it through tests/s3_fault_proxy.py,
# which lets the marker PUT, the listing and two shard PUTs through and then answers nothing: the
# third shard's upload hangs and, with one shard allowed to wait (STOKER_S3_PACK_QUEUE=1), the
# pack is held in its middle: unfinished (the staging folder's marker there), the first two
# shards uploaded and gone from the disk (their stand-ins left). Killed there, the prefix is refused
# (nothing half-written is taken for a dataset); the rerun, through a clean proxy on the same
# port (the staging folder is the endpoint's), resumes after the uploaded shards without packing
# them again, and the bucket then holds shard files byte-identical to a local pack's.
. "$(dirname "$0")/cli_util.sh"
. "$(dirname "$0")/s3_cli_util.sh"
B=stk-kill-$$
s3py mb "$B"
make_shards 6

STK_PROXY_FAULTS=stall STK_PROXY_SKIP=4 STK_PROXY_STALL_S=600 start_proxy 1
via=http://127.0.0.1:$PROXY_PORT
AWS_ENDPOINT_URL=$via STOKER_S3_STALL_S=600 STOKER_S3_PACK_QUEUE=1 \
  "$STOKER" pack "$T/src" "s3://$B/ds" --threads 2 --shard-size 1M --quiet >"$T/pack.out" 2>&1 &
pack=$!
for i in $(seq 600); do [ -s "$T/faults" ] && break; sleep 0.05; done
[ -s "$T/faults" ] || { cat "$T/pack.out"; fail "the upload never reached the stalled request"; }
stage=$(echo "$T"/cache/pack/*/"$B"/ds)
# shards 0 and 1 are up (their stand-ins written before the uploader took shard 2)
grep -q "^stall PUT /$B/ds/shard-00002.lmdb" "$T/faults" || fail "the stalled request is not shard 2's upload: $(cat "$T/faults")"
[ -f "$stage/.stoker-pack-incomplete" ] || fail "a shard was uploaded only after the pack had finished (no upload while packing)"
[ -f "$stage/shard-00000.lmdb.up" ] && [ ! -e "$stage/shard-00000.lmdb" ] ||
  fail "uploaded shard 0 is still on the local disk: $(ls "$stage")"
kill -9 $pack; wait $pack 2>/dev/null
kill $PROXY_PID; wait $PROXY_PID 2>/dev/null

"$STOKER" info "s3://$B/ds" >"$T/out" 2>"$T/err" && fail "info took the half-uploaded prefix for a dataset"
grep -q "unfinished" "$T/err" || { cat "$T/err"; fail "the error does not name the unfinished pack"; }
# the rerun: same endpoint (a proxy that spoils nothing on the same port), same command
rm -f "$T/port"
STK_PROXY_PORT=$PROXY_PORT start_proxy 1000000000
AWS_ENDPOINT_URL=$via expect_rc 0 "$STOKER" pack "$T/src" "s3://$B/ds" --threads 2 --shard-size 1M
grep -q "resumed an interrupted pack" "$T/out" || { cat "$T/out"; fail "the rerun packed the uploaded shards again"; }
[ ! -e "$stage" ] || fail "the staging folder stayed: $(ls -A "$stage")"
mkdir "$T/got"
s3py get "$B" ds/ "$T/got"
for f in "$T"/local/shard-*.lmdb; do
  cmp -s "$f" "$T/got/$(basename "$f")" || fail "$(basename "$f") in the bucket differs from the local pack's"
done
[ "$(ls "$T/got" | grep -c '^shard-')" = "$NSHARDS" ] || fail "the bucket holds $(ls "$T/got") for $NSHARDS shards"
[ ! -e "$T/got/.stoker-pack-incomplete" ] || fail "the unfinished-pack marker stayed"
expect_rc 0 "$STOKER" verify "s3://$B/ds"
echo "test_s3_pack_kill: ok"
