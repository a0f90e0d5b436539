# SPDX-License-Identifier: MIT
# stk-test: pixels (compared with an independent implementation: also run in the Release build)
"""stoker.Loader(augment=...) and stoker.augment.spec_for.

- spec_for turns torchvision's TrivialAugmentWide / RandAugment / AutoAugment (v1 objects, and v2
  classes recognised by module and class name) into spec dicts, returns None for other steps and
  refuses what stoker does not reproduce (LANCZOS, an AutoAugment policy it does not know, AugMix
  beyond its bounds, fractional fill with BILINEAR or BICUBIC, timm's AugMixAugment and '3a'
  AutoAugment)
  naming the step, its position and what to use instead;
- Loader(augment=TrivialAugmentWide()) gives the same tensors for 1 and 3 workers and after a
  resume from state_dict mid-epoch;
- every augmented sample equals torchvision's _apply_op chain (the ops stoker drew for that
  sample, printed by tests/tools/stk-augops) applied to the same sample without augmentation:
  the Python spec reaches the C policy with its parameters (RandAugment with bilinear and fill,
  AutoAugment).
"""
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from conftest import torch_or_skip
from augops_ref import torchvision_bicubic

TOOLS = Path(os.environ.get("TEST_TOOLS_DIR", ""))
SIZE = 48
BS = 8


def _tv():
    torch_or_skip()
    from torchvision import transforms as T
    return T


def _epoch(loader):
    out = []
    for images, labels, index in loader:
        out.append((np.array(images.numpy(), copy=True), labels.numpy().copy(), index.numpy().copy()))
    return out


def _loader(stoker, path, **kw):
    args = dict(size=SIZE, workers=2, return_index=True, layout="NHWC", seed=5)
    args.update(kw)
    return stoker.Loader(path, BS, **args)


def test_spec_for_torchvision_v1(stoker_mod):
    T = _tv()
    from stoker import augment
    assert augment.spec_for(T.TrivialAugmentWide(), 2) == {
        "op": "trivialaugment", "num_magnitude_bins": 31, "interpolation": "nearest", "fill": None}
    ra = T.RandAugment(num_ops=3, magnitude=5, num_magnitude_bins=21,
                       interpolation=T.InterpolationMode.BILINEAR, fill=[10, 20, 30])
    assert augment.spec_for(ra, 0) == {"op": "randaugment", "num_ops": 3, "magnitude": 5,
                                       "num_magnitude_bins": 21, "interpolation": "bilinear",
                                       "fill": (10, 20, 30)}
    assert augment.spec_for(T.AutoAugment(fill=128), 1) == {
        "op": "autoaugment", "policy": "imagenet", "interpolation": "nearest", "fill": (128, 128, 128)}
    for pol in ("CIFAR10", "SVHN"):
        assert augment.spec_for(T.AutoAugment(getattr(T.AutoAugmentPolicy, pol)), 2) == {
            "op": "autoaugment", "policy": pol.lower(), "interpolation": "nearest", "fill": None}
    with pytest.raises(ValueError, match="transform 4 .*MNIST.*IMAGENET, CIFAR10, SVHN"):
        augment.spec_for(_standin("torchvision.transforms.autoaugment", "AutoAugment", policy="mnist",
                                  interpolation="nearest", fill=None), 4)
    assert augment.spec_for(T.Normalize((0.5,), (0.5,)), 3) is None
    assert augment.spec_for(T.RandomHorizontalFlip(), 1) is None


@pytest.mark.parametrize("make,match", [
    (lambda T: T.TrivialAugmentWide(interpolation=T.InterpolationMode.LANCZOS), "transform 4 .*LANCZOS.*BICUBIC"),
    (lambda T: T.TrivialAugmentWide(interpolation=T.InterpolationMode.BICUBIC, fill=[0.5, 1, 2]),
     "transform 4 .*fractional fill.*BICUBIC"),
    (lambda T: T.AugMix(mixture_width=9), "transform 4 .*mixture_width 1..8"),
    (lambda T: T.RandAugment(interpolation=T.InterpolationMode.BILINEAR, fill=[0.5, 1, 2]),
     "transform 4 .*fractional fill"),
    (lambda T: T.RandAugment(magnitude=31), "magnitude"),
])
def test_spec_for_refuses_what_it_does_not_reproduce(stoker_mod, make, match):
    T = _tv()
    from stoker import augment
    with pytest.raises(ValueError, match=match):
        augment.spec_for(make(T), 4)


