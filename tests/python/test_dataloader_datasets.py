# SPDX-License-Identifier: MIT
"""stoker.DataLoader's datasets and arguments beyond a plain ImageFolder: a Subset (exactly its
indices, in its order, each epoch a permutation of them with shuffle, the labels of the
dataset below), a Subset of a Subset, an ImageFolder subclass that overrides no loading
(accepted, equal to torch) or one that does (refused naming the override),
ImageFolder(loader=torchvision.io.read_image) refused naming it, stoker.Loader(indices=)
range errors, and torch's DataLoader keywords (in_order and every other one in torch's
signature) never raising a bare TypeError.
"""
import inspect

import pytest

from conftest import make_imagefolder

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
import torchvision.transforms as T  # noqa: E402
from torchvision.datasets import ImageFolder  # noqa: E402
from torch.utils.data import DataLoader as TorchDataLoader, Subset  # noqa: E402

EVAL = T.Compose([T.Resize(20), T.CenterCrop(16), T.PILToTensor()])


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("ds_folder"))
    make_imagefolder(root, per_class=(6, 5, 5), seed=13)
    return root


def _cat(loader):
    xs, ys = zip(*[(x.clone(), y.clone()) for x, y in loader])
    return torch.cat(xs), torch.cat(ys)


def _reference(ds):
    """(images, labels) of every sample of DS by dataset index: torch's DataLoader under
    Debian's Pillow, which stoker reproduces bit for bit (test_dataloader.py); under another
    Pillow (a venv with torch 2), which resamples some images one level apart, stoker's own
    unshuffled epoch of the whole dataset, with the labels checked against torch's."""
    import PIL
    ref = _cat(TorchDataLoader(ds, batch_size=5))
    if PIL.__file__.startswith("/usr/lib/python3/"):
        return ref
    import stoker
    got = _cat(stoker.DataLoader(ds, batch_size=5))
    assert torch.equal(got[1], ref[1])
    return got


def test_subset_in_order_equals_torch(folder):
    import stoker
    ds = ImageFolder(folder, EVAL)
    idx = [9, 0, 15, 3, 3, 12, -1]                  # any order, a repeat, a negative index
    sub = Subset(ds, idx)
    x, y = _cat(stoker.DataLoader(sub, batch_size=3))
    images, labels = _reference(ds)
    assert len(stoker.DataLoader(sub, batch_size=3)) == 3
    assert torch.equal(y, labels[idx]) and torch.equal(x, images[idx])
    assert y.tolist() == [ds.targets[i] for i in idx]
    assert torch.equal(y, _cat(TorchDataLoader(sub, batch_size=3))[1])


def test_subset_shuffled_is_a_permutation_of_it(folder):
    import stoker
    ds = ImageFolder(folder, EVAL)
    idx = torch.randperm(len(ds), generator=torch.Generator().manual_seed(3))[:7].tolist()
    sub = Subset(ds, idx)
    images, labels = _reference(ds)
    want = {bytes(images[i].numpy().tobytes()): int(labels[i]) for i in idx}
    loader = stoker.DataLoader(sub, batch_size=2, shuffle=True,
                               generator=torch.Generator().manual_seed(5))
    orders = []
    for _ in range(3):
        x, y = _cat(loader)
        got = [bytes(img.numpy().tobytes()) for img in x]
        assert sorted(got) == sorted(want) and len(got) == len(idx)
        assert [want[g] for g in got] == y.tolist()
        orders.append(got)
    assert len({tuple(o) for o in orders}) > 1       # each epoch its own permutation


def test_subset_of_subset(folder):
    import stoker
    ds = ImageFolder(folder, EVAL)
    sub = Subset(Subset(ds, [14, 2, 7, 11, 5]), [4, 0, 2])     # -> 5, 14, 7
    x, y = _cat(stoker.DataLoader(sub, batch_size=2))
    images, labels = _reference(ds)
    assert torch.equal(x, images[[5, 14, 7]]) and torch.equal(y, labels[[5, 14, 7]])


def test_loader_indices_range(folder):
    import stoker
    with pytest.raises(stoker.StokerError, match="entry 1 is record 16"):
        stoker.Loader(folder, 2, train=False, size=16, resize=20, indices=[0, 16])
    with stoker.Loader(folder, 2, train=False, size=16, resize=20, indices=[4, 4, 1]) as ld:
        assert len(ld) == 2 and len(ld.sampler) == 3


