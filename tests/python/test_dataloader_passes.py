# SPDX-License-Identifier: MIT
"""What frameworks do with a DataLoader's iterators, on stoker.DataLoader: iter() before
sampler.set_epoch() (the pass begins at its first next() and runs the sampler's epoch then), an
exhausted iterator kept alive while the next iter() is asked for, an iterator abandoned
mid-pass (limit_train_batches) then a new iter(), an older iterator stepped after a later one
began (RuntimeError mid-way, StopIteration once all its batches were out), set_epoch() twice with the epoch in progress (the pass goes on), set_epoch()
of the pass just run (a warning: it repeats)."""

import pytest

from conftest import make_imagefolder, torch_or_skip

torch = torch_or_skip()
T = pytest.importorskip("torchvision.transforms")
from torchvision.datasets import ImageFolder  # noqa: E402
from torch.utils.data.distributed import DistributedSampler  # noqa: E402

TF = T.Compose([T.Resize(20), T.CenterCrop(16), T.PILToTensor()])


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    root = tmp_path_factory.mktemp("passes") / "data"
    make_imagefolder(str(root), per_class=(5, 5, 4), seed=4)
    return ImageFolder(str(root), TF)


def _cat(batches):
    return torch.cat([x for x, _ in batches])


def test_set_epoch_after_iter(ds):
    import stoker
    s = DistributedSampler(ds, num_replicas=1, rank=0, shuffle=True, seed=3)
    loader = stoker.DataLoader(ds, batch_size=4, sampler=s)
    s.set_epoch(4)
    e4 = _cat(loader)
    s.set_epoch(0)
    e0 = _cat(loader)
    assert not torch.equal(e0, e4)
    it = iter(loader)          # Lightning: iter() first ...
    s.set_epoch(4)             # ... then set_epoch
    assert torch.equal(_cat(it), e4)
    loader.close()


def test_exhausted_or_abandoned_iterator_then_new_pass(ds):
    import stoker
    loader = stoker.DataLoader(ds, batch_size=4)
    full = list(loader)
    n = len(loader)
    it = iter(loader)
    got = [next(it) for _ in range(n)]     # every batch, StopIteration not yet seen
    it2 = iter(loader)                     # kept alive while the next one is asked for
    assert len(list(it2)) == n
    assert all(torch.equal(a[0], b[0]) for a, b in zip(got, full))
    it3 = iter(loader)
    next(it3)                              # abandoned after one batch (limit_train_batches)
    it4 = iter(loader)
    again = list(it4)
    assert len(again) == n and torch.equal(_cat(again), _cat(full))
    with pytest.raises(RuntimeError, match="ended by a later iter"):
        next(it3)                          # ended mid-way when the later pass began: said
    with pytest.raises(StopIteration):     # it had delivered every batch: it just ends
        next(it)
    loader.close()


def test_set_epoch_twice_keeps_the_pass(ds):
    import stoker
    loader = stoker.DataLoader(ds, batch_size=4, shuffle=True,
                               generator=torch.Generator().manual_seed(2))
    loader.set_epoch(3)
    loader.set_epoch(3)                    # twice before the pass: nothing to say
    ref = _cat(loader)
    with pytest.warns(UserWarning, match="repeats"):
        loader.set_epoch(3)                # the pass just run, again: said, not silent
    it = iter(loader)
    first = [next(it)]
    loader.set_epoch(3)                    # the same epoch again: nothing ends
    rest = list(it)
    assert len(first) + len(rest) == len(loader)
    assert torch.equal(_cat(first + rest), ref)
    loader.close()
