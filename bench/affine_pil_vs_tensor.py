# SPDX-License-Identifier: MIT
"""How far torchvision's own two RandomAffine / RandomRotation paths lie apart: F.affine / F.rotate
on a PIL image (Pillow's Image.transform, what an ImageFolder pipeline runs) against the same call
on the uint8 tensor (affine grid + grid_sample, what stoker reproduces byte for byte). The cases
of tests/python/test_affine_equal.py (CASES), NEAREST and BILINEAR with fill 0, images 224x224,
120x160, 53x37, six parameter draws each; prints the share of values that differ, by more than
one level, and the largest difference. No stoker code runs.

    /usr/bin/python3 bench/affine_pil_vs_tensor.py        (needs torch, torchvision, PIL)
"""
import os
import sys

import numpy as np
import torch
from PIL import Image
from torchvision.transforms import InterpolationMode
from torchvision.transforms import functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
import test_affine_equal as t  # noqa: E402  (CASES and photo(): the test's images)

tot = off = off1 = 0
mx = 0
for kind, kw in t.CASES:
    for interp in ("nearest", "bilinear"):
        mode = InterpolationMode.BILINEAR if interp == "bilinear" else InterpolationMode.NEAREST
        for (h, w) in [(224, 224), (120, 160), (53, 37)]:
            img = t.photo(h, w, h + w)
            rng = np.random.default_rng(h)
            tr = kw.get("translate") or (0, 0)
            sh = kw.get("shear") or (0, 0, 0, 0)
            for _ in range(6):
                a = float(rng.uniform(*kw["degrees"]))
                tx = int(round(rng.uniform(-1, 1) * tr[0] * w))
                ty = int(round(rng.uniform(-1, 1) * tr[1] * h))
                sc = float(rng.uniform(*(kw.get("scale") or (1, 1))))
                sx, sy = float(rng.uniform(sh[0], sh[1])), float(rng.uniform(sh[2], sh[3]) if len(sh) == 4 else 0.0)
                ten = torch.from_numpy(img).permute(2, 0, 1).contiguous()
                pil = Image.fromarray(img)
                if kind == "rotation":
                    out_t, out_p = F.rotate(ten, a, mode, fill=[0.0] * 3), F.rotate(pil, a, mode, fill=(0, 0, 0))
                else:
                    out_t = F.affine(ten, a, [tx, ty], sc, [sx, sy], mode, fill=[0.0] * 3)
                    out_p = F.affine(pil, a, [tx, ty], sc, [sx, sy], mode, fill=(0, 0, 0))
                d = np.abs(out_t.permute(1, 2, 0).numpy().astype(int) - np.asarray(out_p).astype(int))
                tot += d.size
                off += int((d > 0).sum())
                off1 += int((d > 1).sum())
                mx = max(mx, int(d.max()))
print(f"PIL vs tensor: {off} of {tot} values differ ({100 * off / tot:.2f}%), "
      f"{100 * off1 / tot:.2f}% by more than one level, max {mx}")
