# SPDX-License-Identifier: MIT
"""The vector exp torch.exp runs on float32 CPU tensors, for transforms.GaussianBlur's kernel.

torch builds with Intel MKL (the PyPI x86-64 wheels) compute torch.exp with MKL's vmsExp
(ATen/cpu/vml.h: ``vmsExp(n, in, out, VML_HA | VML_FTZDAZ_OFF | VML_ERRMODE_IGNORE)`` over the
contiguous vector), closed code the library cannot repeat. libtorch_cpu.so exports it, so the
binding takes that very function (from the copy of the library torch loaded, never another MKL)
and hands it to the loader (stk_loader_set_vexp) only after checking it against torch.exp itself
on kernel-sized vectors. Builds without MKL (Debian's, aarch64) run SLEEF's exp: nothing to hand
over. docs/ARCHITECTURE.md, "GaussianBlur repeats torch's arithmetic".
"""

import ctypes
import os

import numpy as np

# VML_HA | VML_FTZDAZ_OFF | VML_ERRMODE_IGNORE (mkl_vml_defines.h): the mode vml.h passes
VML_MODE = 0x00000002 | 0x00140000 | 0x00000100
SYMBOL = "vmsExp"


class TorchVexp:
    """What stk_loader_set_vexp gets: ADDRESS (vmsExp of LIBRARY) called with ARG as the mode."""

    def __init__(self, library, symbol, arg, address, fn):
        self.library, self.symbol, self.arg, self.address = library, symbol, arg, address
        self._fn = fn      # keeps the ctypes function (and its library handle) alive

    def __repr__(self):
        return "TorchVexp(%s of %s, arg=%#x)" % (self.symbol, self.library, self.arg)


_cache = {}


def _probe_args():
    """Arguments as GaussianBlur's kernel makes them, -0.5 (x / sigma)^2 in float32, for many
    sigmas and kernel sizes, plus values spread over exp's float32 range below 0."""
    rng = np.random.default_rng(2027)
    sig = np.exp(rng.uniform(np.log(0.01), np.log(50.0), 400)).astype(np.float32)
    x = np.arange(-127, 128, dtype=np.float32)
    t = x[None, :] / sig[:, None]
    kern = (np.float32(-0.5) * (t * t)).reshape(-1)
    spread = -(rng.random(16384, dtype=np.float32) * np.float32(104.0))
    return np.ascontiguousarray(np.concatenate([kern, spread, np.float32([0.0, -0.0, -1e-30, -104.0, -200.0])]))


def _check(torch, fn, arg):
    """None when FN(n, x, y, ARG) equals torch.exp bit for bit on the probe, called in pieces of
    the odd lengths 1..255 a kernel has (torch.exp of each piece alone); else why not."""
    x = _probe_args()
    y = np.empty_like(x)
    off = bad = 0
    k = 1
    while off < x.size:
        n = min(k, x.size - off)
        piece = x[off:off + n]
        fn(n, piece.ctypes.data, y[off:].ctypes.data, arg)
        want = torch.exp(torch.from_numpy(piece)).numpy()
        bad += int((y[off:off + n].view(np.uint32) != want.view(np.uint32)).sum())
        off += n
        k = k + 2 if k < 255 else 1
    return None if bad == 0 else "it differs from torch.exp on %d of %d arguments" % (bad, x.size)


def _loaded_libtorch_cpu(torch):
    """Paths of the libtorch_cpu.so this process has loaded: torch's lib/ first, then what
    /proc/self/maps names (a torch whose library lives elsewhere)."""
    paths = [os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")]
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                name = line.rstrip("\n").split(None, 5)[-1]
                if os.path.basename(name).startswith("libtorch_cpu.") and name not in paths:
                    paths.append(name)
    except OSError:
        pass
    return paths


def _open_loaded(paths):
    """(path, ctypes library) of the first of PATHS already loaded (RTLD_NOLOAD: the copy torch
    loaded, never a second one), or raises OSError naming them."""
    mode = getattr(os, "RTLD_NOLOAD", 0) | os.RTLD_LOCAL
    errors = []
    for path in paths:
        try:
            return path, ctypes.CDLL(path, mode=mode)
        except OSError as e:
            errors.append(str(e))
    raise OSError("; ".join(errors))


def resolve(torch):
    """(TorchVexp, None) when TORCH's torch.exp is MKL's vmsExp and it was found and checked;
    (None, None) when this torch has no MKL (its exp is SLEEF's, which the library repeats for
    torch 1.x); (None, reason) when it has MKL but the function cannot be used. Cached per torch."""
    key = id(torch)
    if key in _cache:
        return _cache[key]
    out = (None, None)
    mkl = getattr(getattr(torch, "backends", None), "mkl", None)
    if mkl is not None and mkl.is_available():
        paths = _loaded_libtorch_cpu(torch)
        path = paths[0]
        try:
            path, so = _open_loaded(paths)
            fn = getattr(so, SYMBOL)    # dlsym: the library, then its dependencies (a dynamic MKL)
        except (OSError, AttributeError) as e:
            out = (None, "%s of %s cannot be had: %s" % (SYMBOL, path, e))
        else:
            fn.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong]
            fn.restype = None
            why = _check(torch, fn, VML_MODE)
            address = ctypes.cast(fn, ctypes.c_void_p).value
            out = (TorchVexp(path, SYMBOL, VML_MODE, address, fn), None) if why is None else \
                (None, "%s of %s: %s" % (SYMBOL, path, why))
    _cache[key] = out
    return out
