# SPDX-License-Identifier: MIT
"""stoker's augmentation policies (src/decode/augpolicy.c, through tests/tools/stk-augops)
against torchvision: the magnitude tables equal torchvision's _augmentation_space; a policy's
drawn ops (TrivialAugmentWide, RandAugment, AutoAugment's three tables, AugMix), applied by
torchvision in order, equal stoker's policy output byte for byte; the settings torchvision's
constructors accept are accepted. (Each op alone: the test_augops_equal_*.py files.)

stk-test: pixels
"""
import subprocess

import numpy as np
import pytest

from augops_ref import OPS, TOOL, photo, reference, tables, tool_or_skip
from conftest import torch_or_skip


@pytest.mark.parametrize("policy,bins", [("trivialaugment", 31), ("randaugment", 31), ("randaugment", 10),
                                         ("autoaugment", 10), ("trivialaugment", 2), ("randaugment", 2),
                                         ("trivialaugment", 3000), ("randaugment", 1500)])
def test_tables_equal_torchvision(policy, bins):
    torch = torch_or_skip()
    from torchvision.transforms import autoaugment as aa
    h, w = 176, 224
    if policy == "trivialaugment":
        space = aa.TrivialAugmentWide()._augmentation_space(bins)
    elif policy == "randaugment":
        space = aa.RandAugment(num_magnitude_bins=bins)._augmentation_space(bins, (h, w))
    else:
        space = aa.AutoAugment()._augmentation_space(10, (h, w))
    ours = tables(policy, bins, h, w)
    for name, (mags, signed) in space.items():
        sgn, vals = ours[name]
        want = mags.reshape(-1).to(torch.float32).numpy() if mags.ndim > 0 else np.zeros(0, np.float32)
        assert np.array_equal(np.array(vals, np.float32), want), f"{policy} {name}: {vals} != {want}"
        assert sgn == int(signed), name
    # the ops a policy draws from: the table's keys, in torchvision's order
    if policy != "autoaugment":
        assert list(space.keys()) == OPS[:14]
    del torch


@pytest.mark.parametrize("policy", ["trivialaugment", "randaugment", "autoaugment", "autoaugment-cifar10",
                                    "autoaugment-svhn"])
@pytest.mark.parametrize("interp,fill", [("nearest", None), ("bilinear", (128, 128, 128)), ("bicubic", None),
                                         ("bicubic", (128, 128, 128))])
def test_policy_equals_torchvision_ops(tmp_path, policy, interp, fill):
    """The policy applies the ops it draws exactly as torchvision's _apply_op chain would."""
    tool_or_skip()
    torch_or_skip()
    h, w = 176, 176
    img = photo(h, w, 7)
    src, dst = tmp_path / "in.rgb", tmp_path / "out.rgb"
    src.write_bytes(img.tobytes())
    fs = "none" if fill is None else ",".join(str(float(v)) for v in fill)
    seen = set()
    for index in range(40):
        out = subprocess.run([str(TOOL), "policy", policy, "2", "9", "31", interp, fs, "5", "1", str(index),
                              str(h), str(w), str(src), str(dst)], check=True, timeout=60,
                             capture_output=True, text=True).stdout
        want = img
        for line in out.splitlines():
            name, mag = line.split()
            seen.add(name)
            want = reference(want, name, float(mag), interp, fill)
        got = np.frombuffer(dst.read_bytes(), np.uint8).reshape(h, w, 3)
        assert np.array_equal(got, want), f"{policy} sample {index}: {out}"
    assert len(seen) >= 5, seen


@pytest.mark.parametrize("sev,width,depth,all_ops,interp", [(3, 3, -1, 1, "bilinear"), (10, 2, 2, 0, "nearest"),
                                                            (1, 4, 3, 1, "bilinear")])
def test_augmix_equals_torchvision_with_its_draws(tmp_path, sev, width, depth, all_ops, interp):
    """AugMix: m0 * x + sum of w_i * chain_i in float32 (torch's mul / add_), truncated: equal byte
    for byte to torchvision's arithmetic with the weights and ops stoker drew for each sample."""
    tool_or_skip()
    torch = torch_or_skip()
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms.autoaugment import _apply_op
    mode = InterpolationMode.BILINEAR if interp == "bilinear" else InterpolationMode.NEAREST
    h, w = 64, 80
    img = photo(h, w, 77)
    src, dst = tmp_path / "in.rgb", tmp_path / "out.rgb"
    src.write_bytes(img.tobytes())
    batch = torch.from_numpy(img).permute(2, 0, 1).contiguous().view(1, 3, h, w)
    depths = set()
    for index in range(12):
        out = subprocess.run([str(TOOL), "augmix", str(sev), str(width), str(depth), "1.0", str(all_ops), interp,
                              "none", "4", "0", str(index), str(h), str(w), str(src), str(dst)], check=True,
                             capture_output=True, text=True, timeout=60).stdout.splitlines()
        m0 = torch.tensor([float(out[0].split()[1])], dtype=torch.float32)
        mix = m0.view(1, 1, 1, 1) * batch
        k, chains = 1, 0
        while k < len(out):
            wgt = torch.tensor([float(out[k].split()[1])], dtype=torch.float32)
            k += 1
            aug, n = batch, 0
            while k < len(out) and not out[k].startswith("chain"):
                name, mag = out[k].split()
                aug = _apply_op(aug, name, float(mag), interpolation=mode, fill=None)
                k, n = k + 1, n + 1
            depths.add(n)
            mix.add_(wgt.view(1, 1, 1, 1) * aug)
            chains += 1
        assert chains == width
        want = mix.view(3, h, w).to(torch.uint8).permute(1, 2, 0).numpy()
        got = np.frombuffer(dst.read_bytes(), np.uint8).reshape(h, w, 3)
        assert np.array_equal(got, want), (index, out)
    assert depths <= ({depth} if depth > 0 else {1, 2, 3})


