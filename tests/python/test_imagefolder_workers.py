# SPDX-License-Identifier: MIT
"""stoker.ImageFolder (here a packed copy) under torch's own DataLoader with worker processes:
with fork, spawn and forkserver workers it gives the same images and labels as with
num_workers=0. (Before: fork children hit "open it again in the fork() child", spawn and
forkserver could not pickle the ctypes handle.) Also: pickle round trip without workers, and
the parent's dataset still usable after its workers ran. DataLoader(timeout=) bounds each
batch, so a hang fails instead of blocking CI.
"""
import multiprocessing as mp
import pickle

import pytest

from conftest import make_imagefolder

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
import torchvision.transforms as T  # noqa: E402
from torch.utils.data import DataLoader as TorchDataLoader  # noqa: E402

TF = T.Compose([T.Resize(20), T.CenterCrop(16), T.PILToTensor()])


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    import stoker
    root = str(tmp_path_factory.mktemp("wk_folder"))
    make_imagefolder(root, per_class=(4, 3, 3), seed=17)
    dst = str(tmp_path_factory.mktemp("wk_packed")) + "/ds"
    stoker.pack(root, dst, threads=1)
    return dst


def _epoch(loader):
    xs, ys = zip(*[(x.clone(), y.clone()) for x, y in loader])
    return torch.cat(xs), torch.cat(ys)


def test_pickle_round_trip(packed):
    import stoker
    ds = stoker.ImageFolder(packed, TF)
    copy = pickle.loads(pickle.dumps(ds))
    assert len(copy) == len(ds) and copy.classes == ds.classes
    for i in (0, len(ds) - 1):
        assert torch.equal(copy[i][0], ds[i][0]) and copy[i][1] == ds[i][1]


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_workers_equal_in_process(packed, method):
    import stoker
    if method not in mp.get_all_start_methods():
        pytest.skip("no %s start method here" % method)
    ds = stoker.ImageFolder(packed, TF)
    ref = _epoch(TorchDataLoader(ds, batch_size=3))
    got = _epoch(TorchDataLoader(ds, batch_size=3, num_workers=2, timeout=120,
                                 multiprocessing_context=mp.get_context(method)))
    assert torch.equal(got[1], ref[1]) and torch.equal(got[0], ref[0])
    assert torch.equal(ds[0][0], ref[0][0])          # the parent's handle still works
