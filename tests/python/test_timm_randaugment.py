# SPDX-License-Identifier: MIT
# stk-test: pixels (compared with an independent implementation: also run in the Release build)
"""timm's RandAugment in stoker (src/decode/timmaug.c, through tests/tools/stk-timmaug).

- every op of timm's rand / rand-inc lists (and AutoAugment's PosterizeOriginal) at fixed
  magnitudes (both signs, BILINEAR, BICUBIC and NEAREST, levels above 10 with mmax, Rotate's 90 /
  180 degree fast paths) equals the Pillow calls timm makes, written out here (the reference that
  runs in every interpreter), and, where timm is importable, timm's own AugmentOp(prob=1,
  magnitude_std=0): equal byte for byte;
- the draws (op choice with replacement, per-op probability, N(m, mstd) or U(0, m) magnitude
  noise with its clip, the random sign, random BILINEAR / BICUBIC) follow timm's distributions
  (chi-square and moment tests over many samples) and are a pure function of (seed, epoch, index);
- a drawn policy, applied by the Pillow reference in order, equals stoker's output.
"""
import io
import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import jpeg_bytes

TOOLS = Path(os.environ.get("TEST_TOOLS_DIR", ""))
TOOL = TOOLS / "stk-timmaug"

RAND = ["AutoContrast", "Equalize", "Invert", "Rotate", "Posterize", "Solarize", "SolarizeAdd", "Color",
        "Contrast", "Brightness", "Sharpness", "ShearX", "ShearY", "TranslateXRel", "TranslateYRel"]
RAND_INC = ["AutoContrast", "Equalize", "Invert", "Rotate", "PosterizeIncreasing", "SolarizeIncreasing",
            "SolarizeAdd", "ColorIncreasing", "ContrastIncreasing", "BrightnessIncreasing",
            "SharpnessIncreasing", "ShearX", "ShearY", "TranslateXRel", "TranslateYRel"]
# AutoAugment's 'original' policy's posterize (test_timm_autoaugment.py runs the policies)
AUTO_ONLY = ["PosterizeOriginal"]
OPS = sorted(set(RAND) | set(RAND_INC) | set(AUTO_ONLY))
SIGNED = {"Rotate", "ColorIncreasing", "ContrastIncreasing", "BrightnessIncreasing", "SharpnessIncreasing",
          "ShearX", "ShearY", "TranslateXRel", "TranslateYRel"}
GEOMETRIC = {"Rotate", "ShearX", "ShearY", "TranslateXRel", "TranslateYRel"}
FILL = (124, 116, 104)  # create_transform's img_mean for the ImageNet mean
SIZES = [(224, 224), (120, 160), (53, 37)]  # (h, w)
LEVELS = [0.0, 1.0, 3.0, 4.37, 5.0, 7.0, 9.0, 9.5, 10.0]


def _tool_or_skip():
    if not TOOL.is_file():
        pytest.skip("stk-timmaug not built (TEST_TOOLS_DIR unset)")


def photo(h, w, seed):
    from PIL import Image
    data = jpeg_bytes(np.random.default_rng(seed), w, h, quality=85)
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).copy()


def run_op(tmp, img, name, level, negate, resample, fill=FILL, tpct=0.45):
    h, w, _ = img.shape
    src, dst = tmp / "in.rgb", tmp / "out.rgb"
    src.write_bytes(img.tobytes())
    subprocess.run([str(TOOL), "op", name, repr(float(level)), str(int(negate)), resample,
                    ",".join(map(str, fill)), repr(float(tpct)), str(h), str(w), str(src), str(dst)],
                   check=True, timeout=60, capture_output=True)
    return np.frombuffer(dst.read_bytes(), np.uint8).reshape(h, w, 3)


# ---- the reference: timm's level functions and the Pillow calls of its ops, written out ----------

