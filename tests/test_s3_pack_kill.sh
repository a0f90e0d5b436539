#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `stoker pack SRC s3://...` killed with SIGKILL in the middle of its upload, then rerun, against
# the real S3 server (the `s3` fixture). The upload goes through tests/s3_fault_proxy.py, which
# lets the first requests through and then answers nothing (a stall longer than the test), so the
# pack is provably inside its upload when it is killed. After the kill the prefix is refused
# (`stoker info` names the unfinished pack: nothing half-written is taken for a dataset); the
# rerun, straight to the server, finishes and the bucket lists what a local pack lists.
. "$(dirname "$0")/cli_util.sh"
if [ ! -f "${STK_S3_ENV:-/nonexistent}" ]; then
  command -v radosgw >/dev/null || { echo "skip: Ceph packages missing"; exit 77; }
  fail "no S3 server environment (STK_S3_ENV=${STK_S3_ENV:-}): the s3 fixture did not start"
fi
eval "$(cat "$STK_S3_ENV")"
unset AWS_PROFILE
python3 -c 'import boto3' 2>/dev/null || fail "python3-boto3 missing (scripts/deps.sh test)"
export STOKER_CACHE_DIR=$T/cache
B=stk-kill-$$
python3 -c "import boto3, os; boto3.client('s3', endpoint_url=os.environ['AWS_ENDPOINT_URL']).create_bucket(Bucket='$B')"
"$MK" "$T/src" 3 30 60 160 11 >/dev/null || fail "stk-mkfolder"
expect_rc 0 "$STOKER" pack "$T/src" "$T/local" --threads 2 --shard-size 1M

# the proxy: requests 1-3 pass (the marker PUT, the listing, the first shard), then silence
STK_PROXY_FAULTS=stall STK_PROXY_SKIP=3 STK_PROXY_STALL_S=600 \
  python3 "$SRC_DIR/tests/s3_fault_proxy.py" "${AWS_ENDPOINT_URL##*:}" "$T/port" "$T/faults" 1 &
proxy=$!
trap 'kill $proxy 2>/dev/null; rm -rf "$T"' EXIT
for i in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
[ -s "$T/port" ] || fail "the proxy did not start"
AWS_ENDPOINT_URL=http://127.0.0.1:$(cat "$T/port") STOKER_S3_STALL_S=600 \
  "$STOKER" pack "$T/src" "s3://$B/ds" --threads 2 --shard-size 1M --quiet >"$T/pack.out" 2>&1 &
pack=$!
for i in $(seq 600); do [ -s "$T/faults" ] && break; sleep 0.05; done
[ -s "$T/faults" ] || { cat "$T/pack.out"; fail "the upload never reached the stalled request"; }
kill -9 $pack; wait $pack 2>/dev/null
grep -q "^stall PUT" "$T/faults" || fail "the kill did not come during an upload: $(cat "$T/faults")"

"$STOKER" info "s3://$B/ds" >"$T/out" 2>"$T/err" && fail "info took the half-uploaded prefix for a dataset"
grep -q "unfinished" "$T/err" || { cat "$T/err"; fail "the error does not name the unfinished pack"; }
expect_rc 0 "$STOKER" pack "$T/src" "s3://$B/ds" --threads 2 --shard-size 1M
expect_rc 0 "$STOKER" ls "$T/local"; cp "$T/out" "$T/ls.local"
expect_rc 0 "$STOKER" ls "s3://$B/ds"
cmp -s "$T/out" "$T/ls.local" || fail "after the rerun the bucket lists other records than the local pack"
echo "test_s3_pack_kill: ok"
