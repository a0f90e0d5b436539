# SPDX-License-Identifier: MIT
"""timm's ImageDataset read through: the folder it lists, as a torchvision ImageFolder stoker reads.

timm's ``create_dataset`` / ``create_loader`` build ``timm.data.ImageDataset`` over a
``ReaderImageFolder``: its own walk of the folder (samples sorted by natural key, classes by
the leaf folder name) and the same PIL decode as torchvision's ImageFolder (``Image.open`` +
``convert("RGB")``). When that dataset lists only files that torchvision's ImageFolder over the
same root lists too, with the same label for each, it is exactly ``Subset(ImageFolder(root),
order)``: stoker reads that, with the transform and target_transform read from the timm
dataset at every pass (timm's create_loader sets ``dataset.transform`` after building it, and
may change it between epochs). Anything else (another reader, load_bytes, another image mode,
extra features, a class map that renumbers the folders, nested folders) is refused with the
cause, and so runs on torch's DataLoader (stoker.pytail).
"""

import os
import weakref

from .transforms import _refuse, _tv

_CACHE = weakref.WeakKeyDictionary()       # timm dataset -> (reader.samples, base, order)


def is_timm_dataset(ds):
    """True for timm's ImageDataset itself (not a subclass: it may load differently)."""
    t = type(ds)
    return t.__name__ == "ImageDataset" and t.__module__ == "timm.data.dataset"


def _folder_class(D):
    class TimmFolder(D.ImageFolder):
        """torchvision's ImageFolder over a timm ImageDataset's root, its transform and
        target_transform those of the timm dataset (read, and set, through)."""

        def __init__(self, timm_ds, root):
            object.__setattr__(self, "_timm", timm_ds)
            object.__setattr__(self, "_ready", False)
            super().__init__(root)
            object.__setattr__(self, "_ready", True)

        def _get_t(self):
            return self._timm.transform

        def _set_t(self, v):
            if self._ready:
                self._timm.transform = v

        def _get_tt(self):
            return self._timm.target_transform

        def _set_tt(self, v):
            if self._ready:
                self._timm.target_transform = v

        transform = property(_get_t, _set_t)
        target_transform = property(_get_tt, _set_tt)

    return TimmFolder


_CLS = {}


def resolve(ds):
    """(a torchvision ImageFolder whose files and labels are DS's, DS's order as indices into
    it) for timm's ImageDataset DS, or Refusal naming why stoker cannot read it exactly."""
    reader = getattr(ds, "reader", None)
    rt = type(reader)
    name = "timm ImageDataset(reader=%s)" % rt.__name__
    if rt.__name__ != "ReaderImageFolder" or not rt.__module__.startswith("timm.data.readers"):
        _refuse(name, "stoker reads a folder of images (timm's ReaderImageFolder), not this "
                "reader's source")
    if getattr(ds, "load_bytes", False):
        _refuse("timm ImageDataset(load_bytes=True)", "it hands out the encoded bytes")
    if getattr(ds, "input_img_mode", "RGB") != "RGB":
        _refuse("timm ImageDataset(input_img_mode=%r)" % (ds.input_img_mode,),
                "stoker decodes to RGB")
    if getattr(ds, "additional_features", None) is not None:
        _refuse("timm ImageDataset(additional_features=%r)" % (ds.additional_features,))
    samples = reader.samples
    hit = _CACHE.get(ds)
    if hit is not None and hit[0] is samples:
        return hit[1], list(hit[2])
    _, D = _tv()
    if "cls" not in _CLS:
        _CLS["cls"] = _folder_class(D)
    root = reader.root
    try:
        base = _CLS["cls"](ds, root)
    except (OSError, RuntimeError) as e:    # torchvision finds no class folders / no file
        _refuse("timm ImageDataset over %s" % root, "torchvision's ImageFolder cannot list it "
                "(%s: %s)" % (type(e).__name__, e))
    if dict(reader.class_to_idx) != base.class_to_idx:
        _refuse("timm ImageDataset over %s" % root,
                "its class indices (%d classes, by timm's natural sort or a class map) differ "
                "from the sorted folder names' that stoker labels with" % len(reader.class_to_idx))
    where = {os.path.normpath(os.path.abspath(p)): k for k, (p, _) in enumerate(base.samples)}
    order = []
    for p, target in samples:
        k = where.get(os.path.normpath(os.path.abspath(p)))
        if k is None:
            _refuse("timm ImageDataset over %s" % root,
                    "it lists %s, which torchvision's ImageFolder does not (a nested folder "
                    "or an extension it skips)" % p)
        if base.targets[k] != target:
            _refuse("timm ImageDataset over %s" % root, "%s has label %r there, %r in the "
                    "folder's sorted classes" % (p, target, base.targets[k]))
        order.append(k)
    _CACHE[ds] = (samples, base, tuple(order))
    return base, order
