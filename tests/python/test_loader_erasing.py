# SPDX-License-Identifier: MIT
# stk-test: pixels (compared with an independent implementation: also run in the Release build)
"""Loader(augment=[..., RandomErasing(...)]): torchvision's RandomErasing on the delivered
(normalised) float sample, host batches.

- each sample differs from the same loader's output without erasing in at most one axis-aligned
  box, filled with the value (a constant per channel, in normalised units) or standard normal
  draws (value='random');
- over 10 epochs: the share of erased samples is p (binomial, 5 se), each box's area / image area
  within scale and its h / w within ratio (up to rounding), boxes strictly smaller than the image;
- 1 and 3 workers give the same tensors; uint8 output takes the value clamped and truncated;
  a misplaced RandomErasing and a bad value are refused (device batches: test_loader_augment.c).
"""
import math

import numpy as np
import pytest

from conftest import loader_epochs, torch_or_skip

SIZE = 40
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def _tv():
    torch_or_skip()
    from torchvision import transforms as T
    return T


def _epochs(stoker, path, n, **kw):
    """(images, record indices) of N epochs"""
    args = dict(size=SIZE, workers=2, dtype="float32", mean=MEAN, std=STD, seed=9)
    args.update(kw)
    return loader_epochs(stoker, path, n, **args)[:2]


def _box(diff):
    """The bounding box of the True values of DIFF (C x H x W), checked to be filled."""
    ys, xs = np.nonzero(diff.any(axis=0))
    if len(ys) == 0:
        return None
    y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
    return y0, y1, x0, x1


@pytest.mark.parametrize("value", [(0.0, 0.0, 0.0), (1.5, -2.0, 0.25), "random"])
def test_erasing_boxes_values_and_rates(stoker_mod, shards, value):
    T = _tv()
    path, labels = shards
    p, scale, ratio = 0.6, (0.05, 0.4), (0.4, 2.5)
    er = T.RandomErasing(p=p, scale=scale, ratio=ratio, value=value if value == "random" else list(value))
    got, gi = _epochs(stoker_mod, path, 10, augment=[T.TrivialAugmentWide(), er])
    ref, ri = _epochs(stoker_mod, path, 10, augment=[T.TrivialAugmentWide()])
    assert np.array_equal(gi, ri)
    n = len(gi)
    erased = 0
    for k in range(n):
        diff = got[k] != ref[k]
        b = _box(diff)
        if b is None:
            continue
        y0, y1, x0, x1 = b
        # outside the box: untouched; inside: the value (a pixel may equal it by chance)
        outside = np.ones(diff.shape[1:], bool)
        outside[y0:y1, x0:x1] = False
        assert not diff[:, outside].any()
        inside = got[k][:, y0:y1, x0:x1]
        if value == "random":
            assert abs(float(inside.mean())) < 6 / math.sqrt(inside.size) + 0.05
        else:
            for c in range(3):
                assert np.all(inside[c] == np.float32(value[c])), (k, c)
        bh, bw = y1 - y0, x1 - x0
        assert bh < SIZE and bw < SIZE
        area = bh * bw / SIZE ** 2
        assert scale[0] * 0.7 <= area <= scale[1] * 1.3, (bh, bw)
        assert ratio[0] * 0.6 <= bh / bw <= ratio[1] * 1.6, (bh, bw)
        erased += 1
    se = math.sqrt(p * (1 - p) / n)
    # a box can fail all ten tries (then nothing is erased): the rate is at most p
    assert p - 6 * se <= erased / n <= p + 5 * se, (erased, n)


def test_erasing_same_for_any_workers(stoker_mod, shards):
    T = _tv()
    a = _epochs(stoker_mod, shards[0], 2, workers=1, augment=[T.RandomErasing(0.7, value="random")])
    b = _epochs(stoker_mod, shards[0], 2, workers=3, augment=[T.RandomErasing(0.7, value="random")])
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    u8 = _epochs(stoker_mod, shards[0], 1, workers=2, dtype="uint8", mean=None, std=None,
                 augment=[T.RandomErasing(1.0, value=(300, 7.9, -4))])
    plain = _epochs(stoker_mod, shards[0], 1, workers=2, dtype="uint8", mean=None, std=None)
    d = u8[0] != plain[0]
    assert d.any()
    assert set(np.unique(u8[0][:, 0][d[:, 0]])) <= {255} and set(np.unique(u8[0][:, 1][d[:, 1]])) <= {7}


def test_erasing_refusals(stoker_mod, shards):
    T = _tv()
    from stoker import augment
    with pytest.raises(ValueError, match="must come last"):
        augment.params([T.RandomErasing(), T.TrivialAugmentWide()])
    with pytest.raises(ValueError, match="value"):
        augment.spec_for(T.RandomErasing(value="mean"), 3)


@pytest.mark.parametrize("kw", [dict(scale=(0, 0)), dict(ratio=(1e6, 1e6)), dict(scale=(0.0, 0.0), ratio=(0.5, 0.5))])
def test_erasing_settings_torchvision_accepts_that_erase_nothing(stoker_mod, shards, kw):
    """RandomErasing(scale=(0, 0)) erases boxes of 0 x 0 pixels and ratio=(1e6, 1e6) a box taller
    than the image, which every try refuses: torchvision leaves every image as it was, and so
    must the loader (these settings were refused before)."""
    T = _tv()
    import torch
    img = torch.randint(0, 256, (3, SIZE, SIZE), dtype=torch.uint8).float()
    assert torch.equal(T.RandomErasing(1.0, **kw)(img), img)    # torchvision's own verdict
    got = _epochs(stoker_mod, shards[0], 1, augment=[T.RandomErasing(1.0, **kw)])
    plain = _epochs(stoker_mod, shards[0], 1)
    assert np.array_equal(got[1], plain[1]) and np.array_equal(got[0], plain[0])


def test_erasing_refuses_only_what_torchvision_raises_on(stoker_mod, shards):
    """Unordered ranges only warn in torchvision's constructor but raise in its uniform_ on every
    image, as does ratio 0 (log 0): refused, naming torchvision's own failure. timm's
    random.uniform takes its bounds in either order: accepted, the same boxes as ordered."""
    T = _tv()
    from stoker import augment
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kw in (dict(scale=(0.3, 0.1)), dict(ratio=(3.0, 0.3)), dict(ratio=(0.0, 1.0))):
            with pytest.raises(augment.Unsupported, match="raises? RuntimeError"):
                augment.spec_for(T.RandomErasing(**kw), 2)
    try:
        from timm.data.random_erasing import RandomErasing as TimmErasing
    except ImportError:
        return
    swapped = augment.spec_for(TimmErasing(1.0, min_area=0.4, max_area=0.1, min_aspect=3.0, max_aspect=0.5,
                                           device="cpu"), 0)
    ordered = augment.spec_for(TimmErasing(1.0, min_area=0.1, max_area=0.4, min_aspect=0.5, max_aspect=3.0,
                                           device="cpu"), 0)
    assert swapped["scale"] == ordered["scale"] and np.allclose(swapped["ratio"], ordered["ratio"])
    big = augment.spec_for(TimmErasing(1.0, min_area=0.5, max_area=1.5, device="cpu"), 0)  # timm: no bound
    a = _epochs(stoker_mod, shards[0], 1, augment=[big])
    assert a[0].shape[0] > 0
