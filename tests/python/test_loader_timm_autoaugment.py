# SPDX-License-Identifier: MIT
# stk-test: pixels (compared with an independent implementation: also run in the Release build)
"""timm's AutoAugment through the loader: stoker.Loader(augment={"op": "timm_autoaugment", ...})
and stoker.DataLoader over timm's create_transform(..., auto_augment='original-mstd0.5').

- every augmented sample equals the Pillow calls of timm's ops (the sub-policy and draws stoker
  made for that sample, printed by tests/tools/stk-timmaug auto) applied to the same sample
  without augmentation: the policy and hparams reach the C policy;
- 1 and 2 workers give the same batches, and a resume from state_dict mid-epoch the rest;
- spec checks name what is wrong;
- with timm importable: DataLoader over create_transform(16-pixel train pipeline with
  'original-mstd0.5') yields batches of the right shape and dtype, each sample equal to the
  Pillow chain of its draws on the same pipeline without auto_augment.
"""
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import assert_same_for_workers_and_resume
from test_timm_autoaugment import MIXED, ORIGINAL, program
from test_timm_randaugment import pil_apply, pil_arg

TOOLS = Path(os.environ.get("TEST_TOOLS_DIR", ""))
SIZE = 48
BS = 8
SPEC = {"op": "timm_autoaugment", "policy": [[(n, p, float(m)) for n, p, m in sub] for sub in ORIGINAL],
        "magnitude_std": 0.5, "magnitude_max": 10.0, "interpolation": "random", "fill": (124, 116, 104),
        "translate_pct": 0.45}


def _epoch(loader):
    return [(np.array(i.numpy(), copy=True), l.numpy().copy(), x.numpy().copy()) for i, l, x in loader]


def _loader(stoker, path, **kw):
    args = dict(size=SIZE, workers=2, return_index=True, layout="NHWC", seed=5)
    args.update(kw)
    return stoker.Loader(path, BS, **args)


def _drawn(spec, seed, index, img, tmp):
    mstd = spec["magnitude_std"]
    src, dst = tmp / "in.rgb", tmp / "out.rgb"
    src.write_bytes(img.tobytes())
    out = subprocess.run([str(TOOLS / "stk-timmaug"), "auto", program(spec["policy"]),
                          "inf" if mstd == float("inf") else repr(mstd), repr(spec["magnitude_max"]),
                          spec["interpolation"], ",".join(map(str, spec["fill"])), repr(spec["translate_pct"]),
                          str(seed), "0", str(index), str(img.shape[0]), str(img.shape[1]), str(src), str(dst)],
                         check=True, capture_output=True, text=True, timeout=60).stdout
    return [(f[0], int(f[1]), float(f[2]), int(f[3]), int(f[4])) for f in map(str.split, out.splitlines()[1:]) if f]


def _chain(spec, steps, img):
    for name, applied, level, negate, resample in steps:
        if applied:
            arg = pil_arg(name, level, negate, spec["translate_pct"], (img.shape[1], img.shape[0]))
            img = pil_apply(img, name, arg, ("bilinear", "bicubic", "nearest")[resample], spec["fill"])
    return img


@pytest.mark.parametrize("spec", [
    SPEC,
    dict(SPEC, magnitude_std=0.0, interpolation="bilinear", fill=(0, 0, 0)),
    dict(SPEC, policy=MIXED, magnitude_std=float("inf"), interpolation="bicubic", translate_pct=0.3),
    dict(SPEC, policy=MIXED, magnitude_std=3.0, magnitude_max=15.0, interpolation="nearest"),
])
def test_loader_samples_equal_pillow_ops_on_the_crop(stoker_mod, shards, tmp_path, spec):
    if not (TOOLS / "stk-timmaug").is_file():
        pytest.skip("stk-timmaug not built (TEST_TOOLS_DIR unset)")
    path, truth = shards
    with _loader(stoker_mod, path, augment=spec) as a:
        aug = _epoch(a)
    with _loader(stoker_mod, path) as b:
        plain = _epoch(b)
    n = changed = 0
    for (ai, _, aidx), (pi, _, pidx) in zip(aug, plain):
        assert np.array_equal(aidx, pidx)
        for k in range(len(aidx)):
            steps = _drawn(spec, 5, int(aidx[k]), pi[k], tmp_path)
            assert np.array_equal(ai[k], _chain(spec, steps, pi[k])), (int(aidx[k]), steps)
            changed += int(not np.array_equal(ai[k], pi[k]))
            n += 1
    assert n == len(truth) and changed >= n // 3