def _standin(module, name, **attrs):
    cls = type(name, (), {})
    cls.__module__ = module
    obj = cls()
    obj.__dict__.update(attrs)
    return obj


def test_spec_for_torchvision_v2_by_module_and_class_name(stoker_mod):
    """v2 (torchvision >= 0.15) is not in Debian's torchvision 0.14: the real classes when
    importable, else stand-ins with v2's module, class name and attributes."""
    T = _tv()
    from stoker import augment
    try:
        from torchvision.transforms import v2
        ta, ra = v2.TrivialAugmentWide(), v2.RandAugment(num_ops=1, magnitude=4, fill=7)
    except ImportError:
        mod = "torchvision.transforms.v2._auto_augment"
        ta = _standin(mod, "TrivialAugmentWide", num_magnitude_bins=31,
                      interpolation=T.InterpolationMode.NEAREST, fill=None)
        ra = _standin(mod, "RandAugment", num_ops=1, magnitude=4, num_magnitude_bins=31,
                      interpolation=T.InterpolationMode.NEAREST, fill={"Image": 7, "Video": 7})
    assert augment.spec_for(ta, 0)["op"] == "trivialaugment"
    s = augment.spec_for(ra, 0)
    assert (s["op"], s["num_ops"], s["magnitude"], s["fill"]) == ("randaugment", 1, 4, (7, 7, 7))


def test_spec_for_timm(stoker_mod):
    """timm's RandAugment gives a timm_randaugment spec ('tweights' too), its AutoAugment a
    timm_autoaugment spec; the RandAugment '3a' set, the '3a' AutoAugment policy and
    AugMixAugment are refused naming them (tests/python/test_loader_timm_randaugment.py and
    test_loader_timm_autoaugment.py run the specs)."""
    from stoker import augment
    try:
        from timm.data import create_transform
    except ImportError:
        pytest.skip("timm is not importable")

    def step(aa, kind):
        tf = create_transform(224, is_training=True, auto_augment=aa, interpolation="bilinear")
        return [t for t in tf.transforms if type(t).__name__ == kind][0]
    assert augment.spec_for(step("rand-m9-mstd0.5-inc1", "RandAugment"), 2) == {
        "op": "timm_randaugment", "num_layers": 2, "magnitude": 9.0, "magnitude_std": 0.5,
        "magnitude_max": 10.0, "prob": 0.5, "increasing": True, "weighted": False,
        "interpolation": "bilinear", "fill": (124, 116, 104), "translate_pct": 0.45}
    spec = augment.spec_for(step("original", "AutoAugment"), 2)
    assert spec["op"] == "timm_autoaugment" and len(spec["policy"]) == 25
    assert spec["policy"][0] == [("PosterizeOriginal", 0.4, 8.0), ("Rotate", 0.6, 9.0)]
    with pytest.raises(ValueError, match="transform 2 .*timm's AutoAugment sub-policy 1 op 0 is 'Desaturate'"):
        augment.spec_for(step("3a", "AutoAugment"), 2)
    with pytest.raises(ValueError, match="transform 2 .*timm's AugMixAugment"):
        augment.spec_for(step("augmix-m5-w4-d2", "AugMixAugment"), 2)
    assert augment.spec_for(step("rand-m9-tweights", "RandAugment"), 1)["weighted"] is True
    with pytest.raises(ValueError, match="transform 1 .*transform list"):
        augment.spec_for(step("rand-m9-t3a", "RandAugment"), 1)


def test_loader_rejects_bad_augment_arguments(stoker_mod, shards):
    with pytest.raises(ValueError, match="one policy"):
        _loader(stoker_mod, shards[0], augment=[{"op": "trivialaugment"}, {"op": "autoaugment"}])
    with pytest.raises(ValueError, match="not an augmentation"):
        _loader(stoker_mod, shards[0], augment=[object()])
    with pytest.raises(ValueError, match="magnitude"):
        _loader(stoker_mod, shards[0], augment={"op": "randaugment", "magnitude": 40})


