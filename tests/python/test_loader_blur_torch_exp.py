# SPDX-License-Identifier: MIT
# stk-test: pixels (compared with an independent implementation: also run in the Release build)
"""stoker.Loader(augment=[transforms.GaussianBlur(...)]) computes v1's kernel with torch's own exp.

A torch built with Intel MKL (the PyPI x86-64 wheels) runs torch.exp as MKL's vmsExp; the binding
takes it from libtorch_cpu.so (stoker.augment.torch_vexp, checked against torch.exp) and hands it
to the loader (stk_loader_set_vexp), so v1's blur equals torchvision's byte for byte there too:
- the function found is vmsExp of this torch's libtorch_cpu.so with vml.h's mode; a torch without
  MKL (Debian's 1.13) gets none and no complaint;
- images made to tell the two exps apart (tests/python/blur_ref.py) blurred through the Loader
  equal torchvision's blur of the same samples unblurred, and differ once the binding hands over
  nothing (glibc's expf standing in);
- the issue's GaussianBlur(5, sigma=1.5) on 464 x 512 images: equal;
- when vmsExp cannot be had, a v1 GaussianBlur warns once (RuntimeWarning) and stays within one
  level; v2's blur (SLEEF's exp in every build) asks for nothing.
"""
import os
import warnings

import numpy as np
import pytest

from conftest import torch_or_skip
from augops_ref import photo


def _mkl_torch():
    torch = torch_or_skip()
    if not torch.backends.mkl.is_available():
        pytest.skip("this torch has no MKL: torch.exp is SLEEF's, which the library repeats")
    return torch


def _folder(root, images):
    """An ImageFolder of lossless PNGs (one class), in order."""
    from PIL import Image
    d = os.path.join(root, "c")
    os.makedirs(d, exist_ok=True)
    for i, img in enumerate(images):
        Image.fromarray(img).save(os.path.join(d, "%03d.png" % i))
    return root


def _samples(stoker, root, h, w, augment):
    """Every sample of ROOT at its own size (eval: resize and crop to H x W, the identity), uint8
    HWC, in order."""
    with stoker.Loader(root, 4, size=(h, w), resize=(h, w), train=False, layout="NHWC", workers=2,
                       augment=augment) as loader:
        return np.concatenate([np.array(b[0].numpy(), copy=True) for b in loader])


def _torchvision(torch, samples, k, sigma):
    from torchvision.transforms import functional as F
    return np.stack([F.gaussian_blur(torch.from_numpy(s).permute(2, 0, 1).contiguous(), [k, k], [sigma, sigma])
                     .permute(1, 2, 0).numpy() for s in samples])


def test_torch_vexp_is_torchs_vmsexp(stoker_mod):
    torch = torch_or_skip()
    from stoker import augment
    v = augment.torch_vexp(torch)
    if not torch.backends.mkl.is_available():
        assert v is None and augment.torch_vexp_problem(torch) is None
        return
    assert v is not None, augment.torch_vexp_problem(torch)
    assert v.symbol == "vmsExp" and v.arg == 0x2 | 0x140000 | 0x100    # VML_HA | FTZDAZ_OFF | ERRMODE_IGNORE
    assert os.path.samefile(v.library, os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
    assert v.address and augment.torch_vexp(torch) is v                # resolved once per torch


def test_loader_blur_tells_torchs_exp(stoker_mod, tmp_path, monkeypatch):
    torch = _mkl_torch()
    from blur_ref import exp_telling_cases
    from stoker import augment
    from torchvision import transforms as T
    cases = exp_telling_cases(torch, want=4)
    if len(cases) < 3:
        pytest.skip("glibc's expf and torch.exp built the same blur on all but %d kernels" % len(cases))
    off = {"torch": 0, "none": 0}
    for n, (k, sigma, img, _) in enumerate(cases):
        root = _folder(str(tmp_path / str(n)), [img])
        h, w = img.shape[:2]
        plain = _samples(stoker_mod, root, h, w, None)
        assert np.array_equal(plain[0], img)          # the patches reach the blur as made
        want = _torchvision(torch, plain, k, sigma)
        off["torch"] += int((_samples(stoker_mod, root, h, w, [T.GaussianBlur(k, sigma)]) != want).sum())
        with monkeypatch.context() as m:              # the binding hands nothing over: glibc's expf
            m.setattr(augment, "_vexp_param", lambda resolved: [])
            off["none"] += int((_samples(stoker_mod, root, h, w, [T.GaussianBlur(k, sigma)]) != want).sum())
    assert off["torch"] == 0 and off["none"] > 0, off


def test_loader_blur_5_sigma_1_5(stoker_mod, tmp_path):
    """The issue's case, with whatever exp this torch has (MKL's or SLEEF's): equal."""
    torch = torch_or_skip()
    from torchvision import transforms as T
    root = _folder(str(tmp_path), [photo(464, 512, 900 + i) for i in range(4)])
    plain = _samples(stoker_mod, root, 464, 512, None)
    got = _samples(stoker_mod, root, 464, 512, [T.GaussianBlur(5, sigma=1.5)])
    want = _torchvision(torch, plain, 5, 1.5)
    assert np.array_equal(got, want), int((got != want).sum())


def test_without_vmsexp_warns_once(stoker_mod, tmp_path, monkeypatch):
    torch = _mkl_torch()
    from stoker import _vexp, augment
    from torchvision import transforms as T
    from torchvision.transforms import v2 as T2
    monkeypatch.setattr(_vexp, "SYMBOL", "vmsExpNotThere")
    monkeypatch.setattr(_vexp, "_cache", {})
    monkeypatch.setattr(augment, "_vexp_warned", [])
    root = _folder(str(tmp_path), [photo(40, 48, 5 + i) for i in range(4)])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _samples(stoker_mod, root, 40, 48, [T2.GaussianBlur(5, (0.5, 3.0))])
        assert not [x for x in seen if "GaussianBlur" in str(x.message)]      # v2 needs no exp from torch
        plain = _samples(stoker_mod, root, 40, 48, None)
        got = _samples(stoker_mod, root, 40, 48, [T.GaussianBlur(7, 1.7)])
        _samples(stoker_mod, root, 40, 48, [T.GaussianBlur(7, 1.7)])
    said = [x for x in seen if "GaussianBlur" in str(x.message)]
    assert len(said) == 1 and said[0].category is RuntimeWarning, [str(x.message) for x in seen]
    assert "vmsExpNotThere" in str(said[0].message) and "one level" in str(said[0].message)
    d = np.abs(got.astype(int) - _torchvision(torch, plain, 7, 1.7).astype(int))
    assert d.max() <= 1                                # today's behaviour: glibc's expf stands in
