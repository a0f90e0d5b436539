# SPDX-License-Identifier: MIT
"""stoker.DataLoader with a sampler or batch_sampler whose order the library does not compute
(WeightedRandomSampler, RandomSampler with replacement / num_samples, a user's own sampler, a
batch_sampler, a RASampler-like sampler repeating indices): its indices are drawn in Python
once per pass and the library reads exactly that order. The batches' dataset indices equal
what the sampler drew, the labels equal torch's DataLoader's for the same seed, a repeated
index is augmented differently per copy, and the result does not depend on num_workers."""

import pytest

from conftest import make_imagefolder, torch_or_skip

torch = torch_or_skip()
T = pytest.importorskip("torchvision.transforms")
from torchvision.datasets import ImageFolder  # noqa: E402
from torch.utils.data import DataLoader as TorchDataLoader  # noqa: E402

EVAL = T.Compose([T.Resize(20), T.CenterCrop(16), T.PILToTensor()])
TRAIN = T.Compose([T.RandomResizedCrop(16), T.RandomHorizontalFlip(), T.PILToTensor()])


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("samplers") / "data"
    make_imagefolder(str(root), per_class=(7, 6, 5), seed=11)
    return str(root)


class EveryThird(torch.utils.data.Sampler):
    """A user's own sampler: 2, 5, 8, ... then 0, 3, ... (a fixed, odd order)."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter([i for r in (2, 0, 1) for i in range(r, self.n, 3)])

    def __len__(self):
        return self.n


class Repeats(torch.utils.data.Sampler):
    """RASampler's shape: each index repeated 3 times, split over ranks, set_epoch()."""

    def __init__(self, n, num_replicas=1, rank=0):
        self.n, self.num_replicas, self.rank, self.epoch = n, num_replicas, rank, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        g = torch.Generator().manual_seed(self.epoch)
        idx = [i for i in torch.randperm(self.n, generator=g).tolist() for _ in range(3)]
        return iter(idx[self.rank::self.num_replicas])

    def __len__(self):
        return len(range(self.rank, 3 * self.n, self.num_replicas))


def _labels_and_order(loader):
    ys = []
    for _x, y in loader:
        ys += y.tolist()
    return ys


def _drawn(ds, sampler_factory, **kw):
    """(stoker's labels, torch's labels) over one pass with identically seeded samplers."""
    import stoker
    torch.manual_seed(0)
    ours = stoker.DataLoader(ds, batch_size=4, sampler=sampler_factory(), **kw)
    a = _labels_and_order(ours)
    torch.manual_seed(0)
    b = _labels_and_order(TorchDataLoader(ds, batch_size=4, sampler=sampler_factory()))
    ours.close()
    return a, b


def test_python_samplers_equal_torch(folder):
    ds = ImageFolder(folder, EVAL)
    n = len(ds)
    w = [float(i % 4 + 1) for i in range(n)]
    cases = {
        "weighted": lambda: torch.utils.data.WeightedRandomSampler(
            w, 25, generator=torch.Generator().manual_seed(3)),
        "replacement": lambda: torch.utils.data.RandomSampler(
            ds, replacement=True, num_samples=30, generator=torch.Generator().manual_seed(4)),
        "num_samples": lambda: torch.utils.data.RandomSampler(
            ds, num_samples=7, generator=torch.Generator().manual_seed(5)),
        "custom": lambda: EveryThird(n),
    }
    for name, make in cases.items():
        a, b = _drawn(ds, make)
        assert a == b and len(a) == len(make()), name


def test_indices_are_what_the_sampler_drew(folder):
    import stoker
    ds = ImageFolder(folder, EVAL)
    s = torch.utils.data.WeightedRandomSampler([1.0] * len(ds), 22,
                                               generator=torch.Generator().manual_seed(9))
    loader = stoker.DataLoader(ds, batch_size=5, sampler=s)
    for epoch in range(2):
        state = s.generator.get_state()
        want = list(s)
        s.generator.set_state(state)
        got = []
        for x, y in loader:
            assert x.shape[0] <= 5
            got += y.tolist()
        assert got == [ds.targets[i] for i in want], epoch
        assert len(got) == 22
    # the images too: each equals torch's for the same index (eval: bit-exact)
    ref = TorchDataLoader(ds, batch_size=5, sampler=EveryThird(len(ds)))
    ours = stoker.DataLoader(ds, batch_size=5, sampler=EveryThird(len(ds)))
    for (xa, ya), (xb, yb) in zip(ours, ref):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)
    loader.close()
    ours.close()


def test_batch_sampler(folder):
    import stoker
    ds = ImageFolder(folder, EVAL)
    inner = EveryThird(len(ds))
    for bsamp in (torch.utils.data.BatchSampler(inner, 4, drop_last=False),
                  torch.utils.data.BatchSampler(inner, 4, drop_last=True)):
        ours = stoker.DataLoader(ds, batch_sampler=bsamp)
        ref = TorchDataLoader(ds, batch_sampler=bsamp)
        got = [(x, y) for x, y in ours]
        want = [(x, y) for x, y in ref]
        assert len(got) == len(want) == len(ours) == len(ref)
        for (xa, ya), (xb, yb) in zip(got, want):
            assert torch.equal(xa, xb) and torch.equal(ya, yb)
        ours.close()


def test_repeated_index_gets_its_own_augmentation(folder):
    import stoker
    ds = ImageFolder(folder, TRAIN)
    n = len(ds)
    runs = []
    for workers in (1, 3):
        s = Repeats(n)
        s.set_epoch(2)
        loader = stoker.DataLoader(ds, batch_size=6, sampler=s, num_workers=workers,
                                   generator=torch.Generator().manual_seed(1))
        xs, ys = zip(*[(x, y) for x, y in loader])
        runs.append(torch.cat(xs))
        order = list(s)
        assert torch.cat(ys).tolist() == [ds.targets[i] for i in order]
        loader.close()
    x = runs[0]
    assert torch.equal(runs[0], runs[1])          # the same for any worker count
    # the three copies of an index in a row: three different crops
    for k in range(0, 3 * n, 3):
        assert not torch.equal(x[k], x[k + 1]) or not torch.equal(x[k + 1], x[k + 2]), k


def test_ranks_of_a_repeating_sampler_draw_apart(folder):
    import stoker
    ds = ImageFolder(folder, TRAIN)
    n = len(ds)
    out = []
    for rank in range(2):
        s = Repeats(n, num_replicas=2, rank=rank)
        loader = stoker.DataLoader(ds, batch_size=6, sampler=s,
                                   generator=torch.Generator().manual_seed(1))
        out.append(torch.cat([x for x, _ in loader]))
        loader.close()
    # position 0 of both ranks holds the same index (its first two copies): not the same crop
    assert not torch.equal(out[0][0], out[1][0])