def test_same_for_any_workers_and_after_resume(stoker_mod, shards):
    path, _ = shards
    assert_same_for_workers_and_resume(lambda workers: _loader(stoker_mod, path, workers=workers, augment=SPEC),
                                       counts=(1, 2))


@pytest.mark.parametrize("bad, match", [
    (dict(SPEC, policy=[]), "1..64 sub-policies"),
    (dict(SPEC, policy=[[("Desaturate", 1.0, 5.0)]]), r"policy\[0\]\[0\]"),
    (dict(SPEC, policy=[[("Rotate", 1.5, 5.0)]]), "prob 0..1"),
    (dict(SPEC, policy=[[("Rotate", 0.5, 5.0)]] * 65), "1..64 sub-policies"),
    (dict(SPEC, interpolation="lanczos"), "interpolation"),
    (dict(SPEC, fill=(1, 2)), "fill"),
    (dict(SPEC, num_layers=2), "unknown timm_autoaugment spec keys"),
])
def test_bad_specs_are_named(stoker_mod, shards, bad, match):
    with pytest.raises(ValueError, match=match):
        _loader(stoker_mod, shards[0], augment=bad)


def test_dataloader_over_timm_create_transform(stoker_mod, imagefolder, tmp_path):
    """DataLoader(ImageFolder(root, create_transform(16, is_training=True,
    auto_augment='original-mstd0.5'))) runs timm's AutoAugment: batches of (4, 3, 16, 16) float32,
    and each sample equals the Pillow chain of its drawn ops applied to the same sample of the
    pipeline without auto_augment (both read back to uint8 from the normalised tensors)."""
    timm_data = pytest.importorskip("timm.data")
    pytest.importorskip("torch")
    if not (TOOLS / "stk-timmaug").is_file():
        pytest.skip("stk-timmaug not built (TEST_TOOLS_DIR unset)")
    from torchvision.datasets import ImageFolder
    from stoker import augment
    root, _ = imagefolder
    size = 16
    tf = timm_data.create_transform(size, is_training=True, auto_augment="original-mstd0.5")
    names = [type(t).__name__ for t in tf.transforms]
    assert names == ["RandomResizedCropAndInterpolation", "RandomHorizontalFlip", "AutoAugment",
                     "MaybeToTensor", "Normalize"], names
    spec = augment.spec_for(tf.transforms[2], 2)
    assert spec["policy"] == SPEC["policy"] and spec["magnitude_std"] == 0.5
    plain = timm_data.create_transform(size, is_training=True, color_jitter=None)
    norm = tf.transforms[4]
    mean, std = (np.array([float(v) for v in vals]) for vals in (norm.mean, norm.std))

    def run(t):  # shuffle=False: stoker's seed 0, samples in dataset order
        out = []
        for x, y in stoker_mod.DataLoader(ImageFolder(root, t), batch_size=4):
            assert x.shape[1:] == (3, size, size) and x.dtype.is_floating_point and y.shape == (x.shape[0],)
            v = (x.numpy().astype(np.float64).transpose(0, 2, 3, 1) * std + mean) * 255.0
            assert np.abs(v - np.rint(v)).max() < 1e-3
            out.extend(np.rint(v).astype(np.uint8))
        return out
    aug, base = run(tf), run(plain)
    assert len(aug) == len(base) == len(ImageFolder(root))
    changed = 0
    for index, (a, p) in enumerate(zip(aug, base)):
        assert np.array_equal(a, _chain(spec, _drawn(spec, 0, index, p, tmp_path), p)), index
        changed += int(not np.array_equal(a, p))
    assert changed >= len(aug) // 4
