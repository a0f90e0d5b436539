# SPDX-License-Identifier: MIT
"""loaderbench's CSV carries the fetch figures its table and JSON carry (docs/loaderbench.md),
against the real S3 server of the `s3` CTest fixture: on an s3:// dataset with `--cache cold`
every row has fetch_bytes = the shard files' sizes (as uploaded with boto3), one cache miss per
shard and no hit, and the same fetch figures as the JSON point of that run; a local dataset's
fetch columns are empty."""

import csv
import json
import os
import subprocess

import pytest

import s3_link

LOADERBENCH = os.environ.get("LOADERBENCH")
FETCH_COLS = ["fetch_shards", "fetch_cache_hits", "fetch_cache_misses", "fetch_hit_rate",
              "fetch_bytes", "fetch_requests", "fetch_retries", "fetch_busy_s", "fetch_starved_s",
              "fetch_link_bytes_per_s", "fetch_inflight", "fetch_open_s"]


def bench(path, tmp, tag):
    js, cs = str(tmp / (tag + ".json")), str(tmp / (tag + ".csv"))
    p = subprocess.run([LOADERBENCH, path, "--cache", "cold", "--epochs", "1", "--repeat", "2",
                        "--workers", "1", "--layouts", "shards-buffered", "--size", "32",
                        "--batch-size", "8", "--cache-dir", str(tmp / (tag + "-cache")),
                        "--json", js, "--csv", cs],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = list(csv.DictReader(open(cs)))
    return json.load(open(js)), rows, open(cs).readline().strip().split(",")


def test_csv_fetch_columns(shards, tmp_path):
    if not LOADERBENCH:
        pytest.skip("LOADERBENCH not set")
    s3_link.server_env()
    local, _ = shards
    names = s3_link.shard_names(local)
    total = sum(os.path.getsize(os.path.join(local, n)) for n in names)
    url = s3_link.upload(local, "stk-lbcsv-%d" % os.getpid())
    d, rows, header = bench(url, tmp_path, "s3")
    assert header[-1] == "error" and header[-13:-1] == FETCH_COLS, header
    assert rows and all(len(r) == len(header) for r in rows), rows
    pts = [x for x in d["points"] if not x.get("error")]
    assert len(rows) == len(pts), (rows, pts)
    for r in rows:
        assert r["error"] == "", r
        assert int(r["fetch_bytes"]) == total, (r, total)
        assert int(r["fetch_shards"]) == len(names) == int(r["fetch_cache_misses"]), r
        assert int(r["fetch_cache_hits"]) == 0 and float(r["fetch_hit_rate"]) == 0.0, r
        assert int(r["fetch_requests"]) >= len(names) and float(r["fetch_busy_s"]) > 0, r
    # the same figures as the JSON's point
    fx = pts[0]["fetch"]
    r = rows[0]
    for col, key in (("fetch_shards", "shards"), ("fetch_cache_hits", "cache_hits"),
                     ("fetch_cache_misses", "cache_misses"), ("fetch_bytes", "bytes"),
                     ("fetch_requests", "requests"), ("fetch_retries", "retries"),
                     ("fetch_inflight", "inflight")):
        assert int(r[col]) == fx[key], (col, r[col], fx[key])
    for col, key in (("fetch_busy_s", "busy_s"), ("fetch_starved_s", "starved_s"),
                     ("fetch_open_s", "open_s"), ("fetch_link_bytes_per_s", "link_bytes_per_s")):
        assert abs(float(r[col]) - fx[key]) <= 1e-3 * max(1.0, abs(fx[key])), (col, r[col], fx[key])
    # a local dataset: the columns are there, empty
    _, rows, header = bench(local, tmp_path, "local")
    assert header[-13:-1] == FETCH_COLS and rows
    assert all(r[c] == "" for r in rows for c in FETCH_COLS), rows
