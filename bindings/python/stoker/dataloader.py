# SPDX-License-Identifier: MIT
"""stoker.DataLoader: torch.utils.data.DataLoader's signature over stoker.Loader.

The dataset is a torchvision ImageFolder (a subclass that loads as it does, a Subset of one, or
a stoker.ImageFolder, which also reads a packed copy) whose transform is one of the ImageNet
recipes, written with torchvision.transforms, .v2 or timm; the loader reads the same files, in
the same sample order and with the same labels, and hands out what torchvision's DataLoader
would (float32 / float16 NCHW from the conversion [+ Normalize], uint8 from PILToTensor; int64
labels). parse_transform reads the flattened Compose step by step: geometry, per-sample
augmentations (_augment_step), conversion and values, then RandomErasing (_erasing_step).
Whatever it cannot reproduce exactly is refused with ValueError naming the step, its position
and what to use instead: nothing is approximated behind the caller's back.
"""

import io
import os
import sys
import warnings
import weakref

import numpy as np

from . import _lib
from .dataset import Dataset
from . import augment as _augment
from . import mix as _mix
from .loader import Loader

SUPPORTED = """stoker.DataLoader supports:
  dataset: torchvision.datasets.ImageFolder (default loader, no target_transform), a subclass
           of it that overrides no loading (__getitem__, loader, find_classes, make_dataset),
           torch.utils.data.Subset of one, or stoker.ImageFolder (an ImageFolder root or a
           packed copy from `stoker pack`)
  transform: a Compose (torchvision.transforms or .v2, nested ones flattened, timm's
           create_transform output) of, in this order:
      geometry, train: RandomResizedCrop(size, scale, ratio, interpolation=BILINEAR | BICUBIC
                       | NEAREST) or timm's RandomResizedCropAndInterpolation (one
                       interpolation, or 'random': BILINEAR or BICUBIC per image)
                       [, RandomHorizontalFlip(p)]
                eval:  Resize(int | (h, w), interpolation=BILINEAR | BICUBIC | NEAREST,
                       max_size=None) [, CenterCrop(size)]
    then per-sample augmentations, in order: TrivialAugmentWide, RandAugment, AutoAugment
           (IMAGENET, CIFAR10, SVHN), AugMix, timm's RandAugment ('rand-m9-mstd0.5-inc1' etc.),
           timm's AutoAugment ('original-mstd0.5', 'originalr', 'v0', 'v0r'; one policy at
           most), ColorJitter, RandomGrayscale, RandomVerticalFlip, GaussianBlur, RandomAffine,
           RandomRotation (expand=False, center=None)
    then conversion: ToTensor() | timm MaybeToTensor() | timm ToTensor()
        |  PILToTensor() | v2.ToImage()  [, ConvertImageDtype(float32 | float16)
                                          | v2.ToDtype(float32 | float16, scale=...)]
    then [Normalize(mean, std)] [, RandomErasing(p, scale, ratio, value) | timm's RandomErasing
           (mode const / rand / pixel, min_count, max_count)] [, v2.ToPureTensor()]
  sampler: None, SequentialSampler, RandomSampler (no replacement, no num_samples),
           torch DistributedSampler, stoker.ExactDistributedSampler: ordered in C; any other
           sampler, and a batch_sampler with a batch_size: drawn in Python once per pass
  in_order: True or False (the order is deterministic either way)
  collate_fn / batch_transform: MixUp, CutMix, RandomChoice of them (stoker's, torchvision
           v2's, timm's Mixup), applied to each batch in place: labels become soft targets
  not supported: other collate_fn, worker_init_fn, multiprocessing_context,
           batch_size=None, a custom ImageFolder loader or is_valid_file; other per-sample
           augmentations (RandomPerspective, ElasticTransform, RandomApply, timm's AugMixAugment,
           timm's '3a' AutoAugment, ...) are refused
           by name and position"""


def _refuse(what, why=None, instead=None):
    """ValueError: WHAT cannot be reproduced exactly [, WHY] [, what to use INSTEAD]."""
    text = "stoker.DataLoader cannot reproduce %s exactly, so it refuses it" % what
    text += (": %s." % why) if why else "."
    if instead:
        text += "\nInstead: %s." % instead
    raise ValueError("%s\n%s" % (text, SUPPORTED))


def _tv():
    try:
        import torchvision.transforms as T
        import torchvision.datasets as D
    except ImportError as e:
        raise ImportError("stoker.DataLoader needs torchvision (%s)" % e) from None
    return T, D


# ---- recognising a step ----------------------------------------------------------------------
# A step is recognised by its class: the class torchvision.transforms, torchvision.transforms.v2
# or timm exports under that name (looked up by module, since v2 and timm need not be importable
# here). A subclass, even of a known class, is another transform (it may override the call).

_PUBLIC = {"v1": "torchvision.transforms", "v2": "torchvision.transforms.v2"}


def _family(step):
    """"v1", "v2" or "timm" when STEP's class is that library's own, else None."""
    cls = type(step)
    mod = getattr(cls, "__module__", "") or ""
    if mod == "torchvision.transforms.v2" or mod.startswith("torchvision.transforms.v2."):
        fam = "v2"
    elif mod.startswith("torchvision.transforms."):
        fam = "v1"
    elif mod.startswith("timm.data."):
        return "timm" if getattr(sys.modules.get(mod), cls.__name__, None) is cls else None
    else:
        return None
    public = sys.modules.get(_PUBLIC[fam])
    return fam if getattr(public, cls.__name__, None) is cls else None


def _kind(step):
    """(family, class name) of a recognised step, else (None, class name)."""
    return _family(step), type(step).__name__


def _full_name(step):
    """The class as users import it: torchvision.transforms.v2.TrivialAugmentWide."""
    fam, name = _kind(step)
    if fam in _PUBLIC:
        return "%s.%s" % (_PUBLIC[fam], name)
    cls = type(step)
    return "%s.%s" % (cls.__module__, cls.__qualname__)


def _is(step, names, families=("v1", "v2")):
    fam, name = _kind(step)
    return fam in families and name in names


def _is_compose(step):
    return _is(step, ("Compose",))


def _compose_label(step):
    fam = _family(step)
    return {"v1": "transforms.Compose", "v2": "transforms.v2.Compose"}.get(fam, "Compose")


