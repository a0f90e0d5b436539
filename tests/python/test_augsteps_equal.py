# SPDX-License-Identifier: MIT
# stk-test: pixels (compared with an independent implementation: also run in the Release build)
"""ColorJitter, RandomGrayscale and RandomVerticalFlip (src/decode/augops.c, STK_P_AUG_STEPS,
through tests/tools/stk-augops) against torchvision's tensor implementation:
- adjust_hue at factors across [-0.5, 0.5], and ColorJitter's four adjustments with fixed
  factors in every order torchvision's randperm can give, equal byte for byte on decoded JPEGs;
- a step program (vflip, jitter, grayscale) applied to a sample equals torchvision's vflip /
  adjust_* / rgb_to_grayscale with the draws stoker printed for that sample;
- the draws follow torchvision's distributions: each of the 24 orders equally often (chi-square),
  factors uniform on their ranges, flips and grayscale at their probabilities; bad programs are
  refused naming the step;
- GaussianBlur of transforms (v1) and transforms.v2 through the binding's program, on random
  images, sizes, kernels and sigmas: byte for byte. v1's exp is torch.exp: under a torch with MKL
  (the PyPI wheels) that is MKL's vmsExp, which the binding takes from libtorch_cpu.so
  (stoker.augment.torch_vexp) and the tool gets as STK_AUGOPS_VEXP; only where it cannot be had
  (torch 2.x with MKL but no usable vmsExp) within one level.
"""
import itertools
import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import torch_or_skip
from augops_ref import photo

TOOL = Path(os.environ.get("TEST_TOOLS_DIR", "")) / "stk-augops"


def _skip():
    if not TOOL.is_file():
        pytest.skip("stk-augops not built (TEST_TOOLS_DIR unset)")
    torch_or_skip()


def _jitter(tmp, img, f, order):
    h, w, _ = img.shape
    src, dst = tmp / "in.rgb", tmp / "out.rgb"
    src.write_bytes(img.tobytes())
    subprocess.run([str(TOOL), "jitter", *[repr(float(x)) for x in f], "".join(map(str, order)), str(h), str(w),
                    str(src), str(dst)], check=True, timeout=60)
    return np.frombuffer(dst.read_bytes(), np.uint8).reshape(h, w, 3)


def _ref_jitter(img, f, order):
    import torch
    from torchvision.transforms import functional as F
    t = torch.from_numpy(img).permute(2, 0, 1).contiguous()
    fns = [F.adjust_brightness, F.adjust_contrast, F.adjust_saturation, F.adjust_hue]
    for k in order:
        if not math.isnan(f[k]):
            t = fns[k](t, f[k])
    return t.permute(1, 2, 0).numpy()


def test_hue_equals_torchvision(tmp_path):
    _skip()
    nan = float("nan")
    bad = []
    for k, (h, w) in enumerate([(224, 224), (53, 37), (120, 160)]):
        img = photo(h, w, 200 + k)
        img[:8] = img[:8, :, :1]        # some gray rows: maxc == minc
        for hue in (-0.5, -0.4999, -0.31, -0.1, -0.013, 0.0, 0.02, 0.1, 0.25, 0.333, 0.4999, 0.5):
            f = [nan, nan, nan, hue]
            got, want = _jitter(tmp_path, img, f, [3, 0, 1, 2]), _ref_jitter(img, f, [3])
            if not np.array_equal(got, want):
                bad.append((h, w, hue, int((got != want).sum())))
    assert not bad, bad


def test_jitter_every_order_equals_torchvision(tmp_path):
    _skip()
    img = photo(96, 128, 21)
    f = [1.31, 0.62, 1.27, -0.21]
    for order in itertools.permutations(range(4)):
        got, want = _jitter(tmp_path, img, f, order), _ref_jitter(img, f, order)
        assert np.array_equal(got, want), order
    for f in ([0.0, 1.0, 1.0, 0.0], [1.9, 0.0, 0.0, 0.5], [0.6, 1.4, 1.5, -0.5]):
        got, want = _jitter(tmp_path, img, f, (0, 1, 2, 3)), _ref_jitter(img, f, (0, 1, 2, 3))
        assert np.array_equal(got, want), f


