# SPDX-License-Identifier: MIT
"""A subset of a streamed s3:// dataset from Python (docs/S3.md "Subsets of a streamed
dataset"), against the `s3` fixture's radosgw: stoker.Loader(url, indices=..., shuffle_window=2)
delivers every listed entry once per epoch (a record listed twice twice) and nothing else, in
the same order and with the same images as the same Loader on the local shards; its cache holds
only shards with a listed record; state_dict() after 2 batches resumes exactly on 1 rank (the
uninterrupted run's rest) and on 2 ranks (the rest split, each entry once). stoker.DataLoader over
torch's Subset of stoker.ImageFolder(url, shuffle_window=2) reads the Subset's images once per
epoch with the local copy's labels, fetching only the Subset's shards."""

import glob
import os
from collections import Counter

import numpy as np
import pytest

from s3_link import packed_folder, server_env, upload


@pytest.fixture(scope="module")
def bucket_set(stoker_mod, tmp_path_factory):
    """(url, local shards, shard of each record, the list): 72 JPEGs of about 100 kB in shards
    of 1 MiB; the list holds all of shard 1, every other record of shard 3 and two records of
    the last shard twice, shuffled."""
    server_env()
    local = packed_folder(stoker_mod, tmp_path_factory, "sub", 72, 9)
    with stoker_mod.Dataset(local) as ds:
        shards = ds.info()["shards"]
        assert shards >= 6, ds.info()
        shard = [ds.record(i)["shard"] for i in range(len(ds))]
    by = {s: [i for i, t in enumerate(shard) if t == s] for s in range(shards)}
    idx = by[1] + by[3][::2] + by[shards - 1][:2] * 2
    idx = [int(i) for i in np.random.default_rng(2).permutation(idx)]
    return upload(local, "stk-pysub-%d" % os.getpid()), local, shard, idx


def cached(cache):
    return {int(os.path.basename(p)[6:11]) for p in
            glob.glob(os.path.join(cache, "**", "shard-*.lmdb"), recursive=True)}


def epoch(ld, stop=None):
    idx, imgs, state = [], [], None
    for k, (x, _y, i) in enumerate(ld):
        idx += i.tolist()
        imgs.append(np.asarray(x).copy())
        if stop is not None and k + 1 == stop:
            state = ld.state_dict()
            break
    return idx, np.concatenate(imgs), state


def test_loader_indices_on_a_stream(stoker_mod, bucket_set, tmp_path):
    url, local, shard, idx = bucket_set
    kw = dict(size=32, resize=36, seed=3, workers=2, shuffle_window=2, return_index=True,
              indices=idx)
    with stoker_mod.Loader(url, 4, cache=str(tmp_path / "c1"), **kw) as ld:
        assert len(ld) == (len(idx) + 3) // 4 and len(ld.sampler) == len(idx)
        got, imgs, _ = epoch(ld)
        nxt, _, _ = epoch(ld)
    assert Counter(got) == Counter(idx) and Counter(nxt) == Counter(idx)
    assert got != nxt, "epoch 1 in epoch 0's order"
    assert cached(str(tmp_path / "c1")) == {shard[i] for i in idx}, "fetched unlisted shards"
    with stoker_mod.Loader(local, 4, **kw) as ld:
        ref, ref_imgs, _ = epoch(ld)
    assert got == ref and np.array_equal(imgs, ref_imgs), "differs from the local shards'"

    # state_dict after 2 batches: the rest exactly, on 1 rank and split over 2
    with stoker_mod.Loader(url, 4, cache=str(tmp_path / "c2"), **kw) as ld:
        pre, _, state = epoch(ld, stop=2)
    assert pre == got[:8] and state["segments"]
    with stoker_mod.Loader(url, 4, cache=str(tmp_path / "c3"), **kw) as ld:
        ld.load_state_dict(state)
        rest, _, _ = epoch(ld)
    assert rest == got[8:]
    split, shares = [], 0
    for r in range(2):
        cache = str(tmp_path / ("c4-%d" % r))
        with stoker_mod.Loader(url, 4, cache=cache, rank=r, world_size=2, dist_mode="exact",
                               **kw) as ld:
            shares += len(ld.sampler)          # this rank's share of a whole epoch
            ld.load_state_dict(state)
            part, _, _ = epoch(ld)
        split += part
        assert cached(cache) <= {shard[i] for i in idx}
    assert Counter(split) == Counter(got[8:]) and shares == len(idx)


