# SPDX-License-Identifier: MIT
# stk-test: pixels (compared with an independent implementation: also run in the Release build)
"""timm's RandAugment through the loader: stoker.Loader(augment={"op": "timm_randaugment", ...})
and stoker.DataLoader over timm's create_transform(..., auto_augment='rand-...').

- every augmented sample equals the Pillow calls of timm's ops (the layers stoker drew for that
  sample, printed by tests/tools/stk-timmaug policy) applied to the same sample without
  augmentation: the spec reaches the C policy with all its parameters;
- 1 and 3 workers give the same batches, and a resume from state_dict mid-epoch the rest;
- spec checks name what is wrong;
- with timm importable: DataLoader over create_transform(224-style train pipeline with
  'rand-m9-mstd0.5-inc1', interpolation='bilinear') runs and equals the same pipeline given as a
  spec to the Loader underneath.
"""
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import assert_same_for_workers_and_resume
from test_timm_randaugment import pil_apply, pil_arg

TOOLS = Path(os.environ.get("TEST_TOOLS_DIR", ""))
SIZE = 48
BS = 8
SPEC = {"op": "timm_randaugment", "num_layers": 2, "magnitude": 9.0, "magnitude_std": 0.5,
        "magnitude_max": 10.0, "prob": 0.5, "increasing": True, "weighted": False,
        "interpolation": "random", "fill": (124, 116, 104), "translate_pct": 0.45}


def _epoch(loader):
    return [(np.array(i.numpy(), copy=True), l.numpy().copy(), x.numpy().copy()) for i, l, x in loader]


def _loader(stoker, path, **kw):
    args = dict(size=SIZE, workers=2, return_index=True, layout="NHWC", seed=5)
    args.update(kw)
    return stoker.Loader(path, BS, **args)


def _drawn(spec, seed, index, img, tmp):
    mstd = spec["magnitude_std"]
    args = ["2" if spec.get("weighted") else str(int(spec["increasing"])), str(spec["num_layers"]), repr(spec["magnitude"]),
            "inf" if mstd == float("inf") else repr(mstd), repr(spec["magnitude_max"]), repr(spec["prob"]),
            spec["interpolation"], ",".join(map(str, spec["fill"])), repr(spec["translate_pct"])]
    src, dst = tmp / "in.rgb", tmp / "out.rgb"
    src.write_bytes(img.tobytes())
    out = subprocess.run([str(TOOLS / "stk-timmaug"), "policy", *args, str(seed), "0", str(index),
                          str(img.shape[0]), str(img.shape[1]), str(src), str(dst)],
                         check=True, capture_output=True, text=True, timeout=60).stdout
    return [(f[0], int(f[1]), float(f[2]), int(f[3]), int(f[4])) for f in map(str.split, out.splitlines()) if f]


@pytest.mark.parametrize("spec", [
    SPEC,
    dict(SPEC, increasing=False, magnitude=7.0, magnitude_std=0.0, num_layers=3, interpolation="bilinear"),
    dict(SPEC, magnitude_std=float("inf"), prob=0.9, interpolation="bicubic", fill=(0, 0, 0)),
    dict(SPEC, magnitude_max=15.0, magnitude_std=3.0, translate_pct=0.3),
    dict(SPEC, interpolation="nearest", prob=0.8),
    dict(SPEC, weighted=True, num_layers=3),
    dict(SPEC, num_layers=50, magnitude=30.0),    # rand-m30-n50 (refused before: at most 16 layers)
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
            want = pi[k]
            for name, applied, level, negate, resample in steps:
                if applied:
                    arg = pil_arg(name, level, negate, spec["translate_pct"], (SIZE, SIZE))
                    want = pil_apply(want, name, arg, ("bilinear", "bicubic", "nearest")[resample], spec["fill"])
            assert np.array_equal(ai[k], want), (int(aidx[k]), steps)
            changed += int(not np.array_equal(ai[k], pi[k]))
            n += 1
    assert n == len(truth) and changed >= n // 3


def test_same_for_any_workers_and_after_resume(stoker_mod, shards):
    path, _ = shards
    assert_same_for_workers_and_resume(lambda workers: _loader(stoker_mod, path, workers=workers, augment=SPEC),
                                       counts=(1, 3))


@pytest.mark.parametrize("bad, match", [
    (dict(SPEC, num_layers=65536), "num_layers 0..65535"),
    (dict(SPEC, num_layers=16, weighted=True), "without replacement"),
    (dict(SPEC, interpolation="lanczos"), "interpolation"),
    (dict(SPEC, prob=1.5), "prob 0..1"),
    (dict(SPEC, fill=(1, 2)), "fill"),
    (dict(SPEC, magnitude_std=-1.0), "magnitude_std"),
    (dict(SPEC, weights=[1]), "unknown timm_randaugment spec keys"),
])
def test_bad_specs_are_named(stoker_mod, shards, bad, match):
    with pytest.raises(ValueError, match=match):
        _loader(stoker_mod, shards[0], augment=bad)


def test_dataloader_over_timm_create_transform(stoker_mod, imagefolder, tmp_path):
    """DataLoader(ImageFolder(root, create_transform(SIZE, is_training=True,
    auto_augment='rand-m9-mstd0.5-inc1', interpolation='bilinear'))) runs timm's RandAugment:
    each sample equals the Pillow chain of its drawn layers applied to the same sample of the
    pipeline without auto_augment (both read back to uint8 from the normalised tensors)."""
    timm_data = pytest.importorskip("timm.data")
    pytest.importorskip("torch")
    if not (TOOLS / "stk-timmaug").is_file():
        pytest.skip("stk-timmaug not built (TEST_TOOLS_DIR unset)")
    from torchvision.datasets import ImageFolder
    from stoker import augment
    root, _ = imagefolder
    tf = timm_data.create_transform(SIZE, is_training=True, auto_augment="rand-m9-mstd0.5-inc1",
                                    interpolation="bilinear")
    names = [type(t).__name__ for t in tf.transforms]
    assert names == ["RandomResizedCropAndInterpolation", "RandomHorizontalFlip", "RandAugment",
                     "MaybeToTensor", "Normalize"], names
    spec = augment.spec_for(tf.transforms[2], 2)
    assert spec == dict(SPEC, interpolation="bilinear")
    plain = timm_data.create_transform(SIZE, is_training=True, color_jitter=None, interpolation="bilinear")
    norm = tf.transforms[4]
    mean, std = (np.array([float(v) for v in vals]) for vals in (norm.mean, norm.std))

    def run(t):  # shuffle=False: stoker's seed 0, samples in dataset order
        out = []
        for x, _ in stoker_mod.DataLoader(ImageFolder(root, t), batch_size=BS):
            v = (x.numpy().astype(np.float64).transpose(0, 2, 3, 1) * std + mean) * 255.0
            assert np.abs(v - np.rint(v)).max() < 1e-3
            out.extend(np.rint(v).astype(np.uint8))
        return out
    aug, base = run(tf), run(plain)
    assert len(aug) == len(base) == len(ImageFolder(root))
    changed = 0
    for index, (a, p) in enumerate(zip(aug, base)):
        want = p
        for name, applied, level, negate, resample in _drawn(spec, 0, index, p, tmp_path):
            if applied:
                arg = pil_arg(name, level, negate, spec["translate_pct"], (SIZE, SIZE))
                want = pil_apply(want, name, arg, ("bilinear", "bicubic", "nearest")[resample], spec["fill"])
        assert np.array_equal(a, want), index
        changed += int(not np.array_equal(a, p))
    assert changed >= len(aug) // 3
