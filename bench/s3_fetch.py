#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Time the fetch of an s3:// dataset into an empty cache, and its open from a full one.

    eval "$(scripts/s3-server.sh start /tmp/s3)"       # or any S3 endpoint in AWS_*
    python3 bench/s3_fetch.py LOCAL_SHARDS BUCKET [RUNS]

Uploads LOCAL_SHARDS' shard files with boto3 to s3://BUCKET/ds (the bucket is created), then
opens s3://BUCKET/ds RUNS times (default 3) with a fresh cache directory and once more from the
filled cache, printing stoker.Dataset.fetch_stats() and the rates: download alone (the ranged
GETs) and the whole open (list + download + every record's CRC check + the LMDB open).
"""
import os
import shutil
import sys
import tempfile
import time

import boto3

import stoker


def main():
    local, bucket = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    s3 = boto3.client("s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL"))
    s3.create_bucket(Bucket=bucket)
    for n in sorted(os.listdir(local)):
        if n.startswith("shard-") and n.endswith(".lmdb"):
            s3.upload_file(os.path.join(local, n), bucket, "ds/" + n)
    url = "s3://%s/ds" % bucket
    cache = tempfile.mkdtemp(prefix="stk-s3bench-")
    try:
        for _ in range(runs):
            shutil.rmtree(cache)
            t = time.time()
            with stoker.Dataset(url, cache=cache) as d:
                st = d.fetch_stats()
            el = time.time() - t
            mb = st["bytes_fetched"] / 1e6
            print("fetch: %.0f MB in %.2f s open, %.2f s download: %.0f MB/s download, "
                  "%.0f MB/s open; %d requests, %d retries" % (
                      mb, el, st["fetch_s"], mb / st["fetch_s"], mb / el, st["requests"],
                      st["retries"]))
        t = time.time()
        with stoker.Dataset(url, cache=cache) as d:
            st = d.fetch_stats()
        print("cached open: %.3f s, %d of %d shards from the cache" % (
            time.time() - t, st["shards_cached"], st["shards"]))
    finally:
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
