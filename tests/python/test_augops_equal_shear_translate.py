# SPDX-License-Identifier: MIT
"""stoker's ShearX, ShearY, TranslateX and TranslateY (src/decode/augops.c, through
tests/tools/stk-augops) against torchvision's tensor implementation (autoaugment._apply_op on a
uint8 CHW tensor): every magnitude across the TrivialAugmentWide / RandAugment / AutoAugment bins,
both signs, NEAREST, BILINEAR and BICUBIC, fill None and given, on decoded JPEGs of several sizes.
Equal byte for byte. (Rotate: test_augops_equal_rotate.py; the pixel ops:
test_augops_equal_color.py; the policies: test_augops_policies.py.)

stk-test: pixels
"""
import pytest

from augops_ref import GEOMETRIC, check_op


@pytest.mark.parametrize("name", [op for op in GEOMETRIC if op != "Rotate"])
def test_op_equals_torchvision(tmp_path, name):
    check_op(tmp_path, name)
