# SPDX-License-Identifier: MIT
"""stoker's pixel ops (Identity, Brightness, Color, Contrast, Sharpness, Posterize, Solarize,
AutoContrast, Equalize, Invert; src/decode/augops.c, through tests/tools/stk-augops) against
torchvision's tensor implementation (autoaugment._apply_op on a uint8 CHW tensor): every magnitude
across the TrivialAugmentWide / RandAugment / AutoAugment bins, both signs, on decoded JPEGs of
several sizes; and every op, the geometric ones too, on tiny images. Equal byte for byte.

stk-test: pixels
"""
import numpy as np
import pytest

from augops_ref import GEOMETRIC, OPS, check_op, reference, run_op, tool_or_skip
from conftest import torch_or_skip


@pytest.mark.parametrize("name", [op for op in OPS if op not in GEOMETRIC])
def test_op_equals_torchvision(tmp_path, name):
    check_op(tmp_path, name)


def test_ops_on_tiny_images(tmp_path):
    """1x1 .. 2x7 images (an output size of 1 is allowed): equal to torchvision, no crash."""
    tool_or_skip()
    torch_or_skip()
    rng = np.random.default_rng(1)
    bad = []
    for h, w in [(1, 1), (1, 5), (5, 1), (2, 2), (3, 3), (2, 7)]:
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        for name in OPS:
            mags = {"Solarize": [4.0, 200.0], "Posterize": [2.0, 5.0]}.get(name, [-0.5, 0.7, 3.0, 20.0])
            if name in ("Identity", "AutoContrast", "Equalize", "Invert"):
                mags = [0.0]
            for mag in mags:
                for interp, fill in (("nearest", None), ("bilinear", (1, 2, 3))):
                    got = run_op(tmp_path, img, name, mag, interp, fill)
                    if not np.array_equal(got, reference(img, name, mag, interp, fill)):
                        bad.append((h, w, name, mag, interp, fill))
    assert not bad, bad