def _steps(tmp, prog, index, img, seed=3, epoch=1, env=None):
    h, w, _ = img.shape
    src, dst = tmp / "in.rgb", tmp / "out.rgb"
    src.write_bytes(img.tobytes())
    r = subprocess.run([str(TOOL), "steps", ",".join(repr(float(x)) for x in prog), str(seed), str(epoch),
                        str(index), str(h), str(w), str(src), str(dst)], capture_output=True, text=True, timeout=60,
                       env=env)
    if r.returncode == 3:
        return r.stdout, None
    assert r.returncode == 0, r.stderr
    return r.stdout, np.frombuffer(dst.read_bytes(), np.uint8).reshape(h, w, 3)


def _steps_batch(tmp, jobs, env=None, seed=3, epoch=1):
    """_steps for each (prog, index, img) of JOBS in one stk-augops process (steps-batch): the
    [(stdout, image or None)] in order."""
    lines = []
    for n, (prog, index, img) in enumerate(jobs):
        h, w, _ = img.shape
        (tmp / ("in%d.rgb" % n)).write_bytes(img.tobytes())
        lines.append(" ".join([",".join(repr(float(x)) for x in prog), str(seed), str(epoch), str(index), str(h),
                               str(w), str(tmp / ("in%d.rgb" % n)), str(tmp / ("out%d.rgb" % n))]))
    r = subprocess.run([str(TOOL), "steps-batch"], input="\n".join(lines) + "\n", capture_output=True, text=True,
                       timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    outs, text = [], []
    for line in r.stdout.splitlines():
        if not line.startswith("=== "):
            text.append(line)
            continue
        rc, (_, _, img) = int(line[4:]), jobs[len(outs)]
        assert rc in (0, 3), (rc, r.stderr)
        n = len(outs)
        got = None if rc == 3 else np.frombuffer((tmp / ("out%d.rgb" % n)).read_bytes(), np.uint8).reshape(img.shape)
        outs.append(("\n".join(text) + "\n", got))
        text = []
    assert len(outs) == len(jobs), r.stdout[-500:]
    return outs


PROG = [1, 0.5, 3, 0.6, 1.4, 0.6, 1.4, 0.6, 1.4, -0.1, 0.1, 2, 0.2]   # vflip, jitter, grayscale


def test_step_program_equals_torchvision_with_its_draws(tmp_path):
    _skip()
    import torch
    from torchvision.transforms import functional as F
    img = photo(64, 80, 5)
    seen = set()
    for index in range(30):
        out, got = _steps(tmp_path, PROG, index, img)
        t = torch.from_numpy(img).permute(2, 0, 1).contiguous()
        for line in out.splitlines():
            f = line.split()
            if f[0] == "vflip" and f[1] == "1":
                t = F.vflip(t)
            elif f[0] == "grayscale" and f[1] == "1":
                t = F.rgb_to_grayscale(t, num_output_channels=3)
            elif f[0] == "jitter":
                t = torch.from_numpy(_ref_jitter(t.permute(1, 2, 0).numpy(), [float(x) for x in f[2:]],
                                                 [int(c) for c in f[1]])).permute(2, 0, 1)
            seen.add(line[:11])
        assert np.array_equal(got, t.permute(1, 2, 0).numpy()), (index, out)
    assert {"vflip 0", "vflip 1", "grayscale 0", "grayscale 1"} <= seen


def test_step_draws_follow_torchvision_distributions(tmp_path):
    _skip()
    img = np.zeros((2, 2, 3), np.uint8)
    n = 1200
    orders, flips, grays, fac = {}, 0, 0, []
    for index in range(n):
        out, _ = _steps(tmp_path, PROG, index, img)
        for line in out.splitlines():
            f = line.split()
            if f[0] == "vflip":
                flips += int(f[1])
            elif f[0] == "grayscale":
                grays += int(f[1])
            else:
                orders[f[1]] = orders.get(f[1], 0) + 1
                fac.append([float(x) for x in f[2:]])
    assert len(orders) == 24
    e = n / 24
    chi2 = sum((c - e) ** 2 / e for c in orders.values())
    assert chi2 < 60, chi2                       # df 23: p < 1e-4 above 55
    assert abs(flips / n - 0.5) < 5 * math.sqrt(0.25 / n)
    assert abs(grays / n - 0.2) < 5 * math.sqrt(0.16 / n)
    fac = np.array(fac)
    for j, (lo, hi) in enumerate([(0.6, 1.4)] * 3 + [(-0.1, 0.1)]):
        assert fac[:, j].min() >= lo - 1e-6 and fac[:, j].max() <= hi + 1e-6
        u = (fac[:, j] - lo) / (hi - lo)          # uniform: mean 1/2, var 1/12
        assert abs(u.mean() - 0.5) < 5 * math.sqrt(1 / 12 / n)
        hist = np.histogram(u, bins=10, range=(0, 1))[0]
        assert sum((c - n / 10) ** 2 / (n / 10) for c in hist) < 40   # df 9


@pytest.mark.parametrize("prog,match", [
    ([99, 1.0], "step 0: unknown kind 99"),
    ([1, 0.5, 8, 4, 3, 1, 1], r"step 1 \(GaussianBlur\): kernel 4 x 3 must be odd"),
    ([8, 3, 3, 2, 1], r"step 0 \(GaussianBlur\): kernel 3 x 3 must be odd 1..255 and sigma 0 < 2 <= 1"),
    ([7, 10, 5, 0, 0, 0, 0, 0], r"step 0 \(RandomRotation\): degrees \[10, 5\] must be ordered"),
    ([1, 0.5, 6, 0, 0, 1.5, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0], r"step 1 \(RandomAffine\): translate \(1.5, 0\)"),
    ([6, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0], r"step 0 \(RandomAffine\): scale \[0, 1\]"),
    ([7, 0, 0, 3, 0, 0, 0, 0], r"step 0 \(RandomRotation\): interpolation 3 must be 0, 1 or 2"),
    ([7, 0, 0, 0, 1, 0, 300, 0], r"step 0 \(RandomRotation\): fill 300 is not in 0..255"),
    ([6, 0, 0, 0, 0, 1, 1], "step 0: kind 6 takes 15 values"),
    ([1, 1.5], "step 0: probability 1.5"),
    ([1, 0.5, 3, 0.6, 1.4, 0.6, 1.4, 0.6, 1.4, -0.6, 0.1], r"step 1 \(ColorJitter\): hue"),
    ([1, 0.5, 3, 0.6, 1.4], "step 1: kind 3 takes 8 values"),
    ([4, 4], "policy appears more than once"),
])
def test_bad_programs_are_refused_naming_the_step(tmp_path, prog, match):
    _skip()
    import re
    out, img = _steps(tmp_path, prog, 0, np.zeros((2, 2, 3), np.uint8))
    assert img is None and re.search(match, out), out


def _torch1():
    import torch
    return str(torch.__version__).startswith("1.")


def _blur_api(api):
    """(torchvision's GaussianBlur class, its functional gaussian_blur) of API 'v1' or 'v2'; skips
    when this torchvision has no v2 (0.14)."""
    if api == "v1":
        from torchvision import transforms as T
        from torchvision.transforms import functional as F
        return T.GaussianBlur, F.gaussian_blur
    try:
        from torchvision.transforms import v2 as T
        from torchvision.transforms.v2 import functional as F
    except ImportError:
        pytest.skip("this torchvision has no transforms.v2")
    return T.GaussianBlur, F.gaussian_blur


def _vexp_env():
    """(the tool's environment with STK_AUGOPS_VEXP set to the exp the binding hands the Loader for
    v1's kernel, or None without one; exact): exact is False only for a torch 2.x whose exp is MKL's
    but cannot be had — on this machine's PyPI torch it must be had (asserted)."""
    import torch
    from stoker import augment
    v = augment.torch_vexp(torch)
    if torch.backends.mkl.is_available():
        assert v is not None, augment.torch_vexp_problem(torch)
    if v is None:
        return None, _torch1()
    return dict(os.environ, STK_AUGOPS_VEXP="%s %d %s" % (v.symbol, v.arg, v.library)), True


def _blur_program(cls, kernel_size, sigma):
    """The STK_P_AUG_STEPS program the binding makes of CLS(kernel_size, sigma)."""
    from stoker import _lib, augment
    progs = [v for k, v, _ in augment.params([cls(kernel_size, sigma)]) if k == _lib.P_AUG_STEPS]
    assert len(progs) == 1
    return progs[0]


def _blur_cases(seed, n):
    """N random GaussianBlur cases (h, w, kx, ky, smin, smax): odd kernels 1..23 on each axis,
    sigmas from 0.01 to 50 (fixed or a range), sides from 1 to 80, a third of them at the smallest
    side torch's reflect padding takes (kernel // 2 + 1) and some smaller still (stoker folds the
    reflection again there; torch refuses, so those are only run, not compared)."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        kx, ky = (int(k) for k in rng.choice(np.arange(1, 24, 2), 2))
        h, w = (int(v) for v in rng.integers(1, 81, 2))
        r = rng.random()
        if r < 0.35:
            h, w = ky // 2 + 1, max(w, kx // 2 + 1)
        elif r < 0.45:
            h, w = max(1, ky // 2 - int(rng.integers(0, 3))), kx // 2 + 1
        lo = float(np.exp(rng.uniform(np.log(0.01), np.log(50.0))))
        hi = lo if rng.random() < 0.3 else lo * float(np.exp(rng.uniform(0, 2)))
        yield h, w, kx, ky, lo, hi


@pytest.mark.parametrize("api", ["v1", "v2"])
def test_gaussian_blur_equals_torchvision(tmp_path, api):
    """GaussianBlur of transforms (v1) and transforms.v2 through the program the binding makes,
    over 160 random images, sizes, kernels and sigmas, against torchvision's gaussian_blur on the
    tensor (its PIL path is the same: pil_to_tensor, then it; checked on one image in four).
    Byte for byte. v1's kernel's exp is torch.exp: SLEEF's without MKL (repeated), MKL's vmsExp
    with it (the PyPI wheels: the binding's torch_vexp, given to the tool as the Loader gets it).
    Only a torch 2.x with MKL whose vmsExp cannot be had would leave glibc's expf standing in (1%
    of its results one ulp off): at most one level, on fewer than 0.01% of values. v2's kernel (a
    softmax) uses torch's own SLEEF exp: equal."""
    _skip()
    import torch
    from PIL import Image
    cls, blur = _blur_api(api)
    env, exact = _vexp_env() if api == "v1" else (None, True)
    off = total = compared = 0
    cases = list(_blur_cases(27 if api == "v1" else 28, 160))
    jobs = []
    for n, (h, w, kx, ky, lo, hi) in enumerate(cases):
        img = photo(h, w, 400 + n) if h >= 8 and w >= 8 else \
            np.random.default_rng(n).integers(0, 256, (h, w, 3), dtype=np.uint8)
        prog = _blur_program(cls, [kx, ky], (lo, hi))
        assert prog == [5 if api == "v1" else 8, kx, ky, lo, hi], prog
        jobs.append((prog, n, img))
    for n, ((h, w, kx, ky, lo, hi), (_, _, img), (out, got)) in enumerate(zip(cases, jobs,
                                                                             _steps_batch(tmp_path, jobs, env))):
        sigma = float(out.split()[1])
        assert lo * (1 - 1e-6) <= sigma <= hi * (1 + 1e-6), (sigma, lo, hi)
        if kx // 2 >= w or ky // 2 >= h:
            assert got.shape == img.shape      # torch's reflect padding refuses; stoker folds again
            continue
        t = torch.from_numpy(img).permute(2, 0, 1).contiguous()
        want = blur(t, [kx, ky], [sigma, sigma]).permute(1, 2, 0).numpy()
        if n % 4 == 0:
            pil = np.asarray(blur(Image.fromarray(img), [kx, ky], [sigma, sigma]))
            assert np.array_equal(pil, want), (api, h, w, kx, ky, sigma)
        d = np.abs(got.astype(int) - want.astype(int))
        assert d.max() <= (0 if exact else 1), (api, h, w, kx, ky, sigma, int((d > 0).sum()))
        off += int((d > 0).sum())
        total += d.size
        compared += 1
    print("GaussianBlur %s: %d of %d values one level off in %d cases" % (api, off, total, compared))
    assert compared >= 120 and off <= (0 if exact else total * 1e-4), (off, total, compared)


