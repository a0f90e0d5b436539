# SPDX-License-Identifier: MIT
"""A Python tail's collated images live in an out ring of shared memory that is reused, and no
batch handed out is ever written again.

With worker processes and default_collate, stoker's tail workers stack each batch's images into
a slot of an out ring (a file per slot) instead of a new shared-memory file per batch. In a
plain ``for`` the slots are reused (the number of files made stays at the ring's size); a batch
still referenced when its slot comes round again (by the tensor, or only by a view of it, or
across passes, or a pass left early) keeps its data and the slot gets a new file. Each case
compares with torch's DataLoader on the same data and seed.
"""
import os
import warnings

import pytest

from conftest import make_imagefolder

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
import torchvision.transforms as T  # noqa: E402
from torchvision.datasets import ImageFolder  # noqa: E402
from torch.utils.data import DataLoader as TorchDataLoader  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
TF = T.Compose([T.Resize(20), T.CenterCrop(16), T.ToTensor(), T.Normalize(MEAN, STD),
                T.Lambda(lambda x: x * 2 + 1)])
KW = dict(batch_size=3, num_workers=2, prefetch_factor=2)
OUT_SLOTS = 2 * 2 + 2          # prefetch_factor x num_workers + 2 (stoker.pytail.TailRunner)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("pytail_ring"))
    make_imagefolder(root, per_class=(13, 12, 12), seed=3)      # 37 images: 13 batches
    return root


@pytest.fixture()
def files_made(monkeypatch):
    """Counts the out-ring files the loader makes (os.memfd_create, called in this process)."""
    made = []
    real = os.memfd_create

    def counting(name, *a):
        fd = real(name, *a)
        if name == "stoker-tail-out":
            made.append(fd)
        return fd
    monkeypatch.setattr(os, "memfd_create", counting)
    return made


def _loader(folder, **kw):
    import stoker
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return stoker.DataLoader(ImageFolder(folder, TF), **dict(KW, **kw))


def _torch(folder):
    torch.manual_seed(5)
    return [(x.clone(), y.clone()) for x, y in TorchDataLoader(ImageFolder(folder, TF), **KW)]


def _check(got, want):
    assert len(got) == len(want)
    for (a, la), (b, lb) in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
        assert torch.equal(la, lb)


def test_plain_loop_reuses_the_slots(folder, files_made):
    loader = _loader(folder)
    assert len(loader) >= 2 * OUT_SLOTS
    for _ in range(2):
        torch.manual_seed(5)
        got = [(x.clone(), y) for x, y in loader]    # each batch dropped at the next step
        _check(got, _torch(folder))
    # out slots written again in place: no file beyond the ring's own (the first pass made
    # them; a pass after a completed one reuses them all)
    assert len(files_made) == OUT_SLOTS, len(files_made)
    # the images came from the out ring: a batch's storage is a whole slot, larger than the
    # last (short) batch needs
    torch.manual_seed(5)
    last = list(x for x, _ in loader)[-1]
    st = last.untyped_storage() if hasattr(last, "untyped_storage") else last.storage()
    nbytes = st.nbytes() if hasattr(st, "nbytes") else st.size() * st.element_size()
    assert nbytes > last.numel() * last.element_size()
    loader.close()


def test_held_batches_and_views_keep_their_data(folder, files_made):
    loader = _loader(folder)
    torch.manual_seed(5)
    held = list(loader)                           # every batch kept
    _check(held, _torch(folder))
    torch.manual_seed(5)
    views = [(x[0:], y) for x, y in loader]       # only a view of each batch kept
    _check(views, _torch(folder))
    _check(held, _torch(folder))                  # the first pass's batches: untouched
    assert len(files_made) > OUT_SLOTS            # held slots got new files
    loader.close()


def test_a_pass_left_early_then_the_next(folder):
    loader = _loader(folder)
    torch.manual_seed(5)
    it = iter(loader)
    first = [next(it) for _ in range(2)]          # the rest of the pass is in flight
    torch.manual_seed(5)
    again = list(loader)                          # a new pass while it is referenced
    _check(again, _torch(folder))
    _check(first, _torch(folder)[:2])
    del it
    loader.close()


def test_without_memfd_the_workers_collate_as_torch(folder, monkeypatch):
    def refuse(name, *a):
        raise OSError(38, "memfd_create refused (a sandbox)")
    monkeypatch.setattr(os, "memfd_create", refuse)
    loader = _loader(folder)
    torch.manual_seed(5)
    _check(list(loader), _torch(folder))
    assert loader._tail.out_fds is None               # the out ring given up, not retried
    torch.manual_seed(5)
    _check(list(loader), _torch(folder))
    loader.close()



def _settled_fds(bound):
    """This process's open descriptors once what a pass left early lets go of is gone: the
    batches torch's iterator still held (each received storage keeps its descriptor under the
    file_descriptor strategy) freed by a collection, and its workers' pipes closed as they exit.
    Waits (at most 30 s) until the count is at most BOUND, or for one quiet second when BOUND is
    None; a descriptor kept for good by each pass still shows, as one more per pass."""
    import gc
    import time
    deadline, last, since = time.monotonic() + 30, None, time.monotonic()
    while True:
        gc.collect()
        n = len(os.listdir("/proc/self/fd"))
        if n != last:
            last, since = n, time.monotonic()
        if (bound is not None and n <= bound) or time.monotonic() > deadline or \
                (bound is None and time.monotonic() - since >= 1.0):
            return n
        time.sleep(0.05)


def _slow(x):
    import time
    time.sleep(0.02)             # the workers still have batches queued when the pass is left
    return x


def test_passes_left_early_leave_no_descriptors(folder):
    import stoker
    tf = T.Compose([T.Resize(20), T.CenterCrop(16), T.ToTensor(), T.Lambda(_slow)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loader = stoker.DataLoader(ImageFolder(folder, tf), **KW)
    it = iter(loader)
    next(it)
    del it
    fds = _settled_fds(None)
    for _ in range(6):                            # as Lightning's limit_train_batches does
        it = iter(loader)
        next(it)
        del it
    now = _settled_fds(fds + 2)
    assert now <= fds + 2, (fds, now)
    want = list(TorchDataLoader(ImageFolder(folder, tf), **KW))
    _check(list(loader), want)
    loader.close()