def pil_arg(name, level, negate, tpct, size):
    """timm's LEVEL_TO_ARG (auto_augment.py, _LEVEL_DENOM = 10) for NAME."""
    sgn = -1.0 if negate else 1.0
    if name == "Rotate":
        return sgn * ((level / 10.) * 30.)
    if name == "Posterize":
        return int((level / 10.) * 4)
    if name == "PosterizeIncreasing":
        return 4 - int((level / 10.) * 4)
    if name == "PosterizeOriginal":
        return int((level / 10.) * 4) + 4
    if name == "Solarize":
        return min(256, int((level / 10.) * 256))
    if name == "SolarizeIncreasing":
        return 256 - min(256, int((level / 10.) * 256))
    if name == "SolarizeAdd":
        return min(128, int((level / 10.) * 110))
    if name in ("Color", "Contrast", "Brightness", "Sharpness"):
        return (level / 10.) * 1.8 + 0.1
    if name.endswith("Increasing"):
        return max(0.1, 1.0 + sgn * ((level / 10.) * .9))
    if name in ("ShearX", "ShearY"):
        return sgn * ((level / 10.) * 0.3)
    if name in ("TranslateXRel", "TranslateYRel"):
        return sgn * ((level / 10.) * tpct) * (size[0] if name == "TranslateXRel" else size[1])
    return None


def _posterize(im, bits):
    """ImageOps.posterize. Pillow 13 refuses bits outside 1..8 (ValueError, so timm's Posterize at
    levels below 2.5 and PosterizeIncreasing at 10 raise there); Pillow 9.4 to 12 keep
    i & ~(2 ** (8 - bits) - 1), all zeros for bits <= 0, which stoker gives."""
    from PIL import ImageOps
    try:
        return ImageOps.posterize(im, bits)
    except ValueError:
        assert bits < 1
        return im.point([0] * 768)