def _flatten(transform):
    """The steps of TRANSFORM, nested Compose flattened in order; and the text that names the
    whole list in messages ("transforms.v2.Compose([RandomResizedCrop, ...])")."""
    steps, nested = [], False

    def walk(t, depth):
        nonlocal nested
        if _is_compose(t):
            nested = nested or depth > 0
            for s in t.transforms:
                walk(s, depth + 1)
        else:
            steps.append(t)
    walk(transform, 0)
    names = ", ".join(type(s).__name__ for s in steps)
    if _is_compose(transform):
        whole = "%s([%s])%s" % (_compose_label(transform), names,
                                " (nested Compose flattened)" if nested else "")
    else:
        whole = "the transform %s" % names
    return steps, whole


class _Ctx:
    """Where the parser is: the steps, the list's name, the position."""

    def __init__(self, steps, whole):
        self.steps, self.whole, self.i = steps, whole, 0

    def peek(self):
        return self.steps[self.i] if self.i < len(self.steps) else None

    def at(self, names, families=("v1", "v2")):
        s = self.peek()
        return s is not None and _is(s, names, families)

    def where(self, i=None):
        i = self.i if i is None else i
        return "position %d of %s" % (i, self.whole)

    def refuse(self, what, instead, i=None):
        """ValueError: WHAT (about the step at I) at its position, and what to use INSTEAD."""
        i = self.i if i is None else i
        step = self.steps[i] if i < len(self.steps) else None
        head = "%s at %s" % (_full_name(step), self.where(i)) if step is not None else \
            "the end of %s" % self.whole
        _refuse(head, what, instead)


# ---- geometry --------------------------------------------------------------------------------

def _interp_name(interp):
    """'bilinear', 'bicubic', 'nearest', ... for an InterpolationMode, its string value or a PIL
    constant; a tuple or list (timm's 'random') stays a tuple of names."""
    if isinstance(interp, (tuple, list)):
        return tuple(_interp_name(x) for x in interp)
    value = getattr(interp, "value", interp)
    if isinstance(value, str):
        return value.lower()
    pil = {0: "nearest", 1: "lanczos", 2: "bilinear", 3: "bicubic", 4: "box", 5: "hamming"}
    return pil.get(value, str(interp))


def _loader_knows(kwarg):
    import inspect
    return kwarg in inspect.signature(Loader.__init__).parameters


def _interp_kw(mode, where):
    """Loader keyword arguments for a resampling MODE other than bilinear, or ValueError."""
    if mode in ("bicubic", "nearest", "random") and _loader_knows("interpolation"):
        return {"interpolation": mode}
    _refuse(where, "stoker resizes with BILINEAR only",
            "interpolation=InterpolationMode.BILINEAR, or torch's DataLoader")


def _interp(ctx, interp):
    mode = _interp_name(interp)
    if isinstance(mode, tuple):
        # timm's interpolation='random': random.choice((BILINEAR, BICUBIC)) per image
        if sorted(mode) != ["bicubic", "bilinear"]:
            ctx.refuse("interpolation='random' among %s per image" % (list(mode),),
                       "one interpolation, or timm's ('bilinear', 'bicubic') pair")
        mode = "random"
    if mode == "bilinear":
        return {}
    return _interp_kw(mode, "%s(interpolation=%s) at %s" % (_full_name(ctx.peek()), interp,
                                                             ctx.where()))


def _hw(size, what):
    if isinstance(size, int):
        return size, size
    size = tuple(size)
    if len(size) == 1:
        return int(size[0]), int(size[0])
    if len(size) == 2:
        return int(size[0]), int(size[1])
    _refuse("%s with size %r" % (what, size))


def _geometry(ctx, kw):
    step = ctx.peek()
    if ctx.at(("RandomResizedCrop",)) or ctx.at(("RandomResizedCropAndInterpolation",), ("timm",)):
        kw.update(_interp(ctx, step.interpolation))
        kw.update(train=True, size=_hw(step.size, type(step).__name__),
                  scale=tuple(float(x) for x in step.scale),
                  ratio=tuple(float(x) for x in step.ratio), flip_prob=0.0)
        ctx.i += 1
        if ctx.at(("RandomHorizontalFlip",)):
            kw["flip_prob"] = float(ctx.peek().p)
            ctx.i += 1
        return
    if ctx.at(("Resize",)):
        _resize(ctx, step, kw)
        return
    if step is None:
        _refuse("an empty transform (PIL images of varying size cannot be batched)")
    if _conversion_kind(step) is not None:
        ctx.refuse("the conversion comes before the crop: the crop and resize then run on "
                   "tensors (torch's resampling), not on PIL images as stoker reproduces them",
                   "RandomResizedCrop or Resize + CenterCrop first, then %s" % type(step).__name__)
    ctx.refuse("stoker needs the crop first", "RandomResizedCrop(...) [+ RandomHorizontalFlip] "
               "for training or Resize(int) + CenterCrop(size) for evaluation as the first steps")


def _resize(ctx, rs, kw):
    if getattr(rs, "max_size", None) is not None:
        ctx.refuse("max_size=%r" % (rs.max_size,), "Resize(int) without max_size")
    size = rs.size
    if isinstance(size, (list, tuple)) and len(size) == 1:
        size = size[0]
    interp = _interp(ctx, rs.interpolation)
    resize_i = ctx.i
    ctx.i += 1
    if isinstance(size, (list, tuple)):
        hw = _hw(size, "Resize")
        if not _loader_knows("interpolation"):   # the resize=(h, w) engine ships with it
            ctx.refuse("Resize(%r) resizes to a fixed height and width; stoker resizes the "
                       "shorter side only" % (list(size),),
                       "Resize(int) + CenterCrop(size)", i=resize_i)
        resize = hw
    else:
        resize = int(size)
    kw.update(interp)
    kw.update(train=False, resize=resize, dct_scaling=False)
    if ctx.at(("CenterCrop",)):
        kw["size"] = _hw(ctx.peek().size, "CenterCrop")
        ctx.i += 1
    elif isinstance(resize, tuple):
        kw["size"] = resize                      # Resize((h, w)) alone: the whole image
    else:
        ctx.refuse("Resize without a CenterCrop leaves images of varying size, which cannot be "
                   "batched", "Resize(%d) followed by CenterCrop(size)" % resize, i=resize_i)


# ---- per-sample augmentations ---------------------------------------------------------------

