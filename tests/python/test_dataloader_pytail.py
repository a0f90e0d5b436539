# SPDX-License-Identifier: MIT
"""stoker.DataLoader takes what torch's DataLoader takes: what C cannot run runs in Python.

Transform steps after the C prefix (Lambda, a custom class, RandomApply), target_transform and a
custom collate_fn run in worker processes with torch's semantics; a dataset stoker cannot read
runs on torch's own DataLoader. Each case: the batches equal torch's DataLoader's on the same
dataset with the same seed (eval prefixes are bit-exact, so random Python steps draw what torch's
workers draw), worker_init_fn runs in each worker process, one warning per loader names the
Python part; strict=True refuses as before. A preset object holding a Compose is read through
and a MixUp/CutMix wrapped in ``mix(*default_collate(batch))`` keeps the in-place C path.
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
from torch.utils.data import default_collate  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
EVAL = [T.Resize(20), T.CenterCrop(16)]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("pytail_folder"))
    make_imagefolder(root, per_class=(13, 11, 12), seed=7)
    return root


def _make(ds, **kw):
    """stoker.DataLoader(ds, **kw) and the warnings its construction gave."""
    import stoker
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        loader = stoker.DataLoader(ds, **kw)
    return loader, [str(x.message) for x in w if "stoker.DataLoader" in str(x.message)]


def _same_as_torch(ds, seed=11, **kw):
    """The loader's epoch equals torch's DataLoader's (same arguments, same torch seed);
    returns the loader's warnings (given once: none while iterating)."""
    loader, warned = _make(ds, **kw)
    with warnings.catch_warnings(record=True) as during:
        warnings.simplefilter("always")
        torch.manual_seed(seed)
        ours = list(loader)
    assert not [w for w in during if "stoker.DataLoader" in str(w.message)]
    torch.manual_seed(seed)
    theirs = list(TorchDataLoader(ds, **kw))
    assert len(ours) == len(theirs) == len(loader)
    for a, b in zip(ours, theirs):
        _equal(a, b)
    return warned


def _equal(a, b):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a, b), float((a.double() - b.double()).abs().max())
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b)
        for x, y in zip(a, b):
            _equal(x, y)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _equal(a[k], b[k])
    else:
        assert a == b


class Invert:
    """A user's transform class on PIL images."""

    def __call__(self, img):
        from PIL import ImageOps
        return ImageOps.invert(img)


def test_lambda_on_the_tensor_after_normalize(folder):
    tf = T.Compose(EVAL + [T.ToTensor(), T.Normalize(MEAN, STD), T.Lambda(lambda x: x * 2 + 1)])
    warned = _same_as_torch(ImageFolder(folder, tf), batch_size=5, num_workers=2)
    assert len(warned) == 1, warned
    assert "Python runs Lambda" in warned[0] and "2 worker processes" in warned[0], warned
    assert "C runs read, decode, Resize, CenterCrop, ToTensor, Normalize" in warned[0], warned


def test_custom_class_gets_the_pil_image(folder):
    tf = T.Compose(EVAL + [Invert(), T.PILToTensor()])
    warned = _same_as_torch(ImageFolder(folder, tf), batch_size=4, num_workers=2)
    assert "Invert, PILToTensor" in warned[0] and "PIL image" in warned[0], warned


def test_random_apply_draws_as_torch_workers_do(folder):
    # the C prefix is deterministic, so the Python steps draw from each worker's torch RNG
    # exactly as they do in torch's workers: the same batches for the same seed
    tf = T.Compose(EVAL + [T.RandomApply([T.ColorJitter(0.5, 0.5, 0.5)], p=0.5),
                           T.RandomHorizontalFlip(), T.ToTensor()])
    warned = _same_as_torch(ImageFolder(folder, tf), batch_size=5, num_workers=2)
    assert "RandomApply" in warned[0], warned
    for nw in (0, 1):
        _same_as_torch(ImageFolder(folder, tf), seed=5, batch_size=3, num_workers=nw)


def test_target_transform(folder):
    tf = T.Compose(EVAL + [T.ToTensor()])
    for nw in (0, 2):
        ds = ImageFolder(folder, tf, target_transform=lambda t: t * 10 + 3)
        warned = _same_as_torch(ds, batch_size=5, num_workers=nw)
        assert "target_transform" in warned[0], warned


