#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `stoker pack SRC s3://...` with the upload in parallel with packing (this build) against the
# serial order (pack everything into the staging folder, then upload: an older stoker, given as
# OLD_STOKER), same source, same server, REPEATS times each, alternating which goes first,
# after a warm-up; prints seconds and the
# peak bytes under the cache root (the staging folder and, for the old order, the read cache it
# moves the shards into), sampled every 0.1 s, and the pack's CPU seconds (user + sys).
# The test server's memstore holds 4 GiB and radosgw frees deleted objects only hours later:
# start a fresh server for each run of this script (REPEATS x 2 x SRC must stay below that).
#   bash bench/s3_pack.sh NEW_STOKER OLD_STOKER SRC [REPEATS [SHARD_SIZE]]
# Env: the AWS_* variables of the server (scripts/s3-server.sh env DIR); STOKER_S3_PACK_QUEUE;
# LINK_MB_S: both packs talk to the server through tests/s3_fault_proxy.py as a link of that many
# MB/s (no tc netem on these machines), spoiling nothing.
set -eu
new=$1 old=$2 src=$3 reps=${4:-3} shard=${5:-32M}
work=$(mktemp -d "${TMPDIR:-/tmp}/stk-s3pack.XXXXXX")
trap 'rm -rf "$work"' EXIT
if [ -n "${LINK_MB_S:-}" ]; then
  STK_PROXY_RATE_MB_S=$LINK_MB_S python3 "$(dirname "$0")/../tests/s3_fault_proxy.py" \
    "${AWS_ENDPOINT_URL##*:}" "$work/port" "$work/faults" 1000000000 &
  proxy=$!
  trap 'kill $proxy; rm -rf "$work"' EXIT
  for i in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
  export AWS_ENDPOINT_URL=http://127.0.0.1:$(cat "$work/port")
fi
B=stk-packbench-$$
python3 -c "import boto3, os; boto3.client('s3', endpoint_url=os.environ['AWS_ENDPOINT_URL']).create_bucket(Bucket='$B')"
clear_bucket() {
  python3 - "$B" <<'PY'
import boto3, os, sys
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
for page in s3.get_paginator("list_objects_v2").paginate(Bucket=sys.argv[1]):
    for o in page.get("Contents", []):
        s3.delete_object(Bucket=sys.argv[1], Key=o["Key"])
PY
}
one() { # one NAME BINARY RUN
  local name=$1 bin=$2 run=$3 peak=0 t0 t1 pid s
  export STOKER_CACHE_DIR=$work/cache-$name-$run
  mkdir -p "$STOKER_CACHE_DIR"
  t0=$(date +%s.%N)
  /usr/bin/time -o "$work/cpu" -f "%U %S" \
    "$bin" pack "$src" "s3://$B/$name-$run" --threads 2 --shard-size "$shard" --quiet >"$work/out" 2>&1 &
  pid=$!
  while kill -0 $pid 2>/dev/null; do
    s=$(du -sb "$STOKER_CACHE_DIR" | cut -f1)
    [ "$s" -gt "$peak" ] && peak=$s
    sleep 0.1
  done
  wait $pid || { cat "$work/out"; exit 1; }
  t1=$(date +%s.%N)
  printf "%s\t%d\t%.2f s\tcpu %s s\tpeak local %.1f MB\n" "$name" "$run" "$(echo "$t1 - $t0" | bc)" \
    "$(awk '{print $1 + $2}' "$work/cpu")" "$(echo "$peak / 1000000" | bc -l)"
  rm -rf "$STOKER_CACHE_DIR"
  clear_bucket
}
echo "source: $(du -sh "$src" | cut -f1), $(find "$src" -type f | wc -l) files; shard size $shard; queue ${STOKER_S3_PACK_QUEUE:-2}; link ${LINK_MB_S:-loopback} MB/s"
# warm-up (not counted): the server's first writes to a new bucket are slow
python3 -c "import boto3, os; boto3.client('s3', endpoint_url=os.environ['AWS_ENDPOINT_URL']).put_object(Bucket='$B', Key='warm', Body=b'x' * (9 << 20))"
clear_bucket
for r in $(seq "$reps"); do # alternating which goes first
  if [ $((r % 2)) = 1 ]; then one parallel "$new" "$r"; one serial "$old" "$r"
  else one serial "$old" "$r"; one parallel "$new" "$r"; fi
done
