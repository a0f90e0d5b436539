# SPDX-License-Identifier: MIT
"""What the test_augops_* files share: stoker's augmentation ops run one at a time through
tests/tools/stk-augops (src/decode/augops.c), torchvision's tensor implementation of the same op
(autoaugment._apply_op on a uint8 CHW tensor) as the reference, decoded JPEGs to run them on, the
magnitude tables, and check_op (one op at every magnitude, size, interpolation and fill).
"""
import contextlib
import io
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import jpeg_bytes, torch_or_skip

TOOLS = Path(os.environ.get("TEST_TOOLS_DIR", ""))
TOOL = TOOLS / "stk-augops"

SIZES = [(224, 224), (176, 176), (120, 160), (53, 37)]  # (h, w)
OPS = ["Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color",
       "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize", "Invert"]


def tool_or_skip():
    if not TOOL.is_file():
        pytest.skip("stk-augops not built (TEST_TOOLS_DIR unset)")


def photo(h, w, seed):
    """A decoded JPEG (PIL): smooth gradients, waves and noise, like a small photo."""
    from PIL import Image
    data = jpeg_bytes(np.random.default_rng(seed), w, h, quality=85)
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).copy()


def run_op(tmp, img, name, mag, interp, fill):
    h, w, _ = img.shape
    src, dst = tmp / "in.rgb", tmp / "out.rgb"
    src.write_bytes(img.tobytes())
    fs = "none" if fill is None else ",".join(repr(float(v)) for v in fill)
    subprocess.run([str(TOOL), "op", name, repr(float(mag)), interp, fs, str(h), str(w), str(src), str(dst)],
                   check=True, timeout=60)
    return np.frombuffer(dst.read_bytes(), np.uint8).reshape(h, w, 3)


def run_ops(tmp, img, cases):
    """run_op for each (name, mag, interp, fill) of CASES on IMG, in one stk-augops process"""
    h, w, _ = img.shape
    src, dst = tmp / "in.rgb", tmp / "out.rgb"
    src.write_bytes(img.tobytes())
    lines = "".join("%s %r %s %s\n" % (name, float(mag), interp,
                                       "none" if fill is None else ",".join(repr(float(v)) for v in fill))
                    for name, mag, interp, fill in cases)
    subprocess.run([str(TOOL), "ops", str(h), str(w), str(src), str(dst)], input=lines, text=True,
                   check=True, timeout=600)
    out = np.frombuffer(dst.read_bytes(), np.uint8)
    assert out.size == len(cases) * h * w * 3, (out.size, len(cases), h, w)
    return list(out.reshape(len(cases), h, w, 3))


@contextlib.contextmanager
def torchvision_bicubic():
    """torchvision's tensor F.affine / F.rotate with BICUBIC allowed: their own grid, fill mask and
    torch's grid_sample(mode='bicubic'), the result rounded and clamped to 0..255 (torchvision
    refuses BICUBIC there; its uint8 cast would wrap the overshoot). Patched for the duration."""
    try:
        from torchvision.transforms import _functional_tensor as F_t
    except ImportError:
        from torchvision.transforms import functional_tensor as F_t
    check, apply = F_t._assert_grid_transform_inputs, F_t._apply_grid_transform

    def check_bicubic(img, matrix, interpolation, fill, modes, *a, **k):
        return check(img, matrix, interpolation, fill, list(modes) + ["bicubic"], *a, **k)

    def apply_bicubic(img, grid, mode, fill):
        if mode != "bicubic" or img.is_floating_point():
            return apply(img, grid, mode, fill)
        return apply(img.float(), grid, mode, fill).round().clamp(0, 255).to(img.dtype)

    F_t._assert_grid_transform_inputs, F_t._apply_grid_transform = check_bicubic, apply_bicubic
    try:
        yield
    finally:
        F_t._assert_grid_transform_inputs, F_t._apply_grid_transform = check, apply


INTERP_MODES = {"nearest": "NEAREST", "bilinear": "BILINEAR", "bicubic": "BICUBIC"}


def reference(img, name, mag, interp, fill):
    torch = torch_or_skip()
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms.autoaugment import _apply_op
    t = torch.from_numpy(img).permute(2, 0, 1).contiguous()
    mode = getattr(InterpolationMode, INTERP_MODES[interp])
    with torchvision_bicubic():
        out = _apply_op(t, name, float(mag), interpolation=mode, fill=None if fill is None else list(map(float, fill)))
    return out.permute(1, 2, 0).contiguous().numpy()


def tables(policy, bins, h, w):
    tool_or_skip()
    out = subprocess.run([str(TOOL), "tables", policy, str(bins), str(h), str(w)], check=True, timeout=60,
                         capture_output=True, text=True).stdout
    res = {}
    for line in out.splitlines():
        f = line.split()
        res[f[0]] = (int(f[1]), [float(v) for v in f[2:]])
    return res


def magnitudes(name, h, w):
    """Magnitudes to try for NAME: bins of the TrivialAugmentWide and RandAugment tables, signed."""
    if name in ("Identity", "AutoContrast", "Equalize", "Invert"):
        return [0.0]
    mags = set()
    for policy, bins in (("trivialaugment", 31), ("randaugment", 31), ("autoaugment", 10)):
        sgn, vals = tables(policy, bins, h, w)[name]
        for i in sorted({1, 3, len(vals) // 2, len(vals) - 2, len(vals) - 1}):
            if 0 <= i < len(vals):
                mags.add(vals[i])
                if sgn:
                    mags.add(-vals[i])
    return sorted(mags)


GEOMETRIC = ("ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate")


def check_op(tmp, name):
    """Every magnitude of NAME (magnitudes()) on decoded JPEGs of every size in SIZES, with every
    interpolation and fill for the geometric ops, equal to torchvision byte for byte."""
    tool_or_skip()
    torch_or_skip()
    bad = []
    modes = [("nearest", None), ("bilinear", None), ("nearest", (128, 128, 128)),
             ("bilinear", (124.0, 116.0, 104.0)), ("bilinear", (0.0, 255.0, 77.5)),
             ("bicubic", None), ("bicubic", (124.0, 116.0, 104.0))] \
        if name in GEOMETRIC else [("nearest", None)]
    for k, (h, w) in enumerate(SIZES):
        img = photo(h, w, 100 + k)
        cases = [(name, mag, interp, fill) for mag in magnitudes(name, h, w) for interp, fill in modes]
        for (_, mag, interp, fill), got in zip(cases, run_ops(tmp, img, cases)):
            want = reference(img, name, mag, interp, fill)
            diff = int((got != want).sum())
            if diff:
                bad.append(f"{h}x{w} mag={mag!r} {interp} fill={fill}: {diff} values differ, "
                           f"max {int(np.abs(got.astype(int) - want.astype(int)).max())}")
    assert not bad, f"{name} differs from torchvision:\n" + "\n".join(bad)