def test_custom_collate_fn_called_as_torch_calls_it(folder):
    def collate(batch):
        assert isinstance(batch, list) and all(isinstance(p, tuple) for p in batch)
        x, y = default_collate(batch)
        return {"images": x, "labels": y, "n": len(batch)}
    tf = T.Compose(EVAL + [T.ToTensor(), T.Normalize(MEAN, STD)])
    warned = _same_as_torch(ImageFolder(folder, tf), batch_size=5, num_workers=2,
                            collate_fn=collate)
    assert "collate_fn" in warned[0] and "collate" in warned[0], warned


def test_worker_init_fn_in_each_worker(folder, tmp_path):
    seen = str(tmp_path)

    def init(worker_id):
        info = torch.utils.data.get_worker_info()
        with open(os.path.join(seen, "w%d" % worker_id), "w") as f:
            f.write("%d %d %d" % (os.getpid(), info.num_workers, info.id))
    tf = T.Compose(EVAL + [T.ToTensor(), T.Lambda(lambda x: x + 0)])
    loader, _ = _make(ImageFolder(folder, tf), batch_size=4, num_workers=2, worker_init_fn=init)
    n = sum(1 for _ in loader)
    assert n == len(loader) == 9
    got = sorted(os.listdir(seen))
    assert got == ["w0", "w1"], got
    pids = set()
    for i, name in enumerate(got):
        pid, nw, wid = (int(v) for v in open(os.path.join(seen, name)).read().split())
        assert nw == 2 and wid == i and pid != os.getpid()
        pids.add(pid)
    assert len(pids) == 2


class Folderish(torch.utils.data.Dataset):
    """A user's own Dataset: stoker cannot read it, torch's DataLoader runs it."""

    def __init__(self, root):
        self.inner = ImageFolder(root, T.Compose(EVAL + [T.ToTensor()]))

    def __len__(self):
        return len(self.inner)

    def __getitem__(self, i):
        x, y = self.inner[i]
        return x.flip(-1), y + 1


def test_custom_dataset_runs_on_torch(folder):
    warned = _same_as_torch(Folderish(folder), batch_size=5, num_workers=2)
    assert "torch's own DataLoader" in warned[0] and "its own __getitem__" in warned[0], warned
    # nothing reproducible before the first step: torch's DataLoader too
    tf = T.Compose([T.Lambda(lambda im: im.convert("L").convert("RGB"))] + EVAL + [T.ToTensor()])
    warned = _same_as_torch(ImageFolder(folder, tf), batch_size=5)
    assert "torch's own DataLoader" in warned[0] and "Lambda at position 0" in warned[0], warned


def test_strict_refuses_as_before(folder):
    import stoker
    tf = T.Compose(EVAL + [T.ToTensor(), T.Lambda(lambda x: x)])
    with pytest.raises(ValueError) as e:
        stoker.DataLoader(ImageFolder(folder, tf), batch_size=4, strict=True)
    assert "Lambda at position 3" in str(e.value) and "README" in str(e.value)
    with pytest.raises(ValueError, match="own __getitem__"):
        stoker.DataLoader(Folderish(folder), batch_size=4, strict=True)


class Preset:
    """The shape of torchvision references' ClassificationPresetEval."""

    def __init__(self):
        self.transforms = T.Compose(EVAL + [T.ToTensor(), T.Normalize(MEAN, STD)])

    def __call__(self, img):
        return self.transforms(img)


class PresetThatDoesMore(Preset):
    def __call__(self, img):
        return self.transforms(img.transpose(0))


def test_preset_object_read_through(folder):
    warned = _same_as_torch(ImageFolder(folder, Preset()), batch_size=5)
    assert warned == []                                   # all in C
    import stoker
    with pytest.raises(ValueError) as e:
        stoker.DataLoader(ImageFolder(folder, PresetThatDoesMore()), batch_size=5, strict=True)
    assert "PresetThatDoesMore object holding transforms" in str(e.value)
    warned = _same_as_torch(ImageFolder(folder, PresetThatDoesMore()), batch_size=5)
    assert "PresetThatDoesMore object holding transforms" in warned[0], warned


