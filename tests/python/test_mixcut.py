# SPDX-License-Identifier: MIT
# stk-test: pixels (compared with an independent implementation: also run in the Release build)
"""Batch-level MixUp / CutMix (stoker.mix) on stoker's batches.

Each mixed batch is checked against the un-mixed batch of the same (seed, epoch) from a loader
without mix: MixUp's pixels are exactly lam * x + (1 - lam) * x.roll(1, 0) (torchvision v2's
order of operations), CutMix's are x outside one box and x.roll(1, 0) inside it, the box's
area giving lam; the soft targets' rows hold mass lam on the sample's class and 1 - lam on
its partner's, summing to 1. lam and the box come from stoker.mix.generator(seed, epoch, rank,
first sample): the same run twice, and a run resumed mid-epoch, mix identically. timm's Mixup
(when timm is importable) is compared with timm itself, fed the same draws.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

import stoker  # noqa: E402
from stoker import mix as smix  # noqa: E402

from conftest import CLASSES  # noqa: E402

BS, SIZE, SEED = 6, 48, 11


@pytest.fixture(scope="module")
def root(imagefolder):
    return imagefolder[0]


def _batches(root, mix=None, epoch=0, dtype=torch.float32, layout="NCHW", **kw):
    with stoker.Loader(root, BS, size=SIZE, seed=SEED, epoch=epoch, workers=2, dtype=dtype,
                       layout=layout, mix=mix, copy=True, **kw) as ld:
        return [(x.clone(), y.clone()) for x, y in ld]


def _draws(mix, epoch, b, h=SIZE, w=SIZE):
    return mix.draw(smix.generator(SEED, epoch, 0, b * BS), h, w)


def _check_targets(t, y, lam, partner):
    assert t.dtype == torch.float32 and t.shape == (len(y), len(CLASSES))
    assert torch.allclose(t.sum(1), torch.ones(len(y)), atol=1e-6), t.sum(1)
    assert (t >= 0).all() and (t <= 1).all()
    for i in range(len(y)):
        j = partner(i, len(y))
        exp = torch.zeros(len(CLASSES))
        exp[y[i]] += lam
        exp[y[j]] += 1 - lam
        assert torch.allclose(t[i], exp, atol=1e-6), (i, t[i], exp)


def _roll_partner(i, n):
    return (i - 1) % n


def test_mixup_pixels_and_targets(root):
    mix = stoker.MixUp(alpha=0.8)
    plain = _batches(root)
    mixed = _batches(root, mix)
    assert len(plain) == len(mixed) > 2
    lams = []
    for b, ((x, y), (xm, t)) in enumerate(zip(plain, mixed)):
        lam = _draws(mix, 0, b)["lam"]
        lams.append(lam)
        expected = x.roll(1, 0).mul_(1.0 - lam).add_(x.mul(lam))
        assert torch.equal(xm, expected), b
        _check_targets(t, y, lam, _roll_partner)
    assert len(set(lams)) == len(lams) and all(0 < v < 1 for v in lams)


@pytest.mark.parametrize("layout,dtype", [("NCHW", torch.float32), ("NHWC", torch.uint8)])
def test_cutmix_paste_and_targets(root, layout, dtype):
    mix = stoker.CutMix(alpha=1.0)
    plain = _batches(root, dtype=dtype, layout=layout)
    mixed = _batches(root, mix, dtype=dtype, layout=layout)
    boxes = 0
    for b, ((x, y), (xm, t)) in enumerate(zip(plain, mixed)):
        p = _draws(mix, 0, b)
        x1, y1, x2, y2 = p["box"]
        hw = (slice(y1, y2), slice(x1, x2))
        idx = (slice(None),) + (hw if layout == "NHWC" else (slice(None),) + hw)
        expected = x.clone()
        expected[idx] = x.roll(1, 0)[idx]
        assert torch.equal(xm, expected), b
        # the changed pixels lie in that box, whose area is 1 - lam
        changed = (xm != x).reshape(len(x), -1).any(0)
        assert changed.any() == (x1 < x2 and y1 < y2 and not torch.equal(x, x.roll(1, 0)))
        boxes += x1 < x2 and y1 < y2
        assert p["lam"] == pytest.approx(1 - (x2 - x1) * (y2 - y1) / SIZE ** 2, abs=1e-12)
        _check_targets(t, y, p["lam"], _roll_partner)
    assert boxes > 0


def test_random_choice_uses_both(root):
    mix = stoker.RandomChoice([stoker.MixUp(1.0), stoker.CutMix(1.0)], p=[0.5, 0.5])
    plain = _batches(root)
    mixed = _batches(root, mix)
    kinds = set()
    for b, ((x, y), (xm, t)) in enumerate(zip(plain, mixed)):
        p = _draws(mix, 0, b)
        kinds.add(p["which"])
        lam = p["inner"]["lam"]
        _check_targets(t, y, lam, _roll_partner)
    assert kinds == {0, 1}, kinds


def test_reproducible_and_resumes(root):
    mix = stoker.RandomChoice([stoker.MixUp(0.5), stoker.CutMix(1.0)])
    a = _batches(root, mix, epoch=3)
    b = _batches(root, mix, epoch=3)
    assert all(torch.equal(x1, x2) and torch.equal(t1, t2) for (x1, t1), (x2, t2) in zip(a, b))
    other = _batches(root, mix, epoch=4)
    assert not all(torch.equal(t1, t2) for (_, t1), (_, t2) in zip(a, other))
    # resume after two batches: the rest mixes as the uninterrupted epoch did
    with stoker.Loader(root, BS, size=SIZE, seed=SEED, epoch=3, workers=1,
                       dtype=torch.float32, mix=mix, copy=True) as ld:
        it = iter(ld)
        next(it), next(it)
        state = ld.state_dict()
    with stoker.Loader(root, BS, size=SIZE, seed=SEED, workers=3, dtype=torch.float32,
                       mix=mix, copy=True) as ld:
        ld.load_state_dict(state)
        rest = [(x.clone(), t.clone()) for x, t in ld]
    assert len(rest) == len(a) - 2
    for (x1, t1), (x2, t2) in zip(a[2:], rest):
        assert torch.equal(x1, x2) and torch.equal(t1, t2)


def test_mixup_refuses_uint8(root):
    with pytest.raises(ValueError, match="MixUp blends pixels.*float"):
        _batches(root, stoker.MixUp(1.0), dtype=torch.uint8)


def test_refusals():
    with pytest.raises(ValueError, match="not a batch mix"):
        smix.as_mix(lambda b: b)
    with pytest.raises(ValueError, match="alpha"):
        stoker.MixUp(0.0)
    odd = smix.TimmMixup(mixup_alpha=1.0, num_classes=3)
    with pytest.raises(ValueError, match="even batch size"):
        smix.apply(odd, torch.zeros(3, 3, 4, 4), torch.zeros(3, dtype=torch.int64), 3, "NCHW",
                   smix.generator(0, 0, 0, 0))


def _stand_in(module, name, **attrs):
    """An object of a class named NAME in MODULE, as torchvision v2 / timm define them (neither
    is installed with Debian's torch 1.13): recognised by module and class name."""
    cls = type(name, (), {"__module__": module})
    obj = cls()
    obj.__dict__.update(attrs)
    return obj


def test_dataloader_end_to_end(root):
    import torchvision
    import torchvision.transforms as T
    tf = T.Compose([T.RandomResizedCrop(SIZE), T.RandomHorizontalFlip(), T.ToTensor()])
    ds = torchvision.datasets.ImageFolder(root, transform=tf)
    torch.manual_seed(5)
    g = torch.Generator().manual_seed(SEED)
    cutmix = _stand_in("torchvision.transforms.v2._augment", "CutMix", alpha=1.0, num_classes=3)
    mixup = _stand_in("torchvision.transforms.v2._augment", "MixUp", alpha=0.2, num_classes=3)
    choice = _stand_in("torchvision.transforms.v2._container", "RandomChoice",
                       transforms=[mixup, cutmix], p=None)
    timm = _stand_in("timm.data.mixup", "Mixup", mixup_alpha=0.8, cutmix_alpha=1.0,
                     cutmix_minmax=None, mix_prob=1.0, switch_prob=0.5, mode="batch",
                     correct_lam=True, label_smoothing=0.1, num_classes=3, mixup_enabled=True)
    for kw in ({"collate_fn": stoker.CutMix(1.0)}, {"batch_transform": stoker.MixUp(1.0)},
               {"collate_fn": choice}, {"batch_transform": timm, "drop_last": True}):
        dl = stoker.DataLoader(ds, batch_size=BS, shuffle=True, generator=g, num_workers=2, **kw)
        n = 0
        for x, t in dl:
            assert x.dtype == torch.float32 and x.shape[1:] == (3, SIZE, SIZE)
            assert t.shape == (len(x), 3) and t.dtype == torch.float32
            assert torch.allclose(t.sum(1), torch.ones(len(x)), atol=1e-6)
            if kw.get("batch_transform") is timm:   # label smoothing: every class has mass
                assert (t >= 0.1 / 3 - 1e-6).all(), t
            n += len(x)
        assert n == len(ds)
        dl.close()
    with pytest.raises(ValueError, match="collate_fn=.*MixUp / CutMix"):   # strict: C only
        stoker.DataLoader(ds, batch_size=BS, collate_fn=lambda b: b, strict=True)


@pytest.mark.parametrize("minmax", [None, (0.3, 0.8)])
def test_timm_mixup_matches_timm(root, monkeypatch, minmax):
    """timm.data.Mixup itself, fed stoker's draws, gives the same batch and targets (its
    rand_bbox, or rand_bbox_minmax with cutmix_minmax, as the timm at hand computes them)."""
    mixup = pytest.importorskip("timm.data.mixup")
    ref = mixup.Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, cutmix_minmax=minmax, prob=0.9,
                      switch_prob=0.5, label_smoothing=0.1, num_classes=len(CLASSES))
    mix = smix.as_mix(ref)
    plain = _batches(root, drop_last=True)
    mixed = _batches(root, mix, drop_last=True)

    class Draws:   # np.random as timm calls it, answered from stoker's generator
        def __init__(self, rng):
            self.rng = rng

        def rand(self):
            return self.rng.random()

        def beta(self, a, b):
            return self.rng.beta(a, b)

        def randint(self, lo, hi=None, size=None):
            return self.rng.integers(lo, hi)

    class NP:
        def __getattr__(self, k):
            return getattr(np, k)

    fake = NP()
    monkeypatch.setattr(mixup, "np", fake)
    kinds = set()
    for b, ((x, y), (xm, t)) in enumerate(zip(plain, mixed)):
        fake.random = Draws(smix.generator(SEED, 0, 0, b * BS))
        xr, tr = ref(x.clone(), y)
        assert torch.equal(xm, xr), b
        assert torch.allclose(t, tr, atol=0, rtol=0), b
        kinds.add(_draws(mix, 0, b)["box"] is not None)
    assert kinds == {True, False}