_AUGMENT_NAMES = {
    "TrivialAugmentWide", "RandAugment", "AutoAugment", "AugMix", "ColorJitter",
    "RandomGrayscale", "GaussianBlur", "RandomVerticalFlip", "RandomRotation", "RandomAffine",
    "RandomPerspective", "RandomPosterize", "RandomSolarize", "RandomAdjustSharpness",
    "RandomAutocontrast", "RandomEqualize", "RandomInvert", "RandomChannelPermutation",
    "RandomPhotometricDistort", "ElasticTransform", "RandomApply", "RandomChoice",
    "RandomOrder", "Grayscale", "GaussianNoise", "RandomErasing"}


def _augment_step(step, position, names):
    """The Loader's spec for the per-sample augmentation STEP (at POSITION of the list NAMES),
    or ValueError naming it and what to use instead."""
    at = "%s at position %d of %s" % (_full_name(step), position, names)
    try:
        spec = _augment.spec_for(step, position)
    except _augment.Unsupported as e:
        _refuse(at, str(e), "change it as said, or keep torch's DataLoader for this recipe")
    if spec is not None:
        return spec
    fam, name = _kind(step)
    if fam is not None and (name in _AUGMENT_NAMES or fam == "timm"):
        _refuse(at, "a per-sample augmentation stoker does not run yet",
                "remove it, or keep torch's DataLoader for this recipe")
    _refuse(at, "a transform stoker does not know",
            "the steps listed below, or torch's DataLoader for this pipeline")


def _erasing_step(step, position, names):
    """The Loader's spec for RandomErasing STEP after the conversion and Normalize, or
    ValueError naming it."""
    spec = _augment.spec_for(step, position)
    if spec is not None:
        return spec
    _refuse("%s at position %d of %s" % (_full_name(step), position, names),
            "stoker does not erase yet", "remove it, or keep torch's DataLoader for this recipe")


# ---- conversion and values -------------------------------------------------------------------

def _conversion_kind(step):
    """How STEP turns a PIL image into a tensor: "float" (ToTensor: x / 255), "uint8"
    (PILToTensor, v2.ToImage), "raw" (timm's ToTensor: x as float, unscaled), "numpy" (timm's
    ToNumpy), or None when it is no conversion."""
    if _is(step, ("ToTensor",)) or _is(step, ("MaybeToTensor",), ("timm",)):
        return "float"
    if _is(step, ("PILToTensor",)) or _is(step, ("ToImage",), ("v2",)) or \
            _is(step, ("MaybePILToTensor",), ("timm",)):
        return "uint8"
    if _is(step, ("ToTensor",), ("timm",)):
        return "raw"
    if _is(step, ("ToNumpy",), ("timm",)):
        return "numpy"
    return None


def _is_erasing(step):
    return _is(step, ("RandomErasing",), ("v1", "v2", "timm"))


def _is_dtype_step(step):
    return _is(step, ("ConvertImageDtype",)) or _is(step, ("ToDtype",), ("v2",))


def _dtype_of(ctx, step):
    """The torch dtype a ConvertImageDtype / ToDtype step converts images to."""
    want = step.dtype
    if isinstance(want, dict):   # v2.ToDtype({tv_tensors.Image: dtype, "others": ...})
        img = [v for k, v in want.items() if getattr(k, "__name__", k) in ("Image", "others")]
        if len(set(img)) != 1:
            ctx.refuse("dtype=%r (no single dtype for images)" % (want,),
                       "ToDtype(torch.float32, scale=True)")
        want = img[0]
    return want


def _values(ctx, kw):
    """Conversion, dtype and Normalize (and augmentations on uint8 tensors between them):
    return the steps that map each 8-bit value to the output value, in order."""
    step = ctx.peek()
    kind = _conversion_kind(step) if step is not None else None
    if kind is None:
        return None
    if kind == "numpy":
        ctx.refuse("it yields NumPy arrays for timm's prefetcher collate",
                   "create_transform(..., use_prefetcher=False) (MaybeToTensor)")
    chain = [step]
    ctx.i += 1
    floats = kind != "uint8"
    import torch
    while ctx.peek() is not None:
        s = ctx.peek()
        if _is_dtype_step(s):
            want = _dtype_of(ctx, s)
            if want not in (torch.float32, torch.float16, torch.uint8):
                ctx.refuse("dtype %s" % (want,), "torch.float32 or torch.float16")
            floats = floats or want != torch.uint8
            chain.append(s)
        elif _is(s, ("Normalize",)):
            if not floats:
                ctx.refuse("Normalize on uint8 images (torchvision refuses it too)",
                           "ConvertImageDtype(torch.float32) / v2.ToDtype(torch.float32, "
                           "scale=True) before Normalize")
            chain.append(s)
        elif _is(s, ("ToPureTensor",), ("v2",)):
            pass              # stoker's batches are plain tensors already
        elif not floats and _conversion_kind(s) is None and not _is_erasing(s):
            kw.setdefault("augment", []).append(_augment_step(s, ctx.i, ctx.whole))
        else:
            break
        ctx.i += 1
    return chain


def _value_table(ctx, chain):
    """Run CHAIN (a conversion, then dtype and Normalize steps) on an image holding every 8-bit
    value in each channel: the loader then looks the values up, so its output equals
    torchvision's bit for bit. Returns (dtype name, 3x256 float32 table or None)."""
    import torch
    from PIL import Image
    ramp = np.repeat(np.arange(256, dtype=np.uint8).reshape(1, 256, 1), 3, axis=2)
    x = Image.fromarray(ramp, "RGB")
    try:
        for s in chain:
            x = s(x)
    except Exception as e:   # noqa: BLE001 — torchvision's own complaint, passed on
        ctx.refuse("torchvision fails on it (%s: %s)" % (type(e).__name__, e),
                   "Normalize(mean, std) with 1 or 3 channels", i=ctx.steps.index(s))
    if not isinstance(x, torch.Tensor) or tuple(x.shape) != (3, 1, 256):
        ctx.refuse("the conversion gives %r, not a 3-channel image tensor" % (type(x),),
                   "ToTensor() or PILToTensor()", i=ctx.steps.index(chain[0]))
    x = x.as_subclass(torch.Tensor) if type(x) is not torch.Tensor else x
    names = {torch.uint8: "uint8", torch.float32: "float32", torch.float16: "float16"}
    if x.dtype not in names:
        ctx.refuse("output dtype %s" % (x.dtype,), "float32, float16 or uint8",
                   i=ctx.steps.index(chain[-1]))
    if x.dtype == torch.uint8:
        if not torch.equal(x.reshape(3, 256), torch.arange(256, dtype=torch.uint8).repeat(3, 1)):
            ctx.refuse("it changes 8-bit values", "PILToTensor()", i=ctx.steps.index(chain[-1]))
        return "uint8", None
    table = x.reshape(3, 256).float().contiguous().numpy().astype(np.float32)
    if not np.isfinite(table).all():
        ctx.refuse("it gives non-finite values (a zero std?)", "Normalize with std > 0",
                   i=ctx.steps.index(chain[-1]))
    return names[x.dtype], table