def test_trivialaugment_same_for_any_workers_and_after_resume(stoker_mod, shards):
    T = _tv()
    path, _ = shards
    with _loader(stoker_mod, path, workers=1, augment=T.TrivialAugmentWide()) as a:
        one = _epoch(a)
    with _loader(stoker_mod, path, workers=3, augment=T.TrivialAugmentWide()) as b:
        three = _epoch(b)
    with _loader(stoker_mod, path, workers=1) as c:
        plain = _epoch(c)
    for x, y in zip(one, three):
        assert all(np.array_equal(u, v) for u, v in zip(x, y))
    changed = sum(int((x[0] != y[0]).any(axis=(1, 2, 3)).sum()) for x, y in zip(one, plain))
    assert changed >= len(shards[1]) // 2
    with _loader(stoker_mod, path, workers=2, augment=T.TrivialAugmentWide()) as d:
        for k, _ in enumerate(d):
            if k == 1:
                state = d.state_dict()
                break
    with _loader(stoker_mod, path, workers=2, augment=T.TrivialAugmentWide()) as e:
        e.load_state_dict(state)
        rest = _epoch(e)
    for x, y in zip(one[2:], rest):
        assert all(np.array_equal(u, v) for u, v in zip(x, y))


def _drawn(policy, args, seed, epoch, index, img, tmp):
    src, dst = tmp / "in.rgb", tmp / "out.rgb"
    src.write_bytes(img.tobytes())
    out = subprocess.run([str(TOOLS / "stk-augops"), "policy", policy, *args, str(seed), str(epoch), str(index),
                          str(img.shape[0]), str(img.shape[1]), str(src), str(dst)],
                         check=True, capture_output=True, text=True, timeout=60).stdout
    return [(l.split()[0], float(l.split()[1])) for l in out.splitlines()]


@pytest.mark.parametrize("which", ["trivial", "rand", "auto", "auto-svhn", "trivial-bicubic", "rand-bicubic"])
def test_loader_samples_equal_torchvision_ops_on_the_crop(stoker_mod, shards, tmp_path, which):
    T = _tv()
    import torch
    from torchvision.transforms.autoaugment import _apply_op
    if not (TOOLS / "stk-augops").is_file():
        pytest.skip("stk-augops not built (TEST_TOOLS_DIR unset)")
    if which == "trivial":
        obj, policy, args, interp, fill = T.TrivialAugmentWide(), "trivialaugment", \
            ["2", "9", "31", "nearest", "none"], T.InterpolationMode.NEAREST, None
    elif which == "rand":
        obj = T.RandAugment(num_ops=3, magnitude=13, num_magnitude_bins=21,
                            interpolation=T.InterpolationMode.BILINEAR, fill=[200, 10, 60])
        policy, args = "randaugment", ["3", "13", "21", "bilinear", "200,10,60"]
        interp, fill = T.InterpolationMode.BILINEAR, [200.0, 10.0, 60.0]
    elif which == "trivial-bicubic":  # what torchvision's train.py passes with --interpolation bicubic
        obj = T.TrivialAugmentWide(interpolation=T.InterpolationMode.BICUBIC)
        policy, args = "trivialaugment", ["2", "9", "31", "bicubic", "none"]
        interp, fill = T.InterpolationMode.BICUBIC, None
    elif which == "rand-bicubic":
        obj = T.RandAugment(num_ops=4, interpolation=T.InterpolationMode.BICUBIC, fill=[124, 116, 104])
        policy, args = "randaugment", ["4", "9", "31", "bicubic", "124,116,104"]
        interp, fill = T.InterpolationMode.BICUBIC, [124.0, 116.0, 104.0]
    elif which == "auto-svhn":
        obj = T.AutoAugment(T.AutoAugmentPolicy.SVHN, interpolation=T.InterpolationMode.BILINEAR, fill=[9, 99, 199])
        policy, args = "autoaugment-svhn", ["2", "9", "31", "bilinear", "9,99,199"]
        interp, fill = T.InterpolationMode.BILINEAR, [9.0, 99.0, 199.0]
    else:
        obj, policy, args, interp, fill = T.AutoAugment(), "autoaugment", \
            ["2", "9", "31", "nearest", "none"], T.InterpolationMode.NEAREST, None
    path, _ = shards
    with _loader(stoker_mod, path, augment=[obj]) as a:
        aug = _epoch(a)
    with _loader(stoker_mod, path) as b:
        plain = _epoch(b)
    n = 0
    for (ai, _, aidx), (pi, _, pidx) in zip(aug, plain):
        assert np.array_equal(aidx, pidx)
        for k in range(len(aidx)):
            steps = _drawn(policy, args, 5, 0, int(aidx[k]), pi[k], tmp_path)
            want = torch.from_numpy(pi[k]).permute(2, 0, 1).contiguous()
            with torchvision_bicubic():
                for name, mag in steps:
                    want = _apply_op(want, name, mag, interpolation=interp, fill=fill)
            assert np.array_equal(ai[k], want.permute(1, 2, 0).numpy()), (int(aidx[k]), steps)
            n += 1
    assert n == len(shards[1])


