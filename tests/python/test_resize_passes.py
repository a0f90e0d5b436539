# SPDX-License-Identifier: MIT
# stk-test: pixels (compared with an independent implementation: also run in the Release build)
"""The order of the resize's two passes (STK_P_RESIZE_PASSES): each pass rounds to 8 bits, so
Pillow 13, which runs the vertical pass first when the height shrinks by more than twice as many
pixels as the width, gives other last bits than Pillow 12 and older (horizontal first always).

The references are built with whatever Pillow is installed, from single-axis resizes (one pass
each, the same in every Pillow): horizontal first = resize((w, H)) then resize((w, h)), vertical
first = resize((W, h)) then resize((w, h)). stk-aug (the library's decode + resize) must equal
the one its PASSES names, for train crops and eval resizes, BILINEAR and BICUBIC; and the
installed Pillow's own resize must equal the order stoker.Loader picks for it by default, so
that the choice is checked against a real Pillow 13 where one is installed (PyPI's), and
against Pillow 12 or older elsewhere (Debian's 9.4).
"""
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from PIL import Image

from stoker import _lib
from stoker.loader import installed_pillow_passes, parse_resize_passes

TOOLS = Path(os.environ.get("TEST_TOOLS_DIR", ""))
FILTERS = {0: Image.BILINEAR, 1: Image.BICUBIC}
# tall, wide and square sources, so that both orders occur among the crops
SIZES = [(200, 900), (300, 1200), (640, 480), (480, 640), (900, 260), (500, 500), (256, 1024)]


def _images(tmp_path):
    paths = []
    for i, (w, h) in enumerate(SIZES):
        p = tmp_path / f"p{i}.jpg"
        subprocess.run([str(TOOLS / "stk-mkjpeg"), str(w), str(h), "420", "0", "92", str(i), str(p)],
                       check=True)
        paths.append(str(p))
    return paths


def _stk(mode, paths, tmp_path, interp, passes, out, resize=256, resize_hw=(0, 0)):
    lst = tmp_path / "list.txt"
    lst.write_text("\n".join(paths) + "\n")
    raw = tmp_path / "out.raw"
    r = subprocess.run([str(TOOLS / "stk-aug"), "process", mode, str(out[0]), str(out[1]), str(resize), "0", "5",
                        "0", str(lst), str(raw), str(interp), str(resize_hw[0]), str(resize_hw[1]), str(passes)],
                       check=True, capture_output=True, text=True)
    meta = [l.split() for l in r.stdout.splitlines()]
    return meta, np.fromfile(raw, dtype=np.uint8).reshape(len(paths), out[0], out[1], 3)


def _vertical_first(src_w, src_h, w, h):
    return src_h - h > 0 and src_h - h > 2 * (src_w - w)


def _two_pass(im, w, h, f, vertical_first):
    W, H = im.size
    if vertical_first:
        mid = im.resize((W, h), f) if h != H else im
    else:
        mid = im.resize((w, H), f) if w != W else im
    return mid.resize((w, h), f) if mid.size != (w, h) else mid


def _rgb(p):
    with Image.open(p) as im:
        return im.convert("RGB")


@pytest.mark.parametrize("interp", [0, 1])
@pytest.mark.parametrize("passes", [_lib.RESIZE_PASSES_PILLOW12, _lib.RESIZE_PASSES_PILLOW13])
def test_train_crop_pass_order(interp, passes, tmp_path):
    paths = _images(tmp_path) * 4  # four crops of each (the sample index keys the draw)
    out = (160, 160)
    meta, imgs = _stk("train", paths, tmp_path, interp, passes, out)
    orders = set()
    for p, m, got in zip(paths, meta, imgs):
        assert m[1] == "STK_OK" and m[2] == "8", m
        x, y, w, h, flip = (int(v) for v in m[3:8])
        vf = passes == _lib.RESIZE_PASSES_PILLOW13 and _vertical_first(w, h, out[1], out[0])
        orders.add(vf)
        crop = _rgb(p).crop((x, y, x + w, y + h))
        ref = _two_pass(crop, out[1], out[0], FILTERS[interp], vf)
        if flip:
            ref = ref.transpose(Image.FLIP_LEFT_RIGHT)
        ref = np.asarray(ref)
        if not np.array_equal(got, ref):
            other = np.asarray(_two_pass(crop, out[1], out[0], FILTERS[interp], not vf))
            pytest.fail("%s crop %r: %d bytes differ from the %s-first reference (%d from the other order)"
                        % (p, (x, y, w, h), int((got != ref).sum()), "vertical" if vf else "horizontal",
                           int((got != (other[:, ::-1] if flip else other)).sum())))
    if passes == _lib.RESIZE_PASSES_PILLOW13:
        assert orders == {True, False}, orders  # both orders exercised


@pytest.mark.parametrize("interp", [0, 1])
def test_eval_resize_pass_order(interp, tmp_path):
    paths = _images(tmp_path)
    for passes in (_lib.RESIZE_PASSES_PILLOW12, _lib.RESIZE_PASSES_PILLOW13):
        for rhw, out in (((96, 300), (96, 300)), ((1000, 250), (224, 224)), ((256, 256), (224, 224))):
            meta, imgs = _stk("eval", paths, tmp_path, interp, passes, out, resize_hw=rhw)
            for p, m, got in zip(paths, meta, imgs):
                assert m[1] == "STK_OK", m
                im = _rgb(p)
                vf = passes == _lib.RESIZE_PASSES_PILLOW13 and _vertical_first(*im.size, rhw[1], rhw[0])
                ref = np.asarray(_two_pass(im, rhw[1], rhw[0], FILTERS[interp], vf))
                top, left = int(round((rhw[0] - out[0]) / 2.0)), int(round((rhw[1] - out[1]) / 2.0))
                ref = ref[top:top + out[0], left:left + out[1]]
                assert np.array_equal(got, ref), (p, passes, rhw, int((got != ref).sum()))


def test_installed_pillow_matches_the_default_order(tmp_path):
    """Pillow's own resize against the two-pass references: the order Loader's default picks
    (installed_pillow_passes) is the installed Pillow's, on shapes where the orders differ."""
    want = installed_pillow_passes()
    rng = np.random.default_rng(0)
    im = Image.fromarray(rng.integers(0, 256, (1200, 300, 3), dtype=np.uint8))
    differ = 0
    for w, h in ((256, 1024), (280, 300), (200, 150), (150, 600), (290, 100)):
        for f in FILTERS.values():
            own = np.asarray(im.resize((w, h), f))
            vf = want == _lib.RESIZE_PASSES_PILLOW13 and _vertical_first(300, 1200, w, h)
            assert np.array_equal(own, np.asarray(_two_pass(im, w, h, f, vf))), (w, h, f, Image.__version__)
            differ += not np.array_equal(np.asarray(_two_pass(im, w, h, f, True)),
                                         np.asarray(_two_pass(im, w, h, f, False)))
    assert differ >= 4, differ  # the shapes do tell the orders apart


def test_resize_passes_argument():
    assert parse_resize_passes("pillow12") == _lib.RESIZE_PASSES_PILLOW12
    assert parse_resize_passes("Pillow13") == _lib.RESIZE_PASSES_PILLOW13
    assert parse_resize_passes(None) == installed_pillow_passes()
    with pytest.raises(ValueError, match="resize_passes"):
        parse_resize_passes("pillow11")