def parse_transform(transform):
    """The library's settings for a torchvision (v1 or v2) or timm transform, or ValueError
    naming the step that is not supported, its position and what to use instead. Returns a dict
    of stoker.Loader keyword arguments (with "train")."""
    _tv()
    if transform is None:
        _refuse("a dataset without a transform (PIL images of varying size cannot be batched)")
    steps, whole = _flatten(transform)
    ctx = _Ctx(steps, whole)
    kw = {}
    _geometry(ctx, kw)                          # crop / resize [+ flip]
    while ctx.peek() is not None and _conversion_kind(ctx.peek()) is None and not _is_erasing(
            ctx.peek()):
        kw.setdefault("augment", []).append(_augment_step(ctx.peek(), ctx.i, whole))
        ctx.i += 1
    chain = _values(ctx, kw)                    # ToTensor / PILToTensor ... [+ Normalize]
    if chain is None:
        ctx.refuse("stoker needs a conversion to a tensor after the crop%s" % (
            " and augmentations" if kw.get("augment") else ""),
            "ToTensor() [+ Normalize], PILToTensor() [+ ConvertImageDtype], v2.ToImage() "
            "[+ v2.ToDtype(torch.float32, scale=True)], or timm's MaybeToTensor()")
    while ctx.peek() is not None:              # after the values: RandomErasing, ToPureTensor
        s = ctx.peek()
        if _is_erasing(s):
            kw.setdefault("augment", []).append(_erasing_step(s, ctx.i, whole))
        elif not _is(s, ("ToPureTensor",), ("v2",)):
            if _conversion_kind(s) is not None or _is_dtype_step(s) or _is(s, ("Normalize",)):
                ctx.refuse("a second conversion or a Normalize after RandomErasing",
                           "one conversion, then Normalize, then RandomErasing")
            if _is(s, _AUGMENT_NAMES) or _family(s) == "timm":
                ctx.refuse("an augmentation on float images after the conversion",
                           "put it before ToTensor / ConvertImageDtype (on PIL or uint8)")
            _augment_step(s, ctx.i, whole)    # names it (unknown transform)
        ctx.i += 1
    kw["dtype"], table = _value_table(ctx, chain)
    if table is not None:
        kw["value_table"] = table
    return kw


class ImageFolder:
    """An image dataset stoker reads: an ImageFolder root or a packed copy of one
    (``stoker pack ROOT DST``), with torchvision ImageFolder's ``root``, ``classes``,
    ``class_to_idx``, ``transform``, ``target_transform`` and ``len``. ``ds[i]`` decodes record
    i with PIL and applies the transforms, so the same object also feeds torch's DataLoader —
    with worker processes too: it pickles without its library handle (spawn, forkserver) and
    each process, a fork() child included, opens the dataset again on first use.
    Pass it to stoker.DataLoader to read the packed copy. ROOT may be ``"s3://bucket/prefix"``
    (since 0.5): fetched into the cache directory CACHE (limit CACHE_BYTES; docs/S3.md), which
    stoker.DataLoader uses too."""

    def __init__(self, root, transform=None, target_transform=None, *, cache=None,
                 cache_bytes=None):
        self.root = _lib.path_arg(root)
        self.transform = transform
        self.target_transform = target_transform
        self.cache, self.cache_bytes = cache, cache_bytes
        self._handle, self._pid = self._open(), os.getpid()
        self.classes = self._handle.classes
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self._len = len(self._handle)

    @property
    def _ds(self):
        """This process's handle: the one opened here, else a new one (after fork or unpickling)."""
        if self._handle is None or self._pid != os.getpid():
            self._handle, self._pid = self._open(), os.getpid()
        return self._handle

    def _open(self):
        return Dataset(self.root, cache=getattr(self, "cache", None),
                      cache_bytes=getattr(self, "cache_bytes", None))

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_handle"], state["_pid"] = None, None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __len__(self):
        return self._len

    def __getitem__(self, i):
        from PIL import Image
        data, label = self._ds.read(i)
        img = Image.open(io.BytesIO(data)).convert("RGB")
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            label = self.target_transform(label)
        return img, label

    def __repr__(self):
        return "stoker.ImageFolder(%r, %d records, %d classes)" % (
            self.root, len(self), len(self.classes))


def _exact_sampler_class():
    from torch.utils.data.distributed import DistributedSampler

    class ExactDistributedSampler(DistributedSampler):
        """DistributedSampler without padding or dropping: rank r gets the epoch's positions
        r, r + W, r + 2W, ... below N, so the ranks' parts (sizes differing by at most one)
        hold every sample exactly once — for validation that counts each sample once.

        Ranks may then run different numbers of batches: never use it where every step runs
        a collective (DDP training), only in eval loops that gather once at the end. Works
        with torch's DataLoader too; stoker.DataLoader maps it to the library's EXACT mode."""

        def __init__(self, dataset, num_replicas=None, rank=None, shuffle=False, seed=0):
            super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=shuffle,
                             seed=seed, drop_last=False)
            n = len(self.dataset)
            self.num_samples = len(range(self.rank, n, self.num_replicas))
            self.total_size = n

        def __iter__(self):
            import torch
            n = len(self.dataset)
            if self.shuffle:
                g = torch.Generator()
                g.manual_seed(self.seed + self.epoch)
                order = torch.randperm(n, generator=g).tolist()
            else:
                order = list(range(n))
            return iter(order[self.rank:n:self.num_replicas])

        def __len__(self):
            return self.num_samples

    return ExactDistributedSampler


_EXACT = {}


def __getattr__(name):   # stoker.ExactDistributedSampler / DataLoader need torch: built on first use
    if name == "ExactDistributedSampler":
        if "cls" not in _EXACT:
            _EXACT["cls"] = _exact_sampler_class()
        return _EXACT["cls"]
    if name == "DataLoader":     # a torch.utils.data.DataLoader subclass
        if "dl" not in _EXACT:
            _EXACT["dl"] = _dataloader_class()
        return _EXACT["dl"]
    raise AttributeError(name)


# DatasetFolder / ImageFolder methods that decide which files, which labels and which pixels a
# sample has: a subclass that overrides one is no longer what stoker reads.
_LOADING = ("__getitem__", "__getitems__", "__len__", "find_classes", "make_dataset", "loader")


