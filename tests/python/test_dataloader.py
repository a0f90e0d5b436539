# SPDX-License-Identifier: MIT
# stk-test: pixels (compared with an independent implementation: also run in the Release build)
"""stoker.DataLoader against torch.utils.data.DataLoader on the same torchvision ImageFolder.

Eval transforms (Resize + CenterCrop, then ToTensor [+ Normalize] / PILToTensor
[+ ConvertImageDtype + Normalize]) must give torch.equal tensors, labels and batch counts.
Train transforms: shapes, dtypes, each sample once per epoch, and the per-channel mean and
spread of the crops against torchvision's over several epochs. The samplers: SequentialSampler,
generator seeds, DistributedSampler (pad, drop_last) and stoker.ExactDistributedSampler equal
to torch's DataLoader with the same sampler (shuffle off), rank parts covering every sample once,
sampler.set_epoch moving the loader. Attributes, refusals (the message names the argument and
lists what is supported), and pin_memory without a GPU (a warning with the reason).
"""
import warnings

import numpy as np
import pytest

from conftest import make_imagefolder

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
import torchvision.transforms as T  # noqa: E402
from torchvision.datasets import ImageFolder  # noqa: E402
from torch.utils.data import DataLoader as TorchDataLoader  # noqa: E402
from torch.utils.data.distributed import DistributedSampler  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
CONVERSIONS = {
    "totensor_normalize": [T.ToTensor(), T.Normalize(MEAN, STD)],
    "totensor": [T.ToTensor()],
    "piltotensor": [T.PILToTensor()],
    "convert_normalize": [T.PILToTensor(), T.ConvertImageDtype(torch.float32),
                          T.Normalize(MEAN, STD)],
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("dl_folder"))
    make_imagefolder(root, per_class=(13, 11, 12), seed=5)
    return root


def _both(ds, **kw):
    import stoker
    ours = stoker.DataLoader(ds, **kw)
    ref = TorchDataLoader(ds, **kw)
    return ours, ref


def _equal_epochs(a, b):
    a, b = list(a), list(b)
    assert len(a) == len(b)
    for (x, y), (u, v) in zip(a, b):
        assert x.dtype == u.dtype and x.shape == u.shape
        assert torch.equal(x, u), float((x.float() - u.float()).abs().max())
        assert y.dtype == torch.int64 and torch.equal(y, v)


@pytest.mark.parametrize("conv", sorted(CONVERSIONS))
def test_eval_equals_torchvision(folder, conv):
    tf = T.Compose([T.Resize(40), T.CenterCrop((32, 28))] + CONVERSIONS[conv])
    ds = ImageFolder(folder, tf)
    for drop_last in (False, True):
        ours, ref = _both(ds, batch_size=5, drop_last=drop_last)
        assert len(ours) == len(ref)
        _equal_epochs(ours, ref)
        _equal_epochs(ours, ref)       # a second pass (next epoch): eval is the same again
        ours.close()


def test_train_each_sample_once_and_statistics(folder):
    tf = T.Compose([T.RandomResizedCrop(24, scale=(0.3, 1.0)), T.RandomHorizontalFlip(),
                    T.ToTensor(), T.Normalize(MEAN, STD)])
    ds = ImageFolder(folder, tf)
    import stoker
    torch.manual_seed(0)
    ours = stoker.DataLoader(ds, batch_size=8, shuffle=True, num_workers=2)
    ref = TorchDataLoader(ds, batch_size=8, shuffle=True)
    targets = sorted(ds.targets)
    stats = {"stoker": [], "torch": []}
    for name, loader in (("stoker", ours), ("torch", ref)):
        for _ in range(12):
            labels = []
            for x, y in loader:
                assert x.dtype == torch.float32 and x.shape[1:] == (3, 24, 24)
                labels += y.tolist()
                stats[name].append(x.mean(dim=(2, 3)))
            assert sorted(labels) == targets
    a, b = torch.cat(stats["stoker"]), torch.cat(stats["torch"])
    # per-image channel means: same distribution (mean and spread) within sampling error
    print("per-image channel mean: stoker %s torch %s; std %s / %s"
          % (a.mean(0).tolist(), b.mean(0).tolist(), a.std(0).tolist(), b.std(0).tolist()))
    assert torch.allclose(a.mean(0), b.mean(0), atol=0.06)
    assert torch.allclose(a.std(0), b.std(0), rtol=0.15)
    ours.close()


