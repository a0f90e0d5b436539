# SPDX-License-Identifier: MIT
"""Batches are safe to hold, with no copy=True, on stoker.Loader and stoker.DataLoader.

`list(loader)` and a one-batch-ahead fetcher (the pattern of Lightning's prefetching fetcher and
the CUDA prefetcher wrappers) give exactly the tensors of a copy=True run; a batch kept from
epoch 0 is unchanged after two more epochs and after close(); a NumPy view or a slice keeps the
memory alive on its own; the plain loop stays zero copy (no detach, the ring's addresses reused);
memory grows with what is held and not with the epochs run (RSS over a long plain loop and over
holding many batches). The same over a small ring (prefetch=2), where every held batch must be
detached, and in train mode with float32 output.
"""
import gc

import numpy as np
import pytest

from conftest import make_imagefolder

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("hold_folder"))
    make_imagefolder(root, per_class=(13, 11, 12), seed=7)
    return root


def _loader(stoker, folder, **kw):
    args = dict(train=True, size=24, workers=2, seed=11, dtype="float32",
                mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))
    args.update(kw)
    return stoker.Loader(folder, 5, **args)


def _copied(stoker, folder, epochs=1, **kw):
    with _loader(stoker, folder, copy=True, **kw) as ref:
        return [[(x, y) for x, y in ref] for _ in range(epochs)]


def _same(a, b):
    assert len(a) == len(b)
    for (x, y), (u, v) in zip(a, b):
        assert torch.equal(x, u) and torch.equal(y, v)


@pytest.mark.parametrize("prefetch", [2, 4])
def test_list_and_one_ahead_equal_copy(stoker_mod, folder, prefetch):
    ref = _copied(stoker_mod, folder, epochs=2, prefetch=prefetch)
    with _loader(stoker_mod, folder, prefetch=prefetch) as loader:
        held = list(loader)                   # every batch of epoch 0 kept by reference
        _same(held, ref[0])
        # one batch ahead: the step runs on batch k while batch k + 1 is already fetched
        got = []
        it = iter(loader)
        nxt = next(it, None)
        while nxt is not None:
            cur, nxt = nxt, next(it, None)
            got.append((cur[0].clone(), cur[1].clone()))
        _same(got, ref[1])
        _same(held, ref[0])                   # still intact after another epoch
        if prefetch == 2:
            assert loader.stats()["detached"] > 0


def test_held_batch_survives_epochs_and_close(stoker_mod, folder):
    ref = _copied(stoker_mod, folder, epochs=3)
    loader = _loader(stoker_mod, folder)
    kept, view, piece = None, None, None
    for i, (x, y) in enumerate(loader):
        if i == 1:
            kept, labels = x, y
            view = x.numpy()[2]               # a NumPy view of one sample
            piece = x[3:5]                    # a slice
    for _ in range(2):
        for _x, _y in loader:
            pass
    assert torch.equal(kept, ref[0][1][0]) and torch.equal(labels, ref[0][1][1])
    loader.close()
    gc.collect()
    assert torch.equal(kept, ref[0][1][0])    # after close(): detached, still ours
    del kept
    gc.collect()
    assert np.array_equal(view, ref[0][1][0][2].numpy())   # the view alone keeps it alive
    assert torch.equal(piece, ref[0][1][0][3:5])


def test_plain_loop_is_zero_copy(stoker_mod, folder):
    with _loader(stoker_mod, folder, prefetch=4) as loader:
        ptrs = set()
        for _ in range(3):
            for x, _y in loader:
                ptrs.add(x.data_ptr())
        st = loader.stats()
        assert st["detached"] == 0 and st["copied"] == 0
        assert len(ptrs) <= 4                 # the ring's slots, reused


def _rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_memory_bounded(stoker_mod, folder):
    # batches of 5 x 3 x 160 x 160 float32 = 1.5 MB
    with _loader(stoker_mod, folder, size=160, prefetch=3) as loader:
        batch = 5 * 3 * 160 * 160 * 4
        for _x, _y in loader:                 # warm up (ring touched, allocator settled)
            pass
        base = _rss()
        for _ in range(15):                   # a plain loop: nothing accumulates
            for _x, _y in loader:
                pass
        grow = _rss() - base
        assert grow < 6 * batch, "plain loop grew RSS by %d bytes" % grow
        held = [x for _ in range(3) for x, _y in loader]    # hold 3 epochs of batches
        grow = _rss() - base
        assert grow < (len(held) + 3 + 4) * batch, (grow, len(held))
        assert grow > (len(held) - 4) * batch / 2     # they are really held (touched memory)
        assert loader.stats()["held"] <= 3
        del held, _x
        gc.collect()
        after = _rss()
        for _ in range(10):                   # detached memory was freed, not leaked
            for _x, _y in loader:
                pass
        assert _rss() - after < 6 * batch


def test_dataloader_list_equals_copy(stoker_mod, folder):
    tv = pytest.importorskip("torchvision")
    import torchvision.transforms as T
    tf = T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = tv.datasets.ImageFolder(folder, tf)
    g = torch.Generator()
    g.manual_seed(3)
    a = list(stoker_mod.DataLoader(ds, batch_size=4, shuffle=True, generator=g))
    g.manual_seed(3)
    b = [(x.clone(), y.clone()) for x, y in stoker_mod.DataLoader(ds, batch_size=4, shuffle=True,
                                                                   generator=g)]
    _same(a, b)