def pil_apply(img, name, arg, resample, fill):
    """timm's NAME_TO_OP[name](img, arg, fillcolor=fill, resample=resample) as Pillow calls."""
    from PIL import Image, ImageEnhance, ImageOps
    res = {"bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC, "nearest": Image.NEAREST}[resample]
    im = Image.fromarray(img)
    kw = dict(resample=res, fillcolor=tuple(fill))
    base = name.replace("Increasing", "")
    if name == "AutoContrast":
        out = ImageOps.autocontrast(im)
    elif name == "Equalize":
        out = ImageOps.equalize(im)
    elif name == "Invert":
        out = ImageOps.invert(im)
    elif name == "Rotate":
        out = im.rotate(arg, **kw)
    elif base in ("Posterize", "PosterizeOriginal"):
        out = im if arg >= 8 else _posterize(im, arg)
    elif base == "Solarize":
        out = ImageOps.solarize(im, arg)
    elif name == "SolarizeAdd":
        lut = [min(255, i + arg) if i < 128 else i for i in range(256)]
        out = im.point(lut * 3)
    elif base in ("Color", "Contrast", "Brightness", "Sharpness"):
        out = getattr(ImageEnhance, base)(im).enhance(arg)
    elif name == "ShearX":
        out = im.transform(im.size, Image.AFFINE, (1, arg, 0, 0, 1, 0), **kw)
    elif name == "ShearY":
        out = im.transform(im.size, Image.AFFINE, (1, 0, 0, arg, 1, 0), **kw)
    elif name == "TranslateXRel":
        out = im.transform(im.size, Image.AFFINE, (1, 0, arg, 0, 1, 0), **kw)
    else:
        out = im.transform(im.size, Image.AFFINE, (1, 0, 0, 0, 1, arg), **kw)
    return np.asarray(out.convert("RGB"))


def timm_apply(img, name, level, negate, resample, fill, tpct):
    """timm's own AugmentOp(name, prob=1, magnitude=level) with its sign forced."""
    aa = pytest.importorskip("timm.data.auto_augment")
    from PIL import Image
    res = {"bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC, "nearest": Image.NEAREST}[resample]
    hp = dict(translate_const=100, img_mean=tuple(fill), interpolation=res, translate_pct=tpct,
              magnitude_max=max(10, math.ceil(level)))
    op = aa.AugmentOp(name, prob=1.0, magnitude=level, hparams=hp)
    saved = aa._randomly_negate
    aa._randomly_negate = (lambda v: -v) if negate else (lambda v: v)
    try:
        return np.asarray(op(Image.fromarray(img)))
    finally:
        aa._randomly_negate = saved


def _cases(name):
    levels = list(LEVELS)
    if name in ("Rotate",):
        levels += [15.0, 30.0, 60.0]  # 45 degrees; Pillow's transpose fast paths at 90 and 180
    elif name not in ("AutoContrast", "Equalize", "Invert"):
        levels += [12.5, 15.0]
    else:
        levels = [0.0]
    for level in levels:
        for negate in ((0, 1) if name in SIGNED and level else (0,)):
            for resample in (("bilinear", "bicubic", "nearest") if name in GEOMETRIC else ("bilinear",)):
                yield level, negate, resample


@pytest.mark.parametrize("name", OPS)
def test_op_equals_pillow_reference(name, tmp_path):
    _tool_or_skip()
    for k, (h, w) in enumerate(SIZES):
        img = photo(h, w, 30 + k)
        for level, negate, resample in _cases(name):
            got = run_op(tmp_path, img, name, level, negate, resample)
            want = pil_apply(img, name, pil_arg(name, level, negate, 0.45, (w, h)), resample, FILL)
            assert np.array_equal(got, want), (name, (h, w), level, negate, resample,
                                               int((got != want).sum()))


@pytest.mark.parametrize("name", OPS)
def test_op_equals_timm_augment_op(name, tmp_path):
    _tool_or_skip()
    pytest.importorskip("timm.data.auto_augment")
    for k, (h, w) in enumerate(SIZES[:2]):
        img = photo(h, w, 50 + k)
        for level, negate, resample in _cases(name):
            got = run_op(tmp_path, img, name, level, negate, resample, fill=(7, 200, 64), tpct=0.3)
            try:
                want = timm_apply(img, name, level, negate, resample, (7, 200, 64), 0.3)
            except ValueError:  # Pillow 13's posterize with 0 bits: see _posterize
                assert "Posterize" in name and pil_arg(name, level, negate, 0.3, (w, h)) < 1
                assert not got.any()
                continue
            assert np.array_equal(got, want), (name, (h, w), level, negate, resample)


def test_pillow_reference_is_not_trivially_the_input(tmp_path):
    """The reference changes the image for every op at level 6 (the test would catch an op that
    does nothing)."""
    img = photo(120, 160, 3) // 2 + 40  # not already spanning 0..255: AutoContrast has work
    for name in OPS:
        arg = pil_arg(name, 6.0, 1, 0.45, (160, 120))
        assert not np.array_equal(pil_apply(img, name, arg, "bilinear", FILL), img), name


# ---- draws -----------------------------------------------------------------------------------

def draw(inc, n, mag, mstd, mmax, prob, resample, count, seed=7, epoch=0, first=0):
    _tool_or_skip()
    out = subprocess.run([str(TOOL), "draw", str(inc), str(n), repr(float(mag)), str(mstd), repr(float(mmax)),
                          repr(float(prob)), resample, str(seed), str(epoch), str(first), str(count)],
                         check=True, timeout=120, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        f = line.split()
        layers = [(f[i], int(f[i + 1]), float(f[i + 2]), int(f[i + 3]), int(f[i + 4]))
                  for i in range(1, len(f), 5)]
        rows.append((int(f[0]), layers))
    return rows


CHI2_999 = {1: 10.83, 14: 36.12, 19: 43.82}  # chi-square quantiles at 0.999


def test_op_choice_uniform_with_replacement_and_probability():
    rows = draw(1, 3, 9, 0, 10, 0.7, "random", 20000)
    layers = [l for _, ls in rows for l in ls]
    assert all(len(ls) == 3 for _, ls in rows)
    counts = np.array([sum(1 for l in layers if l[0] == name) for name in RAND_INC])
    assert counts.sum() == len(layers)
    e = len(layers) / 15
    assert ((counts - e) ** 2 / e).sum() < CHI2_999[14], counts
    # with replacement: the same op twice in a sample about 1 - (14/15)(13/15) of the time
    rep = sum(1 for _, ls in rows if len({l[0] for l in ls}) < 3) / len(rows)
    assert abs(rep - (1 - 14 * 13 / 225)) < 0.015
    applied = np.array([l[1] for l in layers])
    assert abs(applied.mean() - 0.7) < 4 * math.sqrt(0.7 * 0.3 / len(applied))
    # inc0 draws from the plain list
    names0 = {l[0] for _, ls in draw(0, 2, 9, 0, 10, 0.5, "bilinear", 2000) for l in ls}
    assert names0 == set(RAND)


WEIGHTED = {"Rotate": 3, "ShearX": 2, "ShearY": 2, "TranslateXRel": 1, "TranslateYRel": 1, "ColorIncreasing": .25,
            "SharpnessIncreasing": 0.25, "AutoContrast": 0.25, "SolarizeIncreasing": .05, "SolarizeAdd": .05,
            "ContrastIncreasing": .05, "BrightnessIncreasing": .05, "Equalize": .05, "PosterizeIncreasing": 0.05,
            "Invert": 0.05}  # timm's _RAND_WEIGHTED_0


def test_weighted_choice_without_replacement_as_numpy():
    """'tweights': numpy's choice(ops, 3, replace=False, p=weights) is the reference; how often each
    op is first and how often it is among the three match numpy's own draws."""
    names = list(WEIGHTED)
    p = np.array([WEIGHTED[k] for k in names], np.float64)
    p /= p.sum()
    rows = draw(2, 3, 9, 0, 10, 1.0, "bilinear", 20000)
    assert all(len({l[0] for l in ls}) == 3 for _, ls in rows)
    first = np.array([sum(1 for _, ls in rows if ls[0][0] == k) for k in names])
    e = len(rows) * p  # every expected count is above 100
    assert ((first - e) ** 2 / e).sum() < CHI2_999[14], first
    rng = np.random.default_rng(0)
    ref = np.zeros(len(names))
    m = 30000
    for _ in range(m):
        ref[rng.choice(len(names), 3, replace=False, p=p)] += 1
    ref /= m
    got = np.array([sum(1 for _, ls in rows if k in {l[0] for l in ls}) for k in names]) / len(rows)
    tol = 4 * np.sqrt(ref * (1 - ref) * (1 / len(rows) + 1 / m)) + 1e-3
    assert (np.abs(got - ref) <= tol).all(), (got, ref)


def test_magnitude_noise_normal_clipped():
    levels = np.array([l[2] for _, ls in draw(0, 2, 5, 1.0, 10, 1.0, "bilinear", 20000) for l in ls])
    n = len(levels)
    assert abs(levels.mean() - 5.0) < 4 / math.sqrt(n)
    assert abs(levels.std() - 1.0) < 0.03
    # third and fourth moments of a normal
    z = (levels - 5.0)
    assert abs((z ** 3).mean()) < 0.1 and abs((z ** 4).mean() - 3.0) < 0.2
    # m 9, mstd 0.5, clipped at 10: P(N(9, .5) > 10) = 1 - Phi(2) lands on 10 exactly
    lv = np.array([l[2] for _, ls in draw(1, 2, 9, 0.5, 10, 1.0, "bilinear", 20000) for l in ls])
    assert lv.max() == 10.0 and lv.min() >= 0.0
    p = 0.5 * math.erfc(2 / math.sqrt(2))
    assert abs((lv == 10.0).mean() - p) < 4 * math.sqrt(p * (1 - p) / len(lv))
    # mmax 15 lets it through
    lv = np.array([l[2] for _, ls in draw(1, 2, 9, 2.0, 15, 1.0, "bilinear", 5000) for l in ls])
    assert lv.max() > 10.0 and lv.max() <= 15.0


def test_magnitude_uniform_for_mstd_inf():
    lv = np.array([l[2] for _, ls in draw(0, 2, 9, "inf", 10, 1.0, "bilinear", 20000) for l in ls])
    assert lv.min() >= 0.0 and lv.max() <= 9.0
    hist, _ = np.histogram(lv, bins=20, range=(0, 9))
    e = len(lv) / 20
    assert ((hist - e) ** 2 / e).sum() < CHI2_999[19], hist
    fixed = {l[2] for _, ls in draw(0, 2, 9, 0, 10, 1.0, "bilinear", 500) for l in ls}
    assert fixed == {9.0}


def test_sign_and_random_resampling():
    layers = [l for _, ls in draw(1, 2, 9, 0, 10, 1.0, "random", 20000) for l in ls]
    signed = np.array([l[3] for l in layers if l[0] in SIGNED])
    assert abs(signed.mean() - 0.5) < 4 * math.sqrt(0.25 / len(signed))
    assert all(l[3] == 0 for l in layers if l[0] not in SIGNED)
    geo = np.array([l[4] for l in layers if l[0] in GEOMETRIC])
    assert set(geo.tolist()) == {0, 1}
    assert abs(geo.mean() - 0.5) < 4 * math.sqrt(0.25 / len(geo))
    fixed = {l[4] for _, ls in draw(1, 2, 9, 0, 10, 1.0, "bicubic", 2000) for l in ls if l[0] in GEOMETRIC}
    assert fixed == {1}


def test_draws_are_a_function_of_seed_epoch_index():
    a = draw(1, 2, 9, 0.5, 10, 0.5, "random", 300, first=100)
    b = draw(1, 2, 9, 0.5, 10, 0.5, "random", 100, first=250)
    assert a[150:250] == b
    assert a != draw(1, 2, 9, 0.5, 10, 0.5, "random", 300, first=100, epoch=1)
    assert a != draw(1, 2, 9, 0.5, 10, 0.5, "random", 300, first=100, seed=8)


# ---- a whole policy ------------------------------------------------------------------------------

def run_policy(tmp, img, args, index):
    h, w, _ = img.shape
    src, dst = tmp / "in.rgb", tmp / "out.rgb"
    src.write_bytes(img.tobytes())
    out = subprocess.run([str(TOOL), "policy", *args, "9", "0", str(index), str(h), str(w), str(src), str(dst)],
                         check=True, timeout=60, capture_output=True, text=True).stdout
    steps = []
    for line in out.splitlines():
        if line.strip():
            f = line.split()
            steps.append((f[0], int(f[1]), float(f[2]), int(f[3]), int(f[4])))
    return steps, np.frombuffer(dst.read_bytes(), np.uint8).reshape(h, w, 3)


@pytest.mark.parametrize("args", [
    ["1", "2", "9", "0.5", "10", "0.5", "bilinear", "124,116,104", "0.45"],
    ["0", "3", "7", "0", "10", "0.5", "random", "124,116,104", "0.45"],
    ["1", "4", "9", "inf", "10", "1.0", "bicubic", "0,0,0", "0.3"],
    ["1", "2", "9", "3", "15", "0.9", "random", "200,10,60", "0.45"],
    ["0", "3", "9", "1", "10", "0.8", "nearest", "124,116,104", "0.45"],
])
def test_policy_equals_pillow_chain(args, tmp_path):
    _tool_or_skip()
    img = photo(96, 128, 11)
    fill = tuple(int(v) for v in args[7].split(","))
    ran = 0
    for index in range(40):
        steps, got = run_policy(tmp_path, img, args, index)
        want = img
        for name, applied, level, negate, resample in steps:
            if applied:
                arg = pil_arg(name, level, negate, float(args[8]), (128, 96))
                want = pil_apply(want, name, arg, ("bilinear", "bicubic", "nearest")[resample], fill)
                ran += 1
        assert np.array_equal(got, want), (index, steps)
    assert ran >= 20
