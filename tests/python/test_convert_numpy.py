# SPDX-License-Identifier: MIT
# stk-test: pixels (compared with an independent implementation: also run in the Release build)
"""The CPU conversion path (stk__convert_sample) equals a NumPy reference for every dtype
(uint8, float16, bfloat16, float32) x layout (NCHW, NHWC) x normalisation (on / off).

Reference: value = (x.astype(float32) - mean) / std in float32 (a division, as documented in
src/stage/convert.h); float16 via NumPy's astype (round to nearest even); bfloat16 from the float32 bit
pattern with round-to-nearest-even done in NumPy integer arithmetic (NumPy has no bfloat16):
bits + 0x7FFF + ((bits >> 16) & 1), top 16 bits; NaN -> quiet NaN. Exact equality required
(NaN compared as NaN).
"""
import itertools
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

TOOLS = Path(os.environ.get("TEST_TOOLS_DIR", ""))
DT = {0: "uint8", 1: "float16", 2: "bfloat16", 3: "float32"}


def bf16_bits(f32):
    f32 = np.ascontiguousarray(f32, dtype=np.float32)
    b = f32.view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f32)
    r[nan] = ((b[nan] >> 16) | 0x40).astype(np.uint16)
    return r


def reference(img, dtype, layout, norm, mean, std):
    x = img.astype(np.float32)
    if dtype == 0:
        v = img
    elif norm:
        v = (x - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
    else:
        v = x
    if layout == 0:
        v = np.transpose(v, (2, 0, 1))
    v = np.ascontiguousarray(v)
    if dtype == 1:
        return v.astype(np.float16).view(np.uint16)
    if dtype == 2:
        return bf16_bits(v)
    if dtype == 3:
        return v.astype(np.float32).view(np.uint32)
    return v


def run_convert(img, dtype, layout, norm, mean, std, tmp_path):
    src = tmp_path / "in.raw"
    img.tofile(src)
    out = tmp_path / "out.raw"
    h, w, _ = img.shape
    subprocess.run([str(TOOLS / "stk-aug"), "convert", str(src), str(h), str(w), str(dtype),
                    str(layout), str(int(norm)), *[repr(float(m)) for m in mean],
                    *[repr(float(s)) for s in std], str(out)], check=True)
    raw = np.fromfile(out, dtype={0: np.uint8, 1: np.uint16, 2: np.uint16, 3: np.uint32}[dtype])
    return raw.reshape((3, h, w) if layout == 0 else (h, w, 3))


@pytest.mark.parametrize("dtype,layout,norm", list(itertools.product([0, 1, 2, 3], [0, 1], [False, True])))
def test_convert_equals_numpy(dtype, layout, norm, tmp_path):
    rng = np.random.default_rng(dtype * 4 + layout * 2 + norm)
    img = rng.integers(0, 256, (37, 53, 3), dtype=np.uint8)
    img[0, :, :] = np.arange(53 * 3).reshape(53, 3) % 256  # every value appears
    img[1, :, 0] = 0
    img[1, :, 1] = 255
    # ImageNet mean/std in 0..255 units, then awkward ones: ties for float16/bfloat16 rounding,
    # tiny std (overflow to inf in float16), huge std (float16 subnormals), zero std (inf / NaN)
    for mean, std in [((123.675, 116.28, 103.53), (58.395, 57.12, 57.375)),
                      ((0.0, 0.0, 0.0), (1.0, 3.0, 7.0)),
                      ((128.0, 0.5, 255.0), (1e-3, 1e5, 1e7)),
                      ((100.0, 0.0, 7.0), (0.0, 0.0, 1e-30))]:
        got = run_convert(img, dtype, layout, norm, mean, std, tmp_path)
        with np.errstate(all="ignore"):
            ref = reference(img, dtype, layout, norm, mean, std)
        assert got.shape == ref.shape
        if dtype in (1, 2, 3):
            if dtype == 1:
                fg, fr = got.view(np.float16), ref.view(np.float16)
            elif dtype == 3:
                fg, fr = got.view(np.float32), ref.view(np.float32)
            else:
                fg = (got.astype(np.uint32) << 16).view(np.float32)
                fr = (ref.astype(np.uint32) << 16).view(np.float32)
            nan = np.isnan(fr)
            assert np.array_equal(np.isnan(fg), nan), (DT[dtype], mean, std)
            bad = (got != ref) & ~nan
            assert not bad.any(), (f"{DT[dtype]} layout {layout} norm {norm} mean {mean} std {std}: "
                                   f"{int(bad.sum())} values differ, first {got[bad][0]:#x} vs {ref[bad][0]:#x}")
        else:
            assert np.array_equal(got, ref)


def test_half_conversions_all_classes(tmp_path):
    """float32 -> float16 / bfloat16 over 4M values: every exponent, ties, subnormals, inf, NaN."""
    rng = np.random.default_rng(11)
    bits = rng.integers(0, 2 ** 32, 1 << 22, dtype=np.uint64).astype(np.uint32)
    # exact ties and near-ties for both formats
    base = rng.integers(0, 2 ** 32, 1 << 16, dtype=np.uint64).astype(np.uint32)
    ties = np.concatenate([(base & ~np.uint32(0x1FFF)) | np.uint32(0x1000),
                           (base & ~np.uint32(0xFFFF)) | np.uint32(0x8000),
                           (base & ~np.uint32(0xFFFF)) | np.uint32(0x7FFF)])
    special = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001,
                        0x477FEFFF, 0x477FF000, 0x33000000, 0x33000001, 0x387FFFFF, 0x38800000,
                        0x7F7FFFFF, 0x00000001], np.uint32)
    allbits = np.concatenate([bits, ties, special])
    f = allbits.view(np.float32)
    src = tmp_path / "f.bin"
    f.tofile(src)
    for kind in ("f16", "bf16"):
        out = tmp_path / f"{kind}.bin"
        subprocess.run([str(TOOLS / "stk-aug"), kind, str(src), str(out)], check=True)
        got = np.fromfile(out, dtype=np.uint16)
        with np.errstate(all="ignore"):
            ref = f.astype(np.float16).view(np.uint16) if kind == "f16" else bf16_bits(f)
        nan = np.isnan(f)
        if kind == "f16":
            assert np.array_equal(np.isnan(got.view(np.float16)), nan)
        else:
            assert np.array_equal(np.isnan((got.astype(np.uint32) << 16).view(np.float32)), nan)
        bad = (got != ref) & ~nan
        assert not bad.any(), f"{kind}: {int(bad.sum())} differ, e.g. {allbits[bad][0]:#x}: {got[bad][0]:#x} vs {ref[bad][0]:#x}"