def test_gaussian_blur_v1_with_torchs_exp(tmp_path):
    """Under a torch whose exp is MKL's: images made so that the blur tells torch.exp from glibc's
    expf (tests/python/blur_ref.py) equal torchvision byte for byte with the exp the binding hands
    over, and differ without it (so the random cases above would not pass by luck)."""
    _skip()
    import torch
    from blur_ref import exp_telling_cases
    from torchvision.transforms import functional as F
    env, _ = _vexp_env()
    if env is None:
        pytest.skip("this torch's exp is not MKL's (no torch_vexp): nothing to hand over")
    cases = exp_telling_cases(torch)
    if len(cases) < 3:
        pytest.skip("glibc's expf and torch.exp built the same blur on all but %d of 200 kernels" % len(cases))
    jobs = [([5, k, k, sigma, sigma], 0, img) for k, sigma, img, _ in cases]
    with_exp = without = 0
    for (k, sigma, img, _), (_, a), (_, b) in zip(cases, _steps_batch(tmp_path, jobs, env), _steps_batch(tmp_path, jobs)):
        want = F.gaussian_blur(torch.from_numpy(img).permute(2, 0, 1).contiguous(), [k, k], [sigma, sigma])
        want = want.permute(1, 2, 0).numpy()
        with_exp += int((a != want).sum())
        without += int((b != want).sum())
    print("torch's exp: %d values off; glibc's: %d, in %d cases" % (with_exp, without, len(cases)))
    assert with_exp == 0 and without > 0, (with_exp, without)