def test_spec_for_steps(stoker_mod):
    T = _tv()
    from stoker import augment
    assert augment.spec_for(T.ColorJitter(0.4, 0.3, 0.2, 0.1), 1) == {
        "op": "color_jitter", "brightness": (0.6, 1.4), "contrast": (0.7, 1.3), "saturation": (0.8, 1.2),
        "hue": (-0.1, 0.1)}
    assert augment.spec_for(T.ColorJitter(brightness=(0.5, 0.9)), 1)["contrast"] == (1.0, 1.0)
    assert augment.spec_for(T.RandomGrayscale(0.2), 2) == {"op": "grayscale", "p": 0.2}
    assert augment.spec_for(T.RandomVerticalFlip(0.3), 3) == {"op": "vflip", "p": 0.3}
    with pytest.raises(ValueError, match="one policy"):
        augment.params([T.TrivialAugmentWide(), T.ColorJitter(0.1), T.AutoAugment()])


def test_loader_steps_equal_torchvision_with_their_draws(stoker_mod, shards, tmp_path):
    """Loader(augment=[RandomVerticalFlip, ColorJitter, RandomGrayscale]): each sample equals
    torchvision's vflip / adjust_* in the drawn order / rgb_to_grayscale on the plain crop, with the
    draws stoker made for it (printed by stk-augops steps)."""
    T = _tv()
    import torch
    from torchvision.transforms import functional as F
    if not (TOOLS / "stk-augops").is_file():
        pytest.skip("stk-augops not built (TEST_TOOLS_DIR unset)")
    steps = [T.RandomVerticalFlip(), T.ColorJitter(0.4, 0.4, 0.4, 0.1), T.RandomGrayscale(0.3)]
    prog = "1,0.5,3,0.6,1.4,0.6,1.4,0.6,1.4,-0.1,0.1,2,0.3"
    path, _ = shards
    with _loader(stoker_mod, path, augment=steps, workers=3) as a:
        aug = _epoch(a)
    with _loader(stoker_mod, path) as b:
        plain = _epoch(b)
    fns = [F.adjust_brightness, F.adjust_contrast, F.adjust_saturation, F.adjust_hue]
    flips = grays = 0
    for (ai, _, aidx), (pi, _, pidx) in zip(aug, plain):
        for k in range(len(aidx)):
            src, dst = tmp_path / "in.rgb", tmp_path / "out.rgb"
            src.write_bytes(pi[k].tobytes())
            out = subprocess.run([str(TOOLS / "stk-augops"), "steps", prog, "5", "0", str(int(aidx[k])),
                                  str(SIZE), str(SIZE), str(src), str(dst)], check=True, capture_output=True,
                                 text=True, timeout=60).stdout
            t = torch.from_numpy(pi[k]).permute(2, 0, 1).contiguous()
            for line in out.splitlines():
                f = line.split()
                if f == ["vflip", "1"]:
                    t, flips = F.vflip(t), flips + 1
                elif f == ["grayscale", "1"]:
                    t, grays = F.rgb_to_grayscale(t, num_output_channels=3), grays + 1
                elif f[0] == "jitter":
                    fac = [float(x) for x in f[2:]]
                    for j in f[1]:
                        if not np.isnan(fac[int(j)]):
                            t = fns[int(j)](t, fac[int(j)])
            assert np.array_equal(ai[k], t.permute(1, 2, 0).numpy()), (int(aidx[k]), out)
    assert flips > 0 and grays > 0


