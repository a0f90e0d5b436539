# SPDX-License-Identifier: MIT
# stk-test: pixels (compared with an independent implementation: also run in the Release build)
"""stk__crop_params (train) against torchvision's RandomResizedCrop.get_params, run here.

100 000 draws from each side for the ImageNet default (40 000 for the fallback-heavy case); the distributions of w, h, i (top), j (left),
area fraction and aspect ratio are compared with the two-sample Kolmogorov-Smirnov statistic
(threshold: the alpha = 1e-4 critical value 2.146 * sqrt(2 / N), i.e. D < 0.0096 for N = 100 000,
0.0152 for 40 000; KS is conservative for discrete data; the seeds are fixed, so the test is
deterministic); the centre-crop fallback rate (torchvision's
fallback is detected as "torch.randint was not called") and the flip rate with a two-proportion
z test (|z| < 4.5).
"""
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
import torchvision.transforms as T  # noqa: E402

TOOLS = Path(os.environ.get("TEST_TOOLS_DIR", ""))
N = 100_000


def ks(a, b):
    a, b = np.sort(a), np.sort(b)
    v = np.concatenate([a, b])
    return float(np.max(np.abs(np.searchsorted(a, v, "right") / len(a) -
                               np.searchsorted(b, v, "right") / len(b))))


def z2(k1, k2, n):  # two proportions, equal sample sizes
    p = (k1 + k2) / (2 * n)
    if p in (0.0, 1.0):
        return 0.0
    return (k1 - k2) / n / math.sqrt(2 * p * (1 - p) / n)


def torchvision_draws(W, H, scale, ratio, N):
    img = torch.empty((1, H, W), dtype=torch.uint8)
    torch.manual_seed(1234)
    real_randint = torch.randint
    calls = [0]

    def counting(*a, **k):
        calls[0] += 1
        return real_randint(*a, **k)

    out = np.empty((N, 4), np.int64)
    fallback = 0
    torch.randint = counting
    try:
        for n in range(N):
            before = calls[0]
            i, j, h, w = T.RandomResizedCrop.get_params(img, scale, ratio)
            fallback += calls[0] == before
            out[n] = (j, i, w, h)
    finally:
        torch.randint = real_randint
    return out, fallback


def stoker_draws(W, H, scale, ratio, tmp_path, N=N):
    o = tmp_path / "crops.bin"
    subprocess.run([str(TOOLS / "stk-aug"), "crops", str(N), str(W), str(H), "0", "3",
                    str(scale[0]), str(scale[1]), repr(ratio[0]), repr(ratio[1]), "0.5", str(o)],
                   check=True)
    a = np.fromfile(o, dtype=np.int32).reshape(N, 6).astype(np.int64)
    return a


@pytest.mark.parametrize("W,H,scale,ratio,N", [
    (500, 375, (0.08, 1.0), (3 / 4, 4 / 3), 100_000),  # the ImageNet default on a typical photo
    (120, 400, (0.08, 1.0), (3 / 4, 4 / 3), 40_000),   # tall: many tries fail, ~10% fallback
])
def test_crop_distribution_matches_torchvision(W, H, scale, ratio, N, tmp_path):
    ref, ref_fb = torchvision_draws(W, H, scale, ratio, N)
    got = stoker_draws(W, H, scale, ratio, tmp_path, N)
    x, y, w, h, flip, fb = (got[:, k] for k in range(6))
    # hard bounds (every draw)
    assert (w > 0).all() and (h > 0).all() and (x >= 0).all() and (y >= 0).all()
    assert (x + w <= W).all() and (y + h <= H).all()
    stats = {
        "w": (w, ref[:, 2]), "h": (h, ref[:, 3]), "j": (x, ref[:, 0]), "i": (y, ref[:, 1]),
        "area": (w * h / (W * H), ref[:, 2] * ref[:, 3] / (W * H)),
        "aspect": (w / h, ref[:, 2] / ref[:, 3]),
    }
    report = []
    for name, (a, b) in stats.items():
        d = ks(a, b)
        report.append(f"{name} D={d:.4f}")
        crit = 2.146 * math.sqrt(2.0 / N)
        assert d < crit, f"{W}x{H}: KS statistic of {name} = {d:.4f} >= {crit:.4f}"
    zf = z2(int(fb.sum()), ref_fb, N)
    zflip = (flip.sum() - N / 2) / math.sqrt(N / 4)
    report.append(f"fallback {fb.sum() / N:.4f} vs {ref_fb / N:.4f} (z={zf:.2f}), flip {flip.mean():.4f}")
    print(f"{W}x{H} scale={scale}: " + ", ".join(report), file=sys.stderr)
    assert abs(zf) < 4.5
    assert abs(zflip) < 4.5
    # fallback crops are the centre crop, clamped to the ratio range
    if fb.any():
        k = np.argmax(fb)
        assert y[k] == (H - h[k]) // 2 and x[k] == (W - w[k]) // 2


def test_same_seed_same_crops_other_epoch_differs(tmp_path):
    a = stoker_draws(500, 375, (0.08, 1.0), (3 / 4, 4 / 3), tmp_path)
    b = stoker_draws(500, 375, (0.08, 1.0), (3 / 4, 4 / 3), tmp_path)
    assert np.array_equal(a, b)
