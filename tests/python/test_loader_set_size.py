# SPDX-License-Identifier: MIT
"""Loader.set_size between epochs (progressive resizing): 160 -> 192 -> 128 px over three epochs
of one loader built with max_size equals, epoch by epoch, a loader built at that size (train and
eval, images, labels and indices); a resumed mid-epoch pass at a new size equals a fresh loader
resumed there; what is not allowed raises a clear error and changes nothing."""

import os

import numpy as np
import pytest

BS = 5


def _epoch(ld):
    out = []
    for batch in ld:
        out.append(tuple(np.array(t.numpy() if hasattr(t, "numpy") else t, copy=True)
                         for t in batch))
    return out


def _same(a, b, what):
    assert len(a) == len(b), what
    for k, (x, y) in enumerate(zip(a, b)):
        for u, v in zip(x, y):
            assert u.shape == v.shape and np.array_equal(u, v), "%s: batch %d differs" % (what, k)


def _stk_threads():
    """Thread ids of the library's threads (named stk-*) in this process."""
    out = set()
    for tid in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%s/comm" % tid) as f:
                if f.read().startswith("stk-"):
                    out.add(int(tid))
        except OSError:
            pass
    return out


def _loader(stoker, path, train, size, **kw):
    return stoker.Loader(path, BS, train=train, size=size, resize=170, seed=9, workers=2,
                         return_index=True, **kw)


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_sizes_across_epochs_equal_fresh_loaders(stoker_mod, shards, train):
    path, _ = shards
    sizes = [160, 192, 128]
    with _loader(stoker_mod, path, train, 160, max_size=192) as ld:
        for epoch, s in enumerate(sizes):
            if epoch == 1:
                tids = _stk_threads()         # the loader's threads, named by now
            ld.set_size(s)
            assert ld.size == (s, s)
            got = _epoch(ld)
            assert got[0][0].shape[-2:] == (s, s)
            with _loader(stoker_mod, path, train, s, epoch=epoch) as fresh:
                want = _epoch(fresh)
            _same(got, want, "epoch %d at %d px" % (epoch, s))
        # every thread the loader had at epoch 1 still runs (a restart would have joined them);
        # a thread of a `fresh` loader just closed may still be listed in /proc for a moment
        # after its join, so extra ids are not counted
        assert tids and tids <= _stk_threads(), "set_size restarted the loader's threads"
        # refused during a pass; after leaving it (epoch 3 abandoned), the next `for` runs
        # epoch 4 at the new, non-square size
        it = iter(ld)
        next(it)
        with pytest.raises(stoker_mod.StateError, match="between epochs"):
            ld.set_size(100)
        assert ld.size == (128, 128)
        del it
        ld.set_size(144, 176)
        got = _epoch(ld)
        with _loader(stoker_mod, path, train, (144, 176), epoch=4) as fresh:
            _same(got, _epoch(fresh), "epoch 4 at 144x176")
        with pytest.raises(ValueError, match="max_size"):
            ld.set_size(200)


def test_resume_mid_epoch_at_a_new_size(stoker_mod, shards):
    path, _ = shards
    with _loader(stoker_mod, path, True, 160, max_size=(192, 192)) as a:
        a.set_epoch(2)
        for k, _ in enumerate(a):
            if k == 1:
                state = a.state_dict()
                break
        a.load_state_dict(state)
        a.set_size(192)
        got = _epoch(a)
    with _loader(stoker_mod, path, True, 192, epoch=2) as fresh:
        full = _epoch(fresh)
    _same(got, full[2:], "the rest of epoch 2 at 192 px")


def test_fixed_loader_refuses_once_started(stoker_mod, shards):
    path, _ = shards
    with _loader(stoker_mod, path, True, 64) as ld:
        ld.set_size(48)                  # before the first pass: just the size it starts at
        (images, _, _), *_ = _epoch(ld)
        assert images.shape[-2:] == (48, 48)
        with pytest.raises(stoker_mod.StateError, match="max_size"):
            ld.set_size(32)
    with pytest.raises(ValueError):
        _loader(stoker_mod, path, True, 64, max_size=(0, 10))