def test_loader_gaussian_blur_equals_torchvision_v1(stoker_mod, shards, tmp_path):
    T = _tv()
    import torch
    from torchvision.transforms import functional as F
    from stoker import augment
    assert augment.spec_for(T.GaussianBlur((5, 3), (0.2, 1.5)), 0) == {
        "op": "gaussian_blur", "kernel_size": (5, 3), "sigma": (0.2, 1.5)}
    if not (TOOLS / "stk-augops").is_file():
        pytest.skip("stk-augops not built (TEST_TOOLS_DIR unset)")
    path, _ = shards
    # torch.exp: SLEEF's without MKL (repeated), MKL's vmsExp with it, which the binding hands the
    # loader (augment.torch_vexp); only a torch 2.x with MKL whose vmsExp cannot be had is let off
    exact = str(torch.__version__).startswith("1.") or augment.torch_vexp(torch) is not None
    with _loader(stoker_mod, path, augment=[T.GaussianBlur((5, 3), (0.2, 1.5))]) as a:
        aug = _epoch(a)
    with _loader(stoker_mod, path) as b:
        plain = _epoch(b)
    off = total = 0
    for (ai, _, aidx), (pi, _, _) in zip(aug, plain):
        for k in range(len(aidx)):
            src, dst = tmp_path / "in.rgb", tmp_path / "out.rgb"
            src.write_bytes(pi[k].tobytes())
            out = subprocess.run([str(TOOLS / "stk-augops"), "steps", "5,5,3,0.2,1.5", "5", "0", str(int(aidx[k])),
                                  str(SIZE), str(SIZE), str(src), str(dst)], check=True, capture_output=True,
                                 text=True, timeout=60).stdout
            sigma = float(out.split()[1])
            want = F.gaussian_blur(torch.from_numpy(pi[k]).permute(2, 0, 1).contiguous(), [5, 3], [sigma, sigma])
            d = np.abs(ai[k].astype(int) - want.permute(1, 2, 0).numpy().astype(int))
            assert d.max() <= (0 if exact else 1)
            off += int((d > 0).sum())
            total += d.size
    assert off <= (0 if exact else total * 1e-3), (off, total)


def test_loader_gaussian_blur_v2_equals_torchvision(stoker_mod, shards, tmp_path):
    """transforms.v2.GaussianBlur through the Loader (the binding's program, kind 8, and
    STK_P_AUG_TORCH with this torch's lanes) equals torchvision v2's gaussian_blur byte for byte on
    every sample, with the sigma stoker drew for it."""
    torch_or_skip()
    try:
        from torchvision.transforms import v2 as T2
        from torchvision.transforms.v2 import functional as F2
    except ImportError:
        pytest.skip("this torchvision has no transforms.v2")
    import torch
    from stoker import augment
    assert augment.spec_for(T2.GaussianBlur((5, 3), (0.2, 1.5)), 0) == {
        "op": "gaussian_blur", "kernel_size": (5, 3), "sigma": (0.2, 1.5), "api": "v2"}
    if not (TOOLS / "stk-augops").is_file():
        pytest.skip("stk-augops not built (TEST_TOOLS_DIR unset)")
    path, _ = shards
    with _loader(stoker_mod, path, augment=[T2.GaussianBlur((5, 3), (0.2, 1.5))]) as a:
        aug = _epoch(a)
    with _loader(stoker_mod, path) as b:
        plain = _epoch(b)
    n = 0
    for (ai, _, aidx), (pi, _, _) in zip(aug, plain):
        for k in range(len(aidx)):
            src, dst = tmp_path / "in.rgb", tmp_path / "out.rgb"
            src.write_bytes(pi[k].tobytes())
            out = subprocess.run([str(TOOLS / "stk-augops"), "steps", "8,5,3,0.2,1.5", "5", "0", str(int(aidx[k])),
                                  str(SIZE), str(SIZE), str(src), str(dst)], check=True, capture_output=True,
                                 text=True, timeout=60).stdout
            sigma = float(out.split()[1])
            want = F2.gaussian_blur(torch.from_numpy(pi[k]).permute(2, 0, 1).contiguous(), [5, 3], [sigma, sigma])
            assert np.array_equal(ai[k], want.permute(1, 2, 0).numpy()), (int(aidx[k]), sigma)
            n += 1
    assert n > 0


