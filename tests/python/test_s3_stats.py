# SPDX-License-Identifier: MIT
"""The fetch stats of an s3:// dataset, against the real S3 server of the `s3` CTest fixture
(Ceph's RADOS Gateway): a Loader over an empty cache fetched exactly the shards' bytes (the sum
of the shard files' sizes, as uploaded with boto3), counted one miss per shard, busy and starved
time and a link rate; Loader.stats() and Dataset.fetch_stats() agree; a second Loader on the same
cache reads every shard from it: hit rate 1, nothing fetched, nothing waited for; a local
dataset's fetch figures are all zero."""

import os

import pytest

import s3_link


@pytest.fixture(scope="module")
def s3_dataset(shards):
    s3_link.server_env()
    local, _ = shards
    url = s3_link.upload(local, "stk-stats-%d" % os.getpid())
    return url, local


def epoch(ld):
    n = 0
    for images, _ in ld:
        n += len(images)
    return n


def test_fetch_stats_first_and_cached_epoch(stoker_mod, s3_dataset, tmp_path):
    url, local = s3_dataset
    names = s3_link.shard_names(local)
    total = sum(os.path.getsize(os.path.join(local, n)) for n in names)
    cache = str(tmp_path / "cache")
    n = len(stoker_mod.Dataset(local))
    with stoker_mod.Loader(url, 8, size=32, workers=2, cache=cache) as ld:
        assert epoch(ld) == n
        st = ld.stats(max_errors=0)
        fx, ds = st["fetch"], ld.fetch_stats()
    assert fx["bytes"] == total == ds["bytes_fetched"] == ds["bytes_missed"], (fx, ds, total)
    assert fx["misses"] == len(names) == ds["shards_fetched"] and fx["hits"] == 0 and fx["hit_rate"] == 0.0
    assert ds["requests"] >= len(names) and ds["retries"] == 0 and ds["bytes_cached"] == 0, ds
    assert fx["busy_s"] > 0 and fx["starved_s"] > 0 and fx["link_mb_per_s"] > 0, fx
    assert st["fetch_bytes"] == total and st["cache_misses"] == len(names)
    assert abs(fx["link_mb_per_s"] - ds["link_bytes_per_s"] / 1e6) < 1e-6 * max(1.0, fx["link_mb_per_s"])
    assert ds["inflight"] >= 1 and "fetch:" in str(st), str(st)
    # a second epoch from the cache (another Loader, the same cache directory)
    with stoker_mod.Loader(url, 8, size=32, workers=2, cache=cache) as ld:
        assert epoch(ld) == n
        fx = ld.stats(max_errors=0)["fetch"]
    assert fx["hit_rate"] == 1.0 and fx["hits"] == len(names) and fx["misses"] == 0, fx
    assert fx["bytes"] == 0 and fx["busy_s"] == 0 and fx["starved_s"] == 0, fx
    # a local dataset: no fetch
    with stoker_mod.Loader(local, 8, size=32, workers=2) as ld:
        epoch(ld)
        st = ld.stats(max_errors=0)
    assert st["fetch"] == {"bytes": 0, "busy_s": 0.0, "starved_s": 0.0, "hits": 0, "misses": 0,
                           "hit_rate": 0.0, "link_mb_per_s": 0.0, "max_wait_s": 0.0}
    assert st["verdict"]["bottleneck_name"] != "fetch"
