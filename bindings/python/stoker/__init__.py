# SPDX-License-Identifier: MIT
"""stoker: keep GPUs fed — packed image shards, io_uring reads, libjpeg-turbo decode and
augmentation, a pinned batch ring and a CUDA stager, behind a DataLoader-like iterator.

Pure Python over ctypes (no compiled extension): the C library ``libstoker`` is found through
``$STOKER_LIBRARY``, next to this package, in the install prefix or on the loader path, and its
version is checked on import (see ``stoker._lib``).

    import stoker
    stoker.pack("imagenet/train", "shards/train")          # once
    loader = stoker.Loader("shards/train", batch_size=256, train=True, size=224,
                           dtype="float32", mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    for epoch in range(90):
        loader.set_epoch(epoch)
        for images, labels in loader:
            ...

Works without torch (NumPy arrays) and without a GPU.
"""

import sys

from . import _lib
from .errors import (BadRecordWarning, Cancelled, DataError, DatasetExists, InvalidArgument, StateError,
                     StokerError, StokerIOError, StokerMemoryError, StokerTimeout, Unsupported)

_lib.get()   # load and version-check libstoker now: a clear ImportError rather than a late one

from .dataset import Dataset, decode, image_info, info, pack  # noqa: E402
from .loader import Loader, LoaderStats  # noqa: E402
from .mix import CutMix, MixUp, RandomChoice  # noqa: E402
from .dataloader import ImageFolder  # noqa: E402

if sys.modules.get("torch") is not None:   # torch is there already: build stoker.DataLoader (a subclass of
    from . import dataloader as _dl  # noqa: E402  torch's) now, before a framework lists them
    DataLoader = _dl.DataLoader

__version__ = "%d.%d.%d" % _lib.get().version
library_path = _lib.get().path


def __getattr__(name):
    if name in ("ExactDistributedSampler", "DataLoader"):   # torch classes: built when first asked for
        from . import dataloader
        return getattr(dataloader, name)
    raise AttributeError("module 'stoker' has no attribute %r" % (name,))


def version_string():
    """The library's version and build features, e.g. "0.5.0 (uring cuda)"."""
    return _lib.text(_lib.get().stk_version_string())


def has_cuda():
    """True when the library was built with CUDA and sees at least one device."""
    lib = _lib.get()
    return bool(lib.stk_has_feature(_lib.FEATURE_CUDA)) and lib.stk_cuda_device_count() > 0


def strerror(status):
    """Text of a status code (STK_* or a negated errno)."""
    return _lib.text(_lib.get().stk_strerror(int(status)))


__all__ = ["Loader", "LoaderStats", "MixUp", "CutMix", "RandomChoice", "DataLoader", "ImageFolder", "ExactDistributedSampler", "Dataset", "pack", "info", "decode", "image_info",
           "StokerError", "DataError", "BadRecordWarning", "StokerIOError", "StateError", "InvalidArgument",
           "Cancelled", "Unsupported", "DatasetExists", "StokerTimeout", "StokerMemoryError",
           "version_string", "has_cuda", "strerror", "library_path", "__version__"]
