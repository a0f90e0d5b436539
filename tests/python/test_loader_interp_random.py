# SPDX-License-Identifier: MIT
"""Loader(interpolation='random'): timm's RandomResizedCropAndInterpolation(interpolation='random'),
random.choice((BILINEAR, BICUBIC)) per image.

- every sample is byte for byte the same loader's sample with interpolation='bilinear' or with
  'bicubic' (same seed: the crop and flip draws do not move), train and eval;
- the share of bicubic samples is 1/2 (binomial, 5 standard errors), over samples where the two
  filters differ;
- 1 and 2 workers, and each epoch read again, give the same choices.
The two filters against torchvision / Pillow: test_resize_interp.py.
"""
import math

import numpy as np
import pytest

from conftest import loader_epochs

SIZE = 24


def _run(stoker, path, interp, epochs=4, **kw):
    args = dict(size=SIZE, workers=2, dtype="uint8", mean=None, std=None, seed=5,
                interpolation=interp)
    args.update(kw)
    return loader_epochs(stoker, path, epochs, **args)


def _which(got, bil, bic):
    """per sample: 0 bilinear, 1 bicubic, -1 the two filters agree; asserts it is one of them"""
    out = []
    for k in range(len(got)):
        a, b = np.array_equal(got[k], bil[k]), np.array_equal(got[k], bic[k])
        assert a or b, k
        out.append(-1 if a and b else int(b))
    return np.array(out)


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_random_is_bilinear_or_bicubic_per_sample(stoker_mod, shards, mode):
    path = shards[0]
    kw = {"train": mode == "train"}
    if mode == "eval":
        kw["resize"] = 28
    got, gi, ge = _run(stoker_mod, path, "random", **kw)
    bil, bi, _ = _run(stoker_mod, path, "bilinear", **kw)
    bic, ci, _ = _run(stoker_mod, path, "bicubic", **kw)
    assert np.array_equal(gi, bi) and np.array_equal(gi, ci)
    w = _which(got, bil, bic)
    told = w[w >= 0]
    assert len(told) >= 100, len(w)
    se = math.sqrt(0.25 / len(told))
    assert abs(told.mean() - 0.5) <= 5 * se, (told.mean(), len(told))
    # the choice changes with the epoch: the same record is not always the same filter
    picks = {}
    for k in np.flatnonzero(w >= 0):
        picks.setdefault(int(gi[k]), set()).add(int(w[k]))
    assert sum(len(v) == 2 for v in picks.values()) >= len(picks) // 4, picks


def test_random_same_for_any_workers(stoker_mod, shards):
    a = _run(stoker_mod, shards[0], "random", epochs=2, workers=1)
    b = _run(stoker_mod, shards[0], "random", epochs=2, workers=2)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))


def test_bad_interpolation_named(stoker_mod, shards):
    with pytest.raises(ValueError) as e:
        stoker_mod.Loader(shards[0], 8, size=SIZE, interpolation="lanczos")
    assert "'random'" in str(e.value) and "lanczos" in str(e.value)