def test_order_seed_generator_and_sequential_sampler(folder):
    import stoker
    tf = T.Compose([T.Resize(20), T.CenterCrop(16), T.PILToTensor()])
    ds = ImageFolder(folder, tf)
    seq = torch.utils.data.SequentialSampler(ds)
    _equal_epochs(stoker.DataLoader(ds, batch_size=7, sampler=seq),
                  TorchDataLoader(ds, batch_size=7, sampler=seq))

    def epoch(seed):
        g = torch.Generator()
        g.manual_seed(seed)
        return torch.cat([x for x, _ in stoker.DataLoader(ds, batch_size=7, shuffle=True,
                                                          generator=g)])
    e1, e2, e3 = epoch(1), epoch(1), epoch(2)
    assert torch.equal(e1, e2) and not torch.equal(e1, e3)
    rs = torch.utils.data.RandomSampler(ds, generator=torch.Generator().manual_seed(1))
    assert torch.equal(torch.cat([x for x, _ in stoker.DataLoader(ds, batch_size=7,
                                                                  sampler=rs)]), e1)


@pytest.mark.parametrize("kind", ["pad", "drop", "exact"])
def test_distributed_samplers_equal_torch(folder, tmp_path, kind):
    import stoker
    tf = T.Compose([T.Resize(20), T.CenterCrop(16), T.PILToTensor()])
    big = ImageFolder(folder, tf)
    small_root = tmp_path / "small"
    make_imagefolder(str(small_root), per_class=(1, 1), seed=3)   # N = 2 < world for most
    datasets = [big, ImageFolder(str(small_root), tf)]
    for ds in datasets:
        n = len(ds)
        for world in (1, 2, 3, 4, 5):
            seen = []
            for rank in range(world):
                if kind == "exact":
                    mk = lambda: stoker.ExactDistributedSampler(ds, num_replicas=world, rank=rank)  # noqa: E731
                else:
                    mk = lambda: DistributedSampler(ds, num_replicas=world, rank=rank,  # noqa: E731
                                                    shuffle=False, drop_last=kind == "drop")
                s_ours, s_ref = mk(), mk()
                ours = stoker.DataLoader(ds, batch_size=3, sampler=s_ours)
                ref = TorchDataLoader(ds, batch_size=3, sampler=s_ref)
                assert len(ours.sampler) == len(s_ref) and len(ours) == len(ref)
                if kind == "exact":
                    assert len(s_ref) == len(range(rank, n, world))
                _equal_epochs(ours, ref)
                seen += list(iter(s_ref))
                ours.close()
            if kind == "exact":
                assert sorted(seen) == list(range(n)), (n, world)   # every sample exactly once