def test_commutes_with_flip_is_true_exactly_for_mirror_symmetric_steps(stoker_mod, tmp_path):
    """Checked on pixels: hflip then the step equals the step then hflip for ColorJitter /
    RandomGrayscale / RandomVerticalFlip (fixed draws through stk-augops steps); the policies say
    False (ShearX is not mirror-symmetric: shown on an image)."""
    T = _tv()
    from stoker import augment
    from augops_ref import photo
    if not (TOOLS / "stk-augops").is_file():
        pytest.skip("stk-augops not built (TEST_TOOLS_DIR unset)")
    for obj in (T.ColorJitter(0.4, 0.4, 0.4, 0.1), T.RandomGrayscale(1.0), T.RandomVerticalFlip(1.0)):
        assert augment.commutes_with_flip(augment.spec_for(obj, 0))
    for obj in (T.TrivialAugmentWide(), T.RandAugment(), T.AutoAugment(), T.RandomErasing()):
        assert not augment.commutes_with_flip(augment.spec_for(obj, 0))
    img = photo(32, 48, 3)
    prog = "1,1.0,3,0.6,1.4,0.6,1.4,0.6,1.4,-0.1,0.1,2,1.0"

    def run(x):
        src, dst = tmp_path / "in.rgb", tmp_path / "out.rgb"
        src.write_bytes(np.ascontiguousarray(x).tobytes())
        subprocess.run([str(TOOLS / "stk-augops"), "steps", prog, "1", "0", "4", "32", "48", str(src), str(dst)],
                       check=True, capture_output=True, timeout=60)
        return np.frombuffer(dst.read_bytes(), np.uint8).reshape(32, 48, 3)
    assert np.array_equal(run(img[:, ::-1])[:, ::-1], run(img))
    from augops_ref import run_op
    a = run_op(tmp_path, np.ascontiguousarray(img[:, ::-1]), "ShearX", 0.3, "nearest", None)[:, ::-1]
    assert not np.array_equal(a, run_op(tmp_path, img, "ShearX", 0.3, "nearest", None))


def test_loader_augmix_equals_torchvision_with_its_draws(stoker_mod, shards, tmp_path):
    """Loader(augment=AugMix(severity=4, mixture_width=2)): every sample equals torchvision's AugMix
    arithmetic (m0 * x + sum w_i * chain_i, float32, truncated) with the draws stoker made for it
    (printed by stk-augops augmix); 1 and 3 workers equal."""
    T = _tv()
    import torch
    from stoker import augment
    from torchvision.transforms.autoaugment import _apply_op
    if not (TOOLS / "stk-augops").is_file():
        pytest.skip("stk-augops not built (TEST_TOOLS_DIR unset)")
    am = T.AugMix(severity=4, mixture_width=2)
    assert augment.spec_for(am, 0) == {"op": "augmix", "severity": 4, "mixture_width": 2, "chain_depth": -1,
                                       "alpha": 1.0, "all_ops": True, "interpolation": "bilinear", "fill": None}
    path, _ = shards
    with _loader(stoker_mod, path, augment=am, workers=1) as a:
        aug = _epoch(a)
    with _loader(stoker_mod, path, augment=am, workers=3) as a3:
        aug3 = _epoch(a3)
    with _loader(stoker_mod, path) as b:
        plain = _epoch(b)
    for x, y in zip(aug, aug3):
        assert all(np.array_equal(u, v) for u, v in zip(x, y))
    mode = T.InterpolationMode.BILINEAR
    for (ai, _, aidx), (pi, _, _) in zip(aug, plain):
        for k in range(len(aidx)):
            src, dst = tmp_path / "in.rgb", tmp_path / "out.rgb"
            src.write_bytes(pi[k].tobytes())
            out = subprocess.run([str(TOOLS / "stk-augops"), "augmix", "4", "2", "-1", "1.0", "1", "bilinear", "none",
                                  "5", "0", str(int(aidx[k])), str(SIZE), str(SIZE), str(src), str(dst)],
                                 check=True, capture_output=True, text=True, timeout=60).stdout.splitlines()
            batch = torch.from_numpy(pi[k]).permute(2, 0, 1).contiguous().view(1, 3, SIZE, SIZE)
            mix = torch.tensor([float(out[0].split()[1])]).view(1, 1, 1, 1) * batch
            j = 1
            while j < len(out):
                wgt = torch.tensor([float(out[j].split()[1])]).view(1, 1, 1, 1)
                j, chain = j + 1, batch
                while j < len(out) and not out[j].startswith("chain"):
                    name, mag = out[j].split()
                    chain, j = _apply_op(chain, name, float(mag), interpolation=mode, fill=None), j + 1
                mix.add_(wgt * chain)
            want = mix.view(3, SIZE, SIZE).to(torch.uint8).permute(1, 2, 0).numpy()
            assert np.array_equal(ai[k], want), (int(aidx[k]), out)
