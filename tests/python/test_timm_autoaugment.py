# SPDX-License-Identifier: MIT
# stk-test: pixels (compared with an independent implementation: also run in the Release build)
"""timm's AutoAugment in stoker (src/decode/timmaug.c, through tests/tools/stk-timmaug auto /
autodraw; its ops are RandAugment's, whose pixels test_timm_randaugment.py checks one by one).

- STK_P_TIMM_AUTO_POLICY's op numbers are the C table's order (_lib.TIMM_OPS);
- the policy Python reads from timm's AutoAugment object is timm's table for 'original',
  'originalr', 'v0', 'v0r' (names, probabilities, magnitudes) with its hparams;
- the draws: the sub-policy uniform (chi-square), each op applied at its own probability, the
  magnitude noise N(m, mstd) clipped, a pure function of (seed, epoch, index);
- a drawn sample, applied by the Pillow reference (and, with timm importable, by timm's own
  AugmentOp with stoker's draws forced) in order, equals stoker's output.
"""
import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from test_timm_randaugment import photo, pil_apply, pil_arg, timm_apply

TOOLS = Path(os.environ.get("TEST_TOOLS_DIR", ""))
TOOL = TOOLS / "stk-timmaug"

# timm 1.0's auto_augment_policy_original (auto_augment.py), written out: the reference in
# interpreters without timm
ORIGINAL = [
    [("PosterizeOriginal", 0.4, 8), ("Rotate", 0.6, 9)], [("Solarize", 0.6, 5), ("AutoContrast", 0.6, 5)],
    [("Equalize", 0.8, 8), ("Equalize", 0.6, 3)], [("PosterizeOriginal", 0.6, 7), ("PosterizeOriginal", 0.6, 6)],
    [("Equalize", 0.4, 7), ("Solarize", 0.2, 4)], [("Equalize", 0.4, 4), ("Rotate", 0.8, 8)],
    [("Solarize", 0.6, 3), ("Equalize", 0.6, 7)], [("PosterizeOriginal", 0.8, 5), ("Equalize", 1.0, 2)],
    [("Rotate", 0.2, 3), ("Solarize", 0.6, 8)], [("Equalize", 0.6, 8), ("PosterizeOriginal", 0.4, 6)],
    [("Rotate", 0.8, 8), ("Color", 0.4, 0)], [("Rotate", 0.4, 9), ("Equalize", 0.6, 2)],
    [("Equalize", 0.0, 7), ("Equalize", 0.8, 8)], [("Invert", 0.6, 4), ("Equalize", 1.0, 8)],
    [("Color", 0.6, 4), ("Contrast", 1.0, 8)], [("Rotate", 0.8, 8), ("Color", 1.0, 2)],
    [("Color", 0.8, 8), ("Solarize", 0.8, 7)], [("Sharpness", 0.4, 7), ("Invert", 0.6, 8)],
    [("ShearX", 0.6, 5), ("Equalize", 1.0, 9)], [("Color", 0.4, 0), ("Equalize", 0.6, 3)],
    [("Equalize", 0.4, 7), ("Solarize", 0.2, 4)], [("Solarize", 0.6, 5), ("AutoContrast", 0.6, 5)],
    [("Invert", 0.6, 4), ("Equalize", 1.0, 8)], [("Color", 0.6, 4), ("Contrast", 1.0, 8)],
    [("Equalize", 0.8, 8), ("Equalize", 0.6, 3)],
]
# a policy with every op kind of timm's v0 / v0r (shears, translation, SolarizeAdd, Posterize)
# and three-op and one-op sub-policies
MIXED = [
    [("ShearY", 0.8, 4), ("TranslateYRel", 0.8, 9), ("SolarizeAdd", 0.6, 7)], [("Posterize", 0.8, 6)],
    [("ShearX", 1.0, 9), ("Rotate", 0.6, 8)], [("PosterizeIncreasing", 0.7, 7), ("Color", 0.5, 9)],
    [("Invert", 0.4, 9), ("Sharpness", 0.9, 3), ("Brightness", 0.8, 6)],
]
FILL = (124, 116, 104)


def _tool_or_skip():
    if not TOOL.is_file():
        pytest.skip("stk-timmaug not built (TEST_TOOLS_DIR unset)")