def _resolve_dataset(dataset):
    """(the ImageFolder stoker reads, the Subset's dataset indices or None) for DATASET, or
    ValueError naming what stoker cannot read exactly."""
    import torch.utils.data as tud
    _, D = _tv()
    indices = None
    while type(dataset) is tud.Subset:          # a Subset of a Subset composes the lists
        idx = [int(i) for i in dataset.indices]
        indices = idx if indices is None else [idx[i] for i in indices]
        dataset = dataset.dataset
        if not idx:
            _refuse("an empty Subset (no sample to batch)")
    if isinstance(dataset, ImageFolder):
        if type(dataset) is not ImageFolder:
            _refuse("a subclass of stoker.ImageFolder (%s)" % type(dataset).__qualname__)
        return dataset, _subset_indices(indices, len(dataset))
    if not isinstance(dataset, D.ImageFolder):
        _refuse("dataset %s (an ImageFolder, a Subset of one or stoker.ImageFolder)"
                % type(dataset).__name__)
    cls = type(dataset)
    if cls is not D.ImageFolder:
        for klass in cls.__mro__:
            if klass is D.ImageFolder:
                break
            over = [m for m in _LOADING if m in vars(klass)]
            if over:
                _refuse("%s.%s" % (klass.__module__, klass.__qualname__),
                        "a subclass of ImageFolder that overrides %s, while stoker reads the "
                        "files, labels and pixels as ImageFolder does" % ", ".join(over),
                        "a subclass that overrides none of %s, or torch's DataLoader"
                        % ", ".join(_LOADING))
    if dataset.loader is not D.folder.default_loader:
        name = getattr(dataset.loader, "__qualname__", None) or repr(dataset.loader)
        mod = getattr(dataset.loader, "__module__", "") or ""
        if mod.startswith("torchvision.io") or name in ("decode_image", "read_image"):
            _refuse("ImageFolder(loader=%s.%s)" % (mod, name),
                    "the transforms then run on uint8 tensors, resized by torch's interpolation "
                    "rather than PIL's (and a grayscale JPEG stays one channel)",
                    "the default loader (PIL), whose pixels stoker reproduces")
        _refuse("ImageFolder(loader=%r) (instead: the default loader)" % (dataset.loader,))
    return dataset, _subset_indices(indices, len(dataset))


def _subset_indices(indices, n):
    """A Subset's indices into a dataset of N samples, negative ones counted from the end as
    dataset[-1] does; ValueError for one outside it."""
    if indices is None:
        return None
    if not all(-n <= i < n for i in indices):
        _refuse("a Subset with an index outside its dataset's %d samples" % n)
    return [i + n if i < 0 else i for i in indices]


def _sampler_args(sampler, shuffle, generator, dataset):
    """(shuffle, seed, rank, world_size, dist_mode) for a SAMPLER whose order the library
    computes itself (None, SequentialSampler, RandomSampler without replacement or num_samples,
    DistributedSampler, stoker.ExactDistributedSampler), or None for any other sampler: its
    indices are then drawn in Python once per pass (_draw_mode)."""
    import torch
    from torch.utils.data import RandomSampler, SequentialSampler
    from torch.utils.data.distributed import DistributedSampler
    if generator is not None and not isinstance(generator, torch.Generator):
        _refuse("generator=%r (a torch.Generator)" % (generator,))
    if sampler is None:
        # no sampler: under an initialised process group rank and world come from
        # torch.distributed (stoker.Loader's default), as DistributedSampler's would; the ranks
        # must then share the seed: a generator's (seeded alike on every rank), else
        # DistributedSampler's default, 0 (each rank's global RNG may differ)
        from .loader import resolve_distributed
        dist = sys.modules.get("torch.distributed")
        if dist is not None and dist.is_available() and dist.is_initialized():
            rank, world = resolve_distributed(None, None)
        else:
            rank, world = 0, 1
        if shuffle and generator is not None:
            seed = generator.initial_seed()
        elif shuffle and world == 1:
            seed = int(torch.empty((), dtype=torch.int64).random_().item())
        else:
            seed = 0
        return bool(shuffle), seed, rank, world, "pad"
    if shuffle:
        raise ValueError("DataLoader option shuffle is mutually exclusive with sampler "
                         "(as torch's DataLoader)")
    if type(sampler) is SequentialSampler:
        return False, 0, 0, 1, "pad"
    if type(sampler) is RandomSampler:
        if sampler.replacement or getattr(sampler, "_num_samples", None) is not None:
            return None
        gen = sampler.generator if sampler.generator is not None else generator
        seed = gen.initial_seed() if gen is not None else int(
            torch.empty((), dtype=torch.int64).random_().item())
        return True, seed, 0, 1, "pad"
    exact = __getattr__("ExactDistributedSampler")
    if type(sampler) in (DistributedSampler, exact) and sampler.dataset is dataset:
        mode = "exact" if type(sampler) is exact else ("drop" if sampler.drop_last else "pad")
        return (bool(sampler.shuffle), int(sampler.seed), int(sampler.rank),
                int(sampler.num_replicas), mode)
    return None


def _draw_key_base(sampler):
    """STK_P_DRAW_KEY for a sampler drawn in Python: the draws are keyed by position in this
    rank's pass, offset by rank << 40 so that two ranks (RASampler hands copies of one image
    to several ranks at the same position) never draw alike."""
    from .loader import resolve_distributed
    rank = getattr(sampler, "rank", None)
    if not isinstance(rank, int) or rank < 0:
        dist = sys.modules.get("torch.distributed")
        up = dist is not None and dist.is_available() and dist.is_initialized()
        rank = resolve_distributed(None, None)[0] if up else 0
    return int(rank) << 40


def _batch_mix(collate_fn, batch_transform, torch):
    """The batch-level mix of collate_fn / batch_transform (stoker.mix.as_mix), or None.
    collate_fn may be default_collate, or a MixUp / CutMix / RandomChoice object itself;
    a function wrapping one (``lambda b: mix(*default_collate(b))``) cannot be looked into."""
    default = collate_fn is None or collate_fn is getattr(torch.utils.data, "default_collate", None)
    if batch_transform is not None and not default:
        _refuse("collate_fn=%r together with batch_transform=%r" % (collate_fn, batch_transform))
    if default:
        return None if batch_transform is None else _mix.as_mix(batch_transform)
    try:
        return _mix.as_mix(collate_fn)
    except ValueError:
        pass
    _refuse("collate_fn=%r (for MixUp / CutMix pass the object itself as collate_fn= or "
            "batch_transform=: stoker.MixUp, stoker.CutMix, stoker.RandomChoice, torchvision "
            "v2's MixUp / CutMix / RandomChoice or timm's Mixup)" % (collate_fn,))


