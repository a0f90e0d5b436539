# SPDX-License-Identifier: MIT
# Sourced by the `stoker pack SRC s3://...` tests after cli_util.sh: the S3 server of the `s3`
# CTest fixture (STK_S3_ENV; skip only when the Ceph packages are missing), boto3, a read cache
# in $T, and
#   s3py mb|keys|put|get BUCKET [PREFIX|KEY] [DIR]   bucket, listing, empty object, download all
#   make_shards MIN                                 $T/src (160 images of 300-500 px) packed into
#                                                   $T/local with 1 MiB shards: $NSHARDS >= MIN
#   start_proxy                                     tests/s3_fault_proxy.py in front of the server
#                                                   (env STK_PROXY_*; port in $PROXY_PORT, log
#                                                   $T/faults, pid $PROXY_PID, killed at exit)
if [ ! -f "${STK_S3_ENV:-/nonexistent}" ]; then
  command -v radosgw >/dev/null || { echo "skip: Ceph packages missing"; exit 77; }
  fail "no S3 server environment (STK_S3_ENV=${STK_S3_ENV:-}): the s3 fixture did not start"
fi
eval "$(cat "$STK_S3_ENV")"
unset AWS_PROFILE
python3 -c 'import boto3' 2>/dev/null || fail "python3-boto3 missing (scripts/deps.sh test)"
export STOKER_CACHE_DIR=$T/cache
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
elif op == "get":
    for o in s3.list_objects_v2(Bucket=bucket, Prefix=sys.argv[3]).get("Contents", []):
        s3.download_file(bucket, o["Key"], os.path.join(sys.argv[4], os.path.basename(o["Key"])))
PY
}
start_proxy() {
  python3 "$SRC_DIR/tests/s3_fault_proxy.py" "${AWS_ENDPOINT_URL##*:}" "$T/port" "$T/faults" "${1:-1}" &
  PROXY_PID=$!
  trap 'kill $PROXY_PID 2>/dev/null; rm -rf "$T"' EXIT
  for i in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
  [ -s "$T/port" ] || fail "the proxy did not start"
  PROXY_PORT=$(cat "$T/port")
}
make_shards() {
  "$MK" "$T/src" 4 40 300 500 11 >/dev/null || fail "stk-mkfolder"
  expect_rc 0 "$STOKER" pack "$T/src" "$T/local" --threads 2 --shard-size 1M
  NSHARDS=$(ls "$T/local" | grep -c '^shard-[0-9]*\.lmdb$')
  [ "$NSHARDS" -ge "$1" ] || fail "the local pack has $NSHARDS shards, want >= $1"
}