def test_distributed_set_epoch_moves_the_loader(folder):
    import stoker
    tf = T.Compose([T.Resize(20), T.CenterCrop(16), T.PILToTensor()])
    ds = ImageFolder(folder, tf)
    sampler = DistributedSampler(ds, num_replicas=2, rank=1, shuffle=True, seed=4)
    loader = stoker.DataLoader(ds, batch_size=4, sampler=sampler)
    first = torch.cat([x for x, _ in loader])
    assert loader.epoch == 1
    sampler.set_epoch(5)
    e5 = [x for x, _ in loader]
    assert len(e5) == len(loader)
    sampler.set_epoch(0)
    again = torch.cat([x for x, _ in loader])
    assert torch.equal(first, again)                 # epoch 0 again: the same order
    assert not torch.equal(torch.cat(e5), first)     # epoch 5: another permutation
    # the union over both ranks of an epoch: every sample (padded to an even count)
    labels = []
    for r in range(2):
        s = DistributedSampler(ds, num_replicas=2, rank=r, shuffle=True, seed=4)
        s.set_epoch(3)
        labels += [y for _, ys in stoker.DataLoader(ds, batch_size=4, sampler=s) for y in ys.tolist()]
    assert len(labels) == 2 * ((len(ds) + 1) // 2)
    assert set(ds.targets) <= set(labels)
    loader.close()


def test_attributes(folder):
    import stoker
    tf = T.Compose([T.Resize(20), T.CenterCrop(16), T.ToTensor()])
    ds = ImageFolder(folder, tf)
    loader = stoker.DataLoader(ds, batch_size=5, num_workers=3, drop_last=True)
    ref = TorchDataLoader(ds, batch_size=5, num_workers=0, drop_last=True)
    assert loader.dataset is ds
    assert len(loader) == len(ref) and len(loader.sampler) == len(ref.sampler) == len(ds)
    assert (loader.batch_size, loader.num_workers, loader.pin_memory, loader.drop_last) == \
        (5, 3, False, True)
    assert loader.decode_threads == 3
    # stoker.Loader has them too
    with stoker.Loader(folder, 5, train=False, size=16, resize=20, workers=2) as plain:
        assert len(plain.dataset) == len(ds)
        assert plain.dataset.classes == ds.classes and plain.dataset.class_to_idx == ds.class_to_idx
        assert plain.dataset.root == folder
        assert len(plain.sampler) == len(ds) and len(plain) == -(-len(ds) // 5)
        assert plain.num_workers == 2 and plain.pin_memory is False and plain.drop_last is False
    with stoker.Loader(folder, 5, train=False, size=16, resize=20, workers=2, rank=1,
                       world_size=3, dist_mode="exact") as part:
        assert len(part.sampler) == len(range(1, len(ds), 3))
    # the packed copy through stoker.ImageFolder: same attributes, same batches
    packed = str(folder) + "-packed"
    stoker.pack(folder, packed, threads=2)
    pds = stoker.ImageFolder(packed, tf)
    assert len(pds) == len(ds) and pds.classes == ds.classes
    assert pds.class_to_idx == ds.class_to_idx
    _equal_epochs(stoker.DataLoader(pds, batch_size=5), TorchDataLoader(ds, batch_size=5))
    _equal_epochs(TorchDataLoader(pds, batch_size=5), TorchDataLoader(ds, batch_size=5))


def _refused(match, make):
    with pytest.raises(ValueError) as e:
        make()
    text = str(e.value)
    assert match in text, text
    assert "bindings/python/README.md" in text, text        # the list is printed once, there
    assert "stoker.DataLoader supports" not in text, text


def test_refusals(folder):
    """strict=True keeps the refusal of what stoker cannot run in C (without it these run in
    Python or on torch's DataLoader: test_dataloader_pytail.py)."""
    import stoker

    def strict(*args, **kw):
        return stoker.DataLoader(*args, strict=True, **kw)
    good = T.Compose([T.Resize(20), T.CenterCrop(16), T.ToTensor()])
    ds = ImageFolder(folder, good)
    _refused("collate_fn", lambda: strict(ds, collate_fn=lambda b: b))
    _refused("worker_init_fn", lambda: strict(ds, worker_init_fn=print))
    _refused("batch_sampler", lambda: strict(ds, batch_sampler=[[0, 1]]))
    _refused("multiprocessing_context",
             lambda: strict(ds, multiprocessing_context="spawn"))
    _refused("dataset list", lambda: strict([1, 2, 3]))
    _refused("target_transform", lambda: strict(
        ImageFolder(folder, good, target_transform=lambda t: t)))
    _refused("ImageFolder(loader=", lambda: strict(
        ImageFolder(folder, good, loader=lambda p: None)))
    cases = {
        "RandomPerspective": [T.RandomResizedCrop(16), T.RandomPerspective(), T.ToTensor()],
        "RandomHorizontalFlip first": [T.RandomHorizontalFlip(), T.RandomResizedCrop(16),
                                       T.ToTensor()],
        "Resize without a CenterCrop": [T.Resize(20), T.ToTensor()],
        "ConvertImageDtype at position 3": [T.Resize(20), T.CenterCrop(16), T.PILToTensor(),
                                            T.ConvertImageDtype(torch.float64)],
        "Normalize on uint8": [T.Resize(20), T.CenterCrop(16), T.PILToTensor(),
                               T.Normalize(MEAN, STD)],
        "CenterCrop at position 3": [T.Resize(20), T.CenterCrop(16), T.ToTensor(),
                                     T.CenterCrop(8)],
        "transform None": None,
    }
    for what, steps in cases.items():
        tf = T.Compose(steps) if steps is not None else None
        key = {"RandomHorizontalFlip first": "RandomHorizontalFlip first",
               "transform None": "without a transform"}.get(what, what)
        if what == "RandomHorizontalFlip first":
            key = "RandomHorizontalFlip at position 0 of transforms.Compose("
        _refused(key, lambda: strict(ImageFolder(folder, tf)))


def test_pin_memory_says_why_not(folder):
    import stoker
    if stoker.has_cuda() and torch.cuda.is_available():
        pytest.skip("a CUDA device is present: pinning is honoured (see test_loader_cuda)")
    ds = ImageFolder(folder, T.Compose([T.Resize(20), T.CenterCrop(16), T.ToTensor()]))
    loader = stoker.DataLoader(ds, batch_size=5, pin_memory=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        x, _ = next(iter(loader))
    msgs = [str(m.message) for m in w if "pin_memory" in str(m.message)]
    assert msgs and loader.pin_memory_reason and loader.pin_memory_reason in msgs[0], msgs
    assert loader.pinned is False and loader.stats()["pinned_bytes"] == 0
    assert loader.stats()["pin_memory_reason"] == loader.pin_memory_reason
    assert loader.pin_memory is True and not x.is_pinned()
    loader.close()