class _Pass:
    """iter(stoker.DataLoader): one pass, begun lazily at the first next(): frameworks create
    the epoch's iterator before they call sampler.set_epoch(epoch) (Lightning does), so the
    sampler's epoch is read then, not at iter(). The library runs one pass at a time: a pass
    that begins ends the earlier one, so a pass abandoned (limit_train_batches) or exhausted
    but still referenced never blocks the next. Stepping an ended pass again: StopIteration if
    it had delivered all its batches, else RuntimeError (its epoch would be cut short)."""

    __slots__ = ("_dl", "_it", "ended", "__weakref__")

    def __init__(self, dl):
        self._dl = dl
        self._it = None
        self.ended = False                # a later pass began

    def __iter__(self):
        return self

    def __next__(self):
        if self.ended:
            it = self._it
            if it is None or it.batches < len(self._dl):
                raise RuntimeError(
                    "this stoker.DataLoader iterator (%s) was ended by a later iter() of the same "
                    "DataLoader: stoker runs one pass at a time; finish a pass before the next "
                    "one begins" % ("not begun" if it is None else "epoch %d, batch %d of %d"
                                    % (it.epoch, it.batches, len(self._dl))))
            raise StopIteration
        if self._it is None:
            self._it = self._dl._begin_pass(self)
        return next(self._it)

    def __len__(self):
        return len(self._dl)

    def close(self):
        """End this pass now (as leaving the ``for`` does)."""
        if self._it is not None:
            self._it.close()
        else:
            self._it = _Closed

    def __repr__(self):
        return "<stoker.DataLoader iterator: %s>" % (
            "not begun" if self._it is None else repr(self._it)[1:-1])


class _ClosedPass:
    """The inner iterator of a pass closed before it began."""
    epoch, batches = -1, 0

    def __next__(self):
        raise StopIteration


_Closed = _ClosedPass()


# stoker.DataLoader sets its own attributes with object.__setattr__: Lightning records every
# setattr made outside a wrapped __init__ and replays it on the DataLoader it rebuilds (with a
# DistributedSampler), which would hand the new one the old one's stoker.Loader
_own = object.__setattr__


