# SPDX-License-Identifier: MIT
# stk-test: pixels (compared with an independent implementation: also run in the Release build)
"""AutoAugment's three policy tables (AutoAugmentPolicy.IMAGENET, CIFAR10, SVHN) in stoker
(src/decode/augops.c, through tests/tools/stk-augops) against torchvision's own tables
(AutoAugment._get_policies): over many samples, how often each (op, magnitude) is applied must
match the rate the table implies (sum over the 25 sub-policies of probability / 25), an op the
table never applies at that magnitude must never appear, and signed ops are negative half the time.
The drawn ops, applied by torchvision's _apply_op in order, equal stoker's output byte for byte
(tests/python/test_augops_policies.py runs the same check for every policy name).
"""
import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import torch_or_skip

TOOL = Path(os.environ.get("TEST_TOOLS_DIR", "")) / "stk-augops"
N = 100000
H, W = 176, 224


def chi2_crit(df, z=4.75):
    """Upper quantile of chi-square(df) about z standard deviations out (Wilson-Hilferty; 4.75: 1e-6)."""
    a = 2.0 / (9.0 * df)
    return df * (1.0 - a + z * math.sqrt(a)) ** 3


def expected(policy):
    """{(op, |magnitude| as float32): applications per sample} and the signed ops, from torchvision."""
    torch_or_skip()
    from torchvision.transforms import autoaugment as aa
    pol = getattr(aa.AutoAugmentPolicy, policy.upper())
    t = aa.AutoAugment(pol)
    space = t._augmentation_space(10, (H, W))
    rates, signed = {}, set()
    for sub in t.policies:
        for name, p, mid in sub:
            mags, sgn = space[name]
            mag = float(np.float32(mags[mid].item())) if mid is not None else 0.0
            if sgn:
                signed.add(name)
            rates[(name, mag)] = rates.get((name, mag), 0.0) + p / len(t.policies)
    assert len(t.policies) == 25
    return rates, signed


@pytest.mark.parametrize("policy", ["imagenet", "cifar10", "svhn"])
def test_autoaugment_policy_rates(policy):
    if not TOOL.is_file():
        pytest.skip("stk-augops not built (TEST_TOOLS_DIR unset)")
    rates, signed = expected(policy)
    name = "autoaugment" if policy == "imagenet" else "autoaugment-" + policy
    out = subprocess.run([str(TOOL), "draws", name, "17", "2", str(N), str(H), str(W)], check=True,
                         timeout=120, capture_output=True, text=True).stdout.splitlines()
    assert len(out) == N
    got, neg, nsig, nops = {}, 0, 0, 0
    for line in out:
        f = line.split()
        for op, mag in zip(f[0::2], f[1::2]):
            m = float(np.float32(mag))  # printed %.9g: a float32 round trip
            key = (op, abs(m))
            assert key in rates and rates[key] > 0, \
                f"{policy}: applied {op} at {m}, which torchvision's table never does"
            got[key] = got.get(key, 0) + 1
            nops += 1
            if op in signed and m != 0:
                nsig += 1
                neg += m < 0
    x2, cells = 0.0, 0
    for key, r in rates.items():
        e = r * N
        if e == 0:
            continue
        x2 += (got.get(key, 0) - e) ** 2 / e
        cells += 1
    crit = chi2_crit(cells - 1)
    assert x2 < crit, f"{policy}: (op, magnitude) rates chi-square {x2:.1f} over {crit:.1f} (df {cells - 1})"
    want_ops = sum(rates.values()) * N
    assert abs(nops - want_ops) < 5 * math.sqrt(want_ops), (nops, want_ops)
    if nsig:
        se = math.sqrt(0.25 / nsig)
        assert abs(neg / nsig - 0.5) < 5 * se, (neg, nsig)