def test_augmix_tables_equal_torchvision():
    tool_or_skip()
    torch = torch_or_skip()
    from torchvision.transforms import autoaugment as aa
    h, w = 64, 80
    space = aa.AugMix()._augmentation_space(10, (h, w))
    ours = tables("augmix", 10, h, w)
    assert list(space.keys()) == ["ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Posterize", "Solarize",
                                  "AutoContrast", "Equalize", "Brightness", "Color", "Contrast", "Sharpness"]
    for name, (mags, signed) in space.items():
        sgn, vals = ours[name]
        want = mags.reshape(-1).to(torch.float32).numpy() if mags.ndim > 0 else np.zeros(0, np.float32)
        assert np.array_equal(np.array(vals, np.float32), want), (name, vals, want)
        assert sgn == int(signed), name


def test_randaugment_with_50_ops_equals_torchvision_ops(tmp_path):
    """RandAugment(num_ops=50) (refused before: at most 16): the 50 ops drawn per sample applied
    exactly as torchvision's _apply_op chain, also with a large table (num_magnitude_bins=1500)."""
    tool_or_skip()
    torch_or_skip()
    h, w = 64, 80
    img = photo(h, w, 11)
    src, dst = tmp_path / "in.rgb", tmp_path / "out.rgb"
    src.write_bytes(img.tobytes())
    for index, (mag, bins) in enumerate([(9, 31), (1200, 1500), (0, 2)]):
        out = subprocess.run([str(TOOL), "policy", "randaugment", "50", str(mag), str(bins), "bilinear", "none", "5",
                              "1", str(index), str(h), str(w), str(src), str(dst)], check=True, timeout=60,
                             capture_output=True, text=True).stdout
        lines = out.splitlines()
        assert len(lines) == 50, out
        want = img
        for line in lines:
            name, m = line.split()
            want = reference(want, name, float(m), "bilinear", None)
        got = np.frombuffer(dst.read_bytes(), np.uint8).reshape(h, w, 3)
        assert np.array_equal(got, want), f"sample {index}: {out}"


def test_settings_torchvision_accepts_are_accepted(stoker_mod):
    """What torchvision's constructors take is taken, mapped as torchvision runs it: num_ops < 0
    is no op (range()), magnitude=-k the k-th bin from the end; refused only where torchvision
    itself raises when it runs, with its reason."""
    torch = torch_or_skip()
    from torchvision import transforms as T
    from stoker import augment
    assert augment.spec_for(T.RandAugment(num_ops=50), 0)["num_ops"] == 50
    assert augment.spec_for(T.RandAugment(num_ops=-1), 0)["num_ops"] == 0
    assert augment.spec_for(T.RandAugment(magnitude=-1), 0)["magnitude"] == 30
    assert augment.spec_for(T.TrivialAugmentWide(num_magnitude_bins=5000), 0)["num_magnitude_bins"] == 5000
    keys = dict((k, v) for k, v, _ in augment.params([T.RandAugment(num_ops=50, num_magnitude_bins=3000,
                                                                    magnitude=2999)]))
    from stoker import _lib
    assert keys[_lib.P_AUG_NUM_OPS] == 50 and keys[_lib.P_AUG_BINS] == 3000 and keys[_lib.P_AUG_MAGNITUDE] == 2999
    for step, match in [(T.TrivialAugmentWide(num_magnitude_bins=1), "Posterize"),
                        (T.RandAugment(num_magnitude_bins=1), "Posterize"),
                        (T.RandAugment(magnitude=31), "IndexError")]:
        with pytest.raises(augment.Unsupported, match=match):
            augment.spec_for(step, 0)
    # torchvision's own behaviour behind those refusals
    from torchvision.transforms.autoaugment import _apply_op
    bits = T.TrivialAugmentWide()._augmentation_space(1)["Posterize"][0]
    with pytest.raises(ValueError):
        _apply_op(torch.zeros((3, 4, 4), dtype=torch.uint8), "Posterize",
                  float(int(bits[0].item())), T.InterpolationMode.NEAREST, None)


def test_loader_runs_randaugment_with_more_ops_than_drawn_at_once(stoker_mod, shards):
    """RandAugment(num_ops=70), past the 64 ops drawn at once (the rest are drawn as applied):
    the loader runs it, the same for any worker count, and not as num_ops=64."""
    torch_or_skip()
    from torchvision import transforms as T
    from conftest import loader_epochs
    a = loader_epochs(stoker_mod, shards[0], 1, size=32, workers=1, augment=[T.RandAugment(num_ops=70)], seed=3)
    b = loader_epochs(stoker_mod, shards[0], 1, size=32, workers=3, augment=[T.RandAugment(num_ops=70)], seed=3)
    c = loader_epochs(stoker_mod, shards[0], 1, size=32, workers=2, augment=[T.RandAugment(num_ops=64)], seed=3)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])
