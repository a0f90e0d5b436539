# SPDX-License-Identifier: MIT
"""shuffle_window= from Python (STK_P_SHUFFLE_WINDOW; docs/S3.md), against the real S3 server of
the `s3` CTest fixture: stoker.Loader(s3_url, shuffle_window=W) streams even with a cache that
could hold the whole set — the open fetches no shard, the epoch fetches each as it reads it — in
the same order as the same Loader on the local shards (the shard-window order), every record once;
every shard then stays in the cache, so a later Loader finds them all there. stoker.ImageFolder(
s3_url, shuffle_window=W) fetches nothing when built, and stoker.DataLoader over it reads every
image once per epoch with the labels of the local copy."""

import os

import numpy as np
import pytest

from conftest import loader_epochs
from s3_link import packed_folder, server_env, upload


@pytest.fixture(scope="module")
def bucket_set(stoker_mod, tmp_path_factory):
    """(url, local shards): an ImageFolder of 60 JPEGs of about 100 kB packed in shards of 1 MiB
    (the smallest), uploaded with boto3."""
    server_env()
    local = packed_folder(stoker_mod, tmp_path_factory, "win", 60, 4)
    with stoker_mod.Dataset(local) as ds:
        assert ds.info()["shards"] >= 4, ds.info()
    return upload(local, "stk-pywin-%d" % os.getpid()), local


def test_loader_window_streams_in_the_local_order(stoker_mod, bucket_set, tmp_path):
    url, local = bucket_set
    cache = str(tmp_path / "cache")
    kw = dict(size=32, resize=36, seed=3, workers=2, shuffle_window=2)
    with stoker_mod.Loader(url, 4, cache=cache, **kw) as ld:
        st = ld.fetch_stats()
        assert st["shards_fetched"] == 0 and st["shards_cached"] == 0, \
            "the open fetched shards: %r" % st
    imgs_l, idx_l, ep_l = loader_epochs(stoker_mod, local, 2, **kw)
    imgs_s, idx_s, ep_s = loader_epochs(stoker_mod, url, 2, cache=cache, **kw)
    n = len(stoker_mod.Dataset(local))
    for e in range(2):
        assert sorted(idx_s[ep_s == e].tolist()) == list(range(n)), "every record once per epoch"
    assert np.array_equal(idx_s, idx_l), "the order differs from the local shard-window order"
    assert np.array_equal(imgs_s, imgs_l), "the images differ from the local dataset's"
    with stoker_mod.Loader(url, 4, cache=cache, size=32) as ld:   # every shard was kept
        st = ld.fetch_stats()
        assert st["shards"] >= 4 and st["shards_cached"] == st["shards"], st
        assert st["shards_fetched"] == 0, st


def test_imagefolder_window_under_dataloader(stoker_mod, bucket_set, tmp_path):
    pytest.importorskip("torch")
    T = pytest.importorskip("torchvision.transforms")
    url, local = bucket_set
    cache = str(tmp_path / "cache")
    tf = T.Compose([T.Resize(40), T.CenterCrop(32), T.PILToTensor()])
    ds = stoker_mod.ImageFolder(url, tf, cache=cache, shuffle_window=2)
    assert ds.shuffle_window == 2
    st = ds._ds.fetch_stats()
    assert st["shards_fetched"] == 0 and st["bytes_fetched"] < 1 << 20, \
        "ImageFolder fetched the set when built: %r" % st
    dl = stoker_mod.DataLoader(ds, batch_size=5, shuffle=True, num_workers=2)
    with stoker_mod.Dataset(local) as ref:
        want = sorted(int(ref.read(i)[1]) for i in range(len(ref)))
    for _ in range(2):
        got = []
        for images, labels in dl:
            assert tuple(images.shape[1:]) == (3, 32, 32)
            got += labels.tolist()
        assert sorted(got) == want, "every image once per epoch, with the local copy's labels"