@pytest.mark.parametrize("api", ["v1", "v2"])
def test_gaussian_blur_5_sigma_1_5(tmp_path, api):
    """The case the issue found one level off (1 of 712 704 values): GaussianBlur(5, sigma=1.5)
    on 464 x 512, byte for byte, with the exp the binding hands the Loader (and without it: glibc's
    exp and MKL's agree on its three arguments)."""
    _skip()
    import torch
    cls, blur = _blur_api(api)
    prog = _blur_program(cls, 5, 1.5)
    env = _vexp_env()[0] if api == "v1" else None
    imgs = [photo(464, 512, 900 + seed) for seed in range(3)]
    for e in [env, None] if env else [None]:
        for seed, (img, (out, got)) in enumerate(zip(imgs, _steps_batch(tmp_path, [(prog, 0, i) for i in imgs], e))):
            assert float(out.split()[1]) == 1.5
            t = torch.from_numpy(img).permute(2, 0, 1).contiguous()
            want = blur(t, [5, 5], [1.5, 1.5]).permute(1, 2, 0).numpy()
            assert np.array_equal(got, want), (seed, e is not None, int((got != want).sum()))


@pytest.mark.parametrize("api", ["v1", "v2"])
def test_gaussian_blur_extreme_sigmas(tmp_path, api):
    """Sigmas torchvision accepts at both ends: 1e-30 (v2's kernel is NaN for some sizes there:
    every value 0, as torch's cast of NaN), 1e-6, 1e6 and 1e30 (the box-like kernel), byte for
    byte."""
    _skip()
    import torch
    cls, blur = _blur_api(api)
    env = _vexp_env()[0] if api == "v1" else None
    img = photo(40, 33, 77)
    t = torch.from_numpy(img).permute(2, 0, 1).contiguous()
    cases = list(itertools.product((1e-30, 1e-6, 1e6, 1e30), (3, 7, 23)))
    outs = _steps_batch(tmp_path, [(_blur_program(cls, k, sigma), 0, img) for sigma, k in cases], env)
    for (sigma, k), (out, got) in zip(cases, outs):
        s = float(out.split()[1])
        want = blur(t, [k, k], [s, s]).permute(1, 2, 0).numpy()
        assert np.array_equal(got, want), (api, sigma, k, int((got != want).sum()))