def _dataloader_class():
    try:
        import torch.utils.data as tud
    except ImportError as e:
        raise ImportError("stoker.DataLoader is a torch.utils.data.DataLoader and needs torch "
                          "(%s); stoker.Loader works without it" % e) from None
    import inspect

    torch_params = set(inspect.signature(tud.DataLoader.__init__).parameters)

    class DataLoader(tud.DataLoader):
        """``torch.utils.data.DataLoader`` for an ImageFolder, decoded and augmented by
        libstoker: ``from stoker import DataLoader`` is the one changed line of a training
        script. It is a torch DataLoader (isinstance holds; dataset, sampler, batch_sampler,
        batch_size, drop_last, collate_fn... are torch's attributes), so frameworks that
        inspect or rebuild one (Lightning's sampler injection, Accelerate) can; the batches
        come from a stoker.Loader it owns (``.loader``), whose methods it forwards: stats(),
        report(), state_dict() / load_state_dict(), set_epoch(), set_size(), close(), ...

        Yields (images, labels) as torchvision's DataLoader does for the same dataset: images
        an N×3×H×W float32 tensor (ToTensor [+ Normalize]) or uint8 (PILToTensor), labels
        int64, the same sample order without shuffling. Eval transforms (Resize + CenterCrop)
        give the same values bit for bit; train transforms draw RandomResizedCrop and the flip
        from the same distributions (the crop is decoded at a reduced DCT scale when that
        covers it, so pixels differ from a full decode by the PSNR the tests bound). What it
        cannot reproduce exactly raises ValueError naming it (see stoker.dataloader.SUPPORTED).

        Arguments as DataLoader's, with these meanings:
          num_workers: decode threads. 0 (DataLoader's "load in this process") means the
            library's default count: stoker always decodes in threads of this process, never
            in worker processes, so 0 does not mean one thread.
          shuffle / generator: the order is a keyed permutation of (seed, epoch) computed in
            the library (not torch's randperm): the seed is generator.initial_seed(), else
            drawn from torch's global RNG (torch.manual_seed makes it reproducible). Each
            ``for`` runs the next epoch (new order and augmentation).
          no sampler under an initialised torch.distributed process group (torchrun + DDP):
            this rank's disjoint share, as stoker.Loader (rank and world from
            torch.distributed; every rank the same count, padded as DistributedSampler); the
            ranks share the seed: the generator's (seed it alike on every rank), else 0.
          sampler: SequentialSampler, RandomSampler (no replacement), DistributedSampler,
            stoker.ExactDistributedSampler: the order is computed in the library; with a
            DistributedSampler each ``for`` runs ``sampler.epoch`` (read at the pass's first
            batch: call ``sampler.set_epoch(e)`` before or after iter(), as Lightning does).
            Any other sampler (WeightedRandomSampler, RandomSampler(replacement=True or
            num_samples=), torchvision's RASampler, your own) and any batch_sampler: its
            indices are drawn in Python once per pass, at the pass's first batch, and the
            library reads exactly that order; a sampler with set_epoch() gets it first. The
            per-sample random draws are then keyed by (seed, epoch, rank, position in the
            pass), so a repeated index (RASampler's copies) is augmented differently per
            copy, the same for any num_workers and across a resume (which redraws the pass:
            exact when the sampler's draw depends only on its seed and epoch).
          pin_memory: page-locked batches when CUDA is usable, so .to("cuda",
            non_blocking=True) is asynchronous; otherwise a warning and
            ``loader.pin_memory_reason`` say why.
          prefetch_factor: batches prepared ahead (library ring slots, 2..64; default 4).
          persistent_workers: the library's threads always persist between epochs.
          timeout: seconds to wait for a batch (0 = no limit).
          in_order (torch >= 2.6): True or False, same batches: stoker's order never depends
            on which decode thread finishes first.
          dataset: a torch.utils.data.Subset delivers exactly its indices (each epoch a
            permutation of them with shuffle, their order without), with the labels of the
            dataset below it.
          collate_fn / batch_transform: None / default_collate, or a batch mix (stoker.MixUp,
            stoker.CutMix, stoker.RandomChoice, torchvision v2's MixUp / CutMix / RandomChoice,
            timm's Mixup): each batch is mixed in place and yields (images, soft targets N x
            classes float32), as ``mix(*default_collate(batch))`` would.
        Passes: each iter() is one pass, begun at its first next(); a pass that begins ends
        an earlier one (abandoned, or exhausted but still referenced) instead of failing;
        stepping that earlier iterator again raises RuntimeError if it had batches left
        (StopIteration if not). set_epoch(e) twice leaves the pass of e going.
        Batches may be kept as long as wanted (list(loader), prefetching wrappers): see
        stoker.Loader on batch lifetime.
        """

        def __init__(self, dataset, batch_size=1, shuffle=False, sampler=None,
                     batch_sampler=None, num_workers=0, collate_fn=None, pin_memory=False,
                     drop_last=False, timeout=0, worker_init_fn=None,
                     multiprocessing_context=None, generator=None, *, prefetch_factor=None,
                     persistent_workers=False, pin_memory_device="", in_order=True,
                     max_size=None, batch_transform=None):
            import torch
            _tv()
            _own(self, '_loader', None)
            if batch_size is None and batch_sampler is None:
                _refuse("batch_size=None (unbatched samples)")
            mix = _batch_mix(collate_fn, batch_transform, torch)
            if worker_init_fn is not None:
                _refuse("worker_init_fn=%r (stoker has no worker processes)" % (worker_init_fn,))
            if multiprocessing_context is not None:
                _refuse("multiprocessing_context=%r (stoker has no worker processes)"
                        % (multiprocessing_context,))
            if pin_memory_device not in ("", "cuda") and not str(pin_memory_device).startswith(
                    "cuda:"):
                _refuse("pin_memory_device=%r" % (pin_memory_device,))
            if num_workers < 0:
                raise ValueError("num_workers option should be non-negative")
            if timeout < 0:
                raise ValueError("timeout option should be non-negative")
            if in_order not in (True, False):
                raise ValueError("in_order must be True or False, not %r" % (in_order,))
            base, indices = _resolve_dataset(dataset)
            if base.target_transform is not None:
                _refuse("target_transform=%r" % (base.target_transform,))
            kw = parse_transform(base.transform)

            # torch's own constructor: its checks (shuffle with sampler, batch_sampler with
            # batch_size...) and its attributes; worker settings are kept as given below
            targs = dict(dataset=dataset, batch_size=batch_size, shuffle=shuffle,
                         sampler=sampler, batch_sampler=batch_sampler, num_workers=0,
                         collate_fn=collate_fn, pin_memory=pin_memory, drop_last=drop_last,
                         timeout=timeout, generator=generator, in_order=in_order)
            if pin_memory_device:
                targs["pin_memory_device"] = pin_memory_device
            super().__init__(**{k: v for k, v in targs.items() if k in torch_params})
            for name, value in (("num_workers", num_workers),
                                ("prefetch_factor", prefetch_factor),
                                ("persistent_workers", persistent_workers)):
                _own(self, name, value)
            _own(self, 'worker_init_fn', None)
            if "in_order" not in torch_params:
                _own(self, 'in_order', in_order)

            # which sampler gives the order: the library's (known kinds) or drawn in Python
            bs, last = batch_size, drop_last
            order_sampler = sampler
            _own(self, "_batches_from", None)
            if batch_sampler is not None:
                if type(batch_sampler) is tud.BatchSampler:
                    order_sampler = batch_sampler.sampler
                    bs, last = batch_sampler.batch_size, batch_sampler.drop_last
                else:
                    bs = getattr(batch_sampler, "batch_size", None)
                    if not isinstance(bs, int) or bs < 1:
                        _refuse("batch_sampler=%s without a batch_size attribute (stoker "
                                "delivers batches of one size, the last one shorter)"
                                % type(batch_sampler).__name__)
                    _own(self, '_batches_from', batch_sampler)
                    order_sampler, last = batch_sampler, False
            known = (None if self._batches_from is not None else
                     _sampler_args(order_sampler, shuffle, generator, dataset))
            _own(self, '_subset', indices)
            _own(self, '_draw', None)
            options = {}
            if known is not None:
                shuffle_, seed, rank, world, mode = known
                lib_indices = indices
            else:
                _own(self, '_draw', order_sampler)
                try:
                    n = len(order_sampler)
                except TypeError:
                    _refuse("sampler=%s without len() (stoker needs the pass's length up front)"
                            % type(order_sampler).__name__)
                if self._batches_from is not None:
                    n = n * bs            # batches: at most this many samples
                if n < 1:
                    _refuse("a sampler of length 0 (no sample to batch)")
                count = len(indices) if indices is not None else len(base)
                lib_indices = [(indices[i % count] if indices is not None else i % count)
                               for i in range(n)]   # a placeholder: each pass draws its own
                shuffle_, rank, world, mode = False, 0, 1, "pad"
                gen = generator if generator is not None else getattr(order_sampler,
                                                                      "generator", None)
                seed = gen.initial_seed() if isinstance(gen, torch.Generator) else int(
                    torch.empty((), dtype=torch.int64).random_().item())
                options[_lib.P_DRAW_KEY] = _draw_key_base(order_sampler)
            _own(self, '_epoch_sampler', order_sampler if hasattr(order_sampler, "set_epoch") else None)
            train = kw.pop("train")
            _own(self, '_tf_size', (kw["size"], kw.get("resize")))
            L = Loader(base.root, bs, train=train, workers=num_workers or None,
                       shuffle=shuffle_, seed=seed, drop_last=last, rank=rank,
                       world_size=world, dist_mode=mode, strict=True,
                       timeout=timeout or None, prefetch=prefetch_factor,
                       pin_memory=pin_memory, max_size=max_size, target="label",
                       indices=lib_indices, mix=mix, options=options,
                       cache=getattr(base, "cache", None),
                       cache_bytes=getattr(base, "cache_bytes", None), **kw)
            ds = L.dataset
            if len(ds) != len(base) or list(ds.classes) != list(base.classes):
                n_lib, n_tv = len(ds), len(base)
                L.close()
                _refuse("this dataset: libstoker lists %d samples in %d classes at %s, the "
                        "dataset object %d in %d classes (a custom is_valid_file or "
                        "extensions?)" % (n_lib, len(ds.classes), base.root, n_tv,
                                          len(base.classes)))
            if self._draw is not None:
                L._dataset_id()          # the state's identity: the dataset and pass length
            _own(self, '_loader', L)
            _own(self, '_base', base)
            _own(self, '_current', None)
            _own(self, '_last_sampler_epoch', None)

        # ---- the owned stoker.Loader ----------------------------------------------------
        @property
        def loader(self):
            """The stoker.Loader that makes the batches."""
            return self._loader

        def __getattr__(self, name):
            # what torch's DataLoader lacks comes from the stoker.Loader (stoker.DataLoader was
            # one until 0.5: every Loader attribute stays reachable)
            if not name.startswith("__"):
                L = self.__dict__.get("_loader")
                if L is not None:
                    return getattr(L, name)
            raise AttributeError("%r object has no attribute %r"
                                 % (type(self).__name__, name))

        @property
        def decode_threads(self):
            """The library's decode threads (num_workers=0 picks the library's default)."""
            return self._loader.num_workers

        def close(self):
            """Stop the library's threads and free its memory (idempotent)."""
            if self.__dict__.get("_loader") is not None:
                self._loader.close()

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.close()
            return False

        def __len__(self):
            return len(self._loader)

        def state_dict(self):
            """stoker.Loader.state_dict() of the owned loader (Lightning saves it in its
            checkpoints and loads it on resume: the epoch goes on at the saved batch)."""
            return self._loader.state_dict()

        def load_state_dict(self, state):
            """stoker.Loader.load_state_dict(): the next pass continues STATE's epoch."""
            self._loader.load_state_dict(state)

        def set_epoch(self, epoch):
            """stoker.Loader.set_epoch(): the next pass runs EPOCH (a pass of EPOCH in
            progress goes on). Asking again for the epoch of the last pass, once that pass
            is over, repeats its order and augmentation: a warning says so (train or shuffle)."""
            L = self._loader
            if ((L.train or L.shuffle) and L._started and not L._in_progress() and L._resume is None
                    and int(epoch) == L._epoch - 1):
                warnings.warn("stoker.DataLoader.set_epoch(%d): the last pass ran epoch %d; the "
                              "next one repeats its order and augmentation" % (epoch, epoch),
                              stacklevel=2)
            L.set_epoch(epoch)

        # ---- passes ---------------------------------------------------------------------
        def _follow_transform(self, apply=True):
            """Progressive resizing as with torchvision: a crop size changed in the dataset's
            transform since the last pass (``dataset.transform.transforms[0].size = 192``)
            reaches the library as Loader.set_size, re-read at every pass."""
            kw = parse_transform(self._base.transform)
            size, resize = kw["size"], kw.get("resize")
            if (size, resize) == self._tf_size:
                return
            if resize != self._tf_size[1]:
                _refuse("Resize(%r) changed to Resize(%r) between epochs (only the crop size "
                        "may change; build a new DataLoader)" % (self._tf_size[1], resize))
            L = self._loader
            if L._started and L._max_size is None:
                raise ValueError("the transform's crop size changed to %r, but this DataLoader "
                                 "was built without max_size: pass stoker.DataLoader(..., "
                                 "max_size=largest (height, width)) to change the size between "
                                 "epochs" % (size,))
            hw = L._hw(size, "size")
            if L._max_size is not None and (hw[0] > L._max_size[0] or hw[1] > L._max_size[1]):
                raise ValueError("the transform's crop size %r is above max_size=%r (the batch "
                                 "ring is sized for max_size; build the DataLoader with a larger "
                                 "one)" % (size, L._max_size))
            if not apply:
                return
            L.set_size(*size)
            _own(self, '_tf_size', (size, resize))

        def _drawn_order(self):
            """This pass's record order from the sampler (or batch sampler) drawn in Python."""
            s = self._draw
            if self._batches_from is not None:
                batches = [list(b) for b in s]
                bs = self._loader.batch_size
                for k, b in enumerate(batches):
                    if len(b) != bs and not (k == len(batches) - 1 and 0 < len(b) < bs):
                        raise ValueError(
                            "batch_sampler %s yielded a batch of %d samples at position %d "
                            "(stoker delivers batches of batch_size=%d, only the last one "
                            "shorter)" % (type(s).__name__, len(b), k, bs))
                order = [i for b in batches for i in b]
            else:
                order = list(s)
            n = len(self._subset) if self._subset is not None else len(self._base)
            out = np.empty(len(order), dtype=np.int64)
            for k, i in enumerate(order):
                i = int(i)
                if not -n <= i < n:
                    raise ValueError("the sampler drew index %d at position %d, outside the "
                                     "dataset's %d samples" % (i, k, n))
                i = i + n if i < 0 else i
                out[k] = self._subset[i] if self._subset is not None else i
            return out

        def _begin_pass(self, p):
            L = self._loader
            L._usable()
            with L._consuming():
                old = self._current() if self._current is not None else None
                if old is not None and old is not p:
                    old.ended = True       # an earlier pass, abandoned or exhausted, ends
                if L._in_progress():
                    L._drain()
                    L._end_iteration()
                _own(self, "_current", weakref.ref(p))
                self._follow_transform()
                s = self._epoch_sampler
                if s is not None:
                    e = int(getattr(s, "epoch", 0))
                    if L._resume is not None and L._resume[0] == e:
                        pass               # load_state_dict: the saved epoch goes on
                    else:
                        if e == self._last_sampler_epoch and L.train:
                            warnings.warn(
                                "stoker.DataLoader: sampler.epoch is still %d: this pass "
                                "repeats the order and the augmentation of the last one (call "
                                "sampler.set_epoch(epoch) every epoch)" % e, stacklevel=3)
                        L.set_epoch(e)
                    _own(self, '_last_sampler_epoch', e)
                if self._draw is not None:
                    L._set_order(self._drawn_order())
                return Loader.__iter__(L)

        def __iter__(self):
            self._loader._usable()
            with self._loader._consuming():    # another thread inside: RuntimeError naming it
                self._follow_transform(apply=False)   # a refused size change fails at iter()
            return _Pass(self)

        def __del__(self):
            try:
                self.close()
            except Exception:   # noqa: BLE001 - never raise from a finaliser
                pass

        def __repr__(self):
            L = self.__dict__.get("_loader")
            return "stoker.DataLoader(%r, batch_size=%s, num_workers=%d, %s)" % (
                self.dataset, self.batch_size, self.num_workers,
                Loader.__repr__(L) if L is not None else "not built")

    DataLoader.__module__ = __name__
    DataLoader.__qualname__ = "DataLoader"
    return DataLoader
