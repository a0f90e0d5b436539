# SPDX-License-Identifier: MIT
"""stoker.Loader's arguments: dtype, device, layout, filter, resize, normalisation and the
distributed rank, each parsed into the library's parameter values (with the messages of a bad
value), and torch imported once when it can be."""

import os
import sys

import numpy as np

from . import _lib
from . import dataset as _dataset

_NP_DTYPE = {
    _lib.DTYPE_UINT8: np.dtype(np.uint8),
    _lib.DTYPE_FLOAT16: np.dtype(np.float16),
    _lib.DTYPE_BFLOAT16: np.dtype(np.int16),  # raw bits; torch views them as bfloat16
    _lib.DTYPE_FLOAT32: np.dtype(np.float32),
}
_CAI_TYPESTR = {
    _lib.DTYPE_UINT8: "|u1",
    _lib.DTYPE_FLOAT16: "<f2",
    _lib.DTYPE_BFLOAT16: "<i2",
    _lib.DTYPE_FLOAT32: "<f4",
}
_DTYPE_NAMES = {
    "uint8": _lib.DTYPE_UINT8, "u8": _lib.DTYPE_UINT8, "byte": _lib.DTYPE_UINT8,
    "float16": _lib.DTYPE_FLOAT16, "half": _lib.DTYPE_FLOAT16, "fp16": _lib.DTYPE_FLOAT16,
    "f2": _lib.DTYPE_FLOAT16,
    "bfloat16": _lib.DTYPE_BFLOAT16, "bf16": _lib.DTYPE_BFLOAT16,
    "float32": _lib.DTYPE_FLOAT32, "float": _lib.DTYPE_FLOAT32, "fp32": _lib.DTYPE_FLOAT32,
    "f4": _lib.DTYPE_FLOAT32,
}
_TARGET_NP = _dataset.TARGET_NP_DTYPE
DTYPE_NAMES = {_lib.DTYPE_UINT8: "uint8", _lib.DTYPE_FLOAT16: "float16",
               _lib.DTYPE_BFLOAT16: "bfloat16", _lib.DTYPE_FLOAT32: "float32"}


_torch_state = {"tried": False, "mod": None}


def _torch():
    """torch if importable (imported once), else None."""
    if not _torch_state["tried"]:
        _torch_state["tried"] = True
        try:
            import torch  # noqa: F401
            _torch_state["mod"] = torch
        except ImportError:
            _torch_state["mod"] = None
    return _torch_state["mod"]


def parse_dtype(dtype):
    """A torch dtype, numpy dtype or name -> STK_DTYPE_*."""
    if dtype is None:
        return _lib.DTYPE_UINT8
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(dtype, torch.dtype):
        table = {torch.uint8: _lib.DTYPE_UINT8, torch.float16: _lib.DTYPE_FLOAT16,
                 torch.bfloat16: _lib.DTYPE_BFLOAT16, torch.float32: _lib.DTYPE_FLOAT32}
        if dtype in table:
            return table[dtype]
        raise ValueError("dtype %s is not supported: use uint8, float16, bfloat16 or float32"
                         % (dtype,))
    if isinstance(dtype, str):
        name = dtype.lower()
        for prefix in ("torch.", "np.", "numpy."):
            if name.startswith(prefix):
                name = name[len(prefix):]
        if name in _DTYPE_NAMES:
            return _DTYPE_NAMES[name]
    try:
        nd = np.dtype(dtype)
    except TypeError:
        nd = None
    if nd is not None:
        table = {np.dtype(np.uint8): _lib.DTYPE_UINT8, np.dtype(np.float16): _lib.DTYPE_FLOAT16,
                 np.dtype(np.float32): _lib.DTYPE_FLOAT32}
        if nd in table:
            return table[nd]
    raise ValueError("dtype %r is not supported: use uint8, float16, bfloat16 or float32"
                     % (dtype,))


def parse_device(device):
    """'cpu' | 'cuda' | 'cuda:N' | torch.device | int -> CUDA ordinal or -1."""
    if device is None:
        return -1
    if isinstance(device, bool):
        raise ValueError("device must be 'cpu', 'cuda', 'cuda:N' or an ordinal, not %r" % device)
    if isinstance(device, int):
        if device < -1:
            raise ValueError("device ordinal must be >= 0 (or -1 for the CPU), not %d" % device)
        return device
    text = str(device).strip().lower()
    if text == "cpu":
        return -1
    if text == "cuda":
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            return int(torch.cuda.current_device())
        return 0
    if text.startswith("cuda:"):
        try:
            n = int(text[5:])
        except ValueError:
            n = -1
        if n >= 0:
            return n
    raise ValueError("device must be 'cpu', 'cuda', 'cuda:N' or an ordinal, not %r" % (device,))


def parse_layout(layout):
    text = str(layout).upper()
    if text in ("NCHW", "CHW"):
        return _lib.NCHW
    if text in ("NHWC", "HWC"):
        return _lib.NHWC
    raise ValueError("layout must be 'NCHW' or 'NHWC', not %r" % (layout,))


