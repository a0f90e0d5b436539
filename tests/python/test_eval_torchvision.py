# SPDX-License-Identifier: MIT
# stk-test: pixels (compared with an independent implementation: also run in the Release build)
"""stoker's per-sample augmentation against torchvision on Pillow images.

eval: stk__process_sample (Resize(256) + CenterCrop(224) geometry) vs torchvision's
      Resize(256) + CenterCrop(224) on Image.open(f).convert('RGB').
train: the crop stoker drew (printed by stk-aug) fed to torchvision's resized_crop(224) (+ hflip).

stoker re-implements Pillow's BILINEAR antialiased resampling, so every sample decoded at DCT
scale 8/8 must be byte-identical; samples decoded at a smaller DCT scale (the IDCT does part of
the downscale) are compared by PSNR over all samples (threshold 30 dB, the figure is printed).
Images: /work/data/imagenet-like (every 50th file, plus its CMYK and grayscale ones) when present,
else generated ones.
"""
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
from PIL import Image  # noqa: E402
import torchvision.transforms as T  # noqa: E402
import torchvision.transforms.functional as F  # noqa: E402
from stoker.loader import installed_pillow_passes  # noqa: E402

TOOLS = Path(os.environ.get("TEST_TOOLS_DIR", ""))
DATA = Path("/work/data/imagenet-like")
MANIFEST = Path("/work/data/imagenet-like.manifest.tsv")


def _images(tmp_path):
    if MANIFEST.exists() and DATA.is_dir():
        rows = [l.rstrip("\n").split("\t") for l in MANIFEST.read_text().splitlines()[1:]]
        pick = [r for i, r in enumerate(rows) if i % 50 == 0]
        pick += [r for r in rows if r[4] in ("CMYK", "gray")][:12]
        paths = [str(DATA / r[1]) for r in pick if (DATA / r[1]).exists()]
        if len(paths) >= 100:
            return paths
    paths = []
    kinds = ["420", "422", "444", "gray", "cmyk", "440"]
    for i in range(60):
        w, h = 180 + (i * 37) % 400, 160 + (i * 53) % 380
        p = tmp_path / f"g{i}.jpg"
        subprocess.run([str(TOOLS / "stk-mkjpeg"), str(w), str(h), kinds[i % 6], str(i % 2), "90",
                        str(i), str(p)], check=True)
        paths.append(str(p))
    return paths


def _run(mode, paths, tmp_path, seed=0, resize=256):
    lst = tmp_path / f"{mode}.lst"
    lst.write_text("\n".join(paths) + "\n")
    out = tmp_path / f"{mode}.raw"
    r = subprocess.run([str(TOOLS / "stk-aug"), "process", mode, "224", "224", str(resize), "1", str(seed),
                        "0", str(lst), str(out), "0", "0", "0", str(installed_pillow_passes())],
                       check=True, capture_output=True, text=True)
    meta = [l.split() for l in r.stdout.splitlines()]
    imgs = np.fromfile(out, dtype=np.uint8).reshape(len(paths), 224, 224, 3)
    return meta, imgs


def _compare(name, paths, meta, imgs, reference):
    sq, n, exact8, n8, scales = 0.0, 0, 0, 0, {}
    for p, m, got in zip(paths, meta, imgs):
        assert m[1] == "STK_OK", f"{p}: {m}"
        ref = reference(p, m)
        d = got.astype(np.int64) - ref.astype(np.int64)
        sq += float((d * d).sum())
        n += d.size
        scale = int(m[2])
        scales[scale] = scales.get(scale, 0) + 1
        if scale == 8:
            n8 += 1
            if np.array_equal(got, ref):
                exact8 += 1
            else:
                idx = np.argwhere(got != ref)[0]
                pytest.fail(f"{name}: {p} decoded at 8/8 differs from torchvision at {idx}: "
                            f"{got[tuple(idx[:2])]} vs {ref[tuple(idx[:2])]}")
    mse = sq / n
    psnr = float("inf") if mse == 0 else 10 * math.log10(255.0 ** 2 / mse)
    print(f"{name}: {len(paths)} images, DCT scales {dict(sorted(scales.items()))}, "
          f"{exact8}/{n8} at 8/8 byte-identical, PSNR over all {psnr:.2f} dB", file=sys.stderr)
    assert psnr >= 30.0, f"{name}: PSNR {psnr:.2f} dB < 30"
    return psnr


def test_eval_matches_torchvision(tmp_path):
    paths = _images(tmp_path)
    meta, imgs = _run("eval", paths, tmp_path)
    tf = T.Compose([T.Resize(256), T.CenterCrop(224)])

    def ref(p, m):
        with Image.open(p) as im:
            return np.asarray(tf(im.convert("RGB")))

    _compare("eval Resize(256)+CenterCrop(224)", paths, meta, imgs, ref)


def test_train_matches_torchvision_resized_crop(tmp_path):
    paths = _images(tmp_path)
    meta, imgs = _run("train", paths, tmp_path, seed=7)
    flips = sum(int(m[7]) for m in meta)
    assert 0 < flips < len(paths)

    def ref(p, m):
        x, y, w, h, flip = (int(v) for v in m[3:8])
        with Image.open(p) as im:
            out = F.resized_crop(im.convert("RGB"), y, x, h, w, [224, 224],
                                 interpolation=T.InterpolationMode.BILINEAR)
        if flip:
            out = F.hflip(out)
        return np.asarray(out)

    _compare("train RandomResizedCrop(224)+flip", paths, meta, imgs, ref)


def test_small_dct_scales_close(tmp_path):
    """Large images, so that DCT scales 1/8..4/8 are exercised: PSNR against torchvision."""
    paths = []
    for i, (w, h) in enumerate([(1800, 1400), (1200, 900), (2000, 600), (700, 2100), (950, 1300)]):
        p = tmp_path / f"big{i}.jpg"
        subprocess.run([str(TOOLS / "stk-mkjpeg"), str(w), str(h), ["420", "444", "422", "gray", "420"][i],
                        str(i % 2), "90", str(100 + i), str(p)], check=True)
        paths.append(str(p))
    meta, imgs = _run("eval", paths, tmp_path)
    assert {int(m[2]) for m in meta} & {1, 2, 4}, meta
    tf = T.Compose([T.Resize(256), T.CenterCrop(224)])

    def ref(p, m):
        with Image.open(p) as im:
            return np.asarray(tf(im.convert("RGB")))

    _compare("eval, large images", paths, meta, imgs, ref)


def test_eval_center_crop_padding(tmp_path):
    """Resize(200) + CenterCrop(224): torchvision zero-pads; so must stoker."""
    paths = _images(tmp_path)[:20]
    meta, imgs = _run("eval", paths, tmp_path, resize=200)
    tf = T.Compose([T.Resize(200), T.CenterCrop(224)])

    def ref(p, m):
        with Image.open(p) as im:
            return np.asarray(tf(im.convert("RGB")))

    _compare("eval Resize(200)+CenterCrop(224) (padded)", paths, meta, imgs, ref)