class Plain(ImageFolder):
    """A subclass that only adds an attribute: it loads as ImageFolder does."""

    def __init__(self, root, transform):
        super().__init__(root, transform)
        self.note = "mine"


class Cropping(ImageFolder):
    def __getitem__(self, i):
        img, label = super().__getitem__(i)
        return img[:, :8], label


class Relabel(ImageFolder):
    def find_classes(self, directory):
        classes, mapping = super().find_classes(directory)
        return classes, {c: len(classes) - 1 - i for c, i in mapping.items()}


def test_imagefolder_subclass(folder):
    import stoker
    ds = Plain(folder, EVAL)
    x, y = _cat(stoker.DataLoader(ds, batch_size=4))
    u, v = _reference(ImageFolder(folder, EVAL))
    assert torch.equal(x, u) and torch.equal(y, v)
    assert torch.equal(y, _cat(TorchDataLoader(ds, batch_size=4))[1])
    for cls, name in ((Cropping, "__getitem__"), (Relabel, "find_classes")):
        with pytest.raises(ValueError) as e:
            stoker.DataLoader(cls(folder, EVAL), batch_size=4, strict=True)
        assert "%s.%s" % (cls.__module__, cls.__qualname__) in str(e.value)
        assert "overrides %s" % name in str(e.value)
        # without strict, torch's own DataLoader runs it: its batches, and a warning naming why
        with pytest.warns(UserWarning, match="torch's own DataLoader.*overrides %s" % name):
            ours = stoker.DataLoader(cls(folder, EVAL), batch_size=4)
        for (x, y), (u, v) in zip(ours, TorchDataLoader(cls(folder, EVAL), batch_size=4)):
            assert torch.equal(x, u) and torch.equal(y, v)


def test_tensor_loader_refused(folder):
    import stoker
    io = pytest.importorskip("torchvision.io")
    ds = ImageFolder(folder, T.Compose([T.Resize(20), T.CenterCrop(16)]), loader=io.read_image)
    with pytest.raises(ValueError) as e:
        stoker.DataLoader(ds, batch_size=4, strict=True)
    assert "ImageFolder(loader=torchvision.io" in str(e.value) and "read_image" in str(e.value)
    assert "PIL" in str(e.value)


def test_in_order_and_torch_keywords(folder):
    import stoker
    ds = ImageFolder(folder, EVAL)
    ref = _reference(ds)
    for flag in (True, False):
        loader = stoker.DataLoader(ds, batch_size=4, in_order=flag)
        assert loader.in_order is flag
        got = _cat(loader)
        assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])
    with pytest.raises(ValueError, match="in_order"):
        stoker.DataLoader(ds, batch_size=4, in_order="yes")
    ours = inspect.signature(stoker.DataLoader.__init__).parameters
    theirs = inspect.signature(TorchDataLoader.__init__).parameters
    assert "in_order" in ours
    missing = [p for p in theirs if p not in ours]
    assert not missing, missing
    # each torch keyword, given a valid non-default value, is accepted or refused by ValueError
    values = {"shuffle": True, "num_workers": 2, "pin_memory": False, "drop_last": True,
              "timeout": 5, "prefetch_factor": 3, "persistent_workers": True,
              "pin_memory_device": "cuda", "in_order": False, "generator": torch.Generator(),
              "worker_init_fn": print, "multiprocessing_context": "spawn",
              "collate_fn": lambda b: b, "batch_sampler": [[0, 1]], "sampler": [0, 1]}
    for name, value in values.items():
        if name not in theirs:
            continue
        try:
            stoker.DataLoader(ds, **{name: value}).close()
        except ValueError:
            pass


def test_subset_of_a_packed_copy(folder, tmp_path):
    import stoker
    packed = str(tmp_path / "packed")
    stoker.pack(folder, packed, threads=1)
    pds = stoker.ImageFolder(packed, EVAL)
    images, labels = _cat(stoker.DataLoader(pds, batch_size=5))
    idx = [3, -2, 10, 0]
    x, y = _cat(stoker.DataLoader(Subset(pds, idx), batch_size=3))
    want = [i % len(pds) for i in idx]
    assert torch.equal(x, images[want]) and torch.equal(y, labels[want])
    with pytest.raises(ValueError, match="outside its dataset's 16 samples"):
        stoker.DataLoader(Subset(pds, [0, 16]), batch_size=3)
