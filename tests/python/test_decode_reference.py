# SPDX-License-Identifier: MIT
# stk-test: pixels (compared with an independent implementation: also run in the Release build)
"""stk_decode at full size is pixel-identical to Pillow's decode + convert('RGB').

Files: written by libjpeg (tests/tools/stk-mkjpeg: 4:4:4, 4:2:2, 4:2:0, 4:4:0, 4:1:1, grayscale,
CMYK with and without Adobe's APP14 marker, YCCK; baseline, progressive, restart markers every
row / every 3 MCUs, an EXIF block) and by Pillow itself (RGB at three subsamplings, progressive,
CMYK, grayscale, with EXIF). Crops at DCT scales are compared with Pillow's draft-free decode
then crop at 8/8 (byte-identical) in the same run.
"""
import io
import itertools
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

TOOLS = Path(os.environ.get("TEST_TOOLS_DIR", ""))
KINDS = ["444", "422", "420", "440", "411", "gray", "cmyk", "cmyk-noadobe", "ycck"]
FLAGS = [0, 1, 2, 4 | 8, 1 | 4]


def stk_decode(path, tmp_path, crop=None):
    out = tmp_path / "out.raw"
    args = [str(TOOLS / "stk-aug"), "decode", str(path), str(out)]
    if crop:
        args += [str(v) for v in crop]
    r = subprocess.run(args, check=True, capture_output=True, text=True)
    status, w, h, warn = r.stdout.split()[:4]
    assert status == "STK_OK", r.stdout
    assert warn == "0", r.stdout
    return np.fromfile(out, dtype=np.uint8).reshape(int(h), int(w), 3)


def pil_rgb(path):
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


@pytest.mark.parametrize("kind", KINDS)
def test_libjpeg_written_files(kind, tmp_path):
    for (w, h), flags in itertools.product([(1, 1), (37, 23), (250, 171)], FLAGS):
        p = tmp_path / f"{kind}-{w}x{h}-{flags}.jpg"
        subprocess.run([str(TOOLS / "stk-mkjpeg"), str(w), str(h), kind, str(flags), "88",
                        str(w * 31 + flags), str(p)], check=True)
        got = stk_decode(p, tmp_path)
        ref = pil_rgb(p)
        assert got.shape == ref.shape, (p, got.shape, ref.shape)
        diff = int((got != ref).sum())
        assert diff == 0, f"{p.name}: {diff} bytes differ from Pillow"
    # a crop at 8/8 equals Pillow's decode then crop
    got = stk_decode(p, tmp_path, crop=(17, 9, 120, 101, 8))
    assert np.array_equal(got, ref[9:110, 17:137])


def _pil_files(tmp_path):
    rng = np.random.default_rng(3)
    base = np.zeros((157, 213, 3), np.uint8)
    yy, xx = np.mgrid[0:157, 0:213]
    base[..., 0] = (xx * 255 // 212).astype(np.uint8)
    base[..., 1] = (yy * 255 // 156).astype(np.uint8)
    base[..., 2] = rng.integers(0, 256, (157, 213), dtype=np.uint8)
    rgb = Image.fromarray(base)
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: Pillow does not rotate on decode, nor does stoker
    exif[0x010F] = "stoker test"
    files = []
    for ss in (0, 1, 2):
        for prog in (False, True):
            p = tmp_path / f"pil-rgb-{ss}-{int(prog)}.jpg"
            rgb.save(p, quality=90, subsampling=ss, progressive=prog, exif=exif.tobytes())
            files.append(p)
    p = tmp_path / "pil-cmyk.jpg"
    rgb.convert("CMYK").save(p, quality=92)
    files.append(p)
    p = tmp_path / "pil-gray.jpg"
    rgb.convert("L").save(p, quality=80, progressive=True)
    files.append(p)
    return files


def test_pillow_written_files(tmp_path):
    for p in _pil_files(tmp_path):
        got = stk_decode(p, tmp_path)
        ref = pil_rgb(p)
        assert got.shape == ref.shape
        assert int((got != ref).sum()) == 0, f"{p.name} differs from Pillow"


def test_imagenet_like_sample(tmp_path):
    """A spread of the real-looking set (all its modes), if it is there."""
    manifest = Path("/work/data/imagenet-like.manifest.tsv")
    if not manifest.exists():
        pytest.skip("no /work/data/imagenet-like")
    rows = [l.split("\t") for l in manifest.read_text().splitlines()[1:]]
    pick = rows[::250] + [r for r in rows if r[4] in ("CMYK", "gray", "444", "422")][::40]
    for r in pick:
        p = Path("/work/data/imagenet-like") / r[1]
        got = stk_decode(p, tmp_path)
        assert np.array_equal(got, pil_rgb(p)), p