INTERP_NAMES = {"bilinear": _lib.INTERP_BILINEAR, "bicubic": _lib.INTERP_BICUBIC,
                "nearest": _lib.INTERP_NEAREST, "random": _lib.INTERP_RANDOM}


_PIL_FILTERS = {0: "nearest", 2: "bilinear", 3: "bicubic"}   # PIL.Image.NEAREST, BILINEAR, BICUBIC


def installed_pillow_passes():
    """STK_RESIZE_PASSES_* of the Pillow this interpreter would import (Pillow 13 changed the
    order of its resize passes), PILLOW12 when there is none."""
    try:
        from PIL import __version__ as v
        major = int(str(v).split(".")[0])
    except (ImportError, ValueError):
        return _lib.RESIZE_PASSES_PILLOW12
    return _lib.RESIZE_PASSES_PILLOW13 if major >= 13 else _lib.RESIZE_PASSES_PILLOW12


def parse_resize_passes(value):
    """None (the installed Pillow's), "pillow12" or "pillow13" -> STK_RESIZE_PASSES_*."""
    if value is None:
        return installed_pillow_passes()
    names = {"pillow12": _lib.RESIZE_PASSES_PILLOW12, "pillow13": _lib.RESIZE_PASSES_PILLOW13}
    if isinstance(value, str) and value.lower() in names:
        return names[value.lower()]
    raise ValueError("resize_passes must be None (the installed Pillow's), 'pillow12' or 'pillow13', "
                     "not %r" % (value,))


def parse_interpolation(interpolation):
    """'bilinear' | 'bicubic' | 'nearest' | 'random' (any case), torchvision's InterpolationMode
    (its .value is that name) or Pillow's filter number -> STK_INTERP_*."""
    name = getattr(interpolation, "value", interpolation)
    if isinstance(name, int) and not isinstance(name, bool):
        name = _PIL_FILTERS.get(int(name), name)
    if isinstance(name, str) and name.lower() in INTERP_NAMES:
        return INTERP_NAMES[name.lower()]
    raise ValueError("interpolation must be 'bilinear', 'bicubic', 'nearest' (Pillow's filters, "
                     "byte for byte) or 'random' (timm's: bilinear or bicubic per image), not %r"
                     % (interpolation,))


def parse_resize(resize):
    """eval's Resize: an int (the shorter side, torchvision Resize(int)) -> (int, None), or
    (height, width) (Resize((h, w)), no aspect kept) -> (None, (h, w))."""
    if isinstance(resize, (tuple, list)):
        if len(resize) == 1:
            return int(resize[0]), None
        if len(resize) != 2:
            raise ValueError("resize must be an int or (height, width), got %r" % (resize,))
        h, w = int(resize[0]), int(resize[1])
        if h < 1 or w < 1:
            raise ValueError("resize=(height, width) must be positive, got %r" % (resize,))
        return None, (h, w)
    return int(resize), None


def _triple(value, name):
    if np.ndim(value) == 0:
        v = [float(value)] * 3
    else:
        v = [float(x) for x in value]
        if len(v) == 1:
            v = v * 3
    if len(v) != 3:
        raise ValueError("%s must be a number or 3 numbers (one per RGB channel), got %r"
                         % (name, value))
    return v


def normalization(dtype_code, mean, std):
    """Library mean/std (0..255 units) for the torchvision-convention MEAN/STD (0..1 units).

    float output without mean/std is x/255 (torchvision's ToTensor); with them it is
    Normalize(mean, std)(x/255) = (x - 255*mean) / (255*std). uint8 output takes neither.
    Returns (mean3, std3) or None.
    """
    if dtype_code == _lib.DTYPE_UINT8:
        if mean is not None or std is not None:
            raise ValueError("mean/std need a float dtype (float16, bfloat16 or float32); "
                             "uint8 output is the raw 0..255 pixels")
        return None
    m = _triple(0.0 if mean is None else mean, "mean")
    s = _triple(1.0 if std is None else std, "std")
    for x in s:
        if not x > 0:
            raise ValueError("std must be > 0, got %r" % (std,))
    return [x * 255.0 for x in m], [x * 255.0 for x in s]


def resolve_distributed(rank, world_size):
    """(rank, world_size): explicit values, else torch.distributed when initialised, else the
    RANK / WORLD_SIZE environment variables, else (0, 1)."""
    r, w = rank, world_size
    if r is None or w is None:
        tr = tw = None
        torch = sys.modules.get("torch")
        dist = getattr(torch, "distributed", None) if torch is not None else None
        if dist is not None and dist.is_available() and dist.is_initialized():
            tr, tw = dist.get_rank(), dist.get_world_size()
        else:
            env_r, env_w = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
            if env_w is not None:
                try:
                    tw = int(env_w)
                    tr = int(env_r) if env_r is not None else 0
                except ValueError:
                    raise ValueError("RANK=%r / WORLD_SIZE=%r are not integers"
                                     % (env_r, env_w)) from None
        if w is None:
            w = tw if tw is not None else 1
        if r is None:
            r = tr if tr is not None else 0
    r, w = int(r), int(w)
    if w < 1 or not 0 <= r < w:
        raise ValueError("need 0 <= rank < world_size, got rank=%d world_size=%d" % (r, w))
    return r, w