class RandomMixup(torch.nn.Module):
    """A class with the shape of torchvision references' RandomMixup (v1 path)."""

    def __init__(self, num_classes, p=0.5, alpha=1.0, inplace=False):
        super().__init__()
        self.num_classes, self.p, self.alpha, self.inplace = num_classes, p, alpha, inplace

    def forward(self, batch, target):
        target = torch.nn.functional.one_hot(target, self.num_classes).to(batch.dtype)
        lam = float(torch.distributions.Beta(self.alpha, self.alpha).sample())
        return (batch * lam + batch.roll(1, 0) * (1 - lam),
                target * lam + target.roll(1, 0) * (1 - lam))


def _closure(mix):
    def collate_fn(batch):
        return mix(*default_collate(batch))
    return collate_fn


def _not_quite(mix):
    def collate_fn(batch):
        return mix(*default_collate(batch[::-1]))
    return collate_fn


def test_mix_in_a_closure_keeps_the_c_path(folder):
    import stoker
    from stoker import pytail
    ds = ImageFolder(folder, T.Compose(EVAL + [T.ToTensor()]))
    mixes = [stoker.CutMix(1.0, num_classes=3), RandomMixup(3, p=1.0, alpha=0.2)]
    try:
        from torchvision.transforms import v2
        mixes.append(v2.MixUp(alpha=0.2, num_classes=3))
    except ImportError:
        pass
    for mix in mixes:
        loader, warned = _make(ds, batch_size=6, collate_fn=_closure(mix))
        assert warned == [] and loader._plan.mode == "c", (mix, warned)
        stoker.DataLoader(ds, batch_size=6, collate_fn=_closure(mix), strict=True).close()
        x, y = next(iter(loader))
        assert x.shape == (6, 3, 16, 16) and y.shape == (6, 3) and y.dtype == torch.float32
        assert torch.allclose(y.sum(1), torch.ones(6))
        loader.close()
    assert pytail.collate_mix(_not_quite(mixes[-1])) is None
    assert pytail.collate_mix(RandomMixup(3, p=0.5)) is None      # p < 1: left to Python
    # the same closure after a Python tail: collated and mixed in Python, as torch would
    tf = T.Compose(EVAL + [T.ToTensor(), T.Lambda(lambda x: x + 0)])
    loader, warned = _make(ImageFolder(folder, tf), batch_size=6, collate_fn=_closure(mixes[1]))
    assert loader._plan.mode == "tail" and "Lambda" in warned[0]
    x, y = next(iter(loader))
    assert x.shape == (6, 3, 16, 16) and y.shape == (6, 3)
    loader.close()


def test_v2_sample_type_reaches_the_tail(folder):
    v2 = pytest.importorskip("torchvision.transforms.v2")
    tv_tensors = pytest.importorskip("torchvision.tv_tensors")
    kinds = []

    def record(x):
        kinds.append(type(x).__name__)
        return x
    tf = v2.Compose(EVAL + [v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
                            v2.Lambda(record), v2.Normalize(MEAN, STD)])
    warned = _same_as_torch(ImageFolder(folder, tf), batch_size=5, num_workers=0)
    assert "Lambda, Normalize" in warned[0], warned
    assert tv_tensors is not None and set(kinds) == {"Image"}, set(kinds)


@pytest.mark.parametrize("persistent", [False, True])
def test_leaving_a_for_early_then_the_next_pass(folder, persistent):
    # torch's iterator still holds the library's pass when a `for` is left early: the next
    # `for` ends it and runs a full pass (persistent workers reused), equal to torch's
    tf = T.Compose(EVAL + [T.ToTensor(), T.Lambda(lambda x: x - 1)])
    ds = ImageFolder(folder, tf)
    loader, _ = _make(ds, batch_size=4, num_workers=2, persistent_workers=persistent)
    want = list(TorchDataLoader(ds, batch_size=4))
    for _ in range(2):
        for i, _batch in enumerate(loader):
            if i == 2:
                break
        got = list(loader)
        assert len(got) == len(want)
        for a, b in zip(got, want):
            _equal(a, b)
    loader.close()


def test_unbatched_runs_on_torch(folder):
    ds = ImageFolder(folder, T.Compose(EVAL + [T.ToTensor()]))
    warned = _same_as_torch(ds, batch_size=None)
    assert "batch_size=None" in warned[0], warned
