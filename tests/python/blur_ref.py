# SPDX-License-Identifier: MIT
"""Images on which transforms.GaussianBlur's result tells torch.exp from glibc's expf.

Random photos hardly ever show which exp built v1's kernel: a weight one ulp apart moves a blurred
value by about 1e-5 of a level, so about 1 value in a million rounds differently (3 of 4 126 809 in
300 random blurs under torch 2.15). These cases are made to: for random kernels (k, sigma) whose
float32 weights differ between torch.exp (this torch's: MKL's vmsExp in the PyPI wheels) and
glibc's expf, random k x k patches are blurred at their centre with both kernels — conv2d's
float32 fused multiply-add chain in row order, emulated in float64 (a product of two float32 is
exact there) — and the patches whose two results round to different levels are kept. Each case is
an image of such patches side by side: its blur through stoker equals torchvision's only when
stoker's kernel was built with torch's own exp.
"""
import ctypes

import numpy as np


def _kernel2d(torch, k, sigma, exp):
    """torchvision's v1 kernel (_get_gaussian_kernel2d) with EXP standing for torch.exp."""
    x = torch.linspace(-(k - 1) * 0.5, (k - 1) * 0.5, k)
    pdf = exp(-0.5 * (x / sigma).pow(2))
    k1 = pdf / pdf.sum()
    return torch.mm(k1[:, None], k1[None, :]).numpy()


def _glibc_exp(torch):
    libm = ctypes.CDLL("libm.so.6")
    libm.expf.restype, libm.expf.argtypes = ctypes.c_float, [ctypes.c_float]
    return lambda a: torch.tensor([libm.expf(float(v)) for v in a.numpy()], dtype=torch.float32)


def _centre(kernel, patches):
    """The blurred centre of each patch: fma(w, p, acc) from 0 over the taps in row order."""
    acc = np.zeros(patches.shape[0], np.float32)
    for t, w in enumerate(kernel.reshape(-1)):
        acc = (np.float64(w) * patches[:, t].astype(np.float64) + acc.astype(np.float64)).astype(np.float32)
    return acc


def exp_telling_cases(torch, want=6, kernels=600, taps=16_000_000, seed=5):
    """Up to WANT cases (k, sigma, image H x W x 3 uint8, patches it holds): of KERNELS random
    kernels (k odd 3..23, sigma 0.3..20 in float32) those whose two versions differ, the most
    promising first (the sum of the weights' differences over the patch's cost, k^2), each tried on
    TAPS / k^2 random patches (a value moves by about that sum x 128: a patch tells the two apart
    with about that chance)."""
    rng = np.random.default_rng(seed)
    glibc = _glibc_exp(torch)
    ranked = []
    for _ in range(kernels):
        k = int(rng.choice(np.arange(3, 24, 2)))
        sigma = float(np.float32(np.exp(rng.uniform(np.log(0.3), np.log(20.0)))))
        kt, kg = _kernel2d(torch, k, sigma, torch.exp), _kernel2d(torch, k, sigma, glibc)
        gap = float(np.abs(kt.astype(np.float64) - kg).sum())
        if gap > 0:
            ranked.append((gap / (k * k), k, sigma, kt, kg))
    ranked.sort(key=lambda r: -r[0])
    cases = []
    for _, k, sigma, kt, kg in ranked[:2 * want]:
        if len(cases) == want:
            break
        p = rng.integers(0, 256, (taps // (k * k), k * k), dtype=np.uint8)
        hit = np.nonzero(np.rint(_centre(kt, p)) != np.rint(_centre(kg, p)))[0][:8]
        if len(hit) == 0:
            continue
        img = np.zeros((k, len(hit) * k, 3), np.uint8)
        for i, j in enumerate(hit):
            img[:, i * k:(i + 1) * k, :] = p[j].reshape(k, k)[:, :, None]
        cases.append((k, sigma, img, len(hit)))
    return cases