def test_dataloader_subset_of_a_streamed_imagefolder(stoker_mod, bucket_set, tmp_path):
    torch = pytest.importorskip("torch")
    T = pytest.importorskip("torchvision.transforms")
    url, local, shard, idx = bucket_set
    cache = str(tmp_path / "cache")
    tf = T.Compose([T.Resize(40), T.CenterCrop(32), T.PILToTensor()])
    ds = stoker_mod.ImageFolder(url, tf, cache=cache, shuffle_window=2)
    sub = torch.utils.data.Subset(ds, sorted(set(idx)))
    dl = stoker_mod.DataLoader(sub, batch_size=5, shuffle=True, num_workers=2)
    assert dl.loader is not None and dl.loader.indices is not None   # the library reads it
    with stoker_mod.Dataset(local) as ref:
        want = sorted(int(ref.read(i)[1]) for i in sorted(set(idx)))
    for _ in range(2):
        got = []
        for images, labels in dl:
            assert tuple(images.shape[1:]) == (3, 32, 32)
            got += labels.tolist()
        assert sorted(got) == want, "the Subset's images once per epoch, with the local labels"
    assert cached(cache) == {shard[i] for i in idx}, "fetched shards outside the Subset"
    # under DistributedSampler (2 ranks, exact shares): disjoint shards, the Subset once
    got, sets = [], []
    for r in range(2):
        rcache = str(tmp_path / ("rank%d" % r))
        ds = stoker_mod.ImageFolder(url, tf, cache=rcache, shuffle_window=2)
        sub = torch.utils.data.Subset(ds, sorted(set(idx)))
        samp = stoker_mod.ExactDistributedSampler(sub, num_replicas=2, rank=r, shuffle=True)
        dl = stoker_mod.DataLoader(sub, batch_size=5, sampler=samp, num_workers=2)
        got += [y for _x, labels in dl for y in labels.tolist()]
        sets.append(cached(rcache))
        dl.close()
    assert sorted(got) == want and not sets[0] & sets[1], sets


def test_sampler_drawn_in_python_on_a_stream(stoker_mod, bucket_set, tmp_path):
    """A sampler stoker does not compute (drawn in Python each pass) over a streamed dataset:
    a warning says the draws are read in the shard-window order; each pass reads every draw
    (repeats included) with the local labels, fetching only the drawn indices' shards."""
    torch = pytest.importorskip("torch")
    T = pytest.importorskip("torchvision.transforms")
    url, local, shard, idx = bucket_set

    class Drawn(torch.utils.data.Sampler):
        def __init__(self, order):
            self.order = order

        def __iter__(self):
            return iter(self.order)

        def __len__(self):
            return len(self.order)

    cache = str(tmp_path / "cache")
    tf = T.Compose([T.Resize(40), T.CenterCrop(32), T.PILToTensor()])
    ds = stoker_mod.ImageFolder(url, tf, cache=cache, shuffle_window=2)
    with pytest.warns(UserWarning, match="shard-window order"):
        dl = stoker_mod.DataLoader(ds, batch_size=5, sampler=Drawn(idx), num_workers=2)
    with stoker_mod.Dataset(local) as ref:
        want = sorted(int(ref.read(i)[1]) for i in idx)
    for _ in range(2):
        got = [y for _x, labels in dl for y in labels.tolist()]
        assert sorted(got) == want, "every draw once per pass, with the local labels"
    assert cached(cache) == {shard[i] for i in idx}, "fetched shards nobody drew"
    # streamed by a cache limit below the set: the same warning
    total = stoker_mod.Dataset(local).info()["file_bytes"]
    small = stoker_mod.ImageFolder(url, tf, cache=str(tmp_path / "small"),
                                   cache_bytes=total // 2)
    with pytest.warns(UserWarning, match="shard-window order"):
        stoker_mod.DataLoader(small, batch_size=5, sampler=Drawn(idx), num_workers=2).close()
    # a cache that holds the set: no stream, no warning
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        whole = stoker_mod.ImageFolder(url, tf, cache=str(tmp_path / "whole"))
        stoker_mod.DataLoader(whole, batch_size=5, sampler=Drawn(idx), num_workers=2).close()