def program(policy):
    from stoker import augment
    return ",".join(repr(float(v)) for v in augment._timm_auto_program(policy))


def autodraw(policy, mstd, mmax, resample, count, seed=7, epoch=0, first=0):
    _tool_or_skip()
    out = subprocess.run([str(TOOL), "autodraw", program(policy), str(mstd), repr(float(mmax)), resample,
                          str(seed), str(epoch), str(first), str(count)],
                         check=True, timeout=120, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        f = line.split()
        ops = [(f[i], int(f[i + 1]), float(f[i + 2]), int(f[i + 3]), int(f[i + 4])) for i in range(2, len(f), 5)]
        rows.append((int(f[0]), int(f[1]), ops))
    return rows


def test_op_numbers_are_the_c_table():
    from stoker import _lib, augment
    assert augment._TIMM_OPS == _lib.TIMM_OPS
    policy = [[(name, 1.0, 5.0)] for name in _lib.TIMM_OPS]
    for index, sub, ops in autodraw(policy, 0, 10, "bilinear", 400):
        assert [o[0] for o in ops] == [_lib.TIMM_OPS[sub]], (index, sub, ops)


@pytest.mark.parametrize("name", ["original", "originalr", "v0", "v0r"])
def test_policy_read_from_timm_object(name):
    aa = pytest.importorskip("timm.data.auto_augment")
    from stoker import augment
    hp = dict(translate_const=100, img_mean=FILL, magnitude_std=0.5)
    obj = aa.auto_augment_transform(name + "-mstd0.5", dict(hp))
    spec = augment.spec_for(obj, 3)
    want = [[(op.name, float(op.prob), float(op.magnitude)) for op in sub]
            for sub in getattr(aa, "auto_augment_policy_" + name)(dict(hp))]
    assert spec["policy"] == want
    assert (spec["magnitude_std"], spec["magnitude_max"], spec["fill"], spec["interpolation"]) == \
        (0.5, 10.0, FILL, "random")
    if name == "original":
        assert spec["policy"] == [[(n, p, float(m)) for n, p, m in sub] for sub in ORIGINAL]


def test_sub_policy_uniform_and_each_op_at_its_probability():
    rows = autodraw(ORIGINAL, 0, 10, "random", 25000)
    subs = np.bincount([r[1] for r in rows], minlength=len(ORIGINAL))
    e = len(rows) / len(ORIGINAL)
    assert ((subs - e) ** 2 / e).sum() < 51.18, subs  # chi-square, 24 dof, 0.999
    for s, sub in enumerate(ORIGINAL):
        drawn = [r[2] for r in rows if r[1] == s]
        for j, (name, prob, mag) in enumerate(sub):
            assert all(ops[j][0] == name for ops in drawn)
            rate = np.mean([ops[j][1] for ops in drawn])
            assert abs(rate - prob) <= 4 * math.sqrt(prob * (1 - prob) / len(drawn)) + 1e-12, (s, j, rate, prob)
            levels = {ops[j][2] for ops in drawn if ops[j][1]}
            assert levels <= {float(mag)}, (s, j, levels)  # mstd 0: the magnitude itself


def test_magnitude_noise_sign_and_filter():
    policy = [[("Rotate", 1.0, 5.0)], [("ShearX", 1.0, 9.0)]]
    rows = autodraw(policy, 1.0, 10, "random", 20000)
    lv = np.array([r[2][0][2] for r in rows if r[1] == 0])
    assert abs(lv.mean() - 5.0) < 4 / math.sqrt(len(lv)) and abs(lv.std() - 1.0) < 0.04
    sh = np.array([r[2][0][2] for r in rows if r[1] == 1])  # N(9, 1) clipped at 10
    p = 0.5 * math.erfc(1 / math.sqrt(2))
    assert sh.max() == 10.0 and abs((sh == 10.0).mean() - p) < 4 * math.sqrt(p * (1 - p) / len(sh))
    neg = np.array([r[2][0][3] for r in rows])
    res = np.array([r[2][0][4] for r in rows])
    assert abs(neg.mean() - 0.5) < 4 * math.sqrt(0.25 / len(neg))
    assert set(res.tolist()) == {0, 1} and abs(res.mean() - 0.5) < 4 * math.sqrt(0.25 / len(res))
    lu = np.array([r[2][0][2] for r in autodraw(policy, "inf", 10, "bicubic", 5000) if r[1] == 0])
    assert lu.min() >= 0.0 and lu.max() <= 5.0 and abs(lu.mean() - 2.5) < 0.1


def test_draws_are_a_function_of_seed_epoch_index():
    a = autodraw(ORIGINAL, 0.5, 10, "random", 300, first=100)
    assert a[150:250] == autodraw(ORIGINAL, 0.5, 10, "random", 100, first=250)
    assert a != autodraw(ORIGINAL, 0.5, 10, "random", 300, first=100, epoch=1)
    assert a != autodraw(ORIGINAL, 0.5, 10, "random", 300, first=100, seed=8)


def run_auto(tmp, img, policy, mstd, resample, fill, tpct, index, seed=9):
    h, w, _ = img.shape
    src, dst = tmp / "in.rgb", tmp / "out.rgb"
    src.write_bytes(img.tobytes())
    out = subprocess.run([str(TOOL), "auto", program(policy), str(mstd), "10.0", resample, ",".join(map(str, fill)),
                          repr(float(tpct)), str(seed), "0", str(index), str(h), str(w), str(src), str(dst)],
                         check=True, timeout=60, capture_output=True, text=True).stdout.split("\n")
    steps = [(f[0], int(f[1]), float(f[2]), int(f[3]), int(f[4])) for f in map(str.split, out[1:]) if f]
    return int(out[0]), steps, np.frombuffer(dst.read_bytes(), np.uint8).reshape(h, w, 3)


@pytest.mark.parametrize("policy, mstd, resample, fill, tpct", [
    (ORIGINAL, 0.5, "random", FILL, 0.45),
    (ORIGINAL, 0, "bilinear", (0, 0, 0), 0.45),
    (MIXED, 1.0, "random", (200, 10, 60), 0.3),
    (MIXED, "inf", "nearest", FILL, 0.45),
])
def test_sample_equals_pillow_and_timm_with_stokers_draws(policy, mstd, resample, fill, tpct, tmp_path):
    _tool_or_skip()
    try:
        import timm.data.auto_augment  # noqa: F401
        have_timm = True
    except ImportError:
        have_timm = False
    compared = 0
    img = photo(72, 96, 21)
    ran = 0
    for index in range(40):
        sub, steps, got = run_auto(tmp_path, img, policy, mstd, resample, fill, tpct, index)
        assert [s[0] for s in steps] == [op[0] for op in policy[sub]]
        want, timm_want = img, img if have_timm else None
        for name, applied, level, negate, res in steps:
            if not applied:
                continue
            res = ("bilinear", "bicubic", "nearest")[res]
            want = pil_apply(want, name, pil_arg(name, level, negate, tpct, (96, 72)), res, fill)
            if timm_want is not None:
                try:
                    timm_want = timm_apply(timm_want, name, level, negate, res, fill, tpct)
                except ValueError:  # Pillow 13's posterize with 0 bits (test_timm_randaugment's _posterize)
                    assert name == "Posterize" and pil_arg(name, level, negate, tpct, (96, 72)) < 1
                    timm_want = None
            ran += 1
        assert np.array_equal(got, want), (index, sub, steps)
        if timm_want is not None:
            assert np.array_equal(got, timm_want), (index, sub, steps)
            compared += 1
    assert ran >= 25 and compared >= (30 if have_timm else 0)


@pytest.mark.parametrize("values, match", [
    ("2,1,0.5,5", "2 ops take 6 values"),
    ("1,22,0.5,5", "unknown op 22"),
    ("1,3,1.5,5", "probability 1.5"),
    ("1,3,0.5,1001", "magnitude 1001"),
    ("0", "op count 0"),
    ("17", "op count 17"),
])
def test_bad_programs_are_named(values, match):
    _tool_or_skip()
    r = subprocess.run([str(TOOL), "autodraw", values, "0", "10", "bilinear", "1", "0", "0", "1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "STK_P_TIMM_AUTO_POLICY" in r.stderr and match in r.stderr, r.stderr
