# SPDX-License-Identifier: MIT
"""stoker.DataLoader follows a crop size changed in the dataset's transform between epochs
(progressive resizing as a torchvision script does it: ``transform.transforms[0].size = 192``):
the next ``for`` yields batches of the new size, equal to a DataLoader built with that size at
that epoch (train and eval); a changed Resize, or a DataLoader built without max_size, is
refused with a clear error."""

import numpy as np
import pytest

from conftest import torch_or_skip


def _epoch(dl):
    return [(x.numpy().copy(), y.numpy().copy()) for x, y in dl]


def _same(a, b, what):
    assert len(a) == len(b), what
    for k, ((x, y), (u, v)) in enumerate(zip(a, b)):
        assert x.shape == u.shape and np.array_equal(x, u) and np.array_equal(y, v), \
            "%s: batch %d differs" % (what, k)


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_transform_size_change_reaches_the_loader(stoker_mod, imagefolder, train):
    torch = torch_or_skip()
    T = pytest.importorskip("torchvision.transforms")
    D = pytest.importorskip("torchvision.datasets")
    root, _ = imagefolder

    def tf(size):
        if train:
            return T.Compose([T.RandomResizedCrop(size), T.PILToTensor()])
        return T.Compose([T.Resize(170), T.CenterCrop(size), T.PILToTensor()])

    def dl(size, **kw):
        return stoker_mod.DataLoader(D.ImageFolder(root, tf(size)), batch_size=5, shuffle=train,
                                     generator=torch.Generator().manual_seed(4), num_workers=2,
                                     **kw)

    ld = dl(160, max_size=192)
    ds = ld.dataset
    e0 = _epoch(ld)
    assert e0[0][0].shape[-2:] == (160, 160)
    crop = 0 if train else 1
    ds.transform.transforms[crop].size = (192, 192)      # as a torchvision script would
    e1 = _epoch(ld)
    assert e1[0][0].shape[-2:] == (192, 192)
    ds.transform.transforms[crop].size = 128
    e2 = _epoch(ld)
    assert e2[0][0].shape[-2:] == (128, 128)
    for epoch, (got, size) in enumerate(((e0, 160), (e1, 192), (e2, 128))):
        ref = dl(size)
        ref.set_epoch(epoch)
        _same(got, _epoch(ref), "epoch %d at %d px" % (epoch, size))
        ref.close()
    ds.transform.transforms[crop].size = 256              # above max_size
    with pytest.raises(ValueError, match="max_size"):
        iter(ld)
    ld.close()


def test_refusals(stoker_mod, imagefolder):
    torch_or_skip()
    T = pytest.importorskip("torchvision.transforms")
    D = pytest.importorskip("torchvision.datasets")
    root, _ = imagefolder
    ds = D.ImageFolder(root, T.Compose([T.Resize(170), T.CenterCrop(128), T.PILToTensor()]))
    ld = stoker_mod.DataLoader(ds, batch_size=5, max_size=160)
    _epoch(ld)
    ds.transform.transforms[0].size = 200
    with pytest.raises(ValueError, match="Resize"):
        iter(ld)
    ld.close()
    ds = D.ImageFolder(root, T.Compose([T.RandomResizedCrop(64), T.PILToTensor()]))
    ld = stoker_mod.DataLoader(ds, batch_size=5)
    _epoch(ld)
    ds.transform.transforms[0].size = 48
    with pytest.raises(ValueError, match="max_size"):
        iter(ld)
    ld.close()
