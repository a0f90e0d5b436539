# SPDX-License-Identifier: MIT
"""stoker's Rotate (src/decode/augops.c, through tests/tools/stk-augops) against torchvision's
tensor implementation (autoaugment._apply_op on a uint8 CHW tensor): every angle across the
TrivialAugmentWide / RandAugment / AutoAugment bins, both signs, NEAREST, BILINEAR and BICUBIC,
fill None and given, on decoded JPEGs of several sizes. Equal byte for byte. A file of its own:
it is the longest of the ops (torch's grid_sample for each angle, interpolation and fill).

stk-test: pixels
"""
from augops_ref import check_op


def test_rotate_equals_torchvision(tmp_path):
    check_op(tmp_path, "Rotate")
